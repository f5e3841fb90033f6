// RUN: mlfuse opt %s --passes lower-tensor-to-loops,fuse,schedule-contractions --matmul-precision high --print-decisions | filecheck %s
// RUN: mlfuse opt %s --passes lower-tensor-to-loops,fuse,schedule-contractions --matmul-precision medium | filecheck %s --check-prefix=MEDIUM
// RUN: mlfuse opt %s --passes lower-tensor-to-loops,fuse,schedule-contractions | filecheck %s --check-prefix=HIGHEST

// The matmul precision (mlfuse/matmul_precision.py) decides how f32 contractions
// multiply, and the pass records it as the kernel's variant (codegen reads only that):
// highest (the default) exact fp32 on the SIMT cores, high 3xTF32, medium TF32. f16
// and f64 contractions keep their variants at every precision.

// CHECK-LABEL: func @f32_matmul
// CHECK:   fused.kernel {{{.*}}schedule = "contraction", {{.*}}variant = "mma-tf32x3"}
// MEDIUM-LABEL: func @f32_matmul
// MEDIUM:   fused.kernel {{{.*}}schedule = "contraction", {{.*}}variant = "mma-tf32"}
// HIGHEST-LABEL: func @f32_matmul
// HIGHEST:   fused.kernel {{{.*}}schedule = "contraction", {{.*}}variant = "simt"}
func @f32_matmul(%x: f32[M, K], %w: f32[K, N]) -> (f32[M, N]) {
  %m = tensor.matmul %x, %w : f32[M, N]
  return %m
}

// conv2d is an f32 contraction too (implicit GEMM).
// CHECK-LABEL: func @f32_conv
// CHECK:   fused.kernel {{{.*}}schedule = "contraction", {{.*}}variant = "mma-tf32x3"}
// MEDIUM-LABEL: func @f32_conv
// MEDIUM:   fused.kernel {{{.*}}schedule = "contraction", {{.*}}variant = "mma-tf32"}
func @f32_conv(%x: f32[N, 4, 8, 8], %w: f32[8, 4, 3, 3]) -> (f32[N, 8, 8, 8]) {
  %c = tensor.conv2d %x, %w {padding = [1, 1], stride = [1, 1]} : f32[N, 8, 8, 8]
  return %c
}

// CHECK-LABEL: func @f16_matmul
// CHECK:   fused.kernel {{{.*}}variant = "mma-f16"}
// MEDIUM-LABEL: func @f16_matmul
// MEDIUM:   fused.kernel {{{.*}}variant = "mma-f16"}
func @f16_matmul(%x: f16[M, K], %w: f16[K, N]) -> (f16[M, N]) {
  %m = tensor.matmul %x, %w : f16[M, N]
  return %m
}

// CHECK-LABEL: func @f64_matmul
// CHECK:   fused.kernel {{{.*}}variant = "simt"}
// MEDIUM-LABEL: func @f64_matmul
// MEDIUM:   fused.kernel {{{.*}}variant = "simt"}
func @f64_matmul(%x: f64[M, K], %w: f64[K, N]) -> (f64[M, N]) {
  %m = tensor.matmul %x, %w : f64[M, N]
  return %m
}

// The decisions name each contraction's variant, and the precision where it applied.
// CHECK: // schedule-contractions: f32_matmul_0: f32 contraction, variant mma-tf32x3 (matmul precision high)
// CHECK: // schedule-contractions: f32_conv_0: f32 contraction, variant mma-tf32x3 (matmul precision high)
// CHECK: // schedule-contractions: f16_matmul_0: f16 contraction, variant mma-f16
// CHECK-NOT: (matmul precision
// CHECK: // schedule-contractions: f64_matmul_0: f64 contraction, variant simt
