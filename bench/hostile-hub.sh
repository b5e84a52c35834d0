#!/usr/bin/env bash
# Bounds under a hostile Hub: `kernel-builder upload` against the local Hub stand-in
# (tests/hub_server/server.py) when its `refs` answer is endless (a chunked body that never
# ends) or silent (the request is read, nothing is answered), measured with /usr/bin/time -v:
# peak memory (maximum resident set size), wall-clock time and the exit status.
#
# Usage: bench/hostile-hub.sh [endless|silent|both]    (default: both)
# Env:   KB  the kernel-builder binary (default: target/release/kernel-builder)
#        KERNEL_BUILDER_HUB_TIMEOUT  passed through (unset: the default answer timeout)
# Needs python3 and /usr/bin/time. Not part of `cargo test`.
set -euo pipefail
cd "$(dirname "$0")/.."

what=${1:-both}
kb=${KB:-target/release/kernel-builder}
[[ -x $kb ]] || { echo "error: $kb not found; run \`cargo build --release\` first" >&2; exit 1; }
kb=$(realpath "$kb")
server=$(realpath tests/hub_server/server.py)
scratch=$(mktemp -d "${TMPDIR:-/tmp}/kb-hostile-bench.XXXXXX")
server_pid=
cleanup() { [[ -n $server_pid ]] && kill "$server_pid" 2>/dev/null; rm -rf "$scratch"; }
trap cleanup EXIT

cp -r kernels/vector-add-helion "$scratch/kernel"
rm -rf "$scratch/kernel/build"
HF_HOME=$scratch/hf "$kb" build-and-copy --nix never "$scratch/kernel" >/dev/null 2>&1

run() { # MODE
    python3 "$server" --token t0k3n >"$scratch/port" &
    server_pid=$!
    for _ in $(seq 100); do [[ -s $scratch/port ]] && break; sleep 0.05; done
    local url="http://127.0.0.1:$(sed -n 's/^PORT //p' "$scratch/port")"
    python3 - "$url" "$1" <<'PY'
import json, sys, urllib.request
spec = {"endpoint": "refs", "nth": 1, "times": 3, "hostile": sys.argv[2], "seconds": 900}
req = urllib.request.Request(sys.argv[1] + "/_admin/fail", json.dumps(spec).encode(),
                             {"Content-Type": "application/json"})
urllib.request.urlopen(req).read()
PY
    local status=0
    HF_ENDPOINT=$url HF_TOKEN=t0k3n HF_HOME=$scratch/hf /usr/bin/time -v "$kb" upload "$scratch/kernel" \
        >/dev/null 2>"$scratch/err" || status=$?
    echo "== $1: exit $status"
    grep -E "^(error|note)" "$scratch/err" | sed 's/127.0.0.1:[0-9]*/127.0.0.1:PORT/' || true
    grep -E "Maximum resident set size|Elapsed \(wall clock\)" "$scratch/err"
    kill "$server_pid" 2>/dev/null; wait "$server_pid" 2>/dev/null || true
    server_pid=
    rm -f "$scratch/port"
}

case $what in
    endless) run endless ;;
    silent) run silent ;;
    both) run endless; run silent ;;
    *) echo "usage: $0 [endless|silent|both]" >&2; exit 2 ;;
esac
