"""The fuse pass's options, checked before any pass runs: ``fuse_options`` of the API
(``compile_source``, ``compile_onnx``, ...) and ``--fuse-limit`` of the command line.

A bad value is one MlfuseError naming the option; without this check a limit below 1
surfaced as an internal CannotFuse traceback and an unknown option as a TypeError
from the pass's constructor."""
from __future__ import annotations

from mlfuse.errors import MlfuseError

OPTIONS = ("dims", "limit", "target")


def _is_int(value) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def check_cli_limit(limit: int | None) -> int | None:
    """``--fuse-limit``: None (no cap) or at least one op per kernel."""
    if limit is not None and limit < 1:
        raise MlfuseError(f"--fuse-limit takes a positive number of ops per kernel, got {limit}")
    return limit


def check_fuse_options(options: dict | None) -> dict:
    """``options`` as the fuse pass takes them, or an MlfuseError naming the bad one."""
    from mlfuse.hardware import TARGETS
    if options is None:
        return {}
    if not isinstance(options, dict):
        raise MlfuseError(f"fuse_options must be a dict, got {type(options).__name__}")
    for name in options:
        if name not in OPTIONS:
            raise MlfuseError(f"fuse_options has no option {name!r} (options: {', '.join(OPTIONS)})")
    limit = options.get("limit")
    if limit is not None and not (_is_int(limit) and limit >= 1):
        raise MlfuseError(f"fuse_options['limit'] must be a positive int (ops per kernel) or "
                          f"None, got {limit!r}")
    dims = options.get("dims")
    if dims is not None and not (isinstance(dims, dict) and all(
            isinstance(k, str) and _is_int(v) and v >= 1 for k, v in dims.items())):
        raise MlfuseError(f"fuse_options['dims'] must map dim names to positive ints, got {dims!r}")
    target = options.get("target")
    if target is not None and target not in TARGETS:
        raise MlfuseError(f"fuse_options['target'] must be one of {', '.join(sorted(TARGETS))}, "
                          f"got {target!r}")
    return options
