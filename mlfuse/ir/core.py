"""The IR core: SSA values, operations, blocks and regions, and op declaration.

An op is one class that declares, in one place, its name, operands, attributes,
regions, fusion kind, result-type inference and verifier (see :class:`Operation`).
"""
from __future__ import annotations

from typing import Any, ClassVar, Iterator

from mlfuse.errors import Location, MlfuseError
from mlfuse.ir.traits import Trait
from mlfuse.ir.types import Type, is_dim_text


class VerifyError(MlfuseError):
    """The IR breaks a rule of an op or of SSA form."""


# Fusion kinds, as TVM's OpPatternKind orders them: lower kinds fuse more freely.
ELEMENTWISE = "elementwise"
BROADCAST = "broadcast"
INJECTIVE = "injective"
REDUCTION = "reduction"
OUT_ELEMENTWISE_FUSABLE = "out-elementwise-fusable"
OPAQUE = "opaque"
FUSION_KINDS = (ELEMENTWISE, BROADCAST, INJECTIVE, REDUCTION, OUT_ELEMENTWISE_FUSABLE, OPAQUE)


class Value:
    """An SSA value: defined once (an op result or a block argument), used by ops."""

    def __init__(self, type: Type, name_hint: str | None = None):
        self.type = type
        self.name_hint = name_hint
        # (user op, operand index) -> None: an insertion-ordered set, so that dropping
        # one use of a value used thousands of times (a kernel's index) is O(1)
        self.uses: dict[tuple[Operation, int], None] = {}

    @property
    def owner(self):
        raise NotImplementedError

    def users(self) -> list["Operation"]:
        seen: list[Operation] = []
        for op, _ in self.uses:
            if op not in seen:
                seen.append(op)
        return seen

    def replace_all_uses_with(self, new: "Value") -> None:
        for op, i in list(self.uses):
            op.set_operand(i, new)

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.name_hint or ''}: {self.type}>"


class OpResult(Value):
    def __init__(self, type: Type, op: "Operation", index: int, name_hint=None):
        super().__init__(type, name_hint)
        self.op = op
        self.index = index

    @property
    def owner(self) -> "Operation":
        return self.op


class BlockArgument(Value):
    def __init__(self, type: Type, block: "Block", index: int, name_hint=None):
        super().__init__(type, name_hint)
        self.block = block
        self.index = index

    @property
    def owner(self) -> "Block":
        return self.block


class Attr:
    """Declares one attribute of an op: its kind and default (``REQUIRED`` if none).

    kinds: int, float, bool, str, ints (list of int), dim (an int or a symbol),
    dims (list of int or symbol), any.
    """

    REQUIRED = object()
    KINDS = ("int", "float", "bool", "str", "ints", "dim", "dims", "any")

    def __init__(self, kind: str, default: Any = REQUIRED, doc: str = ""):
        assert kind in self.KINDS, kind
        self.kind = kind
        self.default = default
        self.doc = doc

    def check(self, value: Any) -> bool:
        k = self.kind
        if k == "int":
            return isinstance(value, int) and not isinstance(value, bool)
        if k == "float":
            return isinstance(value, (int, float)) and not isinstance(value, bool)
        if k == "bool":
            return isinstance(value, bool)
        if k == "str":
            return isinstance(value, str)
        if k == "dim":
            return _is_dim(value)
        if k == "ints":
            return isinstance(value, list) and all(isinstance(v, int) and not isinstance(v, bool) for v in value)
        if k == "dims":
            return isinstance(value, list) and all(map(_is_dim, value))
        return True


def _is_dim(value) -> bool:
    """An int, a symbol name or a canonical product of names (mlfuse.ir.types)."""
    return (isinstance(value, int) and not isinstance(value, bool)) or (
        isinstance(value, str) and is_dim_text(value))


