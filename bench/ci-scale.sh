#!/usr/bin/env bash
# Scale of the fan-out: `list-variants`, `ci-matrix` and Nix evaluation of the cell attribute
# names against the number of cells, for a generated kernel with every backend that has
# bundle cells (`init --template compiled --backends all`: cpu, cuda, metal, rocm, xpu) and
# matrices grown to 1x, 2x, 5x and 10x today's bundle cells.
#
# The grown matrices are nix/build-matrix.json with each bundle build set copied K-1 more
# times under new torch versions (copy i of torch 2.14 is torch (2+i).14, so every copy names
# new cells); the Rust side reads them with --matrix-file, Nix through nix/lib's `matrix`
# argument. Nix evaluates `builtins.attrNames` of every system's packages (every cell, the
# bundle, build-and-copy), with the stub package set as toolchain (never forced).
#
# Usage: [KS="1 2 5 10"] bench/ci-scale.sh [RUNS] [KERNEL_BUILDER]   (default 5 runs, target/debug/kernel-builder;
#        run scripts/setup-nix.sh first for the orchestrator)
set -euo pipefail
cd "$(dirname "$0")/.."
. bench/nix-common.sh
ORCH="$(realpath "$ORCH")"
runs="${1:-5}"
# The growth factors; KS="1 2 5 10 20 50" adds points beyond the 10x of the issue.
KS="${KS:-1 2 5 10}"
kb="$(realpath "${2:-target/debug/kernel-builder}")"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

"$kb" init --template compiled --name bench/every-backend --backends all -- "$work/kernel" >/dev/null
kernel="$work/kernel"
stub="path:$PWD/tests/fixtures/nixpkgs-stub"

for k in $KS; do
    python3 - "$k" "$work/matrix-$k.json" <<'EOF'
import json, sys
k, out = int(sys.argv[1]), sys.argv[2]
m = json.load(open("nix/build-matrix.json"))
bundle = [s for s in m["build_sets"] if s["bundle"]]
for i in range(1, k):
    for s in bundle:
        c = dict(s)
        c["torch"] = f"{2 + i}.{s['torch'].split('.')[1]}"
        m["build_sets"].append(c)
m["name"] = f"bench-{k}x"
json.dump(m, open(out, "w"), indent=1)
EOF
done

export KS KB="$kb" KERNEL="$kernel" WORK="$work" ORCH STUB="$stub" RUNS="$runs" REPO="$PWD"
python3 - <<'PY'
# Times each command as a whole process, RUNS times after one warm-up: the median wall time
# (perf_counter around subprocess.run) and the least CPU time (user + sys, from rusage; steadier
# on a shared machine), and the per-cell cost as the slope of a least-squares line through the
# CPU minima (cpu = fixed + slope x cells).
import json, os, resource, statistics, subprocess, time

kb, kernel, work, orch, stub, repo = (os.environ[k] for k in ("KB", "KERNEL", "WORK", "ORCH", "STUB", "REPO"))
runs = int(os.environ["RUNS"])

def timed(cmd):
    """(median wall ms, min CPU ms): CPU is user + sys of the finished process (rusage)."""
    subprocess.run(cmd, check=True, capture_output=True)
    wall, cpu = [], []
    for _ in range(runs):
        r0 = resource.getrusage(resource.RUSAGE_CHILDREN)
        s = time.perf_counter()
        subprocess.run(cmd, check=True, capture_output=True)
        wall.append((time.perf_counter() - s) * 1000)
        r1 = resource.getrusage(resource.RUSAGE_CHILDREN)
        cpu.append((r1.ru_utime - r0.ru_utime + r1.ru_stime - r0.ru_stime) * 1000)
    return statistics.median(wall), min(cpu)

def nix_expr(m, apply):
    return (f"let lib = import {repo}/nix/lib {{ matrix = builtins.fromJSON (builtins.readFile {m}); }};"
            f" stub = builtins.getFlake \"{stub}\";"
            f" out = lib.genKernelFlakeOutputs {{ path = {kernel}; kernelBuilder = _: {orch}; mkShell = _: _: {{ }};"
            f" toolchainFor = cell: lib.nixpkgsToolchain {{ pkgs = stub.legacyPackages.${{cell.system}}; }} cell; }};"
            f" in builtins.mapAttrs (s: p: {apply}) out.packages")

def out(cmd):
    return subprocess.run(cmd, check=True, capture_output=True, text=True).stdout

print(f"kernel-builder: {kb}")
print("kernel: init --template compiled --backends all (cpu cuda metal rocm xpu)")
rows = []
for k in map(int, os.environ["KS"].split()):
    m = f"{work}/matrix-{k}.json"
    bundle = len(out([kb, "list-variants", "--all-systems", "--matrix-file", m, kernel]).splitlines())
    every = len(out([kb, "list-variants", "--all-systems", "--all", "--matrix-file", m, kernel]).splitlines())
    jobs = len(json.loads(out([kb, "ci-matrix", "--matrix-file", m, kernel]))["jobs"])
    names = nix_expr(m, "builtins.attrNames p")
    drvs = nix_expr(m, "builtins.mapAttrs (n: d: d.drvPath) p")
    listed = json.loads(out(["nix", "eval", "--json", "--impure", "--expr", names]))
    nix_cells = sum(len([n for n in v if n not in ("bundle", "default", "build-and-copy")]) for v in listed.values())
    assert nix_cells == every, f"{k}x: Nix lists {nix_cells} cells, list-variants --all {every}"
    assert jobs == bundle, f"{k}x: {jobs} jobs for {bundle} bundle cells"
    rows.append((k, bundle, every, [
        timed([kb, "list-variants", "--all-systems", "--json", "--matrix-file", m, kernel]),
        timed([kb, "ci-matrix", "--format", "json", "--matrix-file", m, kernel]),
        timed(["nix", "eval", "--json", "--impure", "--expr", names]),
        timed(["nix", "eval", "--json", "--impure", "--expr", drvs]),
    ]))

heads = ["list-variants --json", "ci-matrix --format json", "nix eval: attrNames", "nix eval: every drvPath"]
print("| K | bundle cells (= jobs) | cells in Nix (all) | " + " | ".join(f"{h}: wall median / cpu min, ms" for h in heads) + " |")
print("|---|---|---|" + "---|" * len(heads))
for k, b, e, ts in rows:
    print(f"| {k}x | {b} | {e} | " + " | ".join(f"{w:.1f} / {c:.1f}" for w, c in ts) + " |")

def fit(xs, ys):
    mx, my = statistics.fmean(xs), statistics.fmean(ys)
    b = sum((x - mx) * (y - my) for x, y in zip(xs, ys)) / sum((x - mx) ** 2 for x in xs)
    return my - b * mx, b

print()
print("Least squares over the CPU minima, cpu = fixed + per-cell x cells (bundle cells for the CLI,")
print("all cells for Nix), and the largest relative residual:")
for i, h in enumerate(heads):
    xs = [r[1] if i < 2 else r[2] for r in rows]
    ys = [r[3][i][1] for r in rows]
    a, b = fit(xs, ys)
    worst = max(abs(y - (a + b * x)) / y for x, y in zip(xs, ys))
    print(f"  {h}: fixed {a:.1f} ms, {b * 1000:.1f} us per cell, worst residual {worst:.0%}")
print(f"({runs} runs each after one warm-up)")
PY
