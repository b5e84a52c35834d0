#!/usr/bin/env bash
# kernels/relu-tvm-ffi's CUDA cell on the H200 machine: the cell is built HERE (the venv's
# tvm_ffi 0.1.15.post2 and nvcc 13.0, `tvm-ffi01-cu130-x86_64-linux`, sm_90), carried with the
# apache-tvm-ffi and kernels wheels, loaded THERE through kernels 0.17.2 with the machine's
# torch 2.11.0+cu130, run on the GPU (default and a side stream) and compared exactly with
# torch.relu.
#
#   scripts/gpu-tvm-ffi-check.sh prepare    here: build the cell, fetch the wheels, stage them
#                                           in target/gpu-tvm-ffi/ (ignored; carry it)
#   bash target/gpu-tvm-ffi/gpu-tvm-ffi-check.sh device   there: $OUT/report.json, cuobjdump.txt
#
# Ran 2026-12-01 (prepare here, device on the H200): kernels/relu-tvm-ffi/gpu-check/.
set -euo pipefail
VARIANT=tvm-ffi01-cu130-x86_64-linux

prepare() {
  local root stage
  root=$(cd "$(dirname "$0")/.." && pwd)
  stage=$root/target/gpu-tvm-ffi
  rm -rf "$stage" && mkdir -p "$stage/.whl" "$stage/relu-tvm-ffi"
  cp -r "$root/kernels/relu-tvm-ffi/." "$stage/relu-tvm-ffi/"
  rm -rf "$stage/relu-tvm-ffi/build"
  KERNEL_BUILDER_CACHE_DIR=$stage/cache "$root/target/debug/kernel-builder" build-and-copy --nix never \
    --python "$root/.venv/bin/python" --variant "$VARIANT" "$stage/relu-tvm-ffi"
  rm -rf "$stage/cache"
  python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 \
    --implementation cp --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 \
    --platform manylinux2014_x86_64 -d "$stage/.whl" apache-tvm-ffi==0.1.15.post2 kernels==0.17.2 tomlkit==0.15.2
  cp "$root/scripts/gpu-tvm-ffi-check.sh" "$stage/gpu-tvm-ffi-check.sh"
  du -sh "$stage"
}

device() {
  local stage out
  stage=$(cd "$(dirname "$0")" && pwd)
  out=${OUT:-/tmp/gpu-tvm-ffi-out}
  mkdir -p "$out"
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
    --target /tmp/site "$stage"/.whl/*.whl
  export PYTHONPATH=/tmp/site PYTHONUNBUFFERED=1
  local so
  so=$(ls "$stage/relu-tvm-ffi/build/$VARIANT"/*.so)
  { echo "== cuobjdump --list-elf"; cuobjdump --list-elf "$so" || true
    echo "== cuobjdump --list-ptx"; cuobjdump --list-ptx "$so" || true; } 2>&1 | tee "$out/cuobjdump.txt"
  RELU_BUILD="$stage/relu-tvm-ffi/build" python3 - "$out/report.json" <<'PY'
import json, os, sys
from pathlib import Path
import torch, tvm_ffi, kernels
report = {"kernels": kernels.__version__, "torch": torch.__version__, "tvm_ffi": tvm_ffi.__version__,
          "gpu": torch.cuda.get_device_name(0)}
k = kernels.get_local_kernel(Path(os.environ["RELU_BUILD"]), backend="cuda")
report["loaded_from"] = Path(k.__file__).parent.name
checks = {}
torch.manual_seed(0)
for dtype in (torch.float32, torch.float64):
    for shape in ((1,), (1 << 20, 3), (0,)):
        x = torch.randn(shape, device="cuda", dtype=dtype)
        checks[f"{dtype}-{shape}"] = bool(torch.equal(k.relu(x), torch.relu(x)))
x = torch.tensor([-1.0, 0.0, 2.0, float("inf"), float("-inf"), float("nan")], device="cuda")
y = k.relu(x)
checks["specials"] = bool(torch.equal(y[:5], torch.relu(x)[:5]) and torch.isnan(y[5]).item())
side = torch.cuda.Stream()
with torch.cuda.stream(side):
    x = torch.randn(1 << 22, device="cuda")
    y = k.relu(x)
side.synchronize()
checks["side-stream"] = bool(torch.equal(y, torch.relu(x)))
try:
    k.relu(torch.randn(4, device="cuda", dtype=torch.float16))
    checks["float16-refused"] = False
except TypeError as e:
    checks["float16-refused"] = "float32 or float64" in str(e)
report["checks"] = checks
report["ok"] = all(checks.values())
Path(sys.argv[1]).write_text(json.dumps(report, indent=2) + "\n")
print(json.dumps(report, indent=2))
sys.exit(0 if report["ok"] else 1)
PY
}

"${1:?usage: $0 prepare|device}"
