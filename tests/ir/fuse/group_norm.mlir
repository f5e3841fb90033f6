// RUN: mlfuse opt %s --passes lower-tensor-to-loops,fuse --dim N=32 --dim C=256 --dim H=64 --dim W=64 | filecheck %s

// Group norm: the rows of a reshaped view [N, 8, C*H*W/8] (a quotient dim, exact) are
// the kernel's points; the normalised rows reshaped back to [N, C, H, W] and scaled per
// channel are stored at the reshaped index in the broadcast-back loop
// (kernel_builder.py), and the inverse reshape the epilogue reads through folds back to
// the kernel's own indices (index_algebra.py): the statistics are the point's own
// values, so one kernel, as an expert fuser makes.

// CHECK-LABEL: func @group_norm
// The variance's reduce became the shifted sums S1, S2 beside the mean's (moments.py:
// one pass over the row for all three), so three reduces precede the epilogue's loop.
// CHECK:        fused.kernel {extents = [N, 8], {{.*}}schedule = "row"
// CHECK:          %[[ROW:[0-9]+]] = arith.mul %i1, %{{[0-9]+}} : index
// CHECK:          loops.reduce {{.*}}extent = "C*H*W/8"
// CHECK:          loops.reduce {{.*}}extent = "C*H*W/8"
// CHECK:          loops.reduce {{.*}}extent = "C*H*W/8"
// CHECK:          loops.for {extent = "C*H*W/8"} (%[[K:k[_0-9]*]]: index) {
// CHECK-NEXT:       %[[FLAT:[0-9]+]] = arith.add %[[ROW]], %[[K]] : index
// CHECK:            %[[W:[0-9]+]] = arith.mod %[[FLAT]], %W
// CHECK:            %[[HC:[0-9]+]] = arith.floordiv %[[FLAT]], %W
// CHECK:            %[[H:[0-9]+]] = arith.mod %[[HC]], %H
// CHECK:            %[[C:[0-9]+]] = arith.floordiv %[[HC]], %H
// CHECK-NOT:        arith.floordiv
// CHECK:            loops.load %g, %[[C]]
// CHECK:            loops.store %{{.*}}, %{{.*}}, %i0, %[[C]], %[[H]], %[[W]]
// CHECK-NOT:    fused.kernel
// CHECK:        return
func @group_norm(%x: f32[N, C, H, W], %g: f32[C]) -> (f32[N, C, H, W]) {
  %rows = tensor.reshape %x {shape = [N, 8, "C*H*W/8"]} : f32[N, 8, C*H*W/8]
  %m = tensor.mean %rows {axis = [2], keepdims = true} : f32[N, 8, 1]
  %d = tensor.sub %rows, %m : f32[N, 8, C*H*W/8]
  %sq = tensor.mul %d, %d : f32[N, 8, C*H*W/8]
  %v = tensor.mean %sq {axis = [2], keepdims = true} : f32[N, 8, 1]
  %eps = tensor.constant {value = 1e-05} : f32[]
  %ve = tensor.add %v, %eps : f32[N, 8, 1]
  %r = tensor.rsqrt %ve : f32[N, 8, 1]
  %n = tensor.mul %d, %r : f32[N, 8, C*H*W/8]
  %y = tensor.reshape %n {shape = [N, C, H, W]} : f32[N, C, H, W]
  %gc = tensor.reshape %g {shape = [1, C, 1, 1]} : f32[1, C, 1, 1]
  %out = tensor.mul %y, %gc : f32[N, C, H, W]
  return %out
}

// A per-sample, per-channel value added after the norm (a diffusion ResNet block's time
// embedding, t[n, c]): read along the rows at (n, (g * C*H*W/8 + k) // (H*W)), one
// element for each run of H*W steps, as the per-channel gamma is. The schedule choice
// does not count it as a stream (a row's other indices are its own), so the rows stay
// rows and the kernel keeps its split plan: one kernel still.
// CHECK-LABEL: func @group_norm_time_embedding
// CHECK:        fused.kernel {extents = [N, 8], {{.*}}schedule = "row", {{.*}}split_stages = 1
// CHECK:          loops.for {extent = "C*H*W/8"}
// CHECK:            loops.load %t, %i0, %[[C:[0-9]+]]
// CHECK:            loops.store %{{.*}}, %{{.*}}, %i0, %[[C]], %{{[0-9]+}}, %{{[0-9]+}}
// CHECK-NOT:    fused.kernel
// CHECK:        return
func @group_norm_time_embedding(%x: f32[N, C, H, W], %t: f32[N, C]) -> (f32[N, C, H, W]) {
  %rows = tensor.reshape %x {shape = [N, 8, "C*H*W/8"]} : f32[N, 8, C*H*W/8]
  %m = tensor.mean %rows {axis = [2], keepdims = true} : f32[N, 8, 1]
  %d = tensor.sub %rows, %m : f32[N, 8, C*H*W/8]
  %sq = tensor.mul %d, %d : f32[N, 8, C*H*W/8]
  %v = tensor.mean %sq {axis = [2], keepdims = true} : f32[N, 8, 1]
  %eps = tensor.constant {value = 1e-05} : f32[]
  %ve = tensor.add %v, %eps : f32[N, 8, 1]
  %r = tensor.rsqrt %ve : f32[N, 8, 1]
  %n = tensor.mul %d, %r : f32[N, 8, C*H*W/8]
  %y = tensor.reshape %n {shape = [N, C, H, W]} : f32[N, C, H, W]
  %tc = tensor.reshape %t {shape = [N, C, 1, 1]} : f32[N, C, 1, 1]
  %out = tensor.add %y, %tc : f32[N, C, H, W]
  return %out
}
