# Run every example with `mlfuse run` on the GPU, fused and unfused, then explain --compile.
set -u
for f in examples/*.fuse; do
  for mode in "" "--no-fuse"; do
    echo "=== mlfuse run $f $mode"
    python3 -m mlfuse run $f $mode --dim N=3 --dim R=37 --dim C=3000 --dim B=5 --dim D=1000 --seed 1 2>&1 | tail -6
  done
done
echo "=== explain --compile softmax (R=16384, C=4096)"
python3 -m mlfuse explain examples/softmax.fuse --compile --dim R=64 --dim C=4096 2>&1
echo "=== explain --compile layernorm / chain"
python3 -m mlfuse explain examples/layernorm.fuse --compile --dim B=64 2>&1 | head -8
python3 -m mlfuse explain examples/matmul_bias_relu.fuse --compile --dim B=64 2>&1 | head -10
