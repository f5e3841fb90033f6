// RUN: mlfuse opt %s --passes lower-tensor-to-loops,fuse --dim R=4096 --dim C=4096 | filecheck %s
// RUN: mlfuse opt %s --passes lower-tensor-to-loops,fuse --dim R=4096 --dim C=4096 --print-decisions | filecheck %s --check-prefix ONE

// The fuse pass writes each kernel's schedule, chosen from its extents and how its
// reads lie in memory (mlfuse/transforms/fusion/schedules.py): a reduction to a scalar
// is split across blocks with its elementwise prologue in the same kernel (split-rows);
// a plain reduction over a non-innermost axis of many rows is split across blocks with
// threads on neighbouring columns and a second kernel adding the chunks (split-columns:
// measured faster than a block per strip here, Target.strips_slowdown; strips, which
// also runs a broadcast-back epilogue in the same kernel, in tests/ir/fuse/strips.mlir);
// rows of many values take a block each (row).

// CHECK-LABEL: func @sumsq
// CHECK-NEXT:   %s = loops.alloc : buf<f32[]>
// CHECK-NEXT:   fused.kernel {extents = [], kernel_name = "sumsq_0", schedule = "split-rows", sources = ["sq = tensor.mul", "s = tensor.sum"]{{.*}}}
// CHECK:          arith.mul
// CHECK-NOT:    fused.kernel
// CHECK:        return %s

// CHECK-LABEL: func @colsum
// CHECK:        fused.kernel {extents = [C], kernel_name = "colsum_0", schedule = "split-columns"

// CHECK-LABEL: func @rowsum
// CHECK:        fused.kernel {extents = [R], kernel_name = "rowsum_0", schedule = "row", {{.*}}}

// The prologue's square is fused into the split reduction: one kernel, no %sq buffer.
// ONE-NOT:      %sq = loops.alloc
// ONE:          // fuse: @sumsq: fused sq -> s
func @sumsq(%x: f32[R, C]) -> (f32[]) {
  %sq = tensor.mul %x, %x : f32[R, C]
  %s = tensor.sum %sq {axis = [0, 1]} : f32[]
  return %s
}
func @colsum(%x: f32[R, C]) -> (f32[C]) {
  %s = tensor.sum %x {axis = [0]} : f32[C]
  return %s
}
func @rowsum(%x: f32[R, C]) -> (f32[R]) {
  %s = tensor.sum %x {axis = [1]} : f32[R]
  return %s
}
