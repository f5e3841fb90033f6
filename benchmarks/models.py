"""Real models end to end (issue 15): torchvision, timm and transformers models with
random weights, exported to ONNX, compiled by mlfuse, checked against ONNX Runtime and
timed against PyTorch eager and torch.compile.

    python benchmarks/models.py --export DIR [--small] [--only NAME]   # export only (CPU)
    python benchmarks/models.py --check-interp DIR [--only NAME]       # mlfuse's NumPy
        # tensor interpreter vs ONNX Runtime on models exported to DIR (CPU, no torch)
    python benchmarks/models.py [--only NAME] [--extra]                # on a GPU: all of it
    python benchmarks/models.py --markdown-from benchmarks/results/models.json

The full mode exports each model (to --models-dir, default a temporary folder), then
per model: ONNX Runtime's CPU output on random inputs (the reference); mlfuse's
compile time (import, passes, code generation, module load) and first-call time
(kernel compilation by Numba, launch, synchronize); the fusion report's kernel counts
before and after fusion; the relative error of every output,
max|mlfuse - ort| / max|ort| (the largest elementwise difference over the largest
reference magnitude, so it is not inflated where the reference is near zero; the
limit is REL_ERROR_LIMIT = 1e-5 in fp32); then the median device time per call of
mlfuse, torch eager and torch.compile (CUDA events around back-to-back calls after a
warm-up, mlfuse.tools.benchmark.time_gpu; TF32 off for torch). Results go to
benchmarks/results/models.json and a Markdown table is printed. The first call
finds kernels in mlfuse's disk cache when an earlier run compiled them: run with
MLFUSE_KERNEL_CACHE=0 for the cold time.

Nothing is downloaded: every model is built from its class with random weights
(seeded). "listed" models are the six of issue 15; the "extra" ones (same families,
other operators: bottleneck blocks, SE blocks, depthwise 7x7 convolutions, RoPE,
RMSNorm, SiLU gates, DistilBERT's masks) are exported with --extra or --only.
"""
from __future__ import annotations

import argparse
import collections
import datetime
import json
import os
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT)]
RESULTS = ROOT / "benchmarks" / "results"
OPSET = 17
REL_ERROR_LIMIT = 1e-5  # max|a - b| / max|b| per output, fp32 (issue 15's target)
TIMING_BUDGET_MS = 1500


def log(msg: str) -> None:
    sys.stderr.write(f"[{time.strftime('%H:%M:%S')}] {msg}\n")
    sys.stderr.flush()


# -- the models --------------------------------------------------------------------
def _torchvision():
    """torchvision, also where a CUDA torchvision wheel sits beside a CPU-only torch
    (as on a CPU export machine): its C extension then fails to load and the import
    stops at the two fake-kernel registrations of detection ops that the extension
    would have defined. The classification models are plain Python, so defining
    those two schemas is enough to import it."""
    import torch
    try:
        import torchvision
    except RuntimeError as e:
        if "torchvision::nms" not in str(e):
            raise
        lib = torch.library.Library("torchvision", "DEF")
        for op in ("nms", "qnms"):
            lib.define(f"{op}(Tensor dets, Tensor scores, float iou_threshold) -> Tensor")
        _torchvision.keep = lib  # the definitions live as long as the Library object
        import torchvision
    return torchvision


def _image(batch, size=224):
    import torch
    return (torch.randn(batch, 3, size, size),)


def _token_ids(batch, seq, vocab):
    import torch
    return (torch.randint(0, vocab, (batch, seq), dtype=torch.int64),)


def _vision(name):
    def build(small):
        return getattr(_torchvision().models, name)(weights=None), _image(1 if small else 8)
    return build


def _timm(name, batch=8):
    def build(small):
        import timm
        return timm.create_model(name, pretrained=False), _image(1 if small else batch)
    return build


