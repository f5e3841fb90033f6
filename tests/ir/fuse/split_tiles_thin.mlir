// RUN: mlfuse opt %s --passes lower-tensor-to-loops,fuse --dim R=8192 --dim C=4 --print-decisions | filecheck %s

// The mean squared difference of a transpose and a tensor of its shape over rows of 4:
// a warp's flat walk of the nest spans 8 neighbouring values of r in each of a's 4 rows,
// whole sectors, so the kernel is a split reduction without tiles (split_tiles.mlir has
// the tiles). It was a kernel for the transpose, then a split reduction: the planner
// priced the two fused as one thread walking all 32768 values.
// CHECK-LABEL: func @g
// CHECK:        fused.kernel {extents = [], {{.*}}schedule = "split-rows", sources = {{\[.*\]}}} () {
// CHECK-NOT:    fused.kernel
// CHECK:        return
// CHECK: fuse: @g: fused transpose -> d: cost model
func @g(%a: f32[C, R], %b: f32[R, C]) -> (f32[]) {
  %0 = tensor.transpose %a {perm = [1, 0]} : f32[R, C]
  %d = tensor.sub %0, %b : f32[R, C]
  %1 = tensor.mul %d, %d : f32[R, C]
  %2 = tensor.mean %1 {axis = [0, 1]} : f32[]
  return %2
}
