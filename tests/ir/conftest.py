"""Collects the IR-text tests: each ``.mlir`` file under tests/ir/ is one pytest item
that runs its ``// RUN:`` lines (ir_runner.py), e.g.

    // RUN: mlfuse opt %s --passes fuse | filecheck %s

tests/ir/README.md explains how to add one.
"""
from __future__ import annotations

from pathlib import Path

import pytest

from ir_runner import RunFailure, run_file


def pytest_collect_file(parent, file_path: Path):
    if file_path.suffix == ".mlir":
        return MlirFile.from_parent(parent, path=file_path)
    return None


class MlirFile(pytest.File):
    def collect(self):
        yield MlirItem.from_parent(self, name=self.path.name)


class MlirItem(pytest.Item):
    def runtest(self) -> None:
        run_file(self.path)

    def repr_failure(self, excinfo, style=None):
        if isinstance(excinfo.value, RunFailure):
            return str(excinfo.value)
        return super().repr_failure(excinfo, style)

    def reportinfo(self):
        return self.path, None, f"ir: {self.name}"
