// RUN: mlfuse opt %s --passes lower-tensor-to-loops,fuse --dim R=128 --dim D=16384 | filecheck %s

// A softmax over 128 rows of 16384 f32, planned for these sizes: each row (64 KB) is
// held in a block's registers and shared memory, a block per row. One block an SM
// streams at that SM's rate (its loads are a whole row in flight), so 128 rows on 132
// SMs keep the GPU 97% busy. They were priced as a quarter of it (the four blocks an SM
// that threads and shared memory would allow), and the rows split into three kernels
// (each statistic's partials over the whole GPU, then the division), where an expert
// fuser makes one.
// CHECK-LABEL: func @g
// CHECK:        fused.kernel {{.*}}schedule = "row"
// CHECK-NOT:    fused.kernel
// CHECK:        return
func @g(%x: f32[R, D]) -> (f32[R, D]) {
  %softmax_max = tensor.max %x {axis = [1], keepdims = true} : f32[R, 1]
  %softmax_shifted = tensor.sub %x, %softmax_max : f32[R, D]
  %softmax_exp = tensor.exp %softmax_shifted : f32[R, D]
  %softmax_sum = tensor.sum %softmax_exp {axis = [1], keepdims = true} : f32[R, 1]
  %0 = tensor.div %softmax_exp, %softmax_sum : f32[R, D]
  return %0
}
