#!/bin/bash
# Device call 2 of the math figures (right after math_setup.sh, same warm machine): the second GGUF part, then side by
# side until 40 s before the budget ($1 seconds): the CPU preset (`--preset cpu`: 4 problems x 8 solutions, 60
# iterations, float32) on seeds 0 and 1 with and without refresh, and the GPU run's recipe (16 x 8, 60 iterations)
# through the same batched engine on seed 0 with refresh, seed 1 without and seed 2 both. Back in $OUT: every run's
# figure part (merge them here with `--merge`), logs and summaries (math_meta.tar.gz), and the final LoRA adapters
# (math_adapters.tar.gz: a run stopped before its after-training evaluation can be scored here with --checkpoint).
set -u
cd "$(dirname "$0")/../.."
BUDGET=${1:-500}; T0=$(date +%s)
source benchmarks/device/env.sh
assemble_gguf
python3 -c "from ad.lm.pretrained import load_base; load_base('smollm2-135m')"  # the dense copy, once
echo "model ready at $(( $(date +%s) - T0 )) s"
M=/tmp/m; mkdir -p $M; T=$(( BUDGET - ($(date +%s) - T0) - 40 ))
GPU="--overhead-steps 0 --eval-problems 200 --level 1 --max-steps 60 --ref-refresh 10 --threads 2 --quiet
  --option engine=fast --option num_generations=8 --option problems_per_step=16 --option temperature=0.7
  --option format_reward=0.1 --option learning_rate=0.0003 --option chunk_steps=10"
for s in 0 1; do for v in refresh norefresh; do
  timeout $T python3 benchmarks/math_heldout.py --seeds $s --variants $v --eval-problems 200 --threads 2 --quiet \
    --option dtype=float32 --work $M/cpu-s$s-$v --json $M/part-cpu-s$s-$v.json > $M/cpu-s$s-$v.log 2>&1 &
done; done
sleep 15
for sv in "0 refresh" "1 norefresh" "2 refresh" "2 norefresh"; do set -- $sv
  timeout $(( T - 15 )) python3 benchmarks/math_reinforce.py --seeds $1 --variants $2 $GPU --work $M/gpu-s$1-$2 \
    --json $M/part-gpu-s$1-$2.json > $M/gpu-s$1-$2.log 2>&1 &
done
wait; echo "runs done at $(( $(date +%s) - T0 )) s"
(cd $M && find . -maxdepth 1 -name '*.json' -o -maxdepth 1 -name '*.log' -o -path '*/_run/summary.json' \
   | tar czf "$OUT/math_meta.tar.gz" -T -)
(cd $M && find . -path '*/checkpoint-60/adapter_*' | tar czf "$OUT/math_adapters.tar.gz" -T -)
tail -n 2 $M/*.log; ls -l "$OUT"
echo "run took $(( $(date +%s) - T0 )) s"
