#!/usr/bin/env bash
# relu's bundle cells torch214-cxx11-cpu, torch215-cxx11-cpu and torch215-cxx11-cu132
# (x86_64-linux; CUDA compile only, relu's one capability) in Nix and natively, from the same
# pins (nix/torch-wheels.json) and with the same compiler: the offline host-test package set
# (NOT hermetic: this machine's g++, CMake, Ninja; see tests/fixtures/host-toolchain). The
# pinned wheels come from the native toolchain cache ($KERNEL_BUILDER_TOOLCHAIN_CACHE_DIR,
# default target/tmp/toolchain-cache; a native build fills it) and are added to the store by
# hash first. Times, min and median of RUNS:
#   nix, cold:         the three cells (and what refers to them) deleted from the store, then
#                      one `nix build` of the three (the unpacked wheels stay, as the native
#                      toolchain cache's trees do)
#   nix, cold + trees: the same, and the unpacked torch and CUDA trees deleted too (the wheels
#                      stay in the store, as they stay in the toolchain cache)
#   nix, unchanged:    `nix build` again (evaluation and a store lookup)
#   native, cold:      `build-and-copy --nix never` of the three with an empty cell cache (the
#                      toolchain cache warm)
#   native, unchanged: the same again (`reused`)
# Usage: bench/nix-compiled.sh [RUNS]   (scripts/setup-nix.sh first; the venv at .venv)
set -euo pipefail
cd "$(dirname "$0")/.."
. bench/nix-common.sh
runs="${1:-3}"
cells=(torch214-cxx11-cpu-x86_64-linux torch215-cxx11-cpu-x86_64-linux torch215-cxx11-cu132-x86_64-linux)
toolchains="${KERNEL_BUILDER_TOOLCHAIN_CACHE_DIR:-$PWD/target/tmp/toolchain-cache}"
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
# The pinned wheels of the three cells, into the store by hash (named as the pins name them).
python3 - "$toolchains" "$work/named" <<'PY'
import json, os, subprocess, sys
cache, named = sys.argv[1], sys.argv[2]
pins = json.load(open("nix/torch-wheels.json"))
wheels = [pins["wheels"]["2.14"]["cu130"]["x86_64-linux"], pins["wheels"]["2.15"]["cu132"]["x86_64-linux"]]
wheels += pins["cuda-toolkits"]["13.2"]["x86_64-linux"]
os.makedirs(named, exist_ok=True)
for w in wheels:
    src = os.path.join(cache, "wheels", w["sha256"] + ".whl")
    if not os.path.isfile(src):
        sys.exit(f"{w['file']} is not in {cache}: run `build-and-copy --nix never kernels/relu` first")
    dst = os.path.join(named, w["file"])
    os.link(src, dst)
    subprocess.run(["nix-store", "--add-fixed", "sha256", dst], check=True, stdout=subprocess.DEVNULL)
PY
args=(--option sandbox relaxed "${OVERRIDE[@]}" --override-input kernel-builder/toolchain "path:$tc")
refs=()
for c in "${cells[@]}"; do refs+=("./kernels/relu#$c"); done
outs=$(nix build --no-link --json "${args[@]}" "${refs[@]}" | python3 -c 'import json,sys; print(" ".join(o["outputs"]["out"] for o in json.load(sys.stdin)))')
trees=$(nix eval --json "${args[@]}" ./kernels/relu#packages.x86_64-linux --apply \
    "p: map (c: [ p.\${c}.torchTree.outPath ] ++ (if p.\${c}.cudaTree == null then [ ] else [ p.\${c}.cudaTree.outPath ])) [ $(printf '"%s" ' "${cells[@]}")]" |
    python3 -c 'import json,sys; print(" ".join(sorted({t for c in json.load(sys.stdin) for t in c})))')
delete() { nix store delete $(nix-store --query --referrers-closure "$@") >/dev/null 2>&1 || true; }
cold() { delete $outs; nix build --no-link "${args[@]}" "${refs[@]}"; }
cold_trees() { delete $outs $trees; nix build --no-link "${args[@]}" "${refs[@]}"; }
echo "nix build, cold:         $(time_runs "$runs" cold)"
echo "nix build, cold + trees: $(time_runs "$runs" cold_trees)"
echo "nix build, unchanged:    $(time_runs "$runs" nix build --no-link "${args[@]}" "${refs[@]}")"
tools=$(nix eval --impure --raw --expr "(builtins.getFlake \"path:$tc\").tools.outPath")
cp -r kernels/relu "$work/relu"
rm -rf "$work/relu/build"
variants=()
for c in "${cells[@]}"; do variants+=(--variant "$c"); done
native() {
    env PATH="$tools/bin:/usr/bin:/bin" CXX="$tools/bin/g++" KERNEL_BUILDER_CACHE_DIR="$work/cache" \
        KERNEL_BUILDER_TOOLCHAIN_CACHE_DIR="$toolchains" \
        "$ORCH/bin/kernel-builder" build-and-copy "$work/relu" --nix never "${variants[@]}" --package-set host-test
}
native_cold() { rm -rf "$work/cache"; native; }
echo "native, cold:            $(time_runs "$runs" native_cold)"
echo "native, unchanged:       $(time_runs "$runs" native)"
for c in "${cells[@]}"; do
    out=$(nix build --no-link --json "${args[@]}" "./kernels/relu#$c" | python3 -c 'import json,sys; print(json.load(sys.stdin)[0]["outputs"]["out"])')
    echo "same bytes, $c: nix $(nix hash path "$out/$c") native $(nix hash path "$work/relu/build/$c")"
done
