# mkTvmFfiCell: the derivation of one compiled tvm-ffi cell (`tvm-ffi<v>-<compute>-<system>`).
#
# The same derivation as mkTorchCell (the orchestrator's `assemble` with the cell's toolchain;
# its python must hold tvm-ffi); the orchestrator decides what a tvm-ffi cell compiles, and
# refuses with its own message what it cannot build yet.
#
# Type: mkTvmFfiCell :: { cell, src, orchestrator, toolchain, cppDepends ? [], kernelCommit ? null, kernelDirty ? false, name ? String } -> Derivation
{ lib, ... }:
{
  cell,
  src,
  orchestrator,
  toolchain,
  cppDepends ? [ ],
  kernelCommit ? null,
  kernelDirty ? false,
  name ? "kernel-${cell.name}",
  ...
}:
lib.internalCompiledCell {
  inherit
    cell
    src
    orchestrator
    toolchain
    cppDepends
    kernelCommit
    kernelDirty
    name
    ;
}
