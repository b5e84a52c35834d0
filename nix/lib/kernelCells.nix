# kernelCells: the build variants (cells) of one kernel on one system.
#
# The rules (nix-builder.md 3.8, DESIGN "matrix"): keep a build set when its backend is in
# `general.backends`, it has a tvm-ffi version (and its backend a `[kernel.*]`) if the kernel
# is tvm-ffi, its CUDA version is
# within [general.cuda] minver..maxver and its torch version within [torch] minver..maxver
# (missing bounds from build-matrix.json's `naming.default_bounds`), all inclusive and
# compared numerically. Compute prefixes, noarch names and the ABI tag come from the same
# `naming` section, the bytes src/matrix/naming.rs reads. Sets of
# a backend built against the torch stable ABI keep only the newest torch per (backend,
# backend version). TPU sets are always noarch (`torch-tpu`). An `[mlx-noarch]` kernel's sets
# are its one `mlx-<backend>` cell (`mlx-metal`, kind "mlx-noarch").
#
# Type: kernelCells :: { config :: KernelConfig, buildSets :: [BuildSet] } -> [Cell]
#
# A Cell has the fields of `kernel-builder list-variants --json`: name, system, backend,
# backend_version (String|null), torch_version, noarch, bundle, kind ("noarch" | "torch" |
# "stable-abi" | "tvm-ffi" | "mlx-noarch"), arch_variant, cuda_capabilities, rocm_archs ([String]|null),
# matrix, matrix_revision (from the build sets: buildSetsForSystem adds them).
# Noarch cells carry `[torch-noarch]`'s cuda_capabilities / rocm_archs; compiled cells leave
# them null (the orchestrator resolves the architectures inside the cell). Cells come sorted
# by name. A set named by several build sets (every cuda set of a noarch kernel) gives one
# cell, from the first bundle set, else the first set, in matrix order — as the orchestrator's
# `list-variants --all`.
#
# Example (a [torch-noarch] kernel with backends cuda and rocm, on x86_64-linux):
#   map (c: c.name) (kernelCells { inherit config; buildSets = buildSetsForSystem { system = "x86_64-linux"; }; })
#     => [ "torch-cuda" "torch-rocm" ]
{ lib, ... }:
{ config, buildSets }:
let
  # Always the repository's own file (not a caller's `matrix`): naming is not per matrix.
  naming = (builtins.fromJSON (builtins.readFile ../build-matrix.json)).naming;
  bounds = naming.default_bounds;
  cmp = lib.compareVersions;
  inRange =
    v: lo: hi:
    cmp lo v <= 0 && cmp v hi <= 0;
  isTvmFfi = config.framework == "tvm-ffi";
  isMlx = config.framework == "mlx-noarch";
  applicable = builtins.filter (
    s:
    builtins.elem s.backend config.backends
    # A tvm-ffi kernel has no pure-Python variant: a backend without a `[kernel.*]` has no
    # cell (the orchestrator's check-config refuses such a file).
    && (!isTvmFfi || (s ? tvm_ffi && config.hasKernelFor s.backend))
    && (
      s.backend != "cuda"
      || inRange s.version (if config.cudaMinver == null then bounds.cuda.minver else config.cudaMinver) (
        if config.cudaMaxver == null then bounds.cuda.maxver else config.cudaMaxver
      )
    )
    && inRange s.torch (if config.torchMinver == null then bounds.torch.minver else config.torchMinver) (
      if config.torchMaxver == null then bounds.torch.maxver else config.torchMaxver
    )
  ) buildSets;
  # A tvm-ffi variant carries no torch version: where no bundle set of a backend offers tvm-ffi,
  # that backend's tvm-ffi sets are the tvm-ffi kernel's bundle (cells.rs `set_in_bundle`).
  inBundle =
    s:
    (s.bundle or false)
    || (
      isTvmFfi
      && s ? tvm_ffi
      && !builtins.any (o: o.backend == s.backend && (o.bundle or false) && o ? tvm_ffi) buildSets
    );
  usesStableAbi = s: !isTvmFfi && config.stableAbiFor s.backend != null;
  groupKey = s: "${s.backend}-${s.version or ""}";
  stable = builtins.filter usesStableAbi applicable;
  newestInGroup =
    s:
    builtins.all (o: groupKey o != groupKey s || cmp o.torch s.torch <= 0) stable
    # of equal torch versions, the first in matrix order wins
    && builtins.head (builtins.filter (o: groupKey o == groupKey s && cmp o.torch s.torch == 0) stable) == s;
  survivors = builtins.filter newestInGroup stable ++ builtins.filter (s: !usesStableAbi s) applicable;

  # The prefix, then the backend version's flattened major.minor when the set has one.
  compute =
    s:
    naming.compute_prefixes.${s.backend}
    + (if (s.version or null) == null then "" else lib.flattenVersion s.version);
  endsWith =
    suffix: str:
    let
      n = builtins.stringLength suffix;
      l = builtins.stringLength str;
    in
    l >= n && builtins.substring (l - n) n str == suffix;
  hasAbiTag = s: builtins.any (suffix: endsWith suffix s.system) naming.abi_tag.system_suffixes;
  archVariant =
    s:
    if hasAbiTag s then
      "torch${lib.flattenVersion s.torch}-${naming.abi_tag.tag}-${compute s}-${s.system}"
    else
      "torch${lib.flattenVersion s.torch}-${compute s}-${s.system}";
  kind =
    s:
    # `[mlx-noarch]` compiles nothing, whatever `[kernel.*]` it has (check-config warns).
    if isMlx then
      "mlx-noarch"
    # TPU sets only ship Python: always `torch-tpu`.
    else if !config.hasKernelFor s.backend || s.backend == "tpu" then
      "noarch"
    else if isTvmFfi then
      "tvm-ffi"
    else if config.stableAbiFor s.backend != null then
      "stable-abi"
    else
      "torch";
  variantName =
    s:
    let
      k = kind s;
    in
    if k == "mlx-noarch" then
      "mlx-${s.backend}"
    else if k == "noarch" then
      naming.noarch_names.${s.backend}
    else if k == "tvm-ffi" then
      "tvm-ffi${lib.flattenVersion s.tvm_ffi}-${compute s}-${s.system}"
    else if k == "stable-abi" then
      "torch-stable-abi${lib.flattenVersion (config.stableAbiFor s.backend)}-${compute s}-${s.system}"
    else
      archVariant s;
  kernelsFor = s: builtins.filter (k: k.backend == s.backend) config.kernels;
  mkCell =
    s:
    let
      k = kind s;
    in
    {
      name = variantName s;
      system = s.system;
      backend = s.backend;
      backend_version = s.version or null;
      torch_version = s.torch;
      noarch = k == "noarch" || k == "mlx-noarch";
      bundle = inBundle s;
      kind = k;
      arch_variant = archVariant s;
      # Noarch cells pass `[torch-noarch]`'s lists through to metadata. The architectures a
      # compiled cell builds are resolved by the orchestrator inside the cell (the same code
      # as `list-variants`), so Nix leaves them null rather than re-implementing the CUDA
      # toolkit tables.
      cuda_capabilities = if s.backend == "cuda" && k == "noarch" then config.noarchCudaCapabilities else null;
      rocm_archs = if s.backend == "rocm" && k == "noarch" then config.noarchRocmArchs else null;
      matrix = s.matrix or null;
      matrix_revision = s.matrix_revision or null;
    };
  named = map (s: { name = variantName s; set = s; }) survivors;
  # listToAttrs keeps the first entry of a name: put bundle sets first to prefer them.
  byName = builtins.listToAttrs (
    map (e: { inherit (e) name; value = e.set; }) (
      builtins.filter (e: inBundle e.set) named ++ builtins.filter (e: !(inBundle e.set)) named
    )
  );
in
map (n: mkCell byName.${n}) (builtins.attrNames byName)
