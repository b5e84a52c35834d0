#!/usr/bin/env bash
# Spreading a bundle over Nix remote builders, and pulling it from a signed binary cache.
#
# The bundle: kernels/relu with two compiled cells, torch 2.11 CPU and CUDA 13.0
# (torch211-cxx11-cpu-x86_64-linux, torch211-cxx11-cu130-x86_64-linux), built with the
# offline host-test package set (NOT hermetic: PyPI's torch and nvcc wheels, this machine's
# g++, CMake, Ninja; see tests/fixtures/host-toolchain). Every run edits a comment in
# build.toml first, so both cells and the bundle are new derivations (cold); the package
# set's derivations (unpacked wheels, tools) stay built, here and on the builder.
#
#   1 builder:  `build-and-copy --nix always -- --builders '' --max-jobs 1` (this machine)
#   2 builders: `build-and-copy --nix always --builders <SSH builder, 1 job> -- --max-jobs 1`
#               (this machine and the test builder of scripts/remote-builder.sh: a second sshd
#               and Nix store on 127.0.0.1, so the same two CPU cores; its store is a tmpfs)
#   push:       `kernel-builder cache push --to file://… --key-file …` of the last bundle
#   pull:       `kernel-builder cache pull --from file://… --public-key …` into a fresh, empty
#               store (an empty directory on /nix in a mount namespace): evaluation, the
#               signature check, fetching the bundle, copying it into build/
#
# Usage: bench/nix-remote.sh [RUNS]   (root; scripts/setup-nix.sh, scripts/remote-builder.sh
# setup and the venv first). Prints wall times in seconds.
set -euo pipefail
cd "$(dirname "$0")/.."
. bench/nix-common.sh
runs="${1:-2}"
kb="$PWD/target/debug/kernel-builder"
cargo build -q
work=$(mktemp -d /tmp/kb-bench-remote.XXXXXX)
builder="$work/builder"
cleanup() { scripts/remote-builder.sh stop "$builder" || true; rm -rf "$work"; }
trap cleanup EXIT

# The host package set (as bench/nix-compiled.sh).
tc="$work/toolchain"
mkdir -p "$tc"
cp tests/fixtures/host-toolchain/flake.nix tests/fixtures/host-toolchain/wheels.json "$tc/"
purelib=$(readlink -f "$(.venv/bin/python -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')")
cat >"$tc/host.json" <<JSON
{ "python": "/usr/bin/python3", "pythonpath": ["$purelib"], "cxx": "/usr/bin/g++", "cc": "/usr/bin/gcc",
  "cmake": "$purelib/cmake/data/bin/cmake", "ninja": "$(readlink -f .venv/bin)/ninja",
  "bin": ["/usr/bin", "/bin"], "manylinux": "2_34" }
JSON

# A repository with the root flake and kernels/relu building the two cells as its bundle.
repo="$work/repo"
mkdir -p "$repo/kernels"
cp flake.nix flake.lock Cargo.toml Cargo.lock "$repo/"
cp -r nix "$repo/nix"
cp -r kernels/relu "$repo/kernels/relu"
rm -rf "$repo/kernels/relu/build" "$repo/kernels/relu/result"*
cat >"$repo/kernels/relu/flake.nix" <<'NIX'
{
  inputs.kernel-builder.url = "path:../..";
  outputs = { self, kernel-builder }:
    kernel-builder.lib.genKernelFlakeOutputs {
      inherit self;
      path = ./.;
      systems = [ "x86_64-linux" ];
      torchVersions = _: [
        { torchVersion = "2.11"; cpu = true; systems = [ "x86_64-linux" ]; bundleBuild = true; }
        { torchVersion = "2.11"; cudaVersion = "13.0"; systems = [ "x86_64-linux" ]; bundleBuild = true; }
      ];
    };
}
NIX
printf 'build/\nresult\n' >"$repo/.gitignore"
git -C "$repo" init -q .
gitc() { git -C "$repo" -c user.name=bench -c user.email=bench@invalid "$@"; }
gitc add -A
gitc commit -qm bench
kernel="$repo/kernels/relu"
args=(--option sandbox relaxed "${OVERRIDE[@]}" --override-input kernel-builder/toolchain "path:$tc"
      --override-input kernel-builder/nixpkgs "path:$PWD/tests/fixtures/nixpkgs-stub")

