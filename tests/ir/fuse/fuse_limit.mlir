// RUN: mlfuse opt %s --passes lower-tensor-to-loops,fuse --print-decisions --fuse-limit 2 | filecheck %s
// RUN: mlfuse opt %s --passes lower-tensor-to-loops,fuse --print-decisions --fuse-limit 1 | filecheck %s --check-prefix ONE

// --fuse-limit N caps every kernel at N ops. A chain of five elementwise ops, one
// kernel without the limit, becomes kernels of at most two ops; each cut buffer is
// stored by one kernel and read by the next.
// CHECK-LABEL: func @chain
// CHECK-NEXT:   %a = loops.alloc
// CHECK-NEXT:   %c = loops.alloc
// CHECK-NEXT:   %e = loops.alloc
// CHECK-NEXT:   fused.kernel {{.*}}sources = ["a = tensor.exp"]{{.*}}}
// CHECK:          loops.store {{%[a-z0-9_]+}}, %a,
// CHECK:        fused.kernel {{.*}}sources = ["b = tensor.neg", "c = tensor.relu"]{{.*}}}
// CHECK-NEXT:     loops.load %a,
// CHECK:          loops.store {{%[a-z0-9_]+}}, %c,
// CHECK:        fused.kernel {{.*}}sources = ["d = tensor.sin", "e = tensor.cos"]{{.*}}}
// CHECK-NEXT:     loops.load %c,
// CHECK:          loops.store {{%[a-z0-9_]+}}, %e,
// CHECK-NOT:    fused.kernel
// CHECK:      // fuse: @chain: fused d -> e: cost model
// CHECK-NEXT: // fuse: @chain: kept c -> d: --fuse-limit 2 caps a kernel at 2 ops
// CHECK-NEXT: // fuse: @chain: fused b -> c: cost model
// CHECK-NEXT: // fuse: @chain: kept a -> b: --fuse-limit 2 caps a kernel at 2 ops

// --fuse-limit 1 is the unfused baseline: five kernels, every producer kept.
// ONE-COUNT-5: fused.kernel
// ONE-NOT:     fused.kernel
// ONE-COUNT-4: kept {{[a-d]}} -> {{[b-e]}}: --fuse-limit 1 caps a kernel at 1 ops
func @chain(%x: f32[N]) -> (f32[N]) {
  %a = tensor.exp %x : f32[N]
  %b = tensor.neg %a : f32[N]
  %c = tensor.relu %b : f32[N]
  %d = tensor.sin %c : f32[N]
  %e = tensor.cos %d : f32[N]
  return %e
}
