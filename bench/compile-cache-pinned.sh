#!/usr/bin/env bash
# One build of a CUDA kernel's cell at one capability, natively from the pins (torch and CUDA
# wheels in KERNEL_BUILDER_TOOLCHAIN_CACHE_DIR), for timing each case of BENCHMARKS.md's
# "The compile cache from the pins" with a timer of whole processes (e.g. `/usr/bin/time -v`,
# or one that alternates two commands). Not part of `cargo test`.
#
# Usage: bench/compile-cache-pinned.sh CASE KERNEL_DIR VARIANT CAPABILITY WORK
#   prep       build once into WORK/warm-cc (the warm compile cache the cases below read)
#   cold-off   KERNEL_BUILDER_COMPILE_CACHE=off, empty cell cache
#   cold-cache an empty compile cache, empty cell cache
#   warm       a fresh checkout at a new path, empty cell cache, WORK/warm-cc
#   changed    like warm, one .cu changed (a comment unique to the run appended)
#   upstream   like cold-off with upstream's rule: Ninja -j = cores, nvcc threads = targets (1), no split
#   prep-prev  build PREV_VARIANT (the torch before, same CUDA; from PREV_PYTHON's torch when
#              set, for a torch the pins do not hold) once into WORK/prev-cc
#   next-torch VARIANT with a copy of WORK/prev-cc (what the torch before left), empty cell cache
# Env: KB (default target/debug/kernel-builder). Every case but prep (and WORK/root) leaves nothing behind and
# appends its build line to WORK/lines.txt.
set -eu
case_=$1 kernel=$(realpath "$2") variant=$3 cap=$4 work=$5 python=
repo=$(cd "$(dirname "$0")/.." && pwd)
KB=$(realpath "${KB:-$repo/target/debug/kernel-builder}")
mkdir -p "$work"
run=$(mktemp -d "$work/run.XXXXXX")
trap 'rm -rf "$run"' EXIT
cp -r "$kernel" "$run/k"
rm -rf "$run/k/build"
# The cache root (cell cache, work directories, source mirror): a fresh one at a new path per
# run, or with SAME_ROOT=1 WORK/root emptied before each run (the same path every time, as a
# CI runner's home is); the compile cache is elsewhere (KERNEL_BUILDER_COMPILE_CACHE).
if [ "${SAME_ROOT:-}" = 1 ]; then
  rm -rf "$work/root"
  export KERNEL_BUILDER_CACHE_DIR=$work/root
else
  export KERNEL_BUILDER_CACHE_DIR=$run/cache
fi
unset KERNEL_BUILDER_JOBS KERNEL_BUILDER_NVCC_THREADS KERNEL_BUILDER_NVCC_SPLIT_COMPILE
build() { "$KB" build-and-copy --nix never --no-cache ${python:+--python "$python"} --variant "$variant" --cuda-capabilities "$cap" "$run/k" 2>"$run/err" \
  | grep "^built" | sed "s|^|$case_: |" >>"$work/lines.txt" || { cat "$run/err" >&2; exit 1; }; }
case $case_ in
  prep) rm -rf "$work/warm-cc"; KERNEL_BUILDER_COMPILE_CACHE=$work/warm-cc build ;;
  cold-off) KERNEL_BUILDER_COMPILE_CACHE=off build ;;
  cold-cache) KERNEL_BUILDER_COMPILE_CACHE=$run/cc build ;;
  warm) KERNEL_BUILDER_COMPILE_CACHE=$work/warm-cc build ;;
  changed)
    cu=$(find "$run/k" -name '*.cu' | sort | head -1)
    echo "// changed $(date +%s%N)" >>"$cu"
    KERNEL_BUILDER_COMPILE_CACHE=$work/warm-cc build ;;
  prep-prev) rm -rf "$work/prev-cc"; variant=$PREV_VARIANT python=${PREV_PYTHON:-} KERNEL_BUILDER_COMPILE_CACHE=$work/prev-cc build ;;
  next-torch) cp -r "$work/prev-cc" "$run/cc"; KERNEL_BUILDER_COMPILE_CACHE=$run/cc build ;;
  upstream)
    KERNEL_BUILDER_COMPILE_CACHE=off KERNEL_BUILDER_JOBS=$(nproc) KERNEL_BUILDER_NVCC_THREADS=1 \
      KERNEL_BUILDER_NVCC_SPLIT_COMPILE=1 build ;;
  *) echo "unknown case $case_" >&2; exit 2 ;;
esac
