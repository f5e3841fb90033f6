"""Loading generated source as a Python module, and choosing the target to run on.

Generated modules are written to a cache directory (``$MLFUSE_CACHE_DIR``, else
``~/.cache/mlfuse``) under a name holding the sha256 of their source, and are
registered with ``linecache``: tracebacks and Numba's errors show generated lines.
The source names its target (``TARGET = "cuda"``), so the hash of the source is also
a hash of source + target.
"""
from __future__ import annotations

import hashlib
import linecache
import os
import tempfile
import types
from pathlib import Path

from mlfuse.codegen.names import identifier


def cache_dir() -> Path:
    return Path(os.environ.get("MLFUSE_CACHE_DIR") or Path.home() / ".cache" / "mlfuse")


def _write_once(path: Path, source: str) -> None:
    """Write ``source`` to ``path`` unless it is there already (the name holds its hash).
    The rename makes the file appear whole, even with concurrent writers."""
    if path.exists():
        return
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(source)
        os.replace(tmp, path)
    except BaseException:
        os.unlink(tmp)
        raise


def load_source(source: str, name: str) -> types.ModuleType:
    """Execute generated ``source`` as a new module named after ``name``."""
    digest = hashlib.sha256(source.encode("utf-8")).hexdigest()
    stem = f"{identifier(name, 'module')}_{digest[:16]}"
    path = cache_dir() / f"{stem}.py"
    try:
        _write_once(path, source)
        filename = str(path)
    except OSError:  # an unwritable cache: the code still runs, linecache still shows it
        filename = f"<mlfuse-generated {stem}>"
    return _execute(source, filename, stem)


def load_file(path: str) -> types.ModuleType:
    """The module load_source wrote to ``path``, executed again from it (the same file
    name: its kernels find the same disk-cache entries). A compile worker's way in."""
    source = Path(path).read_text(encoding="utf-8")
    return _execute(source, path, Path(path).stem)


def _execute(source: str, filename: str, stem: str) -> types.ModuleType:
    linecache.cache[filename] = (len(source), None, source.splitlines(True), filename)
    if simulator_enabled():
        from mlfuse.runtime.simulator import patch_shared_arrays
        patch_shared_arrays()
    module = types.ModuleType(f"mlfuse_generated.{stem}")
    module.__file__ = filename
    exec(compile(source, filename, "exec"), module.__dict__)
    return module


def simulator_enabled() -> bool:
    from numba import config
    return bool(config.ENABLE_CUDASIM)


def default_target() -> str:
    """"cuda" where a GPU is usable (and the simulator is off), else "simulator"."""
    if simulator_enabled():
        return "simulator"
    from numba import cuda
    return "cuda" if cuda.is_available() else "simulator"
