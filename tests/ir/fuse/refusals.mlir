// RUN: mlfuse opt %s --passes lower-tensor-to-loops,fuse --print-decisions | filecheck %s

// Moves fuse refuses, each with its reason in the decision comments after the IR
// (--print-decisions). The reasons are checked at the end of the file, in the order
// they are printed.

// A whole-tensor reduction whose consumer uses every element: computing them in one
// kernel needs a grid-wide barrier, so the sum is stored and read back by a second kernel.
// CHECK-LABEL: func @whole_tensor_reduction
// CHECK-NEXT:   %s = loops.alloc : buf<f32[1]>
// CHECK-NEXT:   %y = loops.alloc : buf<f32[N]>
// CHECK-NEXT:   fused.kernel {extents = [], {{.*}}sources = ["s = tensor.sum"]{{.*}}} () {
// CHECK:          loops.store {{%[a-z0-9_]+}}, %s,
// CHECK:        fused.kernel {extents = [N], {{.*}}sources = ["y = tensor.div"]{{.*}}} ([[I:%[a-z0-9_]+]]: index) {
// CHECK:          loops.load %s,
// CHECK:          loops.store {{%[a-z0-9_]+}}, %y, [[I]]
func @whole_tensor_reduction(%x: f32[N]) -> (f32[N]) {
  %s = tensor.sum %x {axis = [0], keepdims = true} : f32[1]
  %y = tensor.div %x, %s : f32[N]
  return %y
}

// A row sum read through a transpose, at another index than the kernel's point:
// inlining it would recompute the whole reduction for every element, so it is kept.
// (The transpose and the add do fuse.)
// CHECK-LABEL: func @reduction_read_at_another_index
// CHECK:        fused.kernel {extents = [R], {{.*}}sources = ["u = tensor.sum"]{{.*}}}
// CHECK:        fused.kernel {extents = [R, R], {{.*}}sources = ["v = tensor.transpose", "w = tensor.add"]{{.*}}}
func @reduction_read_at_another_index(%x: f32[R, R]) -> (f32[R, R]) {
  %u = tensor.sum %x {axis = [1], keepdims = true} : f32[R, 1]
  %v = tensor.transpose %u {perm = [1, 0]} : f32[1, R]
  %w = tensor.add %x, %v : f32[R, R]
  return %w
}

// A producer read at another iteration space (the transpose's [C, R], not the rows
// [R] of the reduction): the reduction stays apart, the sub joins the transpose. The
// reason given is the placed mode's, the last whose space fitted: stored by the rows
// kernel's epilogue, the transpose's values would go a 4-byte value per sector.
// CHECK-LABEL: func @other_iteration_space
// CHECK:        fused.kernel {extents = [R], {{.*}}sources = ["s = tensor.sum"]{{.*}}}
// CHECK:        fused.kernel {extents = [C, R], {{.*}}schedule = "transpose-tiles", sources = ["y = tensor.sub", "t = tensor.transpose"], tile_axes = [0, 1]}
func @other_iteration_space(%x: f32[R, C]) -> (f32[C, R]) {
  %s = tensor.sum %x {axis = [1], keepdims = true} : f32[R, 1]
  %y = tensor.sub %x, %s : f32[R, C]
  %t = tensor.transpose %y {perm = [1, 0]} : f32[C, R]
  return %t
}

// A convolution's input is read through the padding mask: its producer stays in memory.
// CHECK-LABEL: func @conv_input
// CHECK:        fused.kernel {{.*}}sources = ["r = tensor.relu"]{{.*}}}
// CHECK:        fused.kernel {{.*}}sources = ["y = tensor.conv2d"]{{.*}}}
// CHECK:          loops.masked_load %r,
func @conv_input(%x: f32[1, 3, 8, 8], %w: f32[4, 3, 3, 3]) -> (f32[1, 4, 8, 8]) {
  %r = tensor.relu %x : f32[1, 3, 8, 8]
  %y = tensor.conv2d %r, %w {stride = [1, 1], padding = [1, 1], dilation = [1, 1]} : f32[1, 4, 8, 8]
  return %y
}

// A row-normalized operand inlined into the matmul as a prologue: the tiled kernel
// computes it once per operand value and tile of output columns (not once per output,
// as one thread per point would), so one division per value and tile is cheaper than
// storing v and reading it back (fusion/reduction_cost.py). The row sum it divides by is
// read at another index than the matmul's point, so it stays a kernel of its own.
// CHECK-LABEL: func @prologue_into_matmul
// CHECK:        fused.kernel {extents = [M], {{.*}}sources = ["u = tensor.sum"]{{.*}}}
// CHECK:        fused.kernel {extents = [M, N], {{.*}}sources = ["v = tensor.div", "w = tensor.matmul"]{{.*}}}
func @prologue_into_matmul(%x: f32[M, K], %b: f32[K, N]) -> (f32[M, N]) {
  %u = tensor.sum %x {axis = [1], keepdims = true} : f32[M, 1]
  %v = tensor.div %x, %u : f32[M, K]
  %w = tensor.matmul %v, %b : f32[M, N]
  return %w
}

// CHECK: // fuse: @whole_tensor_reduction: kept s -> y: s reduces over all elements and its consumers use every element: that needs a grid-wide barrier, so two kernels
// CHECK: // fuse: @reduction_read_at_another_index: kept u -> v: u (tensor.sum) is read at another index than the kernel's own point, which would recompute its reduction
// CHECK: // fuse: @other_iteration_space: fused y -> t: cost model
// CHECK: // fuse: @other_iteration_space: kept s -> y: t is a move of the epilogue's values that its threads would store scattered
// CHECK: // fuse: @conv_input: kept r -> y: y reads r through a padding mask (a convolution input): kept in memory
// CHECK: // fuse: @prologue_into_matmul: fused v -> w: cost model
// CHECK: // fuse: @prologue_into_matmul: kept u -> v: w (tensor.matmul, extents {{.*}}) does not fit one iteration space with the rest of the group
