// RUN: mlfuse opt %s --passes decompose,lower-tensor-to-loops,fuse --dim B=32 --dim S=128 --dim D=1024 --dim R=16384 | filecheck %s

// Strips over columns get column stages (codegen/column_stages.py: a split-columns
// first stage, a combine, an epilogue over chunks of the broadcast-back loop) for
// calls whose strips fit on chip nowhere: the kernel's split_stages attribute. A
// reduction that reads another's result (softmax's sum of exp(x - max)) is a level
// above it: a stage and a combine per level, then the epilogue.

// CHECK-LABEL: func @column_centring
// CHECK:        fused.kernel {{.*}}schedule = "strips", {{.*}}split_stages = 1, strip = "columns"}
// CHECK-NOT:    fused.kernel
func @column_centring(%x: f32[R, D]) -> (f32[R, D]) {
  %m = tensor.mean %x {axis = [0], keepdims = true} : f32[1, D]
  %y = tensor.sub %x, %m : f32[R, D]
  return %y
}

// Two sibling statistics of one stage, both returned beside the standardised values.
// CHECK-LABEL: func @standardise
// CHECK:        fused.kernel {{.*}}schedule = "strips", {{.*}}split_stages = 1, strip = "columns"}
// CHECK-NOT:    fused.kernel
func @standardise(%x: f32[R, D]) -> (f32[R, D], f32[1, D], f32[1, D]) {
  %m = tensor.mean %x {axis = [0], keepdims = true} : f32[1, D]
  %xx = tensor.mul %x, %x : f32[R, D]
  %q = tensor.mean %xx {axis = [0], keepdims = true} : f32[1, D]
  %mm = tensor.mul %m, %m : f32[1, D]
  %v = tensor.sub %q, %mm : f32[1, D]
  %d = tensor.sub %x, %m : f32[R, D]
  %s = tensor.rsqrt %v : f32[1, D]
  %y = tensor.mul %d, %s : f32[R, D]
  return %y, %m, %q
}

// CHECK-LABEL: func @middle_softmax
// CHECK:        fused.kernel {{.*}}schedule = "strips", {{.*}}split_stages = 1, strip = "columns"}
// CHECK-NOT:    fused.kernel
// CHECK:        return
func @middle_softmax(%x: f32[B, S, D]) -> (f32[B, S, D]) {
  %y = tensor.softmax %x {axis = 1} : f32[B, S, D]
  return %y
}
