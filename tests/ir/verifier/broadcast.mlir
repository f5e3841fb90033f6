// RUN: not mlfuse opt %s 2>&1 | filecheck %s
// CHECK: broadcast.mlir:[[# @LINE + 2]]:8: error: shapes [N] and [M] do not broadcast (dim N vs M)
func @f(%x: f32[N], %y: f32[M]) -> (f32[N]) {
  %z = tensor.add %x, %y : f32[N]
  return %z
}
