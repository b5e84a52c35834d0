# mkCellCheck: a check derivation that validates one built cell's layout and metadata with
# `kernel-builder nix-support check-cell` (one `<variant>/` directory holding `__init__.py`,
# `_ops.py` and a `metadata.json` whose fields parse; no `__pycache__`, no `*.pyc`).
#
# Type: mkCellCheck :: { cell :: Derivation, orchestrator, name ? String } -> Derivation
{ ... }:
{
  cell,
  orchestrator,
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
    "${cell}"
  ];
  preferLocalBuild = true;
}
