# mkCompiledCell: the derivation of one compiled cell, whatever it compiles against: a torch
# cell (arch or stable-ABI variant) or a tvm-ffi cell (`tvm-ffi<v>-<compute>-<system>`, whose
# toolchain python must hold tvm-ffi). The orchestrator decides what the cell compiles, and
# refuses with its own message what it cannot build yet. `mkTorchCell` and `mkTvmFfiCell` are
# this function under the names of the cell kinds.
#
# The builder is the orchestrator itself, `kernel-builder assemble`, as for noarch cells: it
# loads and validates build.toml (a bad file fails the cell with `check-config`'s
# diagnostics), computes everything the compile depends on (the `-gencode` pairs of each CUDA
# kernel, gfx targets, defines, flags, C++ dependencies, the generated CMake project) and runs
# CMake and Ninja in a fresh work directory, the same code as the native `build-and-copy`.
# Nix passes only the cell and its toolchain, never a flag it derived itself.
#
# The toolchain (see nix/API.md, "Toolchains") is a record from a package set:
#   { name, hermetic, impure, manylinux, python, cxx, path, nvcc, env, torchWheel, missing }
# `python` is an interpreter whose torch is the cell's (the orchestrator reads torch's version,
# CUDA/ROCm/XPU build and C++ ABI from it, and refuses with both names when they give another
# variant than `cell.name`); `cxx` becomes CXX, `nvcc` CUDACXX, `path` PATH (CMake, Ninja,
# binutils); `env` is extra environment. `name` and `hermetic` are recorded in metadata.json
# (`build.package-set`, `build.hermetic`). `impure = true` sets `__noChroot` (the offline test
# package set, which uses the host's tools; needs `sandbox = relaxed`). A toolchain with
# `missing` (a message: e.g. a torch wheel whose hash is not pinned yet) gives a cell that
# evaluates and fails when built with that message.
#
# Type: mkCompiledCell :: { cell, src, orchestrator, toolchain, cppDepends ? [], kernelCommit ? null, kernelDirty ? false, name ? String } -> Derivation
#
# Arguments:
#   cell          a kernelCells entry with kind "torch", "stable-abi" or "tvm-ffi"
#   src           the kernelSource store path
#   orchestrator  a store path holding bin/kernel-builder, runnable on cell.system
#   toolchain     the cell's toolchain record (genKernelFlakeOutputs: `toolchainFor cell`)
#   cppDepends    (default []) the C++ dependencies (`depends` but torch) of the backend's
#                 kernels; each is `toolchain.cppDep name` (a fixed-output fetch pinned by
#                 hash in nix/cpp-deps.json for the default set), handed to the orchestrator
#                 as KERNEL_BUILDER_DEP_<NAME>
#   kernelCommit, kernelDirty, name: as mkNoarchCell
#
# Output: `$out/<cell.name>/` (`_<name>_<backend>_<uid>.abi3.so`, the package files,
# `_ops.py`, `metadata.json`; a tvm-ffi cell's module is `<op namespace>.so`). The result
# carries `cell` and `toolchain`.
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
