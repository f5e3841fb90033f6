"""A hand-written SGEMM with a bias+relu epilogue (C = relu(A @ B + bias), row-major
f32): 128 x 128 block tiles, 8 x 8 outputs per thread, 16-byte shared and global
loads, double-buffered tiles. The reference that mlfuse's generated contraction
kernels are measured against (probe_contraction.py); not used by mlfuse itself.

Its predecessors, measured on the H100 at 4096^3 (docs/perf-notes.md, contractions):
scalar shared-memory reads 17.8 ms (8 TFLOP/s), 16-byte fragment reads 5.2 ms
(27 TFLOP/s), 16-byte global reads 5.0 ms, double buffering 3.7 ms (37 TFLOP/s)."""
from __future__ import annotations

import numba
from llvmlite import ir
from numba import cuda, float32, types
from numba.core.extending import intrinsic


@intrinsic
def load4(typingctx, array, index):
    """Four consecutive float32 of ``array`` from flat ``index`` as one 16-byte load
    (the caller guarantees the address is 16-byte aligned)."""
    sig = types.UniTuple(types.float32, 4)(array, index)

    def codegen(context, builder, signature, args):
        ary = context.make_array(signature.args[0])(context, builder, args[0])
        ptr = builder.gep(ary.data, [args[1]])
        vec = builder.load(builder.bitcast(ptr, ir.VectorType(ir.FloatType(), 4).as_pointer()),
                           align=16)
        items = [builder.extract_element(vec, ir.Constant(ir.IntType(32), i)) for i in range(4)]
        return context.make_tuple(builder, signature.return_type, items)

    return sig, codegen


@intrinsic
def store4(typingctx, array, index, a, b, c, d):
    """Four float32 into ``array`` from flat ``index`` as one 16-byte store."""
    sig = types.void(array, index, a, b, c, d)

    def codegen(context, builder, signature, args):
        ary = context.make_array(signature.args[0])(context, builder, args[0])
        ptr = builder.gep(ary.data, [args[1]])
        vty = ir.VectorType(ir.FloatType(), 4)
        vec = ir.Constant(vty, ir.Undefined)
        for i in range(4):
            vec = builder.insert_element(vec, args[2 + i], ir.Constant(ir.IntType(32), i))
        builder.store(vec, builder.bitcast(ptr, vty.as_pointer()), align=16)
        return context.get_dummy_value()

    return sig, codegen


