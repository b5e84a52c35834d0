#!/usr/bin/env bash
# Benchmark: `kernel-builder build-and-copy --nix never` of one noarch kernel, cold (no build/)
# and unchanged (build/ already holds the same variants), interleaved, median of ROUNDS.
#
# Usage: bench/build-and-copy.sh [KERNEL_DIR] [ROUNDS]
#        (defaults: kernels/vector-add-helion, 11 rounds)
# Env:   KB  the kernel-builder binary (default: target/release/kernel-builder)
#
# The kernel is copied to a scratch directory first, so the repository is not touched. Needs a
# release build (`cargo build --release`). Not part of `cargo test`.
set -euo pipefail
cd "$(dirname "$0")/.."

src=${1:-kernels/vector-add-helion}
rounds=${2:-11}
kb=${KB:-target/release/kernel-builder}
[[ -x $kb ]] || { echo "error: $kb not found; run \`cargo build --release\` first" >&2; exit 1; }
[[ -f $src/build.toml ]] || { echo "error: $src/build.toml not found" >&2; exit 1; }
kb=$(realpath "$kb")

scratch=$(mktemp -d "${TMPDIR:-/tmp}/kb-build-bench.XXXXXX")
trap 'rm -rf "$scratch"' EXIT
cp -r "$src" "$scratch/kernel"
rm -rf "$scratch/kernel/build"
cd "$scratch/kernel"

ms() { local t0 t1; t0=$(date +%s%N); "$kb" build-and-copy --nix never >/dev/null 2>&1; t1=$(date +%s%N); echo $(((t1 - t0) / 1000000)); }
# "min M ms, median N ms" of the numbers on stdin.
stats() { sort -n | awk '{a[NR]=$1} END {printf "min %d ms, median %d ms", a[1], a[int((NR+1)/2)]}'; }

cold=() unchanged=()
for _ in $(seq 1 "$rounds"); do
    rm -rf build
    cold+=("$(ms)")
    unchanged+=("$(ms)")
done
files=$(find build -type f | wc -l)
echo "kernel: $src ($(find build -mindepth 1 -maxdepth 1 -type d | wc -l) variants, $files files in build/)"
echo "cold:      $(printf '%s\n' "${cold[@]}" | stats)  (runs: ${cold[*]})"
echo "unchanged: $(printf '%s\n' "${unchanged[@]}" | stats)  (runs: ${unchanged[*]})"
