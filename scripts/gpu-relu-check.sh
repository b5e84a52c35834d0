#!/usr/bin/env bash
# The GPU check of issue 11 (item 6): build kernels/relu's CUDA cell ON the H200 machine with
# the carried static kernel-builder, against that machine's torch 2.11.0+cu130 and nvcc 13.0
# (variant torch211-cxx11-cu130-x86_64-linux), load it with kernels 0.17.2, run it on the GPU,
# compare exactly with torch.relu, and show with cuobjdump that the .so holds sm_90 machine code
# for capability 9.0 and nothing else. With KERNEL=relu-stable-abi the same check runs for
# kernels/relu-stable-abi's CUDA cell, built against torch's stable ABI (variant
# torch-stable-abi211-cu130-x86_64-linux), and check-abi must pass its torch rule.
#
#   scripts/gpu-relu-check.sh prepare     here: build the static binary, fetch the kernels wheel,
#                                          stage both in target/gpu-relu/ (ignored, carried)
#   [KERNEL=relu-stable-abi] bash target/gpu-relu/gpu-relu-check.sh device
#                                          there: the check; $OUT/report.json, logs
set -euo pipefail

prepare() {
  local root stage target
  root=$(cd "$(dirname "$0")/.." && pwd)
  stage=$root/target/gpu-relu
  target=x86_64-unknown-linux-gnu
  (cd "$root" && RUSTFLAGS='-C target-feature=+crt-static' cargo build --release --locked --target "$target" >&2)
  rm -rf "$stage" && mkdir -p "$stage/.whl"
  install -m 0755 "$root/target/$target/release/kernel-builder" "$stage/kernel-builder"
  python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 \
    --implementation cp --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 \
    --platform manylinux2014_x86_64 -d "$stage/.whl" kernels==0.17.2 tomlkit==0.15.2
  cp "$root/scripts/gpu-relu-check.sh" "$stage/gpu-relu-check.sh"
  du -sh "$stage"
  echo "carry target/gpu-relu; run: bash target/gpu-relu/gpu-relu-check.sh device"
}

device() {
  local stage root out kb work kernel variant
  kernel=${KERNEL:-relu}
  case "$kernel" in
    relu) variant=torch211-cxx11-cu130-x86_64-linux ;;
    relu-stable-abi) variant=torch-stable-abi211-cu130-x86_64-linux ;;
    *) echo "gpu-relu-check: KERNEL must be relu or relu-stable-abi, not $kernel" >&2; exit 2 ;;
  esac
  stage=$(cd "$(dirname "$0")" && pwd)
  root=$(cd "$stage/../.." && pwd)
  out=${OUT:-/tmp/gpu-relu-out}
  mkdir -p "$out"
  export PYTHONUNBUFFERED=1
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
    --target /tmp/site "$stage"/.whl/*.whl
  export PYTHONPATH=/tmp/site
  kb=$stage/kernel-builder
  # nvcc of the machine's CUDA 13.0 (torch's CUDA)
  if ! command -v nvcc >/dev/null; then
    for d in /usr/local/cuda/bin /usr/local/cuda-13.0/bin; do [ -x "$d/nvcc" ] && export PATH="$d:$PATH" && break; done
  fi
  {
    echo "== toolchain"
    python3 -c 'import torch, sys; print(sys.executable, torch.__version__, torch.version.cuda, torch.cuda.get_device_name(0))'
    command -v nvcc cmake ninja cuobjdump || true
    nvcc --version | tail -2
  } 2>&1 | tee "$out/toolchain.txt"
  work=$(mktemp -d)
  cp -r "$root/kernels/$kernel" "$work/relu"
  rm -rf "$work/relu/build"
  local t0 t1
  t0=$(date +%s.%N)
  "$kb" build-and-copy --nix never --python "$(command -v python3)" \
    --variant "$variant" "$work/relu" 2>&1 | tee "$out/build.txt"
  t1=$(date +%s.%N)
  echo "build seconds: $(python3 -c "print(round($t1-$t0,1))")" | tee -a "$out/build.txt"
  ls -la "$work/relu/build/$variant" | tee -a "$out/build.txt"
  local so
  so=$(ls "$work"/relu/build/"$variant"/*.abi3.so)
  { echo "== cuobjdump --list-elf"; cuobjdump --list-elf "$so" || true
    echo "== cuobjdump --list-ptx"; cuobjdump --list-ptx "$so" || true; } 2>&1 | tee "$out/cuobjdump.txt"
  local abi_rc=0
  "$kb" check-abi "$work/relu" 2>&1 | tee "$out/check-abi.txt" || abi_rc=$?
  cp "$work/relu/build/$variant/metadata.json" "$out/metadata.json"
  # The kernel's own tests, on the GPU, through the same loader.
  if [ -d "$work/relu/tests" ]; then
    (cd "$work/relu" && RELU_BACKEND=cuda python3 -m pytest -q -p no:cacheprovider tests) 2>&1 | tee "$out/pytest.txt" || true
  fi
  VARIANT="$variant" ABI_RC=$abi_rc RELU_BUILD="$work/relu/build" CUOBJDUMP_TXT="$out/cuobjdump.txt" \
    python3 - "$out/report.json" <<'PY'
import json, os, sys, time
from pathlib import Path
import torch, kernels
report = {"kernels": kernels.__version__, "torch": torch.__version__, "gpu": torch.cuda.get_device_name(0)}
t = time.perf_counter()
k = kernels.get_local_kernel(Path(os.environ["RELU_BUILD"]), backend="cuda")
report["load_s"] = round(time.perf_counter() - t, 3)
report["loaded_from"] = str(Path(k.__file__).parent.name)
checks = {}
for dtype in (torch.float32, torch.float16, torch.bfloat16):
    x = torch.randn(1 << 20, 3, device="cuda", dtype=dtype)
    y = k.relu(x)
    torch.cuda.synchronize()
    checks[str(dtype)] = bool(torch.equal(y, torch.relu(x)))
report["equal_to_torch_relu"] = checks
elf = [l.split()[-1] for l in Path(os.environ["CUOBJDUMP_TXT"]).read_text().splitlines() if l.startswith("ELF file")]
ptx = [l.split()[-1] for l in Path(os.environ["CUOBJDUMP_TXT"]).read_text().splitlines() if l.startswith("PTX file")]
report["cuobjdump_elf"] = elf
report["cuobjdump_ptx"] = ptx
report["only_sm90"] = bool(elf) and all(".sm_90." in e for e in elf) and not ptx
report["check_abi_passed"] = os.environ["ABI_RC"] == "0"
report["ok"] = (all(checks.values()) and report["only_sm90"] and report["check_abi_passed"]
                and report["loaded_from"] == os.environ["VARIANT"])
Path(sys.argv[1]).write_text(json.dumps(report, indent=2) + "\n")
print(json.dumps(report, indent=2))
sys.exit(0 if report["ok"] else 1)
PY
}

case "${1:-}" in
  prepare) prepare ;;
  device) device ;;
  *) echo "usage: $0 prepare | device" >&2; exit 2 ;;
esac
