// RUN: mlfuse opt %s --passes decompose,lower-tensor-to-loops,fuse --dim R=100352 --dim C=64 | filecheck %s
// RUN: mlfuse opt %s --passes decompose,lower-tensor-to-loops,fuse --dim R=256 --dim C=64 | filecheck %s --check-prefix HELD
// RUN: mlfuse opt %s --passes decompose,lower-tensor-to-loops,fuse | filecheck %s --check-prefix SYMBOLS

// A column's variance over its mean, compiled for columns no strip holds on chip: the
// variance becomes shifted sums in the mean's pass (moments.py: s = the column's first
// value, sum(x - s), sum((x - s)^2)), so the reductions are one level of partials and the
// strips kernel gets column stages; the centred sum is rebuilt after them.
// CHECK-LABEL: func @standardise
// CHECK:        fused.kernel {extents = [C], {{.*}}schedule = "strips", {{.*}}split_stages = 1, strip = "columns"}
// CHECK:          %[[S:.*]] = loops.load %x, %{{.*}}, %i0
// CHECK:          loops.reduce
// CHECK:            arith.sub %{{.*}}, %[[S]]
// CHECK:          loops.reduce
// CHECK:            arith.sub %{{.*}}, %[[S]]
// CHECK:            arith.mul
// CHECK:          loops.reduce
// CHECK-NOT:      loops.reduce
// CHECK:          loops.for
// CHECK-NOT:    fused.kernel
// CHECK:        return
// Columns of 256 values, which a strip's threads hold in registers: left as written,
// the variance reading the mean (two passes over values on chip).
// HELD-LABEL: func @standardise
// HELD:         fused.kernel {extents = [C], {{.*}}schedule = "strips", {{.*}}strip = "columns"}
// HELD:           loops.reduce
// HELD:           %[[M:.*]] = arith.div
// HELD:           loops.reduce
// HELD:             arith.sub %{{.*}}, %[[M]]
// HELD:           loops.for
// Compiled for symbols: the default sizes hold the columns, a call's may not, so the
// variance joins the mean's pass all the same (schedules._columns_streamed) and the
// kernel has column stages of one level.
// SYMBOLS-LABEL: func @standardise
// SYMBOLS:      fused.kernel {extents = [C], {{.*}}split_stages = 1, strip = "columns"}
// SYMBOLS:        %[[S:.*]] = loops.load %x, %{{.*}}, %i0
// SYMBOLS:        loops.reduce
// SYMBOLS:          arith.sub %{{.*}}, %[[S]]
func @standardise(%x: f32[R, C]) -> (f32[R, C]) {
  %m = tensor.mean %x {axis = [0], keepdims = true} : f32[1, C]
  %d = tensor.sub %x, %m : f32[R, C]
  %q = tensor.mul %d, %d : f32[R, C]
  %v = tensor.mean %q {axis = [0], keepdims = true} : f32[1, C]
  %eps = tensor.constant {value = 1e-5} : f32[]
  %e = tensor.add %v, %eps : f32[1, C]
  %r = tensor.rsqrt %e : f32[1, C]
  %y = tensor.mul %d, %r : f32[R, C]
  return %y
}

// The variance alone: with no loop after the reductions, one level of them is a split
// plan (the columns' partials over the whole GPU, then their combine), one pass over x.
// CHECK-LABEL: func @column_variance
// CHECK:        fused.kernel {extents = [C], {{.*}}schedule = "split-columns"
// CHECK-NOT:    fused.kernel
// CHECK:        return
func @column_variance(%x: f32[R, C]) -> (f32[1, C]) {
  %m = tensor.mean %x {axis = [0], keepdims = true} : f32[1, C]
  %d = tensor.sub %x, %m : f32[R, C]
  %q = tensor.mul %d, %d : f32[R, C]
  %v = tensor.mean %q {axis = [0], keepdims = true} : f32[1, C]
  return %v
}
