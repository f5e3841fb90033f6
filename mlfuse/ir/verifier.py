"""Checks that hold for every op (declared operands, attributes, regions, inferred
types, SSA dominance), then each op's own ``verify_op``."""
from __future__ import annotations

from mlfuse.ir.builtin import FuncOp, ModuleOp
from mlfuse.ir.core import Attr, Operation, VerifyError


def _fmt(types) -> str:
    return ", ".join(map(str, types))


def _at_op(op: Operation, check, *args):
    """Run one of the op's own checks; a VerifyError it raises without a position (the
    shape helpers know no ops) gets the op's."""
    try:
        return check(*args)
    except VerifyError as e:
        if e.loc is None and op.loc is not None:
            raise VerifyError(e.message, op.loc) from None
        raise


def verify_declaration(op: Operation) -> None:
    names = op.operand_names
    variadic = bool(names) and names[-1].startswith("*")
    fixed = len(names) - 1 if variadic else len(names)
    n = len(op.operands)
    if (variadic and n < fixed) or (not variadic and n != fixed):
        want = f"at least {fixed}" if variadic else str(fixed)
        raise VerifyError(f"{op.name} takes {want} operand(s), got {n}", op.loc)
    for key, spec in op.attrs.items():
        if key not in op.attributes:
            if spec.default is Attr.REQUIRED:
                raise VerifyError(f"{op.name} needs attribute '{key}'", op.loc)
            continue
        if not spec.check(op.attributes[key]):
            raise VerifyError(f"{op.name}: attribute '{key}' must be {spec.kind}, "
                              f"got {op.attributes[key]!r}", op.loc)
    for key in op.attributes:
        if key not in op.attrs:
            raise VerifyError(f"{op.name} has no attribute '{key}'", op.loc)
    if len(op.regions) != op.num_regions:
        raise VerifyError(f"{op.name} takes {op.num_regions} region(s), got {len(op.regions)}", op.loc)
    inferred = _at_op(op, op.infer_types, [v.type for v in op.operands], op.attributes)
    if inferred is not None:
        got = [r.type for r in op.results]
        if list(inferred) != got:
            raise VerifyError(f"{op.name} result type ({_fmt(got)}) does not match the "
                              f"inferred ({_fmt(inferred)})", op.loc)


def _verify_block(block, visible: set[int]) -> None:
    visible = set(visible)
    visible.update(id(a) for a in block.args)
    for i, op in enumerate(block.ops):
        if op.parent is not block:
            raise VerifyError(f"{op.name} has a wrong parent link", op.loc)
        for v in op.operands:
            if id(v) not in visible:
                raise VerifyError(f"{op.name} uses a value that is not defined before it "
                                  f"({v.name_hint or v.type})", op.loc)
        if op.is_terminator and i != len(block.ops) - 1:
            raise VerifyError(f"{op.name} must be last in its block", op.loc)
        verify_declaration(op)
        for r in op.regions:
            if len(r.blocks) != 1:
                raise VerifyError(f"{op.name}: regions hold exactly one block", op.loc)
            _verify_block(r.block, visible)
        _at_op(op, op.verify_op)
        visible.update(id(r) for r in op.results)


def verify(ir) -> None:
    """Raise VerifyError (an MlfuseError, with the op's location) if ``ir`` is malformed."""
    if isinstance(ir, ModuleOp):
        verify_declaration(ir)
        ir.verify_op()
        for f in ir.funcs:
            verify(f)
        return
    if isinstance(ir, FuncOp):
        _verify_block(ir.body, set())
        verify_declaration(ir)
        ir.verify_op()
        return
    raise TypeError(f"cannot verify {ir!r}")
