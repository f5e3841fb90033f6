"""The benchmark harness on the CPU: statistics, input rotation, the timing plan,
the bytes-moved model, tables, the result schema and the comparison rules.
(Timings themselves need the GPU.)"""
import json
import sys
from pathlib import Path

import numpy as np
import pytest

from mlfuse.tools.benchmark import (markdown_table, plan_repeats, relative_error, rotations,
                              summarize, time_gpu)
from mlfuse.tools.checking import compare

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


def test_slow_calls_get_fewer_repeats_and_fast_ones_are_batched():
    assert plan_repeats(0.3, repeats=11, budget_ms=800) == (11, 200)   # capped batch
    assert plan_repeats(2.0, repeats=11, budget_ms=800) == (11, 36)
    assert plan_repeats(95.0, repeats=11, budget_ms=800) == (8, 1)     # naive 4096^3 matmul
    assert plan_repeats(1000.0, repeats=11, budget_ms=800) == (3, 1)   # never fewer than 3


def test_bytes_moved_counts_each_kernels_reads_and_writes_once():
    from cases import CASES
    from mlfuse.cli.bench import bytes_moved
    from mlfuse.pipeline import parse_program
    chain = next(c for c in CASES if c.name == "ew_chain")
    (func,) = parse_program(chain.source, "ew_chain").funcs
    n = 1024
    # fused: read x and b, write the result. unfused: x*2 (2 arrays), +b (3), relu (2),
    # *0.5 (2), +x (3)
    assert bytes_moved(func, {"N": n}) == (12 * 4 * n, 3 * 4 * n)


def test_relative_error_catches_tf32_but_not_float32_rounding():
    import run
    rng = np.random.default_rng(0)
    x, w = rng.standard_normal((16, 4096)), rng.standard_normal((4096, 32))
    ref = x @ w
    f32 = x.astype(np.float32) @ w.astype(np.float32)

    def tf32(a):  # keep TF32's 10 mantissa bits
        return (a.astype(np.float32).view(np.uint32) & np.uint32(0xFFFFE000)).view(np.float32)
    assert relative_error(ref, f32) < run.REL_ERROR_LIMIT / 10
    assert relative_error(ref, tf32(x).astype(np.float64) @ tf32(w)) > run.REL_ERROR_LIMIT * 10
    assert relative_error(np.zeros(3), np.zeros(3)) == 0.0


RESULTS = {"device": "GPU", "date": "2026-11-22", "versions": {}, "copy_GBps": 3000.0, "cases": {
    "softmax": {"mlfuse": 0.5, "mlfuse_unfused": 1.0, "torch": 0.4, "torch_compile": 0.25,
                "cupy": None, "checked": True, "bytes_fused": 600_000_000},
    "small_latency": {"mlfuse": 100.0, "mlfuse_unfused": 800.0, "torch": 50.0,
                      "torch_compile": 55.0, "cupy": 200.0, "checked": False}}}


def test_results_json_renders_as_the_benchmarks_table():
    import run
    table = run.markdown(json.loads(json.dumps(RESULTS)))
    assert ("| softmax | ms | 0.500 | 1.000 | 0.400 | 0.250 | - | 2.00x slower | 40% | yes |"
            in table)
    assert ("| small_latency | us (host) | 100.000 | 800.000 | 50.000 | 55.000 | 200.000 | "
            "2.00x slower | - | NO |" in table)
    assert "copy bandwidth 3000.0 GB/s" in table


AWAITING_GPU_RUN: set = set()  # cases not yet
# in benchmarks/results/latest.json (emptied by the GPU run that measures them)


def test_results_schema_accepts_the_committed_results_and_names_what_is_wrong():
    import run
    assert run.schema_problems(RESULTS) == []
    committed = json.loads((ROOT / "benchmarks" / "results" / "latest.json").read_text())
    assert run.schema_problems(committed) == []
    cases = {c.name for c in __import__("cases").CASES}
    # every case in the committed results, but cases added since the last GPU run (listed
    # here until their first measured results are committed)
    assert set(committed["cases"]) <= cases
    assert cases - set(committed["cases"]) <= AWAITING_GPU_RUN
    broken = json.loads(json.dumps(RESULTS))
    del broken["cases"]["softmax"]["torch"]
    broken["cases"]["small_latency"]["mlfuse"] = "fast"
    broken["date"] = None
    assert run.schema_problems(broken) == ["date: missing or not str", "softmax.torch: missing",
                                           "small_latency.mlfuse: not a time"]


