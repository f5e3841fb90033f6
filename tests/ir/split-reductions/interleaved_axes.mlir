// RUN: mlfuse opt %s --passes split-reductions,cse --print-decisions | filecheck %s
// RUN: mlfuse opt %s --passes split-reductions --dim N=2 --dim B=2 --dim H=2 --dim W=2 --dim C=64 --print-decisions | filecheck %s --check-prefix SMALL

// The rule reads the sizes --dim gives: group norm's H*W = 4 is not 16 times C/32 = 2,
// nor is batch norm's N = 2 16 times H*W; half_and_max's 64 is 16 times 4, and its max's
// B*64 = 128 too.
// SMALL-NOT: split-reductions: @group_norm_nhwc
// SMALL: // split-reductions: @half_and_max: m: tensor.mean over [1, 3]
// SMALL: // split-reductions: @half_and_max: t: tensor.max over [0, 1, 3]
// SMALL-NOT: split-reductions: @kept

// Group norm over channels-last: statistics over axes [1, 3] of the view [N, H*W, 32,
// C/32], the kept group axis between them. The mean becomes the mean over [1] (a column
// reduction, its kept axes contiguous) then over the narrow [3]; the variance, a mean
// of squared deviations from that mean, the columns' variances and the squared shifts
// of their means (parallel-axis identity), so the columns' pass reads x once.
// CHECK-LABEL: func @group_norm_nhwc
// CHECK:        %m_cols = tensor.mean %rows {axis = [1], keepdims = true} : f32[N, 1, 32, C/32]
// CHECK-NEXT:   %m = tensor.mean %m_cols {axis = [3], keepdims = true} : f32[N, 1, 32, 1]
// CHECK-NEXT:   %d = tensor.sub %rows, %m : f32[N, H*W, 32, C/32]
// CHECK-NEXT:   %v_coldev = tensor.sub %rows, %m_cols : f32[N, H*W, 32, C/32]
// CHECK-NEXT:   [[SQ:%[0-9]+]] = tensor.mul %v_coldev, %v_coldev
// CHECK-NEXT:   %v_colvar = tensor.mean [[SQ]] {axis = [1], keepdims = true} : f32[N, 1, 32, C/32]
// CHECK-NEXT:   %v_shift = tensor.sub %m_cols, %m : f32[N, 1, 32, C/32]
// CHECK-NEXT:   [[SHIFT2:%[0-9]+]] = tensor.mul %v_shift, %v_shift
// CHECK-NEXT:   %v_cols = tensor.add %v_colvar, [[SHIFT2]] : f32[N, 1, 32, C/32]
// CHECK-NEXT:   %v = tensor.mean %v_cols {axis = [3], keepdims = true} : f32[N, 1, 32, 1]
// CHECK-NOT:    axis = [1, 3]
func @group_norm_nhwc(%x: f32[N, H, W, C]) -> (f32[N, H*W, 32, C/32]) {
  %rows = tensor.reshape %x {shape = [N, "H*W", 32, "C/32"]} : f32[N, H*W, 32, C/32]
  %m = tensor.mean %rows {axis = [1, 3], keepdims = true} : f32[N, 1, 32, 1]
  %d = tensor.sub %rows, %m : f32[N, H*W, 32, C/32]
  %sq = tensor.mul %d, %d : f32[N, H*W, 32, C/32]
  %v = tensor.mean %sq {axis = [1, 3], keepdims = true} : f32[N, 1, 32, 1]
  %y = tensor.mul %d, %v : f32[N, H*W, 32, C/32]
  return %y
}

