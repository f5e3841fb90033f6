#!/usr/bin/env bash
# What was built without a GPU and waits for its first run (docs/perf-notes.md, "What is
# left"): one device call builds, checks and times it all, logs under $OUT, tables last.
#
#   device run:   bash benchmarks/pending_gpu_checks.sh   (carry .whl; see ../shared/gpu/NOTES.md)
#
# (The twenty-seventh session's checks, run then, are in this file's history.)
# 1. split-reductions (twenty-eighth session): group norm over channels-last as a column
#    reduction then the groups' statistics, compiled for symbols (what a user gets) with
#    every peer, and for sizes;
# 2. the same pass on batch norm over NCHW with short spatial rows, compiled for sizes,
#    against the one-reduction plan (split_reduction_min_ratio huge), every peer checked:
#    run first with the rule "outer extent >= 16 and above the inner" (which split these
#    and ran 1.3-5.7x slower, benchmarks/results/sweep-2026-12-07-session28-h100-bn*.log);
#    with the ratio rule both plans should be the same.
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
    --target /tmp/site .whl/*.whl && export PYTHONPATH=/tmp/site:$PWD || exit
mkdir -p "$OUT"
nvidia-smi --query-gpu=name --format=csv,noheader | tee "$OUT/gpu.txt"
git log --oneline -1 > "$OUT/tree.txt" 2>/dev/null
python benchmarks/shape_sweep.py --only group_norm_nhwc --only group_norm \
    --out "$OUT/gn" > "$OUT/gn.log" 2>&1
python benchmarks/shape_sweep.py --only group_norm_nhwc --for-sizes --no-peers \
    --out "$OUT/gn_sized" > "$OUT/gn_sized.log" 2>&1
python benchmarks/shape_sweep.py --only batchnorm_train --for-sizes \
    --out "$OUT/bn" > "$OUT/bn.log" 2>&1
python benchmarks/shape_sweep.py --only batchnorm_train --for-sizes --no-peers \
    --hw split_reduction_min_ratio=1000000000 --out "$OUT/bn_one" > "$OUT/bn_one.log" 2>&1
for f in gn gn_sized bn bn_one; do
  echo "== $f"; grep -E "^\| |Error|FAIL|Traceback" "$OUT/$f.log" | tail -16
done
