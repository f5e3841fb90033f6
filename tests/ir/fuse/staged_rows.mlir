// RUN: mlfuse opt %s --passes lower-tensor-to-loops,fuse --dim R=16384 --dim C=1024 --hw row_staged_stores=true --print-decisions | filecheck %s
// RUN: mlfuse opt %s --passes lower-tensor-to-loops,fuse --dim R=16384 --hw row_staged_stores=true --print-decisions | filecheck %s --check-prefix SYMBOLS
// RUN: mlfuse opt %s --passes lower-tensor-to-loops,fuse --dim R=16384 --dim C=1024 --print-decisions | filecheck %s --check-prefix OFF
// RUN: mlfuse opt %s --passes lower-tensor-to-loops,fuse --dim R=16384 --dim C=1024 --hw row_staged_stores=true | filecheck %s --check-prefix HELD

// A softmax over rows stored transposed: the store out[k, i0] follows the kernel's point
// (permute.stores_along_points). With the target's row_staged_stores on and the rows'
// count and length known when planning, the epilogue is moved into the row kernel and
// the schedule stages the store: warp-rows, a warp a row, staged_rows = 1
// (codegen/staged_rows.py). No [R, C] buffer.

// CHECK-LABEL: func @softmax_transposed
// CHECK-NOT:    loops.alloc : buf<f32[R, C]>
// CHECK:        fused.kernel {extents = [R], {{.*}}schedule = "warp-rows", {{.*}}staged_rows = 1} (%i0: index)
// CHECK:          loops.for {extent = C} (%k: index)
// CHECK:            loops.store %y, %t, %k, %i0
// CHECK-NOT:    fused.kernel

// C known only at run time: a few long rows would leave a warp a row latency-bound, so
// the transpose keeps its tiles, and the decision says why.

// SYMBOLS-LABEL: func @softmax_transposed
// SYMBOLS:        fused.kernel {extents = [R], {{.*}}schedule = "row"
// SYMBOLS:        fused.kernel {extents = [C, R], {{.*}}schedule = "transpose-tiles"
// SYMBOLS:      // fuse: @softmax_transposed: kept {{.*}}would store scattered (staged rows would write it coalesced: C known only at run time)

// The knob off (the default until timed on the GPU): two kernels, as before.

// OFF-LABEL: func @softmax_transposed
// OFF:        fused.kernel {extents = [R], {{.*}}schedule = "row"
// OFF:        fused.kernel {extents = [C, R], {{.*}}schedule = "transpose-tiles"
// OFF:      // fuse: @softmax_transposed: kept {{.*}}(staged rows would write it coalesced: the target's row_staged_stores is off)
func @softmax_transposed(%x: f32[R, C]) -> (f32[C, R]) {
  %m = tensor.max %x {axis = [1], keepdims = true} : f32[R, 1]
  %d = tensor.sub %x, %m : f32[R, C]
  %e = tensor.exp %d : f32[R, C]
  %s = tensor.sum %e {axis = [1], keepdims = true} : f32[R, 1]
  %y = tensor.div %e, %s : f32[R, C]
  %t = tensor.transpose %y {perm = [1, 0]} : f32[C, R]
  return %t
}

// A layernorm stored transposed, its rows longer than a warp holds (1024 values, 512 in
// registers): the warp streams them, so the variance is a shifted sum in the mean's pass
// (fusion/moments.py): three sibling reduces about the row's first value, then the
// epilogue's pass, two walks of x where there were three.

// CHECK-LABEL: func @layernorm_transposed
// CHECK:        fused.kernel {extents = [R], {{.*}}schedule = "warp-rows", {{.*}}staged_rows = 1} (%i0: index)
// CHECK:          %[[FIRST:.*]] = loops.load %x, %i0, %{{.*}} : f32
// CHECK:          loops.reduce {{.*}}extent = C
// CHECK:            arith.sub %{{.*}}, %[[FIRST]]
// CHECK:          loops.reduce {{.*}}extent = C
// CHECK:            arith.sub %{{.*}}, %[[FIRST]]
// CHECK:          loops.reduce {{.*}}extent = C
// CHECK:          %var = arith.div
// CHECK:          loops.for {extent = C}
// CHECK:            loops.store %y, %t, %{{.*}}, %i0
// CHECK-NOT:    fused.kernel
// CHECK-LABEL: func @layernorm_held

// Rows of a constant length registers hold (512 values): the warp holds them, so the
// variance is left as written, about the mean (a symbol's rows are streamed, however
// short: codegen holds constant rows only).

// HELD-LABEL: func @layernorm_held
// HELD:         fused.kernel {{.*}}staged_rows = 1
// HELD:         %mean = arith.div
// HELD:         loops.reduce {{.*}}extent = 512
// HELD:           %centred{{.*}} = arith.sub %{{.*}}, %mean
// HELD:         %var = arith.div
func @layernorm_transposed(%x: f32[R, C], %g: f32[C], %b: f32[C]) -> (f32[C, R]) {
  %mean = tensor.mean %x {axis = [1], keepdims = true} : f32[R, 1]
  %centred = tensor.sub %x, %mean : f32[R, C]
  %sq = tensor.mul %centred, %centred : f32[R, C]
  %var = tensor.mean %sq {axis = [1], keepdims = true} : f32[R, 1]
  %eps = tensor.constant {value = 1e-05} : f32[]
  %ve = tensor.add %var, %eps : f32[R, 1]
  %rstd = tensor.rsqrt %ve : f32[R, 1]
  %normed = tensor.mul %centred, %rstd : f32[R, C]
  %scaled = tensor.mul %normed, %g : f32[R, C]
  %y = tensor.add %scaled, %b : f32[R, C]
  %t = tensor.transpose %y {perm = [1, 0]} : f32[C, R]
  return %t
}
func @layernorm_held(%x: f32[4096, 512], %g: f32[512], %b: f32[512]) -> (f32[512, 4096]) {
  %mean = tensor.mean %x {axis = [1], keepdims = true} : f32[4096, 1]
  %centred = tensor.sub %x, %mean : f32[4096, 512]
  %sq = tensor.mul %centred, %centred : f32[4096, 512]
  %var = tensor.mean %sq {axis = [1], keepdims = true} : f32[4096, 1]
  %eps = tensor.constant {value = 1e-05} : f32[]
  %ve = tensor.add %var, %eps : f32[4096, 1]
  %rstd = tensor.rsqrt %ve : f32[4096, 1]
  %normed = tensor.mul %centred, %rstd : f32[4096, 512]
  %scaled = tensor.mul %normed, %g : f32[4096, 512]
  %y = tensor.add %scaled, %b : f32[4096, 512]
  %t = tensor.transpose %y {perm = [1, 0]} : f32[512, 4096]
  return %t
}
