# mkTvmFfiCell: the derivation of one compiled tvm-ffi cell.
#
# Seam for the compiled-kernels work, like mkTorchCell: evaluates, fails when built with a
# message that says so.
#
# Type: mkTvmFfiCell :: { cell, src, orchestrator, name ? String, ... } -> Derivation
{ lib, ... }:
{
  cell,
  src,
  orchestrator,
  name ? "kernel-${cell.name}",
  ...
}:
lib.internalFailingCell {
  inherit cell src orchestrator name;
  message = "kernel-builder: cell ${cell.name} (tvm-ffi, ${cell.backend}) is compiled code; compiled cells arrive with the compiled-kernels work.";
}
