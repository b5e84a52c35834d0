#!/usr/bin/env bash
# The CUDA half of the kernels-community compatibility run (scripts/compat_run.py), on the GPU
# machine. Here, first: `python3 scripts/compat_run.py prepare … target/compat-gpu` and
# `../shared/tools/device-wheels.sh` (kernels 0.17.2 into .whl); then one device call per slice:
#   bash target/compat-gpu/gpu-compat.sh target/compat-gpu SLICE KERNEL,KERNEL,… [-- BUILD-ARGS]
# with `carry: [".whl", "target/compat-gpu"]`. Results: $OUT/compat-SLICE.jsonl and
# $OUT/logs-SLICE.tar.gz; `compat_run.py report` turns the JSONL into COMPAT.md's table.
set -uo pipefail
stage=$1 slice=$2 kernels=$3
shift 3
[ "${1:-}" = "--" ] && shift
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
  --target /tmp/site .whl/*.whl && export PYTHONPATH=/tmp/site || exit 1
export KERNEL_BUILDER_JOBS=${KERNEL_BUILDER_JOBS:-4}
nvidia-smi -L
python3 -c 'import torch, kernels; print("torch", torch.__version__, "kernels", kernels.__version__)'
nproc
PYTHONUNBUFFERED=1 python3 "$stage/compat_run.py" run "$stage" --out "$OUT" --python python3 \
  --backend cuda --compiled-variant torch211-cxx11-cu130-x86_64-linux --slice "$slice" \
  --kernels "$kernels" --parallel "${PARALLEL:-4}" --keep-logs --work /tmp/compat -- "$@"
