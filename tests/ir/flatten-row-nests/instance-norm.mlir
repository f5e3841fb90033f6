// RUN: mlfuse opt %s --passes lower-tensor-to-loops,fuse,flatten-row-nests --dim N=64 --dim C=512 --dim H=16 --dim W=16 --print-decisions | filecheck %s

// flatten-row-nests (mlfuse/transforms/flatten_row_nests.py): a rows kernel whose
// reduced values lie over trailing axes [H, W] walks each nest as one loop over H*W,
// the levels' indices the row-major unravel of its index, and takes short rows.

// Instance norm at 16 x 16 pixels: the statistics and the epilogue, each one loop of
// H*W; the kernel now a row kernel with its short-row plan (warp_rows).
// CHECK-LABEL: func @instance_norm
// CHECK:        fused.kernel {extents = [N, C], flat_nests = {{\[}}[H, W]], {{.*}}schedule = "row"{{.*}}warp_rows = 1} (%i0: index, %i1: index) {
// CHECK:          loops.reduce {{.*}} {combiner = "add", extent = "H*W"} : f32 (%[[K:.*]]: index) {
// CHECK-NEXT:       %[[W:.*]] = loops.dim {sym = "W"} : index
// CHECK-NEXT:       %[[w:.*]] = arith.mod %[[K]], %[[W]] : index
// CHECK-NEXT:       %[[h:.*]] = arith.floordiv %[[K]], %[[W]] : index
// CHECK-NEXT:       loops.load %x, %i0, %i1, %[[h]], %[[w]] : f32
// CHECK-NOT:      loops.reduce {{.*}} extent = "H"
// CHECK:          loops.for {extent = "H*W"} (%[[E:.*]]: index) {
// CHECK-NEXT:       %[[EW:.*]] = loops.dim {sym = "W"} : index
// CHECK-NEXT:       %[[ew:.*]] = arith.mod %[[E]], %[[EW]] : index
// CHECK-NEXT:       %[[eh:.*]] = arith.floordiv %[[E]], %[[EW]] : index
// CHECK:            loops.store {{.*}}, %i0, %i1, %[[eh]], %[[ew]]
func @instance_norm(%x: f32[N, C, H, W]) -> (f32[N, C, H, W]) {
  %m = tensor.mean %x {axis = [2, 3], keepdims = true} : f32[N, C, 1, 1]
  %d = tensor.sub %x, %m : f32[N, C, H, W]
  %sq = tensor.mul %d, %d : f32[N, C, H, W]
  %v = tensor.mean %sq {axis = [2, 3], keepdims = true} : f32[N, C, 1, 1]
  %e = tensor.constant {value = 1e-05} : f32[]
  %ve = tensor.add %v, %e : f32[N, C, 1, 1]
  %r = tensor.rsqrt %ve : f32[N, C, 1, 1]
  %y = tensor.mul %d, %r : f32[N, C, H, W]
  return %y
}

// Long rows (128 x 128 pixels) keep the strips kernel over rows: a block a row walks
// the nest as one flat loop already, in 16-byte vectors.
// CHECK-LABEL: func @long_rows
// CHECK:        fused.kernel {{.*}}schedule = "strips"{{.*}}strip = "rows"
// CHECK:          loops.reduce {{.*}} extent = 128} : f32
func @long_rows(%x: f32[N, C, 128, 128]) -> (f32[N, C, 128, 128]) {
  %m = tensor.mean %x {axis = [2, 3], keepdims = true} : f32[N, C, 1, 1]
  %d = tensor.sub %x, %m : f32[N, C, 128, 128]
  return %d
}

// Batch norm's statistics over [N, H, W] of NCHW: the nest's values are not
// consecutive (C lies between N and H). Flattened, the index is the unravel of one X
// with the quotient left at axis 0, C's index between: codegen reads it as segments of
// H*W contiguous values (flat_rows.SegmentedAccess). Kept where it gives a row kernel,
// whose split plan spreads few channels over the GPU (split_stages = 1).
// CHECK-LABEL: func @batch_statistics
// CHECK:        fused.kernel {extents = [C], flat_nests = {{\[}}[N, H, W]], {{.*}}schedule = "row", {{.*}}split_stages = 1
// CHECK:          loops.reduce {{.*}} {combiner = "add", extent = "H*N*W"} : f32 (%[[X:.*]]: index) {
// CHECK-NEXT:       %[[W2:.*]] = loops.dim {sym = "W"} : index
// CHECK-NEXT:       %[[w2:.*]] = arith.mod %[[X]], %[[W2]] : index
// CHECK-NEXT:       %[[q:.*]] = arith.floordiv %[[X]], %[[W2]] : index
// CHECK-NEXT:       %[[H2:.*]] = loops.dim {sym = "H"} : index
// CHECK-NEXT:       %[[h2:.*]] = arith.mod %[[q]], %[[H2]] : index
// CHECK-NEXT:       %[[n2:.*]] = arith.floordiv %[[q]], %[[H2]] : index
// CHECK-NEXT:       loops.load %x, %[[n2]], %i0, %[[h2]], %[[w2]] : f32
func @batch_statistics(%x: f32[N, C, H, W]) -> (f32[1, C, 1, 1]) {
  %m = tensor.mean %x {axis = [0, 2, 3], keepdims = true} : f32[1, C, 1, 1]
  return %m
}

// The pass says what it did (mlfuse opt --print-decisions), after the IR.
// CHECK: // flatten-row-nests: instance_norm_0: its nests walked as one loop each (row)
// CHECK: // flatten-row-nests: batch_statistics_0: its nests walked as one loop each (row)
// CHECK-NOT: flatten-row-nests: long_rows
