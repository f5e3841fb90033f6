// RUN: not mlfuse opt %s 2>&1 | filecheck %s
// CHECK: unknown_attribute.mlir:[[# @LINE + 2]]:8: error: tensor.sum has no attribute 'bogus'
func @f(%x: f32[N]) -> (f32[1]) {
  %y = tensor.sum %x {axis = [0], keepdims = true, bogus = 1} : f32[1]
  return %y
}
