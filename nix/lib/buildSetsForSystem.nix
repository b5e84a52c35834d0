# buildSetsForSystem: the build sets (entries of nix/build-matrix.json `build_sets`) that run on
# one system, after the kernel's `torchVersions` function has rewritten the matrix.
#
# Type: buildSetsForSystem :: { torchVersions ? ([BuildSet] -> [BuildSet]), system :: String } -> [BuildSet]
#
# Arguments:
#   torchVersions  (default: the identity) a function from the matrix's build sets, in the JSON
#                  shape `{ torch, backend, version?, systems, bundle, tvm_ffi? }`, to the
#                  build sets this kernel uses. It may drop, edit or add entries.
#   system         a Nix system string, e.g. "x86_64-linux".
#
# Example:
#   buildSetsForSystem { system = "aarch64-darwin"; }
#     => [ { torch = "2.12"; backend = "cpu"; system = "aarch64-darwin"; bundle = true; ... } ... ]
#
# A system that no build set names gives [], never an error.
{ matrix, ... }:
{
  torchVersions ? (sets: sets),
  system,
}:
let
  sets =
    if builtins.isFunction torchVersions then
      torchVersions matrix.build_sets
    else
      throw ''
        kernel-builder: `torchVersions` must be a function from the default build sets to a list, e.g.
          torchVersions = sets: builtins.filter (s: s.torch == "2.13") sets;
      '';
in
map (s: (builtins.removeAttrs s [ "systems" ]) // { inherit system; }) (
  builtins.filter (s: builtins.elem system (s.systems or [ ])) sets
)
