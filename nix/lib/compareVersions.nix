# compareVersions: numeric, component-wise comparison of dotted versions.
#
# Missing components count as 0, so "13.0" == "13" (builtins.compareVersions would call
# "13.0" newer than "13" and drop cells, which is how upstream lost its cu130 variants).
# This is the same rule as the Rust model's `Version` ordering.
#
# Type: compareVersions :: String -> String -> Int   (-1, 0 or 1)
#
# Example:
#   compareVersions "13.0" "13"    => 0
#   compareVersions "2.9" "2.12"   => -1
#
# Errors: a component that is not a decimal number throws, naming the version.
{ lib, ... }:
a: b:
let
  pa = lib.parseVersion a;
  pb = lib.parseVersion b;
  len = if builtins.length pa > builtins.length pb then builtins.length pa else builtins.length pb;
  at = p: i: if i < builtins.length p then builtins.elemAt p i else 0;
  go =
    i:
    if i >= len then
      0
    else if at pa i < at pb i then
      -1
    else if at pa i > at pb i then
      1
    else
      go (i + 1);
in
go 0
