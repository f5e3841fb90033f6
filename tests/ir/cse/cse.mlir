// RUN: mlfuse opt %s --passes cse | filecheck %s

// Identical pure ops (same name, operands, attributes, type) merge into the first;
// users are rewired to it.
// CHECK-LABEL: func @tensor_level
// CHECK-NEXT:   [[A:%[a-z0-9_]+]] = tensor.exp %x : f32[N]
// CHECK-NEXT:   [[S:%[a-z0-9_]+]] = tensor.add [[A]], [[A]] : f32[N]
// CHECK-NEXT:   return [[S]]
func @tensor_level(%x: f32[N]) -> (f32[N]) {
  %a = tensor.exp %x : f32[N]
  %b = tensor.exp %x : f32[N]
  %s = tensor.add %a, %b : f32[N]
  return %s
}

// Different attributes or operand order are different values: nothing merges.
// CHECK-LABEL: func @not_equal
// CHECK-NEXT:   %c1 = tensor.constant {value = 1.0} : f32[]
// CHECK-NEXT:   %c2 = tensor.constant {value = 2.0} : f32[]
// CHECK-NEXT:   %a = tensor.sub %x, %y : f32[N]
// CHECK-NEXT:   %b = tensor.sub %y, %x : f32[N]
// CHECK-NEXT:   %p = tensor.mul %a, %c1 : f32[N]
// CHECK-NEXT:   %q = tensor.mul %b, %c2 : f32[N]
// CHECK-NEXT:   %r = tensor.add %p, %q : f32[N]
// CHECK-NEXT:   return %r
func @not_equal(%x: f32[N], %y: f32[N]) -> (f32[N]) {
  %c1 = tensor.constant {value = 1.0} : f32[]
  %c2 = tensor.constant {value = 2.0} : f32[]
  %a = tensor.sub %x, %y : f32[N]
  %b = tensor.sub %y, %x : f32[N]
  %p = tensor.mul %a, %c1 : f32[N]
  %q = tensor.mul %b, %c2 : f32[N]
  %r = tensor.add %p, %q : f32[N]
  return %r
}

// Unused pure ops are dropped, also ones that only fed other unused ops.
// CHECK-LABEL: func @dead
// CHECK-NOT:    tensor.exp
// CHECK-NOT:    tensor.log
// CHECK:        [[R:%[a-z0-9_]+]] = tensor.relu %x : f32[N]
// CHECK-NEXT:   return [[R]]
func @dead(%x: f32[N]) -> (f32[N]) {
  %e = tensor.exp %x : f32[N]
  %l = tensor.log %e : f32[N]
  %r = tensor.relu %x : f32[N]
  return %r
}

// In loops: a load at the nest's point is reused inside the inner reduction (scopes
// look outward), a duplicate load inside the reduction body merges too, and so do the
// reductions' init constants; the two identical stores (side effects) both stay.
// CHECK-LABEL: func @loops_level
// CHECK:        loops.parallel {extents = [R, 1]} ([[I:%[a-z0-9_]+]]: index, [[J:%[a-z0-9_]+]]: index) {
// CHECK-NEXT:     [[ZERO:%[a-z0-9_]+]] = arith.constant {value = 0} : index
// CHECK-NEXT:     [[XI:%[a-z0-9_]+]] = loops.load %x, [[I]], [[ZERO]] : f32
// CHECK-NEXT:     [[INIT:%[a-z0-9_]+]] = arith.constant {value = 0.0} : f32
// CHECK-NEXT:     [[S1:%[a-z0-9_]+]] = loops.reduce [[INIT]] {combiner = "add", extent = C} : f32 ([[K:%[a-z0-9_]+]]: index) {
// CHECK-NEXT:       [[XK:%[a-z0-9_]+]] = loops.load %x, [[I]], [[K]] : f32
// CHECK-NEXT:       [[D:%[a-z0-9_]+]] = arith.sub [[XK]], [[XI]] : f32
// CHECK-NEXT:       [[P:%[a-z0-9_]+]] = arith.mul [[D]], [[D]] : f32
// CHECK-NEXT:       loops.yield [[P]]
// CHECK-NEXT:     }
// CHECK-NEXT:     [[S2:%[a-z0-9_]+]] = loops.reduce [[INIT]] {combiner = "add", extent = C}
// CHECK-NEXT:       loops.load %x, [[I]], {{%[a-z0-9_]+}} : f32
// CHECK:          loops.store [[S1]], %out, [[I]], [[J]]
// CHECK-NEXT:     loops.store [[S2]], %out, [[I]], [[J]]
// CHECK-NEXT:   }
func @loops_level(%x: buf<f32[R, C]>) -> (buf<f32[R, 1]>) {
  %out = loops.alloc : buf<f32[R, 1]>
  loops.parallel {extents = [R, 1]} (%i: index, %j: index) {
    %z = arith.constant {value = 0} : index
    %xi = loops.load %x, %i, %z : f32
    %init = arith.constant {value = 0.0} : f32
    %s1 = loops.reduce %init {combiner = "add", extent = C} : f32 (%k: index) {
      %z2 = arith.constant {value = 0} : index
      %xi2 = loops.load %x, %i, %z2 : f32
      %xk = loops.load %x, %i, %k : f32
      %xk2 = loops.load %x, %i, %k : f32
      %d = arith.sub %xk, %xi2 : f32
      %d2 = arith.sub %xk2, %xi : f32
      %p = arith.mul %d, %d2 : f32
      loops.yield %p
    }
    %init2 = arith.constant {value = 0.0} : f32
    %s2 = loops.reduce %init2 {combiner = "add", extent = C} : f32 (%k2: index) {
      %xk3 = loops.load %x, %i, %k2 : f32
      loops.yield %xk3
    }
    loops.store %s1, %out, %i, %j
    loops.store %s2, %out, %i, %j
  }
  return %out
}

