# parseVersion: a dotted version string as a list of integers.
#
# Type: parseVersion :: String -> [Int]
#
# Example:
#   parseVersion "2025.3.2"  => [ 2025 3 2 ]
#   parseVersion "08.1"      => [ 8 1 ]
#
# Errors: throws when a component is not a decimal number (e.g. "2.x"), naming the version.
{ ... }:
version:
let
  components = builtins.filter builtins.isString (builtins.split "\\." version);
  toInt =
    s:
    let
      m = builtins.match "0*([0-9]+)" s;
    in
    if m == null then
      throw "kernel-builder: version `${version}` must be dot-separated numbers, e.g. \"2.12\""
    else
      builtins.fromJSON (builtins.head m);
in
map toInt components
