# mkBundle: the system's bundle cells joined in the Hub layout, `$out/<variant>/…`.
#
# Every cell's top-level entries are copied (not linked) into one tree by
# `kernel-builder nix-support join`, which refuses two cells that provide the same entry.
# With no cells the bundle is an empty directory.
#
# Type: mkBundle :: { cells :: [Derivation], orchestrator, system :: String, name ? String, source ? Path, kernelDeps ? [Derivation] } -> Derivation
#
# Arguments:
#   cells         cell derivations (mkCell results)
#   orchestrator  a store path holding bin/kernel-builder, runnable on `system`
#   system        the Nix system the join runs on
#   name          (default "kernel-bundle")
#   source        (default null) the kernel's filtered source (kernelSource); when given, the
#                 bundle also holds hashes.json, the reproducibility manifest a native build
#                 writes (NAR hash per variant and the source's tree id)
#   kernelDeps    (default []) the locked kernel dependency trees (kernelDeps' fixed-output
#                 derivations): inputs of the bundle, so building it fetches exactly them and
#                 Nix checks each against its locked NAR hash
{ ... }:
{
  cells,
  orchestrator,
  system,
  name ? "kernel-bundle",
  source ? null,
  kernelDeps ? [ ],
}:
derivation (
  {
    inherit name system;
    builder = "${orchestrator}/bin/kernel-builder";
    args = [
      "nix-support"
      "join"
      "--out"
      (builtins.placeholder "out")
    ]
    ++ (if source == null then [ ] else [ "--source" "${source}" ])
    ++ map (c: "${c}") cells;
    # Substitutable (no `allowSubstitutes = false`): `kernel-builder cache pull` fetches the
    # bundle from a binary cache.
    preferLocalBuild = true;
  }
  # Only with dependencies: a kernel without any keeps the bundle derivation it had.
  // (if kernelDeps == [ ] then { } else { inherit kernelDeps; })
)
