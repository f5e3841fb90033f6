// RUN: mlfuse opt %s --passes lower-tensor-to-loops,fuse --dim A=1024 --dim B=33 --dim S=512 --dim D=16 --print-decisions | filecheck %s

// A masked mean pool over a narrow last axis (D = 16): a warp's 32 lanes span two
// points of B, so the mask m[a, b, s, 0] that sum(m) and sum(x*m) walk is two addresses
// a warp, not 32. Priced a value a lane (as when any lane index was read), the grown
// kernel's walk of m cost 16 times its loads and the second look kept sum(m) apart: two
// kernels where an expert fuser makes one.

// CHECK-LABEL: func @masked_pool
// CHECK:        fused.kernel {{.*}}sources = ["mul = tensor.mul", "sum = tensor.sum", "sum_1 = tensor.sum", "div = tensor.div"]
// CHECK-NOT:    fused.kernel
// CHECK: fuse: @masked_pool: fused sum_1 -> div: cost model
func @masked_pool(%x: f16[A, B, S, D], %m: f16[A, B, S, 1]) -> (f16[A, B, D]) {
  %0 = tensor.mul %x, %m : f16[A, B, S, D]
  %sum = tensor.sum %0 {axis = [2]} : f16[A, B, D]
  %sum_1 = tensor.sum %m {axis = [2]} : f16[A, B, 1]
  %div = tensor.div %sum, %sum_1 : f16[A, B, D]
  return %div
}
