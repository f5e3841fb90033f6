// RUN: mlfuse opt %s --passes lower-tensor-to-loops,fuse --dim N=4096 --dim M=2048 --dim B=8 --dim C=64 --dim H=56 --dim W=56 | filecheck %s
// RUN: mlfuse opt %s --passes lower-tensor-to-loops,fuse --dim N=4096 --dim M=8 --dim B=8 --dim C=3 --dim H=56 --dim W=56 | filecheck %s --check-prefix SHORT

// A loop-free kernel with a load whose fastest-varying index follows another axis than
// the kernel's innermost (a transpose) reads it through shared-memory tiles of the two
// axes ("transpose-tiles", tile_axes = [that axis, the innermost]); every other load
// and the store stay direct (mlfuse/transforms/fusion/tiles.py, dialects/permute.py).

// CHECK-LABEL: func @transpose_add
// CHECK:        fused.kernel {extents = [M, N], {{.*}}schedule = "transpose-tiles", {{.*}}tile_axes = [0, 1]}
// CHECK-NEXT:     loops.load %x, %i1, %i0
// CHECK-NOT:    fused.kernel
// An axis of 8 (M in the second RUN) would leave most of a 32 x 32 tile idle: still
// transpose tiles, whose host launches the thin kernel (the short side whole).
// SHORT-LABEL: func @transpose_add
// SHORT:        fused.kernel {extents = [M, N], {{.*}}schedule = "transpose-tiles", {{.*}}tile_axes = [0, 1]}
func @transpose_add(%x: f32[N, M], %y: f32[M, N]) -> (f32[M, N]) {
  %t = tensor.transpose %x {perm = [1, 0]} : f32[M, N]
  %s = tensor.add %t, %y : f32[M, N]
  return %s
}

// Rank 4, f16: NCHW -> NHWC with a per-channel bias. The channel axis is innermost
// in the output; x's last index (w) follows axis 2. The bias is a broadcast, not a
// permuted read. With 3 channels (second RUN): thin tiles at run time.
// CHECK-LABEL: func @nchw_to_nhwc
// CHECK:        fused.kernel {extents = [B, H, W, C], {{.*}}schedule = "transpose-tiles", {{.*}}tile_axes = [2, 3]}
// SHORT-LABEL: func @nchw_to_nhwc
// SHORT:        fused.kernel {extents = [B, H, W, C], {{.*}}schedule = "transpose-tiles", {{.*}}tile_axes = [2, 3]}
func @nchw_to_nhwc(%x: f16[B, C, H, W], %b: f16[C]) -> (f16[B, H, W, C]) {
  %t = tensor.transpose %x {perm = [0, 2, 3, 1]} : f16[B, H, W, C]
  %s = tensor.add %t, %b : f16[B, H, W, C]
  return %s
}

// [B, S, H, D] -> [B, H, S, D] keeps the innermost axis: every read is coalesced already.
// CHECK-LABEL: func @heads
// CHECK:        fused.kernel {extents = [B, W, H, C], kernel_name = "heads_0", sources = {{.*}}}
func @heads(%x: f32[B, H, W, C]) -> (f32[B, W, H, C]) {
  %t = tensor.transpose %x {perm = [0, 2, 1, 3]} : f32[B, W, H, C]
  %s = tensor.mul %t, %t : f32[B, W, H, C]
  return %s
}
