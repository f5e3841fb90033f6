// RUN: mlfuse opt %s --passes lower-tensor-to-loops,fuse,flatten-row-nests --dim N=1 --dim C=4 --dim H=512 --dim W=512 --dim L=200000 | filecheck %s

// Instance norm over 4 rows of 512 x 512: fewer rows than fill the GPU. As strips over
// rows its nests are a block a row (4 blocks), which fusion priced too high to join the
// statistics and the epilogue (three kernels: two split reductions and a pointwise,
// x read three times). Fusion prices such a kernel at the cheaper of that and the row
// kernel flatten-row-nests makes of it, over H*W, whose split plan spreads the 4 rows
// over the GPU, the variance in the mean's pass (the shifted sums: three reduces, then
// the epilogue).
// CHECK-LABEL: func @instance_norm
// CHECK:        fused.kernel {extents = [N, C], flat_nests = {{\[}}[H, W]], {{.*}}schedule = "row"{{.*}}split_stages = 1
// CHECK:          loops.reduce {{.*}} {combiner = "add", extent = "H*W"}
// CHECK:          loops.reduce {{.*}} {combiner = "add", extent = "H*W"}
// CHECK:          loops.reduce {{.*}} {combiner = "add", extent = "H*W"}
// CHECK:          loops.for {extent = "H*W"}
// CHECK-NOT:    fused.kernel
// CHECK:        return
func @instance_norm(%x: f32[N, C, H, W]) -> (f32[N, C, H, W]) {
  %m = tensor.mean %x {axis = [2, 3], keepdims = true} : f32[N, C, 1, 1]
  %d = tensor.sub %x, %m : f32[N, C, H, W]
  %0 = tensor.mul %d, %d : f32[N, C, H, W]
  %v = tensor.mean %0 {axis = [2, 3], keepdims = true} : f32[N, C, 1, 1]
  %1 = tensor.constant {value = 1e-05} : f32[]
  %2 = tensor.add %v, %1 : f32[N, C, 1, 1]
  %3 = tensor.rsqrt %2 : f32[N, C, 1, 1]
  %4 = tensor.mul %d, %3 : f32[N, C, H, W]
  return %4
}

// A sequence's batch norm over [N, L] of [N, C, L] for 2 channels: as above, one row
// kernel whose rows are segments of L values (C between N and L), split over the GPU.
// CHECK-LABEL: func @batch_norm_1d
// CHECK:        fused.kernel {extents = [C], flat_nests = {{\[}}[N, L]], {{.*}}schedule = "row"{{.*}}split_stages = 1
// CHECK-NOT:    fused.kernel
// CHECK:        return
func @batch_norm_1d(%x: f32[N, C, L]) -> (f32[N, C, L], f32[C]) {
  %m = tensor.mean %x {axis = [0, 2], keepdims = true} : f32[1, C, 1]
  %d = tensor.sub %x, %m : f32[N, C, L]
  %0 = tensor.mul %d, %d : f32[N, C, L]
  %v = tensor.mean %0 {axis = [0, 2], keepdims = true} : f32[1, C, 1]
  %1 = tensor.constant {value = 1e-05} : f32[]
  %2 = tensor.add %v, %1 : f32[1, C, 1]
  %3 = tensor.rsqrt %2 : f32[1, C, 1]
  %4 = tensor.mul %d, %3 : f32[N, C, L]
  %mc = tensor.reshape %m {shape = [C]} : f32[C]
  return %4, %mc
}
