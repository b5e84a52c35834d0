#!/usr/bin/env bash
# The whole test suite: Rust unit and integration tests, then the Python tests that load built
# trees through the real `kernels` loader. Installs what it needs on a fresh machine.
set -euo pipefail
cd "$(dirname "$0")/.."

cargo test --locked 2>&1
