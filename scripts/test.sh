#!/usr/bin/env bash
# The whole test suite, on a fresh Debian machine or an already set-up one:
#   1. Nix (Debian's nix-bin: flakes, sandbox on, no substituters) and the statically linked
#      orchestrator that Nix cells run as their builder (scripts/setup-nix.sh);
#   2. every Rust test, the ones that compare with real Nix included (feature nix-tests; the
#      remote-builder tests need openssh-server, installed by scripts/remote-builder.sh setup);
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

# The developer documentation (private items included) builds without a warning: a link to a
# renamed or removed item fails here rather than rotting. About a minute on 2 cores.
RUSTDOCFLAGS="-D warnings" cargo doc --locked --no-deps --document-private-items --quiet

# strace: the build test that kills a build at every rename of its swap injects the kill with
# it (without strace that test says SKIPPED and checks nothing). bubblewrap: the sandbox of
# sccache-dist's build servers (tests/it/compile_dist.rs runs two on loopback).
missing=()
command -v strace >/dev/null 2>&1 || missing+=(strace)
[ -x /usr/bin/bwrap ] || missing+=(bubblewrap)
if [ "${#missing[@]}" -gt 0 ]; then
    if [ "$(id -u)" = 0 ]; then
        apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null
    else
        sudo apt-get update -qq && sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null
    fi
fi

# openssh-server and the kbremote build users: the remote-builder tests (tests/it/nix_remote.rs)
# run a second sshd and Nix store on 127.0.0.1 (scripts/remote-builder.sh; idempotent).
scripts/remote-builder.sh setup

# The Python venv (torch, kernels, cmake, ninja, PyPI's nvcc) comes first: the Rust tests that
# build compiled cells (natively and in Nix, with the host test package set) use it too.
scripts/setup-venv.sh

KERNEL_BUILDER_ORCHESTRATOR="$(./scripts/setup-nix.sh)"
export KERNEL_BUILDER_ORCHESTRATOR

# Every variant the tests build is also copied here (src/assemble/record.rs), and its digest is
# checked against kernels 0.19.1's at the end (tests/python/recorded_digests_check.py).
KERNEL_BUILDER_RECORD_VARIANTS="$PWD/target/tmp/recorded-variants"
rm -rf "$KERNEL_BUILDER_RECORD_VARIANTS"
export KERNEL_BUILDER_RECORD_VARIANTS

# The real build.toml corpus is not part of this repository. With $KERNEL_BUILDER_CORPUS set,
# or a corpus at ../shared/corpus, the corpus tests run and a missing or broken corpus fails
# them; otherwise they are compiled as ignored and listed as such by cargo test (.ci/run runs
# this on a fresh clone so, then runs the ones listed against the corpus).
features=nix-tests
if [ -z "${KERNEL_BUILDER_CORPUS:-}" ] && [ -f ../shared/corpus/expected.json ]; then
    KERNEL_BUILDER_CORPUS="$(cd ../shared/corpus && pwd)"
fi
if [ -n "${KERNEL_BUILDER_CORPUS:-}" ]; then
    export KERNEL_BUILDER_CORPUS
    features=nix-tests,corpus-tests
    echo "test.sh: corpus tests run on $KERNEL_BUILDER_CORPUS" >&2
else
    echo "test.sh: SKIPPING the corpus tests: no corpus at $PWD/../shared/corpus and KERNEL_BUILDER_CORPUS is not set (cargo test lists them as ignored)" >&2
fi
cargo test --locked --features "$features" 2>&1

# The wheel as users install it (pip, uvx; issue 35), packed from the static release build
# scripts/setup-nix.sh made above, so nothing is compiled again (scripts/test-wheel.sh).
scripts/test-wheel.sh

# pytest exits 5 when it collects no test and tests/python/conftest.py turns "nothing passed"
# into 1; under `set -e` either fails this script, so an empty run can never pass.
cargo build --locked 2>&1
# The binary the Python tests run (tests/python/conftest.py), wherever Cargo put it.
if [ -z "${KERNEL_BUILDER:-}" ]; then
    KERNEL_BUILDER="$(cargo metadata --format-version 1 --no-deps | python3 -c 'import json, sys; print(json.load(sys.stdin)["target_directory"])')/debug/kernel-builder"
    export KERNEL_BUILDER
fi
# Without PYTHONDONTWRITEBYTECODE: loading a built tree writes bytecode into it, as it does for
# users, and the tests must show that verify and upload still accept it.
env -u PYTHONDONTWRITEBYTECODE .venv/bin/python -m pytest tests/python -ra -p no:cacheprovider
# Then the digest of every variant built above against kernels 0.19.1's (fails when none was).
.venv/bin/python -m pytest tests/python/recorded_digests_check.py -ra -p no:cacheprovider
