// RUN: mlfuse opt %s --passes lower-tensor-to-loops,fuse --dim C=65536 | filecheck %s

// An f16 variance over rows longer than registers hold. The means add up in f32
// (lower_to_loops), so the centred square is cast to f32 before its sum; moments.py
// still makes it the shifted sums S1, S2 beside the mean's, the shift s, the squares,
// the sums and their combination in f32, and only the results rounded to f16.
// CHECK-LABEL: func @var16
// CHECK:        fused.kernel {{.*}}schedule = "row"
// CHECK:          %[[Y0:[0-9]+]] = loops.load %x, %i0, %c0 : f16
// CHECK-NEXT:     %[[S:[0-9]+]] = arith.cast %[[Y0]] {dtype = "f32"} : f32
// CHECK-NEXT:     %[[S1:[0-9]+]] = loops.reduce {{.*}} : f32
// CHECK-NEXT:       %[[A:[0-9]+]] = loops.load %x
// CHECK-NEXT:       %[[AW:[0-9]+]] = arith.cast %[[A]] {dtype = "f32"} : f32
// CHECK-NEXT:       %[[D:[0-9]+]] = arith.sub %[[AW]], %[[S]] : f32
// CHECK-NEXT:       loops.yield %[[D]]
// CHECK:          %[[S2:[0-9]+]] = loops.reduce {{.*}} : f32
// CHECK:            %[[E:[0-9]+]] = arith.sub %{{[0-9]+}}, %[[S]] : f32
// CHECK-NEXT:       %[[SQ:[0-9]+]] = arith.mul %[[E]], %[[E]] : f32
// CHECK-NEXT:       loops.yield %[[SQ]]
// CHECK:          %[[SUM:[0-9]+]] = loops.reduce {{.*}} : f32
// CHECK:          %m = arith.cast %{{[0-9]+}} {dtype = "f16"} : f16
// CHECK-NEXT:     %[[C:[0-9]+]] = arith.cast %m {dtype = "f32"} : f32
// CHECK-NEXT:     %{{[0-9]+}} = arith.sub %[[C]], %[[S]] : f32
// CHECK-NOT:      loops.reduce
// CHECK:          arith.sub %[[S2]], %{{[0-9]+}} : f32
// CHECK:          arith.cast %{{[0-9]+}} {dtype = "f16"} : f16
// CHECK-NEXT:     loops.store
func @var16(%x: f16[R, C]) -> (f16[R, 1]) {
  %m = tensor.mean %x {axis = [1], keepdims = true} : f16[R, 1]
  %d = tensor.sub %x, %m : f16[R, C]
  %sq = tensor.mul %d, %d : f16[R, C]
  %v = tensor.mean %sq {axis = [1], keepdims = true} : f16[R, 1]
  return %v
}
