# The kernel-builder Nix library: one public function per file, wired into one attrset.
#
# Arguments:
#   matrix                (default: nix/build-matrix.json) the default build matrix, the same
#                         bytes the Rust side embeds; its `snapshots` (name -> file under nix/)
#                         are the other matrices a kernel may pin with `[general] matrix`
#   torchWheels           (default: nix/torch-wheels.json) the pins of compiled cells'
#                         toolchains (torch and CUDA toolkit wheels), the bytes the Rust side
#                         embeds
#   defaultKernelBuilder  (default: throws) system -> store path holding bin/kernel-builder
#   defaultMkShell        (default: throws) system -> nixpkgs' mkShell
#   defaultToolchainFor   (default: throws) cell -> the toolchain record of a compiled cell
#                         (the flake passes nixpkgsToolchain over nixpkgs, or its `toolchain`
#                         input's `lib.toolchainFor`)
#
# Every file takes the injected `{ lib, matrix, ... }` first, then the caller's argument.
# Names starting with `internal` are private helpers.
{
  matrix ? builtins.fromJSON (builtins.readFile ../build-matrix.json),
  torchWheels ? builtins.fromJSON (builtins.readFile ../torch-wheels.json),
  defaultKernelBuilder ? (
    system: throw "kernel-builder: no orchestrator for ${system}; pass `kernelBuilder = system: <path with bin/kernel-builder>;`"
  ),
  defaultMkShell ? (system: throw "kernel-builder: dev shells need nixpkgs; pass `mkShell = system: pkgs.mkShell;`"),
  defaultToolchainFor ? (
    cell: throw "kernel-builder: compiled cell ${cell.name} needs a toolchain; pass `toolchainFor = cell: <toolchain record>;` (see nix/API.md)"
  ),
}:
let
  # Every matrix by name: the default and its snapshots (nix/matrices/<name>.json).
  matrices = {
    ${matrix.name} = matrix;
  }
  // builtins.mapAttrs (_: file: builtins.fromJSON (builtins.readFile (./.. + "/${file}"))) (matrix.snapshots or { });
  deps = {
    inherit
      lib
      matrix
      matrices
      torchWheels
      defaultKernelBuilder
      defaultMkShell
      defaultToolchainFor
      ;
  };
  call = file: import file deps;
  lib = {
    # The matrix's systems by name, so that a misspelt system is an evaluation error:
    # `systems = [ kernel-builder.lib.system.x86_64-linux ];`
    system = builtins.listToAttrs (map (s: { name = s; value = s; }) matrix.systems);
    # The build matrices by name (`lib.matrices."upstream-2026-08".build_sets`); the default is
    # `lib.matrices.${lib.defaultMatrix}`.
    inherit matrices;
    defaultMatrix = matrix.name;
    parseVersion = call ./parseVersion.nix;
    compareVersions = call ./compareVersions.nix;
    flattenVersion = call ./flattenVersion.nix;
    readKernelConfig = call ./readKernelConfig.nix;
    buildSetsForSystem = call ./buildSetsForSystem.nix;
    kernelCells = call ./kernelCells.nix;
    kernelSource = call ./kernelSource.nix;
    fetchKernelDep = call ./fetchKernelDep.nix;
    kernelDeps = call ./kernelDeps.nix;
    mkCell = call ./mkCell.nix;
    mkNoarchCell = call ./mkNoarchCell.nix;
    mkCompiledCell = call ./mkCompiledCell.nix;
    # The compiled-cell builder under the names of its cell kinds (one function).
    mkTorchCell = lib.mkCompiledCell;
    mkTvmFfiCell = lib.mkCompiledCell;
    nixpkgsToolchain = call ./nixpkgsToolchain.nix;
    mkBundle = call ./mkBundle.nix;
    mkBuildAndCopy = call ./mkBuildAndCopy.nix;
    mkCellCheck = call ./mkCellCheck.nix;
    mkManifestCheck = call ./mkManifestCheck.nix;
    mkAssertion = call ./mkAssertion.nix;
    genKernelFlakeOutputs = call ./genKernelFlakeOutputs.nix;
    internalStripDotSlash = call ./internalStripDotSlash.nix;
    internalStripLeadingDot = call ./internalStripLeadingDot.nix;
    internalFailingCell = call ./internalFailingCell.nix;
    internalAssembleArgs = call ./internalAssembleArgs.nix;
    internalCompiledCell = call ./internalCompiledCell.nix;
    internalCellPins = call ./internalCellPins.nix;
    internalTorchPin = call ./internalTorchPin.nix;
    internalDevShells = call ./internalDevShells.nix;
  };
in
lib
