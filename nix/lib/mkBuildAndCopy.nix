# mkBuildAndCopy: the runnable behind `nix run .#build-and-copy`: replaces `./build/<variant>`
# for each variant of the bundle (and only those), atomically, with writable copies.
#
# The result has `bin/build-and-copy`, a `/bin/sh` script that runs
# `kernel-builder nix-support copy-variants <bundle> build` (the copy the CLI's Nix driver
# uses too). It runs on the host, in the current directory.
#
# Type: mkBuildAndCopy :: { bundle, orchestrator, system :: String } -> Derivation
{ ... }:
{
  bundle,
  orchestrator,
  system,
}:
(derivation {
  name = "build-and-copy";
  inherit system;
  builder = "${orchestrator}/bin/kernel-builder";
  args = [
    "nix-support"
    "runner"
    "--out"
    (builtins.placeholder "out")
    "--orchestrator"
    "${orchestrator}/bin/kernel-builder"
    "--bundle"
    "${bundle}"
  ];
  preferLocalBuild = true;
})
// {
  meta.mainProgram = "build-and-copy";
}
