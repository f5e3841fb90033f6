// RUN: mlfuse opt %s --passes lower-tensor-to-loops,fuse --dim R=8192 --dim C=4096 --print-decisions | filecheck %s

// The mean squared difference of a transpose and a tensor of its shape: the reduction
// reads a[k1, k0] along its outer axis and b[k0, k1] along its inner one. No flat walk
// reads both coalesced, and a thread for the one point would walk all 2^25 values: the
// transpose was a tiles kernel of its own, written and read back. One split-rows kernel
// now walks squares of the two reduced axes, the permuted loads through shared tiles
// (split_tiles = [0, 1]: codegen/split_tiles.py).
// CHECK-LABEL: func @g
// CHECK:        fused.kernel {extents = [], {{.*}}schedule = "split-rows", {{.*}}split_tiles = [0, 1]} () {
// CHECK:          loops.load %a, %k1, %k0
// CHECK:          loops.load %b, %k0, %k1
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
