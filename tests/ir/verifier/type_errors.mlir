// RUN: not mlfuse opt %s 2>&1 | filecheck %s
// A declared result type that is not the inferred one is an error at the op.
// CHECK: type_errors.mlir:[[# @LINE + 2]]:8: error: tensor.relu result type (f32[M]) does not match the inferred (f32[N])
func @f(%x: f32[N]) -> (f32[M]) {
  %y = tensor.relu %x : f32[M]
  return %y
}
