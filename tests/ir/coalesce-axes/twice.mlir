// RUN: mlfuse opt %s --passes lower-tensor-to-loops,fuse,coalesce-axes,coalesce-axes --dim N=64 --dim C=512 --dim H=14 --dim W=14 | filecheck %s

// Running coalesce-axes again changes nothing: the merged index is used by its unravel
// (arithmetic), so it merges with no neighbour, and the other axes were not mergeable.
// CHECK-LABEL: func @nchw_nhwc
// CHECK:        fused.kernel {coalesced = {{\[}}[N], [H, W], [C]], extents = [N, "H*W", C], {{.*}}tile_axes = [1, 2]} (%i0: index, %[[HW:.*]]: index, %i3: index) {
// CHECK-NEXT:     loops.dim {sym = "W"}
// CHECK-NEXT:     arith.mod %[[HW]]
// CHECK-NEXT:     arith.floordiv %[[HW]]
// CHECK-NEXT:     loops.load %x
func @nchw_nhwc(%x: f32[N, C, H, W], %g: f32[C]) -> (f32[N, H, W, C]) {
  %t = tensor.transpose %x {perm = [0, 2, 3, 1]} : f32[N, H, W, C]
  %s = tensor.mul %t, %g : f32[N, H, W, C]
  return %s
}
