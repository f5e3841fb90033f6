// RUN: mlfuse opt %s --passes lower-tensor-to-loops | filecheck %s

// max pool, 3x3 stride 2 padding 1: the window start oh*2 - 1 once per point; a tap
// outside the input is read at its position clamped into the input (a plain load, so
// a producer can be inlined there) and replaced by -inf, which never wins.
// CHECK-LABEL: func @max_pool
// CHECK:        loops.parallel {extents = [1, 2, 3, 3], source = "tensor.max_pool2d"} ([[N:%[a-z0-9_]+]]: index, [[C:%[a-z0-9_]+]]: index, [[OH:%[a-z0-9_]+]]: index, [[OW:%[a-z0-9_]+]]: index) {
// CHECK:          [[H0:%[a-z0-9_]+]] = arith.sub {{.*}} : index
// CHECK:          [[W0:%[a-z0-9_]+]] = arith.sub {{.*}} : index
// CHECK-NEXT:     [[NEG:%[a-z0-9_]+]] = arith.constant {value = -inf} : f32
// CHECK:          loops.reduce [[NEG]] {combiner = "max", extent = 3} : f32 ([[KH:%[a-z0-9_]+]]: index) {
// CHECK-NEXT:       [[IH:%[a-z0-9_]+]] = arith.add [[H0]], [[KH]] : index
// CHECK:            [[ROW:%[a-z0-9_]+]] = arith.and {{.*}} : bool
// CHECK-NEXT:       [[LO:%[a-z0-9_]+]] = arith.maximum [[IH]], {{.*}} : index
// CHECK-NEXT:       [[INH:%[a-z0-9_]+]] = arith.minimum [[LO]], {{.*}} : index
// CHECK-NEXT:       loops.reduce [[NEG]] {combiner = "max", extent = 3} : f32 ([[KW:%[a-z0-9_]+]]: index) {
// CHECK:              [[INW:%[a-z0-9_]+]] = arith.minimum {{.*}} : index
// CHECK-NEXT:         [[V:%[a-z0-9_]+]] = loops.load %x, [[N]], [[C]], [[INH]], [[INW]] : f32
// CHECK-NEXT:         [[OK:%[a-z0-9_]+]] = arith.and [[ROW]], {{.*}} : bool
// CHECK-NEXT:         [[T:%[a-z0-9_]+]] = arith.where [[OK]], [[V]], [[NEG]] : f32
// CHECK-NEXT:         loops.yield [[T]]
// CHECK-NOT:      loops.masked_load
// CHECK:          loops.store {{.*}}, %y, [[N]], [[C]], [[OH]], [[OW]]
func @max_pool(%x: f32[1, 2, 5, 5]) -> (f32[1, 2, 3, 3]) {
  %y = tensor.max_pool2d %x {kernel = [3, 3], stride = [2, 2], padding = [1, 1]} : f32[1, 2, 3, 3]
  return %y
}

// avg pool, 2x2 stride 2, ceil_mode over H = 5: only the last row of windows overhangs,
// so only rows are tested and clamped; the divisor counts the window's rows inside
// the input, min(oh*2 + 2, 5) - oh*2, times its 2 columns.
// CHECK-LABEL: func @avg_pool
// CHECK:          [[H0:%[a-z0-9_]+]] = arith.mul [[OH:%[a-z0-9_]+]], [[TWO:%[a-z0-9_]+]] : index
// CHECK:          [[SUM:%[a-z0-9_]+]] = loops.reduce {{.*}} {combiner = "add", extent = 2} : f32
// CHECK:            [[IN:%[a-z0-9_]+]] = arith.lt {{.*}} : bool
// CHECK-NOT:        arith.ge
// CHECK:          [[END:%[a-z0-9_]+]] = arith.add [[H0]], [[TWO]] : index
// CHECK-NEXT:     [[CLIP:%[a-z0-9_]+]] = arith.minimum [[END]], {{.*}} : index
// CHECK-NEXT:     [[ROWS:%[a-z0-9_]+]] = arith.sub [[CLIP]], [[H0]] : index
// CHECK-NEXT:     [[COUNT:%[a-z0-9_]+]] = arith.mul [[ROWS]], [[TWO]] : index
// CHECK-NEXT:     [[DIV:%[a-z0-9_]+]] = arith.cast [[COUNT]] {dtype = "f32"} : f32
// CHECK-NEXT:     [[AVG:%[a-z0-9_]+]] = arith.div [[SUM]], [[DIV]] : f32
func @avg_pool(%x: f32[1, 2, 5, 6]) -> (f32[1, 2, 3, 3]) {
  %y = tensor.avg_pool2d %x {kernel = [2, 2], stride = [2, 2], ceil_mode = true, count_include_pad = false} : f32[1, 2, 3, 3]
  return %y
}

// depthwise conv (groups = channels): output channel o reads input channel o; no
// reduction over channels, only the taps.
// CHECK-LABEL: func @depthwise
// CHECK:        loops.parallel {{.*}} ([[N:%[a-z0-9_]+]]: index, [[O:%[a-z0-9_]+]]: index, {{.*}}) {
// CHECK:          loops.reduce {{.*}} {combiner = "add", extent = 3} : f32 ([[KH:%[a-z0-9_]+]]: index) {
// CHECK:            loops.reduce {{.*}} {combiner = "add", extent = 3} : f32 ([[KW:%[a-z0-9_]+]]: index) {
// CHECK:              loops.masked_load %x, {{.*}}, [[N]], [[O]], {{.*}} : f32
// CHECK-NEXT:         loops.load %w, [[O]], {{.*}}, [[KH]], [[KW]] : f32
func @depthwise(%x: f32[N, 4, 8, 8], %w: f32[4, 1, 3, 3]) -> (f32[N, 4, 8, 8]) {
  %y = tensor.conv2d %x, %w {stride = [1, 1], padding = [1, 1], dilation = [1, 1], groups = 4} : f32[N, 4, 8, 8]
  return %y
}

