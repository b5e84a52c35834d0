# internalDevShells (private): one dev shell per arch variant of the system's cells, plus
# `default`.
#
# `default` is the shell of the kernel's first backend (in `general.backends` order) that has
# a cell on this system, at its best build set: a bundle set, the newest torch, the oldest
# backend version. A noarch kernel's shells are keyed by arch variant too
# (torch213-cxx11-cu126-x86_64-linux), never by `torch-cuda`. The shells only evaluate
# offline: they need nixpkgs' mkShell.
{ lib, ... }:
{
  config,
  cells,
  system,
  mkShell,
  orchestrator,
}:
let
  firstBackend = builtins.head (
    builtins.filter (b: builtins.any (c: c.backend == b) cells) config.backends
  );
  better =
    a: b:
    if a.bundle != b.bundle then
      a.bundle
    else if lib.compareVersions a.torch_version b.torch_version != 0 then
      lib.compareVersions a.torch_version b.torch_version > 0
    else
      lib.compareVersions (if a.backend_version == null then "0" else a.backend_version) (
        if b.backend_version == null then "0" else b.backend_version
      ) < 0;
  best = builtins.foldl' (acc: c: if acc == null || better c acc then c else acc) null (
    builtins.filter (c: c.backend == firstBackend) cells
  );
  shellFor =
    cell:
    (mkShell system) {
      name = "${config.name}-${cell.arch_variant}";
      packages = [ orchestrator ];
      KERNEL_BUILDER_VARIANT = cell.name;
      KERNEL_BUILDER_ARCH_VARIANT = cell.arch_variant;
    };
  byArch = builtins.listToAttrs (
    map (c: {
      name = c.arch_variant;
      value = shellFor c;
    }) cells
  );
in
byArch // { default = byArch.${best.arch_variant}; }