def test_a_dry_run_case_checks_every_peer_and_fits_the_schema():
    import run
    from cases import CASES
    case = next(c for c in CASES if c.name == "ew_chain")
    peers = run.available_peers(timed=False)
    assert "torch_compile" not in peers and "cupy" not in peers
    entry = run.run_case(case, case.dims_for(dry_run=True), timed=False, peers=peers)
    assert entry["checked"] and set(entry["rel_errors"]) == peers
    assert entry["bytes_fused"] == 3 * 4 * 64
    assert run.schema_problems({**RESULTS, "cases": {"ew_chain": entry}}) == []


def test_every_case_compiles_and_names_its_function_after_the_case():
    from cases import CASES
    from mlfuse.pipeline import parse_program
    assert {c.name for c in CASES} == {"ew_chain", "ew_chain10", "softmax", "layernorm", "sumsq",
                                       "matmul_bias_relu", "conv_bias_relu", "mlp", "small_latency",
                                       "colsum", "sumsq_all", "softmax_short", "softmax_long",
                                       "bias_gelu_f16", "transpose_add", "nchw_nhwc", "bce_mean",
                                       "attn_tail", "matmul_3xtf32", "matmul_decode",
                                       "matmul_mlp_layer", "matmul_projection",
                                       "conv1x1_bias_relu", "conv3x3_256_bias_relu",
                                       "mlp_linear_gelu", "softmax_middle", "instance_norm",
                                       "column_centring", "group_norm", "l2norm_both",
                                       "residual_layernorm", "masked_mean_pool",
                                       "matmul_f16_bias_relu", "matmul_bf16_bias_relu"}
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


def test_the_table_block_of_benchmarks_md_is_replaced_and_the_prose_kept(tmp_path):
    import run
    md = tmp_path / "BENCHMARKS.md"
    md.write_text(f"# Benchmarks\nintro\n{run.TABLE_START}\nold table\n{run.TABLE_END}\nanalysis\n")
    run.update_markdown_file(md, run.markdown(RESULTS))
    text = md.read_text()
    assert text.startswith("# Benchmarks\nintro\n") and text.endswith(f"{run.TABLE_END}\nanalysis\n")
    assert "old table" not in text and "| softmax | ms | 0.500 |" in text


def test_models_script_selects_models_and_renders_its_table():
    """benchmarks/models.py on the CPU: the model list, the relative-error rule and
    the table (the export, the check and the timings need torch and a GPU)."""
    import models
    assert [m.name for m in models.selected(None, False)] == [
        "resnet18", "mobilenet_v3_small", "vit_tiny", "gpt2", "bert_encoder", "mlp"]
    assert len(models.selected(None, True)) > 6
    assert [m.name for m in models.selected(["llama"], False)] == ["llama"]
    with pytest.raises(SystemExit, match="no model 'alexnet'"):
        models.selected(["alexnet"], False)
    want = np.array([[1.0, -4.0], [0.0, 2.0]], np.float32)
    assert models.relative_error(want + np.float32(1e-6), want) == pytest.approx(2.5e-7, rel=0.1)
    assert models.relative_error(want[:1], want) == float("inf")
    results = {"device": "H100", "date": "2026-11-23", "models": {
        "mlp": {"mlfuse": 0.5, "torch": 1.0, "torch_compile": 0.4, "checked": True,
                "kernels_unfused": 11, "kernels_fused": 2, "compile_s": 1.2,
                "first_call_s": 3.4, "rel_error": 3e-7},
        "gpt2": {"mlfuse": None, "torch": None, "torch_compile": None, "checked": False,
                 "error": "MlfuseError: ..."}}}
    table = models.markdown(results)
    assert "| mlp | 0.500 | 1.000 | 0.400 | 2.00x | 11 -> 2 | 1.200 | 3.400 | 3.0e-07 | yes |" in table
    assert "| gpt2 | - | - | - | - | - | - | - | MlfuseError: ... | NO |" in table


def test_cost_model_error_sets_each_measured_case_beside_its_estimate():
    """benchmarks/cost_model_error.py: measured / estimated per case, by family; cases
    without a measurement (and latency cases) are left out rather than guessed."""
    import cost_model_error as cme
    table = cme.rows({"softmax": {"mlfuse": 0.2}, "matmul_decode": {"mlfuse": 0.05},
                      "small_latency": {"mlfuse": 13.0}})
    by_case = {r["case"]: r for r in table}
    assert set(by_case) == {"softmax", "matmul_decode"}
    soft = by_case["softmax"]
    assert soft["family"] == "memory" and soft["schedules"] == "row"
    assert soft["measured_us"] == pytest.approx(200.0)
    assert soft["ratio"] == pytest.approx(200.0 / soft["estimated_us"])
    assert by_case["matmul_decode"]["family"] == "contraction"
    lines = cme.summary(table)
    assert lines[0].startswith("memory: 1 cases") and lines[1].startswith("contraction: 1 cases")
