#!/usr/bin/env bash
# What was built without a GPU and waits for its first run (docs/perf-notes.md, "What is
# left"): one device call builds, checks and times it all, logs under $OUT, tables last.
#
#   here, first:  mkdir -p old_tree && git archive 0d17113 mlfuse dialects grammar \
#                     benchmarks examples | tar -x -C old_tree \
#                 && cp benchmarks/shape_sweep.py old_tree/benchmarks/
#   device run:   bash benchmarks/pending_gpu_checks.sh   (carry .whl; see ../shared/gpu/NOTES.md)
#                 (QUICK=1: without the 3-blocks-an-SM staged rows variant)
#   after:        rm -rf old_tree   (the duplicates tool flags it)
#
# 1. 16-bit pointwise kernels over constant extents of whole 8-byte but not 16-byte vectors
#    (emit_kernel.half_pointwise_vectors, session 25's fix), checked against NumPy;
# 2. staged rows (hw.row_staged_stores, off by default) against the two kernels it replaces,
#    compiled for sizes, and at 3 blocks an SM;
# 3. held strips in fewer instructions (session 26) against 0d17113 (old_tree), and the
#    per-plan split rule as built (residual_mse);
# 4. x ** 0.5 at -inf and -0 on the device, as the interpreters now define it (C's pow);
# 5. group norm over channels-last (3 kernels; session 27 tried 1 and 2, both not kept).
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
    --target /tmp/site .whl/*.whl && export PYTHONPATH=/tmp/site:$PWD || exit
mkdir -p "$OUT"
nvidia-smi --query-gpu=name --format=csv,noheader | tee "$OUT/gpu.txt"
i=0
for spec in "f16 100" "bf16 4" "bf16 4100" "f16 12" "f16 4096" "bf16 1000004"; do
  set -- $spec; i=$((i+1))
  printf 'func h(x: %s[%s], y: %s[%s]) -> %s[%s] {\n    return relu(x * 2.0 + y)\n}\n' \
      $1 $2 $1 $2 $1 $2 > /tmp/h$i.fuse
  echo "== $spec" >> "$OUT/half.log"
  python -m mlfuse run /tmp/h$i.fuse >> "$OUT/half.log" 2>&1 || echo "FAIL $spec" >> "$OUT/half.log"
done
# x ** 0.5 at -inf and -0 (C's pow: +inf, +0) in f32, f64, bf16 and f16 on the device
python -m mlfuse run tests/regressions/pow_half_signed_inf.fuse \
    --inputs tests/regressions/pow_half_signed_inf.npz > "$OUT/pow.log" 2>&1 || echo "FAIL pow" >> "$OUT/pow.log"
# a bf16 difference held in f32 within a kernel (the rounding analysis leaves the tie out)
python -m mlfuse run tests/regressions/bf16_sub_held_in_f32_tie.fuse \
    --inputs tests/regressions/bf16_sub_held_in_f32_tie.npz > "$OUT/bf16_tie.log" 2>&1 || echo "FAIL bf16 tie" >> "$OUT/bf16_tie.log"
ST="--only layernorm_transposed --only softmax_rows_transposed"
python benchmarks/shape_sweep.py $ST --for-sizes --hw row_staged_stores=1 --out "$OUT/staged" > "$OUT/staged.log" 2>&1
python benchmarks/shape_sweep.py $ST --for-sizes --no-peers --out "$OUT/staged_off" > "$OUT/staged_off.log" 2>&1
[ -n "$QUICK" ] || python benchmarks/shape_sweep.py $ST --for-sizes --hw row_staged_stores=1 \
    --hw staged_row_min_blocks=3 --no-peers --out "$OUT/staged3" > "$OUT/staged3.log" 2>&1
CASES="--only channel_layernorm --only layernorm_nhwc --only channel_softmax --only l1norm_channels"
CASES="$CASES --only residual_mse --only residual_mse_2d --only group_norm_nhwc"
python benchmarks/shape_sweep.py $CASES --out "$OUT/new" > "$OUT/new.log" 2>&1
if [ -d old_tree ]; then
  (cd old_tree && PYTHONPATH=/tmp/site:$PWD python benchmarks/shape_sweep.py $CASES --no-peers \
      --out "$OUT/old" > "$OUT/old.log" 2>&1)
fi
echo "--- 16-bit pointwise: $(grep -c '^PASS' "$OUT/half.log") of 6 PASS"; grep -i "fail\|error:" "$OUT/half.log" | head
echo "--- pow 0.5 at -inf: $(tail -1 "$OUT/pow.log")"
echo "--- bf16 tie: $(tail -1 "$OUT/bf16_tie.log")"
echo "--- staged rows (for sizes)"; tail -9 "$OUT/staged.log"
echo "--- two kernels (for sizes)"; tail -9 "$OUT/staged_off.log"
[ -f "$OUT/staged3.log" ] && { echo "--- staged rows, 3 blocks an SM"; tail -9 "$OUT/staged3.log"; }
echo "--- this tree"; tail -18 "$OUT/new.log"
[ -f "$OUT/old.log" ] && { echo "--- 0d17113"; tail -18 "$OUT/old.log"; }
