"""The Python API: compile a .fuse program (or loops/fused IR) into callable functions.

    m = mlfuse.compile_source(text)
    y = m.chain(x, b)          # NumPy in, NumPy out (or device arrays in and out)
    print(m.source)            # the generated Numba module
"""
from __future__ import annotations

from pathlib import Path

from mlfuse.errors import MlfuseError
from mlfuse.ir.builtin import ModuleOp
from mlfuse.runtime.arguments import HOST, Signature, bind_arguments, convert_result
from mlfuse.runtime.launcher import FastPath, fast_path
from mlfuse.runtime.loader import default_target, load_source, simulator_enabled
from mlfuse.runtime.precompile import precompile


class CompiledFunction:
    """One compiled func: checks its arguments, launches its kernels, returns results.

    A call whose arguments match a plan (``fast_path``, see mlfuse/runtime/launcher.py) is
    launched from it; any other takes the normal path: checks, the host function,
    Numba's launches (and may leave a plan for the next call like it)."""

    def __init__(self, signature: Signature, host, fast_path: FastPath | None = None):
        self.signature = signature
        self.host = host  # the generated host function (device arrays in and out)
        self.fast_path = fast_path
        self._precompiled: set = set()  # argument shapes whose kernels were precompiled

    @property
    def name(self) -> str:
        return self.signature.func

    def _precompile(self, device_args) -> None:
        """Before the first call with these shapes: compile the kernels it needs in
        parallel worker processes (runtime/precompile.py)."""
        key = tuple((getattr(a, "shape", None), str(getattr(a, "dtype", type(a))))
                    for a in device_args)
        if key not in self._precompiled:
            self._precompiled.add(key)
            precompile(self.host, device_args, self.signature.num_results)

    def __call__(self, *args, **kwargs):
        if kwargs:  # by parameter name, as the .fuse file names them
            args = self.signature.positional(args, kwargs)
        fast = self.fast_path
        if fast is not None:
            key, pointers = fast.read(args)
            planned = fast.plans.get(key)
            if planned is not None:
                return planned(args, pointers)
        call = bind_arguments(self.signature, args)
        self._precompile(call.device_args)
        if fast is not None and call.kind != HOST:
            results = fast.call_and_plan(self.host, args, call)
        else:
            results = self.host(*call.device_args)
        dtypes = self.signature.results
        if self.signature.num_results == 1:
            return convert_result(results, call.kind, dtypes[0])
        return tuple(convert_result(r, call.kind, d) for r, d in zip(results, dtypes))

    def __repr__(self) -> str:
        params = ", ".join(f"{p.name}: {p.describe()}" for p in self.signature.params)
        return f"<mlfuse function @{self.name}({params})>"


class CompiledModule:
    """The funcs of a compiled program, as attributes and by ``module["name"]``."""

    def __init__(self, ir: ModuleOp, source: str, target: str, python_module):
        self.ir = ir
        self.source = source
        self.target = target
        self.python_module = python_module
        self.functions = {}
        for f in ir.funcs:
            signature = Signature.of(f)
            self.functions[f.sym_name] = CompiledFunction(
                signature, python_module.ENTRY_POINTS[f.sym_name], fast_path(target, signature))

    def kernels(self, name: str) -> list:
        """The kernels function ``name`` launches, in order (fused.kernel or loops.parallel ops)."""
        func = self.ir.func(name)
        return [op for op in func.body.ops if op.name in ("fused.kernel", "loops.parallel")]

    def __getitem__(self, name: str) -> CompiledFunction:
        try:
            return self.functions[name]
        except KeyError:
            raise KeyError(f"no function '{name}' (have: {', '.join(self.functions)})") from None

    def __getattr__(self, name: str) -> CompiledFunction:
        functions = self.__dict__.get("functions", {})
        if name in functions:
            return functions[name]
        raise AttributeError(f"no function '{name}' (have: {', '.join(functions)})")

    def __dir__(self):
        return list(super().__dir__()) + list(self.functions)

    def __repr__(self) -> str:
        return f"<mlfuse module ({self.target}): {', '.join(self.functions)}>"


def _check_target(target: str | None) -> str:
    target = target or default_target()
    if target == "cuda" and simulator_enabled():
        raise MlfuseError("target 'cuda' cannot run under NUMBA_ENABLE_CUDASIM (the simulator "
                          "has no warp shuffles); use target='simulator'")
    if target == "simulator" and not simulator_enabled():
        raise MlfuseError("target 'simulator' needs NUMBA_ENABLE_CUDASIM=1 set before numba.cuda "
                          "is imported")
    return target


def compile_ir(module: ModuleOp, target: str | None = None, name: str = "module") -> CompiledModule:
    """Generate, load and wrap ``module`` (loops or fused level). ``target`` None picks
    "cuda" when a GPU is usable and the simulator is off, else "simulator"."""
    from mlfuse.codegen import generate
    target = _check_target(target)
    if target == "cuda":
        from mlfuse.runtime.memory import install
        install()  # results are allocated on every call: reuse freed buffers
    source = generate(module, target)
    python_module = load_source(source, name)
    if target == "cuda":
        from mlfuse.runtime.kernel_cache import enable_module
        enable_module(python_module)  # a later process loads these kernels' cubins
    if target == "cuda":  # tile shapes an earlier `mlfuse bench --tune` found on this GPU
        from mlfuse.runtime.device import device_name
        from mlfuse.tools.tuning import apply_cached
        apply_cached(python_module, source, device_name())
    return CompiledModule(module, source, target, python_module)


def compile_source(text: str, filename: str = "<string>", fuse: bool = True,
                   target: str | None = None, fuse_options: dict | None = None,
                   matmul_precision: str | None = None) -> CompiledModule:
    """Compile .fuse source text: parse, lower, fuse, generate, load.
    ``matmul_precision``: how f32 matmul/conv2d multiply, as
    ``torch.set_float32_matmul_precision``: "highest" (default, exact fp32), "high"
    (3xTF32 on tensor cores) or "medium" (TF32); mlfuse/matmul_precision.py."""
    from mlfuse.pipeline import compile_text
    if not isinstance(text, str):
        hint = (" (decode it first: text.decode('utf-8'))" if isinstance(text, (bytes, bytearray))
                else "")
        raise TypeError(f"compile_source: text must be a str (the .fuse source), got "
                        f"{type(text).__name__}{hint}")
    module = compile_text(text, filename, level="fused", fuse=fuse, fuse_options=fuse_options,
                          matmul_precision=matmul_precision)
    return compile_ir(module, target, name=Path(filename).stem or "module")


def compile_file(path, fuse: bool = True, target: str | None = None,
                 fuse_options: dict | None = None,
                 matmul_precision: str | None = None) -> CompiledModule:
    """Compile a .fuse file (see :func:`compile_source`)."""
    from mlfuse.syntax.source_file import read_source
    return compile_source(read_source(str(path)), str(path), fuse, target, fuse_options,
                          matmul_precision)
