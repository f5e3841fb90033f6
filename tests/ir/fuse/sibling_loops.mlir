// RUN: mlfuse opt %s --passes lower-tensor-to-loops,fuse | filecheck %s

// Independent reductions over one row are made neighbours in the kernel body
// (fusion/sibling_order.py), so that dialects/reductions.sibling_passes walks them in
// one pass over the row: the ops between them that the second needs (its init) move
// before the first, the others (what reads the first's result) after the second.

// max(y) + sum(y * y): the sum's init constant stood between the two reduces.
// CHECK-LABEL: func @max_and_square_sum
// CHECK:         fused.kernel {extents = [R], kernel_name = "max_and_square_sum_0", schedule = "row"
// CHECK-NEXT:      [[NEG:%[a-z0-9_]+]] = arith.constant {value = -inf} : f32
// CHECK-NEXT:      [[ZERO:%[a-z0-9_]+]] = arith.constant {value = 0.0} : f32
// CHECK-NEXT:      [[MAX:%[a-z0-9_]+]] = loops.reduce [[NEG]] {combiner = "max", extent = C}
// CHECK:             loops.yield
// CHECK-NEXT:      }
// CHECK-NEXT:      [[SUM:%[a-z0-9_]+]] = loops.reduce [[ZERO]] {combiner = "add", extent = C}
// CHECK:             loops.yield
// CHECK-NEXT:      }
// CHECK-NEXT:      arith.add [[MAX]], [[SUM]] : f32
func @max_and_square_sum(%x: f32[R, C]) -> (f32[R]) {
  %two = tensor.constant {value = 2.0} : f32[]
  %y = tensor.mul %x, %two : f32[R, C]
  %m = tensor.max %y {axis = [1]} : f32[R]
  %q = tensor.mul %y, %y : f32[R, C]
  %s = tensor.sum %q {axis = [1]} : f32[R]
  %r = tensor.add %m, %s : f32[R]
  return %r
}

// A mean's division stood between its sum and the max: it moves after the max.
// CHECK-LABEL: func @mean_and_max
// CHECK:         [[SUM:%[a-z0-9_]+]] = loops.reduce {{.*}}combiner = "add"
// CHECK:             loops.yield
// CHECK-NEXT:      }
// CHECK-NEXT:      [[MAX:%[a-z0-9_]+]] = loops.reduce {{.*}}combiner = "max"
// CHECK:             loops.yield
// CHECK-NEXT:      }
// CHECK:           arith.div [[SUM]]
func @mean_and_max(%x: f32[R, C]) -> (f32[R]) {
  %mean = tensor.mean %x {axis = [1]} : f32[R]
  %m = tensor.max %x {axis = [1]} : f32[R]
  %r = tensor.sub %m, %mean : f32[R]
  return %r
}

// The second reads the first's result (through the mean between them): left as it is.
// CHECK-LABEL: func @centred_square_sum
// CHECK:         [[SUM:%[a-z0-9_]+]] = loops.reduce {{.*}}combiner = "add"
// CHECK:             loops.yield
// CHECK-NEXT:      }
// CHECK:           [[MEAN:%[a-z0-9_]+]] = arith.div [[SUM]]
// CHECK-NEXT:      {{%[a-z0-9_]+}} = loops.reduce
// CHECK:             arith.sub {{%[a-z0-9_]+}}, [[MEAN]]
func @centred_square_sum(%x: f32[R, C]) -> (f32[R]) {
  %mean = tensor.mean %x {axis = [1], keepdims = true} : f32[R, 1]
  %d = tensor.sub %x, %mean : f32[R, C]
  %q = tensor.mul %d, %d : f32[R, C]
  %s = tensor.sum %q {axis = [1]} : f32[R]
  return %s
}
