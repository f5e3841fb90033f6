"""Transformation passes, each registered by name (see mlfuse.ir.passes)."""
