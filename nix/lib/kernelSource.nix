# kernelSource: the kernel's source set as a store path, filtered so that only what the build
# reads enters the store (and a change anywhere else never rebuilds a cell).
#
# The source set (the same rule as the orchestrator's native path, so both derive the same
# unique id from the same files): build.toml (and kernels.lock when there is one); every path in the framework section's `src`
# and in each `[kernel.*]`'s `src` (a directory there brings its whole subtree); and the files
# under `<extDir>/<pythonName>/` (`torch-ext/`, or `tvm-ffi-ext/` for tvm-ffi kernels) whose
# extension is in `pyext` (a leading "." ignored); never `*.pyc` or anything under
# `__pycache__`, anywhere. Empty directories are left out. The orchestrator collects the exact
# set itself from what it is given (it may be more, never less); this filter keeps the store
# copy, and so the cells' inputs, to that set.
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
  # kernels.lock too: `assemble` checks that it pins every kernel-depends entry.
  lock = if builtins.pathExists (path + "/kernels.lock") then [ "kernels.lock" ] else [ ];
  declared = [ "build.toml" ] ++ lock ++ (config.frameworkConfig.src or [ ]) ++ builtins.concatMap (k: k.src) config.kernels;
  normalise = p: builtins.replaceStrings [ "//" ] [ "/" ] (lib.internalStripDotSlash p);
  declaredRel = map normalise declared;
  isPackageFile =
    rel:
    let
      ext = builtins.match ".*\\.([^./]+)" (baseNameOf rel);
    in
    ext != null && builtins.elem (builtins.head ext) pyext && builtins.head ext != "pyc";
  # A leading "." in a pyext entry is ignored (".json" is "json").
  pyext = map lib.internalStripLeadingDot config.pyext;
  # Never taken, anywhere: `__pycache__` directories and `*.pyc` files.
  isBytecode = rel: builtins.match "(.*/)?__pycache__(/.*)?" rel != null || builtins.match ".*\\.pyc" rel != null;
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
    !isBytecode rel
    && (
      builtins.elem rel wanted
      # everything under a declared directory
      || builtins.any (d: hasPrefix "${d}/" rel) declaredRel
      # the directories that lead to a wanted path
      || (type == "directory" && builtins.any (d: hasPrefix "${rel}/" d) wanted)
    );
in
builtins.path {
  inherit name filter path;
}
