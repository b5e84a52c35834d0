{
  description = "kernel-builder: reproducible builds of PyTorch compute kernels for every cell of the compatibility matrix";

  inputs = {
    # For real users: the orchestrator's Rust build and the dev shells. Offline tests never
    # force it (flake inputs are fetched lazily); they override `orchestrator` instead.
    nixpkgs.url = "github:nixos/nixpkgs/d38025438a6ee456758dc03188ca6873a415463b";
    # A directory that holds bin/kernel-builder (and a flake.nix without outputs, as
    # scripts/setup-nix.sh writes) replaces the nixpkgs build of the orchestrator for every
    # cell; offline, that is the way to build (a statically linked orchestrator runs in the
    # sandbox):
    #   --override-input kernel-builder/orchestrator path:/abs/dir    (in a kernel flake)
    #   --override-input orchestrator path:/abs/dir                   (here)
    # By default it follows nixpkgs, which has no bin/kernel-builder, so the orchestrator is
    # built from this source. (A relative `path:` input here cannot be fetched when this flake
    # is itself an input of a kernel flake, so the default must not be one.)
    orchestrator.follows = "nixpkgs";
    # The package set of compiled cells. By default it follows nixpkgs and every compiled cell
    # takes its toolchain from nixpkgs (lib.nixpkgsToolchain: a manylinux_2_28 compiler, CMake,
    # Ninja, Python, ROCm/oneAPI packages); torch and CUDA of CPU and CUDA cells come from the
    # pins in nix/torch-wheels.json whatever the set (nix/API.md, "Pins"). A flake
    # whose `lib.toolchainFor` maps a cell to a toolchain record replaces it for every cell:
    #   --override-input kernel-builder/toolchain path:/abs/dir
    # (the offline tests use tests/fixtures/host-toolchain this way; it is not hermetic).
    # It names the same nixpkgs revision instead of `follows = "nixpkgs"`: with a second
    # `follows` input, Nix 2.8 drops a kernel flake's locked `--override-input
    # kernel-builder/orchestrator` on every build (seen). Same revision, same store path:
    # fetched once, and only when a compiled cell takes the default package set.
    toolchain.url = "github:nixos/nixpkgs/d38025438a6ee456758dc03188ca6873a415463b";
  };

  outputs =
    {
      self,
      nixpkgs,
      orchestrator,
      toolchain,
    }:
    let
      matrix = builtins.fromJSON (builtins.readFile ./nix/build-matrix.json);
      systems = matrix.systems;
      eachSystem = f: builtins.listToAttrs (map (system: { name = system; value = f system; }) systems);
      prebuilt = builtins.pathExists "${orchestrator}/bin/kernel-builder";
      kernelBuilderFor = system: if prebuilt then orchestrator else self.packages.${system}.kernel-builder;
      pkgsFor = system: nixpkgs.legacyPackages.${system};
      cargoToml = builtins.fromTOML (builtins.readFile ./Cargo.toml);
      toolchainFor =
        if toolchain ? lib && toolchain.lib ? toolchainFor then
          toolchain.lib.toolchainFor
        else
          cell: lib.nixpkgsToolchain { pkgs = pkgsFor cell.system; } cell;
      lib = import ./nix/lib {
        inherit matrix;
        defaultKernelBuilder = kernelBuilderFor;
        defaultMkShell = system: (pkgsFor system).mkShell;
        defaultToolchainFor = toolchainFor;
      };
      # Only what the Rust build reads enters the store.
      rustSource = builtins.path {
        name = "kernel-builder-source";
        path = ./.;
        filter =
          p: type:
          let
            rel = builtins.substring (builtins.stringLength (toString ./.) + 1) (-1) p;
            top = builtins.head (builtins.split "/" rel);
          in
          builtins.elem top [
            "Cargo.toml"
            "Cargo.lock"
            "src"
            "tests"
            "nix"
          ];
      };
    in
    {
      lib = lib // {
        # Upstream's old name, kept so an old kernel flake fails with the fix in the message.
        genFlakeOutputs = _: throw "kernel-builder: `lib.genFlakeOutputs` was renamed; write `kernel-builder.lib.genKernelFlakeOutputs { inherit self; path = ./.; }`";
      };

      packages = eachSystem (system: {
        kernel-builder = (pkgsFor system).rustPlatform.buildRustPackage {
          pname = "kernel-builder";
          version = cargoToml.package.version;
          src = rustSource;
          cargoLock.lockFile = ./Cargo.lock;
          # `kernel-builder init` writes this flake (its source in the store) into new kernels'
          # flake.nix, so the kernel builds with the kernel-builder that made it, offline too.
          KERNEL_BUILDER_DEFAULT_FLAKE_REF = "path:${self.outPath}";
          # The integration tests drive nix, python and the network; the unit tests run.
          cargoTestFlags = [ "--lib" ];
          meta.mainProgram = "kernel-builder";
        };
        default = self.packages.${system}.kernel-builder;
      });

      checks = eachSystem (system: import ./nix/checks { inherit lib system; });

      formatter = eachSystem (system: (pkgsFor system).nixfmt-rfc-style);
    };
}
