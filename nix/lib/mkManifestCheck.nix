# mkManifestCheck: a check derivation proving that the bundle is what the committed manifest
# says: `kernel-builder nix-support check-manifest` hashes the bundle's variants again and
# compares them (and the source's tree id) with `manifest`, the kernel's committed
# `build/hashes.json` (format kernel-builder-hashes-v1, written by every build).
#
# Type: mkManifestCheck :: { bundle :: Derivation, manifest :: Path, orchestrator, system :: String, name ? String } -> Derivation
#
# Arguments:
#   bundle        the system's bundle (mkBundle result; it carries its own hashes.json)
#   manifest      the committed manifest file
#   orchestrator  a store path holding bin/kernel-builder, runnable on `system`
#   system        the Nix system the check runs on
#   name          (default "check-manifest")
{ ... }:
{
  bundle,
  manifest,
  orchestrator,
  system,
  name ? "check-manifest",
}:
derivation {
  inherit name system;
  builder = "${orchestrator}/bin/kernel-builder";
  args = [
    "nix-support"
    "check-manifest"
    "--out"
    (builtins.placeholder "out")
    "--expected"
    "${manifest}"
    "${bundle}"
  ];
  preferLocalBuild = true;
}