// grouped conv, 2 groups of 2 input and 3 output channels: the input channel is
// (o // 3) * 2 + c.
// CHECK-LABEL: func @grouped
// CHECK:        loops.parallel {{.*}} ([[N:%[a-z0-9_]+]]: index, [[O:%[a-z0-9_]+]]: index, {{.*}}) {
// CHECK:          [[G:%[a-z0-9_]+]] = arith.floordiv [[O]], {{.*}} : index
// CHECK:          [[BASE:%[a-z0-9_]+]] = arith.mul [[G]], {{.*}} : index
// CHECK-NEXT:     loops.reduce {{.*}} {combiner = "add", extent = 2} : f32 ([[K:%[a-z0-9_]+]]: index) {
// CHECK-NEXT:       [[CH:%[a-z0-9_]+]] = arith.add [[BASE]], [[K]] : index
// CHECK:                loops.load %x, [[N]], [[CH]], {{.*}} : f32
// CHECK-NEXT:           loops.load %w, [[O]], [[K]], {{.*}} : f32
func @grouped(%x: f32[N, 4, 8, 8], %w: f32[6, 2, 1, 1]) -> (f32[N, 6, 8, 8]) {
  %y = tensor.conv2d %x, %w {stride = [1, 1], padding = [0, 0], dilation = [1, 1], groups = 2} : f32[N, 6, 8, 8]
  return %y
}

// argmax: the max (nan if any), then the least index k with x[k] == max or x[k] a nan;
// both reductions use the existing combiners.
// CHECK-LABEL: func @argmax
// CHECK:          [[M:%[a-z0-9_]+]] = loops.reduce {{.*}} {combiner = "max", extent = C} : f32
// CHECK:          [[NONE:%[a-z0-9_]+]] = arith.constant {value = 2147483647} : i32
// CHECK-NEXT:     [[FIRST:%[a-z0-9_]+]] = loops.reduce [[NONE]] {combiner = "min", extent = C} : i32 ([[K:%[a-z0-9_]+]]: index) {
// CHECK-NEXT:       [[V:%[a-z0-9_]+]] = loops.load %x, {{.*}}, [[K]] : f32
// CHECK-NEXT:       [[EQ:%[a-z0-9_]+]] = arith.eq [[V]], [[M]] : bool
// CHECK-NEXT:       [[NAN:%[a-z0-9_]+]] = arith.ne [[V]], [[V]] : bool
// CHECK-NEXT:       [[HIT:%[a-z0-9_]+]] = arith.or [[EQ]], [[NAN]] : bool
// CHECK-NEXT:       [[KI:%[a-z0-9_]+]] = arith.cast [[K]] {dtype = "i32"} : i32
// CHECK-NEXT:       [[R:%[a-z0-9_]+]] = arith.where [[HIT]], [[KI]], [[NONE]] : i32
// CHECK-NEXT:       loops.yield [[R]]
// CHECK:          loops.store [[FIRST]], %y
func @argmax(%x: f32[R, C]) -> (i32[R]) {
  %y = tensor.argmax %x {axis = 1} : i32[R]
  return %y
}

// exclusive cumsum: a masked sum over the whole axis, keeping k < i.
// CHECK-LABEL: func @cumsum
// CHECK:        loops.parallel {{.*}} ([[I0:%[a-z0-9_]+]]: index, [[I1:%[a-z0-9_]+]]: index) {
// CHECK:          loops.reduce [[ZERO:%[a-z0-9_]+]] {combiner = "add", extent = C} : f32 ([[K:%[a-z0-9_]+]]: index) {
// CHECK-NEXT:       [[V:%[a-z0-9_]+]] = loops.load %x, [[I0]], [[K]] : f32
// CHECK-NEXT:       [[KEEP:%[a-z0-9_]+]] = arith.lt [[K]], [[I1]] : bool
// CHECK-NEXT:       arith.where [[KEEP]], [[V]], [[ZERO]] : f32
func @cumsum(%x: f32[R, C]) -> (f32[R, C]) {
  %y = tensor.cumsum %x {axis = 1, exclusive = true} : f32[R, C]
  return %y
}

// a dim as a value: its runtime size, cast to the value's dtype.
// CHECK-LABEL: func @dim
// CHECK:        loops.parallel {extents = [], source = "tensor.dim_size"} () {
// CHECK-NEXT:     [[SIZE:%[A-Za-z0-9_]+]] = loops.dim {sym = "C"} : index
// CHECK-NEXT:     [[F:%[a-z0-9_]+]] = arith.cast [[SIZE]] {dtype = "f32"} : f32
// CHECK-NEXT:     loops.store [[F]], %d
func @dim(%x: f32[R, C]) -> (f32[R, C]) {
  %d = tensor.dim_size {sym = C} : f32[]
  %y = tensor.div %x, %d : f32[R, C]
  return %y
}
