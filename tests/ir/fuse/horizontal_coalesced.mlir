// RUN: mlfuse opt %s --passes lower-tensor-to-loops,fuse --dim N=8 --dim H=64 --dim W=64 --dim C=640 --print-decisions | filecheck %s

// Group norm over channels-last in f16, its statistics split into column passes (the
// mean's in f16, the variance's in f32 about the columns' own means). Alone, the mean's
// pass is priced cheapest as strips over [N, 32, C/32] and the variance's as
// split-columns over [N, C], the same points with neighbouring axes merged: horizontal
// fusion compares the points before that merge, so they are one space and one kernel
// (compared as scheduled, they stayed two kernels reading x twice).
// CHECK-LABEL: func @group_norm_nhwc
// CHECK:        fused.kernel {{.*}}schedule = "split-columns"
// CHECK:        fused.kernel {{.*}}schedule = "row"
// CHECK:        fused.kernel {extents = [N, H, W, C]
// CHECK-NOT:    fused.kernel
// CHECK:        return
// CHECK: fuse: @group_norm_nhwc: horizontal m_cols+rows -> v_rows_f32+v_colmean{{.*}}: cost model
func @group_norm_nhwc(%x: f16[N, H, W, C], %g: f16[C]) -> (f16[N, H, W, C]) {
  %rows = tensor.reshape %x {shape = [N, "H*W", 32, "C/32"]} : f16[N, H*W, 32, C/32]
  %m_cols = tensor.mean %rows {axis = [1], keepdims = true} : f16[N, 1, 32, C/32]
  %m = tensor.mean %m_cols {axis = [3], keepdims = true} : f16[N, 1, 32, 1]
  %d = tensor.sub %rows, %m : f16[N, H*W, 32, C/32]
  %v_rows_f32 = tensor.cast %rows {dtype = "f32"} : f32[N, H*W, 32, C/32]
  %v_m_f32 = tensor.cast %m {dtype = "f32"} : f32[N, 1, 32, 1]
  %v_colmean = tensor.mean %v_rows_f32 {axis = [1], keepdims = true} : f32[N, 1, 32, C/32]
  %v_coldev = tensor.sub %v_rows_f32, %v_colmean : f32[N, H*W, 32, C/32]
  %0 = tensor.mul %v_coldev, %v_coldev : f32[N, H*W, 32, C/32]
  %v_colvar = tensor.mean %0 {axis = [1], keepdims = true} : f32[N, 1, 32, C/32]
  %v_shift = tensor.sub %v_colmean, %v_m_f32 : f32[N, 1, 32, C/32]
  %1 = tensor.mul %v_shift, %v_shift : f32[N, 1, 32, C/32]
  %v_cols = tensor.add %v_colvar, %1 : f32[N, 1, 32, C/32]
  %v_wide = tensor.mean %v_cols {axis = [3], keepdims = true} : f32[N, 1, 32, 1]
  %v = tensor.cast %v_wide {dtype = "f16"} : f16[N, 1, 32, 1]
  %2 = tensor.constant {value = 1e-05} : f16[]
  %3 = tensor.add %v, %2 : f16[N, 1, 32, 1]
  %4 = tensor.rsqrt %3 : f16[N, 1, 32, 1]
  %5 = tensor.mul %d, %4 : f16[N, H*W, 32, C/32]
  %6 = tensor.reshape %5 {shape = [N, H, W, C]} : f16[N, H, W, C]
  %7 = tensor.mul %6, %g : f16[N, H, W, C]
  return %7
}
