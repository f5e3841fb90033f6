// RUN: mlfuse opt %s --passes lower-tensor-to-loops,fuse,schedule-contractions --print-decisions | filecheck %s
// RUN: mlfuse opt %s --passes lower-tensor-to-loops,fuse --dim N=8 --dim M=8 --dim J=4 --dim K=4 --print-decisions | filecheck %s --check-prefix TINY

// Two sums of products meeting in an add (a residual block's 3x3 conv and its 1x1
// stride-2 downsample conv; two matmuls added). One kernel holding both is no
// contraction: one thread per point would walk both reductions, reading every operand
// value once per output that uses it. The cost model prices that walker by the loads
// its threads execute (fusion/reduction_cost.py), so at these sizes each sum of products
// is its own tiled contraction kernel and one of them takes the add and relu in its
// epilogue, reading the other's result once.

// CHECK-LABEL: func @downsample_block
// CHECK:        fused.kernel {{.*}}extents = [N, 128, 28, 28], {{.*}}schedule = "contraction", {{.*}}sources = ["c3 = tensor.conv2d"]
// CHECK-NOT:      arith.relu
// CHECK:          loops.store
// CHECK:        fused.kernel {{.*}}extents = [N, 128, 28, 28], {{.*}}schedule = "contraction", {{.*}}sources = [{{.*}}"c1 = tensor.conv2d", {{.*}}"r = tensor.relu"]
// CHECK:          loops.load %c3,
// CHECK:          loops.reduce
// CHECK:          arith.relu
// CHECK-NOT:    fused.kernel
func @downsample_block(%h: f32[N, 128, 28, 28], %x: f32[N, 64, 56, 56], %w3: f32[128, 128, 3, 3], %w1: f32[128, 64, 1, 1], %b: f32[128, 1, 1]) -> (f32[N, 128, 28, 28]) {
  %c3 = tensor.conv2d %h, %w3 {stride = [1, 1], padding = [1, 1], dilation = [1, 1]} : f32[N, 128, 28, 28]
  %a = tensor.add %c3, %b : f32[N, 128, 28, 28]
  %c1 = tensor.conv2d %x, %w1 {stride = [2, 2], padding = [0, 0], dilation = [1, 1]} : f32[N, 128, 28, 28]
  %s = tensor.add %a, %c1 : f32[N, 128, 28, 28]
  %r = tensor.relu %s : f32[N, 128, 28, 28]
  return %r
}

// CHECK-LABEL: func @two_matmuls_added
// CHECK:        fused.kernel {{.*}}extents = [M, N], {{.*}}schedule = "contraction", {{.*}}sources = ["p = tensor.matmul"]
// CHECK:        fused.kernel {{.*}}extents = [M, N], {{.*}}schedule = "contraction", {{.*}}sources = ["q = tensor.matmul", "s = tensor.add", "r = tensor.relu"]
// CHECK-NOT:    fused.kernel
func @two_matmuls_added(%x: f32[M, K], %w: f32[K, N], %h: f32[M, J], %v: f32[J, N]) -> (f32[M, N]) {
  %p = tensor.matmul %x, %w : f32[M, N]
  %q = tensor.matmul %h, %v : f32[M, N]
  %s = tensor.add %p, %q : f32[M, N]
  %r = tensor.relu %s : f32[M, N]
  return %r
}

// A bias and relu between two convs run once per output as the first conv's epilogue,
// not in the second conv's tiles as a prologue (once per value and tile of the other
// operand, and its operand then read without 16-byte loads): the planner, which offers
// the relu to its consumer first, compares both homes and waits for the producer.
// CHECK-LABEL: func @epilogue_not_prologue
// CHECK:        fused.kernel {{.*}}extents = [N, 64, 28, 28], {{.*}}schedule = "contraction", {{.*}}sources = ["c = tensor.conv2d", "a = tensor.add", "y = tensor.relu"]
// CHECK:        fused.kernel {{.*}}extents = [N, 256, 28, 28], {{.*}}schedule = "contraction", {{.*}}sources = ["d = tensor.conv2d"]
// CHECK-NOT:    fused.kernel
func @epilogue_not_prologue(%x: f32[N, 64, 28, 28], %w: f32[64, 64, 3, 3], %b: f32[64, 1, 1], %v: f32[256, 64, 1, 1]) -> (f32[N, 256, 28, 28]) {
  %c = tensor.conv2d %x, %w {stride = [1, 1], padding = [1, 1], dilation = [1, 1]} : f32[N, 64, 28, 28]
  %a = tensor.add %c, %b : f32[N, 64, 28, 28]
  %y = tensor.relu %a : f32[N, 64, 28, 28]
  %d = tensor.conv2d %y, %v {stride = [1, 1], padding = [0, 0], dilation = [1, 1]} : f32[N, 256, 28, 28]
  return %d
}

// CHECK: // fuse: @downsample_block: kept c3 -> a: cost model: fused {{[0-9.]+}} us >= separate {{[0-9.]+}} us (2 sums of products in one kernel: not a contraction, one thread per point would walk them)
// CHECK: // fuse: @two_matmuls_added: kept p -> s: cost model: fused {{[0-9.]+}} us >= separate {{[0-9.]+}} us (2 sums of products in one kernel
// CHECK: // fuse: @epilogue_not_prologue: kept y -> d: runs once as c's epilogue ({{[0-9.]+}} us) rather than in each tile of a contraction reading it ({{[0-9.]+}} us)
// CHECK: // fuse: @epilogue_not_prologue: fused c -> a: cost model

// Tiny sums (8 x 8 outputs of 8 products each): launches dominate, and the cost model
// finds one walker kernel cheaper than two contraction kernels.
// TINY-LABEL: func @two_matmuls_added
// TINY:         fused.kernel {{.*}}extents = [M, N], {{.*}}sources = ["p = tensor.matmul", "q = tensor.matmul", "s = tensor.add", "r = tensor.relu"]
// TINY-NOT:     fused.kernel
// TINY-LABEL: func @epilogue_not_prologue
// TINY: // fuse: @two_matmuls_added: fused p -> s: cost model
