// RUN: mlfuse opt %s --passes lower-tensor-to-loops,fuse --dim B=64 --dim S=2048 --dim D=1024 --print-decisions | filecheck %s

// A masked mean pool, sum(x*m, axis=1) / sum(m, axis=1). Producers are planned last
// first: sum(m) is priced against the division alone (B x D points each walking m's
// 2048 values, dearer than its own small kernel) and kept. The division then joins
// sum(x*m), whose kernel walks the same reduced axis, and the second look prices sum(m)
// again against that grown kernel: one kernel, as an expert fuser makes.

// CHECK-LABEL: func @masked_mean_pool
// CHECK:        fused.kernel {{.*}}sources = ["mul = tensor.mul", "sum = tensor.sum", "sum_1 = tensor.sum", "div = tensor.div"]
// CHECK-NOT:    fused.kernel
// CHECK: fuse: @masked_mean_pool: fused sum_1 -> div: cost model
// CHECK: fuse: @masked_mean_pool: fused sum -> div
// CHECK: fuse: @masked_mean_pool: fused mul -> sum
func @masked_mean_pool(%x: f32[B, S, D], %m: f32[B, S, 1]) -> (f32[B, D]) {
  %0 = tensor.mul %x, %m : f32[B, S, D]
  %sum = tensor.sum %0 {axis = [1]} : f32[B, D]
  %sum_1 = tensor.sum %m {axis = [1]} : f32[B, 1]
  %div = tensor.div %sum, %sum_1 : f32[B, D]
  return %div
}
