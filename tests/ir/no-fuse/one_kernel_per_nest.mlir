// RUN: mlfuse opt %s --passes lower-tensor-to-loops,no-fuse --print-decisions | filecheck %s

// no-fuse is the unfused baseline: one kernel per loop nest, in program order, every
// intermediate in memory (written by its kernel, read by the next). Row reductions
// still get the row schedule. No fusion decisions are made.
// CHECK-LABEL: func @softmax
// CHECK-NEXT:   %m = loops.alloc : buf<f32[R, 1]>
// CHECK-NEXT:   %s = loops.alloc : buf<f32[R, C]>
// CHECK-NEXT:   %e = loops.alloc : buf<f32[R, C]>
// CHECK-NEXT:   %z = loops.alloc : buf<f32[R, 1]>
// CHECK-NEXT:   %y = loops.alloc : buf<f32[R, C]>
// CHECK-NEXT:   fused.kernel {extents = [R], kernel_name = "softmax_0", schedule = "row", sources = ["m = tensor.max"]{{.*}}}
// CHECK:          loops.store {{%[a-z0-9_]+}}, %m,
// CHECK:        fused.kernel {extents = [R, C], kernel_name = "softmax_1", sources = ["s = tensor.sub"]{{.*}}}
// CHECK:          loops.load %m,
// CHECK:          loops.store {{%[a-z0-9_]+}}, %s,
// CHECK:        fused.kernel {extents = [R, C], kernel_name = "softmax_2", sources = ["e = tensor.exp"]{{.*}}}
// CHECK-NEXT:     loops.load %s,
// CHECK:          loops.store {{%[a-z0-9_]+}}, %e,
// CHECK:        fused.kernel {extents = [R], kernel_name = "softmax_3", schedule = "row", sources = ["z = tensor.sum"]{{.*}}}
// CHECK:            loops.load %e,
// CHECK:          loops.store {{%[a-z0-9_]+}}, %z,
// CHECK:        fused.kernel {extents = [R, C], kernel_name = "softmax_4", sources = ["y = tensor.div"]{{.*}}}
// CHECK-NEXT:     loops.load %e,
// CHECK:          loops.load %z,
// CHECK:          loops.store {{%[a-z0-9_]+}}, %y,
// CHECK-NEXT:   }
// CHECK-NEXT:   return %y
// CHECK-NOT:  // fuse:
func @softmax(%x: f32[R, C]) -> (f32[R, C]) {
  %m = tensor.max %x {axis = [1], keepdims = true} : f32[R, 1]
  %s = tensor.sub %x, %m : f32[R, C]
  %e = tensor.exp %s : f32[R, C]
  %z = tensor.sum %e {axis = [1], keepdims = true} : f32[R, 1]
  %y = tensor.div %e, %z : f32[R, C]
  return %y
}
