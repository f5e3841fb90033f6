"""The benchmark harness on the CPU: statistics, input rotation, tables, the result
schema and the comparison rule. (Timings themselves need the GPU.)"""
import json
import sys
from pathlib import Path

import numpy as np
import pytest

from mlfuse.benchmark import markdown_table, rotations, summarize, time_gpu
from mlfuse.testing import compare

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "benchmarks"))


def test_summary_takes_the_median_and_a_robust_spread():
    t = summarize([5.0, 1.0, 3.0, 2.0, 4.0])
    assert (t.median_ms, t.min_ms, t.max_ms, t.samples) == (3.0, 1.0, 5.0, 5)
    assert t.spread == pytest.approx((4.6 - 1.4) / 3.0)
    with pytest.raises(ValueError):
        summarize([])


def test_inputs_that_fit_in_l2_are_rotated_and_large_ones_are_not():
    l2 = 50 << 20
    assert rotations(1 << 30, l2) == 1          # 1 GiB: never cached
    assert rotations(4 << 20, l2) == 8          # 4 MiB: capped at 8 sets
    assert rotations(60 << 20, l2) == 3         # three sets cover three L2s
    assert rotations(0, l2) == 1


def test_timing_refuses_the_simulator():
    with pytest.raises(RuntimeError, match="simulator"):
        time_gpu(lambda i: None)


def test_markdown_table_formats_numbers_and_missing_values():
    text = markdown_table(["case", "ms", "peer"], [["a", 0.12345, None], ["b", 1234.5, 2]])
    assert text.splitlines() == ["| case | ms | peer |", "|---|---|---|",
                                 "| a | 0.123 | - |", "| b | 1234 | 2 |"]


def test_results_json_renders_as_the_benchmarks_table():
    import run
    results = {"device": "GPU", "date": "2026-11-22", "copy_GBps": 3000.0, "cases": {
        "softmax": {"mlfuse": 0.5, "mlfuse_unfused": 1.0, "torch": 0.4, "torch_compile": 0.25,
                    "cupy": None, "checked": True},
        "small_latency": {"mlfuse": 100.0, "mlfuse_unfused": 800.0, "torch": 50.0,
                          "torch_compile": 55.0, "cupy": 13.0, "checked": False}}}
    table = run.markdown(json.loads(json.dumps(results)))
    assert "| softmax | ms | 0.500 | 1.000 | 0.400 | 0.250 | - | 2.000 | yes |" in table
    assert "| small_latency | us (host) | 100.000 | 800.000 | 50.000 | 55.000 | 13.000 | 7.690 | NO |" in table
    assert "copy bandwidth 3000.0 GB/s" in table


def test_every_case_compiles_and_names_its_function_after_the_case():
    from cases import CASES
    from mlfuse.driver import parse_program
    assert {c.name for c in CASES} == {"ew_chain", "ew_chain10", "softmax", "layernorm", "sumsq",
                                       "matmul_bias_relu", "conv_bias_relu", "mlp", "small_latency"}
    for case in CASES:
        (func,) = parse_program(case.source, case.name).funcs
        assert func.sym_name == case.name


def test_reduction_results_near_zero_are_judged_against_the_results_scale():
    rng = np.random.default_rng(0)
    a, b = rng.standard_normal((32, 2048)), rng.standard_normal((2048, 32))
    ref = (a @ b).astype(np.float32)
    got = (a.astype(np.float32) @ b.astype(np.float32))
    assert compare(ref, got, 2, 2048).ok
    wrong = got.copy()
    wrong[3, 5] += 1.0                       # one bad element is still caught
    assert not compare(ref, wrong, 2, 2048).ok
