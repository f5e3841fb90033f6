// RUN: mlfuse opt %s --passes lower-tensor-to-loops | filecheck %s

// matmul: one add-reduction over K of a[i, k] * b[k, j].
// CHECK-LABEL: func @matmul
// CHECK:        loops.parallel {extents = [M, N], source = "tensor.matmul"} ([[I:%[a-z0-9_]+]]: index, [[J:%[a-z0-9_]+]]: index) {
// CHECK-NEXT:     [[ZERO:%[a-z0-9_]+]] = arith.constant {value = 0.0} : f32
// CHECK-NEXT:     [[ACC:%[a-z0-9_]+]] = loops.reduce [[ZERO]] {combiner = "add", extent = K} : f32 ([[K:%[a-z0-9_]+]]: index) {
// CHECK-NEXT:       [[A:%[a-z0-9_]+]] = loops.load %a, [[I]], [[K]] : f32
// CHECK-NEXT:       [[B:%[a-z0-9_]+]] = loops.load %b, [[K]], [[J]] : f32
// CHECK-NEXT:       [[P:%[a-z0-9_]+]] = arith.mul [[A]], [[B]] : f32
// CHECK-NEXT:       loops.yield [[P]]
// CHECK-NEXT:     }
// CHECK-NEXT:     loops.store [[ACC]], %c, [[I]], [[J]]
func @matmul(%a: f32[M, K], %b: f32[K, N]) -> (f32[M, N]) {
  %c = tensor.matmul %a, %b : f32[M, N]
  return %c
}

// conv2d with padding 1: reductions over c, kh, kw; the window start (oh - 1) is
// computed once per point, and taps in the zero padding are masked loads whose mask
// is the row test and the column test.
// CHECK-LABEL: func @conv
// CHECK:        loops.parallel {extents = [1, 4, 8, 8], source = "tensor.conv2d"} ([[N:%[a-z0-9_]+]]: index, [[O:%[a-z0-9_]+]]: index, [[OH:%[a-z0-9_]+]]: index, [[OW:%[a-z0-9_]+]]: index) {
// CHECK:          [[ONE:%[a-z0-9_]+]] = arith.constant {value = 1} : index
// CHECK-NEXT:     [[H0:%[a-z0-9_]+]] = arith.sub [[OH]], [[ONE]] : index
// CHECK-NEXT:     [[W0:%[a-z0-9_]+]] = arith.sub [[OW]], [[ONE]] : index
// CHECK:          loops.reduce {{.*}} {combiner = "add", extent = 3} : f32 ([[C:%[a-z0-9_]+]]: index) {
// CHECK-NEXT:       loops.reduce {{.*}} {combiner = "add", extent = 3} : f32 ([[KH:%[a-z0-9_]+]]: index) {
// CHECK-NEXT:         [[IH:%[a-z0-9_]+]] = arith.add [[H0]], [[KH]] : index
// CHECK:              [[ROW:%[a-z0-9_]+]] = arith.and {{.*}} : bool
// CHECK-NEXT:         loops.reduce {{.*}} {combiner = "add", extent = 3} : f32 ([[KW:%[a-z0-9_]+]]: index) {
// CHECK-NEXT:           [[IW:%[a-z0-9_]+]] = arith.add [[W0]], [[KW]] : index
// CHECK:                [[COL:%[a-z0-9_]+]] = arith.and {{.*}} : bool
// CHECK-NEXT:           [[OK:%[a-z0-9_]+]] = arith.and [[ROW]], [[COL]] : bool
// CHECK-NEXT:           [[PX:%[a-z0-9_]+]] = loops.masked_load %x, [[OK]], [[N]], [[C]], [[IH]], [[IW]] : f32
// CHECK-NEXT:           [[WT:%[a-z0-9_]+]] = loops.load %w, [[O]], [[C]], [[KH]], [[KW]] : f32
// CHECK-NEXT:           [[P:%[a-z0-9_]+]] = arith.mul [[PX]], [[WT]] : f32
// CHECK-NEXT:           loops.yield [[P]]
func @conv(%x: f32[1, 3, 8, 8], %w: f32[4, 3, 3, 3]) -> (f32[1, 4, 8, 8]) {
  %y = tensor.conv2d %x, %w {stride = [1, 1], padding = [1, 1], dilation = [1, 1]} : f32[1, 4, 8, 8]
  return %y
}
