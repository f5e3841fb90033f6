// RUN: mlfuse opt %s --passes lower-tensor-to-loops,fuse --dim R=33 --dim D=50000 --print-decisions | filecheck %s

// A logsumexp over 33 rows of 50000 bf16 values, planned for these sizes. Too few rows
// for a block each: its row kernel runs the split plan (each statistic's partials over
// the whole GPU, then the loops after them: three launches). Apart, the max and the sum
// are split-rows kernels, each two launches (its chunks, then their combine: codegen/
// split_host.py), which the cost model counted as one: the max was kept apart.
// CHECK-LABEL: func @g
// CHECK:        fused.kernel {extents = [R], {{.*}}schedule = "row"
// CHECK-NOT:    fused.kernel
// CHECK:        return
// CHECK: fuse: @g: fused m -> {{.*}}: cost model
func @g(%x: bf16[R, D]) -> (bf16[R]) {
  %m = tensor.max %x {axis = [1], keepdims = true} : bf16[R, 1]
  %0 = tensor.sub %x, %m : bf16[R, D]
  %1 = tensor.exp %0 : bf16[R, D]
  %2 = tensor.sum %1 {axis = [1], keepdims = true} : bf16[R, 1]
  %3 = tensor.log %2 : bf16[R, 1]
  %4 = tensor.add %3, %m : bf16[R, 1]
  %5 = tensor.reshape %4 {shape = [R]} : bf16[R]
  return %5
}
