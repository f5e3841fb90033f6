// RUN: mlfuse opt %s --passes lower-tensor-to-loops,fuse,coalesce-axes --dim N=64 --dim C=512 --dim H=14 --dim W=14 --dim D=4 --print-decisions | filecheck %s

// coalesce-axes (mlfuse/transforms/coalesce_axes.py): neighbouring axes of a
// transpose-tiles kernel that every access indexes together, in the same order, become
// one axis over their product; the old indices are its unravel at the top of the body.

// NCHW -> NHWC: H, W neighbours in the space [N, H, W, C], in x[n, c, h, w] and in the
// store: one axis of H*W, tiled with C (x read in runs of H*W, not W).
// CHECK-LABEL: func @nchw_nhwc
// CHECK:        fused.kernel {coalesced = {{\[}}[N], [H, W], [C]], extents = [N, "H*W", C], {{.*}}schedule = "transpose-tiles", {{.*}}tile_axes = [1, 2]} (%i0: index, %[[HW:.*]]: index, %i3: index) {
// CHECK-NEXT:     %[[W:.*]] = loops.dim {sym = "W"} : index
// CHECK-NEXT:     %[[w:.*]] = arith.mod %[[HW]], %[[W]] : index
// CHECK-NEXT:     %[[h:.*]] = arith.floordiv %[[HW]], %[[W]] : index
// CHECK-NEXT:     loops.load %x, %i0, %i3, %[[h]], %[[w]]
// CHECK:          loops.store {{.*}}, %i0, %[[h]], %[[w]], %i3
func @nchw_nhwc(%x: f32[N, C, H, W], %g: f32[C]) -> (f32[N, H, W, C]) {
  %t = tensor.transpose %x {perm = [0, 2, 3, 1]} : f32[N, H, W, C]
  %s = tensor.mul %t, %g : f32[N, H, W, C]
  return %s
}

// Three axes merge whole: [N, C, D, H, W] -> [N, D, H, W, C], D*H*W unravelled
// innermost first (W, then H of what is left, then D).
// CHECK-LABEL: func @ncdhw
// CHECK:        fused.kernel {coalesced = {{\[}}[N], [D, H, W], [C]], extents = [N, "D*H*W", C], {{.*}}tile_axes = [1, 2]}
// CHECK:          arith.mod
// CHECK:          arith.floordiv
// CHECK:          arith.mod
// CHECK:          arith.floordiv
func @ncdhw(%x: f32[N, C, D, H, W]) -> (f32[N, D, H, W, C]) {
  %t = tensor.transpose %x {perm = [0, 2, 3, 4, 1]} : f32[N, D, H, W, C]
  return %t
}

// Keys transposed per head, [B, S, H, D] -> [B, H, D, S]: H, D merge (x read in runs of
// H*D, not D); the product dim prints in its canonical order.
// CHECK-LABEL: func @keys_t
// CHECK:        fused.kernel {coalesced = {{\[}}[B], [H, D], [S]], extents = [B, "D*H", S], {{.*}}tile_axes = [1, 2]}
func @keys_t(%x: f16[B, S, H, D]) -> (f16[B, H, D, S]) {
  %t = tensor.transpose %x {perm = [0, 2, 3, 1]} : f16[B, H, D, S]
  return %t
}

// A bias over W alone indexes W without H: they stay apart (correctness first).
// CHECK-LABEL: func @bias_w
// CHECK:        fused.kernel {extents = [N, H, W, C], {{.*}}tile_axes = [2, 3]}
// CHECK-NOT:    coalesced
func @bias_w(%x: f32[N, C, H, W], %b: f32[W, 1]) -> (f32[N, H, W, C]) {
  %t = tensor.transpose %x {perm = [0, 2, 3, 1]} : f32[N, H, W, C]
  %s = tensor.add %t, %b : f32[N, H, W, C]
  return %s
}

// H and W swapped on the way ([N, C, H, W] -> [N, W, H, C]): neighbours in the space but
// in the other order in x: no merge.
// CHECK-LABEL: func @swapped
// CHECK:        fused.kernel {extents = [N, W, H, C], {{.*}}tile_axes = [1, 3]}
// CHECK-NOT:    coalesced
func @swapped(%x: f32[N, C, H, W]) -> (f32[N, W, H, C]) {
  %t = tensor.transpose %x {perm = [0, 3, 2, 1]} : f32[N, W, H, C]
  return %t
}

// Pointwise kernels are left alone (their lean addressing collapses trailing axes itself).
// CHECK-LABEL: func @plain
// CHECK:        fused.kernel {extents = [N, C, H, W], kernel_name = "plain_0", sources
// CHECK-NOT:    coalesced
func @plain(%x: f32[N, C, H, W], %y: f32[N, C, H, W]) -> (f32[N, C, H, W]) {
  %s = tensor.add %x, %y : f32[N, C, H, W]
  return %s
}

// CHECK: // coalesce-axes: nchw_nhwc_0: H, W move together: one axis of H*W
// CHECK: // coalesce-axes: ncdhw_0: D, H, W move together: one axis of D*H*W
