// RUN: not mlfuse opt %s 2>&1 | filecheck %s
// A value used before the op that defines it (SSA dominance), with the use's position.
// CHECK: use_before_definition.mlir:[[# @LINE + 4]]:17: error: use of undefined value %v
func @f(%x: buf<f32[N]>) -> (buf<f32[N]>) {
  %y = loops.alloc : buf<f32[N]>
  loops.parallel {extents = [N]} (%i: index) {
    loops.store %v, %y, %i
    %v = loops.load %x, %i : f32
  }
  return %y
}
