// RUN: mlfuse opt %s --passes lower-tensor-to-loops,fuse --print-decisions | filecheck %s

// Rematerialization: %e (a cheap pointwise op) feeds a whole-tensor sum and an
// elementwise op that reads the sum, which cannot share a kernel. Instead of storing
// %e, each of the two kernels recomputes it from %x: no buffer for %e, one exp in each.
// CHECK-LABEL: func @rematerialize
// CHECK-NEXT:   %s = loops.alloc : buf<f32[]>
// CHECK-NEXT:   %y = loops.alloc : buf<f32[N]>
// CHECK-NEXT:   fused.kernel {extents = [], {{.*}}sources = ["e = tensor.exp", "s = tensor.sum"]{{.*}}} () {
// CHECK:          loops.reduce {{.*}} {combiner = "add", extent = N} : f32 ([[K:%[a-z0-9_]+]]: index) {
// CHECK-NEXT:       [[X:%[a-z0-9_]+]] = loops.load %x, [[K]] : f32
// CHECK-NEXT:       [[E:%[a-z0-9_]+]] = arith.exp [[X]] : f32
// CHECK-NEXT:       loops.yield [[E]]
// CHECK:        fused.kernel {extents = [N], {{.*}}sources = ["e = tensor.exp", "y = tensor.mul"]{{.*}}} ([[I:%[a-z0-9_]+]]: index) {
// CHECK-NEXT:     [[X:%[a-z0-9_]+]] = loops.load %x, [[I]] : f32
// CHECK-NEXT:     [[E:%[a-z0-9_]+]] = arith.exp [[X]] : f32
// CHECK:          loops.store {{%[a-z0-9_]+}}, %y, [[I]]
// CHECK:        return %s, %y
func @rematerialize(%x: f32[N]) -> (f32[], f32[N]) {
  %e = tensor.exp %x : f32[N]
  %s = tensor.sum %e {axis = [0]} : f32[]
  %y = tensor.mul %e, %s : f32[N]
  return %s, %y
}

// A whole-tensor sum and its prologue value also returned: one kernel, the value
// stored by a loop that reads no reduction (its split plan stores it as each chunk
// is reduced: codegen/split_stages.py).
// CHECK-LABEL: func @stored_as_reduced
// CHECK:        fused.kernel {extents = [], {{.*}}sources = ["e = tensor.exp", "s = tensor.sum"], split_stages = 1{{.*}}} () {
// CHECK:          loops.reduce {{.*}} {combiner = "add", extent = N}
// CHECK:          loops.store {{%[a-z0-9_]+}}, %s
// CHECK:          loops.for {extent = N} ([[K:%[a-z0-9_]+]]: index) {
// CHECK:            loops.store {{%[a-z0-9_]+}}, %e, [[K]]
// CHECK-NOT:    fused.kernel
// CHECK:        return %s, %e
func @stored_as_reduced(%x: f32[N]) -> (f32[], f32[N]) {
  %e = tensor.exp %x : f32[N]
  %s = tensor.sum %e {axis = [0]} : f32[]
  return %s, %e
}

// Horizontal fusion: two independent nests over the same space share one launch,
// each storing its own result.
// CHECK-LABEL: func @horizontal
// CHECK-NEXT:   %a = loops.alloc : buf<f32[N]>
// CHECK-NEXT:   %b = loops.alloc : buf<f32[N]>
// CHECK-NEXT:   fused.kernel {extents = [N], {{.*}}sources = ["a = tensor.exp", "b = tensor.sin"]{{.*}}} ([[I:%[a-z0-9_]+]]: index) {
// CHECK:          loops.store {{%[a-z0-9_]+}}, %a, [[I]]
// CHECK:          loops.store {{%[a-z0-9_]+}}, %b, [[I]]
// CHECK-NEXT:   }
// CHECK-NEXT:   return %a, %b
func @horizontal(%x: f32[N], %y: f32[N]) -> (f32[N], f32[N]) {
  %a = tensor.exp %x : f32[N]
  %b = tensor.sin %y : f32[N]
  return %a, %b
}

// ...but not over different spaces: two kernels, and no decision (nothing to try).
// CHECK-LABEL: func @not_horizontal
// CHECK:        fused.kernel {extents = [N], {{.*}}sources = ["a = tensor.exp"]{{.*}}}
// CHECK:        fused.kernel {extents = [M], {{.*}}sources = ["b = tensor.sin"]{{.*}}}
func @not_horizontal(%x: f32[N], %y: f32[M]) -> (f32[N], f32[M]) {
  %a = tensor.exp %x : f32[N]
  %b = tensor.sin %y : f32[M]
  return %a, %b
}

// CHECK:      // fuse: @rematerialize: rematerialized e -> s, y: cost model: fused {{[0-9.]+}} us < separate {{[0-9.]+}} us
// CHECK-NEXT: // fuse: @stored_as_reduced: multi-output e -> s: cost model
// CHECK-NEXT: // fuse: @horizontal: horizontal a -> b: cost model
// CHECK-NOT:  @not_horizontal
