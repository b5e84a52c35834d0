# internalCellPins (private): the pinned toolchain of a compiled torch cell, from
# nix/torch-wheels.json (the pins the native `build-and-copy --nix never` provisions from): the
# torch wheel of the cell's torch × framework × system (a CPU entry with `compile-against`
# uses that framework's wheel, as natively), and for a CUDA cell NVIDIA's toolkit wheels of
# its CUDA version. Each wheel is a fixed-output download with its pinned sha256 (a wheel
# added beforehand with `nix-store --add-fixed sha256 <file>` satisfies it offline), unpacked
# by the orchestrator (`kernel-builder nix-support unpack-wheels`, the code that unpacks the
# native toolchain cache) into a store path shared by every cell of the same wheels.
#
# Pinned cells: kind "torch" on cpu or cuda (the cells the native path provisions). Others
# (stable-ABI, ROCm, XPU, Metal) keep the package set's torch: `pinned = false`.
#
# Type: internalCellPins :: { cell, orchestrator } -> { pinned, missing, args, torchWheel, torchTree, cudaTree }
#   args      the `assemble` flags: `--torch-wheel W --torch-tree T [--cuda-tree C]`
#   missing   why the cell cannot be built (null when it can): no entry, or no sha256 yet,
#             naming the command that pins it
{ lib, torchWheels, ... }:
{ cell, orchestrator }:
let
  pinFile = "nix/torch-wheels.json";
  pinned = (cell.kind or "torch") == "torch" && builtins.elem cell.backend [ "cpu" "cuda" ];
  framework = if cell.backend == "cuda" then "cu${lib.flattenVersion cell.backend_version}" else "cpu";
  entry = fw: ((torchWheels.wheels.${cell.torch_version} or { }).${fw} or { }).${cell.system} or null;
  own = entry framework;
  torchPin = if own == null then null else if own ? "compile-against" then entry own.compile-against else own;
  toolkit =
    if cell.backend == "cuda" then
      (torchWheels.cuda-toolkits.${cell.backend_version} or { }).${cell.system} or null
    else
      [ ];
  unpinned = builtins.filter (w: w.sha256 == null) ([ torchPin ] ++ toolkit);
  missing =
    if !pinned then
      null
    else if own == null then
      "${pinFile} has no torch wheel for torch ${cell.torch_version} × ${framework} × ${cell.system}; add one there"
    else if torchPin == null then
      "${pinFile}: torch ${cell.torch_version} × ${framework} × ${cell.system} compiles against `${own.compile-against}`, which has no entry for ${cell.system}"
    else if toolkit == null then
      "${pinFile} has no CUDA ${cell.backend_version} toolkit wheels for ${cell.system}; add them under `cuda-toolkits`"
    else if unpinned != [ ] then
      let
        w = builtins.head unpinned;
      in
      "${w.project} ${w.version} (${if w.file or null == null then "no file resolved" else w.file}) has no sha256 pinned in ${pinFile} yet: run `kernel-builder matrix pin --index ${w.index}` where that index is reachable"
    else
      null;
  # A wheel by its pinned sha256 (Nix's own `builtin:fetchurl`): the store path
  # `nix-store --add-fixed sha256 <file>` gives.
  fetch =
    w:
    import <nix/fetchurl.nix> {
      name = w.file;
      inherit (w) url sha256;
    };
  unpacked =
    name: ws:
    derivation {
      inherit name;
      system = cell.system;
      builder = "${orchestrator}/bin/kernel-builder";
      args = [
        "nix-support"
        "unpack-wheels"
        "--out"
        (builtins.placeholder "out")
      ]
      ++ map fetch ws;
      # Unpacking is quick; a remote builder then receives the tree, not the wheel as well.
      preferLocalBuild = true;
    };
  torchWheel = fetch torchPin;
  torchTree = unpacked "torch-${torchPin.version}-${builtins.substring 0 12 torchPin.sha256}-unpacked" [ torchPin ];
  cudaTree =
    if cell.backend == "cuda" then
      unpacked "cuda-${cell.backend_version}-${builtins.substring 0 12 (builtins.head toolkit).sha256}-wheels-unpacked" toolkit
    else
      null;
in
{
  inherit pinned missing;
  torchWheel = if pinned && missing == null then torchWheel else null;
  torchTree = if pinned && missing == null then torchTree else null;
  cudaTree = if pinned && missing == null then cudaTree else null;
  args =
    if pinned && missing == null then
      [
        "--torch-wheel"
        "${torchWheel}"
        "--torch-tree"
        "${torchTree}"
      ]
      ++ (if cudaTree == null then [ ] else [ "--cuda-tree" "${cudaTree}" ])
    else
      [ ];
}
