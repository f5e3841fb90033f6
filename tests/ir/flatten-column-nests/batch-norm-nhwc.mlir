// RUN: mlfuse opt %s --passes lower-tensor-to-loops,fuse,flatten-column-nests --dim N=32 --dim H=56 --dim W=56 --dim C=64 --dim L=1024 --print-decisions | filecheck %s

// flatten-column-nests (mlfuse/transforms/flatten_column_nests.py): a kernel over
// columns whose reduced values lie over neighbouring axes ([N, H, W] of NHWC) walks
// each nest as one loop over their product, the levels' indices the row-major unravel
// of its index (codegen addresses them at X * C + c: flat_rows._merged_step), so the
// column plans of one reduced axis take it.

// Batch norm's training step over NHWC, its statistics also returned: one kernel (the
// planner priced the flattened nests: column stages, split_stages = 1), where the
// nests made three. (The variance is in the mean's pass, shifted by a sample of each
// column, moments.py: the loads before the loop.)
// CHECK-LABEL: func @batch_norm_nhwc
// CHECK:        fused.kernel {extents = [C], flat_nests = {{\[}}[N, H, W]], {{.*}}schedule = "strips", {{.*}}split_stages = 1, strip = "columns"} (%i0: index) {
// CHECK:          loops.reduce {{.*}} {combiner = "add", extent = "H*N*W"} : f32 (%[[X:.*]]: index) {
// CHECK-NEXT:       %[[w:.*]] = arith.mod %[[X]], %[[W:.*]] : index
// CHECK-NEXT:       %[[q:.*]] = arith.floordiv %[[X]], %[[W]] : index
// CHECK-NEXT:       %[[h:.*]] = arith.mod %[[q]], %[[H:.*]] : index
// CHECK-NEXT:       %[[n:.*]] = arith.floordiv %[[q]], %[[H]] : index
// CHECK-NEXT:       loops.load %x, %[[n]], %[[h]], %[[w]], %i0 : f32
// CHECK-NOT:      loops.reduce {{.*}} extent = "N"
// CHECK:          loops.for {extent = "H*N*W"}
// CHECK-NOT:    fused.kernel
func @batch_norm_nhwc(%x: f32[N, H, W, C], %g: f32[C], %b: f32[C]) -> (f32[N, H, W, C], f32[C], f32[C]) {
  %m = tensor.mean %x {axis = [0, 1, 2], keepdims = false} : f32[C]
  %d = tensor.sub %x, %m : f32[N, H, W, C]
  %sq = tensor.mul %d, %d : f32[N, H, W, C]
  %v = tensor.mean %sq {axis = [0, 1, 2], keepdims = false} : f32[C]
  %e = tensor.constant {value = 1e-05} : f32[]
  %ve = tensor.add %v, %e : f32[C]
  %r = tensor.rsqrt %ve : f32[C]
  %y = tensor.mul %d, %r : f32[N, H, W, C]
  %yg = tensor.mul %y, %g : f32[N, H, W, C]
  %z = tensor.add %yg, %b : f32[N, H, W, C]
  return %z, %m, %v
}

// A sequence's batch norm over [N, L] of [N, L, C]: the same, two levels.
// CHECK-LABEL: func @batch_norm_nlc
// CHECK:        fused.kernel {extents = [C], flat_nests = {{\[}}[N, L]], {{.*}}split_stages = 1, strip = "columns"}
// CHECK:          loops.reduce {{.*}} {combiner = "add", extent = "L*N"}
// CHECK-NOT:    fused.kernel
func @batch_norm_nlc(%x: f32[N, L, C]) -> (f32[N, L, C]) {
  %m = tensor.mean %x {axis = [0, 1], keepdims = true} : f32[1, 1, C]
  %d = tensor.sub %x, %m : f32[N, L, C]
  %sq = tensor.mul %d, %d : f32[N, L, C]
  %v = tensor.mean %sq {axis = [0, 1], keepdims = true} : f32[1, 1, C]
  %e = tensor.constant {value = 1e-05} : f32[]
  %ve = tensor.add %v, %e : f32[1, 1, C]
  %r = tensor.rsqrt %ve : f32[1, 1, C]
  %y = tensor.mul %d, %r : f32[N, L, C]
  return %y
}

// Centring over [H, W] of NHWC (points [N, C]): the nest is the middle axes; its
// levels' unravel is the access's indices 1 and 2, between the points' n and c.
// CHECK-LABEL: func @spatial_centring_nhwc
// CHECK:        fused.kernel {extents = [N, C], flat_nests = {{\[}}[H, W]], {{.*}}strip = "columns"}
// CHECK:          loops.reduce {{.*}} extent = "H*W"} : f32 (%[[Y:.*]]: index) {
// CHECK:            loops.load %x, %i0, {{%.*}}, {{%.*}}, %i1 : f32
func @spatial_centring_nhwc(%x: f32[N, H, W, C]) -> (f32[N, H, W, C]) {
  %m = tensor.mean %x {axis = [1, 2], keepdims = true} : f32[N, 1, 1, C]
  %y = tensor.sub %x, %m : f32[N, H, W, C]
  return %y
}

// A nest whose levels are not neighbouring indices of a read (x read transposed over
// [H, W]: x[n, w, h, c]) is left as it is.
// CHECK-LABEL: func @transposed_read
// CHECK-NOT:    flat_nests
// CHECK:        loops.reduce {{.*}} extent = H}
func @transposed_read(%x: f32[N, W, H, C]) -> (f32[N, H, W, C]) {
  %t = tensor.transpose %x {perm = [0, 2, 1, 3]} : f32[N, H, W, C]
  %m = tensor.mean %t {axis = [1, 2], keepdims = true} : f32[N, 1, 1, C]
  %y = tensor.sub %t, %m : f32[N, H, W, C]
  return %y
}

// The pass's remarks (--print-decisions), printed after the module: none for the last.
// CHECK:        // flatten-column-nests: batch_norm_nhwc_0: its nests walked as one loop each (strips)
// CHECK-NEXT:   // flatten-column-nests: batch_norm_nlc_0: its nests walked as one loop each (strips)
// CHECK-NEXT:   // flatten-column-nests: spatial_centring_nhwc_0: its nests walked as one loop each (strips)
// CHECK-NOT:    transposed_read
