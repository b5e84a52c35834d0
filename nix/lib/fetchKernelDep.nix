# fetchKernelDep: one locked kernel dependency as a fixed-output derivation: the whole tree of
# Hub repository `repoId` at `commit`, pinned by `hash` (the NAR hash kernels.lock records,
# SRI form). The builder is the orchestrator (`nix-support fetch-kernel-tree`), which reads
# HF_ENDPOINT and HF_TOKEN from the caller's environment (impure variables, as fetchers do);
# Nix refuses the output unless its NAR hash is `hash`, so the tree is exactly the locked one.
#
# The name is `<owner>--<name>--<commit>`, the directory name of kernel-builder's dependency
# cache, so `nix-store --add-fixed --recursive sha256 <cache>/kernel-deps/<that name>` gives
# this very store path (and Nix then never runs the builder).
#
# Type: fetchKernelDep :: { repoId, commit, hash, orchestrator, system } -> Derivation
{ ... }:
{
  repoId,
  commit,
  hash,
  orchestrator,
  system,
}:
derivation {
  name = "${builtins.replaceStrings [ "/" ] [ "--" ] repoId}--${commit}";
  inherit system;
  builder = "${orchestrator}/bin/kernel-builder";
  args = [
    "nix-support"
    "fetch-kernel-tree"
    "--out"
    (builtins.placeholder "out")
    "--repo-id"
    repoId
    "--commit"
    commit
  ];
  outputHashMode = "recursive";
  outputHashAlgo = "sha256";
  outputHash = hash;
  impureEnvVars = [
    "HF_ENDPOINT"
    "HF_TOKEN"
    "http_proxy"
    "https_proxy"
    "HTTP_PROXY"
    "HTTPS_PROXY"
  ];
}
