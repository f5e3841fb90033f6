"""The disk cache of compiled kernels (mlfuse/runtime/kernel_cache.py). Under the simulator
there is nothing compiled to cache, so these drive the same code path over Numba's
real index and data files: keys, unreadable entries, concurrent writers."""
import os
import subprocess
import sys
import textwrap

import pytest
from numba.cuda.core.caching import IndexDataCacheFile

import mlfuse
from mlfuse.runtime import kernel_cache


class FileBackedCache:
    """The surface of Numba's ``Cache`` that kernel_cache wraps (load_overload,
    save_overload, flush) over Numba's own index/data files (IndexDataCacheFile,
    which writes to a temporary name and renames)."""

    def __init__(self, path, stamp=(1.0, 10)):
        self.file = IndexDataCacheFile(cache_path=str(path), filename_base="kernel-1.py311",
                                       source_stamp=stamp)

    def load_overload(self, sig, target_context):
        return self.file.load(sig)

    def save_overload(self, sig, data):
        self.file.save(sig, data)

    def flush(self):
        self.file.flush()


def _tolerant(path, stamp=(1.0, 10)):
    cache = FileBackedCache(path, stamp)
    kernel_cache.tolerate_bad_entries(cache)
    return cache


def test_an_entry_is_found_by_its_key_and_a_changed_source_misses(tmp_path):
    cache = _tolerant(tmp_path)
    assert cache.load_overload(("f32[:]",), None) is None
    cache.save_overload(("f32[:]",), {"cubin": b"\x7fELF"})
    assert cache.load_overload(("f32[:]",), None) == {"cubin": b"\x7fELF"}
    assert cache.load_overload(("f64[:]",), None) is None  # another signature
    # the index remembers the source file's stamp: another source is a miss
    assert _tolerant(tmp_path, stamp=(2.0, 10)).load_overload(("f32[:]",), None) is None


@pytest.mark.parametrize("garble", ["truncate", "garbage"])
@pytest.mark.parametrize("which", [".nbi", ".nbc"])
def test_an_unreadable_entry_is_a_miss_and_is_written_again(tmp_path, which, garble):
    cache = _tolerant(tmp_path)
    cache.save_overload("sig", [1, 2, 3])
    (path,) = [p for p in tmp_path.iterdir() if p.name.endswith(which)]
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2] if garble == "truncate" else b"\x80\x05garbage")
    assert cache.load_overload("sig", None) is None
    assert cache.mlfuse_bad_entries == 1
    cache.save_overload("sig", [1, 2, 3])  # after the compile
    assert _tolerant(tmp_path).load_overload("sig", None) == [1, 2, 3]


def test_an_unwritable_cache_costs_only_the_compile(tmp_path):
    cache = _tolerant(tmp_path / "missing" / "dir")
    cache.save_overload("sig", [1])  # cannot write: no error
    assert cache.load_overload("sig", None) is None


def test_two_processes_writing_the_same_entry_leave_a_whole_one(tmp_path):
    script = textwrap.dedent(f"""
        import sys
        from numba.cuda.core.caching import IndexDataCacheFile
        f = IndexDataCacheFile(cache_path={str(tmp_path)!r}, filename_base="kernel-1.py311",
                               source_stamp=(1.0, 10))
        for i in range(200):
            f.save("sig", b"x" * 100000)
    """)
    env = dict(os.environ, NUMBA_ENABLE_CUDASIM="1")
    procs = [subprocess.Popen([sys.executable, "-c", script], env=env) for _ in range(2)]
    assert [p.wait(timeout=120) for p in procs] == [0, 0]
    assert _tolerant(tmp_path).load_overload("sig", None) == b"x" * 100000
    assert not [p for p in tmp_path.iterdir() if ".tmp." in p.name]  # renamed into place


def test_the_switch_and_the_simulator(monkeypatch):
    module = mlfuse.compile_file("examples/chain.fuse").python_module
    assert kernel_cache.enable_module(module) == 0  # simulator kernels: nothing compiled
    for off in ("0", "off", "False"):
        monkeypatch.setenv("MLFUSE_KERNEL_CACHE", off)
        assert not kernel_cache.enabled()
    monkeypatch.delenv("MLFUSE_KERNEL_CACHE")
    assert kernel_cache.enabled()


def test_a_dispatcher_gets_numbas_cache_made_tolerant(tmp_path):
    class Dispatcher:  # what enable_dispatcher needs of a numba-cuda CUDADispatcher
        py_func = staticmethod(lambda: None)

        def enable_caching(self):
            self._cache = FileBackedCache(tmp_path)

    d = kernel_cache.enable_dispatcher(Dispatcher())
    d._cache.save_overload("sig", 1)
    (index,) = tmp_path.glob("*.nbi")
    index.write_bytes(b"garbage")
    assert d._cache.load_overload("sig", None) is None and d._cache.mlfuse_bad_entries == 1
    assert kernel_cache.enable_dispatcher(d) is d  # once
