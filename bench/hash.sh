#!/usr/bin/env bash
# Benchmark: `kernel-builder hash DIR` against `nix hash path DIR` on a tree of at least 1 GiB
# (a few .so-sized random files and a few thousand small ones), with runs interleaved on one
# machine, and both against the machine's single-stream SHA-256 speed (`openssl speed`).
#
# Usage: bench/hash.sh [ROUNDS]            (default 5 rounds; each round runs both tools once)
# Env:   BENCH_DIR   where to create the tree (default: a fresh directory under $TMPDIR or /tmp)
#        KB          the kernel-builder binary (default: target/release/kernel-builder)
#        BIG_FILES   number of large files (default 4), BIG_MIB their size (default 256)
#        SMALL_FILES number of small files (default 3000)
#        KB_REF      a second kernel-builder binary (an older build) timed in every round too, so
#                    a before/after comparison is paired like the others
#
# Needs: a release build (`cargo build --release`), `nix` with nix-command enabled, openssl.
# Not part of `cargo test`. Don't run it while other hashing tests run: both tools are
# single-stream and CPU-bound, so contention shows up directly in the figures.
set -euo pipefail
cd "$(dirname "$0")/.."

rounds=${1:-5}
kb=${KB:-target/release/kernel-builder}
kb_ref=${KB_REF:-}
big_files=${BIG_FILES:-4}
big_mib=${BIG_MIB:-256}
small_files=${SMALL_FILES:-3000}

[[ -x $kb ]] || { echo "error: $kb not found; run \`cargo build --release\` first" >&2; exit 1; }
command -v nix >/dev/null || { echo "error: nix not on PATH" >&2; exit 1; }

own_dir=
if [[ -z ${BENCH_DIR:-} ]]; then
    own_dir=$(mktemp -d "${TMPDIR:-/tmp}/kb-hash-bench.XXXXXX")
    BENCH_DIR=$own_dir
    trap 'rm -rf "$own_dir"' EXIT
fi
tree=$BENCH_DIR/tree

if [[ ! -d $tree ]]; then
    echo "creating the tree in $tree ..." >&2
    mkdir -p "$tree/lib"
    for i in $(seq 1 "$big_files"); do
        # Random bytes (fast: AES-CTR keystream), so no compression or dedup can help anyone.
        # openssl dies of SIGPIPE when head has enough; that is expected.
        { openssl enc -aes-128-ctr -nosalt -pass "pass:kb-bench-$i" -in /dev/zero 2>/dev/null \
            || true; } | head -c $((big_mib * 1024 * 1024)) > "$tree/lib/_kernel_$i.abi3.so"
        chmod 755 "$tree/lib/_kernel_$i.abi3.so"
    done
    # Small files: 1 to 64 KiB, in 50 directories, from one random stream.
    python3 - "$tree" "$small_files" <<'EOF'
import os, random, sys
root, n = sys.argv[1], int(sys.argv[2])
rng = random.Random(1)
for i in range(n):
    d = os.path.join(root, "pkg", f"mod{i % 50:02d}")
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, f"file{i:05d}.py"), "wb") as f:
        f.write(rng.randbytes(rng.randint(1024, 64 * 1024)))
EOF
fi

bytes=$(find "$tree" -type f -printf '%s\n' | awk '{s += $1} END {print s}')
files=$(find "$tree" -type f | wc -l)
echo "tree: $files files, $bytes bytes ($(awk -v b="$bytes" 'BEGIN {printf "%.2f GiB", b / 2^30}'))"

# Run "$@" once with stdout discarded; print "elapsed user sys" in seconds.
timed() {
    local f
    f=$(mktemp)
    /usr/bin/time -f '%e %U %S' -o "$f" "$@" >/dev/null
    awk '{printf "%.3f %.3f %.3f\n", $1, $2, $3}' "$f"
    rm -f "$f"
}
# openssl's single-stream SHA-256 speed for 16 KiB blocks over `$1` seconds, in GB/s. With
# `-elapsed` it divides by wall-clock time (comparable with our wall times under the same load);
# without it, by CPU user time (what the CPU can do when it is not shared).
openssl_gbps() {
    openssl speed "${@:2}" -seconds "$1" -bytes 16384 -evp sha256 2>/dev/null \
        | awk 'tolower($1) == "sha256" {v = $NF; sub(/k$/, "", v); printf "%.3f\n", v * 1000 / 1e9}'
}

# Warm the page cache (both tools then read from memory) and check that the hashes agree.
ours=$("$kb" hash "$tree")
theirs=$(nix --extra-experimental-features nix-command hash path "$tree")
echo "kernel-builder: $ours"
echo "nix:            $theirs"
[[ $ours == "$theirs" ]] || { echo "error: the hashes differ" >&2; exit 1; }
if [[ -n $kb_ref ]]; then
    [[ $("$kb_ref" hash "$tree") == "$theirs" ]] || { echo "error: $kb_ref gives another hash" >&2; exit 1; }
