# buildSetsForSystem: the build sets that run on one system, after the kernel's
# `torchVersions` function has rewritten the matrix.
#
# `torchVersions` sees the matrix (nix/build-matrix.json `build_sets`) in upstream's
# versions.nix shape, so kernel flakes written for upstream keep working:
#   { torchVersion = "2.12"; cudaVersion = "12.6"; systems = [ … ]; bundleBuild = true; tvmFfiVersion = "0.1"; }
# with exactly one backend selector: `cpu = true`, `cudaVersion`, `metal = true`,
# `rocmVersion`, `tpu = true` or `xpuVersion`. It may return entries in that shape or in the
# JSON shape `{ torch, backend, version?, systems, bundle, tvm_ffi? }`.
#
# Type: buildSetsForSystem :: { torchVersions ? ([Entry] -> [Entry]), system :: String, matrix ? String|null } -> [BuildSet]
#
# Arguments:
#   torchVersions  (default: the identity) a function from the matrix's entries to the entries
#                  this kernel uses. It may drop, edit or add entries.
#   system         a Nix system string, e.g. "x86_64-linux".
#   matrix         (default: null, the default matrix) the name of the build matrix to start
#                  from, as `[general] matrix` pins it (`readKernelConfig`'s `matrix`), e.g.
#                  "upstream-2026-08". An unknown name throws, listing the known ones.
#
# Result: build sets in the JSON shape with `system` in place of `systems`, plus `matrix` and
# `matrix_revision` (the name and revision of the matrix they come from), in list order. A
# system that no entry names gives [], never an error.
#
# Example:
#   buildSetsForSystem {
#     torchVersions = _: [ { torchVersion = "2.12"; cudaVersion = "12.6"; systems = [ "x86_64-linux" ]; bundleBuild = true; } ];
#     system = "x86_64-linux";
#   }
#   => [ { torch = "2.12"; backend = "cuda"; version = "12.6"; bundle = true; system = "x86_64-linux";
#          matrix = "2026-12"; matrix_revision = "2026-12-01"; } ]
{ matrices, ... }@deps:
{
  torchVersions ? (entries: entries),
  system,
  matrix ? null,
}:
let
  m =
    if matrix == null then
      deps.matrix
    else
      matrices.${matrix} or (throw "kernel-builder: unknown build matrix `${matrix}` (`[general] matrix` in build.toml); this kernel-builder knows ${builtins.concatStringsSep ", " (builtins.attrNames matrices)}");
  example = ''
    e.g. torchVersions = defaults: builtins.filter (e: e.torchVersion == "2.13") defaults;
     or  torchVersions = _: [ { torchVersion = "2.13"; cudaVersion = "12.6"; systems = [ "x86_64-linux" ]; bundleBuild = true; } ];'';
  toUpstream =
    s:
    {
      torchVersion = s.torch;
      systems = s.systems;
      bundleBuild = s.bundle or false;
    }
    // (
      if s.backend == "cuda" then
        { cudaVersion = s.version; }
      else if s.backend == "rocm" then
        { rocmVersion = s.version; }
      else if s.backend == "xpu" then
        { xpuVersion = s.version; }
      else
        { ${s.backend} = true; }
    )
    // (if s ? tvm_ffi then { tvmFfiVersion = s.tvm_ffi; } else { });
  fromUpstream =
    e:
    let
      backend =
        if e.cpu or false then
          "cpu"
        else if e ? cudaVersion then
          "cuda"
        else if e.metal or false then
          "metal"
        else if e ? rocmVersion then
          "rocm"
        else if e.tpu or false then
          "tpu"
        else if e ? xpuVersion then
          "xpu"
        else
          throw "kernel-builder: torchVersions entry for torch ${e.torchVersion} has no backend; set one of cpu = true, cudaVersion, metal = true, rocmVersion, tpu = true, xpuVersion\n${example}";
      version = e.cudaVersion or e.rocmVersion or e.xpuVersion or null;
    in
    if e.sourceBuild or false then
      throw "kernel-builder: torchVersions entry for torch ${e.torchVersion}: sourceBuild is not supported; torch comes from binary wheels"
    else
      {
        torch = e.torchVersion;
        inherit backend;
        systems = e.systems or (throw "kernel-builder: torchVersions entry for torch ${e.torchVersion} has no `systems`\n${example}");
        bundle = e.bundleBuild or false;
      }
      // (if version == null then { } else { inherit version; })
      // (if e ? tvmFfiVersion then { tvm_ffi = e.tvmFfiVersion; } else { });
  normalise =
    e:
    if e ? torchVersion then
      fromUpstream e
    else if e ? torch && e ? backend then
      e
    else
      throw "kernel-builder: a torchVersions entry must have `torchVersion` (or `torch` and `backend`)\n${example}";
  entries =
    if builtins.isFunction torchVersions then
      map normalise (torchVersions (map toUpstream m.build_sets))
    else
      throw "kernel-builder: `torchVersions` must be a function from the default matrix to a list\n${example}";
in
map (
  s:
  (builtins.removeAttrs s [ "systems" ])
  // {
    inherit system;
    matrix = m.name;
    matrix_revision = m.revision;
  }
) (
  builtins.filter (s: builtins.elem system (s.systems or [ ])) entries
)
