// RUN: mlfuse opt %s --passes lower-tensor-to-loops | filecheck %s
// RUN: mlfuse opt %s --passes lower-tensor-to-loops | filecheck %s --check-prefix NONE

// Every tensor op becomes one loops.parallel over its result shape that stores into
// its own fresh buffer at the identity index; no tensor op is left.
// NONE-NOT: = tensor.

// Broadcasting is index arithmetic on the load, never a copy: a [D] bias is read at the
// last index only, a [B, 1] operand at constant index 0. A scalar constant gets no
// buffer: the nest that reads it materializes an arith.constant.
// CHECK-LABEL: func @bias_act(%x: buf<f32[B, D]>, %b: buf<f32[D]>, %s: buf<f32[B, 1]>) -> (buf<f32[B, D]>)
// CHECK-NEXT:   %y = loops.alloc : buf<f32[B, D]>
// CHECK-NEXT:   loops.parallel {extents = [B, D], source = "tensor.add"} ([[I:%[a-z0-9_]+]]: index, [[J:%[a-z0-9_]+]]: index) {
// CHECK-NEXT:     [[X:%[a-z0-9_]+]] = loops.load %x, [[I]], [[J]] : f32
// CHECK-NEXT:     [[B:%[a-z0-9_]+]] = loops.load %b, [[J]] : f32
// CHECK-NEXT:     [[SUM:%[a-z0-9_]+]] = arith.add [[X]], [[B]] : f32
// CHECK-NEXT:     loops.store [[SUM]], %y, [[I]], [[J]]
// CHECK-NEXT:   }
// CHECK-NEXT:   %z = loops.alloc : buf<f32[B, D]>
// CHECK-NEXT:   loops.parallel {extents = [B, D], source = "tensor.mul"} ([[I:%[a-z0-9_]+]]: index, [[J:%[a-z0-9_]+]]: index) {
// CHECK-NEXT:     [[Y:%[a-z0-9_]+]] = loops.load %y, [[I]], [[J]] : f32
// CHECK-NEXT:     [[C:%[a-z0-9_]+]] = arith.constant {value = 2.0} : f32
// CHECK-NEXT:     [[P:%[a-z0-9_]+]] = arith.mul [[Y]], [[C]] : f32
// CHECK-NEXT:     loops.store [[P]], %z, [[I]], [[J]]
// CHECK-NEXT:   }
// CHECK-NEXT:   %w = loops.alloc : buf<f32[B, D]>
// CHECK-NEXT:   loops.parallel {extents = [B, D], source = "tensor.sub"} ([[I:%[a-z0-9_]+]]: index, [[J:%[a-z0-9_]+]]: index) {
// CHECK-NEXT:     [[Z:%[a-z0-9_]+]] = loops.load %z, [[I]], [[J]] : f32
// CHECK-NEXT:     [[ZERO:%[a-z0-9_]+]] = arith.constant {value = 0} : index
// CHECK-NEXT:     [[S:%[a-z0-9_]+]] = loops.load %s, [[I]], [[ZERO]] : f32
// CHECK-NEXT:     [[D:%[a-z0-9_]+]] = arith.sub [[Z]], [[S]] : f32
// CHECK-NEXT:     loops.store [[D]], %w, [[I]], [[J]]
// CHECK-NEXT:   }
// CHECK-NEXT:   return %w
func @bias_act(%x: f32[B, D], %b: f32[D], %s: f32[B, 1]) -> (f32[B, D]) {
  %c = tensor.constant {value = 2.0} : f32[]
  %y = tensor.add %x, %b : f32[B, D]
  %z = tensor.mul %y, %c : f32[B, D]
  %w = tensor.sub %z, %s : f32[B, D]
  return %w
}

// Each result owns its buffer: a returned parameter, and a value returned a second
// time, get a copy nest; the first return of %r is its own buffer.
// CHECK-LABEL: func @returns
// CHECK:        %r = loops.alloc
// CHECK:        %x_copy = loops.alloc : buf<f32[N]>
// CHECK-NEXT:   loops.parallel {extents = [N], source = "copy"} ([[I:%[a-z0-9_]+]]: index) {
// CHECK-NEXT:     [[V:%[a-z0-9_]+]] = loops.load %x, [[I]] : f32
// CHECK-NEXT:     loops.store [[V]], %x_copy, [[I]]
// CHECK-NEXT:   }
// CHECK-NEXT:   %r_copy = loops.alloc : buf<f32[N]>
// CHECK-NEXT:   loops.parallel {extents = [N], source = "copy"} ([[I:%[a-z0-9_]+]]: index) {
// CHECK-NEXT:     [[V:%[a-z0-9_]+]] = loops.load %r, [[I]] : f32
// CHECK-NEXT:     loops.store [[V]], %r_copy, [[I]]
// CHECK-NEXT:   }
// CHECK-NEXT:   return %x_copy, %r, %r_copy
func @returns(%x: f32[N]) -> (f32[N], f32[N], f32[N]) {
  %r = tensor.relu %x : f32[N]
  return %x, %r, %r
}