fi

# Each round: ours, nix, then a 1-second wall-clock openssl run, so all three see about the same
# machine load (on a shared machine it moves; the ratios are taken within a round).
rows=()
for r in $(seq 1 "$rounds"); do
    read -r ow ou os < <(timed "$kb" hash "$tree")
    read -r nw nu ns < <(timed nix --extra-experimental-features nix-command hash path "$tree")
    oc=$(awk -v u="$ou" -v s="$os" 'BEGIN {printf "%.3f", u + s}')
    nc=$(awk -v u="$nu" -v s="$ns" 'BEGIN {printf "%.3f", u + s}')
    rw=0
    if [[ -n $kb_ref ]]; then
        read -r rw ru rs < <(timed "$kb_ref" hash "$tree")
    fi
    lw=$(openssl_gbps 1 -elapsed)
    rows+=("$ow $oc $nw $nc $lw $ou $nu $rw")
    printf 'round %2d: kernel-builder %s s (user %s, sys %s), nix %s s (user %s, sys %s), openssl -elapsed %s GB/s' \
        "$r" "$ow" "$ou" "$os" "$nw" "$nu" "$ns" "$lw"
    [[ -n $kb_ref ]] && printf ', KB_REF %s s (user %s, sys %s)' "$rw" "$ru" "$rs"
    printf '\n'
done
lc=$(openssl_gbps 3)

printf '%s\n' "${rows[@]}" | awk -v b="$bytes" -v lc="$lc" '
function median(a, n,   i, j, t) {
    for (i = 2; i <= n; i++) for (j = i; j > 1 && a[j - 1] > a[j]; j--) { t = a[j]; a[j] = a[j - 1]; a[j - 1] = t }
    return (n % 2) ? a[(n + 1) / 2] : (a[n / 2] + a[n / 2 + 1]) / 2
}
{
    n++
    ow[n] = $1; oc[n] = $2; nw[n] = $3; nc[n] = $4; lw[n] = $5; ou[n] = $6; nu[n] = $7; rw[n] = $8
    if ($8 > 0) { refratio[n] = $8 / $1; rfrac[n] = (b / $8 / 1e9) / $5; have_ref = 1 }
    ratio[n] = $3 / $1                      # nix time / our time, this round
    frac[n] = (b / $1 / 1e9) / $5           # our wall speed / openssl wall speed, this round
    best_frac = (frac[n] > best_frac) ? frac[n] : best_frac
}
END {
    r = median(ratio, n); f = median(frac, n)
    mow = median(ow, n); moc = median(oc, n); mnw = median(nw, n); mnc = median(nc, n); mlw = median(lw, n); mou = median(ou, n); mnu = median(nu, n)
    printf "\nmedians over %d rounds (%.3f GB):\n", n, b / 1e9
    printf "  kernel-builder hash: wall %.3f s = %.2f GB/s, cpu (user+sys) %.3f s = %.2f GB/s per cpu-second\n", mow, b / mow / 1e9, moc, b / moc / 1e9
    printf "  nix hash path:       wall %.3f s = %.2f GB/s, cpu (user+sys) %.3f s = %.2f GB/s per cpu-second\n", mnw, b / mnw / 1e9, mnc, b / mnc / 1e9
    printf "  openssl sha256 16 KiB: %.2f GB/s wall-clock (same rounds), %.2f GB/s per cpu-second\n", mlw, lc
    printf "nix time / kernel-builder time (median of per-round ratios): %.2f\n", r
    printf "kernel-builder wall speed / openssl wall speed in the same round: median %.0f%%, best %.0f%%\n", 100 * f, 100 * best_frac
    if (have_ref) {
        printf "KB_REF: wall %.3f s; KB_REF time / kernel-builder time (median of per-round ratios): %.2f; KB_REF wall speed / openssl: median %.0f%%\n", median(rw, n), median(refratio, n), 100 * median(rfrac, n)
    }
    printf "kernel-builder speed per cpu-second / openssl per cpu-second: %.0f%%\n", 100 * (b / moc / 1e9) / lc
    # User time is the hashing (the page-cache copy is system time, on the reader thread for
    # large files): with a free second core, the wall time of kernel-builder approaches it.
    printf "user time only: kernel-builder %.3f s = %.2f GB/s (%.0f%% of openssl per cpu-second), nix %.3f s = %.2f GB/s\n", mou, b / mou / 1e9, 100 * (b / mou / 1e9) / lc, mnu, b / mnu / 1e9
}'
