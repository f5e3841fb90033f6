"""A kernel compile worker (runtime/precompile.py starts it): reads a pickled
(module path, tasks) from the file its first argument names (or stdin), where a task is
(module attribute, tile configuration or None, argument types); loads the generated
module from that path, compiles each task's kernel for its types and prints how many
it compiled. With the disk cache on, each compile writes its cubin there
(runtime/kernel_cache.py). With a second argument, it also writes there a pickled list
of (task index, compiled kernel), each kernel as Numba's disk cache would store it
(its cubin included), which the parent installs in its own dispatchers: the kernels
come back with the disk cache off too. A task that fails is reported on stderr and
skipped: its kernel compiles at launch instead.

    python -m mlfuse.runtime.compile_worker tasks.pickle [kernels.pickle]
"""
from __future__ import annotations

import pickle
import sys
import traceback
import warnings


def compile_tasks(path: str, tasks: list, kernels_out: str | None = None) -> int:
    from mlfuse.runtime.kernel_cache import enable_module
    from mlfuse.runtime.loader import load_file
    module = load_file(path)
    enable_module(module)
    done, compiled = 0, []
    for index, (attr, config, argtypes) in enumerate(tasks):
        try:
            kernel = getattr(module, attr)
            if config is not None:
                kernel = kernel[tuple(config)]
            overload = kernel.compile(tuple(argtypes))
            done += 1
        except Exception:  # noqa: BLE001 - the kernel compiles at launch instead
            sys.stderr.write(f"{attr}{list(config or [])}: {traceback.format_exc(limit=3)}\n")
            continue
        if kernels_out is not None:
            try:
                compiled.append((index, serialized(overload)))
            except Exception:  # noqa: BLE001 - not handed back: the cache or a launch has it
                sys.stderr.write(f"{attr}{list(config or [])} not handed back: "
                                 f"{traceback.format_exc(limit=3)}\n")
    if kernels_out is not None:
        with open(kernels_out, "wb") as f:
            pickle.dump(compiled, f)
    return done


def serialized(kernel) -> bytes:
    """A compiled kernel (numba-cuda's ``_Kernel``) as the disk cache stores it: its
    state, cubin included, pickled by Numba's pickler."""
    from numba.cuda.serialize import dumps
    return dumps(kernel._reduce_states())


def rebuilt(data: bytes):
    """The kernel ``serialized`` gave, ready to launch in this process (its cubin is
    loaded into this process's context at the first launch)."""
    from numba.cuda.dispatcher import _Kernel
    return _Kernel._rebuild(**pickle.loads(data))


def main() -> int:
    warnings.simplefilter("ignore")  # Numba's performance notes: the launch says them
    if len(sys.argv) > 1:
        with open(sys.argv[1], "rb") as f:
            path, tasks = pickle.load(f)
    else:
        path, tasks = pickle.load(sys.stdin.buffer)
    out = sys.argv[2] if len(sys.argv) > 2 else None
    print(compile_tasks(path, tasks, out), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
