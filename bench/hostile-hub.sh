#!/usr/bin/env bash
# Bounds under a hostile Hub: `kernel-builder upload` against the local Hub stand-in
# (tests/hub_server/server.py) when its `refs` answer is endless (a chunked body that never
# ends) or silent (the request is read, nothing is answered), or when the branch's tree
# listing goes on in pages of 30 MiB each (`pages`); and `kernel-builder lock-kernel-deps`
# when `refs` is silent (`lock-silent`). Measured with /usr/bin/time -v: peak memory (maximum
# resident set size), wall-clock time and the exit status.
#
# Usage: bench/hostile-hub.sh [endless|silent|pages|lock-silent|both|all]    (default: both,
#        which is endless and silent)
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

# A copy of the kernel that depends on the kernel uploaded above, for lock-kernel-deps.
cp -r "$scratch/kernel" "$scratch/dependent"
sed -i '0,/^\[general\]$/s//[general]\nkernel-depends = [{ repo-id = "kernel-builder-examples\/vector-add-helion", version = 1 }]/' \
    "$scratch/dependent/build.toml"

run() { # MODE
    python3 "$server" --token t0k3n >"$scratch/port" &
    server_pid=$!
    for _ in $(seq 100); do [[ -s $scratch/port ]] && break; sleep 0.05; done
    local url="http://127.0.0.1:$(sed -n 's/^PORT //p' "$scratch/port")"
    local endpoint=refs hostile=$1 times=3 cmd=(upload "$scratch/kernel")
    case $1 in
        pages) # the branch exists (a first upload), then its listing goes on and on
            HF_ENDPOINT=$url HF_TOKEN=t0k3n HF_HOME=$scratch/hf "$kb" upload "$scratch/kernel" >/dev/null 2>&1
            endpoint=tree hostile=big_pages times=100000 ;;
        lock-silent) hostile=silent cmd=(lock-kernel-deps "$scratch/dependent") ;;
    esac
    python3 - "$url" "$endpoint" "$hostile" "$times" <<'PY'
import json, sys, urllib.request
spec = {"endpoint": sys.argv[2], "nth": 1, "times": int(sys.argv[4]), "hostile": sys.argv[3], "seconds": 900}
req = urllib.request.Request(sys.argv[1] + "/_admin/fail", json.dumps(spec).encode(),
                             {"Content-Type": "application/json"})
urllib.request.urlopen(req).read()
PY
    local status=0
    HF_ENDPOINT=$url HF_TOKEN=t0k3n HF_HOME=$scratch/hf KERNEL_BUILDER_CACHE_DIR=$scratch/cache \
        /usr/bin/time -v "$kb" "${cmd[@]}" >/dev/null 2>"$scratch/err" || status=$?
    echo "== $1: exit $status"
    grep -E "^(error|note)" "$scratch/err" | sed 's/127.0.0.1:[0-9]*/127.0.0.1:PORT/' || true
    grep -E "Maximum resident set size|Elapsed \(wall clock\)" "$scratch/err"
    kill "$server_pid" 2>/dev/null; wait "$server_pid" 2>/dev/null || true
    server_pid=
    rm -f "$scratch/port"
}

case $what in
    endless | silent | pages | lock-silent) run "$what" ;;
    both) run endless; run silent ;;
    all) run endless; run silent; run pages; run lock-silent ;;
    *) echo "usage: $0 [endless|silent|pages|lock-silent|both|all]" >&2; exit 2 ;;
esac
