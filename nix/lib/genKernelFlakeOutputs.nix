# genKernelFlakeOutputs: every flake output of a kernel, for every system of the matrix.
#
# A kernel's flake.nix:
#
#   {
#     inputs.kernel-builder.url = "github:<owner>/kernel-builder";
#     outputs = { self, kernel-builder }:
#       kernel-builder.lib.genKernelFlakeOutputs { inherit self; path = ./.; };
#   }
#
# Type: genKernelFlakeOutputs :: Args -> FlakeOutputs
#
# Arguments (required):
#   path            the kernel directory (holds build.toml and torch-ext/)
# Arguments (optional):
#   self            (default null) the kernel flake's `self`; its `rev` (a clean git tree) is
#                   recorded as the kernel commit, or its `dirtyRev` (Nix >= 2.16) as the
#                   commit plus `dirty`. Otherwise (Nix 2.8 with a dirty tree, an
#                   --override-input, no git) none is recorded; the op namespace's unique id
#                   comes from the source content either way.
#   torchVersions   (default: identity) function from the matrix (the default, or the one
#                   build.toml pins with `[general] matrix`), in upstream's
#                   versions.nix shape, to the entries this kernel builds (see
#                   buildSetsForSystem). A system it empties gets empty outputs.
#   kernelBuilder   (default: the kernel-builder flake's choice) function from a system to a
#                   store path holding bin/kernel-builder, the orchestrator that builds the
#                   cells. The kernel-builder flake supplies its nixpkgs build, or the
#                   prebuilt one handed to its `orchestrator` input (see flake.nix).
#   mkShell         (default: the kernel-builder flake's nixpkgs mkShell per system) function
#                   from a system to nixpkgs' mkShell; only the dev shells use it.
#   toolchainFor    (default: the kernel-builder flake's choice: nixpkgsToolchain over its
#                   nixpkgs, or its `toolchain` input's `lib.toolchainFor`) function from a
#                   compiled cell (a kernelCells record) to its toolchain record (nix/API.md,
#                   "Toolchains"); noarch cells need none.
#   systems         (default: the matrix's systems) the systems to generate outputs for; a
#                   system the matrix does not know throws (use `lib.system.<name>`).
#   extraChecks     (default: system -> cells -> {}) more checks per system.
#
# Outputs, per system:
#   packages.<variant>      one derivation per cell
#   packages.bundle         the bundle cells joined as `<variant>/…` (also packages.default)
#   packages.build-and-copy `nix run .#build-and-copy` refreshes ./build from the bundle
#   checks.cell-<variant>   layout and metadata of every cell (builds the cell); for a
#                           compiled cell also the ABI check, held to the toolchain's
#                           manylinux policy (and the torch stable ABI for stable-ABI cells)
#   checks.manifest         when the kernel commits build/hashes.json: the bundle's variants
#                           have exactly the NAR hashes it records (mkManifestCheck)
#   devShells.<arch variant>, devShells.default (the best cell of the first backend)
#   variants.<system>       the cells as data: list-variants JSON records (see kernelCells)
# `variants` is a top-level output, not under `packages`: a list there would make
# `nix flake check` fail ("not a derivation").
{ lib, matrix, ... }@deps:
{
  path,
  self ? null,
  torchVersions ? (entries: entries),
  kernelBuilder ? deps.defaultKernelBuilder,
  mkShell ? deps.defaultMkShell,
  toolchainFor ? deps.defaultToolchainFor,
  systems ? matrix.systems,
  extraChecks ? (system: cells: { }),
}:
let
  unknownSystems = builtins.filter (s: !(builtins.elem s matrix.systems)) systems;
  checkedSystems =
    if unknownSystems == [ ] then
      systems
    else
      throw "kernel-builder: unknown system(s) ${builtins.toJSON unknownSystems} in `systems`; the matrix has ${builtins.toJSON matrix.systems}, e.g. systems = [ kernel-builder.lib.system.x86_64-linux ];";
  config = lib.readKernelConfig path;
  src = lib.kernelSource { inherit path config; };
  # A clean tree has `rev`; Nix 2.16 and later give a dirty one `dirtyRev` ("<sha>-dirty").
  kernelCommit =
    if self != null && self ? rev then
      self.rev
    else if self != null && self ? dirtyRev then
      builtins.head (builtins.match "([0-9a-f]+)(-dirty)?" self.dirtyRev)
    else
      null;
  kernelDirty = self != null && !(self ? rev) && self ? dirtyRev;
  # The C++ dependencies (`depends` but `torch`) of the kernels of a backend, each once; the
  # orchestrator decides which kernels a cell compiles, so this may name one more than needed.
  cppDependsFor =
    backend:
    let
      all = builtins.concatMap (k: if k.backend == backend then k.depends else [ ]) config.kernels;
    in
    builtins.filter (d: d != "torch") (builtins.attrNames (builtins.listToAttrs (map (d: { name = d; value = null; }) all)));
  genSystems = f: builtins.listToAttrs (map (system: { name = system; value = f system; }) checkedSystems);

  cellsFor =
    system:
    lib.kernelCells {
      inherit config;
      buildSets = lib.buildSetsForSystem {
        inherit torchVersions system;
        inherit (config) matrix;
      };
    };

  perSystem =
    system:
    let
      cells = cellsFor system;
      orchestrator = kernelBuilder system;
      drvs = builtins.listToAttrs (
        map (cell: {
          name = cell.name;
          value = lib.mkCell (
            {
              inherit
                cell
                src
                orchestrator
                kernelCommit
                kernelDirty
                ;
              name = "${config.name}-${cell.name}";
            }
            // (
              if cell.noarch then
                { }
              else
                {
                  toolchain = toolchainFor cell;
                  cppDepends = cppDependsFor cell.backend;
                }
            )
          );
        }) cells
      );
      bundleCells = builtins.filter (c: c.bundle) cells;
      bundle = lib.mkBundle {
        inherit orchestrator system;
        name = "${config.name}-bundle";
        cells = map (c: drvs.${c.name}) bundleCells;
        source = src;
        kernelDeps = map (t: t.tree) deps.trees;
      };
      # Every noarch cell, and every compiled bundle cell whose toolchain can build it (not
      # `missing`): other systems' cells cannot run here, and unpinned wheels cannot be
      # fetched, so `nix flake check` builds what can be built.
      checkable =
        c:
        c.noarch
        || (c.bundle && (drvs.${c.name}.missing or null) == null);
      cellChecks = builtins.listToAttrs (
        map (c: {
          name = "cell-${c.name}";
          value = lib.mkCellCheck (
            {
              cell = drvs.${c.name};
              inherit orchestrator;
            }
            // (
              if c.noarch then
                { }
              else
                {
                  manylinux = drvs.${c.name}.toolchain.manylinux or null;
                  torchStableAbi = if c.kind == "stable-abi" then config.stableAbiFor c.backend else null;
                }
            )
          );
        }) (builtins.filter checkable cells)
      );
      # A committed build/hashes.json (force-added: build/ is usually ignored) is checked
      # against the bundle; without one there is nothing to compare with.
      committedManifest = path + "/build/hashes.json";
      manifestChecks =
        if builtins.pathExists committedManifest then
          {
            manifest = lib.mkManifestCheck {
              inherit bundle orchestrator system;
              manifest = committedManifest;
              name = "${config.name}-check-manifest";
            };
          }
        else
          { };
      shells = lib.internalDevShells { inherit config cells system mkShell orchestrator; };
      # The locked kernel dependencies (kernels.lock): `kernel-deps` fetches exactly those
      # trees, each checked by its NAR hash, and says where they are.
      deps = lib.kernelDeps { inherit path orchestrator system; };
      depOutputs = if deps.paths == null then { } else { kernel-deps = deps.paths; };
    in
    if cells == [ ] then
      {
        packages = { };
        checks = { };
        devShells = { };
      }
    else
      {
        packages = drvs // {
          inherit bundle;
          default = bundle;
          build-and-copy = lib.mkBuildAndCopy { inherit bundle orchestrator system; };
        }
        // depOutputs;
        checks = cellChecks // manifestChecks // depOutputs // extraChecks system cells;
        devShells = shells;
      };
  outputs = genSystems perSystem;
  pick = attr: builtins.mapAttrs (_: o: o.${attr}) outputs;
in
{
  packages = pick "packages";
  checks = pick "checks";
  devShells = pick "devShells";
  variants = genSystems cellsFor;
}
