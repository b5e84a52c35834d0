#!/usr/bin/env bash
# Benchmark: the native build of kernels/relu's compiled cells.
#
#  1. CPU cell, cold (empty work cache, no build/) and unchanged (same sources again), paired
#     in each round with the same sources built the way authors do without us:
#     torch.utils.cpp_extension through setuptools (`setup.py build_ext`, Ninja), cold (fresh
#     build directory) and unchanged (same build directory again).
#  2. CUDA cell compile time per capability: relu's CUDA cell with 1, 2 and 3 capabilities
#     (cold each time); the differences are the cost of one more capability.
#
# Usage: bench/compiled-relu.sh [ROUNDS] [CUDA]   (defaults: 3 rounds; CUDA=1 runs part 2)
# Env:   KB      the kernel-builder binary (default: target/debug/kernel-builder)
#        PYTHON  the Python with torch, cmake, ninja and PyPI's nvcc (default: .venv/bin/python)
# Not part of `cargo test`.
set -euo pipefail
cd "$(dirname "$0")/.."

rounds=${1:-3}
cuda=${2:-1}
kb=$(realpath "${KB:-target/debug/kernel-builder}")
py=$(realpath -s "${PYTHON:-.venv/bin/python}")
[[ -x $kb ]] || { echo "error: $kb not found; run \`cargo build\` first" >&2; exit 1; }
variant_cpu=$("$py" -c 'import torch, platform; a, b = torch.__version__.split(".")[:2]; print(f"torch{a}{b}-cxx11-cpu-{platform.machine()}-linux")')
variant_cuda=$("$py" -c 'import torch, platform; a, b = torch.__version__.split(".")[:2]; c = torch.version.cuda.replace(".", ""); print(f"torch{a}{b}-cxx11-cu{c}-{platform.machine()}-linux")')

scratch=$(mktemp -d "${TMPDIR:-/tmp}/kb-relu-bench.XXXXXX")
trap 'rm -rf "$scratch"' EXIT
cp -r kernels/relu "$scratch/relu"
rm -rf "$scratch/relu/build"
k=$scratch/relu

ms_of() { local t0 t1; t0=$(date +%s%N); "$@" >/dev/null 2>&1; t1=$(date +%s%N); echo $(((t1 - t0) / 1000000)); }
stats() { sort -n | awk '{a[NR]=$1} END {printf "min %d ms, median %d ms", a[1], a[int((NR+1)/2)]}'; }

# The baseline project: the same binding and CPU source, with the registration header that
# create-pyproject generates, the same defines, built by torch's cpp_extension.
base=$scratch/baseline
mkdir -p "$base"
"$kb" create-pyproject "$k" --out "$base" >/dev/null
cat >"$base/setup.py" <<EOF
from setuptools import setup
from torch.utils.cpp_extension import BuildExtension, CppExtension
name = "_relu_cpu_0000000"
setup(name="relu_baseline", ext_modules=[CppExtension(name, ["$k/torch-ext/torch_binding.cpp", "$k/relu_cpu/relu.cpp"],
      include_dirs=["$base/torch-ext"], define_macros=[("CPU_KERNEL", None), ("TORCH_EXTENSION_NAME", name)],
      extra_compile_args=["-O3", "-fno-gnu-unique"])], cmdclass={"build_ext": BuildExtension})
EOF
baseline() { (cd "$base" && PATH="$(dirname "$py"):$PATH" "$py" setup.py -q build_ext --inplace --build-temp "$1"); }

echo "machine: $(nproc) CPUs, load $(cut -d' ' -f1-3 /proc/loadavg); $("$py" -c 'import torch; print("torch", torch.__version__)'); $(c++ --version | head -1)"
kb_cold=() kb_same=() b_cold=() b_same=()
for r in $(seq "$rounds"); do
  export KERNEL_BUILDER_CACHE_DIR=$scratch/cache-$r
  rm -rf "$k/build"
  kb_cold+=("$(ms_of "$kb" build-and-copy --nix never --no-cache --python "$py" --variant "$variant_cpu" "$k")")
  kb_same+=("$(ms_of "$kb" build-and-copy --nix never --no-cache --python "$py" --variant "$variant_cpu" "$k")")
  rm -rf "$base/tmp-$r" "$base"/*.so
  b_cold+=("$(ms_of baseline "tmp-$r")")
  b_same+=("$(ms_of baseline "tmp-$r")")
  echo "round $r: kernel-builder cold ${kb_cold[-1]} ms, unchanged ${kb_same[-1]} ms; cpp_extension cold ${b_cold[-1]} ms, unchanged ${b_same[-1]} ms"
done
echo "CPU cell $variant_cpu, $rounds rounds:"
echo "  kernel-builder build-and-copy, cold:      $(printf '%s\n' "${kb_cold[@]}" | stats)"
echo "  kernel-builder build-and-copy, unchanged: $(printf '%s\n' "${kb_same[@]}" | stats)"
echo "  cpp_extension build_ext, cold:            $(printf '%s\n' "${b_cold[@]}" | stats)"
echo "  cpp_extension build_ext, unchanged:       $(printf '%s\n' "${b_same[@]}" | stats)"

if [[ $cuda == 1 ]]; then
  echo "CUDA cell $variant_cuda (cold each):"
  for caps in '"9.0"' '"8.0", "9.0"' '"8.0", "9.0", "10.0"'; do
    sed -i "s/^cuda-capabilities = .*/cuda-capabilities = [$caps]/" "$k/build.toml"
    export KERNEL_BUILDER_CACHE_DIR=$scratch/cache-cuda-$RANDOM
    echo "  cuda-capabilities = [$caps]: $(ms_of "$kb" build-and-copy --nix never --no-cache --python "$py" --variant "$variant_cuda" "$k") ms"
  done
fi
