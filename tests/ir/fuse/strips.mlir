// RUN: mlfuse opt %s --passes decompose,lower-tensor-to-loops,fuse --dim N=32 --dim C=64 --dim H=56 --dim W=56 --dim B=32 --dim S=128 --dim D=1024 --dim R=4096 | filecheck %s
// RUN: mlfuse opt %s --passes decompose,lower-tensor-to-loops,fuse --dim N=32 --dim C=64 --dim H=56 --dim W=56 --dim B=32 --dim S=128 --dim D=1024 --dim R=4096 --print-decisions | filecheck %s --check-prefix WHY

// Reductions over axes other than the last keep their broadcast-back epilogue in the
// same kernel (mlfuse/transforms/fusion/spaces.py): the kernel's points are the kept
// axes, its reductions run at the top of its body, and a loop nest over the reduced
// axes stores the outputs. The strips schedule runs it: a block per strip of 32
// neighbouring points ("columns") or per point with contiguous reduced values over
// several axes ("rows"). One kernel each, as an expert fuser makes.

// CHECK-LABEL: func @middle_softmax
// CHECK:        fused.kernel {extents = [B, D], {{.*}}schedule = "strips", {{.*}}strip = "columns"}
// CHECK:          loops.reduce {{.*}}combiner = "max", extent = S
// CHECK:          loops.reduce {{.*}}combiner = "add", extent = S
// CHECK:          loops.for {extent = S}
// CHECK-NOT:    fused.kernel
// CHECK:        return
func @middle_softmax(%x: f32[B, S, D]) -> (f32[B, S, D]) {
  %y = tensor.softmax %x {axis = 1} : f32[B, S, D]
  return %y
}

// CHECK-LABEL: func @channel_softmax
// CHECK:        fused.kernel {extents = [N, H, W], {{.*}}schedule = "strips", {{.*}}strip = "columns"}
// CHECK-NOT:    fused.kernel
// CHECK:        return
func @channel_softmax(%x: f32[N, C, H, W]) -> (f32[N, C, H, W]) {
  %y = tensor.softmax %x {axis = 1} : f32[N, C, H, W]
  return %y
}

// CHECK-LABEL: func @column_centring
// CHECK:        fused.kernel {extents = [D], {{.*}}schedule = "strips", {{.*}}strip = "columns"}
// CHECK-NOT:    fused.kernel
// CHECK:        return
func @column_centring(%x: f32[R, D]) -> (f32[R, D]) {
  %m = tensor.mean %x {axis = [0], keepdims = true} : f32[1, D]
  %y = tensor.sub %x, %m : f32[R, D]
  return %y
}

// Instance norm: statistics over [H, W], one block per (n, c) walks H*W as one loop.
// CHECK-LABEL: func @instance_norm
// CHECK:        fused.kernel {extents = [N, C], {{.*}}schedule = "strips", {{.*}}strip = "rows"}
// CHECK:          loops.for {extent = H}
// CHECK-NEXT:       loops.for {extent = W}
// CHECK-NOT:    fused.kernel
// CHECK:        return
func @instance_norm(%x: f32[N, C, H, W]) -> (f32[N, C, H, W]) {
  %m = tensor.mean %x {axis = [2, 3], keepdims = true} : f32[N, C, 1, 1]
  %d = tensor.sub %x, %m : f32[N, C, H, W]
  %q = tensor.mul %d, %d : f32[N, C, H, W]
  %v = tensor.mean %q {axis = [2, 3], keepdims = true} : f32[N, C, 1, 1]
  %e = tensor.add %v, %v : f32[N, C, 1, 1]
  %r = tensor.rsqrt %e : f32[N, C, 1, 1]
  %y = tensor.mul %d, %r : f32[N, C, H, W]
  return %y
}

// Batch-norm statistics over [N, H, W], also returned as [C]: each written once, by
// the kernel that computes it.
// CHECK-LABEL: func @batch_norm_training
// CHECK:        fused.kernel {extents = [C], {{.*}}schedule = "strips", {{.*}}strip = "rows"}
// CHECK:          loops.store {{.*}}, %mc,
// CHECK:          loops.store {{.*}}, %vc,
// CHECK:          loops.for {extent = N}
// CHECK-NOT:    fused.kernel
// CHECK:        return
func @batch_norm_training(%x: f32[N, C, H, W]) -> (f32[N, C, H, W], f32[C], f32[C]) {
  %m = tensor.mean %x {axis = [0, 2, 3], keepdims = true} : f32[1, C, 1, 1]
  %d = tensor.sub %x, %m : f32[N, C, H, W]
  %q = tensor.mul %d, %d : f32[N, C, H, W]
  %v = tensor.mean %q {axis = [0, 2, 3], keepdims = true} : f32[1, C, 1, 1]
  %r = tensor.rsqrt %v : f32[1, C, 1, 1]
  %y = tensor.mul %d, %r : f32[N, C, H, W]
  %mc = tensor.reshape %m {shape = [C]} : f32[C]
  %vc = tensor.reshape %v {shape = [C]} : f32[C]
  return %y, %mc, %vc
}

// Masked mean pool: sum(mask) over [B, 1] is computed at each point of [B, D] (a
// reduction per point, as the kernel's own), so both sums and the divide are one kernel.
// CHECK-LABEL: func @masked_mean_pool
// CHECK:        fused.kernel {extents = [B, D], {{.*}}schedule = "strips"
// CHECK-NOT:    fused.kernel
// CHECK:        return
func @masked_mean_pool(%x: f32[B, S, D], %m: f32[B, S, 1]) -> (f32[B, D]) {
  %xm = tensor.mul %x, %m : f32[B, S, D]
  %s = tensor.sum %xm {axis = [1]} : f32[B, D]
  %c = tensor.sum %m {axis = [1]} : f32[B, 1]
  %y = tensor.div %s, %c : f32[B, D]
  return %y
}

// A row norm returned [R, 1] beside the rows it scales: one row kernel stores both.
// CHECK-LABEL: func @l2norm_both
// CHECK:        fused.kernel {extents = [R], {{.*}}schedule = "row"
// CHECK-NOT:    fused.kernel
// CHECK:        return
func @l2norm_both(%x: f32[R, C]) -> (f32[R, 1], f32[R, C]) {
  %q = tensor.mul %x, %x : f32[R, C]
  %s = tensor.sum %q {axis = [1], keepdims = true} : f32[R, 1]
  %n = tensor.sqrt %s : f32[R, 1]
  %y = tensor.div %x, %n : f32[R, C]
  return %n, %y
}

// Few columns, each a very long reduction: a block per strip would leave the GPU idle,
// but its column stages do not (codegen/column_stages.py: the columns' partials over the
// whole GPU, a combine, then the centring), which the host runs where a strip's values
// fit on chip nowhere, as here: one kernel, priced as those stages.
// CHECK-LABEL: func @few_long_columns
// CHECK:        fused.kernel {extents = [8], {{.*}}schedule = "strips", {{.*}}split_stages = 1, strip = "columns"}
// CHECK-NOT:    fused.kernel
// CHECK:        return
// WHY:          // fuse: @few_long_columns: fused m -> y: cost model: fused
func @few_long_columns(%x: f32[1048576, 8]) -> (f32[1048576, 8]) {
  %m = tensor.mean %x {axis = [0], keepdims = true} : f32[1, 8]
  %y = tensor.sub %x, %m : f32[1048576, 8]
  return %y
}
