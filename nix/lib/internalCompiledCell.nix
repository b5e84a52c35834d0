# internalCompiledCell (private): the derivation behind mkCompiledCell.
#
# `kernel-builder assemble --source <src> --backend <b> --out $out --python <toolchain python>
# --package-set <name> [--hermetic] --expect-variant <cell name>`, with CXX, CUDACXX and PATH
# from the toolchain, and KERNEL_BUILDER_DEP_<NAME> for each C++ dependency (`toolchain.cppDep
# name` = { env, path, missing }). A torch cell on CPU or CUDA also gets its pinned torch wheel
# and CUDA toolkit (`--torch-wheel W --torch-tree T [--cuda-tree C]`, internalCellPins): torch
# and nvcc come from the pins, not from the package set (no CUDACXX then). A pin, toolchain or
# dependency whose `missing` is set gives a cell that fails when built (`kernel-builder
# nix-support fail`) with that message.
{ lib, ... }:
{
  cell,
  src,
  orchestrator,
  toolchain,
  cppDepends,
  kernelCommit,
  kernelDirty,
  name,
}:
let
  assembleArgs = lib.internalAssembleArgs { inherit cell src kernelCommit kernelDirty; };
  pins = lib.internalCellPins { inherit cell orchestrator; };
  deps = map (d: toolchain.cppDep d) cppDepends;
  depMissing = builtins.filter (d: d.missing != null) deps;
  missing =
    if pins.missing != null then
      pins.missing
    else if toolchain.missing or null != null then
      toolchain.missing
    else if depMissing != [ ] then
      (builtins.head depMissing).missing
    else
      null;
  depEnv = builtins.listToAttrs (map (d: { name = d.env; value = "${d.path}"; }) deps);
  drv = derivation (
    {
      inherit name;
      system = cell.system;
      builder = "${orchestrator}/bin/kernel-builder";
      args =
        assembleArgs.head
        ++ [
          "--python"
          toolchain.python
          "--package-set"
          toolchain.name
          "--expect-variant"
          cell.name
        ]
        ++ (if toolchain.hermetic then [ "--hermetic" ] else [ ])
        ++ pins.args
        ++ assembleArgs.provenance;
      PATH = builtins.concatStringsSep ":" toolchain.path;
      CXX = toolchain.cxx;
      # Substitutable: a binary cache (`kernel-builder cache push`) spares the compile.
    }
    // (if pins.pinned || toolchain.nvcc or null == null then { } else { CUDACXX = toolchain.nvcc; })
    // (if toolchain.impure or false then { __noChroot = true; } else { })
    // (toolchain.env or { })
    // depEnv
  );
in
(
  if missing == null then
    drv
  else
    lib.internalFailingCell {
      inherit cell src orchestrator name;
      message = "kernel-builder: cell ${cell.name}: ${missing}";
    }
)
// {
  # Why this cell cannot be built (null when it can): its pins', toolchain's or a dependency's.
  inherit cell toolchain missing;
  # The pinned torch wheel, its tree and the CUDA toolkit's (null for cells not built from pins).
  inherit (pins) torchWheel torchTree cudaTree;
}
