"""The ``mlfuse`` command: ``main`` parses the verb and runs its module."""
from mlfuse.cli.main import main

__all__ = ["main"]
