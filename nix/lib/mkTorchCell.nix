# mkTorchCell: the derivation of one compiled torch cell (arch or stable-ABI variant).
#
# Seam for the compiled-kernels work: it evaluates (so variant lists, `nix flake show` and
# drvPath benchmarks cover compiled kernels) but fails when built, with a message that says
# so. The compiled cell will run the generated CMake project with the set's toolchain from
# nixpkgs (CUDA/ROCm/XPU, torch wheels pinned by hash).
#
# Type: mkTorchCell :: { cell, src, orchestrator, name ? String, ... } -> Derivation
#
# Arguments: as mkNoarchCell; `cell.kind` is "torch" or "stable-abi".
{ lib, ... }:
{
  cell,
  src,
  orchestrator,
  name ? "kernel-${cell.name}",
  ...
}:
lib.internalFailingCell {
  inherit cell src orchestrator name;
  message = "kernel-builder: cell ${cell.name} (${cell.kind}, torch ${cell.torch_version}, ${cell.backend} ${
    if cell.backend_version == null then "" else cell.backend_version
  }) is compiled code; compiled cells arrive with the compiled-kernels work. Noarch cells (backends without a [kernel.*]) build today.";
}
