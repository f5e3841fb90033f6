// RUN: mlfuse opt %s --passes lower-tensor-to-loops | filecheck %s

// Transpose and reshape are index arithmetic on one load, never copies through a
// temporary. Transpose: output dim i is input dim perm[i].
// CHECK-LABEL: func @layout
// CHECK:        loops.parallel {extents = [C, B, 6], source = "tensor.transpose"} ([[I0:%[a-z0-9_]+]]: index, [[I1:%[a-z0-9_]+]]: index, [[I2:%[a-z0-9_]+]]: index) {
// CHECK-NEXT:     [[V:%[a-z0-9_]+]] = loops.load %x, [[I1]], [[I2]], [[I0]] : f32
// CHECK-NEXT:     loops.store [[V]], %t, [[I0]], [[I1]], [[I2]]

// Reshape [B, 6, C] -> [B, 2, 3, C]: the shared outer and inner dims map index to
// index; the split middle is linearized (i1 * 3 + i2).
// CHECK:        loops.parallel {extents = [B, 2, 3, C], source = "tensor.reshape"} ([[I0:%[a-z0-9_]+]]: index, [[I1:%[a-z0-9_]+]]: index, [[I2:%[a-z0-9_]+]]: index, [[I3:%[a-z0-9_]+]]: index) {
// CHECK-NEXT:     [[THREE:%[a-z0-9_]+]] = arith.constant {value = 3} : index
// CHECK-NEXT:     [[M:%[a-z0-9_]+]] = arith.mul [[I1]], [[THREE]] : index
// CHECK-NEXT:     [[FLAT:%[a-z0-9_]+]] = arith.add [[M]], [[I2]] : index
// CHECK-NEXT:     [[V:%[a-z0-9_]+]] = loops.load %x, [[I0]], [[FLAT]], [[I3]] : f32
// CHECK-NEXT:     loops.store [[V]], %r, [[I0]], [[I1]], [[I2]], [[I3]]
func @layout(%x: f32[B, 6, C]) -> (f32[C, B, 6], f32[B, 2, 3, C]) {
  %t = tensor.transpose %x {perm = [2, 0, 1]} : f32[C, B, 6]
  %r = tensor.reshape %x {shape = [B, 2, 3, C]} : f32[B, 2, 3, C]
  return %t, %r
}

// Reshape [N, H, W, C] -> [N, H*W, 8, C/8] (group norm over channels-last): the axes
// whose sizes multiply to the same on both sides map group by group, [H, W] <- H*W
// and [C] <- [8, C/8], so no index divides a position by C (which would mix the
// group, a kernel point, with the walk over C/8).
// CHECK-LABEL: func @groups
// CHECK:        loops.parallel {extents = [N, "H*W", 8, "C/8"], source = "tensor.reshape"} ([[I0:%[a-z0-9_]+]]: index, [[I1:%[a-z0-9_]+]]: index, [[I2:%[a-z0-9_]+]]: index, [[I3:%[a-z0-9_]+]]: index) {
// CHECK-NOT:      %C
// CHECK:          [[W:%[a-z0-9_]+]] = arith.mod [[I1]], %W : index
// CHECK-NEXT:     [[H:%[a-z0-9_]+]] = arith.floordiv [[I1]], %W : index
// CHECK-NEXT:     [[L:%[a-z0-9_]+]] = loops.dim {sym = "C/8"} : index
// CHECK-NEXT:     [[G:%[a-z0-9_]+]] = arith.mul [[I2]], [[L]] : index
// CHECK-NEXT:     [[C:%[a-z0-9_]+]] = arith.add [[G]], [[I3]] : index
// CHECK-NEXT:     [[V:%[a-z0-9_]+]] = loops.load %x, [[I0]], [[H]], [[W]], [[C]] : f32
func @groups(%x: f32[N, H, W, C]) -> (f32[N, H*W, 8, C/8]) {
  %r = tensor.reshape %x {shape = [N, "H*W", 8, "C/8"]} : f32[N, H*W, 8, C/8]
  return %r
}

// A transpose that moves only axes of one value ([N, K, 1] -> [N, 1, K]: a keepdims
// result turned round) keeps the elements in order: it is read as the reshape it is,
// its unit axis at index 0, so a reduction over the result reads x along its rows (it
// was x[i0, i2, i1], whose last index of one value hid the order from the planner).
// CHECK-LABEL: func @unit_axes
// CHECK:        loops.parallel {extents = [N, 1, K], source = "tensor.transpose"} ([[I0:%[a-z0-9_]+]]: index, [[I1:%[a-z0-9_]+]]: index, [[I2:%[a-z0-9_]+]]: index) {
// CHECK:          [[Z:%[a-z0-9_]+]] = arith.constant {value = 0} : index
// CHECK-NEXT:     [[V:%[a-z0-9_]+]] = loops.load %x, [[I0]], [[I2]], [[Z]] : f32
func @unit_axes(%x: f32[N, K, 1]) -> (f32[N, 1, K]) {
  %t = tensor.transpose %x {perm = [0, 2, 1]} : f32[N, 1, K]
  return %t
}
