// RUN: mlfuse opt %s --passes lower-tensor-to-loops,fuse --print-decisions | filecheck %s

// The index-map ops (slice, concat, pad, gather) read their operands with plain loads
// at computed indices, so they fuse like reshape and transpose: producers are inlined
// at those indices and consumers read the result from registers.

// A slice between an elementwise producer and consumer: one kernel, exp computed
// only at the sliced positions.
// CHECK-LABEL: func @slice_add
// CHECK-NEXT:   %y = loops.alloc
// CHECK-NEXT:   fused.kernel {{.*}}sources = ["e = tensor.exp", "s = tensor.slice", "y = tensor.add"]{{.*}}}
// CHECK:          [[J:%[a-z0-9_]+]] = arith.add %i1, {{%[a-z0-9_]+}} : index
// CHECK-NEXT:     [[X:%[a-z0-9_]+]] = loops.load %x, %i0, [[J]] : f32
// CHECK-NEXT:     %e = arith.exp [[X]] : f32
// CHECK-NOT:    fused.kernel
func @slice_add(%x: f32[N, 8], %b: f32[N, 4]) -> (f32[N, 4]) {
  %e = tensor.exp %x : f32[N, 8]
  %s = tensor.slice %e {starts = [0, 4], steps = [1, 1], sizes = [N, 4]} : f32[N, 4]
  %y = tensor.add %s, %b : f32[N, 4]
  return %y
}

// Concat of two elementwise producers: one kernel computing both at their clamped
// positions and picking one per point.
// CHECK-LABEL: func @concat_two
// CHECK-NEXT:   %c = loops.alloc
// CHECK-NEXT:   fused.kernel {{.*}}sources = ["a = tensor.exp", "b = tensor.neg", "c = tensor.concat"]{{.*}}}
// CHECK:          %a = arith.exp
// CHECK:          %b = arith.neg
// CHECK:          arith.where {{%[a-z0-9_]+}}, %a, %b : f32
// CHECK-NOT:    fused.kernel
func @concat_two(%x: f32[N, 4], %y: f32[N, 2]) -> (f32[N, 6]) {
  %a = tensor.exp %x : f32[N, 4]
  %b = tensor.neg %y : f32[N, 2]
  %c = tensor.concat %a, %b {axis = 1} : f32[N, 6]
  return %c
}

// An embedding lookup plus positions: one kernel; the table row is loaded at the
// index the kernel loads from ids.
// CHECK-LABEL: func @embedding
// CHECK-NEXT:   %y = loops.alloc
// CHECK-NEXT:   fused.kernel {{.*}}sources = ["e = tensor.gather", "y = tensor.add"]{{.*}}}
// CHECK-NEXT:     [[ID:%[a-z0-9_]+]] = loops.load %ids, %i0, %i1 : i32
// CHECK-NEXT:     arith.cast [[ID]] {dtype = "index"} : index
// CHECK:          loops.load %table, {{%[a-z0-9_]+}}, %i2 : f32
// CHECK:          loops.load %pos, %i1, %i2 : f32
// CHECK-NOT:    fused.kernel
func @embedding(%table: f32[V, D], %ids: i32[B, S], %pos: f32[S, D]) -> (f32[B, S, D]) {
  %e = tensor.gather %table, %ids {axis = 0} : f32[B, S, D]
  %y = tensor.add %e, %pos : f32[B, S, D]
  return %y
}

// Pad after a producer and before a row reduction: one kernel (the producer
// is computed at the clamped position, the border is the pad value).
// CHECK-LABEL: func @pad_sum
// CHECK:        fused.kernel {{.*}}sources = ["r = tensor.relu", "p = tensor.pad", "s = tensor.sum"]{{.*}}}
// CHECK-NOT:    fused.kernel
// The decisions, printed after the functions:
// CHECK:      // fuse: @slice_add: fused s -> y: cost model
// CHECK-NEXT: // fuse: @slice_add: fused e -> s: cost model
// CHECK-NEXT: // fuse: @concat_two: fused b -> c: cost model
// CHECK-NEXT: // fuse: @concat_two: fused a -> c: cost model
// CHECK-NEXT: // fuse: @embedding: fused e -> y: cost model
// CHECK-NEXT: // fuse: @pad_sum: fused p -> s: cost model
// CHECK-NEXT: // fuse: @pad_sum: fused r -> p: cost model
func @pad_sum(%x: f32[N, 5]) -> (f32[N]) {
  %r = tensor.relu %x : f32[N, 5]
  %p = tensor.pad %r {low = [0, 2], high = [0, 1], value = 1.0} : f32[N, 8]
  %s = tensor.sum %p {axis = [1]} : f32[N]
  return %s
}
