// RUN: mlfuse opt %s --passes lower-tensor-to-loops,fuse --dim B=64 --dim S=1024 --print-decisions | filecheck %s

// A causal mask from iotas before a softmax. Producers are planned last first: the
// compare `le` is priced against the softmax as a reader of two [S, S] index buffers and
// kept; then the iotas join it, and the second look (its own group has grown) prices it
// again, reading nothing from memory: one kernel.

// CHECK-LABEL: func @causal_softmax
// CHECK:        fused.kernel {extents = [B, S], {{.*}}schedule = "row", sources = ["i = tensor.iota", "j = tensor.iota", "le = tensor.le", "where = tensor.where"
// CHECK-NOT:    fused.kernel
// CHECK: fuse: @causal_softmax: fused le -> where: cost model
func @causal_softmax(%s: f32[B, S, S]) -> (f32[B, S, S]) {
  %i = tensor.iota {axis = 0, dtype = "i32", shape = [S, S]} : i32[S, S]
  %j = tensor.iota {axis = 1, dtype = "i32", shape = [S, S]} : i32[S, S]
  %0 = tensor.le %j, %i : bool[S, S]
  %1 = tensor.constant {value = -1e+30} : f32[]
  %2 = tensor.where %0, %s, %1 : f32[B, S, S]
  %softmax_max = tensor.max %2 {axis = [2], keepdims = true} : f32[B, S, 1]
  %softmax_shifted = tensor.sub %2, %softmax_max : f32[B, S, S]
  %softmax_exp = tensor.exp %softmax_shifted : f32[B, S, S]
  %softmax_sum = tensor.sum %softmax_exp {axis = [2], keepdims = true} : f32[B, S, 1]
  %3 = tensor.div %softmax_exp, %softmax_sum : f32[B, S, S]
  return %3
}
