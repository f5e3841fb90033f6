"""Importing this module registers every dialect's ops (used by the IR parser)."""
import dialects.arith  # noqa: F401
import dialects.fused  # noqa: F401
import dialects.loops  # noqa: F401
import dialects.tensor  # noqa: F401
