#!/usr/bin/env bash
# What was built without a GPU and waits for its first run (docs/perf-notes.md, "What is
# left"): one device call builds, checks and times it all, logs under $OUT, tables last.
#
#   device run:   bash benchmarks/pending_gpu_checks.sh   (carry .whl; see ../shared/gpu/NOTES.md)
#
# (Earlier sessions' checks, run then, are in this file's history: the twenty-eighth
# session's split-reductions sweep on 0075a39, logs in benchmarks/results.)
# 1. staged rows in stages of several steps, rows' starts in place of offset tiles
#    (twenty-ninth session): layernorm and softmax stored transposed, compiled for sizes,
#    with the knob on (one kernel) against off (two kernels, the default), every peer;
# 2. group norm over channels-last after 966e68e (a loop index divided by a run-time
#    extent through the host's magic numbers), 7cd4f9c (a thread-per-point combine
#    walks every reduce's partials at once) and bc23786 (the columns' pass in 16-byte
#    vectors): kernel by kernel, then the sweep with every peer;
# 3. the suite's cases whose split or column-stage combines hold several reduces;
# 4. (thirtieth session) two fusion misses made one kernel: group norm with a time
#    embedding t[n, c] added (the rows keep their split plan), a middle softmax with a
#    mask m[b, s, 0] (strips' vector and shared kernels read it a value a thread), every
#    peer; instance norm over few long rows (priced flattened: one kernel, split).
# Each part prints its table as it ends, so a call cut short keeps what ran. PART=1 runs
# part 1 alone, PART=2 parts 2 and 3 (the whole takes more than one call's 10 minutes),
# PART=3 part 4 with every peer, PART=4 (mlfuse alone) channel layernorm's strips with
# shared memory and without, and part 1's comparison; PART=quick that comparison alone;
# PART=5 (thirty-first session) batch norms and group norm split by the run rule or not;
# PART=6 (thirty-second) reductions of a transpose split through tiles and strips through
# tiles, or as before (hw.split_through_tiles=0).
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
    --target /tmp/site .whl/*.whl && export PYTHONPATH=/tmp/site:$PWD || exit
mkdir -p "$OUT"
nvidia-smi --query-gpu=name --format=csv,noheader | tee "$OUT/gpu.txt"
sweep() {  # sweep NAME TITLE ARGS...: shape_sweep.py ARGS, its log under $OUT/NAME, the table
    local name=$1 title=$2
    shift 2
    python benchmarks/shape_sweep.py "$@" --out "$OUT/$name" > "$OUT/$name.log" 2>&1
    echo "== $title"; grep -E "^\| " "$OUT/$name.log"
}
staged_knob() {  # staged rows on (one kernel) against off (two kernels), mlfuse alone
    for knob in 1 0; do
        sweep "quick_$knob" "row_staged_stores=$knob" --only layernorm_transposed \
            --only softmax_rows_transposed --for-sizes --no-peers --hw row_staged_stores=$knob
    done
}
if [ "${PART:-1}" = quick ]; then  # (2-3 minutes)
    staged_knob
    exit 0
fi
if [ "${PART:-1}" = 3 ]; then  # the thirtieth and thirty-first sessions' cases, every peer
    sweep new "group norm with a time embedding, masked middle softmax" \
        --only group_norm_temb --only softmax_middle_masked --only instance_norm
    exit 0
fi
if [ "${PART:-1}" = 5 ]; then  # (thirty-first session) split-reductions' run rule
    # compiled for sizes: runs of two sectors or more one reduction (new) against split
    # (split_reduction_max_segment huge: the ratio alone, as before), every peer in the first
    SPLIT="--only batchnorm_ncl --only batchnorm_small_spatial --only group_norm_nhwc --for-sizes"
    sweep runs_new "split-reductions, runs of 64 B or more one reduction" $SPLIT
    sweep runs_old "split by the ratio alone (as before)" $SPLIT --no-peers \
        --hw split_reduction_max_segment=1000000000
    exit 0
fi
if [ "${PART:-1}" = 6 ]; then  # (thirty-second session) reductions through tiles
    # one kernel (new, every peer) against a transpose kernel then the reduction (knob off)
    TILED="--only transposed_mse --only batched_transposed_dot --only transposed_residual_mse
           --only row_sum_transposed --only spatial_dot_nchw_nhwc --for-sizes"
    sweep tiled_new "through tiles" $TILED
    sweep tiled_old "a transpose kernel, then the reduction (as before)" $TILED --no-peers \
        --hw split_through_tiles=0
    exit 0
fi
if [ "${PART:-1}" = 4 ]; then  # mlfuse against itself: knobs on and off, no peers
    # gamma[c] over a channel layernorm's strips is a uniform load too now: its kernels
    # gained vector and shared variants, which the host takes before the registers one
    for knob in 40960 0; do  # (0: no shared strips, the registers kernel as before)
        sweep "cln_$knob" "channel layernorms, strip_shared_bytes=$knob" \
            --only channel_layernorm --only layernorm_nhwc --hw strip_shared_bytes=$knob --no-peers
    done
    staged_knob
    exit 0
fi
if [ "${PART:-1}" = 1 ]; then
STAGED="--only layernorm_transposed --only softmax_rows_transposed --for-sizes"
sweep staged_on "staged rows on (one kernel), every peer" $STAGED --hw row_staged_stores=1
sweep staged_off "off (two kernels)" $STAGED --no-peers
sweep staged_3 "on, three blocks an SM asked" $STAGED --no-peers --hw row_staged_stores=1 \
    --hw staged_row_min_blocks=3
fi
[ "${PART:-1}" = 2 ] || [ -z "$PART" ] || exit 0
python benchmarks/probe_kernels.py group_norm_nhwc > "$OUT/probe.log" 2>&1
echo "== group norm over channels-last, kernel by kernel"; grep -E "^  (mlfuse|torch)" "$OUT/probe.log"
sweep gn "group norm over channels-last" --only group_norm_nhwc
python benchmarks/run.py --out "$OUT/suite" --only masked_mean_pool --only column_centring \
    --only instance_norm --only group_norm --only softmax_middle --only sumsq_all \
    --only colsum > "$OUT/suite.log" 2>&1
echo "== suite cases"
python benchmarks/run.py --markdown-from "$OUT/suite/latest.json" | grep -E "^\| "
