#!/usr/bin/env bash
# relu's CPU cell (torch211-cxx11-cpu-x86_64-linux) in Nix and natively, with the same tools:
# the offline host-test package set (NOT hermetic: PyPI's torch wheel, this machine's g++,
# CMake, Ninja; see tests/fixtures/host-toolchain). Times, min and median of RUNS:
#   nix, cold:      the cell (and what refers to it) deleted from the store, then `nix build` (the toolchain
#                   derivations stay built: they are the package set, not the cell)
#   nix, unchanged: `nix build` again (evaluation and a store lookup)
#   native, cold:   `build-and-copy --nix never` into a fresh work directory
#   native, unchanged: the same again (CMake and Ninja find nothing to do)
# Usage: bench/nix-compiled.sh [RUNS]   (scripts/setup-nix.sh first; the venv at .venv)
set -euo pipefail
cd "$(dirname "$0")/.."
. bench/nix-common.sh
runs="${1:-3}"
cell=torch211-cxx11-cpu-x86_64-linux
tc=$(mktemp -d)
work=$(mktemp -d)
trap 'rm -rf "$tc" "$work"' EXIT
cp tests/fixtures/host-toolchain/flake.nix tests/fixtures/host-toolchain/wheels.json "$tc/"
purelib=$(readlink -f "$(.venv/bin/python -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')")
cat >"$tc/host.json" <<JSON
{ "python": "/usr/bin/python3", "pythonpath": ["$purelib"], "cxx": "/usr/bin/g++", "cc": "/usr/bin/gcc",
  "cmake": "$purelib/cmake/data/bin/cmake", "ninja": "$(readlink -f .venv/bin)/ninja",
  "bin": ["/usr/bin", "/bin"], "manylinux": "2_34" }
JSON
args=(--option sandbox relaxed "${OVERRIDE[@]}" --override-input kernel-builder/toolchain "path:$tc")
out=$(nix build --no-link --json "${args[@]}" "./kernels/relu#$cell" | python3 -c 'import json,sys; print(json.load(sys.stdin)[0]["outputs"]["out"])')
cold() { nix store delete $(nix-store --query --referrers-closure "$out") >/dev/null; nix build --no-link "${args[@]}" "./kernels/relu#$cell"; }
echo "nix build, cold:      $(time_runs "$runs" cold)"
echo "nix build, unchanged: $(time_runs "$runs" nix build --no-link "${args[@]}" "./kernels/relu#$cell")"
tools=$(nix eval --impure --raw --expr "(builtins.getFlake \"path:$tc\").tools.outPath")
cp -r kernels/relu "$work/relu"
rm -rf "$work/relu/build"
native() {
    env PATH="$tools/bin:/usr/bin:/bin" CXX="$tools/bin/g++" KERNEL_BUILDER_CACHE_DIR="$work/cache" \
        "$ORCH/bin/kernel-builder" build-and-copy "$work/relu" --nix never --variant "$cell" \
        --python "$tools/bin/python3" --package-set host-test
}
native_cold() { rm -rf "$work/cache"; native; }
echo "native, cold:         $(time_runs "$runs" native_cold)"
echo "native, unchanged:    $(time_runs "$runs" native)"
echo "same bytes: nix $(nix hash path "$out/$cell") native $(nix hash path "$work/relu/build/$cell")"
