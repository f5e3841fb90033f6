// RUN: mlfuse opt %s --passes lower-tensor-to-loops,fuse --dim R=65536 --dim C=1024 | filecheck %s

// A row sum of a transpose plus a tensor of its shape: for each point r the reduction
// reads a[k0, r] along the points and b[r, k0] along the reduced axis. A block per row
// read a a row apart (the row schedule, priced as if coalesced). One strip-tiles kernel:
// a block per strip of 32 rows walks squares of the rows and the reduced axis, b
// through a shared tile (strip_tiles = [P, K] = [0, 0]: codegen/schedule_strip_tiles.py).
// CHECK-LABEL: func @g
// CHECK:        fused.kernel {extents = [R], {{.*}}schedule = "strip-tiles", {{.*}}strip_tiles = [0, 0]} (%i0: index) {
// CHECK:          loops.load %a, %k0, %i0
// CHECK:          loops.load %b, %i0, %k0
// CHECK-NOT:    fused.kernel
// CHECK:        return
func @g(%a: f32[C, R], %b: f32[R, C]) -> (f32[R]) {
  %0 = tensor.transpose %a {perm = [1, 0]} : f32[R, C]
  %1 = tensor.add %0, %b : f32[R, C]
  %2 = tensor.sum %1 {axis = [1]} : f32[R]
  return %2
}
