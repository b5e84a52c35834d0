#!/usr/bin/env bash
# The whole test suite, on a fresh Debian machine or an already set-up one:
#   1. Nix (Debian's nix-bin: flakes, sandbox on, no substituters) and the statically linked
#      orchestrator that Nix cells run as their builder (scripts/setup-nix.sh);
#   2. every Rust test, the ones that compare with real Nix included (feature nix-tests);
#   3. the Python tests: the example kernels built by the CLI and loaded by the real `kernels`
#      loader (kernels 0.17.2, torch from PyPI, in .venv made by scripts/setup-venv.sh).
set -euo pipefail
cd "$(dirname "$0")/.."

# Tests make git commits in temporary repositories; a fresh machine may have no identity.
export GIT_AUTHOR_NAME="${GIT_AUTHOR_NAME:-kernel-builder tests}"
export GIT_AUTHOR_EMAIL="${GIT_AUTHOR_EMAIL:-tests@kernel-builder.invalid}"
export GIT_COMMITTER_NAME="${GIT_COMMITTER_NAME:-$GIT_AUTHOR_NAME}"
export GIT_COMMITTER_EMAIL="${GIT_COMMITTER_EMAIL:-$GIT_AUTHOR_EMAIL}"

# Formatting (rustfmt.toml); rustfmt ships with the rustup toolchain on these machines.
if cargo fmt --version >/dev/null 2>&1; then
    cargo fmt --check
else
    echo "test.sh: rustfmt is not installed; formatting not checked" >&2
fi

KERNEL_BUILDER_ORCHESTRATOR="$(./scripts/setup-nix.sh)"
export KERNEL_BUILDER_ORCHESTRATOR
cargo test --locked --features nix-tests 2>&1

# pytest exits 5 when it collects no test and tests/python/conftest.py turns "nothing passed"
# into 1; under `set -e` either fails this script, so an empty run can never pass.
cargo build --locked 2>&1
scripts/setup-venv.sh
.venv/bin/python -m pytest tests/python -ra -p no:cacheprovider
