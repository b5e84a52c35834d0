# internalFailingCell (private): a derivation that evaluates but fails at build time with
# `message` (printed by `kernel-builder nix-support fail`).
{ ... }:
{
  cell,
  src,
  orchestrator,
  name,
  message,
}:
(derivation {
  inherit name;
  system = cell.system;
  builder = "${orchestrator}/bin/kernel-builder";
  args = [
    "nix-support"
    "fail"
    "--message"
    message
  ];
  # The source is an input so the seam has the dependencies the real cell will have.
  inherit src;
})
// {
  inherit cell;
}
