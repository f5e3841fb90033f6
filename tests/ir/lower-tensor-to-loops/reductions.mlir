// RUN: mlfuse opt %s --passes lower-tensor-to-loops | filecheck %s

// A reduction is a nest over the output with one loops.reduce per reduced axis (the
// first outermost) around a load at the full input index. Without keepdims the output
// index skips the reduced axes; with keepdims it keeps a size-1 slot (unused in the load).
// CHECK-LABEL: func @reduce
// CHECK:        %s = loops.alloc : buf<f32[B]>
// CHECK-NEXT:   loops.parallel {extents = [B], source = "tensor.sum"} ([[I:%[a-z0-9_]+]]: index) {
// CHECK-NEXT:     [[ZERO:%[a-z0-9_]+]] = arith.constant {value = 0.0} : f32
// CHECK-NEXT:     [[OUT:%[a-z0-9_]+]] = loops.reduce [[ZERO]] {combiner = "add", extent = R} : f32 ([[K0:%[a-z0-9_]+]]: index) {
// CHECK-NEXT:       [[IN:%[a-z0-9_]+]] = loops.reduce [[ZERO]] {combiner = "add", extent = C} : f32 ([[K1:%[a-z0-9_]+]]: index) {
// CHECK-NEXT:         [[V:%[a-z0-9_]+]] = loops.load %x, [[I]], [[K0]], [[K1]] : f32
// CHECK-NEXT:         loops.yield [[V]]
// CHECK-NEXT:       }
// CHECK-NEXT:       loops.yield [[IN]]
// CHECK-NEXT:     }
// CHECK-NEXT:     loops.store [[OUT]], %s, [[I]]

// max starts from -inf.
// CHECK:        loops.parallel {extents = [B, 1, C], source = "tensor.max"} ([[I:%[a-z0-9_]+]]: index, [[J:%[a-z0-9_]+]]: index, [[L:%[a-z0-9_]+]]: index) {
// CHECK-NEXT:     [[NEG:%[a-z0-9_]+]] = arith.constant {value = -inf} : f32
// CHECK-NEXT:     [[M:%[a-z0-9_]+]] = loops.reduce [[NEG]] {combiner = "max", extent = R} : f32 ([[K:%[a-z0-9_]+]]: index) {
// CHECK-NEXT:       loops.load %x, [[I]], [[K]], [[L]] : f32
// CHECK:          loops.store [[M]], %m, [[I]], [[J]], [[L]]

// mean is the sum divided by the count; a symbolic count is read with loops.dim.
// CHECK:        source = "tensor.mean"}
// CHECK:          [[T:%[a-z0-9_]+]] = loops.reduce {{.*}} {combiner = "add", extent = C}
// CHECK:          [[N:%[A-Za-z0-9_]+]] = loops.dim {sym = "C"} : index
// CHECK-NEXT:     [[NF:%[a-z0-9_]+]] = arith.cast [[N]] {dtype = "f32"} : f32
// CHECK-NEXT:     [[Q:%[a-z0-9_]+]] = arith.div [[T]], [[NF]] : f32
// CHECK-NEXT:     loops.store [[Q]], %a,
func @reduce(%x: f32[B, R, C]) -> (f32[B], f32[B, 1, C], f32[B, R, 1]) {
  %s = tensor.sum %x {axis = [1, 2]} : f32[B]
  %m = tensor.max %x {axis = [1], keepdims = true} : f32[B, 1, C]
  %a = tensor.mean %x {axis = [2], keepdims = true} : f32[B, R, 1]
  return %s, %m, %a
}

// A static count is a constant.
// CHECK-LABEL: func @mean4
// CHECK:          [[T:%[a-z0-9_]+]] = loops.reduce {{.*}} {combiner = "add", extent = 4}
// CHECK:          [[N:%[a-z0-9_]+]] = arith.constant {value = 4.0} : f32
// CHECK-NEXT:     [[Q:%[a-z0-9_]+]] = arith.div [[T]], [[N]] : f32
// CHECK-NEXT:     loops.store [[Q]], %a,
func @mean4(%x: f32[N, 4]) -> (f32[N]) {
  %a = tensor.mean %x {axis = [1]} : f32[N]
  return %a
}

// A 16-bit float's mean adds up and divides in f32 and rounds once, as NumPy's mean of
// f16: 65536.0 is inf in f16 (a layernorm over 65536 values divided by it on the GPU).
// CHECK-LABEL: func @mean_f16
// CHECK:          [[Z:%[a-z0-9_]+]] = arith.constant {value = 0.0} : f32
// CHECK-NEXT:     [[T:%[a-z0-9_]+]] = loops.reduce [[Z]] {combiner = "add", extent = 65536} : f32
// CHECK-NEXT:       [[V:%[a-z0-9_]+]] = loops.load %x, {{.*}} : f16
// CHECK-NEXT:       [[W:%[a-z0-9_]+]] = arith.cast [[V]] {dtype = "f32"} : f32
// CHECK-NEXT:       loops.yield [[W]]
// CHECK:          [[N:%[a-z0-9_]+]] = arith.constant {value = 65536.0} : f32
// CHECK-NEXT:     [[Q:%[a-z0-9_]+]] = arith.div [[T]], [[N]] : f32
// CHECK-NEXT:     [[R:%[a-z0-9_]+]] = arith.cast [[Q]] {dtype = "f16"} : f16
// CHECK-NEXT:     loops.store [[R]], %a,
func @mean_f16(%x: f16[2, 65536]) -> (f16[2]) {
  %a = tensor.mean %x {axis = [1]} : f16[2]
  return %a
}

// So does bf16's (a count over 256 is inexact in bf16); a sum keeps its own dtype.
// CHECK-LABEL: func @mean_bf16
// CHECK:          loops.reduce {{.*}} {combiner = "add", extent = N} : f32
// CHECK:          arith.div {{.*}} : f32
// CHECK-NEXT:     arith.cast {{.*}} {dtype = "bf16"} : bf16
// CHECK:          loops.reduce {{.*}} {combiner = "add", extent = N} : bf16
func @mean_bf16(%x: bf16[3, N]) -> (bf16[3], bf16[3]) {
  %a = tensor.mean %x {axis = [1]} : bf16[3]
  %s = tensor.sum %x {axis = [1]} : bf16[3]
  return %a, %s
}
