#!/usr/bin/env bash
# Evaluation time of every cell's derivation, all systems (the `drvPath` of every
# packages.<system>.<variant>, bundle and build-and-copy included), for:
#   1. kernels/vector-add-helion through its flake (noarch: 3 cells on x86_64-linux);
#   2. a compiled kernel with 5 backends (the corpus's relu, 27 cells over 3 systems), through
#      the library directly (compiled cells evaluate; they do not build here).
# Usage: bench/nix-eval.sh [RUNS]   (run scripts/setup-nix.sh first)
set -euo pipefail
cd "$(dirname "$0")/.."
. bench/nix-common.sh
runs="${1:-5}"

all_drvs='ps: builtins.mapAttrs (s: p: builtins.mapAttrs (n: d: d.drvPath) p) ps'
count=$(nix eval --json "${OVERRIDE[@]}" ./kernels/vector-add-helion#packages --apply "$all_drvs" 2>/dev/null |
    python3 -c 'import json,sys; print(sum(len(v) for v in json.load(sys.stdin).values()))')
echo "vector-add-helion flake, $count packages (drvPath each) over all systems:"
echo "  $(time_runs "$runs" nix eval --json "${OVERRIDE[@]}" ./kernels/vector-add-helion#packages --apply "$all_drvs")"

relu=$(mktemp -d)
trap 'rm -rf "$relu"' EXIT
cat >"$relu/build.toml" <<'TOML'
[general]
name = "relu"
version = 1
edition = 5
license = "apache-2.0"
backends = ["cpu", "cuda", "metal", "rocm", "xpu"]

[torch]
src = ["torch-ext/torch_binding.cpp"]

[kernel.relu_cuda]
backend = "cuda"
depends = ["torch"]
src = ["relu_cuda/relu.cu"]

[kernel.relu_cpu]
backend = "cpu"
depends = ["torch"]
src = ["relu_cpu/relu.cpp"]

[kernel.relu_metal]
backend = "metal"
depends = ["torch"]
src = ["relu_metal/relu.mm"]

[kernel.relu_rocm]
backend = "rocm"
depends = ["torch"]
src = ["relu_cuda/relu.cu"]

[kernel.relu_xpu]
backend = "xpu"
depends = ["torch"]
src = ["relu_xpu/relu.cpp"]
TOML
for f in torch-ext/torch_binding.cpp relu_cuda/relu.cu relu_cpu/relu.cpp relu_metal/relu.mm relu_xpu/relu.cpp torch-ext/relu/__init__.py; do
    mkdir -p "$relu/$(dirname "$f")"
    : >"$relu/$f"
done
expr="let out = (import $PWD/nix/lib { }).genKernelFlakeOutputs { path = $relu; kernelBuilder = _: $ORCH; mkShell = _: _: { }; };
in ($all_drvs) out.packages"
count=$(nix eval --json --impure --expr "$expr" | python3 -c 'import json,sys; print(sum(len(v) for v in json.load(sys.stdin).values()))')
echo "relu (compiled, 5 backends) through nix/lib, $count packages (drvPath each) over all systems:"
echo "  $(time_runs "$runs" nix eval --json --impure --expr "$expr")"
