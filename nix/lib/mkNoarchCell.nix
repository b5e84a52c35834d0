# mkNoarchCell: the derivation of one noarch cell (`torch-<backend>`, or `mlx-metal` for an
# `[mlx-noarch]` kernel): pure Python (Helion, Triton, torch ops, MLX), no compiler.
#
# The builder is the orchestrator itself, `kernel-builder assemble`, run in the sandbox over
# the filtered source. `assemble` loads and validates build.toml first (the same code as
# `kernel-builder check-config`), so a bad file fails the cell with the same diagnostics as
# on the command line. The output is `$out/torch-<backend>/…`; the unique id in the op
# namespace is derived from the source content, so `nix build` and the native
# `build-and-copy --nix never` give the same bytes.
#
# Type: mkNoarchCell :: { cell, src, orchestrator, kernelCommit ? null, kernelDirty ? false, name ? String } -> Derivation
#
# Arguments:
#   cell          a kernelCells entry with kind "noarch" or "mlx-noarch"
#   src           the kernelSource store path
#   orchestrator  a store path (or derivation) holding bin/kernel-builder, runnable on cell.system
#   kernelCommit  (default null) the kernel repository's commit, recorded as provenance
#   kernelDirty   (default false) whether the working tree had changes (only with kernelCommit)
#   name          (default "<kernel>-<variant>") the derivation name
#
# The result carries `cell` (the cell record) next to the derivation attributes.
{ lib, ... }:
{
  cell,
  src,
  orchestrator,
  kernelCommit ? null,
  kernelDirty ? false,
  name ? "kernel-${cell.name}",
}:
let
  assembleArgs = lib.internalAssembleArgs { inherit cell src kernelCommit kernelDirty; };
in
(derivation {
  inherit name;
  system = cell.system;
  builder = "${orchestrator}/bin/kernel-builder";
  args = assembleArgs.head ++ assembleArgs.provenance;
  # No network, no host paths; the variant directory carries no timestamps to fix.
  # Substitutable: `kernel-builder cache pull` fetches cells from a binary cache (Nix 2.8 has
  # no `always-allow-substitutes` to override `allowSubstitutes = false`).
})
// {
  inherit cell;
}
