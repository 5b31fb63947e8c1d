#!/bin/bash
# Device call 2 (right after setup.sh, same warm machine): the second GGUF part; the acting-throughput figure alone on
# the GPU; then `ad generate textworld` (base -> SFT -> PPO, $LEARN) on seeds 0 and 1 side by side until 55 s before
# the budget ($1 seconds); to $OUT: the figures they recorded, the units' summaries, per-game outcomes and the logs
# (tw_meta.tar.gz), and each seed's SFT adapter and last PPO checkpoint's adapter in bfloat16 (~10 MB each: if the
# budget stopped a run after PPO, `benchmarks/textworld_saved.py evaluate` plays its evaluation games with them here).
# PARTS="learning" skips the acting figure. Seen on an H100 (2026-11-26 session 22, two seeds side by side, the
# default $LEARN): 331-345 s a seed in all (model load + base evaluation 71 s, gold paths 6 s, SFT of 400 games x 2
# epochs 68 s, an evaluation fold 9-20 s, each PPO iteration of 64 games 34-52 s), 376 s for the whole call. On an
# H200 before the host-side scoring fixes, an evaluation fold took 40-100 s and a PPO iteration 63-77 s. If the
# budget stops it, a second call with the same $LEARN resumes from the complete units (the options must match).
# The call must start within the device's idle release (~30 s) of setup.sh's end: /tmp is gone on a new machine.
set -u
cd "$(dirname "$0")/../.."
BUDGET=${1:-500}; T0=$(date +%s)
LEARN=${LEARN:---transcript --max-prompt-tokens 8192 --step-limit 32 --eval-games 64 --train-eval-games 32
  --sft-games 400 --sft-epochs 2
  --sft-batch-size 8 --ppo-iterations 3 --ppo-games 64 --ppo-epochs 2 --ppo-batch-size 64 --act-batch 64
  --ppo-lr 5e-5 --ppo-target-kl 0.02 --ppo-micro-batch-size 0}
left() { echo $(( BUDGET - ($(date +%s) - T0) )); }
source benchmarks/device/env.sh
mkdir -p /tmp/tw
assemble_gguf
if [[ " ${PARTS:-acting learning} " == *" acting "* ]]; then
  timeout 150 python3 benchmarks/textworld.py --parts acting --acting ${ACTING:-64 4} --dtype bfloat16 \
    --name textworld_gpu > /tmp/tw-acting.log 2>&1; echo "acting rc $? at $(( $(date +%s) - T0 )) s"; fi
cp benchmarks/results/textworld_gpu.json "$OUT/" 2>/dev/null
T=$(( $(left) - 55 ))
echo "learning: $T s"
for s in 0 1; do
  timeout $T python3 -m ad generate textworld --out /tmp/tw/seed$s --seed $s --dtype bfloat16 ${LEARN:-} \
      > /tmp/tw/seed$s.log 2>&1 &
done
wait; echo "learning done at $(( $(date +%s) - T0 )) s"
timeout 40 python3 benchmarks/textworld.py --parts learning --seeds 0 1 --out /tmp/tw --recorded \
    --name textworld_gpu_learning > /tmp/tw/learning.log 2>&1; echo "recorded rc $?"
cp benchmarks/results/textworld_gpu_learning.json benchmarks/results/textworld_gpu_learning.png "$OUT/" 2>/dev/null
timeout 60 python3 benchmarks/textworld_games.py /tmp/tw/seed0 /tmp/tw/seed1 --json /tmp/tw/games.json \
    > /tmp/tw/games.log 2>&1; cat /tmp/tw/games.log  # how each game ended (in the tar below)
cp /tmp/tw-acting.log /tmp/tw/ 2>/dev/null
(cd /tmp/tw && find . -name '*.json' -o -name '*.log' | tar czf "$OUT/tw_meta.tar.gz" -T -) 2>/dev/null
for s in 0 1; do  # the adapters (the return limit is 16 MB a file, 8 files)
  timeout 60 python3 benchmarks/textworld_saved.py export /tmp/tw/seed$s/_run /tmp/tw/back$s && \
    for a in sft ppo; do cp /tmp/tw/back$s/$a-adapter.safetensors "$OUT/$a-adapter-seed$s.safetensors" 2>/dev/null; done
done
tail -n 3 /tmp/tw-acting.log /tmp/tw/learning.log /tmp/tw/seed*.log; ls -l "$OUT"
echo "run took $(( $(date +%s) - T0 )) s"
