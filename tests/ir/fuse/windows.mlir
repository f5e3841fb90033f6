// RUN: mlfuse opt %s --passes lower-tensor-to-loops,fuse --print-decisions | filecheck %s

// What fuses around windowed ops. A pool's taps read their producer at clamped
// positions with plain loads, so a pointwise producer is inlined per tap (recomputed
// where windows overlap); the pool's elementwise consumers join it at its own point.

// bias + relu -> max pool -> scale: one kernel; the pool reads x and b, never r (b's
// load is the same at every tap, so it moves out of the window's loops).
// CHECK-LABEL: func @relu_pool_scale
// CHECK:        fused.kernel {extents = [N, 8, 16, 16], {{.*}}sources = ["a = tensor.add", "r = tensor.relu", "p = tensor.max_pool2d", "y = tensor.mul"]{{.*}}}
// CHECK:          [[B:%[a-z0-9_]+]] = loops.load %b,
// CHECK:          loops.reduce {{.*}} {combiner = "max", extent = 3}
// CHECK:            loops.reduce {{.*}} {combiner = "max", extent = 3}
// CHECK:              [[X:%[a-z0-9_]+]] = loops.load %x,
// CHECK-NEXT:         [[A:%[a-z0-9_]+]] = arith.add [[X]], [[B]] : f32
// CHECK:              arith.relu [[A]] : f32
// CHECK:          arith.mul
// CHECK-NOT:    fused.kernel
func @relu_pool_scale(%x: f32[N, 8, 32, 32], %b: f32[8, 1, 1]) -> (f32[N, 8, 16, 16]) {
  %a = tensor.add %x, %b : f32[N, 8, 32, 32]
  %r = tensor.relu %a : f32[N, 8, 32, 32]
  %p = tensor.max_pool2d %r {kernel = [3, 3], stride = [2, 2], padding = [1, 1]} : f32[N, 8, 16, 16]
  %c = tensor.constant {value = 2.0} : f32[]
  %y = tensor.mul %p, %c : f32[N, 8, 16, 16]
  return %y
}

// conv -> max pool: the pool would recompute the conv's reduction for each tap, so
// the conv stays a kernel (a contraction, later) and the pool reads its output.
// CHECK-LABEL: func @conv_pool
// CHECK:        fused.kernel {extents = [N, 8, 32, 32], {{.*}}sources = ["c = tensor.conv2d"]{{.*}}}
// CHECK:        fused.kernel {extents = [N, 8, 16, 16], {{.*}}sources = ["p = tensor.max_pool2d"]{{.*}}}
// CHECK:          loops.load %c,
func @conv_pool(%x: f32[N, 8, 32, 32], %w: f32[8, 8, 3, 3]) -> (f32[N, 8, 16, 16]) {
  %c = tensor.conv2d %x, %w {stride = [1, 1], padding = [1, 1], dilation = [1, 1]} : f32[N, 8, 32, 32]
  %p = tensor.max_pool2d %c {kernel = [3, 3], stride = [2, 2], padding = [1, 1]} : f32[N, 8, 16, 16]
  return %p
}

// A depthwise conv with its bias and hardswish epilogue: one kernel, a loop nest (not a
// contraction: no schedule attribute, pointwise) with one thread per output walking its
// 3 x 3 window.
// CHECK-LABEL: func @depthwise_hardswish
// CHECK:        fused.kernel {extents = [N, 8, 16, 16], kernel_name = {{.*}}, sources = ["c = tensor.conv2d", "a = tensor.add", "h = tensor.hardswish"]{{.*}}}
func @depthwise_hardswish(%x: f32[N, 8, 16, 16], %w: f32[8, 1, 3, 3], %b: f32[8, 1, 1]) -> (f32[N, 8, 16, 16]) {
  %c = tensor.conv2d %x, %w {stride = [1, 1], padding = [1, 1], dilation = [1, 1], groups = 8} : f32[N, 8, 16, 16]
  %a = tensor.add %c, %b : f32[N, 8, 16, 16]
  %h = tensor.hardswish %a : f32[N, 8, 16, 16]
  return %h
}

// softmax then argmax over the same rows: one row kernel (argmax's two reductions over
// the row recompute the normalized values from the row's max and sum).
// CHECK-LABEL: func @softmax_argmax
// CHECK:        fused.kernel {extents = [R], {{.*}}schedule = "row", sources = ["m = tensor.max", "d = tensor.sub", "e = tensor.exp", "s = tensor.sum", "p = tensor.div", "i = tensor.argmax"]{{.*}}}
// CHECK-NOT:    fused.kernel
func @softmax_argmax(%x: f32[R, 4096]) -> (i32[R]) {
  %m = tensor.max %x {axis = [1], keepdims = true} : f32[R, 1]
  %d = tensor.sub %x, %m : f32[R, 4096]
  %e = tensor.exp %d : f32[R, 4096]
  %s = tensor.sum %e {axis = [1], keepdims = true} : f32[R, 1]
  %p = tensor.div %e, %s : f32[R, 4096]
  %i = tensor.argmax %p {axis = 1} : i32[R]
  return %i
}

// CHECK: // fuse: @relu_pool_scale: fused p -> y: cost model
// CHECK: // fuse: @relu_pool_scale: fused r -> p: cost model
// CHECK: // fuse: @conv_pool: kept c -> p: c (tensor.conv2d, extents {{.*}}) does not fit one iteration space with the rest of the group
