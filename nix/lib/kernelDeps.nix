# kernelDeps: the kernel dependencies `path/kernels.lock` pins (written by `kernel-builder
# lock-kernel-deps`; none without the file), each with its tree as a fixed-output derivation
# (fetchKernelDep), and `paths`: a derivation holding `kernel-paths.json` (kernels'
# `KernelPaths`, for its `KernelPathsResolver`) and `local-kernels` (a `LOCAL_KERNELS` value)
# that point at those trees in the store, so the built kernel loads with exactly them.
#
# Type: kernelDeps :: { path :: Path, orchestrator, system } -> { trees :: [ { dependency, tree } ], paths :: Derivation | null }
{ lib, ... }:
{
  path,
  orchestrator,
  system,
}:
let
  lockFile = path + "/kernels.lock";
  entries = if builtins.pathExists lockFile then builtins.fromJSON (builtins.readFile lockFile) else [ ];
  trees = map (e: {
    inherit (e) dependency;
    tree = lib.fetchKernelDep {
      repoId = e.dependency."repo-id";
      inherit (e.lock) commit hash;
      inherit orchestrator system;
    };
  }) entries;
  pin = d: if d ? version then "version:${toString d.version}" else "revision:${d.revision}";
in
{
  inherit trees;
  paths =
    if trees == [ ] then
      null
    else
      derivation {
        name = "kernel-deps";
        inherit system;
        builder = "${orchestrator}/bin/kernel-builder";
        args = [
          "nix-support"
          "kernel-dep-paths"
          "--out"
          (builtins.placeholder "out")
        ]
        ++ map (t: "${t.dependency."repo-id"}=${pin t.dependency}=${t.tree}") trees;
      };
}