def _last_hidden_state(model):
    """A transformers model as a module whose forward takes token ids and returns one
    plain tensor. It passes an all-ones attention mask, as a tokenizer would (without
    one, transformers 5 looks for packed sequences with aten::diff, which the
    TorchScript exporter lacks)."""
    import torch

    import inspect
    options = {"use_cache": False} if "use_cache" in inspect.signature(model.forward).parameters \
        else {}

    class Wrapped(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.model = model

        def forward(self, x):
            return self.model(x, attention_mask=torch.ones_like(x), **options).last_hidden_state
    return Wrapped()


def gpt2(small):
    from transformers import GPT2Config, GPT2Model
    config = GPT2Config(n_embd=256, n_layer=2, n_head=4, n_positions=128,
                        attn_implementation="eager")
    batch, seq = (1, 16) if small else (8, 128)
    return _last_hidden_state(GPT2Model(config)), _token_ids(batch, seq, config.vocab_size)


def bert_encoder(small):
    """BERT's encoder stack (2 layers, hidden 256) on hidden states, as in issue 15."""
    import torch
    from transformers import BertConfig, BertModel
    config = BertConfig(hidden_size=256, num_hidden_layers=2, num_attention_heads=4,
                        intermediate_size=1024, attn_implementation="eager")
    encoder = BertModel(config).encoder

    class Encoder(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.encoder = encoder

        def forward(self, h):
            return self.encoder(h).last_hidden_state
    batch, seq = (1, 16) if small else (8, 128)
    return Encoder(), (torch.randn(batch, seq, 256),)


def mlp(small):
    import torch
    from torch import nn
    model = nn.Sequential(nn.Linear(1024, 4096), nn.GELU(), nn.Linear(4096, 1024))
    return model, (torch.randn(4 if small else 256, 1024),)


def llama(small):
    """A LLaMA-style decoder: RoPE, RMSNorm, SiLU-gated MLP, grouped-query attention."""
    from transformers import LlamaConfig, LlamaModel
    config = LlamaConfig(hidden_size=256, intermediate_size=688, num_hidden_layers=2,
                         num_attention_heads=4, num_key_value_heads=2, vocab_size=4096,
                         max_position_embeddings=256, attn_implementation="eager")
    batch, seq = (1, 16) if small else (4, 128)
    return _last_hidden_state(LlamaModel(config)), _token_ids(batch, seq, config.vocab_size)


def distilbert(small):
    from transformers import DistilBertConfig, DistilBertModel
    config = DistilBertConfig(dim=256, hidden_dim=1024, n_layers=2, n_heads=4,
                              attn_implementation="eager")
    batch, seq = (1, 16) if small else (8, 128)
    return _last_hidden_state(DistilBertModel(config)), _token_ids(batch, seq, config.vocab_size)


@dataclass(frozen=True)
class ModelCase:
    name: str
    build: Callable  # build(small: bool) -> (torch module, tuple of example inputs)
    listed: bool     # one of issue 15's six


MODELS = [
    ModelCase("resnet18", _vision("resnet18"), True),
    ModelCase("mobilenet_v3_small", _vision("mobilenet_v3_small"), True),
    ModelCase("vit_tiny", _timm("vit_tiny_patch16_224"), True),
    ModelCase("gpt2", gpt2, True),
    ModelCase("bert_encoder", bert_encoder, True),
    ModelCase("mlp", mlp, True),
    ModelCase("resnet50", lambda small: (_torchvision().models.resnet50(weights=None),
                                         _image(1 if small else 2)), False),
    ModelCase("mobilenet_v2", _vision("mobilenet_v2"), False),
    ModelCase("efficientnet_b0", _vision("efficientnet_b0"), False),
    ModelCase("convnext_tiny", lambda small: (_torchvision().models.convnext_tiny(weights=None),
                                              _image(1 if small else 2)), False),
    ModelCase("deit_tiny", _timm("deit_tiny_patch16_224"), False),
    ModelCase("llama", llama, False),
    ModelCase("distilbert", distilbert, False),
]


def selected(only, extra) -> list[ModelCase]:
    names = {m.name for m in MODELS}
    for o in only or []:
        if o not in names:
            raise SystemExit(f"no model '{o}' (models: {', '.join(sorted(names))})")
    return [m for m in MODELS if (m.name in only if only else (m.listed or extra))]


# -- export ------------------------------------------------------------------------
def export(case: ModelCase, folder: Path, small: bool = False):
    """Build ``case`` (seeded random weights), export it to folder/NAME.onnx; returns
    (path, module, example inputs)."""
    import torch
    torch.manual_seed(0)
    model, args = case.build(small)
    model = model.eval()
    path = folder / f"{case.name}.onnx"
    names = [f"x{i}" if len(args) > 1 else "x" for i in range(len(args))]
    with torch.no_grad():
        torch.onnx.export(model, args, str(path), opset_version=OPSET, dynamo=False,
                          input_names=names, output_names=["y"])
    return path, model, args


def histogram(path) -> collections.Counter:
    import onnx
    return collections.Counter(n.op_type for n in onnx.load(str(path)).graph.node)


def export_all(cases, folder: Path, small: bool) -> int:
    folder.mkdir(parents=True, exist_ok=True)
    for case in cases:
        started = time.perf_counter()
        path, _, _ = export(case, folder, small)
        counts = histogram(path)
        log(f"{case.name}: {path} ({path.stat().st_size / 1e6:.1f} MB, "
            f"{time.perf_counter() - started:.1f} s)")
        print(f"{case.name}: {sum(counts.values())} nodes: "
              + ", ".join(f"{op} {n}" for op, n in sorted(counts.items())))
    return 0


# -- checking ----------------------------------------------------------------------
def random_feeds(path, seed: int = 0) -> dict:
    """Inputs for the graph: normal floats, token ids in [0, 100) for integer inputs."""
    import numpy as np
    import onnx
    from onnx import helper
    rng = np.random.default_rng(seed)
    feeds = {}
    for value in onnx.load(str(path)).graph.input:
        t = value.type.tensor_type
        shape = [d.dim_value for d in t.shape.dim]
        dtype = helper.tensor_dtype_to_np_dtype(t.elem_type)
        feeds[value.name] = (rng.integers(0, 100, shape).astype(dtype) if dtype.kind in "iu"
                             else rng.standard_normal(shape).astype(dtype))
    return feeds


def onnx_runtime(path, feeds) -> list:
    import onnxruntime as ort
    return ort.InferenceSession(str(path), providers=["CPUExecutionProvider"]).run(None, feeds)


def relative_error(got, want) -> float:
    """max|got - want| / max|want|, in float64."""
    import numpy as np
    got, want = np.asarray(got, np.float64), np.asarray(want, np.float64)
    if got.shape != want.shape:
        return float("inf")
    scale = float(np.max(np.abs(want))) if want.size else 0.0
    diff = float(np.max(np.abs(got - want))) if want.size else 0.0
    return diff / scale if scale else diff


def check_interp(cases, folder: Path) -> int:
    """mlfuse's import + NumPy tensor interpreter against ONNX Runtime: the check
    available without a GPU (the simulator is far too slow for whole models)."""
    from mlfuse.frontend.onnx_import import import_onnx
    from mlfuse.interp.tensor_interp import run_tensor
    failed = 0
    for case in cases:
        path = folder / f"{case.name}.onnx"
        if not path.exists():
            print(f"{case.name}: {path} missing (export it first)")
            failed += 1
            continue
        feeds = random_feeds(path)
        expected = onnx_runtime(path, feeds)
        try:
            started = time.perf_counter()
            imported = import_onnx(path)
            imported_s = time.perf_counter() - started
            got = run_tensor(imported.func, [feeds[n] for n in imported.input_names]
                             + [a for _, a in imported.constants])
        except Exception as e:
            print(f"{case.name}: FAILED {type(e).__name__}: {str(e).splitlines()[0][:300]}")
            failed += 1
            continue
        errors = [relative_error(g, w) for g, w in zip(got, expected)]
        ok = all(e <= REL_ERROR_LIMIT for e in errors)
        failed += not ok
        print(f"{case.name}: {'ok' if ok else 'MISMATCH'} relative error "
              f"{max(errors):.2e} (import {imported_s:.1f} s)")
    return 1 if failed else 0


# -- the GPU run -------------------------------------------------------------------
def fusion_counts(imported) -> tuple[int, int]:
    from mlfuse.pipeline import lower
    from mlfuse.tools.explain import explain_module
    (report,) = explain_module(lower(imported.module, "loops"))
    return report.kernels_before, report.kernels_after


def run_model(case: ModelCase, folder: Path) -> dict:
    import torch
    from numba import cuda
    import mlfuse
    from mlfuse.tools.benchmark import time_gpu
    result = {"mlfuse": None, "torch": None, "torch_compile": None, "checked": False}
    log(f"{case.name}: export")
    path, model, _ = export(case, folder)
    result["onnx_nodes"] = sum(histogram(path).values())
    feeds = random_feeds(path)
    log(f"{case.name}: ONNX Runtime reference")
    expected = onnx_runtime(path, feeds)
    try:
        log(f"{case.name}: compile")
        started = time.perf_counter()
        compiled = mlfuse.compile_onnx(path)
        result["compile_s"] = round(time.perf_counter() - started, 2)
        result["kernels_unfused"], result["kernels_fused"] = fusion_counts(compiled.imported)
        inputs = [torch.from_numpy(feeds[n]).cuda() for n in compiled.input_names]
        device_inputs = [cuda.as_cuda_array(t) for t in inputs]
        started = time.perf_counter()
        got = compiled(*device_inputs)
        cuda.synchronize()
        result["first_call_s"] = round(time.perf_counter() - started, 2)
    except Exception as e:  # reported, not fatal: the other models still run
        log(f"  mlfuse failed: {type(e).__name__}: {(str(e).splitlines() or [''])[0][:300]}")
        result["error"] = f"{type(e).__name__}: {(str(e).splitlines() or [''])[0][:300]}"
        return result
    errors = [relative_error(g.copy_to_host(), w) for g, w in zip(got, expected)]
    result["rel_error"] = max(errors)
    result["checked"] = result["rel_error"] <= REL_ERROR_LIMIT
    if not result["checked"]:
        log(f"  MISMATCH: relative error {result['rel_error']:.3g}")
    model = model.cuda()
    torch_inputs = [torch.from_numpy(feeds[n]).cuda() for n in compiled.input_names]
    calls = {"mlfuse": lambda i: compiled(*device_inputs)}
    with torch.no_grad():
        try:
            eager = model(*torch_inputs)
            result["torch_rel_error"] = relative_error(eager.cpu().numpy(), expected[0])
            calls["torch"] = lambda i: model(*torch_inputs)
            log(f"{case.name}: torch.compile")
            compiled_torch = torch.compile(model)
            started = time.perf_counter()
            compiled_torch(*torch_inputs)
            torch.cuda.synchronize()
            result["torch_compile_first_call_s"] = round(time.perf_counter() - started, 2)
            calls["torch_compile"] = lambda i: compiled_torch(*torch_inputs)
        except Exception as e:  # a peer that fails is reported; mlfuse is still timed
            log(f"  torch failed: {type(e).__name__}: {(str(e).splitlines() or [''])[0][:300]}")
            result["torch_error"] = f"{type(e).__name__}"
        for label, call in calls.items():
            log(f"{case.name}: timing {label}")
            result[label] = round(time_gpu(call, repeats=11, budget_ms=TIMING_BUDGET_MS)
                                  .median_ms, 4)
    return result


def run_all(cases, folder: Path, out: Path) -> int:
    import torch
    from mlfuse.runtime.device import gpu_present
    if not gpu_present() or not torch.cuda.is_available():
        sys.stderr.write("the full run needs a CUDA GPU (use --export or --check-interp here)\n")
        return 2
    from mlfuse.runtime.memory import install
    install()  # before any Numba CUDA call, as benchmarks/run.py does
    from numba import cuda
    # exact float32 matmuls and convolutions, as mlfuse computes them
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    os.environ.setdefault("TORCHINDUCTOR_CACHE_DIR", "/tmp/mlfuse-bench-inductor")
    device = cuda.get_current_device().name
    device = device.decode() if isinstance(device, bytes) else device
    results = {"device": device, "date": datetime.date.today().isoformat(),
               "rel_error": "max|mlfuse - onnxruntime| / max|onnxruntime| per output",
               "rel_error_limit": REL_ERROR_LIMIT, "models": {}}
    for case in cases:
        started = time.perf_counter()
        results["models"][case.name] = run_model(case, folder)
        results["models"][case.name]["wall_s"] = round(time.perf_counter() - started, 1)
        out.mkdir(parents=True, exist_ok=True)  # after every model: a cut-short run keeps its numbers
        (out / "models.json").write_text(json.dumps(results, indent=2) + "\n")
    print(markdown(results))
    return 0 if all(r["checked"] for r in results["models"].values()) else 1


def markdown(results: dict) -> str:
    from mlfuse.tools.benchmark import markdown_table
    rows = []
    for name, r in results["models"].items():
        kernels = (f"{r['kernels_unfused']} -> {r['kernels_fused']}"
                   if r.get("kernels_fused") is not None else None)
        vs_eager = (f"{r['torch'] / r['mlfuse']:.2f}x" if r.get("mlfuse") and r.get("torch")
                    else None)
        rel = f"{r['rel_error']:.1e}" if r.get("rel_error") is not None else r.get("error")
        rows.append([name, r.get("mlfuse"), r.get("torch"), r.get("torch_compile"), vs_eager,
                     kernels, r.get("compile_s"), r.get("first_call_s"), rel,
                     "yes" if r.get("checked") else "NO"])
    return (f"Device: **{results['device']}**; date: {results['date']}; times in ms "
            "(median per call); relative error = max|mlfuse - onnxruntime| / "
            "max|onnxruntime|.\n\n" + markdown_table(
                ["model", "mlfuse", "torch eager", "torch.compile", "eager / mlfuse",
                 "kernels unfused -> fused", "compile s", "first call s", "rel. error",
                 "checked"], rows))


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--export", metavar="DIR", help="export the models to DIR and stop")
    p.add_argument("--check-interp", metavar="DIR",
                   help="check mlfuse's tensor interpreter against ONNX Runtime on DIR's models")
    p.add_argument("--small", action="store_true",
                   help="with --export: batch 1 and short sequences (for --check-interp)")
    p.add_argument("--only", action="append", help="only this model (repeatable)")
    p.add_argument("--extra", action="store_true", help="the extra models too")
    p.add_argument("--models-dir", help="where the full run exports (default: a temporary folder)")
    p.add_argument("--out", default=str(RESULTS), help="folder for models.json")
    p.add_argument("--markdown-from", help="print the Markdown table of a models.json")
    args = p.parse_args(argv)
    if args.markdown_from:
        print(markdown(json.loads(Path(args.markdown_from).read_text())), end="")
        return 0
    cases = selected(args.only, args.extra)
    if args.export:
        return export_all(cases, Path(args.export), args.small)
    if args.check_interp:
        return check_interp(cases, Path(args.check_interp))
    if args.models_dir:
        Path(args.models_dir).mkdir(parents=True, exist_ok=True)
        return run_all(cases, Path(args.models_dir), Path(args.out))
    with tempfile.TemporaryDirectory() as folder:
        return run_all(cases, Path(folder), Path(args.out))


if __name__ == "__main__":
    sys.exit(main())
