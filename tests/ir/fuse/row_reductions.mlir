// RUN: mlfuse opt %s --passes lower-tensor-to-loops,fuse | filecheck %s
// RUN: mlfuse opt %s --passes lower-tensor-to-loops,fuse --dim C=8 | filecheck %s --check-prefix SHORT

// A row reduction fuses with its elementwise prologue and epilogue over the same rows:
// softmax (max, sub, exp, sum, div) and layernorm are one kernel each, one block per
// row ("row" schedule, extents = the rows). Each reduction is one value per row, kept
// in a register; the prologue is recomputed inside each pass over the row rather than
// stored; the epilogue is a loop over the row that stores the only result.

// CHECK-LABEL: func @softmax
// CHECK-NEXT:   %y = loops.alloc : buf<f32[R, C]>
// CHECK-NEXT:   fused.kernel {extents = [R], kernel_name = "softmax_0", schedule = "row", {{.*}}} ([[R:%[a-z0-9_]+]]: index) {
// CHECK-NEXT:     [[NEG:%[a-z0-9_]+]] = arith.constant {value = -inf} : f32
// CHECK-NEXT:     [[MAX:%[a-z0-9_]+]] = loops.reduce [[NEG]] {combiner = "max", extent = C} : f32 ([[K:%[a-z0-9_]+]]: index) {
// CHECK-NEXT:       [[V:%[a-z0-9_]+]] = loops.load %x, [[R]], [[K]] : f32
// CHECK-NEXT:       loops.yield [[V]]
// CHECK-NEXT:     }
// CHECK-NEXT:     [[ZERO:%[a-z0-9_]+]] = arith.constant {value = 0.0} : f32
// CHECK-NEXT:     [[SUM:%[a-z0-9_]+]] = loops.reduce [[ZERO]] {combiner = "add", extent = C} : f32 ([[K:%[a-z0-9_]+]]: index) {
// CHECK-NEXT:       [[V:%[a-z0-9_]+]] = loops.load %x, [[R]], [[K]] : f32
// CHECK-NEXT:       [[S:%[a-z0-9_]+]] = arith.sub [[V]], [[MAX]] : f32
// CHECK-NEXT:       [[E:%[a-z0-9_]+]] = arith.exp [[S]] : f32
// CHECK-NEXT:       loops.yield [[E]]
// CHECK-NEXT:     }
// CHECK-NEXT:     loops.for {extent = C} ([[K:%[a-z0-9_]+]]: index) {
// CHECK-NEXT:       [[V:%[a-z0-9_]+]] = loops.load %x, [[R]], [[K]] : f32
// CHECK-NEXT:       [[S:%[a-z0-9_]+]] = arith.sub [[V]], [[MAX]] : f32
// CHECK-NEXT:       [[E:%[a-z0-9_]+]] = arith.exp [[S]] : f32
// CHECK-NEXT:       [[Y:%[a-z0-9_]+]] = arith.div [[E]], [[SUM]] : f32
// CHECK-NEXT:       loops.store [[Y]], %y, [[R]], [[K]]
// CHECK-NEXT:     }
// CHECK-NEXT:   }
// CHECK-NEXT:   return %y

// Rows shorter than the target's row_min_extent (32) stay one kernel: the same
// single kernel, a row kernel whose short-row plan (warp_rows: a group of threads per
// short row, codegen/short_rows.py) runs them, their length being a symbol.
// SHORT-LABEL: func @softmax
// SHORT-NEXT:   %y = loops.alloc : buf<f32[R, C]>
// SHORT-NEXT:   fused.kernel {extents = [R], kernel_name = "softmax_0", schedule = "row", sources = [{{.*}}warp_rows = 1}
// SHORT-NOT:    fused.kernel
// SHORT:        return %y
func @softmax(%x: f32[R, C]) -> (f32[R, C]) {
  %m = tensor.max %x {axis = [1], keepdims = true} : f32[R, 1]
  %s = tensor.sub %x, %m : f32[R, C]
  %e = tensor.exp %s : f32[R, C]
  %z = tensor.sum %e {axis = [1], keepdims = true} : f32[R, 1]
  %y = tensor.div %e, %z : f32[R, C]
  return %y
}

