"""A kernel compile worker (runtime/precompile.py starts it): reads a pickled
(module path, tasks) from the file its argument names (or stdin), where a task is (module attribute, tile configuration
or None, argument types); loads the generated module from that path with the disk
cache on, compiles each task's kernel for its types (which writes its cubin to the
cache), and prints how many it compiled. A task that fails is reported on stderr and
skipped: its kernel compiles at launch instead.

    python -m mlfuse.runtime.compile_worker tasks.pickle
"""
from __future__ import annotations

import pickle
import sys
import traceback
import warnings


def compile_tasks(path: str, tasks: list) -> int:
    from mlfuse.runtime.kernel_cache import enable_module
    from mlfuse.runtime.loader import load_file
    module = load_file(path)
    enable_module(module)
    done = 0
    for attr, config, argtypes in tasks:
        try:
            kernel = getattr(module, attr)
            if config is not None:
                kernel = kernel[tuple(config)]
            kernel.compile(tuple(argtypes))
            done += 1
        except Exception:  # noqa: BLE001 - the kernel compiles at launch instead
            sys.stderr.write(f"{attr}{list(config or [])}: {traceback.format_exc(limit=3)}\n")
    return done


def main() -> int:
    warnings.simplefilter("ignore")  # Numba's performance notes: the launch says them
    if len(sys.argv) > 1:
        with open(sys.argv[1], "rb") as f:
            path, tasks = pickle.load(f)
    else:
        path, tasks = pickle.load(sys.stdin.buffer)
    print(compile_tasks(path, tasks), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
