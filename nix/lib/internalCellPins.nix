# internalCellPins (private): the pinned toolchain of a compiled torch cell, from
# nix/torch-wheels.json (the pins the native `build-and-copy --nix never` provisions from): the
# torch wheel and, for a CUDA cell, NVIDIA's toolkit wheels that internalTorchPin finds for the
# cell. Each wheel is a fixed-output download with its pinned sha256 (a wheel
# added beforehand with `nix-store --add-fixed sha256 <file>` satisfies it offline), unpacked
# by the orchestrator (`kernel-builder nix-support unpack-wheels`, the code that unpacks the
# native toolchain cache) into a store path shared by every cell of the same wheels, and by
# every kernel-builder version when the set's NAR hash is pinned (`unpacked`).
#
# Pinned cells (internalTorchPin's `pinned`): kind "torch" on cpu or cuda. Others (stable-ABI,
# ROCm, XPU, Metal) keep the package set's torch: `pinned = false`.
#
# Type: internalCellPins :: { cell, orchestrator } -> { pinned, missing, args, torchWheel, torchTree, cudaTree }
#   args      the `assemble` flags: `--torch-wheel W --torch-tree T [--cuda-tree C]`
#   missing   why the cell cannot be built (null when it can): no entry, or no sha256 yet,
#             naming the command that pins it
{ lib, torchWheels, ... }:
{ cell, orchestrator }:
let
  # The lookup and its messages: internalTorchPin, shared with nixpkgsToolchain.
  pin = lib.internalTorchPin { inherit torchWheels cell; };
  inherit (pin) pinned missing toolkit;
  torchPin = pin.torch;
  # A wheel by its pinned sha256 (Nix's own `builtin:fetchurl`): the store path
  # `nix-store --add-fixed sha256 <file>` gives.
  fetch =
    w:
    import <nix/fetchurl.nix> {
      name = w.file;
      inherit (w) url sha256;
    };
  # The set's id, as `set_id` in src/toolchain/pins.rs: the first 32 hex digits of the sha256
  # of its wheels' sha256s, sorted and joined by newlines.
  setId =
    ws:
    builtins.substring 0 32 (
      builtins.hashString "sha256" (
        builtins.concatStringsSep "\n" (builtins.sort builtins.lessThan (map (w: w.sha256) ws))
      )
    );
  # With the set's NAR hash recorded (`unpacked`, by `kernel-builder matrix pin-unpacked`) the
  # tree is a fixed-output path: named by its content, not by the orchestrator that unpacks it,
  # so every kernel-builder version shares one copy (without, each adds gigabytes to the store).
  unpacked =
    name: ws:
    let
      narHash = (torchWheels.unpacked or { }).${setId ws} or null;
    in
    derivation (
      {
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
      }
      // (
        if narHash == null then
          { }
        else
          {
            outputHashMode = "recursive";
            outputHashAlgo = "sha256";
            outputHash = narHash;
          }
      )
    );
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
