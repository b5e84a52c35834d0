# internalStripDotSlash (private): drop a leading "./" from a relative path string.
#
# Type: internalStripDotSlash :: String -> String
{ ... }:
p:
let
  m = builtins.match "(\\./)+(.*)" p;
in
if m == null then p else builtins.elemAt m 1
