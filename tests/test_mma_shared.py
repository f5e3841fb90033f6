"""Dynamic shared memory of the tensor-core kernels (emit_mma.py, ptx_mma.py's
``_DynamicShared``): the launch gives a kernel its stages' bytes, and past 48 KB the
kernel is allowed them once per compiled kernel before its first launch."""
from mlfuse.codegen.ptx_mma import _DYNAMIC_SHARED


class FakeKernel:
    """A Numba dispatcher as _DynamicShared uses it: configured launches, argument
    types, compile."""

    def __init__(self):
        self.launched, self.compiled = [], []
        self.overloads = {"f32": "compiled"}

    def __getitem__(self, config):
        return lambda *args: self.launched.append((config, args))

    def typeof_pyval(self, value):
        return type(value).__name__

    def compile(self, types):
        self.compiled.append(types)
        return ("kernel", types)


def wrapper_class(target):
    allowed = []
    scope = {"TARGET": target, "_allow_shared": lambda kernel, size: allowed.append((kernel, size))}
    exec(_DYNAMIC_SHARED, scope)
    return scope["_DynamicShared"], allowed


def test_a_launch_past_48_kb_allows_the_compiled_kernel_once_per_argument_types():
    shared, allowed = wrapper_class("cuda")
    kernel = FakeKernel()
    wrapped = shared(kernel, 96 * 1024)
    for args in [(1, 2.0), (3, 4.0), (1.0, 2.0)]:
        wrapped[(8, 1, 1), 256, 0, 96 * 1024](*args)
    assert allowed == [(("kernel", ("int", "float")), 96 * 1024),
                       (("kernel", ("float", "float")), 96 * 1024)]
    assert [c for c, _ in kernel.launched] == [((8, 1, 1), 256, 0, 96 * 1024)] * 3
    assert wrapped.overloads == {"f32": "compiled"}  # the rest is the kernel's


def test_small_stages_and_the_simulator_launch_as_they_are():
    for target, size in [("cuda", 48 * 1024), ("simulator", 96 * 1024)]:
        shared, allowed = wrapper_class(target)
        kernel = FakeKernel()
        shared(kernel, size)[1, 32, 0, size](7)
        assert allowed == [] and kernel.compiled == [] and kernel.launched == [((1, 32, 0, size), (7,))]
