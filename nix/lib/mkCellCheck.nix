# mkCellCheck: a check derivation that validates one built cell's layout and metadata with
# `kernel-builder nix-support check-cell` (one `<variant>/` directory holding `__init__.py`,
# `_ops.py` and a `metadata.json` whose fields parse; no `__pycache__`, no `*.pyc`).
#
# For a compiled cell, `manylinux` (the policy of the cell's package set, e.g. "2_28") adds
# the ABI check of `kernel-builder check-abi --manylinux <policy>` over the cell's shared
# objects (GLIBC/GLIBCXX/CXXABI versions, CPython abi3 3.9, and with `torchStableAbi` the
# torch C shim only); a violation fails the check naming the library and the symbol.
#
# Type: mkCellCheck :: { cell :: Derivation, orchestrator, manylinux ? String|null, torchStableAbi ? String|null, name ? String } -> Derivation
{ ... }:
{
  cell,
  orchestrator,
  manylinux ? null,
  torchStableAbi ? null,
  name ? "check-${cell.cell.name}",
}:
derivation {
  inherit name;
  system = cell.cell.system;
  builder = "${orchestrator}/bin/kernel-builder";
  args = [
    "nix-support"
    "check-cell"
    "--out"
    (builtins.placeholder "out")
    "--variant"
    cell.cell.name
  ]
  ++ (if manylinux == null then [ ] else [ "--manylinux" manylinux ])
  ++ (if torchStableAbi == null then [ ] else [ "--torch-stable-abi" torchStableAbi ])
  ++ [ "${cell}" ];
  preferLocalBuild = true;
}
