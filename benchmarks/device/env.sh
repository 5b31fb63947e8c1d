# Environment of the device runs (sourced from the repo root): the repo's code, the unpacked packages, the JRE.
export PYTHONPATH=$PWD:/tmp/site PATH=/tmp/jre/bin:$PATH PYTHONUNBUFFERED=1 AD_MODELS_DIR=/tmp/ad-models \
       HF_HUB_OFFLINE=1 TOKENIZERS_PARALLELISM=false
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
