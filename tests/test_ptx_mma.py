"""The tensor-core helpers' simulator twins (mlfuse.codegen.ptx_mma): fragment layouts
and data movement exactly as the PTX ISA defines them, checked lane by lane on one
warp; a generated tensor-core kernel is only as right as these stand-ins."""
import numpy as np
import numba
import pytest
from numba import cuda

from mlfuse.codegen.ptx_mma import mma_helper_source
from mlfuse.runtime.simulator import patch_shared_arrays

from helpers import run_mma_lanes


@pytest.fixture(scope="module")
def twins():
    patch_shared_arrays()  # as load_source does before a generated module runs
    namespace = {"cuda": cuda, "numba": numba, "np": np}
    exec(compile(mma_helper_source("simulator"), "<ptx_mma twins>", "exec"), namespace)
    return namespace


def words(values: np.ndarray) -> np.ndarray:
    """Pairs of 16-bit values (the last axis) packed as PTX packs them: first value low."""
    return values.astype(np.float16).view(np.uint32)


def test_ldmatrix_gives_each_lane_its_rows_columns_as_the_isa_says(twins):
    ldmatrix, ldmatrix_trans = twins["_ldmatrix_x4"], twins["_ldmatrix_x4_trans"]
    stride = 24  # a padded row of 16 values: rows stay 16-byte aligned

    @cuda.jit
    def kernel(tiles, out, out_trans):
        lane = cuda.threadIdx.x
        frag = cuda.local.array(4, np.uint32)
        # lane l: row l % 16, columns from (l // 16) * 8 (the four 8 x 8 quadrants)
        ldmatrix(frag, 0, tiles, (lane % 16) * stride + (lane // 16) * 8)
        for i in range(4):
            out[lane, i] = frag[i]
        ldmatrix_trans(frag, 0, tiles, (lane % 16) * stride + (lane // 16) * 8)
        for i in range(4):
            out_trans[lane, i] = frag[i]

    values = np.arange(16 * stride, dtype=np.float16)
    out, out_trans = np.zeros((32, 4), np.uint32), np.zeros((32, 4), np.uint32)
    kernel[1, 32](values, out, out_trans)
    grid = values.reshape(16, stride)
    for lane in range(32):
        g, t = lane // 4, lane % 4
        for i in range(4):  # matrix i: rows 8 (i % 2).., columns 8 (i // 2)..
            m = grid[8 * (i % 2):8 * (i % 2) + 8, 8 * (i // 2):8 * (i // 2) + 8]
            assert out[lane, i] == words(m[g, 2 * t:2 * t + 2])[0]
            assert out_trans[lane, i] == words(m[2 * t:2 * t + 2, g])[0]


def test_ldmatrix_twin_faults_on_a_misaligned_row_as_the_gpu_does(twins):
    ldmatrix = twins["_ldmatrix_x4"]

    @cuda.jit
    def kernel(tiles):
        frag = cuda.local.array(4, np.uint32)
        ldmatrix(frag, 0, tiles, cuda.threadIdx.x * 20)  # 40-byte rows: not 16-aligned

    with pytest.raises(RuntimeError, match="misaligned ldmatrix"):
        kernel[1, 32](np.zeros(32 * 20 + 8, np.float16))


@pytest.mark.parametrize("ptx_type", ["f16", "bf16"])
def test_mma_m16n8k16_matches_numpy_from_isa_fragments(twins, ptx_type):
    mma = twins[f"_mma_{ptx_type}"]
    rng = np.random.default_rng(1)
    a = rng.standard_normal((16, 16)).astype(np.float32)
    b = rng.standard_normal((16, 8)).astype(np.float32)
    c = rng.standard_normal((16, 8)).astype(np.float32)
    if ptx_type == "f16":
        a, b = a.astype(np.float16), b.astype(np.float16)
        bits = lambda x: x.view(np.uint16).astype(np.uint32)  # noqa: E731
    else:  # bf16: the upper 16 bits of an f32 (truncated: exact bf16 values below)
        a = (a.view(np.uint32) & 0xFFFF0000).view(np.float32)
        b = (b.view(np.uint32) & 0xFFFF0000).view(np.float32)
        bits = lambda x: x.view(np.uint32) >> 16  # noqa: E731
    a_regs, b_regs, acc = (np.zeros((32, n), t) for n, t in
                           ((4, np.uint32), (2, np.uint32), (4, np.float32)))
    for lane in range(32):  # the ISA's fragment layout, written out independently
        g, t = lane // 4, lane % 4
        for r in range(4):
            row, col = g + 8 * (r % 2), 2 * t + 8 * (r // 2)
            a_regs[lane, r] = bits(a[row, col:col + 1])[0] | bits(a[row, col + 1:col + 2])[0] << 16
        for r in range(2):
            k = 2 * t + 8 * r
            b_regs[lane, r] = bits(b[k:k + 1, g])[0] | bits(b[k + 1:k + 2, g])[0] << 16
        for q in range(4):
            acc[lane, q] = c[g + 8 * (q // 2), 2 * t + q % 2]

    run_mma_lanes(mma, a_regs, b_regs, acc)
    d = a.astype(np.float64) @ b.astype(np.float64) + c
    for lane in range(32):
        g, t = lane // 4, lane % 4
        for q in range(4):
            assert acc[lane, q] == pytest.approx(d[g + 8 * (q // 2), 2 * t + q % 2], rel=1e-6,
                                                 abs=1e-5)


def test_cp_async_twin_copies_16_bytes_zero_fills_and_faults_when_misaligned(twins):
    copy, commit, wait = twins["_cp_async"], twins["_cp_async_commit"], twins["_cp_async_wait"]

    @cuda.jit
    def kernel(src, tiles, shift):
        lane = cuda.threadIdx.x
        copy(tiles, lane * 8, src, (lane // 2, (lane % 2) * 8 + shift), lane % 3 != 0, 16)
        commit()
        wait(0)

    src = np.arange(16 * 16, dtype=np.float16).reshape(16, 16)
    tiles = np.full(32 * 8, -1, np.float16)
    kernel[1, 32](src, tiles, 0)
    for lane in range(32):
        want = src[lane // 2, (lane % 2) * 8:(lane % 2) * 8 + 8] if lane % 3 else 0
        np.testing.assert_array_equal(tiles[lane * 8:lane * 8 + 8], want)
    with pytest.raises(RuntimeError, match="cp.async source"):
        kernel[1, 32](src, tiles, 1)


@pytest.mark.parametrize("size", [4, 8])
def test_cp_async_twin_copies_4_and_8_bytes_at_their_alignment(twins, size):
    copy = twins["_cp_async"]
    count = size // 2  # f16 values a copy

    @cuda.jit
    def kernel(src, tiles, shift):
        lane = cuda.threadIdx.x
        copy(tiles, lane * count, src, (lane, shift), lane != 5, size)

    src = np.arange(32 * 10, dtype=np.float16).reshape(32, 10)  # rows of 20 bytes
    tiles = np.full(32 * count, -1, np.float16)
    if size == 4:  # 20-byte rows keep 4-byte alignment: every row copies
        kernel[1, 32](src, tiles, 2)
        for lane in range(32):
            want = src[lane, 2:2 + count] if lane != 5 else 0
            np.testing.assert_array_equal(tiles[lane * count:lane * count + count], want)
    with pytest.raises(RuntimeError, match="cp.async source"):
        kernel[1, 32](src, tiles, 1 if size == 4 else 4)  # 2 (4) bytes off the copy's size
