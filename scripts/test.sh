#!/usr/bin/env bash
# The whole test suite: Rust unit and integration tests, then the Python tests that load built
# trees through the real `kernels` loader. Installs what it needs on a fresh machine.
set -euo pipefail
cd "$(dirname "$0")/.."

# Nix (Debian's nix-bin: flakes, sandbox on, no substituters) and the static orchestrator that
# the Nix cells run as their builder; then every test, the real-Nix ones included.
KERNEL_BUILDER_ORCHESTRATOR="$(./scripts/setup-nix.sh)"
export KERNEL_BUILDER_ORCHESTRATOR
cargo test --locked --features nix-tests 2>&1
