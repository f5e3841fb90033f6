"""Iteration spaces of fused kernels with reductions: which axes a kernel's points keep
and which its reductions (and the loops of its broadcast-back epilogue) walk.

A reduction nest ``sum(x, axis=[1])`` of ``x: [B, S, D]`` has a *full* space
[B, S, D] whose axis 1 is *reduced*: its points are the kept axes [B, D], and a
consumer over the full space (``x - m``) reads the reduced value at its point. A
kernel over such a :class:`Space` has one point per kept index (its ``extents``), the
reductions at the top of its body, and a loop nest over the reduced axes that stores
the outputs over the full space: the broadcast-back epilogue, in the same kernel.

The reduced axes may be anywhere: the last (rows: softmax, layernorm), several
trailing ones (instance norm over [H, W]), or leading and middle ones (column
centring, softmax over a middle axis, batch norm over [N, H, W]). The schedule
(schedules.py) then picks how threads share the points and the reduced values.
"""
from __future__ import annotations

from dataclasses import dataclass

from mlfuse.dialects.loops import LoadOp, MaskedLoadOp, ReduceOp
from mlfuse.dialects.shapes import same_size
from mlfuse.dialects.reductions import reduce_nest


@dataclass(frozen=True)
class Space:
    """A kernel's iteration space: ``full`` extents, of which the axes at positions
    ``reduced`` (increasing) are walked by its reductions and epilogue loops."""

    full: tuple
    reduced: tuple = ()

    @property
    def kept(self) -> list:
        """The extents of the kernel's points: the full space without the reduced axes."""
        return [e for i, e in enumerate(self.full) if i not in self.reduced]

    @property
    def keepdims(self) -> list:
        """The extents of a keepdims reduction over this space: reduced axes of size 1."""
        return [1 if i in self.reduced else e for i, e in enumerate(self.full)]

    @property
    def reduced_extents(self) -> list:
        return [self.full[i] for i in self.reduced]

    def interleave(self, kept: list, reduced: list) -> list:
        """An index over the full space from the kept axes' and the reduced axes' values."""
        kept_iter, reduced_iter = iter(kept), iter(reduced)
        return [next(reduced_iter) if i in self.reduced else next(kept_iter)
                for i in range(len(self.full))]


def plain_space(extents) -> Space:
    return Space(tuple(extents))


def moving(extents: list) -> list:
    """The extents other than 1: a permutation that moves only axes of one point (a
    transpose of a [R, 1] result) or a reshape adding or dropping them keeps the
    element order, so over the same moving extents it is the same layout."""
    return [e for e in extents if e != 1]


def level(extents: list, space: Space, reshaped: bool = False) -> str | None:
    """How a nest over ``extents`` sits in ``space``: "point" (one value per kernel
    point: over the kept axes, keepdims, or the kept axes with axes of 1 moved, added
    or dropped), "row" (over the full space; where ``reshaped``, also over a reshape of
    it: stored at the reshaped index, group norm's [N, C, H, W] over rows of
    [N, G, C/G*H*W]), or None."""
    if extents == space.kept or (space.reduced and extents == space.keepdims):
        return "point"
    if moving(extents) == moving(space.kept):
        return "point"
    if space.reduced and extents == list(space.full):
        return "row"
    if reshaped and space.reduced and same_size(extents, space.full):
        return "row"
    return None


def _load_indices(op) -> list:
    return list(op.operands[2:] if isinstance(op, MaskedLoadOp) else op.operands[1:])


def reduction_space(nest_op, reduces: list[ReduceOp]) -> Space | None:
    """The space of a nest whose top-level reductions walk the same reduced axes of
    their inputs: every load that uses a reduction index reads ``full`` at the nest's
    own indices (keepdims or not) with the reduction's indices, in nest order, at the
    reduced positions. None for anything else (a contraction, a window, a gather)."""
    if not reduces:
        return None
    nests = [reduce_nest(r) for r in reduces]
    if len({repr(n.extents) for n in nests}) != 1:
        return None
    args = list(nest_op.body.args)
    extents = list(nest_op["extents"])
    found: Space | None = None
    for n in nests:
        steps = n.indices
        step_ids = [id(k) for k in steps]
        for op in n.top.walk():
            if op is n.top:
                continue
            if isinstance(op, ReduceOp) and not any(op is lvl for lvl in n.levels):
                return None  # a reduction inside the reduction (not one nest)
            if not isinstance(op, (LoadOp, MaskedLoadOp)):
                continue
            idx = _load_indices(op)
            positions = tuple(i for i, v in enumerate(idx) if id(v) in step_ids)
            if not positions:
                continue
            if [id(idx[p]) for p in positions] != step_ids:
                return None  # a reduction index twice, missing, or out of order
            rest = [v for i, v in enumerate(idx) if i not in positions]
            if len(args) == len(idx):  # keepdims: the reduced axes are 1 in the nest
                if any(extents[p] != 1 for p in positions):
                    return None
                kept_args = [a for i, a in enumerate(args) if i not in positions]
                kept_ext = [e for i, e in enumerate(extents) if i not in positions]
            elif len(args) + len(positions) == len(idx):
                kept_args, kept_ext = args, extents
            else:
                return None
            if [id(v) for v in rest] != [id(a) for a in kept_args]:
                return None
            kept_iter, red_iter = iter(kept_ext), iter(n.extents)
            full = tuple(next(red_iter) if i in positions else next(kept_iter)
                         for i in range(len(idx)))
            space = Space(full, positions)
            if found is not None and found != space:
                return None
            found = space
    return found


__all__ = ["Space", "level", "moving", "plain_space", "reduction_space"]