BM, BN, BK, TM, TN = 128, 128, 8, 8, 8
THREADS = (BM // TM) * (BN // TN)  # 256
A_TILES, B_TILES = 2 * BK * BM, 2 * BK * BN  # two stages each


def make_vector(double_buffer: bool, vector_global: bool):
    """v2+: 16-byte shared loads of the fragments; optionally 16-byte global loads
    (K and N multiples of 4) and double-buffered tiles (the next tile's global loads
    are issued before the current tile's math)."""
    stages = 2 if double_buffer else 1

    @cuda.jit(launch_bounds=THREADS)
    def gemm(af, bf, bias, c, M, N, K):
        As = cuda.shared.array(A_TILES, float32, alignment=16)
        Bs = cuda.shared.array(B_TILES, float32, alignment=16)
        tid = cuda.threadIdx.x
        ty, tx = tid // 16, tid % 16
        m0, n0 = cuda.blockIdx.y * BM, cuda.blockIdx.x * BN
        acc = cuda.local.array(64, float32)
        for i in range(64):
            acc[i] = float32(0)
        # this thread's share of a tile: A row am, k am_k..+3; B row bk, cols bn..+3
        am, ak = tid // 2, (tid % 2) * 4
        bk, bn = tid // 32, (tid % 32) * 4
        areg = cuda.local.array(4, float32)
        breg = cuda.local.array(4, float32)
        afrag = cuda.local.array(8, float32)
        bfrag = cuda.local.array(8, float32)

        # first tile into registers
        m, k = m0 + am, ak
        if vector_global and m < M and k + 3 < K:
            x0, x1, x2, x3 = load4(af, m * K + k)
            areg[0], areg[1], areg[2], areg[3] = x0, x1, x2, x3
        else:
            for i in range(4):
                areg[i] = af[m * K + k + i] if m < M and k + i < K else float32(0)
        k, n = bk, n0 + bn
        if vector_global and k < K and n + 3 < N:
            y0, y1, y2, y3 = load4(bf, k * N + n)
            breg[0], breg[1], breg[2], breg[3] = y0, y1, y2, y3
        else:
            for i in range(4):
                breg[i] = bf[k * N + n + i] if k < K and n + i < N else float32(0)
        stage = 0
        for k0 in range(0, K, BK):
            sa, sb = stage * BK * BM, stage * BK * BN
            for i in range(4):
                As[sa + (ak + i) * BM + am] = areg[i]
            store4(Bs, sb + bk * BN + bn, breg[0], breg[1], breg[2], breg[3])
            cuda.syncthreads()
            if double_buffer and k0 + BK < K:  # next tile's loads in flight during the math
                m, k = m0 + am, k0 + BK + ak
                if vector_global and m < M and k + 3 < K:
                    x0, x1, x2, x3 = load4(af, m * K + k)
                    areg[0], areg[1], areg[2], areg[3] = x0, x1, x2, x3
                else:
                    for i in range(4):
                        areg[i] = af[m * K + k + i] if m < M and k + i < K else float32(0)
                k, n = k0 + BK + bk, n0 + bn
                if vector_global and k < K and n + 3 < N:
                    y0, y1, y2, y3 = load4(bf, k * N + n)
                    breg[0], breg[1], breg[2], breg[3] = y0, y1, y2, y3
                else:
                    for i in range(4):
                        breg[i] = bf[k * N + n + i] if k < K and n + i < N else float32(0)
            for kk in range(BK):
                a0, a1, a2, a3 = load4(As, sa + kk * BM + ty * 4)
                a4, a5, a6, a7 = load4(As, sa + kk * BM + 64 + ty * 4)
                b0, b1, b2, b3 = load4(Bs, sb + kk * BN + tx * 4)
                b4, b5, b6, b7 = load4(Bs, sb + kk * BN + 64 + tx * 4)
                afrag[0], afrag[1], afrag[2], afrag[3] = a0, a1, a2, a3
                afrag[4], afrag[5], afrag[6], afrag[7] = a4, a5, a6, a7
                bfrag[0], bfrag[1], bfrag[2], bfrag[3] = b0, b1, b2, b3
                bfrag[4], bfrag[5], bfrag[6], bfrag[7] = b4, b5, b6, b7
                for i in range(8):
                    for j in range(8):
                        acc[i * 8 + j] += afrag[i] * bfrag[j]
            if double_buffer:
                stage = 1 - stage
            else:
                cuda.syncthreads()
                if k0 + BK < K:
                    m, k = m0 + am, k0 + BK + ak
                    for i in range(4):
                        areg[i] = af[m * K + k + i] if m < M and k + i < K else float32(0)
                    k, n = k0 + BK + bk, n0 + bn
                    for i in range(4):
                        breg[i] = bf[k * N + n + i] if k < K and n + i < N else float32(0)
        for i in range(8):
            m = m0 + (ty * 4 + i if i < 4 else 64 + ty * 4 + i - 4)
            for j in range(8):
                n = n0 + (tx * 4 + j if j < 4 else 64 + tx * 4 + j - 4)
                if m < M and n < N:
                    v = acc[i * 8 + j] + bias[n]
                    c[m, n] = v if v > 0 else float32(0)
    return gemm


REFERENCE = "void(float32[::1], float32[::1], float32[::1], float32[:, ::1], int64, int64, int64)"


def reference_kernel():
    """The kernel; takes A and B flattened (1-D views), bias, C, M, N, K."""
    return make_vector(double_buffer=True, vector_global=True)
