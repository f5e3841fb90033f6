// RUN: not mlfuse opt %s 2>&1 | filecheck %s
// The return's types against the function's signature, at the return.
// CHECK: return_type.mlir:[[# @LINE + 3]]:3: error: function 'f' returns (f32[N]) but declares (f32[M])
func @f(%x: f32[N]) -> (f32[M]) {
  %y = tensor.relu %x : f32[N]
  return %y
}
