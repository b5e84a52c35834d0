# nixpkgsToolchain: the default package set of compiled cells, from nixpkgs.
#
# A torch cell on CPU or CUDA takes torch and the CUDA toolkit from its pins, not from here
# (internalCellPins: the wheels of nix/torch-wheels.json, fixed-output downloads): for it this
# set gives only CPython 3.13 (for `Python.h`), CMake, Ninja and the compiler.
#
# For the other cells: torch from the official binary wheel of the cell's torch × framework × system
# (nix/torch-wheels.json; CPython 3.13, as upstream), CMake and Ninja, a compiler whose output
# meets manylinux_2_28 (`pkgs.manylinux_2_28`, a scope nixpkgs itself does not have: upstream's
# nix-builder overlay provides it; without it the cell fails when built, saying so), and the
# CUDA / ROCm / oneAPI packages of the cell's version (`cudaPackages_<X_Y>`,
# `rocmPackages_<X_Y>`, `xpuPackages_<YYYY_M_P>`). Metal cells use the host's Xcode (`impure`,
# as upstream: `sandbox = relaxed` on macOS). The cells are held to manylinux_2_28 by the ABI
# check of `nix flake check`.
#
# A wheel whose sha256 is still null (one only on download.pytorch.org, which these machines
# cannot reach) gives `missing`: the cell evaluates, and fails when built with "hash not
# pinned yet: run …".
#
# C++ dependencies (`cppDep name`) are the commit archives of nix/cpp-deps.json unpacked by
# `pkgs.fetchzip`, pinned by their sha256; one still without a hash gives `missing`.
#
# Type: nixpkgsToolchain :: { pkgs, wheels ? <nix/torch-wheels.json>, cppDeps ? <nix/cpp-deps.json> } -> Cell -> Toolchain
{ lib, ... }:
{
  pkgs,
  wheels ? builtins.fromJSON (builtins.readFile ../torch-wheels.json),
  cppDeps ? builtins.fromJSON (builtins.readFile ../cpp-deps.json),
}:
cell:
let
  under = v: builtins.replaceStrings [ "." ] [ "_" ] v;
  # The cell's torch wheel, found as internalCellPins finds it (internalTorchPin).
  pin = lib.internalTorchPin {
    torchWheels = wheels;
    inherit cell;
  };
  inherit (pin) framework entry pinFile;
  # Built from its pins: nothing of torch or CUDA here.
  inherit (pin) pinned;
  missing =
    if pinned then
      null
    else if entry == null then
      "no torch wheel for torch ${cell.torch_version} × ${framework} × ${cell.system} in ${pinFile}; add its URL and sha256 there"
    else if entry.sha256 == null then
      "the torch wheel ${entry.url} has no hash pinned yet: run `nix-prefetch-url '${entry.url}'` (or `nix store prefetch-file`) where download.pytorch.org is reachable and set its \"sha256\" in ${pinFile} (torch ${cell.torch_version} / ${framework} / ${cell.system})"
    else
      null;
  python = pkgs.python313;
  torch = python.pkgs.buildPythonPackage {
    pname = "torch";
    version = entry.version;
    format = "wheel";
    src = pkgs.fetchurl {
      inherit (entry) url sha256;
    };
    nativeBuildInputs = [ pkgs.autoPatchelfHook ];
    # Drivers and the CUDA/ROCm runtimes come from the cell's toolkit or the user's system.
    autoPatchelfIgnoreMissingDeps = true;
    dontStrip = true;
  };
  pythonEnv = python.withPackages (_: [ torch ] ++ (if cell.kind == "tvm-ffi" then [ python.pkgs.tvm-ffi ] else [ ]));
  darwin = builtins.match ".*-darwin" cell.system != null;
  manylinux =
    pkgs.manylinux_2_28 or (throw "kernel-builder: the default package set needs `manylinux_2_28` (a compiler whose output meets manylinux_2_28, e.g. from huggingface/kernels' nix-builder overlay); nixpkgs has none. Pass `toolchainFor` to genKernelFlakeOutputs to use another package set.");
  stdenv = if darwin then pkgs.stdenv else manylinux.stdenv;
  cc = stdenv.cc;
  cudaPackages = pkgs."cudaPackages_${under cell.backend_version}";
  cudaRoot = pkgs.symlinkJoin {
    name = "cuda-${cell.backend_version}-root";
    paths = with cudaPackages; [
      cuda_nvcc
      cuda_cudart
      cuda_cccl
    ];
  };
  rocmPackages = pkgs."rocmPackages_${under cell.backend_version}";
  xpuPackages = pkgs."xpuPackages_${under cell.backend_version}";
  backendPath =
    if pinned then
      [ ]
    else if cell.backend == "cuda" then
      [ "${cudaRoot}/bin" ]
    else if cell.backend == "rocm" then
      [ "${rocmPackages.clr}/bin" ]
    else if cell.backend == "xpu" then
      [ "${xpuPackages.oneapi-torch-dev}/bin" ]
    else
      [ ];
  backendEnv =
    if cell.backend == "rocm" then
      {
        HIP_ROOT_DIR = "${rocmPackages.clr}";
      }
    else if cell.backend == "xpu" then
      {
        MKLROOT = "${xpuPackages.oneapi-torch-dev}";
        SYCL_ROOT = "${xpuPackages.oneapi-torch-dev}";
      }
    else
      { };
in
{
  name = "nixpkgs";
  hermetic = !darwin || cell.backend != "metal";
  # Metal needs the host's Xcode and Metal toolchain (upstream does the same).
  impure = cell.backend == "metal";
  manylinux = if darwin then null else "2_28";
  inherit missing;
  torchWheel = if pinned then null else entry;
  python = if pinned then "${python}/bin/python3" else "${pythonEnv}/bin/python3";
  cxx = "${cc}/bin/c++";
  nvcc = if cell.backend == "cuda" && !pinned then "${cudaRoot}/bin/nvcc" else null;
  path =
    [
      "${pkgs.cmake}/bin"
      "${pkgs.ninja}/bin"
      "${cc}/bin"
      "${cc.bintools}/bin"
    ]
    ++ backendPath
    ++ (if cell.backend == "metal" then [ "/usr/bin" ] else [ ]);
  env = backendEnv;
  cppDep =
    name:
    let
      d = cppDeps.deps.${name} or null;
    in
    if d == null then
      {
        env = "KERNEL_BUILDER_DEP_UNKNOWN";
        path = null;
        missing = "unknown C++ dependency `${name}` (nix/cpp-deps.json has ${builtins.concatStringsSep ", " (builtins.attrNames cppDeps.deps)})";
      }
    else if d.archive == null || d.sha256 == null then
      {
        inherit (d) env;
        path = null;
        missing =
          if d.archive == null then
            "the C++ dependency `${name}` (${d.url}, ${d.tag}) has no pinned source yet; add an archive URL and its sha256 to nix/cpp-deps.json"
          else
            "the C++ dependency `${name}` (${d.url} ${d.tag}, commit ${d.commit}) has no hash pinned yet: run `nix-prefetch-url --unpack '${d.archive}'` where github.com is reachable and set its \"sha256\" in nix/cpp-deps.json";
      }
    else
      {
        inherit (d) env;
        path = pkgs.fetchzip {
          name = "${name}-source";
          url = d.archive;
          inherit (d) sha256;
        };
        missing = null;
      };
}
