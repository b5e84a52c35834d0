{
  description = "{{name}}: a PyTorch kernel built with kernel-builder";

  inputs.kernel-builder.url = "{{flake_ref}}";

  outputs =
    { self, kernel-builder }:
    kernel-builder.lib.genKernelFlakeOutputs {
      inherit self;
      path = ./.;
    };
}
