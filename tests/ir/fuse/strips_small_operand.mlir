// RUN: mlfuse opt %s --passes lower-tensor-to-loops,fuse --dim B=64 --dim S=4096 --dim D=64 --print-decisions | filecheck %s

// A masked middle softmax, softmax(x * 0.5 + m, axis=1) with m [B, S, 1], whose columns
// of 4096 values fit on chip nowhere: its strips run in column stages, each reading its
// inputs again. The values in flight were counted as each point's own, x's and m's
// alike, 64 MB past the 50 MB L2, so every stage's re-read of x and m went to DRAM, and
// the prologue was kept apart (its output t re-read from L2 instead). m is 512 KB for
// all the points: the values in flight are x's 32 MB and m's 512 KB, and L2 holds them.
// CHECK-LABEL: func @g
// CHECK:        fused.kernel {{.*}}schedule = "strips"{{.*}}sources = ["mul = tensor.mul", "add = tensor.add", "softmax_max = tensor.max"
// CHECK-NOT:    fused.kernel
// CHECK: fuse: @g: fused add -> softmax_max, softmax_shifted: cost model
func @g(%x: f16[B, S, D], %m: f16[B, S, 1]) -> (f16[B, S, D]) {
  %0 = tensor.constant {value = 0.5} : f16[]
  %1 = tensor.mul %x, %0 : f16[B, S, D]
  %2 = tensor.add %1, %m : f16[B, S, D]
  %softmax_max = tensor.max %2 {axis = [1], keepdims = true} : f16[B, 1, D]
  %softmax_shifted = tensor.sub %2, %softmax_max : f16[B, S, D]
  %softmax_exp = tensor.exp %softmax_shifted : f16[B, S, D]
  %softmax_sum = tensor.sum %softmax_exp {axis = [1], keepdims = true} : f16[B, 1, D]
  %3 = tensor.div %softmax_exp, %softmax_sum : f16[B, S, D]
  return %3
}
