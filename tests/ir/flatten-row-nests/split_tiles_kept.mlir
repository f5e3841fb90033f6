// RUN: mlfuse opt %s --passes lower-tensor-to-loops,fuse,flatten-row-nests --dim N=8 --dim R=4096 --dim C=4096 | filecheck %s

// A batched sum of a transpose times its source, over its last two axes: a split-rows
// kernel over [N] walking squares of the two reduced axes through tiles. Flattened, the
// nest would be one loop reading a's values a row apart: the pass leaves it alone.
// CHECK-LABEL: func @g
// CHECK:        fused.kernel {extents = [N], {{.*}}schedule = "split-rows", {{.*}}split_tiles = [0, 1]} (%i0: index) {
// CHECK-NOT:    flat_nests
// CHECK:          loops.reduce {{.*}} {combiner = "add", extent = R}
// CHECK:            loops.reduce {{.*}} {combiner = "add", extent = C}
// CHECK:              loops.load %a, %i0, %k1, %k0
// CHECK-NOT:    fused.kernel
// CHECK:        return
func @g(%a: f32[N, C, R], %b: f32[N, R, C]) -> (f32[N]) {
  %0 = tensor.transpose %a {perm = [0, 2, 1]} : f32[N, R, C]
  %1 = tensor.mul %0, %b : f32[N, R, C]
  %2 = tensor.sum %1 {axis = [1, 2]} : f32[N]
  return %2
}
