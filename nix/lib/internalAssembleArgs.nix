# internalAssembleArgs (private): the `kernel-builder assemble` arguments every cell's
# derivation starts with — the source, the backend, `$out` — and, last, the kernel's
# provenance (`--kernel-commit C [--kernel-dirty]` when a commit is known). mkNoarchCell and
# internalCompiledCell put their own flags between the two.
#
# Type: internalAssembleArgs :: { cell, src, kernelCommit, kernelDirty } -> { head :: [String], provenance :: [String] }
{ ... }:
{
  cell,
  src,
  kernelCommit,
  kernelDirty,
}:
{
  head = [
    "assemble"
    "--source"
    "${src}"
    "--backend"
    cell.backend
    "--out"
    (builtins.placeholder "out")
  ];
  provenance =
    if kernelCommit == null then
      [ ]
    else
      [
        "--kernel-commit"
        kernelCommit
      ]
      ++ (if kernelDirty then [ "--kernel-dirty" ] else [ ]);
}
