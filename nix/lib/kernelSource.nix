# kernelSource: the kernel's source set as a store path, filtered so that only what the build
# reads enters the store (and a change anywhere else never rebuilds a cell).
#
# The source set (the same rule as the orchestrator's native path, so both derive the same
# unique id from the same files): build.toml; every path in the framework section's `src`
# and in each `[kernel.*]`'s `src` (a directory there brings its whole subtree); and the files
# under `<extDir>/<pythonName>/` (`torch-ext/`, or `tvm-ffi-ext/` for tvm-ffi kernels) whose
# extension is in `pyext`, never `*.pyc` or anything under `__pycache__`.
#
# Type: kernelSource :: { path :: Path, config :: KernelConfig, name ? String } -> StorePath
#
# Arguments:
#   path    the kernel directory
#   config  its readKernelConfig result
#   name    (default "<kernel name>-source") the store path name
{ lib, ... }:
{
  path,
  config,
  name ? "${config.name}-source",
}:
let
  root = toString path;
  pkgDir = "${config.extDir}/${config.pythonName}";
  declared = [ "build.toml" ] ++ (config.frameworkConfig.src or [ ]) ++ builtins.concatMap (k: k.src) config.kernels;
  normalise = p: builtins.replaceStrings [ "//" ] [ "/" ] (lib.internalStripDotSlash p);
  declaredRel = map normalise declared;
  isPackageFile =
    rel:
    let
      ext = builtins.match ".*\\.([^./]+)" (baseNameOf rel);
    in
    ext != null && builtins.elem (builtins.head ext) config.pyext && builtins.head ext != "pyc";
  # Every package file, walked once at evaluation time (`__pycache__` is never entered).
  walk =
    rel:
    let
      entries = builtins.readDir (path + "/${rel}");
    in
    builtins.concatMap (
      n:
      let
        r = "${rel}/${n}";
      in
      if entries.${n} == "directory" then
        (if n == "__pycache__" then [ ] else walk r)
      else if isPackageFile r then
        [ r ]
      else
        [ ]
    ) (builtins.attrNames entries);
  packageFiles = if builtins.pathExists (path + "/${pkgDir}") then walk pkgDir else [ ];
  wanted = declaredRel ++ packageFiles;
  hasPrefix = pre: s: builtins.substring 0 (builtins.stringLength pre) s == pre;
  filter =
    abs: type:
    let
      rel = builtins.substring (builtins.stringLength root + 1) (-1) abs;
    in
    builtins.elem rel wanted
    # everything under a declared directory
    || builtins.any (d: hasPrefix "${d}/" rel) declaredRel
    # the directories that lead to a wanted path
    || (type == "directory" && builtins.any (d: hasPrefix "${rel}/" d) wanted);
in
builtins.path {
  inherit name filter path;
}
