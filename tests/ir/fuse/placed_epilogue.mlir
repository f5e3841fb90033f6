// RUN: mlfuse opt %s --passes lower-tensor-to-loops,fuse --dim N=32 --dim C=96 --dim H=56 --dim W=56 --dim R=16384 --print-decisions | filecheck %s

// Epilogue values moved by a permute (fusion/placement.py, a chain rooted at a value over
// the kernel's full space). ConvNeXt's channels-first layernorm written through NHWC: the
// layernorm's space is [N, H, W, C], reduced over C; the transpose back is stored in the
// epilogue's loop at [n, k, h, w], along the strip's points (w). No NHWC buffer.

// CHECK-LABEL: func @channel_layernorm
// CHECK-NOT:    loops.alloc : buf<f32[N, H, W, C]>
// CHECK:        fused.kernel {extents = [N, H, W], {{.*}}schedule = "strips", {{.*}}"transpose = tensor.transpose"], {{.*}}strip = "columns"} (%i0: index, %i1: index, %i2: index)
// CHECK:          loops.for {extent = C} (%k: index)
// CHECK:            loops.store %{{.*}}, %transpose, %i0, %k, %i1, %i2
// CHECK-NOT:    fused.kernel
func @channel_layernorm(%x: f32[N, C, H, W], %g: f32[C], %b: f32[C]) -> (f32[N, C, H, W]) {
  %0 = tensor.transpose %x {perm = [0, 2, 3, 1]} : f32[N, H, W, C]
  %layernorm_mean = tensor.mean %0 {axis = [3], keepdims = true} : f32[N, H, W, 1]
  %layernorm_centered = tensor.sub %0, %layernorm_mean : f32[N, H, W, C]
  %1 = tensor.mul %layernorm_centered, %layernorm_centered : f32[N, H, W, C]
  %layernorm_var = tensor.mean %1 {axis = [3], keepdims = true} : f32[N, H, W, 1]
  %layernorm_eps = tensor.constant {value = 1e-05} : f32[]
  %2 = tensor.add %layernorm_var, %layernorm_eps : f32[N, H, W, 1]
  %layernorm_rstd = tensor.rsqrt %2 : f32[N, H, W, 1]
  %layernorm_normed = tensor.mul %layernorm_centered, %layernorm_rstd : f32[N, H, W, C]
  %3 = tensor.mul %layernorm_normed, %g : f32[N, H, W, C]
  %4 = tensor.add %3, %b : f32[N, H, W, C]
  %5 = tensor.transpose %4 {perm = [0, 3, 1, 2]} : f32[N, C, H, W]
  return %5
}

// A layernorm over rows stored transposed: each block's row would be a column of the
// output, its threads writing a value per 32-byte sector (permute.store_scatters), so the
// epilogue is not moved into the row kernel and the transpose keeps its tiles.

// CHECK-LABEL: func @layernorm_transposed
// CHECK:        fused.kernel {extents = [R], {{.*}}schedule = "row"
// CHECK:        fused.kernel {extents = [C, R], {{.*}}schedule = "transpose-tiles"
// CHECK-NOT:    fused.kernel
func @layernorm_transposed(%x: f32[R, C], %g: f32[C], %b: f32[C]) -> (f32[C, R]) {
  %layernorm_mean = tensor.mean %x {axis = [1], keepdims = true} : f32[R, 1]
  %layernorm_centered = tensor.sub %x, %layernorm_mean : f32[R, C]
  %0 = tensor.mul %layernorm_centered, %layernorm_centered : f32[R, C]
  %layernorm_var = tensor.mean %0 {axis = [1], keepdims = true} : f32[R, 1]
  %layernorm_eps = tensor.constant {value = 1e-05} : f32[]
  %1 = tensor.add %layernorm_var, %layernorm_eps : f32[R, 1]
  %layernorm_rstd = tensor.rsqrt %1 : f32[R, 1]
  %layernorm_normed = tensor.mul %layernorm_centered, %layernorm_rstd : f32[R, C]
  %2 = tensor.mul %layernorm_normed, %g : f32[R, C]
  %3 = tensor.add %2, %b : f32[R, C]
  %4 = tensor.transpose %3 {perm = [1, 0]} : f32[C, R]
  return %4
}
