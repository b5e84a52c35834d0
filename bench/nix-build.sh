#!/usr/bin/env bash
# `nix build .#bundle` of kernels/vector-add-helion, offline and sandboxed: cold (the bundle
# and every cell deleted from the store first, so each of those derivations builds; the
# filtered source is made at evaluation time) and with nothing changed (evaluation plus the
# store lookup).
# Usage: bench/nix-build.sh [RUNS]   (run scripts/setup-nix.sh first)
set -euo pipefail
cd "$(dirname "$0")/.."
. bench/nix-common.sh
runs="${1:-5}"
kernel=./kernels/vector-add-helion

build() { nix build --no-link "${OVERRIDE[@]}" "$kernel#bundle"; }

# The store paths a cold build must recreate: the bundle and each cell.
outputs() {
    nix eval --json "${OVERRIDE[@]}" "$kernel#packages.x86_64-linux" \
        --apply 'ps: map (n: ps.${n}.outPath) (builtins.filter (n: n != "build-and-copy" && n != "default") (builtins.attrNames ps))' \
        2>/dev/null | python3 -c 'import json,sys; print("\n".join(json.load(sys.stdin)))'
}

build >/dev/null 2>&1
echo "cold (bundle and $(($(outputs | wc -l) - 1)) cells rebuilt):"
times=()
for _ in $(seq "$runs"); do
    mapfile -t paths < <(outputs)
    nix store delete "${paths[@]}" >/dev/null 2>&1 || true
    for p in "${paths[@]}"; do
        if [ -e "$p" ]; then echo "could not delete $p" >&2; exit 1; fi
    done
    start=$(date +%s%N)
    build >/dev/null 2>&1
    end=$(date +%s%N)
    times+=($(((end - start) / 1000000)))
done
sorted=$(printf '%s\n' "${times[@]}" | sort -n)
echo "  min $(echo "$sorted" | head -1) ms, median $(echo "$sorted" | sed -n "$(((runs + 1) / 2))p") ms ($runs runs)"
echo "nothing changed:"
echo "  $(time_runs "$runs" build)"
