// RUN: mlfuse opt %s --passes lower-tensor-to-loops,fuse --dim N=512 --dim C=256 --dim H=4 --dim W=4 --print-decisions | filecheck %s

// A batch norm's training step split into column statistics (strips over [C, H, W])
// and the channels' statistics from them (a row kernel over [1, C]), the statistics
// also returned as [C]. The mean m joins one reader's kernel and is stored for the
// others; each other reader's kernel that the grown kernel can take joins it too, as a
// move of its own (reshape(m, [C]) was a kernel of its own). And reshape(v, [C]) reads
// v at [0, c, 0, 0] where the row kernel's point is [i0, i1] over [1, C]: an index of
// an axis of extent 1 is 0 at every point, so that read is at the kernel's own point.
// CHECK-LABEL: func @g
// CHECK:        fused.kernel {extents = [C, H, W], {{.*}}schedule = "strips"
// CHECK:        fused.kernel {extents = [1, C], {{.*}}sources = [{{.*}}"v = tensor.mean", "reshape = tensor.reshape", "reshape = tensor.reshape"]
// CHECK:        fused.kernel {extents = [N, C, H, W]
// CHECK-NOT:    fused.kernel
// CHECK:        return
// CHECK: multi-output v -> add, reshape: cost model
// CHECK: multi-output m -> reshape, sub, v_shift: cost model
// CHECK: multi-output m -> v_shift: cost model
func @g(%x: f32[N, C, H, W]) -> (f32[N, C, H, W], f32[C], f32[C]) {
  %m_cols = tensor.mean %x {axis = [0], keepdims = true} : f32[1, C, H, W]
  %m = tensor.mean %m_cols {axis = [2, 3], keepdims = true} : f32[1, C, 1, 1]
  %0 = tensor.sub %x, %m : f32[N, C, H, W]
  %1 = tensor.mul %0, %0 : f32[N, C, H, W]
  %v_colmean = tensor.mean %x {axis = [0], keepdims = true} : f32[1, C, H, W]
  %v_coldev = tensor.sub %x, %v_colmean : f32[N, C, H, W]
  %2 = tensor.mul %v_coldev, %v_coldev : f32[N, C, H, W]
  %v_colvar = tensor.mean %2 {axis = [0], keepdims = true} : f32[1, C, H, W]
  %v_shift = tensor.sub %v_colmean, %m : f32[1, C, H, W]
  %3 = tensor.mul %v_shift, %v_shift : f32[1, C, H, W]
  %v_cols = tensor.add %v_colvar, %3 : f32[1, C, H, W]
  %v = tensor.mean %v_cols {axis = [2, 3], keepdims = true} : f32[1, C, 1, 1]
  %4 = tensor.constant {value = 1e-05} : f32[]
  %5 = tensor.add %v, %4 : f32[1, C, 1, 1]
  %6 = tensor.rsqrt %5 : f32[1, C, 1, 1]
  %7 = tensor.mul %0, %6 : f32[N, C, H, W]
  %8 = tensor.reshape %m {shape = [C]} : f32[C]
  %9 = tensor.reshape %v {shape = [C]} : f32[C]
  return %7, %8, %9
}
