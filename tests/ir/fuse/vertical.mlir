// RUN: mlfuse opt %s --passes lower-tensor-to-loops,fuse --print-decisions | filecheck %s

// The inputs are tensor IR (readable); lowering makes the one-nest-per-op loops IR
// that fuse works on (tests/ir/lower-tensor-to-loops pins that step).

// An elementwise chain is one kernel: every intermediate is a register, only the
// result is allocated and stored.
// CHECK-LABEL: func @chain
// CHECK-NEXT:   %y = loops.alloc : buf<f32[N]>
// CHECK-NEXT:   fused.kernel {extents = [N], kernel_name = "chain_0", sources = ["t = tensor.mul", "u = tensor.add", "r = tensor.relu", "y = tensor.sub"]{{.*}}} ([[I:%[a-z0-9_]+]]: index) {
// CHECK-NEXT:     [[X:%[a-z0-9_]+]] = loops.load %x, [[I]] : f32
// CHECK-NEXT:     [[TWO:%[a-z0-9_]+]] = arith.constant {value = 2.0} : f32
// CHECK-NEXT:     [[T:%[a-z0-9_]+]] = arith.mul [[X]], [[TWO]] : f32
// CHECK-NEXT:     [[B:%[a-z0-9_]+]] = loops.load %b, [[I]] : f32
// CHECK-NEXT:     [[U:%[a-z0-9_]+]] = arith.add [[T]], [[B]] : f32
// CHECK-NEXT:     [[R:%[a-z0-9_]+]] = arith.relu [[U]] : f32
// CHECK-NEXT:     [[Y:%[a-z0-9_]+]] = arith.sub [[R]], [[X]] : f32
// CHECK-NEXT:     loops.store [[Y]], %y, [[I]]
// CHECK-NEXT:   }
// CHECK-NEXT:   return %y
func @chain(%x: f32[N], %b: f32[N]) -> (f32[N]) {
  %c = tensor.constant {value = 2.0} : f32[]
  %t = tensor.mul %x, %c : f32[N]
  %u = tensor.add %t, %b : f32[N]
  %r = tensor.relu %u : f32[N]
  %y = tensor.sub %r, %x : f32[N]
  return %y
}

// A diamond: %e feeds two branches that meet again. One kernel computes %e once (one
// load of %x, one exp) and both branches use it.
// CHECK-LABEL: func @diamond
// CHECK-NEXT:   %d = loops.alloc : buf<f32[N]>
// CHECK-NEXT:   fused.kernel {extents = [N], {{.*}}} ([[I:%[a-z0-9_]+]]: index) {
// CHECK-NEXT:     [[X:%[a-z0-9_]+]] = loops.load %x, [[I]] : f32
// CHECK-NEXT:     [[E:%[a-z0-9_]+]] = arith.exp [[X]] : f32
// CHECK-NEXT:     [[A:%[a-z0-9_]+]] = arith.mul [[E]], [[E]] : f32
// CHECK-NEXT:     [[B:%[a-z0-9_]+]] = arith.neg [[E]] : f32
// CHECK-NEXT:     [[D:%[a-z0-9_]+]] = arith.add [[A]], [[B]] : f32
// CHECK-NEXT:     loops.store [[D]], %d, [[I]]
// CHECK-NEXT:   }
// CHECK-NEXT:   return %d
func @diamond(%x: f32[N]) -> (f32[N]) {
  %e = tensor.exp %x : f32[N]
  %a = tensor.mul %e, %e : f32[N]
  %b = tensor.neg %e : f32[N]
  %d = tensor.add %a, %b : f32[N]
  return %d
}

// Multi-output: %h is returned and also feeds %g. One kernel writes both; %h is
// computed once and stored from the same kernel, not recomputed or re-read.
// CHECK-LABEL: func @multi_output
// CHECK-NEXT:   %h = loops.alloc : buf<f32[N]>
// CHECK-NEXT:   %g = loops.alloc : buf<f32[N]>
// CHECK-NEXT:   fused.kernel {{.*}} ([[I:%[a-z0-9_]+]]: index) {
// CHECK-NEXT:     [[X:%[a-z0-9_]+]] = loops.load %x, [[I]] : f32
// CHECK-NEXT:     [[B:%[a-z0-9_]+]] = loops.load %b, [[I]] : f32
// CHECK-NEXT:     [[H:%[a-z0-9_]+]] = arith.add [[X]], [[B]] : f32
// CHECK-NEXT:     loops.store [[H]], %h, [[I]]
// CHECK-NEXT:     [[G:%[a-z0-9_]+]] = arith.gelu [[H]] : f32
// CHECK-NEXT:     loops.store [[G]], %g, [[I]]
// CHECK-NEXT:   }
// CHECK-NEXT:   return %g, %h
func @multi_output(%x: f32[N], %b: f32[N]) -> (f32[N], f32[N]) {
  %h = tensor.add %x, %b : f32[N]
  %g = tensor.gelu %h : f32[N]
  return %g, %h
}

// Decisions, one per producer (last first), after the IR.
// CHECK:      // fuse: @chain: fused r -> y: cost model: fused {{[0-9.]+}} us < separate {{[0-9.]+}} us
// CHECK-NEXT: // fuse: @chain: fused u -> r: cost model
// CHECK-NEXT: // fuse: @chain: fused t -> u: cost model
// CHECK-NEXT: // fuse: @diamond: fused b -> d: cost model
// CHECK-NEXT: // fuse: @diamond: fused a -> d: cost model
// CHECK-NEXT: // fuse: @diamond: fused e -> a, b: cost model
// CHECK-NEXT: // fuse: @multi_output: multi-output h -> g: cost model: fused {{[0-9.]+}} us < separate {{[0-9.]+}} us
