#!/usr/bin/env bash
# check-config and update-build on the corpus: edition 5 against edition 6, and this build
# against a build of an earlier commit (KB_REF), with the same inputs.
#
# Usage: KB=target/debug/kernel-builder KB_REF=/path/to/older/kernel-builder bench/edition6.sh DIR
# Prepares, under DIR (kept):
#   orig/  every corpus kernel materialised (its build.toml, an empty file per path of files.txt)
#   ed6/   each of those rewritten by `update-build --license Apache-2.0` (edition 6), where it can be
#   ed5/   the same files written back as edition 5 (`language = "cpp-X"` -> `backend = "X"`)
# and prints the commands to time.
set -euo pipefail
dir=${1:?usage: bench/edition6.sh DIR}
kb=$(realpath "${KB:-target/debug/kernel-builder}")
corpus=${KERNEL_BUILDER_CORPUS:-$(dirname "$(realpath .)")/shared/corpus}
rm -rf "$dir" && mkdir -p "$dir/orig" "$dir/ed6" "$dir/ed5"
python3 - "$corpus" "$dir/orig" <<'PY'
import json, shutil, sys
from pathlib import Path
corpus, dest = Path(sys.argv[1]), Path(sys.argv[2])
expected = json.loads((corpus / "expected.json").read_text())
for src in sorted(p for p in corpus.iterdir() if (p / "build.toml").is_file()):
    extra = (expected.get(src.name) or {}).get("sources_missing_from_files_txt") or []
    lines = (src / "files.txt").read_text().splitlines() if (src / "files.txt").is_file() else []
    paths = [l.strip().rstrip("/") for l in lines] + extra
    paths = [p for p in paths if p and p != "build.toml" and not p.startswith("/") and ".." not in p.split("/")]
    d = dest / src.name
    d.mkdir()
    for p in paths:
        if not any(q.startswith(p + "/") for q in paths):
            (d / p).parent.mkdir(parents=True, exist_ok=True)
            (d / p).touch()
    shutil.copy(src / "build.toml", d / "build.toml")
PY
for d in "$dir"/orig/*/; do
  name=$(basename "$d")
  cp -r "$d" "$dir/ed6/$name"
  if "$kb" update-build --license Apache-2.0 "$dir/ed6/$name" >/dev/null 2>&1; then
    cp -r "$dir/ed6/$name" "$dir/ed5/$name"
    sed -i -E 's/^edition = 6$/edition = 5/; s/^language = "cpp-(cpu|cuda|metal|rocm|xpu)"/backend = "\1"/' "$dir/ed5/$name/build.toml"
  else
    rm -rf "${dir:?}/ed6/$name"
  fi
done
echo "orig: $(ls "$dir/orig" | wc -l) kernels; ed6/ed5: $(ls "$dir/ed6" | wc -l) rewritten"
# One process per file, as a user runs them; time each pair in turn (A B A B ...), e.g. with
# `/usr/bin/time -f '%U %S %e'`, and compare medians of the pairwise ratios.
ref=${KB_REF:-}
loop() { echo "sh -c 'for d in $dir/$2/*/; do $1 $3 \"\$d\" >/dev/null 2>&1; done'"; }
echo "check-config, edition 6:        $(loop "$kb" ed6 check-config)"
echo "check-config, edition 5:        $(loop "$kb" ed5 check-config)"
echo "update-build --check, edition 6: $(loop "$kb" ed6 'update-build --check')"
echo "update-build --check, edition 5: $(loop "$kb" ed5 'update-build --check')"
echo "check-config, corpus as is:     $(loop "$kb" orig check-config)"
echo "update-build --check, as is:    $(loop "$kb" orig 'update-build --check --license Apache-2.0')"
if [ -n "$ref" ]; then
  echo "the same two with KB_REF:        $(loop "$ref" orig check-config)"
  echo "                                 $(loop "$ref" orig 'update-build --check --license Apache-2.0')"
fi