class Operation:
    """Base of every op. Subclasses declare:

    - ``name``: "dialect.op";
    - ``operand_names``: names of operands; a last name starting with ``*`` is variadic;
    - ``attrs``: name -> :class:`Attr`;
    - ``num_regions``: how many regions (each holds one block);
    - ``fusion``: the fusion kind (one of FUSION_KINDS);
    - ``traits``: the facts passes and codegen read (``mlfuse.ir.traits``);
    - ``infer_types(operand_types, attributes)``: result types, or None when the
      op's results are given explicitly;
    - ``verify_op()``: op-specific rules, raising :class:`VerifyError`.
    """

    name: ClassVar[str] = "builtin.unknown"
    operand_names: ClassVar[tuple[str, ...]] = ()
    attrs: ClassVar[dict[str, Attr]] = {}
    num_regions: ClassVar[int] = 0
    fusion: ClassVar[str] = OPAQUE
    traits: ClassVar[frozenset[Trait]] = frozenset()
    is_terminator: ClassVar[bool] = False
    doc: ClassVar[str] = ""

    def __init__(self, operands=(), result_types=None, attributes=None, regions=None,
                 loc: Location | None = None, result_names=None):
        self.attributes: dict[str, Any] = {}
        for key, spec in self.attrs.items():
            if spec.default is not Attr.REQUIRED:
                self.attributes[key] = spec.default
        self.attributes.update(attributes or {})
        self._operands: list[Value] = []
        for v in operands:
            self._add_operand(v)
        if result_types is None:
            result_types = self.infer_types([v.type for v in self._operands], self.attributes)
            if result_types is None:
                raise VerifyError(f"{self.name}: result types must be given", loc)
        names = list(result_names or [])
        self.results = [OpResult(t, self, i, names[i] if i < len(names) else None)
                        for i, t in enumerate(result_types)]
        self.regions: list[Region] = list(regions) if regions is not None else [
            Region() for _ in range(self.num_regions)]
        for r in self.regions:
            r.parent = self
        self.parent: Block | None = None
        self.loc = loc

    # -- declaration hooks -------------------------------------------------
    @classmethod
    def infer_types(cls, operand_types: list[Type], attributes: dict) -> list[Type] | None:
        return None

    def verify_op(self) -> None:
        pass

    @classmethod
    def has_trait(cls, trait: Trait) -> bool:
        return trait in cls.traits

    # -- operands ------------------------------------------------------------
    def _add_operand(self, v: Value) -> None:
        if not isinstance(v, Value):
            raise TypeError(f"{self.name}: operand {v!r} is not a Value")
        v.uses[(self, len(self._operands))] = None
        self._operands.append(v)

    @property
    def operands(self) -> tuple[Value, ...]:
        return tuple(self._operands)

    def operand(self, name: str) -> Value:
        return self._operands[self.operand_names.index(name)]

    def set_operand(self, i: int, v: Value) -> None:
        old = self._operands[i]
        del old.uses[(self, i)]
        self._operands[i] = v
        v.uses[(self, i)] = None

    def drop_operands(self) -> None:
        for i, v in enumerate(self._operands):
            del v.uses[(self, i)]
        self._operands = []

    # -- convenience ---------------------------------------------------------
    @property
    def result(self) -> OpResult:
        assert len(self.results) == 1, f"{self.name} has {len(self.results)} results"
        return self.results[0]

    def __getitem__(self, key: str):
        return self.attributes[key]

    @property
    def body(self) -> "Block":
        return self.regions[0].block

    def walk(self) -> Iterator["Operation"]:
        """This op and every op nested in its regions, in pre-order."""
        yield self
        for r in self.regions:
            for b in r.blocks:
                for op in list(b.ops):
                    yield from op.walk()

    def erase(self) -> None:
        """Remove this op; its results must have no uses left."""
        for r in self.results:
            if r.uses:
                raise VerifyError(f"cannot erase {self.name}: result still used by "
                                  f"{next(iter(r.uses))[0].name}", self.loc)
        for op in reversed(list(self.walk())):
            op.drop_operands()
        if self.parent is not None:
            self.parent.ops.remove(self)
            self.parent = None

    def replace_with(self, values: list[Value]) -> None:
        """Replace every use of this op's results by ``values``, then erase it."""
        assert len(values) == len(self.results)
        for old, new in zip(self.results, values):
            old.replace_all_uses_with(new)
        self.erase()

    def ancestors(self) -> Iterator["Operation"]:
        op = self
        while op.parent is not None and op.parent.parent is not None:
            op = op.parent.parent.parent
            if op is None:
                return
            yield op

    def __repr__(self) -> str:
        return f"<{self.name} at {self.loc}>" if self.loc else f"<{self.name}>"


class Block:
    """A list of ops with typed arguments (loop indices, function parameters)."""

    def __init__(self, arg_types=(), arg_names=()):
        names = list(arg_names)
        self.args = [BlockArgument(t, self, i, names[i] if i < len(names) else None)
                     for i, t in enumerate(arg_types)]
        self.ops: list[Operation] = []
        self.parent: Region | None = None

    def add_arg(self, type: Type, name: str | None = None) -> BlockArgument:
        a = BlockArgument(type, self, len(self.args), name)
        self.args.append(a)
        return a

    def append(self, op: Operation) -> Operation:
        assert op.parent is None
        op.parent = self
        self.ops.append(op)
        return op

    def insert_before(self, anchor: Operation, op: Operation) -> Operation:
        assert op.parent is None
        op.parent = self
        self.ops.insert(self.ops.index(anchor), op)
        return op

    def detach(self, op: Operation) -> Operation:
        self.ops.remove(op)
        op.parent = None
        return op

    @property
    def parent_op(self) -> Operation | None:
        return self.parent.parent if self.parent else None


class Region:
    """A list of blocks owned by an op. mlfuse regions hold exactly one block."""

    def __init__(self, blocks=None):
        self.blocks: list[Block] = list(blocks) if blocks is not None else [Block()]
        for b in self.blocks:
            b.parent = self
        self.parent: Operation | None = None

    @property
    def block(self) -> Block:
        return self.blocks[0]
