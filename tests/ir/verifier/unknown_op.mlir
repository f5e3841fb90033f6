// RUN: not mlfuse opt %s 2>&1 | filecheck %s
// CHECK: unknown_op.mlir:[[# @LINE + 2]]:8: error: unknown op 'tensor.frobnicate'
func @f(%x: f32[N]) -> (f32[N]) {
  %y = tensor.frobnicate %x : f32[N]
  return %y
}