renew() {
    echo "# bench run $(date +%s%N)" >>"$kernel/build.toml"
    gitc commit -qam "new cells"
}
seconds() { python3 -c "import sys; print('%.1f' % ((int(sys.argv[2]) - int(sys.argv[1])) / 1e9))" "$@"; }

KB_REMOTE_TMPFS=8g KB_REMOTE_MAX_JOBS=1 scripts/remote-builder.sh start "$builder" >"$work/builder.env"
spec=$(sed -n 's/^BUILDER=//p' "$work/builder.env")
NIX_SSHOPTS=$(sed -n 's/^NIX_SSHOPTS=//p' "$work/builder.env")
export NIX_SSHOPTS KERNEL_BUILDER_ORCHESTRATOR="$ORCH"

one() { "$kb" build-and-copy "$kernel" --nix always -- --builders '' --max-jobs 1 "${args[@]}"; }
two() { "$kb" build-and-copy "$kernel" --nix always --builders "$spec" -- --max-jobs 1 "${args[@]}"; }

# Warm-up: the package set is built here and copied to the builder once.
renew
two >"$work/warmup.log" 2>&1 || { cat "$work/warmup.log" >&2; exit 1; }
echo "warm-up (2 builders, package set copied to the builder): done"
for i in $(seq "$runs"); do
    for n in one two; do
        renew
        start=$(date +%s%N)
        "$n" >"$work/$n.log" 2>&1 || { cat "$work/$n.log" >&2; exit 1; }
        end=$(date +%s%N)
        where=$(grep -c "was built on ssh-ng" "$work/$n.log" || true)
        label="1 builder (this machine)"
        [ "$n" = one ] || label="2 builders (this machine + SSH)"
        echo "run $i, $label: $(seconds "$start" "$end") s (derivations built on the SSH builder: $where)"
    done
done

# Cold build against pull, for the bundle just built.
nix key generate-secret --key-name kb-bench-1 >"$work/secret"
nix key convert-secret-to-public <"$work/secret" >"$work/public"
start=$(date +%s%N)
"$kb" cache push "$kernel" --to "file://$work/cache" --key-file "$work/secret" -- "${args[@]}" >"$work/push.log" 2>&1 \
    || { cat "$work/push.log" >&2; exit 1; }
end=$(date +%s%N)
echo "push (bundle and 2 cells, signed, to file://): $(seconds "$start" "$end") s, cache $(du -sh "$work/cache" | cut -f1)"
bundle=$(sed -n 's/^pushed \(.*-bundle\) (signed.*/\1/p' "$work/push.log")
for i in $(seq "$runs"); do
    fresh="$work/fresh-$i/nix"
    mkdir -p "$fresh"
    rm -rf "$kernel/build"
    start=$(date +%s%N)
    unshare --mount --propagation private -- sh -c 'mount --bind "$1" /nix && shift && exec "$@"' sh "$fresh" \
        "$kb" cache pull "$kernel" --from "file://$work/cache" --public-key "$(cat "$work/public")" -- "${args[@]}" \
        >"$work/pull.log" 2>&1 || { cat "$work/pull.log" >&2; exit 1; }
    end=$(date +%s%N)
    built=$(grep -c "^building '" "$work/pull.log" || true)
    fetched=$(grep -c "^fetched " "$work/pull.log" || true)
    same=no
    if [ "$(nix hash path "$kernel/build/torch211-cxx11-cpu-x86_64-linux")" = "$(nix hash path "$bundle/torch211-cxx11-cpu-x86_64-linux")" ] \
        && [ "$(nix hash path "$kernel/build/torch211-cxx11-cu130-x86_64-linux")" = "$(nix hash path "$bundle/torch211-cxx11-cu130-x86_64-linux")" ]; then
        same=yes
    fi
    echo "run $i, pull into a fresh store: $(seconds "$start" "$end") s (derivations built: $built, variants fetched: $fetched, NAR hashes equal to the pushed bundle's: $same)"
    rm -rf "$work/fresh-$i"
done
