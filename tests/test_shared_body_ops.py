"""What two sibling reduces walked in one loop compute alike (dialects/reductions.
shared_body_ops): the split-columns first stage then loads and computes it once. A fused
body holds a copy of a constant per inlined producer, so constants and dims are the same
wherever they stand, but 0.0 and -0.0 are not one constant."""
from mlfuse.dialects import parse_ir
from mlfuse.dialects.loops import LoadOp, ReduceOp
from mlfuse.dialects.reductions import shared_body_ops

SIBLINGS = """
func @f(%x: buf<f32[R, C]>, %m: buf<f32[R, 1]>) -> (buf<f32[C]>) {
  %out = loops.alloc : buf<f32[C]>
  fused.kernel {extents = [C], kernel_name = "f_0", schedule = "split-columns"} (%i: index) {
    %0 = arith.constant {value = 0.0} : f32
    %a = loops.reduce %0 {combiner = "add", extent = R} : f32 (%k: index) {
      %c0 = arith.constant {value = 0} : index
      %1 = loops.load %m, %k, %c0 : f32
      %2 = arith.sigmoid %1 : f32
      %z = arith.constant {value = -0.0} : f32
      %3 = arith.mul %2, %z : f32
      loops.yield %3
    }
    %c0_1 = arith.constant {value = 0} : index
    %b = loops.reduce %0 {combiner = "add", extent = R} : f32 (%k1: index) {
      %4 = loops.load %m, %k1, %c0_1 : f32
      %5 = arith.sigmoid %4 : f32
      %z1 = arith.constant {value = 0.0} : f32
      %6 = arith.mul %5, %z1 : f32
      loops.yield %6
    }
    %7 = arith.add %a, %b : f32
    loops.store %7, %out, %i
  }
  return %out
}
"""


def _names(ops):
    return sorted(o.name for o in ops)


def test_constants_anywhere_are_one_value_but_signed_zeros_are_not():
    module = parse_ir(SIBLINGS)
    kernel = module.funcs[0].body.ops[1]
    first, other = [o for o in kernel.body.ops if isinstance(o, ReduceOp)]
    found = shared_body_ops(first, other)
    merged = [o for o in other.body.ops if id(o) in found]
    # the load through another copy of the index 0, and the sigmoid of it, are shared
    assert _names(merged) == ["arith.sigmoid", "loops.load"]
    load = next(o for o in merged if isinstance(o, LoadOp))
    assert found[id(load)] is next(o for o in first.body.ops if isinstance(o, LoadOp))
    # x * -0.0 is not x * 0.0 (the sign of a zero result differs): neither is merged
    assert not any(o.name in ("arith.mul", "arith.constant") for o in merged)
