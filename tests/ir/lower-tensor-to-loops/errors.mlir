// RUN: not mlfuse opt %s --passes lower-tensor-to-loops 2>&1 | filecheck %s

// Lowering knows only primitives: a composite is an error at its position that says
// which pass to run first.
// CHECK: errors.mlir:[[# @LINE + 2]]:8: error: tensor.softmax is a composite op: run decompose first
func @f(%x: f32[R, C]) -> (f32[R, C]) {
  %y = tensor.softmax %x : f32[R, C]
  return %y
}
