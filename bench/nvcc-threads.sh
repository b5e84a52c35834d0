#!/usr/bin/env bash
# Benchmark: wall time of one kernel's CUDA cell, cold (fresh work cache, --no-cache), with
# nvcc's --threads at 1 (Ninja's default -j, the cores plus two, one architecture at a time per
# compile), at each N given (Ninja's -j divided by N), with build-and-copy's own choice
# (`threads=auto`), and once more with --cuda-capabilities CAPS (the quick check).
# The variant's library must be byte-identical between the thread counts (checked).
#
# Usage: bench/nvcc-threads.sh KERNEL_DIR [THREADS...]      (default THREADS: 4)
# Env:   KB       the kernel-builder binary (default: target/debug/kernel-builder)
#        PYTHON   the Python with torch, cmake, ninja and nvcc (default: .venv/bin/python)
#        CAPS     capabilities of the quick-check run (default: 9.0; empty: no such run)
#        KERNEL_BUILDER_DEP_*  checkouts of the kernel's C++ dependencies, as for any build
# Prints one line per run: `threads=N caps=C seconds=S`. Not part of `cargo test`.
# For the GPU machine (16 cores): carry a static kernel-builder and the kernel, e.g.
#   KB=./kernel-builder PYTHON=python3 bash bench/nvcc-threads.sh paged-attention 4 8
set -euo pipefail

kernel=$(realpath "${1:?usage: bench/nvcc-threads.sh KERNEL_DIR [THREADS...]}")
shift
threads=("${@:-4}")
root=$(cd "$(dirname "$0")/.." && pwd)
kb=$(realpath "${KB:-$root/target/debug/kernel-builder}")
py=${PYTHON:-$root/.venv/bin/python}
caps=${CAPS-9.0}
[[ -x $kb ]] || { echo "error: $kb not found; run \`cargo build\` first" >&2; exit 1; }
variant=$("$py" -c 'import torch, platform; a, b = torch.__version__.split(".")[:2]; c = torch.version.cuda.replace(".", ""); print(f"torch{a}{b}-cxx11-cu{c}-{platform.machine()}-linux")')
cores=$(nproc)

scratch=$(mktemp -d "${TMPDIR:-/tmp}/kb-nvcc-threads.XXXXXX")
trap 'rm -rf "$scratch"' EXIT

# run NAME THREADS [ARGS...]: a cold build of the CUDA cell in a fresh copy; prints the line.
run() {
  local name=$1 n=$2
  shift 2
  local k=$scratch/$name
  rm -rf "$k" "$scratch/cache-$name"
  cp -r "$kernel" "$k"
  rm -rf "$k/build"
  local t0 t1
  t0=$(date +%s%N)
  if ! KERNEL_BUILDER_NVCC_THREADS=$n KERNEL_BUILDER_CACHE_DIR=$scratch/cache-$name \
    "$kb" build-and-copy --nix never --no-cache --python "$py" --variant "$variant" "$@" "$k" \
    >"$scratch/$name.log" 2>&1; then
    echo "error: the build ($name) failed; its output:" >&2
    tail -40 "$scratch/$name.log" >&2
    exit 1
  fi
  t1=$(date +%s%N)
  echo "threads=${n:-auto} caps=${caps_of_run:-all} seconds=$(((t1 - t0) / 1000000000))"
}

echo "kernel=$(basename "$kernel") variant=$variant cores=$cores"
caps_of_run='' run t1 1
so_one=$(find "$scratch/t1/build/$variant" -name '*.so' | head -1)
for n in "${threads[@]}"; do
  caps_of_run='' run "t$n" "$n"
  so=$(find "$scratch/t$n/build/$variant" -name '*.so' | head -1)
  cmp -s "$so_one" "$so" || { echo "error: the library differs between --threads 1 and $n" >&2; exit 1; }
done
caps_of_run='' run auto ''
cmp -s "$so_one" "$(find "$scratch/auto/build/$variant" -name '*.so' | head -1)" ||
  { echo "error: the library differs between --threads 1 and the default" >&2; exit 1; }
if [[ -n $caps ]]; then
  caps_of_run=$caps run quick '' --cuda-capabilities "$caps"
fi
