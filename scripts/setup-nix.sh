#!/usr/bin/env bash
# Prepare a machine for the Nix tests, offline: Debian's nix-bin, a nix.conf with flakes on,
# the sandbox on (no silent fallback to unsandboxed builds) and no binary cache (only those
# settings are changed, with a backup and a note on stderr: scripts/nix-conf.sh), build users,
# and a statically linked orchestrator that the flake's cells can run as their builder.
#
# Idempotent: run it as often as you like. Prints the orchestrator directory on its last line
# (pass it to `--override-input kernel-builder/orchestrator path:<dir>`); the tests read it
# from $KERNEL_BUILDER_ORCHESTRATOR or build it the same way.
set -euo pipefail
cd "$(dirname "$0")/.."

as_root() { if [ "$(id -u)" = 0 ]; then "$@"; else sudo "$@"; fi; }

if ! command -v nix >/dev/null 2>&1; then
    as_root apt-get update -qq
    as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq nix-bin >/dev/null
fi

# Only the settings the tests need are changed, each said on stderr; the file as it was is kept
# in /etc/nix/nix.conf.before-kernel-builder (scripts/nix-conf.sh).
conf=/etc/nix/nix.conf
conf_before="$(cat "$conf" 2>/dev/null || true)"
scripts/nix-conf.sh "$conf"

# Build users for the sandboxed builds (Debian's package normally creates them).
if ! getent group nixbld >/dev/null; then
    as_root groupadd --system nixbld
fi
for i in $(seq 1 10); do
    if ! id "nixbld$i" >/dev/null 2>&1; then
        as_root useradd --system --no-create-home --home-dir /var/empty --shell /usr/sbin/nologin \
            --gid nixbld --groups nixbld "nixbld$i"
    fi
done

# A running daemon must reread a changed nix.conf; without one, nix runs the store locally.
if [ "$(cat "$conf" 2>/dev/null)" != "$conf_before" ] && command -v systemctl >/dev/null 2>&1 \
    && systemctl is-active --quiet nix-daemon 2>/dev/null; then
    as_root systemctl restart nix-daemon
fi

target=x86_64-unknown-linux-gnu
case "$(uname -m)" in aarch64) target=aarch64-unknown-linux-gnu ;; esac
RUSTFLAGS='-C target-feature=+crt-static' cargo build --release --locked --target "$target" >&2
# Cargo's target directory: ./target unless CARGO_TARGET_DIR (or a cargo config) moves it.
target_dir=$(cargo metadata --format-version 1 --no-deps | python3 -c 'import json, sys; print(json.load(sys.stdin)["target_directory"])')
dir="${KERNEL_BUILDER_ORCHESTRATOR:-$target_dir/nix-orchestrator}"
mkdir -p "$dir/bin"
install -m 0755 "$target_dir/$target/release/kernel-builder" "$dir/bin/kernel-builder.tmp"
mv "$dir/bin/kernel-builder.tmp" "$dir/bin/kernel-builder"
# The flake's `orchestrator` input is a flake (it follows nixpkgs by default), so the directory
# that overrides it is one too: no outputs, just bin/kernel-builder beside it.
printf '%s\n' '{' \
  '  description = "A prebuilt kernel-builder orchestrator (bin/kernel-builder) for the kernel-builder flake";' \
  '  outputs = { self }: { };' '}' > "$dir/flake.nix"
nix --version >&2
echo "$dir"
