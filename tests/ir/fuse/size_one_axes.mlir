// RUN: mlfuse opt %s --passes lower-tensor-to-loops,fuse --dim R=4096 --dim C=4096 --print-decisions | filecheck %s

// A permutation that moves only axes of one point, or a reshape that adds or drops
// them, keeps the element order: over the same other extents it is the same layout,
// so it fuses into the kernel that computes its operand and is stored at that
// kernel's point (mlfuse/transforms/fusion/kernel_builder.py, ``level``).

// The transpose of a row reduction's [R, 1] result: one row kernel stores it at [0, i].
// CHECK-LABEL: func @transposed_sums
// CHECK-NOT:    %s = loops.alloc
// CHECK:        fused.kernel {extents = [R], {{.*}}schedule = "row", sources = ["s = tensor.sum", "t = tensor.transpose"]{{.*}}}
// CHECK:          loops.store %s{{.*}}, %t, %c0, %i0
// CHECK-NOT:    fused.kernel
func @transposed_sums(%x: f32[R, C]) -> (f32[1, R]) {
  %s = tensor.sum %x {axis = [1], keepdims = true} : f32[R, 1]
  %t = tensor.transpose %s {perm = [1, 0]} : f32[1, R]
  return %t
}

// Reshapes to [1, R, 1] and the row-normalized values beside: one kernel, two outputs.
// CHECK-LABEL: func @reshaped_max_and_normalized
// CHECK:        fused.kernel {extents = [R], {{.*}}sources = ["m = tensor.max", "r = tensor.reshape", "y = tensor.div"]{{.*}}}
// CHECK:          loops.store %m{{.*}}, %r, %c0, %i0, %c0
// CHECK-NOT:    fused.kernel
func @reshaped_max_and_normalized(%x: f32[R, C]) -> (f32[1, R, 1], f32[R, C]) {
  %m = tensor.max %x {axis = [1], keepdims = true} : f32[R, 1]
  %r = tensor.reshape %m {shape = [1, R, 1]} : f32[1, R, 1]
  %y = tensor.div %x, %m : f32[R, C]
  return %r, %y
}

// CHECK: // fuse: @transposed_sums: fused s -> t: cost model
