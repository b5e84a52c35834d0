#!/usr/bin/env bash
# Run relu's CUDA cell AS NIX BUILT IT on the GPU machine: the cell is compiled here in Nix
# (torch211-cxx11-cu130-x86_64-linux, sm_90, with the offline host-test package set, which is
# not hermetic), carried to the H200, loaded there with kernels 0.17.2 against the machine's
# torch 2.11.0+cu130, run, and compared exactly with torch.relu.
#
#   scripts/gpu-nix-relu.sh prepare CELL_STORE_PATH   here: stage the cell and the wheels the
#                                                     GPU machine lacks in target/nix-gpu
#   bash target/nix-gpu/gpu-nix-relu.sh device        there (carry target/nix-gpu): writes
#                                                     $OUT/report.json; exit 1 on a mismatch
set -euo pipefail
case "${1:-}" in
prepare)
  root=$(cd "$(dirname "$0")/.." && pwd)
  stage=$root/target/nix-gpu
  rm -rf "$stage" && mkdir -p "$stage/cell"
  cp -r "$2"/torch211-cxx11-cu130-x86_64-linux "$stage/cell/"
  chmod -R u+w "$stage/cell"
  python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 \
    --implementation cp --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 \
    --platform manylinux2014_x86_64 -d "$stage/.whl" kernels==0.17.2 tomlkit==0.15.2
  cp "$root/scripts/gpu-nix-relu.sh" "$stage/"
  echo "staged $stage; run: bash target/nix-gpu/gpu-nix-relu.sh device  (carry target/nix-gpu)"
  ;;
device)
  stage=$(cd "$(dirname "$0")" && pwd)
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
    --target /tmp/site "$stage"/.whl/*.whl
  export PYTHONPATH=/tmp/site${PYTHONPATH:+:$PYTHONPATH}
  python3 - "$stage/cell" "${OUT:-/tmp}/report.json" <<'PY'
import json, sys, subprocess, glob, shutil
from pathlib import Path
import torch, kernels
from kernels import get_local_kernel
cell, out = Path(sys.argv[1]), Path(sys.argv[2])
relu = get_local_kernel(cell, backend="cuda")
torch.manual_seed(0)
results = {}
for dtype in (torch.float32, torch.float16, torch.bfloat16):
    x = torch.randn(1 << 20, dtype=dtype, device="cuda")
    x[::97] = float("nan")
    y = relu.relu(x)
    torch.cuda.synchronize()
    ref = torch.relu(x)
    results[str(dtype)] = bool(torch.equal(y.nan_to_num(-7.0), ref.nan_to_num(-7.0)) and torch.equal(y.isnan(), ref.isnan()))
so = next(cell.glob("*/*.abi3.so"))
tool = shutil.which("cuobjdump") or next(iter(glob.glob("/usr/local/lib/python3*/dist-packages/nvidia/cu13/bin/cuobjdump") + glob.glob("/usr/local/cuda*/bin/cuobjdump")), None)
elf = subprocess.run([tool, "--list-elf", str(so)], capture_output=True, text=True).stdout if tool else None
report = {
    "gpu": torch.cuda.get_device_name(), "capability": list(torch.cuda.get_device_capability()),
    "torch": torch.__version__, "kernels": kernels.__version__ if hasattr(kernels, "__version__") else None,
    "variant": so.parent.name, "module": so.name, "equal_to_torch_relu": results,
    "cuobjdump_list_elf": elf, "metadata_build": json.loads((so.parent / "metadata.json").read_text())["build"],
}
out.write_text(json.dumps(report, indent=2))
print(json.dumps(report, indent=2))
sys.exit(0 if all(results.values()) else 1)
PY
  ;;
*) echo "usage: $0 prepare CELL_STORE_PATH | device" >&2; exit 2 ;;
esac
