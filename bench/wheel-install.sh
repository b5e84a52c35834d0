#!/usr/bin/env bash
# Benchmark: the kernel-builder wheel's size, and the time to install it into a fresh venv with
# pip and with uv (`uv pip install`), and for `uvx --from WHEEL kernel-builder --version` with
# an empty uv cache; median of ROUNDS, each round in new directories.
#
# Usage: bench/wheel-install.sh WHEEL [ROUNDS]   (default 7 rounds)
# Env:   UV  the uv to use (default: target/wheel-tools/bin/uv, made by scripts/test-wheel.sh)
#
# Everything is offline (--no-index, uv --offline): the times are unpacking and writing the
# files (the executable and the ~210 files of the flake), not downloading. Not part of
# `cargo test`.
set -euo pipefail
cd "$(dirname "$0")/.."
wheel=$(realpath "$1")
rounds=${2:-7}
uv=${UV:-$PWD/target/wheel-tools/bin/uv}
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
ms() { python3 -c 'import sys, time; print(round((time.time() - float(sys.argv[1])) * 1000))' "$1"; }
median() { sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }

echo "wheel: $(basename "$wheel"), $(stat -c %s "$wheel") bytes; $(python3 -m zipfile -l "$wheel" | tail -n +2 | wc -l) files"
for i in $(seq "$rounds"); do
    d="$scratch/$i"
    python3 -m venv "$d/pip-venv"
    t=$(date +%s.%N); "$d/pip-venv/bin/pip" install -q --disable-pip-version-check --no-index "$wheel"; echo "$(ms "$t")" >>"$scratch/pip"
    "$uv" venv -q --offline "$d/uv-venv"
    t=$(date +%s.%N); VIRTUAL_ENV="$d/uv-venv" UV_CACHE_DIR="$d/uv-cache" "$uv" pip install -q --offline "$wheel"; echo "$(ms "$t")" >>"$scratch/uv"
    t=$(date +%s.%N); UV_CACHE_DIR="$d/uvx-cache" UV_TOOL_DIR="$d/uvx-tools" "$uv" tool run -q --offline --from "$wheel" kernel-builder --version >/dev/null; echo "$(ms "$t")" >>"$scratch/uvx"
    rm -rf "$d"
done
echo "pip install (fresh venv):            median $(median <"$scratch/pip") ms  (all: $(tr '\n' ' ' <"$scratch/pip"))"
echo "uv pip install (fresh venv):         median $(median <"$scratch/uv") ms  (all: $(tr '\n' ' ' <"$scratch/uv"))"
echo "uvx --from WHEEL … --version (cold): median $(median <"$scratch/uvx") ms  (all: $(tr '\n' ' ' <"$scratch/uvx"))"
