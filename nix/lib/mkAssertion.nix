# mkAssertion: a tiny check derivation for a pure evaluation test: it builds (with Nix's
# built-in `builtin:buildenv`, no executable needed) when `expr == expected`, and evaluation
# throws with both values when they differ, so `nix flake check` names the failed test.
#
# Type: mkAssertion :: { name :: String, expr, expected, system :: String } -> Derivation
#
# Example:
#   mkAssertion { name = "flatten-cuda"; expr = flattenVersion "12.6"; expected = "126"; system = "x86_64-linux"; }
{ ... }:
{
  name,
  expr,
  expected,
  system,
}:
if expr == expected then
  derivation {
    name = "assert-${name}";
    inherit system;
    builder = "builtin:buildenv";
    derivations = [ ];
    manifest = "/dev/null";
    preferLocalBuild = true;
  }
else
  throw "kernel-builder check ${name} failed:\n  got:      ${builtins.toJSON expr}\n  expected: ${builtins.toJSON expected}"
