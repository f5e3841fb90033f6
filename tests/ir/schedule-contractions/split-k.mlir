// RUN: mlfuse opt %s --passes schedule-contractions | filecheck %s

// split_k: the most shares the K axis of a contraction may be split into across blocks
// (split-K; the host picks the number per call). A share holds at least 128 values of K
// (MIN_SPLIT_K), at most 64 shares (MAX_SPLIT): a K known only at the call may take 64;
// a known K takes K // 128 of them; one shorter than 256 is never split (split_k = 1,
// the default: no second kernel is generated for it).

// A K known only at the call (decode: M rows of a few tokens).
// CHECK-LABEL: func @symbolic_k
// CHECK:        fused.kernel {{{.*}}schedule = "contraction", {{.*}}split_k = 64, variant = "simt"}
func @symbolic_k(%a: buf<f32[M, K]>, %b: buf<f32[K, N]>) -> (buf<f32[M, N]>) {
  %c = loops.alloc : buf<f32[M, N]>
  fused.kernel {extents = [M, N], kernel_name = "mm", sources = ["c = tensor.matmul"]} (%i0: index, %i1: index) {
    %zero = arith.constant {value = 0.0} : f32
    %acc = loops.reduce %zero {combiner = "add", extent = K} : f32 (%k: index) {
      %x = loops.load %a, %i0, %k : f32
      %y = loops.load %b, %k, %i1 : f32
      %p = arith.mul %x, %y : f32
      loops.yield %p
    }
    loops.store %acc, %c, %i0, %i1
  }
  return %c
}

// K = 1000: 7 shares of at least 128.
// CHECK-LABEL: func @known_k
// CHECK:        fused.kernel {{{.*}}split_k = 7, variant = "simt"}
func @known_k(%a: buf<f32[M, 1000]>, %b: buf<f32[1000, N]>) -> (buf<f32[M, N]>) {
  %c = loops.alloc : buf<f32[M, N]>
  fused.kernel {extents = [M, N], kernel_name = "mm", sources = ["c = tensor.matmul"]} (%i0: index, %i1: index) {
    %zero = arith.constant {value = 0.0} : f32
    %acc = loops.reduce %zero {combiner = "add", extent = 1000} : f32 (%k: index) {
      %x = loops.load %a, %i0, %k : f32
      %y = loops.load %b, %k, %i1 : f32
      %p = arith.mul %x, %y : f32
      loops.yield %p
    }
    loops.store %acc, %c, %i0, %i1
  }
  return %c
}

// Batched attention scores q . k^T over a head of 64: too short to split (split_k = 1,
// the default, which the printer leaves out).
// CHECK-LABEL: func @attention_head
// CHECK:        fused.kernel {{{.*}}batch_dims = [0], {{.*}}sources = ["c = tensor.matmul"], variant = "simt"}
func @attention_head(%q: buf<f32[B, S, 64]>, %k: buf<f32[B, S, 64]>) -> (buf<f32[B, S, S]>) {
  %c = loops.alloc : buf<f32[B, S, S]>
  fused.kernel {extents = [B, S, S], kernel_name = "qk", sources = ["c = tensor.matmul"]} (%b: index, %i: index, %j: index) {
    %zero = arith.constant {value = 0.0} : f32
    %acc = loops.reduce %zero {combiner = "add", extent = 64} : f32 (%d: index) {
      %x = loops.load %q, %b, %i, %d : f32
      %y = loops.load %k, %b, %j, %d : f32
      %p = arith.mul %x, %y : f32
      loops.yield %p
    }
    loops.store %acc, %c, %b, %i, %j
  }
  return %c
}

// A 3x3 convolution over 256 channels: K = 256 x 3 x 3 = 2304 flattened from three
// nested reduces, 18 shares at most.
// CHECK-LABEL: func @conv3x3
// CHECK:        fused.kernel {{{.*}}split_k = 18, variant = "simt"}
func @conv3x3(%x: buf<f32[N, 256, 16, 16]>, %w: buf<f32[32, 256, 3, 3]>) -> (buf<f32[N, 32, 14, 14]>) {
  %c = loops.alloc : buf<f32[N, 32, 14, 14]>
  fused.kernel {extents = [N, 32, 14, 14], kernel_name = "conv", sources = ["c = tensor.conv2d"]} (%n: index, %o: index, %h: index, %v: index) {
    %zero = arith.constant {value = 0.0} : f32
    %acc = loops.reduce %zero {combiner = "add", extent = 256} : f32 (%ci: index) {
      %s1 = loops.reduce %zero {combiner = "add", extent = 3} : f32 (%kh: index) {
        %s2 = loops.reduce %zero {combiner = "add", extent = 3} : f32 (%kw: index) {
          %hh = arith.add %h, %kh : index
          %vv = arith.add %v, %kw : index
          %a = loops.load %x, %n, %ci, %hh, %vv : f32
          %b = loops.load %w, %o, %ci, %kh, %kw : f32
          %p = arith.mul %a, %b : f32
          loops.yield %p
        }
        loops.yield %s2
      }
      loops.yield %s1
    }
    loops.store %acc, %c, %n, %o, %h, %v
  }
  return %c
}
