"""The agreement rule's size terms (mlfuse.tools.checking.program_size): a reduction's
terms counted at the sizes the results were computed at, compound dims included."""
import numpy as np

from mlfuse.pipeline import parse_program
from mlfuse.tools.checking import program_size, tolerance

GROUPS = """
func g(x: f32[N, H, W, C]) -> f32[N, 1, 8, 1] {
    return mean(reshape(x, [N, H * W, 8, C / 8]), axis=[1, 3], keepdims=true)
}
"""


def test_a_reduction_over_compound_dims_counts_their_symbols_sizes():
    func = parse_program(GROUPS, "t.fuse").funcs[0]
    ops, reduced = program_size(func, dims={"N": 2, "H": 3, "W": 5, "C": 16})
    assert reduced == 3 * 5 * 16 // 8  # H*W times C/8: 30 terms, not 1024 * 1024
    assert tolerance(np.float32, ops, reduced) < 3e-5
    # symbols not bound count at the default size, each
    assert program_size(func)[1] == 1024 * 1024 * 1024 // 8


def test_a_quotient_that_does_not_divide_counts_rounded_down():
    func = parse_program(GROUPS, "t.fuse").funcs[0]
    assert program_size(func, dims={"N": 1, "H": 1, "W": 2, "C": 12})[1] == 2 * 1
