# flattenVersion: the `major.minor` of a version without the dot, as used in variant names.
#
# A one-component version is padded with 0.
#
# Type: flattenVersion :: String -> String
#
# Example:
#   flattenVersion "2.12"      => "212"
#   flattenVersion "2025.3.2"  => "20253"
#   flattenVersion "12"        => "120"
{ lib, ... }:
version:
let
  p = lib.parseVersion version ++ [
    0
    0
  ];
in
"${toString (builtins.elemAt p 0)}${toString (builtins.elemAt p 1)}"
