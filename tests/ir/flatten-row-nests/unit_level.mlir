// RUN: mlfuse opt %s --passes lower-tensor-to-loops,fuse,flatten-row-nests --dim N=468 --dim K=612 | filecheck %s

// A reduction over axes [1, 2] of [N, 1, K] (a keepdims result turned round): the nest's
// level of one value is at index 0, and the one other level's index is the flat loop's
// own: x[i0, k, 0] and y[i0, 0, k] with no division of k.
// The level of one value was unravelled too (k % K, k // K): the scalar split stage
// indexed x as a 3-D array and spilled 468 B at its 32 registers (ptxas, sm_90a).
// CHECK-LABEL: func @f
// CHECK:        fused.kernel {extents = [N], {{.*}}schedule = "row"
// CHECK:          loops.reduce {{.*}} {combiner = "max", extent = K} : f32 ([[K:%[a-z0-9_]+]]: index) {
// CHECK-NOT:        arith.mod
// CHECK-NOT:        arith.floordiv
// CHECK:            loops.load %x, %i0, [[K]], {{%[a-z0-9_]+}} : f32
// CHECK:            loops.load %y, %i0, {{%[a-z0-9_]+}}, [[K]] : f32
func @f(%x: f32[N, K, 1], %y: f32[N, 1, K]) -> (f32[N]) {
  %0 = tensor.transpose %x {perm = [0, 2, 1]} : f32[N, 1, K]
  %1 = tensor.mul %0, %y : f32[N, 1, K]
  %2 = tensor.exp %1 : f32[N, 1, K]
  %3 = tensor.max %2 {axis = [1, 2]} : f32[N]
  return %3
}
