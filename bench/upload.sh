#!/usr/bin/env bash
# Benchmark: `kernel-builder upload` of a multi-variant bundle to the local Hub-API test server
# (tests/hub_server/server.py): the first upload (repository and branch created, every file
# sent) and the no-change re-upload, each round against a fresh server; bytes sent (from
# --output-json) and wall-clock milliseconds, median of ROUNDS.
#
# Usage: bench/upload.sh [KERNEL_DIR] [ROUNDS]
#        (defaults: a generated noarch kernel, 7 rounds)
# Env:   KB  the kernel-builder binary (default: target/release/kernel-builder)
#
# The generated kernel has 4 backends (cpu, cuda, rocm, xpu: 4 variants), a package of 41
# Python files (~4 KiB each) and a 16 MiB binary data file, so each variant holds 42 files
# and the bundle ~64.7 MiB; the binary file goes through LFS, once (the 4 copies share one
# object id). A given KERNEL_DIR is copied to a scratch directory and built there with
# `build-and-copy --nix never`. Needs python3 and a release build. Not part of `cargo test`.
set -euo pipefail
cd "$(dirname "$0")/.."

src=${1:-}
rounds=${2:-7}
kb=${KB:-target/release/kernel-builder}
[[ -x $kb ]] || { echo "error: $kb not found; run \`cargo build --release\` first" >&2; exit 1; }
kb=$(realpath "$kb")
server=$(realpath tests/hub_server/server.py)

scratch=$(mktemp -d "${TMPDIR:-/tmp}/kb-upload-bench.XXXXXX")
server_pid=
cleanup() { [[ -n $server_pid ]] && kill "$server_pid" 2>/dev/null; rm -rf "$scratch"; }
trap cleanup EXIT

kernel=$scratch/kernel
if [[ -n $src ]]; then
    [[ -f $src/build.toml ]] || { echo "error: $src/build.toml not found" >&2; exit 1; }
    cp -r "$src" "$kernel"
    rm -rf "$kernel/build"
    label=$src
else
    python3 - "$kernel" <<'EOF'
import os, random, sys
root = sys.argv[1]
pkg = os.path.join(root, "torch-ext", "bench_upload")
os.makedirs(pkg)
with open(os.path.join(root, "build.toml"), "w") as f:
    f.write('[general]\nname = "bench-upload"\nversion = 1\nedition = 5\nlicense = "Apache-2.0"\n'
            'backends = ["cpu", "cuda", "rocm", "xpu"]\n\n[general.hub]\n'
            'repo-id = "bench/bench-upload"\n\n[torch-noarch]\npyext = ["py", "bin"]\n')
rng = random.Random(42)
with open(os.path.join(pkg, "__init__.py"), "w") as f:
    f.write("".join("from .mod_%02d import f_%02d\n" % (i, i) for i in range(40)))
for i in range(40):
    with open(os.path.join(pkg, "mod_%02d.py" % i), "w") as f:
        f.write("def f_%02d(x):\n" % i)
        for j in range(100):
            f.write("    x = x * %d + %d  # step %d\n" % (rng.randrange(1, 9), rng.randrange(100), j))
        f.write("    return x\n")
with open(os.path.join(pkg, "weights.bin"), "wb") as f:
    f.write(rng.randbytes(16 * 1024 * 1024))
EOF
    label="generated (4 noarch variants, 41 .py + 16 MiB .bin each)"
fi
"$kb" build-and-copy "$kernel" --nix never >/dev/null

# Start a fresh server; sets server_pid and endpoint.
start_server() {
    local portfile=$scratch/port
    rm -f "$portfile"
    python3 "$server" --token bench-token >"$portfile" &
    server_pid=$!
    for _ in $(seq 1 200); do
        grep -q '^PORT ' "$portfile" 2>/dev/null && break
        sleep 0.05
    done
    endpoint="http://127.0.0.1:$(awk '/^PORT /{print $2}' "$portfile")"
}
# "ms bytes_sent" of one upload.
upload() {
    local endpoint=$1 out=$scratch/outcome.json t0 t1
    t0=$(date +%s%N)
    HF_ENDPOINT=$endpoint HF_TOKEN=bench-token HF_HOME=$scratch/hf \
        "$kb" upload "$kernel" --output-json "$out" >/dev/null 2>"$scratch/err" \
        || { cat "$scratch/err" >&2; exit 1; }
    t1=$(date +%s%N)
    echo "$(((t1 - t0) / 1000000)) $(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["bytes_sent"])' "$out")"
}
# "min M ms, median N ms" of the numbers on stdin.
stats() { sort -n | awk '{a[NR]=$1} END {printf "min %d ms, median %d ms", a[1], a[int((NR+1)/2)]}'; }

first=() again=() first_bytes= again_bytes=
for _ in $(seq 1 "$rounds"); do
    start_server
    read -r ms bytes < <(upload "$endpoint")
    first+=("$ms"); first_bytes=$bytes
    read -r ms bytes < <(upload "$endpoint")
    again+=("$ms"); again_bytes=$bytes
    kill "$server_pid"; wait "$server_pid" 2>/dev/null || true; server_pid=
done
variants=$(find "$kernel/build" -mindepth 1 -maxdepth 1 -type d | wc -l)
files=$(find "$kernel/build" -mindepth 2 -type f | wc -l)
bytes=$(find "$kernel/build" -mindepth 2 -type f -printf '%s\n' | awk '{s+=$1} END {print s}')
echo "kernel: $label"
echo "bundle: $variants variants, $files files, $bytes bytes"
echo "first upload:     $(printf '%s\n' "${first[@]}" | stats), $first_bytes bytes sent  (runs: ${first[*]})"
echo "no-change upload: $(printf '%s\n' "${again[@]}" | stats), $again_bytes bytes sent  (runs: ${again[*]})"
