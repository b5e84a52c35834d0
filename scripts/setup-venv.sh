#!/usr/bin/env bash
# Create (or bring up to date) the Python environment for tests/python/: .venv at the
# repository root (gitignored), from PyPI only. Idempotent: a stamp file records the pinned
# set, and a second run with the same pins and a working environment does nothing.
#
# Pins, and why:
# - torch 2.11.0: the release on the GPU machine (2.11.0+cu130), and the newest one that
#   helion 1.4.0 is known to import with. The PyPI wheel is the CUDA build even on a machine
#   without a GPU (about 5.5 GB with its nvidia-* dependencies); `kernels` then detects the
#   backend as "cuda", which is why the CPU tests pass backend="cpu" to the loader.
# - kernels 0.17.2: the loader release the built trees must load with (0.17.0 is the first
#   that accepts a `helion` python-depends).
# - helion 1.4.0: the version the shipped sm90 heuristic was generated with (its config dicts
#   are specific to the helion version); helion 1.5.x fails to import with torch 2.11.
#   helion is installed only if it installs and imports here; if not, it is removed again and
#   the tests that import the vector-add-helion tree check the loader's own refusal instead
#   ("requires Python dependency `helion`"), so they still run and still assert something.
# - pytest 9.2.0.
# - cmake 4.4.5 and ninja 1.13.2: the native build of compiled cells (`build-and-copy --nix
#   never`) runs the generated CMake project with them; it looks beside the venv's python first.
# - nvidia-cuda-nvcc, nvidia-nvvm, nvidia-cuda-crt 13.0.88 (nvcc of CUDA 13.0, the CUDA of the
#   torch 2.11.0 wheel), nvidia-cuda-cccl 13.0.85 (headers CUDA's fp16/bf16 headers include)
#   and nvidia-cuda-cuobjdump 13.2.86 (lists the SASS/PTX in a built module): the CUDA cell
#   compiles without a GPU. The wheels' programs are not executable after some unpackers, so
#   bin/* and nvvm/bin/* are made executable here, once, not at build time.
# - apache-tvm-ffi 0.1.15.post2: `[tvm-ffi]` kernels (kernels/relu-tvm-ffi) build against its
#   headers and libtvm_ffi.so, and their variants are named for its major.minor (`tvm-ffi01`),
#   the one kernels 0.17.2 matches against the installed `tvm_ffi.__version__`.
#
# Usage: scripts/setup-venv.sh            (then .venv/bin/python -m pytest tests/python)
# Env:   PYTHON (interpreter to create the venv with, default python3), VENV (default .venv)
set -euo pipefail
cd "$(dirname "$0")/.."

python=${PYTHON:-python3}
venv=${VENV:-.venv}
pins=(torch==2.11.0 kernels==0.17.2 pytest==9.2.0 cmake==4.4.5 ninja==1.13.2
  nvidia-cuda-nvcc==13.0.88 nvidia-nvvm==13.0.88 nvidia-cuda-crt==13.0.88
  nvidia-cuda-cccl==13.0.85 nvidia-cuda-cuobjdump==13.2.86 apache-tvm-ffi==0.1.15.post2)
helion_pin=helion==1.4.0
stamp="$venv/.kernel-builder-setup"
want="${pins[*]} $helion_pin"

if [ -x "$venv/bin/python" ] && [ -f "$stamp" ] && [ "$(head -n1 "$stamp")" = "$want" ] \
  && "$venv/bin/python" -c 'import torch, kernels, pytest' 2>/dev/null; then
  echo "setup-venv: $venv is up to date ($(tail -n1 "$stamp"))"
  exit 0
fi

if [ ! -x "$venv/bin/python" ]; then
  echo "setup-venv: creating $venv with $("$python" --version 2>&1)"
  "$python" -m venv "$venv"
fi
py="$venv/bin/python"
export PIP_DISABLE_PIP_VERSION_CHECK=1
# No pip cache: the wheels are installed once, and a cached copy of the torch stack would take
# another ~3 GB of disk, and CI machines have little to spare.

echo "setup-venv: installing ${pins[*]}"
"$py" -m pip install -q --no-cache-dir "${pins[@]}"
cuda_root=$("$py" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')/nvidia/cu13
find "$cuda_root/bin" "$cuda_root/nvvm/bin" -maxdepth 1 -type f ! -name "*.profile" -exec chmod +x {} +

helion_state="helion: not installed"
if "$py" -m pip install -q --no-cache-dir "$helion_pin" && "$py" -c 'import helion' 2>/dev/null; then
  helion_state="helion: $("$py" -c 'import importlib.metadata as m; print(m.version("helion"))')"
else
  echo "setup-venv: $helion_pin does not install or import here; removing it" >&2
  "$py" -m pip uninstall -q -y helion >/dev/null 2>&1 || true
fi

"$py" - <<'PY'
import importlib.metadata as m
for name in ("torch", "kernels", "pytest", "huggingface_hub", "cmake", "ninja", "nvidia-cuda-nvcc", "apache-tvm-ffi"):
    print(f"setup-venv: {name} {m.version(name)}")
PY
echo "setup-venv: $helion_state"
printf '%s\n%s\n' "$want" "$helion_state" >"$stamp"