// A reduction identical to one before it (same init, attributes and body, compared by
// structure: its own loop index and loads) merges into it, its users rewired; one
// whose body differs (another combiner, another value yielded) stays.
// CHECK-LABEL: func @identical_reductions
// CHECK:          [[INIT:%[a-z0-9_]+]] = arith.constant {value = 0.0} : f32
// CHECK-NEXT:     [[S1:%[a-z0-9_]+]] = loops.reduce [[INIT]] {combiner = "add", extent = C}
// CHECK-NEXT:       [[XK:%[a-z0-9_]+]] = loops.load %x, [[I:%[a-z0-9_]+]], {{%[a-z0-9_]+}} : f32
// CHECK-NEXT:       [[P:%[a-z0-9_]+]] = arith.mul [[XK]], [[XK]] : f32
// CHECK-NEXT:       loops.yield [[P]]
// CHECK-NEXT:     }
// CHECK-NEXT:     [[M:%[a-z0-9_]+]] = loops.reduce [[INIT]] {combiner = "max", extent = C}
// CHECK:          [[S3:%[a-z0-9_]+]] = loops.reduce [[INIT]] {combiner = "add", extent = C}
// CHECK-NEXT:       [[XK:%[a-z0-9_]+]] = loops.load %x, [[I]], {{%[a-z0-9_]+}} : f32
// CHECK-NEXT:       loops.yield [[XK]]
// CHECK-NEXT:     }
// CHECK-NEXT:     [[A:%[a-z0-9_]+]] = arith.add [[S1]], [[S1]] : f32
// CHECK-NEXT:     [[B:%[a-z0-9_]+]] = arith.add [[A]], [[M]] : f32
// CHECK-NEXT:     [[C:%[a-z0-9_]+]] = arith.add [[B]], [[S3]] : f32
func @identical_reductions(%x: buf<f32[R, C]>) -> (buf<f32[R]>) {
  %out = loops.alloc : buf<f32[R]>
  loops.parallel {extents = [R]} (%i: index) {
    %init = arith.constant {value = 0.0} : f32
    %s1 = loops.reduce %init {combiner = "add", extent = C} : f32 (%k: index) {
      %xk = loops.load %x, %i, %k : f32
      %p = arith.mul %xk, %xk : f32
      loops.yield %p
    }
    %s2 = loops.reduce %init {combiner = "add", extent = C} : f32 (%k2: index) {
      %xk2 = loops.load %x, %i, %k2 : f32
      %p2 = arith.mul %xk2, %xk2 : f32
      loops.yield %p2
    }
    %m = loops.reduce %init {combiner = "max", extent = C} : f32 (%k3: index) {
      %xk3 = loops.load %x, %i, %k3 : f32
      %p3 = arith.mul %xk3, %xk3 : f32
      loops.yield %p3
    }
    %s3 = loops.reduce %init {combiner = "add", extent = C} : f32 (%k4: index) {
      %xk4 = loops.load %x, %i, %k4 : f32
      loops.yield %xk4
    }
    %a = arith.add %s1, %s2 : f32
    %b = arith.add %a, %m : f32
    %c = arith.add %b, %s3 : f32
    loops.store %c, %out, %i
  }
  return %out
}
