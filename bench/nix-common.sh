# Shared by bench/nix-*.sh: the orchestrator directory and a timing helper.
# shellcheck shell=bash
ORCH="${KERNEL_BUILDER_ORCHESTRATOR:-$PWD/target/nix-orchestrator}"
if [ ! -x "$ORCH/bin/kernel-builder" ]; then
    echo "no static orchestrator in $ORCH: run scripts/setup-nix.sh" >&2
    exit 1
fi
OVERRIDE=(--no-write-lock-file --override-input kernel-builder/orchestrator "path:$ORCH")

# time_runs N CMD…: run CMD N times, print min and median wall time in milliseconds.
time_runs() {
    local n=$1
    shift
    local times=()
    for _ in $(seq "$n"); do
        local start end
        start=$(date +%s%N)
        "$@" >/dev/null 2>&1 || { echo "failed: $*" >&2; "$@" >&2; exit 1; }
        end=$(date +%s%N)
        times+=($(((end - start) / 1000000)))
    done
    local sorted
    sorted=$(printf '%s\n' "${times[@]}" | sort -n)
    echo "min $(echo "$sorted" | head -1) ms, median $(echo "$sorted" | sed -n "$(((n + 1) / 2))p") ms ($n runs)"
}
