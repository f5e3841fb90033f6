// RUN: mlfuse opt %s --passes split-reductions,cse,lower-tensor-to-loops,fuse,coalesce-axes --dim N=16 --dim H=64 --dim W=64 --dim C=320 --print-decisions | filecheck %s

// A split-columns kernel whose points are a ravel's axes: group norm over channels-last's
// column statistics (after split-reductions) run over [N, 32, C/32] and read
// x[n, k // W, k % W, g * C/32 + c]; merged, the points are [N, C] and the load's last
// index is the points' last (split-columns' vector twin walks 16-byte vectors of them).
// CHECK-LABEL: func @group_columns
// CHECK:        fused.kernel {coalesced = {{\[}}[N], [32, "C/32"]], extents = [N, C], {{.*}}schedule = "split-columns"{{.*}}} (%i0: index, %[[C:.*]]: index) {
// CHECK:          loops.load %x, %i0, {{.*}}, {{.*}}, %[[C]] : f32
// CHECK:        // coalesce-axes: group_columns_0: 32, C/32 move together: one axis of C
func @group_columns(%x: f32[N, H, W, C]) -> (f32[N, 1, 32, 1]) {
  %rows = tensor.reshape %x {shape = [N, "H*W", 32, "C/32"]} : f32[N, H*W, 32, C/32]
  %m = tensor.mean %rows {axis = [1, 3], keepdims = true} : f32[N, 1, 32, 1]
  %d = tensor.sub %rows, %m : f32[N, H*W, 32, C/32]
  %sq = tensor.mul %d, %d : f32[N, H*W, 32, C/32]
  %v = tensor.mean %sq {axis = [1, 3], keepdims = true} : f32[N, 1, 32, 1]
  return %v
}
