# Pure evaluation tests of the Nix library, one small derivation per test (mkAssertion), so a
# failing `nix flake check` names the test. Run: nix flake check (offline, with the stub
# nixpkgs override; see tests/it/nix.rs) or nix build .#checks.x86_64-linux.<name>.
{ lib, system }:
let
  names = cells: map (c: c.name) cells;
  cellsOf = cellsIn null;
  cellsIn =
    matrix: fixture: sys:
    lib.kernelCells {
      config = lib.readKernelConfig fixture;
      buildSets = lib.buildSetsForSystem {
        system = sys;
        inherit matrix;
      };
    };
  noarchFacts = map (c: {
    inherit (c)
      name
      torch_version
      backend_version
      bundle
      kind
      arch_variant
      cuda_capabilities
      ;
  });
  tests = {
    flatten-versions = {
      expr = map lib.flattenVersion [
        "2.12"
        "13.0"
        "2025.3.2"
        "12"
      ];
      expected = [
        "212"
        "130"
        "20253"
        "120"
      ];
    };
    compare-versions-numeric = {
      expr = [
        (lib.compareVersions "13.0" "13")
        (lib.compareVersions "2.9" "2.12")
        (lib.compareVersions "2026.0.0" "2025.3.2")
      ];
      expected = [
        0
        (-1)
        1
      ];
    };
    noarch-x86-cells = {
      # The first bundle set of each backend: torch 2.14 for cpu/cuda, 2.13 for ROCm 7.1.
      expr = noarchFacts (cellsOf ./fixtures/noarch "x86_64-linux");
      expected = [
        {
          name = "torch-cpu";
          torch_version = "2.14";
          backend_version = null;
          bundle = true;
          kind = "noarch";
          arch_variant = "torch214-cxx11-cpu-x86_64-linux";
          cuda_capabilities = null;
        }
        {
          name = "torch-cuda";
          torch_version = "2.14";
          backend_version = "12.6";
          bundle = true;
          kind = "noarch";
          arch_variant = "torch214-cxx11-cu126-x86_64-linux";
          cuda_capabilities = [
            "9.0"
            "8.0"
          ];
        }
        {
          name = "torch-rocm";
          torch_version = "2.13";
          backend_version = "7.1";
          bundle = true;
          kind = "noarch";
          arch_variant = "torch213-cxx11-rocm71-x86_64-linux";
          cuda_capabilities = null;
        }
        {
          name = "torch-tpu";
          torch_version = "2.11";
          backend_version = null;
          bundle = false;
          kind = "noarch";
          arch_variant = "torch211-cxx11-tpu-x86_64-linux";
          cuda_capabilities = null;
        }
      ];
    };
    pinned-snapshot-cells = {
      # `matrix = "upstream-2026-08"` gives the August cells, and every cell names its matrix.
      expr = {
        cells = map (c: c.arch_variant) (cellsIn "upstream-2026-08" ./fixtures/noarch "x86_64-linux");
        matrices = map (c: "${c.matrix} ${c.matrix_revision}") (
          cellsIn "upstream-2026-08" ./fixtures/noarch "x86_64-linux" ++ cellsOf ./fixtures/noarch "aarch64-darwin"
        );
      };
      expected = {
        cells = [
          "torch212-cxx11-cpu-x86_64-linux"
          "torch212-cxx11-cu126-x86_64-linux"
          "torch212-cxx11-rocm71-x86_64-linux"
          "torch211-cxx11-tpu-x86_64-linux"
        ];
        matrices = [
          "upstream-2026-08 2026-08-20"
          "upstream-2026-08 2026-08-20"
          "upstream-2026-08 2026-08-20"
          "upstream-2026-08 2026-08-20"
          "2026-12 2026-12-01"
        ];
      };
    };
    unknown-matrix-is-an-error = {
      expr = (builtins.tryEval (cellsIn "upstream-2099-01" ./fixtures/noarch "x86_64-linux")).success;
      expected = false;
    };
    matrices-by-name = {
      expr = {
        names = builtins.attrNames lib.matrices;
        default = lib.defaultMatrix;
        revisions = builtins.mapAttrs (_: m: m.revision) lib.matrices;
      };
      expected = {
        names = [
          "2026-12"
          "upstream-2026-08"
        ];
        default = "2026-12";
        revisions = {
          "2026-12" = "2026-12-01";
          "upstream-2026-08" = "2026-08-20";
        };
      };
    };
    noarch-darwin-cells = {
      expr = names (cellsOf ./fixtures/noarch "aarch64-darwin");
      expected = [ "torch-cpu" ];
    };
    stable-abi-dedup-and-noarch-backends = {
      expr = names (cellsOf ./fixtures/relu "x86_64-linux") ++ names (cellsOf ./fixtures/relu "aarch64-darwin");
      expected = [
        "torch-rocm"
        "torch-stable-abi211-cpu-x86_64-linux"
        "torch-stable-abi211-cu126-x86_64-linux"
        "torch-stable-abi211-cu130-x86_64-linux"
        "torch-stable-abi211-cu132-x86_64-linux"
        "torch-xpu"
        "torch-metal"
        "torch-stable-abi211-cpu-aarch64-darwin"
      ];
    };
    stable-abi-uses-newest-torch = {
      # Names sorted: torch-rocm (ROCm 7.1, newest with 2.13, the first bundle group), cpu
      # (2.15), cu126 and cu130 (2.14), cu132 (2.15), torch-xpu (xpu 2026.0.0 with 2.13, in the
      # bundle; the 2025.3.2 group exists only with torch 2.12, outside it).
      expr = map (c: c.torch_version) (cellsOf ./fixtures/relu "x86_64-linux");
      expected = [
        "2.13"
        "2.15"
        "2.14"
        "2.14"
        "2.15"
        "2.13"
      ];
    };
    cuda-and-torch-bounds-inclusive = {
      # maxver "13" keeps cu130 (numeric comparison); minver "12.8" drops cu126.
      expr = names (cellsOf ./fixtures/bounds "x86_64-linux");
      expected = [ "torch213-cxx11-cu130-x86_64-linux" ];
    };
    legacy-file-is-refused = {
      expr = (builtins.tryEval (lib.readKernelConfig ./fixtures/legacy).name).success;
      expected = false;
    };
    emptied-system-has-empty-outputs = {
      expr =
        let
          out = lib.genKernelFlakeOutputs {
            path = ./fixtures/noarch;
            torchVersions = defaults: builtins.filter (e: e ? cudaVersion) defaults;
            kernelBuilder = _: "/unused";
            mkShell = _: _: { };
          };
        in
        {
          packages = out.packages.aarch64-darwin;
          checks = out.checks.aarch64-darwin;
          devShells = out.devShells.aarch64-darwin;
          variants = out.variants.aarch64-darwin;
          linux = builtins.attrNames out.packages.x86_64-linux;
        };
      expected = {
        packages = { };
        checks = { };
        devShells = { };
        variants = [ ];
        linux = [
          "build-and-copy"
          "bundle"
          "default"
          "torch-cuda"
        ];
      };
    };
    upstream-shaped-torch-versions = {
      # The example of upstream's docs: one entry replaces the matrix.
      expr =
        map
          (system: {
            inherit system;
            cells = map (c: { inherit (c) name torch_version backend_version bundle; }) (
              lib.kernelCells {
                config = lib.readKernelConfig ./fixtures/noarch;
                buildSets = lib.buildSetsForSystem {
                  inherit system;
                  torchVersions = _: [
                    {
                      torchVersion = "2.12";
                      cudaVersion = "12.6";
                      systems = [ "x86_64-linux" ];
                      bundleBuild = true;
                    }
                  ];
                };
              }
            );
          })
          [
            "x86_64-linux"
            "aarch64-darwin"
          ];
      expected = [
        {
          system = "x86_64-linux";
          cells = [
            {
              name = "torch-cuda";
              torch_version = "2.12";
              backend_version = "12.6";
              bundle = true;
            }
          ];
        }
        {
          system = "aarch64-darwin";
          cells = [ ];
        }
      ];
    };
    default-matrix-round-trips-through-the-upstream-shape = {
      expr = lib.buildSetsForSystem { system = "x86_64-linux"; };
      expected =
        map
          (
            s:
            (builtins.removeAttrs s [ "systems" ])
            // {
              system = "x86_64-linux";
              matrix = "2026-12";
              matrix_revision = "2026-12-01";
            }
          )
          (
            builtins.filter (s: builtins.elem "x86_64-linux" s.systems) (builtins.fromJSON (builtins.readFile ../build-matrix.json)).build_sets
          );
    };
    kernel-commit-from-self = {
      # rev → --kernel-commit; dirtyRev (newer Nix) → the commit and --kernel-dirty.
      expr =
        map
          (
            self:
            (lib.genKernelFlakeOutputs {
              inherit self;
              path = ./fixtures/noarch;
              kernelBuilder = _: "/kb";
            }).packages.x86_64-linux.torch-cuda.drvAttrs.args
          )
          [
            { rev = "0123456789abcdef0123456789abcdef01234567"; }
            { dirtyRev = "0123456789abcdef0123456789abcdef01234567-dirty"; }
            { }
          ];
      expected =
        let
          base = [
            "assemble"
            "--source"
            "${
              lib.kernelSource {
                path = ./fixtures/noarch;
                config = lib.readKernelConfig ./fixtures/noarch;
              }
            }"
            "--backend"
            "cuda"
            "--out"
            (builtins.placeholder "out")
          ];
        in
        [
          (base ++ [
            "--kernel-commit"
            "0123456789abcdef0123456789abcdef01234567"
          ])
          (base ++ [
            "--kernel-commit"
            "0123456789abcdef0123456789abcdef01234567"
            "--kernel-dirty"
          ])
          base
        ];
    };
    misspelt-system-is-an-error = {
      expr =
        (builtins.tryEval
          (lib.genKernelFlakeOutputs {
            path = ./fixtures/noarch;
            systems = [ "x86_64-linx" ];
            kernelBuilder = _: "/unused";
          }).packages
        ).success;
      expected = false;
    };
    system-attrset-lists-the-matrix-systems = {
      expr = builtins.attrValues lib.system;
      expected = [
        "aarch64-darwin"
        "aarch64-linux"
        "x86_64-linux"
      ];
    };
    noarch-default-shell-is-first-backend-arch-variant = {
      expr =
        let
          out = lib.genKernelFlakeOutputs {
            path = ./fixtures/noarch;
            kernelBuilder = _: "/unused";
            mkShell = _: args: args.name;
          };
        in
        {
          default = out.devShells.x86_64-linux.default;
          shells = builtins.attrNames out.devShells.x86_64-linux;
        };
      expected = {
        # backends = ["cuda", ...]: the arch variant behind the torch-cuda cell.
        default = "noarch-demo-torch214-cxx11-cu126-x86_64-linux";
        shells = [
          "default"
          "torch211-cxx11-tpu-x86_64-linux"
          "torch213-cxx11-rocm71-x86_64-linux"
          "torch214-cxx11-cpu-x86_64-linux"
          "torch214-cxx11-cu126-x86_64-linux"
        ];
      };
    };
    source-filter-keeps-declared-files-only = {
      expr =
        let
          src = lib.kernelSource {
            path = ./fixtures/noarch;
            config = lib.readKernelConfig ./fixtures/noarch;
          };
          tree =
            dir:
            builtins.concatMap (
              n:
              let
                t = (builtins.readDir dir).${n};
              in
              if t == "directory" then map (x: "${n}/${x}") (tree "${dir}/${n}") else [ n ]
            ) (builtins.attrNames (builtins.readDir dir));
        in
        tree src;
      expected = [
        "build.toml"
        "torch-ext/noarch_demo/__init__.py"
        "torch-ext/noarch_demo/sub/config.json"
      ];
    };
  };
in
builtins.mapAttrs (
  name: t:
  lib.mkAssertion {
    inherit name system;
    inherit (t) expr expected;
  }
) tests
