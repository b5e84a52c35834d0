# internalStripLeadingDot (private): ".json" -> "json"; other strings unchanged.
{ ... }:
s:
let
  m = builtins.match "\\.(.*)" s;
in
if m == null then s else builtins.head m
