"""Why a Helion kernel is not built in the zip layout (and why `check-config` warns about
`build-layout = "zip"` on one): Helion cannot find its heuristic files inside the archive.

kernels/vector-add-helion's package (with its sm90 heuristic) is imported twice: from a
directory, and through zipimport from an archive holding the same files (the kernels 0.19.1
loader imports a zip variant through zipimport too, so `__file__` and every function's source
path are inside the archive). For each, Helion's own lookup (`find_heuristic_file` of this
venv's Helion, 1.4.0) is asked for the heuristic of `vector_add` on an H100-class device
(`HardwareInfo` of `cuda`/`sm90`, given to the lookup: no GPU is needed to find a file). From the
directory it finds `_helion_aot_vector_add_cuda_sm90.py`; from the archive it finds nothing,
because it checks candidate paths with `Path.exists()` beside the function's source file, and
`<variant>/<id>.zip/vector_add.py` is not a directory on the file system. The kernel would run
Helion's default config, untuned, on every GPU.
"""

from __future__ import annotations

import json
import subprocess
import sys
import zipfile
from pathlib import Path

from conftest import KERNELS

PACKAGE = KERNELS / "vector-add-helion" / "torch-ext" / "vector_add_helion"

PROBE = r'''
import importlib, json, sys
sys.path.insert(0, sys.argv[1])
import helion._hardware as hw
import helion.autotuner.aot_cache as aot
pkg = importlib.import_module("vector_add_helion")
fn = pkg.vector_add
source = fn.fn.__code__.co_filename if hasattr(fn, "fn") else fn.__code__.co_filename
aot.get_hardware_info = lambda device=None: hw.HardwareInfo("cuda", "NVIDIA H100 80GB HBM3", "12.8", "sm90")
found = aot.find_heuristic_file(source, kernel_name="vector_add")
print(json.dumps({"package": pkg.__file__, "source": source, "found": None if found is None else str(found)}))
'''


def probe(root: Path) -> dict:
    proc = subprocess.run([sys.executable, "-c", PROBE, str(root)], capture_output=True, text=True, check=False)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout.strip().splitlines()[-1])


def test_helion_finds_the_heuristic_beside_the_source_but_not_inside_a_zip(tmp_path: Path) -> None:
    files = sorted(p for p in PACKAGE.iterdir() if p.suffix == ".py")
    assert [p.name for p in files] == ["__init__.py", "_helion_aot_vector_add_cuda_sm90.py", "vector_add.py"]
    tree = tmp_path / "files"
    (tree / "vector_add_helion").mkdir(parents=True)
    archive = tmp_path / "vector_add_helion.zip"
    with zipfile.ZipFile(archive, "w") as z:
        for p in files:
            (tree / "vector_add_helion" / p.name).write_bytes(p.read_bytes())
            z.write(p, f"vector_add_helion/{p.name}")

    on_disk = probe(tree)
    assert on_disk["source"] == str(tree / "vector_add_helion" / "vector_add.py")
    assert on_disk["found"] == str(tree / "vector_add_helion" / "_helion_aot_vector_add_cuda_sm90.py")

    zipped = probe(archive)
    assert zipped["package"] == str(archive / "vector_add_helion" / "__init__.py")
    assert zipped["source"] == str(archive / "vector_add_helion" / "vector_add.py")
    assert zipped["found"] is None
