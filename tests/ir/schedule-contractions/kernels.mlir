// RUN: mlfuse opt %s --passes schedule-contractions | filecheck %s

// schedule-contractions marks a pointwise fused.kernel whose body is one add-reduction
// (possibly nested) of a product a * b, where a and b each depend on output indices of
// their own, as schedule = "contraction" (tiled codegen). Everything else is unchanged.

// A batched matmul: i0 is read by both sides (a batch index), i1 only by %a (M side),
// i2 only by %b (N side).
// CHECK-LABEL: func @batched_matmul
// CHECK-NEXT:   %c = loops.alloc
// CHECK-NEXT:   fused.kernel {{{.*}}batch_dims = [0], extents = [G, M, N], kernel_name = "bmm", m_dims = [1], n_dims = [2], schedule = "contraction", {{.*}}variant = "simt"}
func @batched_matmul(%a: buf<f32[G, M, K]>, %b: buf<f32[G, K, N]>) -> (buf<f32[G, M, N]>) {
  %c = loops.alloc : buf<f32[G, M, N]>
  fused.kernel {extents = [G, M, N], kernel_name = "bmm", sources = ["c = tensor.matmul"]} (%i0: index, %i1: index, %i2: index) {
    %zero = arith.constant {value = 0.0} : f32
    %acc = loops.reduce %zero {combiner = "add", extent = K} : f32 (%k: index) {
      %x = loops.load %a, %i0, %i1, %k : f32
      %y = loops.load %b, %i0, %k, %i2 : f32
      %p = arith.mul %x, %y : f32
      loops.yield %p
    }
    loops.store %acc, %c, %i0, %i1, %i2
  }
  return %c
}

// A sum of squares over a row: both factors read the same output index, so there is
// no N side: a row reduction, not a contraction.
// CHECK-LABEL: func @sum_of_squares
// CHECK-NOT:    schedule = "contraction"
// CHECK:        return
func @sum_of_squares(%a: buf<f32[M, K]>) -> (buf<f32[M]>) {
  %c = loops.alloc : buf<f32[M]>
  fused.kernel {extents = [M], kernel_name = "ssq", sources = ["c = tensor.sum"]} (%i0: index) {
    %zero = arith.constant {value = 0.0} : f32
    %acc = loops.reduce %zero {combiner = "add", extent = K} : f32 (%k: index) {
      %x = loops.load %a, %i0, %k : f32
      %p = arith.mul %x, %x : f32
      loops.yield %p
    }
    loops.store %acc, %c, %i0
  }
  return %c
}

// A max-plus "product" (max combiner) is not a sum of products.
// CHECK-LABEL: func @max_combiner
// CHECK-NOT:    schedule = "contraction"
// CHECK:        return
func @max_combiner(%a: buf<f32[M, K]>, %b: buf<f32[K, N]>) -> (buf<f32[M, N]>) {
  %c = loops.alloc : buf<f32[M, N]>
  fused.kernel {extents = [M, N], kernel_name = "maxmul", sources = ["c = tensor.max"]} (%i0: index, %i1: index) {
    %init = arith.constant {value = -inf} : f32
    %acc = loops.reduce %init {combiner = "max", extent = K} : f32 (%k: index) {
      %x = loops.load %a, %i0, %k : f32
      %y = loops.load %b, %k, %i1 : f32
      %p = arith.mul %x, %y : f32
      loops.yield %p
    }
    loops.store %acc, %c, %i0, %i1
  }
  return %c
}

// Only pointwise kernels are candidates: a matmul body in a kernel another pass
// scheduled ("row" here) keeps its schedule.
// CHECK-LABEL: func @already_scheduled
// CHECK:        fused.kernel {extents = [M, N], kernel_name = "rowk", schedule = "row", {{.*}}}
func @already_scheduled(%a: buf<f32[M, K]>, %b: buf<f32[K, N]>) -> (buf<f32[M, N]>) {
  %c = loops.alloc : buf<f32[M, N]>
  fused.kernel {extents = [M, N], kernel_name = "rowk", schedule = "row", sources = ["c = tensor.matmul"]} (%i0: index, %i1: index) {
    %zero = arith.constant {value = 0.0} : f32
    %acc = loops.reduce %zero {combiner = "add", extent = K} : f32 (%k: index) {
      %x = loops.load %a, %i0, %k : f32
      %y = loops.load %b, %k, %i1 : f32
      %p = arith.mul %x, %y : f32
      loops.yield %p
    }
    loops.store %acc, %c, %i0, %i1
  }
  return %c
}
