# mkBundle: the system's bundle cells joined in the Hub layout, `$out/<variant>/…`.
#
# Every cell's top-level entries are copied (not linked) into one tree by
# `kernel-builder nix-support join`, which refuses two cells that provide the same entry.
# With no cells the bundle is an empty directory.
#
# Type: mkBundle :: { cells :: [Derivation], orchestrator, system :: String, name ? String } -> Derivation
#
# Arguments:
#   cells         cell derivations (mkCell results)
#   orchestrator  a store path holding bin/kernel-builder, runnable on `system`
#   system        the Nix system the join runs on
#   name          (default "kernel-bundle")
{ ... }:
{
  cells,
  orchestrator,
  system,
  name ? "kernel-bundle",
}:
derivation {
  inherit name system;
  builder = "${orchestrator}/bin/kernel-builder";
  args = [
    "nix-support"
    "join"
    "--out"
    (builtins.placeholder "out")
  ]
  ++ map (c: "${c}") cells;
  allowSubstitutes = false;
  preferLocalBuild = true;
}
