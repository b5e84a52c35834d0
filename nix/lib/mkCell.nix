# mkCell: the derivation of any cell, dispatched on `cell.kind` to mkNoarchCell, mkTorchCell
# or mkTvmFfiCell (one function per cell kind, so compiled cells slot in).
#
# Type: mkCell :: { cell, ... } -> Derivation   (the other attributes are passed through)
{ lib, ... }:
args:
let
  k = args.cell.kind;
in
if k == "noarch" then
  lib.mkNoarchCell args
else if k == "tvm-ffi" then
  lib.mkTvmFfiCell args
else
  lib.mkTorchCell args
