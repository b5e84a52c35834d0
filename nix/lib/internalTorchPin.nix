# internalTorchPin (private): the one Nix reading of a cell's torch pin in nix/torch-wheels.json,
# shared by internalCellPins (cells built from pins) and nixpkgsToolchain (the other cells' torch
# wheel). The lookup is the same as the native one (`Pins::cell` in src/toolchain/pins.rs): the
# entry of the cell's torch × framework × system, a CPU entry with `compile-against` taking that
# framework's wheel, and for a CUDA cell NVIDIA's toolkit wheels of its CUDA version.
#
# Pinned cells: kind "torch" on cpu or cuda (the cells the native path provisions). Others
# (stable-ABI, tvm-ffi, ROCm, XPU, Metal) take torch from the package set.
#
# Type: internalTorchPin :: { torchWheels, cell } -> { pinFile, pinned, framework, entry, torch, toolkit, missing }
#   entry     the cell's own entry (null when there is none)
#   torch     the wheel compiled against (`entry`, or its `compile-against` entry; null when missing)
#   toolkit   a CUDA cell's toolkit wheels (null when missing), [ ] otherwise
#   missing   for a pinned cell, why its pins are incomplete (null when they are not, and for
#             cells not built from pins): no entry, or no sha256 yet, naming the command that pins it
{ lib, ... }:
{ torchWheels, cell }:
let
  pinFile = "nix/torch-wheels.json";
  pinned = (cell.kind or "torch") == "torch" && builtins.elem cell.backend [ "cpu" "cuda" ];
  framework =
    if cell.backend == "cuda" then
      "cu${lib.flattenVersion cell.backend_version}"
    else if cell.backend == "rocm" then
      "rocm${lib.flattenVersion cell.backend_version}"
    else if cell.backend == "xpu" then
      "xpu"
    else
      "cpu";
  entryOf = fw: ((torchWheels.wheels.${cell.torch_version} or { }).${fw} or { }).${cell.system} or null;
  entry = entryOf framework;
  torch =
    if entry == null then
      null
    else if entry ? "compile-against" then
      entryOf entry.compile-against
    else
      entry;
  toolkit =
    if cell.backend == "cuda" then
      (torchWheels.cuda-toolkits.${cell.backend_version} or { }).${cell.system} or null
    else
      [ ];
  unpinned = builtins.filter (w: w.sha256 == null) ([ torch ] ++ toolkit);
  missing =
    if !pinned then
      null
    else if entry == null then
      "${pinFile} has no torch wheel for torch ${cell.torch_version} × ${framework} × ${cell.system}; add one there"
    else if torch == null then
      "${pinFile}: torch ${cell.torch_version} × ${framework} × ${cell.system} compiles against `${entry.compile-against}`, which has no entry for ${cell.system}"
    else if toolkit == null then
      "${pinFile} has no CUDA ${cell.backend_version} toolkit wheels for ${cell.system}; add them under `cuda-toolkits`"
    else if unpinned != [ ] then
      let
        w = builtins.head unpinned;
      in
      "${w.project} ${w.version} (${if w.file or null == null then "no file resolved" else w.file}) has no sha256 pinned in ${pinFile} yet: run `kernel-builder matrix pin --index ${w.index}` where that index is reachable"
    else
      null;
in
{
  inherit
    pinFile
    pinned
    framework
    entry
    torch
    toolkit
    missing
    ;
}
