// RUN: mlfuse opt %s --passes decompose | filecheck %s
// RUN: mlfuse opt %s --passes decompose | filecheck %s --check-prefix NONE

// decompose rewrites each composite op into primitives with keepdims reductions over
// the composite's axes; the new values are named after the composite's result.

// CHECK-LABEL: func @softmax_axis0
// CHECK-NEXT:   %p_max = tensor.max %x {axis = [0], keepdims = true} : f32[1, C]
// CHECK-NEXT:   %p_shifted = tensor.sub %x, %p_max : f32[R, C]
// CHECK-NEXT:   %p_exp = tensor.exp %p_shifted : f32[R, C]
// CHECK-NEXT:   %p_sum = tensor.sum %p_exp {axis = [0], keepdims = true} : f32[1, C]
// CHECK-NEXT:   %p = tensor.div %p_exp, %p_sum : f32[R, C]
// CHECK-NEXT:   return %p
func @softmax_axis0(%x: f32[R, C]) -> (f32[R, C]) {
  %p = tensor.softmax %x {axis = 0} : f32[R, C]
  return %p
}

// layernorm over the last axis: mean, centre, variance, x * rsqrt(var + eps), scale, shift.
// CHECK-LABEL: func @layernorm
// CHECK-NEXT:   %y_mean = tensor.mean %x {axis = [1], keepdims = true} : f32[B, 1]
// CHECK-NEXT:   %y_centered = tensor.sub %x, %y_mean : f32[B, D]
// CHECK-NEXT:   [[SQ:%[a-z0-9_]+]] = tensor.mul %y_centered, %y_centered : f32[B, D]
// CHECK-NEXT:   %y_var = tensor.mean [[SQ]] {axis = [1], keepdims = true} : f32[B, 1]
// CHECK-NEXT:   %y_eps = tensor.constant {value = 0.001} : f32[]
// CHECK-NEXT:   [[VE:%[a-z0-9_]+]] = tensor.add %y_var, %y_eps : f32[B, 1]
// CHECK-NEXT:   %y_rstd = tensor.rsqrt [[VE]] : f32[B, 1]
// CHECK-NEXT:   %y_normed = tensor.mul %y_centered, %y_rstd : f32[B, D]
// CHECK-NEXT:   [[SCALED:%[a-z0-9_]+]] = tensor.mul %y_normed, %g : f32[B, D]
// CHECK-NEXT:   %y = tensor.add [[SCALED]], %b : f32[B, D]
// CHECK-NEXT:   [[R:%[a-z0-9_]+]] = tensor.relu %y : f32[B, D]
// CHECK-NEXT:   return [[R]]
func @layernorm(%x: f32[B, D], %g: f32[D], %b: f32[D]) -> (f32[B, D]) {
  %y = tensor.layernorm %x, %g, %b {axis = -1, eps = 0.001} : f32[B, D]
  %r = tensor.relu %y : f32[B, D]
  return %r
}

// rmsnorm: no centring, mean of squares over the last axis.
// CHECK-LABEL: func @rmsnorm
// CHECK-NEXT:   [[SQ:%[a-z0-9_]+]] = tensor.mul %x, %x : f32[B, D]
// CHECK-NEXT:   %n_ms = tensor.mean [[SQ]] {axis = [1], keepdims = true} : f32[B, 1]
// CHECK-NEXT:   %n_eps = tensor.constant {value = 1e-06} : f32[]
// CHECK-NEXT:   [[VE:%[a-z0-9_]+]] = tensor.add %n_ms, %n_eps : f32[B, 1]
// CHECK-NEXT:   %n_rstd = tensor.rsqrt [[VE]] : f32[B, 1]
// CHECK-NEXT:   %n_normed = tensor.mul %x, %n_rstd : f32[B, D]
// CHECK-NEXT:   %n = tensor.mul %n_normed, %g : f32[B, D]
// CHECK-NEXT:   return %n
func @rmsnorm(%x: f32[B, D], %g: f32[D]) -> (f32[B, D]) {
  %n = tensor.rmsnorm %x, %g {eps = 1e-6} : f32[B, D]
  return %n
}

// No composite is left anywhere.
// NONE-NOT: tensor.softmax
// NONE-NOT: tensor.layernorm
// NONE-NOT: tensor.rmsnorm
