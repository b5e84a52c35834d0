#!/usr/bin/env bash
# Build the kernel-builder wheel (pyproject.toml) with maturin:
#   scripts/build-wheel.sh [MATURIN BUILD ARGS...]
# e.g. `scripts/build-wheel.sh --zig` (manylinux_2_17 whatever this machine's glibc),
# `scripts/build-wheel.sh --target aarch64-unknown-linux-gnu --zig`. Always a release build,
# written to target/wheels/ (its path is printed last).
#
# First stages the wheel's data: the files of this checkout that the kernel-builder flake reads
# (flake.nix, flake.lock, nix/, and the Rust sources its package builds from), as git tracks them,
# into target/wheel-data/data/share/kernel-builder/flake; installed, they are
# <prefix>/share/kernel-builder/flake beside <prefix>/bin/kernel-builder, which `init` names and
# `--nix` builds with (src/init/mod.rs, `installed_flake`).
#
# $MATURIN is the maturin to run (default: `maturin` on PATH).
set -euo pipefail
cd "$(dirname "$0")/.."

# What the flake reads: itself, its lock, the Nix library, and what its `rustSource` keeps
# (flake.nix: Cargo.toml, Cargo.lock, src, nix; tests/ only feeds the integration tests, which
# the flake's package does not run), and the license.
flake_files=(flake.nix flake.lock Cargo.toml Cargo.lock src nix LICENSE)

stage=target/wheel-data
rm -rf "$stage.tmp"
mkdir -p "$stage.tmp/data/share/kernel-builder/flake"
# Tracked files only (no target/, no editor leftovers), as they are in the work tree.
git ls-files -z -- "${flake_files[@]}" | tar --null -T - -cf - | tar -xf - -C "$stage.tmp/data/share/kernel-builder/flake"
for f in flake.nix flake.lock nix/build-matrix.json Cargo.toml; do
    if [ ! -f "$stage.tmp/data/share/kernel-builder/flake/$f" ]; then
        echo "build-wheel.sh: $f is not tracked by git in $PWD; the wheel's flake needs it" >&2
        exit 1
    fi
done
rm -rf "$stage"
mv "$stage.tmp" "$stage"

out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
"${MATURIN:-maturin}" build --release --locked --out "$out" "$@" >&2
wheels=("$out"/*.whl)
if [ "${#wheels[@]}" -ne 1 ] || [ ! -f "${wheels[0]}" ]; then
    echo "build-wheel.sh: maturin made ${#wheels[@]} wheels, expected one: ${wheels[*]}" >&2
    exit 1
fi
dest=target/wheels
mkdir -p "$dest"
mv "${wheels[0]}" "$dest/"
echo "$PWD/$dest/$(basename "${wheels[0]}")"
