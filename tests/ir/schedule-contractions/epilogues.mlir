// RUN: mlfuse opt %s --passes lower-tensor-to-loops,fuse,schedule-contractions | filecheck %s

// A contraction with its elementwise epilogue fused (matmul + bias + relu): one
// kernel over the outputs, scheduled "contraction"; the epilogue runs on the
// accumulator and the result is stored once. The matmul's result is never stored.
// CHECK-LABEL: func @matmul_bias_relu
// CHECK-NEXT:   %r = loops.alloc : buf<f32[B, N]>
// CHECK-NEXT:   fused.kernel {extents = [B, N], kernel_name = "matmul_bias_relu_0", m_dims = [0], n_dims = [1], schedule = "contraction", sources = ["m = tensor.matmul", "y = tensor.add", "r = tensor.relu"], split_k = 64, variant = "simt"} ([[I:%[a-z0-9_]+]]: index, [[J:%[a-z0-9_]+]]: index) {
// CHECK-NEXT:     [[ZERO:%[a-z0-9_]+]] = arith.constant {value = 0.0} : f32
// CHECK-NEXT:     [[ACC:%[a-z0-9_]+]] = loops.reduce [[ZERO]] {combiner = "add", extent = K} : f32 ([[K:%[a-z0-9_]+]]: index) {
// CHECK-NEXT:       [[X:%[a-z0-9_]+]] = loops.load %x, [[I]], [[K]] : f32
// CHECK-NEXT:       [[W:%[a-z0-9_]+]] = loops.load %w, [[K]], [[J]] : f32
// CHECK-NEXT:       [[P:%[a-z0-9_]+]] = arith.mul [[X]], [[W]] : f32
// CHECK-NEXT:       loops.yield [[P]]
// CHECK-NEXT:     }
// CHECK-NEXT:     [[B:%[a-z0-9_]+]] = loops.load %b, [[J]] : f32
// CHECK-NEXT:     [[Y:%[a-z0-9_]+]] = arith.add [[ACC]], [[B]] : f32
// CHECK-NEXT:     [[R:%[a-z0-9_]+]] = arith.relu [[Y]] : f32
// CHECK-NEXT:     loops.store [[R]], %r, [[I]], [[J]]
// CHECK-NEXT:   }
// CHECK-NEXT:   return %r
func @matmul_bias_relu(%x: f32[B, K], %w: f32[K, N], %b: f32[N]) -> (f32[B, N]) {
  %m = tensor.matmul %x, %w : f32[B, N]
  %y = tensor.add %m, %b : f32[B, N]
  %r = tensor.relu %y : f32[B, N]
  return %r
}

// conv2d + per-channel bias + relu: the three nested reductions (c, kh, kw) around a
// masked im2col read, then the epilogue on the accumulator, in one contraction kernel.
// CHECK-LABEL: func @conv_bias_relu
// CHECK-NEXT:   %r = loops.alloc : buf<f32[N, 16, 16, 16]>
// CHECK-NEXT:   fused.kernel {a_operand = 1, extents = [N, 16, 16, 16], {{.*}}m_dims = [1], n_dims = [0, 2, 3], schedule = "contraction", sources = ["c = tensor.conv2d", "y = tensor.add", "r = tensor.relu"], variant = "simt"} ([[N:%[a-z0-9_]+]]: index, [[O:%[a-z0-9_]+]]: index, [[H:%[a-z0-9_]+]]: index, [[W:%[a-z0-9_]+]]: index) {
// CHECK:          [[ACC:%[a-z0-9_]+]] = loops.reduce {{.*}} {combiner = "add", extent = 8}
// CHECK:              loops.masked_load %x,
// CHECK:          [[B:%[a-z0-9_]+]] = loops.load %b, [[O]], {{%[a-z0-9_]+}}, {{%[a-z0-9_]+}} : f32
// CHECK-NEXT:     [[Y:%[a-z0-9_]+]] = arith.add [[ACC]], [[B]] : f32
// CHECK-NEXT:     [[R:%[a-z0-9_]+]] = arith.relu [[Y]] : f32
// CHECK-NEXT:     loops.store [[R]], %r, [[N]], [[O]], [[H]], [[W]]
// CHECK-NEXT:   }
// CHECK-NEXT:   return %r
func @conv_bias_relu(%x: f32[N, 8, 16, 16], %w: f32[16, 8, 3, 3], %b: f32[16, 1, 1]) -> (f32[N, 16, 16, 16]) {
  %c = tensor.conv2d %x, %w {stride = [1, 1], padding = [1, 1], dilation = [1, 1]} : f32[N, 16, 16, 16]
  %y = tensor.add %c, %b : f32[N, 16, 16, 16]
  %r = tensor.relu %y : f32[N, 16, 16, 16]
  return %r
}
