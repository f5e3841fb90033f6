// RUN: not mlfuse opt %s 2>&1 | filecheck %s
// CHECK: load_rank.mlir:[[# @LINE + 4]]:10: error: loops.load: 2 indices for a rank-1 buffer
func @f(%x: buf<f32[N]>) -> (buf<f32[N]>) {
  %y = loops.alloc : buf<f32[N]>
  loops.parallel {extents = [N]} (%i: index) {
    %v = loops.load %x, %i, %i : f32
    loops.store %v, %y, %i
  }
  return %y
}
