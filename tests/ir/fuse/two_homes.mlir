// RUN: mlfuse opt %s --passes lower-tensor-to-loops,fuse,schedule-contractions --dim N=2 --print-decisions | filecheck %s

// The first block of a resnet stage: the residual add's inputs both come from convs
// (conv3 and the downsample conv, each with its bias), and the block output y has two
// readers (the next block's first conv, and its residual add). Each conv is priced as
// the home of the add + relu epilogue (the other's raw result read once by it); the
// cheaper one hosts it and y is stored once, rather than both convs storing raw
// results and every reader recomputing y in its prologue. Two contraction kernels for
// the block, the add + relu in one of their epilogues.

// CHECK-LABEL: func @stage_entry
// CHECK:        fused.kernel {{.*}}schedule = "contraction", {{.*}}sources = ["{{.*}} = tensor.conv2d"]
// CHECK-NOT:      arith.relu
// CHECK:        fused.kernel {{.*}}schedule = "contraction", {{.*}}"y = tensor.relu"
// CHECK:          loops.reduce
// CHECK:          arith.relu
// CHECK:          loops.store %{{.*}}, %y,
// CHECK:        fused.kernel {{.*}}schedule = "contraction"
// CHECK-NOT:      "y = tensor.relu"
// CHECK:          loops.load %y,
// CHECK:        fused.kernel {{.*}}schedule = "contraction"
// CHECK-NOT:      "y = tensor.relu"
// CHECK:          loops.load %y,
// CHECK-NOT:    fused.kernel
// CHECK: kept y -> {{.*}}: {{.*}}runs once as {{.*}}'s epilogue ({{.*}} us; as {{.*}}'s: {{.*}} us)
// CHECK: kept {{.*}}: stores its raw result: the epilogue after it runs in {{.*}}'s kernel, priced the cheaper home
func @stage_entry(%x: f32[N, 64, 56, 56], %w3: f32[256, 64, 1, 1], %wd: f32[256, 64, 1, 1], %b3: f32[256], %bd: f32[256], %w1: f32[64, 256, 1, 1], %w4: f32[256, 64, 1, 1]) -> (f32[N, 256, 56, 56]) {
  %0 = tensor.conv2d %x, %w3 : f32[N, 256, 56, 56]
  %1 = tensor.reshape %b3 {shape = [1, 256, 1, 1]} : f32[1, 256, 1, 1]
  %c3 = tensor.add %0, %1 : f32[N, 256, 56, 56]
  %2 = tensor.conv2d %x, %wd : f32[N, 256, 56, 56]
  %3 = tensor.reshape %bd {shape = [1, 256, 1, 1]} : f32[1, 256, 1, 1]
  %cd = tensor.add %2, %3 : f32[N, 256, 56, 56]
  %4 = tensor.add %c3, %cd : f32[N, 256, 56, 56]
  %y = tensor.relu %4 : f32[N, 256, 56, 56]
  %5 = tensor.conv2d %y, %w1 : f32[N, 64, 56, 56]
  %h = tensor.relu %5 : f32[N, 64, 56, 56]
  %6 = tensor.conv2d %h, %w4 : f32[N, 256, 56, 56]
  %7 = tensor.add %6, %y : f32[N, 256, 56, 56]
  %8 = tensor.relu %7 : f32[N, 256, 56, 56]
  return %8
}