// In 16 bits the columns' statistics are f32, the result cast back; squares of
// deviations from anything but the mean (a parameter c) split as means do (about c, an
// infinite x makes the square inf, its column's deviations nan); a max splits by
// associativity, keepdims=false on its second stage only.
// CHECK-LABEL: func @half_and_max
// CHECK:        %m_cols = tensor.mean %x {axis = [1], keepdims = true} : f16[B, 1, 8, 4]
// CHECK-NEXT:   %m = tensor.mean %m_cols {axis = [3], keepdims = true} : f16[B, 1, 8, 1]
// CHECK:        %v_x_f32 = tensor.cast %x {dtype = "f32"} : f32[B, 64, 8, 4]
// CHECK-NEXT:   %v_m_f32 = tensor.cast %m {dtype = "f32"} : f32[B, 1, 8, 1]
// CHECK-NEXT:   %v_colmean = tensor.mean %v_x_f32 {axis = [1], keepdims = true} : f32[B, 1, 8, 4]
// CHECK:        %v_wide = tensor.mean %v_cols {axis = [3], keepdims = true} : f32[B, 1, 8, 1]
// CHECK-NEXT:   %v = tensor.cast %v_wide {dtype = "f16"} : f16[B, 1, 8, 1]
// CHECK:        %e_cols = tensor.mean %sq_c {axis = [1], keepdims = true} : f16[B, 1, 8, 4]
// CHECK-NEXT:   %e = tensor.mean %e_cols {axis = [3], keepdims = true} : f16[B, 1, 8, 1]
// CHECK:        %t_cols = tensor.max %x {axis = [0, 1], keepdims = true} : f16[1, 1, 8, 4]
// CHECK-NEXT:   %t = tensor.max %t_cols {axis = [0, 1, 3]} : f16[8]
func @half_and_max(%x: f16[B, 64, 8, 4], %c: f16[]) -> (f16[B, 1, 8, 1], f16[B, 1, 8, 1], f16[8]) {
  %m = tensor.mean %x {axis = [1, 3], keepdims = true} : f16[B, 1, 8, 1]
  %d = tensor.sub %x, %m : f16[B, 64, 8, 4]
  %sq = tensor.mul %d, %d : f16[B, 64, 8, 4]
  %v = tensor.mean %sq {axis = [1, 3], keepdims = true} : f16[B, 1, 8, 1]
  %dc = tensor.sub %x, %c : f16[B, 64, 8, 4]
  %sq_c = tensor.mul %dc, %dc : f16[B, 64, 8, 4]
  %e = tensor.mean %sq_c {axis = [1, 3], keepdims = true} : f16[B, 1, 8, 1]
  %t = tensor.max %x {axis = [0, 1, 3], keepdims = false} : f16[8]
  return %v, %e, %t
}

// Left as one reduction: batch norm over [0, 2, 3] of NCHW (N is not 16 times H*W), a
// reduction whose outer extent (2) is not 16 times its inner one (4), and axes no kept
// axis separates.
// CHECK-LABEL: func @kept
// CHECK:        tensor.mean %x {axis = [0, 2, 3], keepdims = true}
// CHECK:        tensor.sum %y {axis = [1, 3], keepdims = true}
// CHECK:        tensor.sum %x {axis = [2, 3], keepdims = true}
func @kept(%x: f32[N, C, H, W], %y: f32[N, 2, G, 4]) -> (f32[1, C, 1, 1], f32[N, 1, G, 1], f32[N, C, 1, 1]) {
  %bn = tensor.mean %x {axis = [0, 2, 3], keepdims = true} : f32[1, C, 1, 1]
  %s = tensor.sum %y {axis = [1, 3], keepdims = true} : f32[N, 1, G, 1]
  %in = tensor.sum %x {axis = [2, 3], keepdims = true} : f32[N, C, 1, 1]
  return %bn, %s, %in
}

// CHECK: // split-reductions: @group_norm_nhwc: m: tensor.mean over [1, 3] as over [1] (columns, coalesced) then [3]: the mean of the columns' results
// CHECK: // split-reductions: @group_norm_nhwc: v: tensor.mean over [1, 3] as over [1] (columns, coalesced) then [3]: the columns' variances and means (parallel-axis identity)
// CHECK: // split-reductions: @half_and_max: e: tensor.mean over [1, 3] as over [1] (columns, coalesced) then [3]: the mean of the columns' results
// CHECK: // split-reductions: @half_and_max: t: tensor.max over [0, 1, 3] as over [0, 1] (columns, coalesced) then [3]: the max of the columns' results
