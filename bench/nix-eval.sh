#!/usr/bin/env bash
# Evaluation time of every cell's derivation, all systems (the `drvPath` of every
# packages.<system>.<variant>, bundle and build-and-copy included), for:
#   1. kernels/vector-add-helion through its flake (noarch: 3 cells on x86_64-linux);
#   2. kernels/relu (compiled, 5 backends) through the library directly, with the default
#      package set over the stub nixpkgs (compiled cells evaluate; they do not build here);
#   3. with BIG_KERNEL=<dir>, that kernel the same way (the corpus's largest, materialized).
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

# Compiled cells take their toolchain from the default package set (nixpkgsToolchain) over
# the stub nixpkgs: this measures evaluation of the real derivations (wheels, CUDA roots, …).
stub="path:$PWD/tests/fixtures/nixpkgs-stub"
compiled_expr() {
    echo "let lib = import $PWD/nix/lib { }; stub = builtins.getFlake \"$stub\";
  out = lib.genKernelFlakeOutputs { path = $1; kernelBuilder = _: $ORCH; mkShell = _: _: { };
    toolchainFor = cell: lib.nixpkgsToolchain { pkgs = stub.legacyPackages.\${cell.system}; } cell; };
in ($all_drvs) out.packages"
}
expr=$(compiled_expr "$PWD/kernels/relu")
count=$(nix eval --json --impure --expr "$expr" | python3 -c 'import json,sys; print(sum(len(v) for v in json.load(sys.stdin).values()))')
echo "kernels/relu (compiled, 5 backends) through nix/lib, $count packages (drvPath each) over all systems:"
echo "  $(time_runs "$runs" nix eval --json --impure --expr "$expr")"

# The corpus kernel with the most compiled cells (materialized: build.toml plus empty sources).
big=${BIG_KERNEL:-}
if [ -n "$big" ]; then
    expr=$(compiled_expr "$big")
    count=$(nix eval --json --impure --expr "$expr" | python3 -c 'import json,sys; print(sum(len(v) for v in json.load(sys.stdin).values()))')
    echo "$big through nix/lib, $count packages (drvPath each) over all systems:"
    echo "  $(time_runs "$runs" nix eval --json --impure --expr "$expr")"
fi
