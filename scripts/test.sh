#!/usr/bin/env bash
# The whole test suite: Rust unit and integration tests, then the Python tests that load built
# trees through the real `kernels` loader. Installs what it needs on a fresh machine.
set -euo pipefail
cd "$(dirname "$0")/.."

cargo test --locked 2>&1

# Python: build the example kernels with the CLI and load them with the real `kernels` loader.
# pytest exits 5 when it collects no test and tests/python/conftest.py turns "nothing passed"
# into 1; under `set -e` either fails this script, so an empty run can never pass.
cargo build --locked 2>&1
scripts/setup-venv.sh
.venv/bin/python -m pytest tests/python -ra -p no:cacheprovider