// layernorm: two reductions (mean, then variance of the centred row, which reads the
// mean), rsqrt once per row outside the row loop, gamma and beta read in the epilogue.
// CHECK-LABEL: func @layernorm
// CHECK-NEXT:   %y = loops.alloc : buf<f32[B, C]>
// CHECK-NEXT:   fused.kernel {extents = [B], kernel_name = "layernorm_0", schedule = "row", {{.*}}} ([[R:%[a-z0-9_]+]]: index) {
// CHECK:          [[S1:%[a-z0-9_]+]] = loops.reduce {{.*}} {combiner = "add", extent = C}
// CHECK:          [[MEAN:%[a-z0-9_]+]] = arith.div [[S1]], [[N:%[a-z0-9_]+]] : f32
// CHECK-NEXT:     [[S2:%[a-z0-9_]+]] = loops.reduce {{.*}} {combiner = "add", extent = C} : f32 ([[K:%[a-z0-9_]+]]: index) {
// CHECK-NEXT:       [[V:%[a-z0-9_]+]] = loops.load %x, [[R]], [[K]] : f32
// CHECK-NEXT:       [[CEN:%[a-z0-9_]+]] = arith.sub [[V]], [[MEAN]] : f32
// CHECK-NEXT:       [[SQ:%[a-z0-9_]+]] = arith.mul [[CEN]], [[CEN]] : f32
// CHECK-NEXT:       loops.yield [[SQ]]
// CHECK-NEXT:     }
// CHECK-NEXT:     [[VAR:%[a-z0-9_]+]] = arith.div [[S2]], [[N]] : f32
// CHECK-NEXT:     [[EPS:%[a-z0-9_]+]] = arith.constant {value = 1e-05} : f32
// CHECK-NEXT:     [[VE:%[a-z0-9_]+]] = arith.add [[VAR]], [[EPS]] : f32
// CHECK-NEXT:     [[RSTD:%[a-z0-9_]+]] = arith.rsqrt [[VE]] : f32
// CHECK-NEXT:     loops.for {extent = C} ([[K:%[a-z0-9_]+]]: index) {
// CHECK-NEXT:       [[V:%[a-z0-9_]+]] = loops.load %x, [[R]], [[K]] : f32
// CHECK-NEXT:       [[CEN:%[a-z0-9_]+]] = arith.sub [[V]], [[MEAN]] : f32
// CHECK-NEXT:       [[NORM:%[a-z0-9_]+]] = arith.mul [[CEN]], [[RSTD]] : f32
// CHECK-NEXT:       [[G:%[a-z0-9_]+]] = loops.load %g, [[K]] : f32
// CHECK-NEXT:       [[SC:%[a-z0-9_]+]] = arith.mul [[NORM]], [[G]] : f32
// CHECK-NEXT:       [[B:%[a-z0-9_]+]] = loops.load %b, [[K]] : f32
// CHECK-NEXT:       [[Y:%[a-z0-9_]+]] = arith.add [[SC]], [[B]] : f32
// CHECK-NEXT:       loops.store [[Y]], %y, [[R]], [[K]]
// CHECK-NEXT:     }
// CHECK-NEXT:   }
// CHECK-NEXT:   return %y
func @layernorm(%x: f32[B, C], %g: f32[C], %b: f32[C]) -> (f32[B, C]) {
  %mean = tensor.mean %x {axis = [1], keepdims = true} : f32[B, 1]
  %cen = tensor.sub %x, %mean : f32[B, C]
  %sq = tensor.mul %cen, %cen : f32[B, C]
  %var = tensor.mean %sq {axis = [1], keepdims = true} : f32[B, 1]
  %eps = tensor.constant {value = 1e-05} : f32[]
  %ve = tensor.add %var, %eps : f32[B, 1]
  %rstd = tensor.rsqrt %ve : f32[B, 1]
  %norm = tensor.mul %cen, %rstd : f32[B, C]
  %sc = tensor.mul %norm, %g : f32[B, C]
  %y = tensor.add %sc, %b : f32[B, C]
  return %y
}
