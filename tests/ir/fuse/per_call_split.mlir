// RUN: mlfuse opt %s --passes lower-tensor-to-loops,fuse | filecheck %s
// RUN: mlfuse opt %s --passes lower-tensor-to-loops,fuse --dim B=8192 --dim S=16 --dim D=1024 | filecheck %s --check-prefix BOUND

// A masked mean pool compiled without sizes: its reduced extent S is known only per call.
// At the default sizes (1024 each) the model prices one thread per point and split-columns
// within 5% (split-columns' partials priced at the one chunk its host takes there), so the
// kernel takes split-columns, whose host sizes its chunks per call: called on
// [64, 2048, 1024], one thread per point ran 65536 threads (1.33 ms on the H100, 0.34 as
// split-columns). With the sizes given, the model's pick stands: a short S over many
// points is one thread per point.

// CHECK-LABEL: func @masked_mean_pool
// CHECK:        fused.kernel {{.*}}schedule = "split-columns"
// CHECK-NOT:    fused.kernel

// BOUND-LABEL: func @masked_mean_pool
// (a pointwise kernel carries no schedule attribute)
// BOUND:        fused.kernel {extents = [B, D], kernel_name = "masked_mean_pool_0", sources
func @masked_mean_pool(%x: f32[B, S, D], %m: f32[B, S, 1]) -> (f32[B, D]) {
  %0 = tensor.mul %x, %m : f32[B, S, D]
  %sum = tensor.sum %0 {axis = [1]} : f32[B, D]
  %sum_1 = tensor.sum %m {axis = [1]} : f32[B, 1]
  %div = tensor.div %sum, %sum_1 : f32[B, D]
  return %div
}
