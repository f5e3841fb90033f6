// RUN: mlfuse opt %s --passes lower-tensor-to-loops | filecheck %s

// Slice: x at start + i * step per axis; a negative step subtracts, a size-1 axis
// reads at its start.
// CHECK-LABEL: func @slice
// CHECK:        loops.parallel {extents = [1, N, 2], source = "tensor.slice"} ([[I0:%[a-z0-9_]+]]: index, [[I1:%[a-z0-9_]+]]: index, [[I2:%[a-z0-9_]+]]: index) {
// CHECK-NEXT:     [[TWO:%[a-z0-9_]+]] = arith.constant {value = 2} : index
// CHECK-NEXT:     [[FIVE:%[a-z0-9_]+]] = arith.constant {value = 5} : index
// CHECK-NEXT:     [[STEP:%[a-z0-9_]+]] = arith.mul [[I2]], [[FIVE]] : index
// CHECK-NEXT:     [[EIGHT:%[a-z0-9_]+]] = arith.constant {value = 8} : index
// CHECK-NEXT:     [[POS:%[a-z0-9_]+]] = arith.sub [[EIGHT]], [[STEP]] : index
// CHECK-NEXT:     [[V:%[a-z0-9_]+]] = loops.load %x, [[TWO]], [[I1]], [[POS]] : f32
// CHECK-NEXT:     loops.store [[V]], %s, [[I0]], [[I1]], [[I2]]
func @slice(%x: f32[4, N, 9]) -> (f32[1, N, 2]) {
  %s = tensor.slice %x {starts = [2, 0, 8], steps = [1, 1, -5], sizes = [1, N, 2]} : f32[1, N, 2]
  return %s
}

// Concat: every part is read at its own position on the axis, clamped into range
// (plain loads, so producers fuse), and a where on the running offset picks.
// CHECK-LABEL: func @concat
// CHECK:        loops.parallel {extents = [N, 7], source = "tensor.concat"} ([[I0:%[a-z0-9_]+]]: index, [[I1:%[a-z0-9_]+]]: index) {
// CHECK-NEXT:     [[LAST:%[a-z0-9_]+]] = arith.constant {value = 2} : index
// CHECK-NEXT:     [[J0:%[a-z0-9_]+]] = arith.minimum [[I1]], [[LAST]] : index
// CHECK-NEXT:     [[A:%[a-z0-9_]+]] = loops.load %a, [[I0]], [[J0]] : f32
// CHECK-NEXT:     [[THREE:%[a-z0-9_]+]] = arith.constant {value = 3} : index
// CHECK-NEXT:     [[J1:%[a-z0-9_]+]] = arith.sub [[I1]], [[THREE]] : index
// CHECK-NEXT:     [[ZERO:%[a-z0-9_]+]] = arith.constant {value = 0} : index
// CHECK-NEXT:     [[J1LO:%[a-z0-9_]+]] = arith.maximum [[J1]], [[ZERO]] : index
// CHECK-NEXT:     [[B:%[a-z0-9_]+]] = loops.load %b, [[I0]], [[J1LO]] : f32
// CHECK-NEXT:     [[IN0:%[a-z0-9_]+]] = arith.lt [[I1]], [[THREE]] : bool
// CHECK-NEXT:     [[V:%[a-z0-9_]+]] = arith.where [[IN0]], [[A]], [[B]] : f32
// CHECK-NEXT:     loops.store [[V]], %c, [[I0]], [[I1]]
func @concat(%a: f32[N, 3], %b: f32[N, 4]) -> (f32[N, 7]) {
  %c = tensor.concat %a, %b {axis = 1} : f32[N, 7]
  return %c
}

// Concat on a symbolic axis: the offset is a size read at run time.
// CHECK-LABEL: func @concat_symbolic
// CHECK:          [[N:%[A-Za-z0-9_]+]] = loops.dim {sym = "N"} : index
// CHECK:          arith.lt {{%[a-z0-9_]+}}, [[N]] : bool
func @concat_symbolic(%a: f32[N, 3]) -> (f32[2*N, 3]) {
  %c = tensor.concat %a, %a {axis = 0} : f32[2*N, 3]
  return %c
}

// Pad: x at idx - low, clamped, where idx - low is inside x on the padded axes.
// CHECK-LABEL: func @pad
// CHECK:        loops.parallel {extents = [N, 6], source = "tensor.pad"}
// CHECK:          [[V:%[a-z0-9_]+]] = loops.load %x,
// CHECK:          [[IN:%[a-z0-9_]+]] = arith.and {{%[a-z0-9_]+}}, {{%[a-z0-9_]+}} : bool
// CHECK-NEXT:     [[FILL:%[a-z0-9_]+]] = arith.constant {value = -1.5} : f32
// CHECK-NEXT:     [[R:%[a-z0-9_]+]] = arith.where [[IN]], [[V]], [[FILL]] : f32
func @pad(%x: f32[N, 3]) -> (f32[N, 6]) {
  %p = tensor.pad %x {low = [0, 1], high = [0, 2], value = -1.5} : f32[N, 6]
  return %p
}

// Gather: the loaded i32 index is cast to index, a negative one wrapped once; one
// still outside the axis reads a clamped element and yields nan.
// CHECK-LABEL: func @gather
// CHECK:        loops.parallel {extents = [B, S, D], source = "tensor.gather"} ([[I0:%[a-z0-9_]+]]: index, [[I1:%[a-z0-9_]+]]: index, [[I2:%[a-z0-9_]+]]: index) {
// CHECK-NEXT:     [[RAW:%[a-z0-9_]+]] = loops.load %ids, [[I0]], [[I1]] : i32
// CHECK-NEXT:     [[I:%[a-z0-9_]+]] = arith.cast [[RAW]] {dtype = "index"} : index
// CHECK-NEXT:     [[ZERO:%[a-z0-9_]+]] = arith.constant {value = 0} : index
// CHECK-NEXT:     [[V:%[A-Za-z0-9_]+]] = loops.dim {sym = "V"} : index
// CHECK-NEXT:     [[NEG:%[a-z0-9_]+]] = arith.lt [[I]], [[ZERO]] : bool
// CHECK-NEXT:     [[UP:%[a-z0-9_]+]] = arith.add [[I]], [[V]] : index
// CHECK-NEXT:     [[W:%[a-z0-9_]+]] = arith.where [[NEG]], [[UP]], [[I]] : index
// CHECK:          [[ROW:%[a-z0-9_]+]] = loops.load %table, {{%[a-z0-9_]+}}, [[I2]] : f32
// CHECK-NEXT:     [[NAN:%[a-z0-9_]+]] = arith.constant {value = nan} : f32
// CHECK-NEXT:     [[R:%[a-z0-9_]+]] = arith.where {{%[a-z0-9_]+}}, [[ROW]], [[NAN]] : f32
func @gather(%table: f32[V, D], %ids: i32[B, S]) -> (f32[B, S, D]) {
  %e = tensor.gather %table, %ids {axis = 0} : f32[B, S, D]
  return %e
}

// Iota: the index along the axis, cast.
// CHECK-LABEL: func @iota
// CHECK:        loops.parallel {extents = [4, 4], source = "tensor.iota"} ({{%[a-z0-9_]+}}: index, [[I1:%[a-z0-9_]+]]: index) {
// CHECK-NEXT:     [[V:%[a-z0-9_]+]] = arith.cast [[I1]] {dtype = "f16"} : f16
func @iota() -> (f16[4, 4]) {
  %t = tensor.iota {shape = [4, 4], axis = 1, dtype = "f16"} : f16[4, 4]
  return %t
}
