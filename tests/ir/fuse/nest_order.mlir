// RUN: mlfuse opt %s --passes lower-tensor-to-loops,fuse --print-decisions | filecheck %s

// A reduction over several axes of a transposed input walks x in memory order
// (fusion/nest_order.py): lowered, the mean over [0, 1] of transpose(x) is the nest
// reduce C { reduce R { x[r, c] } }, whose inner level steps x's outer axis (one
// kernel priced far above a transpose kernel and a reduction). Its levels swap, so the
// inner one steps x's rows: one kernel, the transpose's copy gone.
// CHECK-LABEL: func @mean_of_transposed
// CHECK:        fused.kernel {extents = [], {{.*}}sources = ["{{[a-z_0-9]*}} = tensor.transpose"
// CHECK:          loops.reduce {{.*}} {combiner = "add", extent = R} : f32 (%[[O:[a-z_0-9]+]]: index) {
// CHECK-NEXT:       loops.reduce {{.*}} {combiner = "add", extent = C} : f32 (%[[I:[a-z_0-9]+]]: index) {
// CHECK-NEXT:         loops.load %x, %[[O]], %[[I]] : f32
// CHECK-NOT:    fused.kernel
// CHECK:        return
func @mean_of_transposed(%x: f32[R, C]) -> (f32[]) {
  %0 = tensor.transpose %x {perm = [1, 0]} : f32[C, R]
  %1 = tensor.constant {value = 2.0} : f32[]
  %2 = tensor.mul %0, %1 : f32[C, R]
  %3 = tensor.mean %2 {axis = [0, 1]} : f32[]
  return %3
}

// Per batch, the max over the last two axes of x read with them swapped: the same, for
// each of the kernel's points.
// CHECK-LABEL: func @max_of_swapped
// CHECK:        fused.kernel {extents = [A]
// CHECK:          loops.reduce {{.*}} {combiner = "max", extent = B} : f32 (%[[O:[a-z_0-9]+]]: index) {
// CHECK-NEXT:       loops.reduce {{.*}} {combiner = "max", extent = C} : f32 (%[[I:[a-z_0-9]+]]: index) {
// CHECK-NEXT:         loops.load %x, %i0, %[[O]], %[[I]] : f32
// CHECK-NOT:    fused.kernel
// CHECK:        return
func @max_of_swapped(%x: f32[A, B, C]) -> (f32[A]) {
  %0 = tensor.transpose %x {perm = [0, 2, 1]} : f32[A, C, B]
  %1 = tensor.max %0 {axis = [1, 2]} : f32[A]
  return %1
}

// Over columns (x[n, w, h, c], threads along c) the order does not matter to coalescing:
// the nest keeps its epilogue's order (tests/ir/flatten-column-nests/batch-norm-nhwc.mlir).
