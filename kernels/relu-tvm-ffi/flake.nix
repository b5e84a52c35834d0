{
  description = "relu-tvm-ffi: a compiled tvm-ffi kernel (cpu, cuda) built with kernel-builder";

  # Inside this repository the builder is the repository's own flake. A kernel in its own
  # repository uses `github:<owner>/kernel-builder` instead.
  inputs.kernel-builder.url = "path:../..";

  outputs =
    { self, kernel-builder }:
    kernel-builder.lib.genKernelFlakeOutputs {
      inherit self;
      path = ./.;
    };
}
