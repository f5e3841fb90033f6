// RUN: mlfuse opt %s --passes lower-tensor-to-loops,fuse | filecheck %s

// A reshape read by a pooling and a conv is rematerialized into both readers, so no
// group owns it; weighing the add after the conv as the conv's epilogue must then treat
// the reshape as no link of the chain (it raised KeyError: the planner asked for its
// owner; tests/regressions/epilogue_home_rematerialized_reshape.fuse).
// CHECK-LABEL: func @f
// CHECK:        fused.kernel {{.*}}sources = ["reshape = tensor.reshape", "v0 = tensor.avg_pool2d"]
// CHECK:        fused.kernel {{.*}}sources = ["reshape = tensor.reshape", "v2 = tensor.conv2d", "v3 = tensor.add"]
// CHECK-NOT:    fused.kernel
// CHECK:        return %v3, %v0
func @f(%x0: f64[4], %x1: f64[3, 1, 1, 2]) -> (f64[1, 3, 1, 4], f64[1, 1, 1, 2]) {
  %0 = tensor.reshape %x0 {shape = [1, 1, 1, 4]} : f64[1, 1, 1, 4]
  %v0 = tensor.avg_pool2d %0 {kernel = [1, 1], stride = [1, 2]} : f64[1, 1, 1, 2]
  %v2 = tensor.conv2d %0, %x1 {dilation = [1, 2], stride = [1, 2]} : f64[1, 3, 1, 1]
  %v3 = tensor.add %x0, %v2 : f64[1, 3, 1, 4]
  return %v3, %v0
}
