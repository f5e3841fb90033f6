// RUN: mlfuse opt %s --passes lower-tensor-to-loops,fuse,schedule-contractions --print-decisions | filecheck %s

// Attention's head merge (fusion/placement.py): the batched P.V contraction stores each
// point [B*H, S, D] where the transpose and the reshapes after it put the value, in
// [B, S, H*D]: b = i0 // H, h = i0 % H, column h * D + d. No [B, H, S, D] buffer, no
// copy kernel; the moves' reads fold back to the contraction's own point.

// CHECK-LABEL: func @head_merge
// CHECK-NOT:    loops.alloc : buf<f32[B, H, S, D]>
// CHECK:        fused.kernel {{.*}}extents = ["B*H", S, D], {{.*}}schedule = "contraction", {{.*}}"transpose = tensor.transpose"
// CHECK:          %[[H:.*]] = loops.dim {sym = "H"}
// CHECK:          %[[HI:.*]] = arith.mod %i0, %[[H]]
// CHECK:          %[[BI:.*]] = arith.floordiv %i0, %[[H]]
// CHECK:          %[[ACC:.*]] = loops.reduce
// CHECK:          %[[D:.*]] = loops.dim {sym = "D"}
// CHECK:          %[[ROW:.*]] = arith.mul %[[HI]], %[[D]]
// CHECK:          %[[COL:.*]] = arith.add %[[ROW]], %i2
// CHECK:          loops.store %[[ACC]], %{{.*}}, %[[BI]], %i1, %[[COL]]
// CHECK-NOT:    fused.kernel
func @head_merge(%p: f32[B, H, S, S], %v: f32[B, H, S, D]) -> (f32[B, S, D*H]) {
  %0 = tensor.reshape %p {shape = ["B*H", S, S]} : f32[B*H, S, S]
  %1 = tensor.reshape %v {shape = ["B*H", S, D]} : f32[B*H, S, D]
  %2 = tensor.matmul %0, %1 : f32[B*H, S, D]
  %3 = tensor.reshape %2 {shape = [B, H, S, D]} : f32[B, H, S, D]
  %4 = tensor.transpose %3 {perm = [0, 2, 1, 3]} : f32[B, S, H, D]
  %5 = tensor.reshape %4 {shape = [B, S, "D*H"]} : f32[B, S, D*H]
  return %5
}

// An output reading the contraction both at its own index and transposed is stored at
// no single place of the point: the transposed read is another index than the
// kernel's point, so the matmul is kept in memory (and its reader is a transpose-tiles
// kernel).

// CHECK-LABEL: func @read_twice
// CHECK:        fused.kernel {{.*}}schedule = "contraction", {{.*}}sources = ["m = tensor.matmul"]
// CHECK:        fused.kernel {{.*}}schedule = "transpose-tiles"
// CHECK-NOT:    fused.kernel
// CHECK: @head_merge: fused matmul -> reshape: cost model
// CHECK: @read_twice: kept m -> s, t: m (tensor.matmul) is read at another index than the kernel's own point
func @read_twice(%a: f32[N, N], %b: f32[N, N]) -> (f32[N, N]) {
  %m = tensor.matmul %a, %b : f32[N, N]
  %t = tensor.transpose %m {perm = [1, 0]} : f32[N, N]
  %s = tensor.add %t, %m : f32[N, N]
  return %s
}
