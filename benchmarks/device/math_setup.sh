#!/bin/bash
# Device call 1 of the math figures (see build_payload.sh, FOR=math): unpack the carried packages and the first GGUF
# part under /tmp; print the device's software versions; a GPU smoke run of the CPU preset's engine with a tiny LM.
set -u
cd "$(dirname "$0")/../.."
T0=$(date +%s)
mkdir -p /tmp/payload && cp .dev/gguf.a /tmp/payload/
rm -rf /tmp/stage /tmp/site && tar xJf .dev/site.tar.xz -C /tmp && mv /tmp/stage /tmp/site
source benchmarks/device/env.sh
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader; nproc; python3 --version
python3 -c "import torch, transformers, trl, peft; print(torch.__version__, transformers.__version__, trl.__version__,
peft.__version__, torch.cuda.is_available())"
echo "unpacked in $(( $(date +%s) - T0 )) s"
timeout 60 python3 benchmarks/math_heldout.py --quick --seeds 0 --variants refresh --quiet --json /tmp/smoke.json \
    > "$OUT/smoke.log" 2>&1; echo "smoke rc $?"; tail -n 5 "$OUT/smoke.log"
echo "setup took $(( $(date +%s) - T0 )) s"
