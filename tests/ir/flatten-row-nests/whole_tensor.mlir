// RUN: mlfuse opt %s --passes lower-tensor-to-loops,fuse,flatten-row-nests --dim B=4096 --dim D=4096 | filecheck %s

// A whole tensor's reduction over [B, D] with its prologue value also returned: one
// kernel over [] (fusion prices it flattened). As strips over rows its nests would be
// one block for the whole tensor; flattened, a row kernel over B*D with a split plan,
// whose stage stores d as each chunk is reduced (codegen/split_stages.py).
// CHECK-LABEL: func @loss
// CHECK:        fused.kernel {extents = [], flat_nests = {{\[}}[B, D]], {{.*}}schedule = "row"{{.*}}split_stages = 1{{.*}}} () {
// CHECK:          loops.reduce {{.*}} {combiner = "add", extent = "B*D"}
// CHECK:          loops.for {extent = "B*D"}
// CHECK:            loops.store {{%[a-z0-9_]+}}, %d,
// CHECK-NOT:    fused.kernel
// CHECK:        return %d, %mean
func @loss(%p: f32[B, D], %t: f32[B, D]) -> (f32[B, D], f32[]) {
  %d = tensor.sub %p, %t : f32[B, D]
  %sq = tensor.mul %d, %d : f32[B, D]
  %mean = tensor.mean %sq {axis = [0, 1]} : f32[]
  return %d, %mean
}
