// RUN: mlfuse opt %s --passes lower-tensor-to-loops,fuse,flatten-row-nests --dim N=32 --dim C=256 --dim H=64 --dim W=64 --print-decisions | filecheck %s

// Group norm written through a view of more than three axes: its statistics reduce
// several axes of the reshape, so the row kernel's nests read x through the view's
// unravel of ``(g * C/8 + k0) * (H*W) + k1``. That is a row-major walk of the nest
// from a base that is a whole number of rows (index_forms.access_walk): the kernel is
// one (the reshape's copy fused, not stored), and flatten-row-nests walks each nest as
// one loop r with the read at the unravel of ``g * (C*H*W/8) + r``, which codegen
// addresses at row_base + r (no divmod into k0, k1 and back).
// CHECK-LABEL: func @group_norm_4d
// CHECK-NEXT:   loops.alloc : buf<f32[N, C, H, W]>
// CHECK-NEXT:   fused.kernel {extents = [N, 8], flat_nests = {{\[}}["C/8", "H*W"]], {{.*}}schedule = "row"
// CHECK:          %[[S:.*]] = loops.dim {sym = "C*H*W/8"} : index
// CHECK-NEXT:     %[[B:.*]] = arith.mul %i1, %[[S]] : index
// CHECK:          loops.reduce {{.*}} {combiner = "add", extent = "C*H*W/8"} : f32 (%[[K:.*]]: index) {
// CHECK-NEXT:       %[[X:.*]] = arith.add %[[B]], %[[K]] : index
// CHECK-NEXT:       %[[w:.*]] = arith.mod %[[X]], %{{.*}} : index
// CHECK-NEXT:       %[[q:.*]] = arith.floordiv %[[X]], %{{.*}} : index
// CHECK-NEXT:       %[[h:.*]] = arith.mod %[[q]], %{{.*}} : index
// CHECK-NEXT:       %[[c:.*]] = arith.floordiv %[[q]], %{{.*}} : index
// CHECK-NEXT:       loops.load %x, %i0, %[[c]], %[[h]], %[[w]] : f32
// CHECK:          loops.for {extent = "C*H*W/8"} (%[[E:.*]]: index) {
// CHECK-NEXT:       %[[EX:.*]] = arith.add %[[B]], %[[E]] : index
// CHECK:            loops.store {{.*}}, %i0,
// CHECK-NOT:    fused.kernel
// CHECK:        return
func @group_norm_4d(%x: f32[N, C, H, W]) -> (f32[N, C, H, W]) {
  %rows = tensor.reshape %x {shape = [N, 8, "C/8", "H*W"]} : f32[N, 8, C/8, H*W]
  %m = tensor.mean %rows {axis = [2, 3], keepdims = true} : f32[N, 8, 1, 1]
  %d = tensor.sub %rows, %m : f32[N, 8, C/8, H*W]
  %0 = tensor.mul %d, %d : f32[N, 8, C/8, H*W]
  %v = tensor.mean %0 {axis = [2, 3], keepdims = true} : f32[N, 8, 1, 1]
  %1 = tensor.constant {value = 1e-05} : f32[]
  %2 = tensor.add %v, %1 : f32[N, 8, 1, 1]
  %3 = tensor.rsqrt %2 : f32[N, 8, 1, 1]
  %4 = tensor.mul %d, %3 : f32[N, 8, C/8, H*W]
  %5 = tensor.reshape %4 {shape = [N, C, H, W]} : f32[N, C, H, W]
  return %5
}

