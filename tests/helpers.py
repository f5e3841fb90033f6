"""Shared test helpers. The inputs and the tolerance rule live in mlfuse.tools.checking
(``mlfuse run`` and ``mlfuse bench`` use the same); this adds a pytest assertion."""
from __future__ import annotations

import numpy as np
from numba import cuda

from mlfuse.tools.checking import compare, program_size, random_inputs, tolerance  # noqa: F401


def assert_close(actual, expected, n_ops: int = 1, what: str = "result", reduced: int = 1,
                 undecided=None) -> None:
    """Same dtype and shape; NaN where and only where ``expected`` is NaN; infinities
    equal; finite values within ``mlfuse.tools.checking.tolerance(dtype, n_ops, reduced)``;
    elements of the ``undecided`` mask (mlfuse.interp.rounding) left out."""
    c = compare(np.asarray(expected), np.asarray(actual), n_ops, reduced, undecided=undecided)
    assert c.ok, f"{what}: {c.message}; max abs error {c.max_abs_error:.3g}"


def assert_results_close(func, expected, got) -> tuple:
    """Each result a compiled ``func`` returned (one value or a tuple) against the
    interpreter's ``expected`` list, at the tolerance ``func``'s size allows; the
    results, as a tuple."""
    got = got if isinstance(got, tuple) else (got,)
    n_ops, reduced = program_size(func)
    for e, g in zip(expected, got, strict=True):
        assert_close(np.asarray(g), e, n_ops, reduced=reduced)
    return got


def assert_drawn_program_agrees(data, program) -> None:
    """A fuzz property's check: ``program`` (tests/strategies.py's ``Program``, noted for
    hypothesis's report) at inputs drawn from ``data`` (no special values), compiled for
    the simulator under the target in effect, against the NumPy interpreter, each result
    at the tolerance the program's size allows."""
    import mlfuse
    from hypothesis import note
    from mlfuse.interp import run_tensor
    from mlfuse.pipeline import parse_program
    from strategies import inputs_for
    source = program.source()
    note(source)
    func = parse_program(source, "fuzz.fuse").funcs[0]
    args = data.draw(inputs_for(func, {}, special=False))
    expected = run_tensor(func, args)
    assert_results_close(func, expected,
                         mlfuse.compile_source(source, "fuzz.fuse", target="simulator")["f"](*args))


def assert_compiled_agrees(source: str, args: list, dims: dict, what: str,
                           fuse_options: dict | None = None) -> None:
    """The function ``g`` of ``source``, compiled for the simulator (with
    ``fuse_options``: planned for sizes) and called with ``args`` (sizes ``dims``),
    against the NumPy interpreter of the program as written, at the tolerance its size
    allows, the elements the rounding analysis cannot decide left out."""
    import mlfuse
    from mlfuse.interp import run_tensor
    from mlfuse.interp.rounding import rounding_decided
    from mlfuse.pipeline import parse_program
    func = parse_program(source, "t.fuse").funcs[0]
    ops, reduced = program_size(func, dims=dims)
    with np.errstate(all="ignore"):
        want = run_tensor(func, args)
        undecided = rounding_decided(func, args)
    got = mlfuse.compile_source(source, "t.fuse", target="simulator",
                                fuse_options=fuse_options).g(*args)
    got = got if isinstance(got, tuple) else (got,)
    assert len(got) == len(want)
    for g, w, u in zip(got, want, undecided):
        assert_close(g, w, ops, what, reduced, undecided=u)


def assert_error_at(source: str, position: str, message: str) -> None:
    """Compiling ``source`` (as t.fuse) fails with one MlfuseError at ``position``
    (line:col) whose text holds ``message``."""
    import pytest

    from mlfuse.errors import MlfuseError
    from mlfuse.frontend import parse_source
    with pytest.raises(MlfuseError) as info:
        parse_source(source, "t.fuse")
    text = str(info.value)
    assert f"t.fuse:{position}:" in text and message in text, text


class _Recording:
    """A kernel that notes its name when launched."""

    def __init__(self, kernel, name, launched):
        self.kernel, self.name, self.launched = kernel, name, launched

    def __getitem__(self, config):
        self.launched.append(self.name)
        return self.kernel[config]


def record_launches(module, names) -> list[str]:
    """Make the kernels ``names`` of a generated ``module`` note their launches; returns
    the list they append their names to, in launch order."""
    launched: list[str] = []
    for name in names:
        setattr(module, name, _Recording(getattr(module, name), name, launched))
    return launched


def run_mma_lanes(mma, a_regs, b_regs, acc) -> None:
    """One warp runs the mma twin ``mma`` once: lane l passes its A registers
    ``a_regs[l]`` (4), B registers ``b_regs[l]`` (2) and accumulators ``acc[l]`` (4),
    and gets its D values back in ``acc[l]`` (``cuda`` a module global: the simulator
    swaps those for its per-launch module)."""

    @cuda.jit
    def kernel(a_regs, b_regs, acc):
        lane = cuda.threadIdx.x
        fa = cuda.local.array(4, np.uint32)
        fb = cuda.local.array(2, np.uint32)
        fc = cuda.local.array(4, np.float32)
        for r in range(4):
            fa[r], fc[r] = a_regs[lane, r], acc[lane, r]
        for r in range(2):
            fb[r] = b_regs[lane, r]
        mma(fc, 0, fa, 0, fb, 0)
        for r in range(4):
            acc[lane, r] = fc[r]

    kernel[1, 32](a_regs, b_regs, acc)
