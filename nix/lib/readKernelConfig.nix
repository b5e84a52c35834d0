# readKernelConfig: a kernel's build.toml, read with builtins.fromTOML and normalised to the
# few facts the variant rules and the source filter need.
#
# Nix reads editions 6 and 5 and the unversioned "v4" shape (which edition 5 extends). Older
# files are refused with a message that names the migration command; the orchestrator
# (`kernel-builder check-config`) reads every generation, and each cell runs its validation
# when it builds, so Nix never second-guesses the full schema.
#
# Type: readKernelConfig :: Path -> KernelConfig
#
# Arguments:
#   path  the kernel directory (it holds build.toml)
#
# Result attributes:
#   toml, name, pythonName, edition (6, 5 or 4), framework ("torch" | "torch-noarch" |
#   "tvm-ffi" | "mlx-noarch"), frameworkConfig, backends ([String], as written), kernels
#   ([{ name, language, backend, src, depends }]: an edition-6 kernel's backend follows from
#   its `language`, an older one's `language` is the C++ language of its `backend`),
#   hasKernelFor (String -> Bool), stableAbiFor (String -> String|null), pyext ([String]),
#   extDir ("torch-ext" | "tvm-ffi-ext"), cudaMinver, cudaMaxver, torchMinver, torchMaxver
#   (String|null), noarchCudaCapabilities, noarchRocmArchs ([String]|null; `[torch-noarch]`'s
#   `cuda_capabilities` / `rocm_archs`, or their hyphenated spelling, as the orchestrator reads
#   both), matrix (the `[general] matrix` pin, String|null: buildSetsForSystem's `matrix`).
#
# Example:
#   (readKernelConfig ./kernels/vector-add-helion).backends  => [ "cuda" "rocm" "xpu" ]
{ lib, ... }:
path:
let
  file = "${toString path}/build.toml";
  toml =
    if builtins.pathExists (path + "/build.toml") then
      builtins.fromTOML (builtins.readFile (path + "/build.toml"))
    else
      throw "kernel-builder: ${file} does not exist; every kernel directory needs a build.toml (create one with `kernel-builder init`)";
  general = toml.general or { };
  frameworks = builtins.filter (f: toml ? ${f}) [
    "torch"
    "torch-noarch"
    "tvm-ffi"
    "mlx-noarch"
  ];
  migrate = "run `kernel-builder update-build ${toString path}` to rewrite it as edition 6";
  edition =
    if general ? edition then
      (
        if general.edition == 6 || general.edition == 5 then
          general.edition
        else
          throw "kernel-builder: ${file}: unsupported build edition ${toString general.edition}; this kernel-builder reads editions 5 and 6"
      )
    else if
      general ? version
      && general ? license
      && general ? backends
      && builtins.length frameworks == 1
      && !(general ? universal)
      && !(toml ? cuda-minver)
    then
      4
    else
      throw "kernel-builder: ${file} uses a legacy format (no `general.edition`, and not the v4 shape that has `version`, `license`, `backends` and one of [torch], [torch-noarch], [tvm-ffi]); ${migrate}";
  framework =
    if builtins.length frameworks == 1 then
      builtins.head frameworks
    else
      throw "kernel-builder: ${file} must have exactly one of [torch], [torch-noarch], [tvm-ffi] or [mlx-noarch] (found ${toString (builtins.length frameworks)}); run `kernel-builder check-config ${toString path}` for details";
  frameworkConfig = toml.${framework};
  name = general.name or (throw "kernel-builder: ${file}: `general.name` is missing");
  # Edition 6 names a kernel's language, which decides its backend (model.rs `Language`).
  languageBackends = {
    cpp-cpu = "cpu";
    cpp-cuda = "cuda";
    cpp-metal = "metal";
    cpp-rocm = "rocm";
    cpp-xpu = "xpu";
    rust-cpu = "cpu";
    rust-cuda-oxide = "cuda";
    rust-cutile = "cuda";
  };
  kernels = map (
    n:
    let
      k = toml.kernel.${n};
      language = if edition == 6 then k.language or null else if k ? backend then "cpp-${k.backend}" else null;
    in
    {
      name = n;
      inherit language;
      backend = if edition == 6 then languageBackends.${language} or null else k.backend or null;
      src = k.src or [ ];
      depends = k.depends or [ ];
    }
  ) (builtins.attrNames (toml.kernel or { }));
  kernelBackends = map (k: k.backend) kernels;
  stableAbi = if framework == "torch" then frameworkConfig.stable-abi or null else null;
in
# `edition` is forced first so that a legacy file fails with the migration message.
builtins.seq edition {
  inherit
    toml
    name
    edition
    framework
    frameworkConfig
    kernels
    ;
  pythonName = builtins.replaceStrings [ "-" ] [ "_" ] name;
  backends = general.backends;
  hasKernelFor = backend: builtins.elem backend kernelBackends;
  stableAbiFor =
    backend:
    if builtins.isString stableAbi then
      stableAbi
    else if builtins.isAttrs stableAbi then
      stableAbi.${backend} or null
    else
      null;
  pyext =
    frameworkConfig.pyext or [
      "py"
      "pyi"
    ];
  extDir = if framework == "tvm-ffi" then "tvm-ffi-ext" else "torch-ext";
  matrix = general.matrix or null;
  cudaMinver = general.cuda.minver or null;
  cudaMaxver = general.cuda.maxver or null;
  torchMinver = if framework == "torch" then frameworkConfig.minver or null else null;
  torchMaxver = if framework == "torch" then frameworkConfig.maxver or null else null;
  # Both spellings, as the orchestrator reads them (check-config refuses a file with both).
  noarchCudaCapabilities =
    if framework == "torch-noarch" then
      frameworkConfig.cuda_capabilities or frameworkConfig.cuda-capabilities or null
    else
      null;
  noarchRocmArchs =
    if framework == "torch-noarch" then
      frameworkConfig.rocm_archs or frameworkConfig.rocm-archs or null
    else
      null;
}