// Through a 5-d view the reshape splits C only: x[n, g * C/4 + k0, k1, k2], a row-
// major walk of the three levels over x's axes [C, H, W]. The per-channel affine
// reads g and b at the outer level alone (one element for H*W steps: no stream, so
// the kernel still reads along rows), and the whole block is one row kernel; the
// flattened nests read and store x at the unravel of ``g * (C*H*W/4) + r``.
// CHECK-LABEL: func @group_norm_5d_affine
// CHECK-NEXT:   loops.alloc : buf<f32[N, C, H, W]>
// CHECK-NEXT:   fused.kernel {extents = [N, 4], flat_nests = {{\[}}["C/4", H, W]], {{.*}}schedule = "row"
// CHECK:          %[[S:.*]] = loops.dim {sym = "C*H*W/4"} : index
// CHECK-NEXT:     %[[B:.*]] = arith.mul %i1, %[[S]] : index
// CHECK:          loops.for {extent = "C*H*W/4"} (%[[E:.*]]: index) {
// CHECK:            loops.load %g,
// CHECK:            %[[X:.*]] = arith.add %[[B]], %[[E]] : index
// CHECK-NEXT:       %[[w:.*]] = arith.mod %[[X]], %{{.*}} : index
// CHECK-NEXT:       %[[q:.*]] = arith.floordiv %[[X]], %{{.*}} : index
// CHECK-NEXT:       %[[h:.*]] = arith.mod %[[q]], %{{.*}} : index
// CHECK-NEXT:       %[[c:.*]] = arith.floordiv %[[q]], %{{.*}} : index
// CHECK-NEXT:       loops.load %x, %i0, %[[c]], %[[h]], %[[w]] : f32
// CHECK:            loops.store {{.*}}, %i0, %[[c]], %[[h]], %[[w]]
// CHECK-NOT:    fused.kernel
// CHECK:        return
func @group_norm_5d_affine(%x: f32[N, C, H, W], %g: f32[C], %b: f32[C]) -> (f32[N, C, H, W]) {
  %rows = tensor.reshape %x {shape = [N, 4, "C/4", H, W]} : f32[N, 4, C/4, H, W]
  %m = tensor.mean %rows {axis = [2, 3, 4], keepdims = true} : f32[N, 4, 1, 1, 1]
  %d = tensor.sub %rows, %m : f32[N, 4, C/4, H, W]
  %0 = tensor.mul %d, %d : f32[N, 4, C/4, H, W]
  %v = tensor.mean %0 {axis = [2, 3, 4], keepdims = true} : f32[N, 4, 1, 1, 1]
  %1 = tensor.constant {value = 1e-05} : f32[]
  %2 = tensor.add %v, %1 : f32[N, 4, 1, 1, 1]
  %3 = tensor.rsqrt %2 : f32[N, 4, 1, 1, 1]
  %4 = tensor.mul %d, %3 : f32[N, 4, C/4, H, W]
  %y = tensor.reshape %4 {shape = [N, C, H, W]} : f32[N, C, H, W]
  %5 = tensor.reshape %g {shape = [C, 1, 1]} : f32[C, 1, 1]
  %6 = tensor.mul %y, %5 : f32[N, C, H, W]
  %7 = tensor.reshape %b {shape = [C, 1, 1]} : f32[C, 1, 1]
  %8 = tensor.add %6, %7 : f32[N, C, H, W]
  return %8
}

// The group statistics alone: a split reduction at these sizes (256 rows of 131072).
// Its nest is flattened too, so the first stage reads at row_base + kf.
// CHECK-LABEL: func @group_mean
// CHECK:        fused.kernel {extents = [N, 8], flat_nests = {{\[}}["C/8", "H*W"]], {{.*}}schedule = "split-rows"
// CHECK:          loops.reduce {{.*}} {combiner = "add", extent = "C*H*W/8"} : f32 (%[[K:.*]]: index) {
// CHECK:            %[[X:.*]] = arith.add %{{.*}}, %[[K]] : index
// CHECK:            arith.mod %[[X]]
func @group_mean(%x: f32[N, C, H, W]) -> (f32[N, 8, 1, 1]) {
  %rows = tensor.reshape %x {shape = [N, 8, "C/8", "H*W"]} : f32[N, 8, C/8, H*W]
  %m = tensor.mean %rows {axis = [2, 3], keepdims = true} : f32[N, 8, 1, 1]
  return %m
}

// The decisions: the reshape's copy fused into each kernel (it was kept, priced as a
// pointwise walk of each point's rows, before the walk was seen), the 5-d view's
// statistics fused with its affine epilogue, and the split reduction's nest flattened.
// CHECK: fuse: @group_norm_4d: fused rows -> d, m
// CHECK: fuse: @group_norm_5d_affine: fused v -> add
// CHECK: fuse: @group_norm_5d_affine: fused rows -> d, m
// CHECK: flatten-row-nests: group_mean_0: its nests walked as one loop each (split-rows)
