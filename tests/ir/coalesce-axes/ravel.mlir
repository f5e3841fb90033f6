// RUN: mlfuse opt %s --passes lower-tensor-to-loops,fuse,coalesce-axes --dim N=64 --dim C=512 --dim S=4096 --print-decisions | filecheck %s

// A reshape's ravel: x[N, C, S] read as [N, C, 16, S/16] and transposed reads
// x[n, c, i1 * (S/16) + i2]. Fusion sees no single axis that index follows (no transpose
// tiles: a pointwise kernel reading with a stride); the two axes are taken together in
// every access (the ravel in x, neighbours in the store), so they merge into one of
// 16 * S/16 = S, the ravel becomes the merged index, and the kernel reads x through
// transpose tiles.
// CHECK-LABEL: func @reshaped
// CHECK:        fused.kernel {coalesced = {{\[}}[N], [16, "S/16"], [C]], extents = [N, S, C], {{.*}}schedule = "transpose-tiles", {{.*}}tile_axes = [1, 2]} (%i0: index, %[[X:.*]]: index, %i3: index) {
// CHECK-NOT:      arith.mul
// CHECK:          loops.load %x, %i0, %i3, %[[X]] : f32
func @reshaped(%x: f32[N, C, S], %g: f32[C]) -> (f32[N, 16, S/16, C]) {
  %0 = tensor.reshape %x {shape = [N, C, 16, "S/16"]} : f32[N, C, 16, S/16]
  %1 = tensor.transpose %0 {perm = [0, 2, 3, 1]} : f32[N, 16, S/16, C]
  %2 = tensor.mul %1, %g : f32[N, 16, S/16, C]
  return %2
}

// The same with a scale over the 16 axis alone (s[i1]): i1 is used outside the ravel,
// so nothing merges and the kernel stays pointwise.
// CHECK-LABEL: func @reshaped_scaled
// CHECK:        fused.kernel {extents = [N, 16, "S/16", C], kernel_name = "reshaped_scaled_0", sources
// CHECK-NOT:    coalesced
func @reshaped_scaled(%x: f32[N, C, S], %s: f32[16, 1, 1]) -> (f32[N, 16, S/16, C]) {
  %0 = tensor.reshape %x {shape = [N, C, 16, "S/16"]} : f32[N, C, 16, S/16]
  %1 = tensor.transpose %0 {perm = [0, 2, 3, 1]} : f32[N, 16, S/16, C]
  %2 = tensor.mul %1, %s : f32[N, 16, S/16, C]
  return %2
}

// CHECK: // coalesce-axes: reshaped_0: transpose-tiles once merged
// CHECK: // coalesce-axes: reshaped_0: 16, S/16 move together: one axis of S
