#!/usr/bin/env bash
# Benchmark: the native cell cache and `--jobs`.
#
#  1. kernels/relu's CPU cell, per round: cold (empty cache, new checkout), reused by another new
#     checkout of the same source (its CMake work directory is new too, so without the cache
#     this is a second cold build), reused again in the first checkout, and `--no-cache` in the
#     first checkout (the incremental path the cache replaces: CMake and Ninja find nothing to do).
#  2. kernels/vector-add-helion, all three cells, `--no-cache`, `--jobs 1` against `--jobs 2`
#     (paired in each round, the order alternating); the NAR hash of the whole build/ of the two
#     is compared every round.
#  3. With COMPILED=1: relu's CPU and CUDA cells, cold (empty cache, new checkout), `--jobs 1`
#     against `--jobs 2`, NAR hashes compared.
#
# Usage: bench/native-cell-cache.sh [ROUNDS_RELU] [ROUNDS_NOARCH]   (defaults: 3, 11)
# Env:   KB       the kernel-builder binary (default: target/debug/kernel-builder)
#        PYTHON   the Python with torch, cmake, ninja (default: .venv/bin/python)
#        COMPILED 1 runs part 3 (minutes: it compiles the CUDA cell twice)
# Not part of `cargo test`.
set -euo pipefail
cd "$(dirname "$0")/.."

rounds_relu=${1:-3}
rounds_noarch=${2:-11}
kb=$(realpath "${KB:-target/debug/kernel-builder}")
py=$(realpath -s "${PYTHON:-.venv/bin/python}")
[[ -x $kb ]] || { echo "error: $kb not found; run \`cargo build\` first" >&2; exit 1; }
cpu=$("$py" -c 'import torch, platform; a, b = torch.__version__.split(".")[:2]; print(f"torch{a}{b}-cxx11-cpu-{platform.machine()}-linux")')

scratch=$(mktemp -d "${TMPDIR:-/tmp}/kb-cell-cache-bench.XXXXXX")
trap 'rm -rf "$scratch"' EXIT

ms_of() { local t0 t1; t0=$(date +%s%N); "$@" >/dev/null 2>&1; t1=$(date +%s%N); echo $(((t1 - t0) / 1000000)); }
stats() { sort -n | awk '{a[NR]=$1} END {printf "min %d ms, median %d ms", a[1], a[int((NR+1)/2)]}'; }
checkout() { rm -rf "$2"; cp -r "kernels/$1" "$2"; rm -rf "$2/build"; }
tree_hash() { "$kb" hash "$1/build" | cut -d' ' -f1; }

echo "date: $(date -u '+%Y-%m-%d %H:%M UTC'); machine: $(nproc) CPUs, load $(cut -d' ' -f1-3 /proc/loadavg); $("$py" -c 'import torch; print("torch", torch.__version__)'); $(c++ --version | head -1)"

cold=() other=() same=() nocache=()
for r in $(seq "$rounds_relu"); do
  export KERNEL_BUILDER_CACHE_DIR=$scratch/cache-relu-$r
  a=$scratch/relu-a-$r b=$scratch/relu-b-$r
  checkout relu "$a"
  checkout relu "$b"
  args=(build-and-copy --nix never --python "$py" --variant "$cpu")
  cold+=("$(ms_of "$kb" "${args[@]}" "$a")")
  other+=("$(ms_of "$kb" "${args[@]}" "$b")")
  same+=("$(ms_of "$kb" "${args[@]}" "$a")")
  nocache+=("$(ms_of "$kb" "${args[@]}" --no-cache "$a")")
  [[ $(tree_hash "$a") == "$(tree_hash "$b")" ]] || { echo "error: the reused tree differs" >&2; exit 1; }
  "$kb" "${args[@]}" "$b" 2>/dev/null | grep -q "^reused $cpu " || { echo "error: not reused" >&2; exit 1; }
  echo "round $r: cold ${cold[-1]} ms; reused, new checkout ${other[-1]} ms; reused, same checkout ${same[-1]} ms; --no-cache, same checkout ${nocache[-1]} ms"
done
echo "relu CPU cell $cpu, $rounds_relu rounds:"
echo "  cold (empty cache):                 $(printf '%s\n' "${cold[@]}" | stats)"
echo "  reused, new checkout:               $(printf '%s\n' "${other[@]}" | stats)"
echo "  reused, same checkout:              $(printf '%s\n' "${same[@]}" | stats)"
echo "  --no-cache, same checkout (ninja):  $(printf '%s\n' "${nocache[@]}" | stats)"

j1=() j2=()
v1=$scratch/va-1 v2=$scratch/va-2
checkout vector-add-helion "$v1"
checkout vector-add-helion "$v2"
for r in $(seq "$rounds_noarch"); do
  rm -rf "$v1/build" "$v2/build"
  if ((r % 2)); then
    j1+=("$(ms_of "$kb" build-and-copy --nix never --no-cache --jobs 1 "$v1")")
    j2+=("$(ms_of "$kb" build-and-copy --nix never --no-cache --jobs 2 "$v2")")
  else
    j2+=("$(ms_of "$kb" build-and-copy --nix never --no-cache --jobs 2 "$v2")")
    j1+=("$(ms_of "$kb" build-and-copy --nix never --no-cache --jobs 1 "$v1")")
  fi
  [[ $(tree_hash "$v1") == "$(tree_hash "$v2")" ]] || { echo "error: --jobs 2 wrote another build/" >&2; exit 1; }
done
echo "vector-add-helion, 3 noarch cells, --no-cache, $rounds_noarch paired rounds (build/ NAR $(tree_hash "$v1") both ways):"
echo "  --jobs 1: $(printf '%s\n' "${j1[@]}" | stats)"
echo "  --jobs 2: $(printf '%s\n' "${j2[@]}" | stats)"

if [[ ${COMPILED:-0} == 1 ]]; then
  for j in 1 2; do
    export KERNEL_BUILDER_CACHE_DIR=$scratch/cache-both-$j
    checkout relu "$scratch/both-$j"
    echo "relu CPU + CUDA cells, cold, --jobs $j: $(ms_of "$kb" build-and-copy --nix never --python "$py" --jobs "$j" "$scratch/both-$j") ms"
  done
  [[ $(tree_hash "$scratch/both-1") == "$(tree_hash "$scratch/both-2")" ]] || { echo "error: --jobs 2 wrote another build/" >&2; exit 1; }
  echo "  same build/ NAR both ways: $(tree_hash "$scratch/both-1")"
fi
