# mkCell: the derivation of any cell, dispatched on `cell.kind`: mkNoarchCell for a noarch
# cell, mkCompiledCell for the others (torch, stable-abi, tvm-ffi).
#
# Type: mkCell :: { cell, ... } -> Derivation   (the other attributes are passed through)
{ lib, ... }:
args:
let
  k = args.cell.kind;
in
if k == "noarch" then lib.mkNoarchCell args else lib.mkCompiledCell args
