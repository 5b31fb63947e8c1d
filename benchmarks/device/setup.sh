#!/bin/bash
# Device call 1 (see build_payload.sh): unpack the carried packages, JRE and first GGUF part under /tmp; print the
# device's software versions; a GPU smoke run of the TextWorld benchmark with a tiny LM (windowed and transcript prompts)
set -u
cd "$(dirname "$0")/../.."
T0=$(date +%s)
mkdir -p /tmp/payload && cp .dev/gguf.a /tmp/payload/
rm -rf /tmp/stage /tmp/site && tar xJf .dev/site.tar.xz -C /tmp && mv /tmp/stage /tmp/site
rm -rf /tmp/jre && tar xJf .dev/jre.tar.xz -C /tmp
source benchmarks/device/env.sh
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader
java -version 2>&1 | head -1; nproc; python3 --version
python3 - <<'PY'
import importlib
for m in ["torch", "transformers", "trl", "peft", "datasets", "pyarrow", "gymnasium", "textworld_express", "accelerate",
          "tokenizers", "huggingface_hub", "numpy", "lightning", "einops", "rich", "matplotlib", "fsspec", "safetensors",
          "gguf", "pandas", "py4j", "orjson"]:
    try:
        mod = importlib.import_module(m)
        print(m, getattr(mod, "__version__", "?"), mod.__file__.split("/")[1:3])
    except Exception as e:
        print(m, "FAILED", repr(e))
import torch
print("cuda", torch.cuda.is_available(), torch.cuda.get_device_name() if torch.cuda.is_available() else "")
PY
echo "unpacked in $(( $(date +%s) - T0 )) s"
timeout 120 python3 benchmarks/textworld.py --quick --parts acting learning --seeds 0 --out /tmp/smoke \
    --name smoke > "$OUT/smoke.log" 2>&1; echo "smoke rc $?"
timeout 90 python3 benchmarks/textworld.py --quick --parts learning --seeds 0 --out /tmp/smoke_tr --name smoke_tr \
    --set transcript=true max_prompt_tokens=8192 > "$OUT/smoke_tr.log" 2>&1; echo "smoke_tr rc $?"
tail -n 4 "$OUT/smoke.log" "$OUT/smoke_tr.log"
echo "setup took $(( $(date +%s) - T0 )) s"
