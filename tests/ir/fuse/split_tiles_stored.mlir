// RUN: mlfuse opt %s --passes lower-tensor-to-loops,fuse --dim R=8192 --dim C=4096 --print-decisions | filecheck %s

// The difference of a transpose and a tensor of its shape, returned beside its mean
// square. The for nest storing d needs no reduction's result, so the split through
// tiles walks it with the reduction, storing d along the squares' inner axis (one kernel,
// d written once). It was a transpose kernel, then a split that stored d as it reduced.
// CHECK-LABEL: func @g
// CHECK:        fused.kernel {extents = [], {{.*}}schedule = "split-rows", {{.*}}split_tiles = [0, 1]} () {
// CHECK:          loops.reduce
// CHECK:          loops.for {extent = R}
// CHECK:            loops.store {{%[a-z0-9_]+}}, %d
// CHECK-NOT:    fused.kernel
// CHECK:        return
// CHECK: fuse: @g: fused transpose -> d: cost model
func @g(%a: f32[C, R], %b: f32[R, C]) -> (f32[R, C], f32[]) {
  %0 = tensor.transpose %a {perm = [1, 0]} : f32[R, C]
  %d = tensor.sub %0, %b : f32[R, C]
  %1 = tensor.mul %d, %d : f32[R, C]
  %2 = tensor.mean %1 {axis = [0, 1]} : f32[]
  return %d, %2
}
