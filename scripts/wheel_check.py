"""Check a kernel-builder wheel's contents against the checkout it was built from.

    python3 scripts/wheel_check.py WHEEL

Exits 1 with every difference on stderr. Checked: the file name (version from Cargo.toml, tag
py3-none-manylinux_2_17_<arch>), the exact list of files (the executable under .data/scripts,
the `kernel_builder` package, the flake under .data/data/share/kernel-builder/flake equal to
`git ls-files` of what scripts/build-wheel.sh stages, byte for byte, the license and the SBOM in
the dist-info), the executable's mode, RECORD's hashes, and that the SBOM is CycloneDX naming
Cargo.lock's versions of the crates it lists.
"""

from __future__ import annotations

import base64
import csv
import hashlib
import io
import json
import platform
import re
import subprocess
import sys
import tomllib
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
# Keep in step with scripts/build-wheel.sh (`flake_files`).
FLAKE_FILES = ["flake.nix", "flake.lock", "Cargo.toml", "Cargo.lock", "src", "nix", "LICENSE"]
FLAKE_PREFIX = "share/kernel-builder/flake/"


def main(wheel_path: str) -> int:
    errors: list[str] = []
    cargo = tomllib.loads((ROOT / "Cargo.toml").read_text())
    version = cargo["package"]["version"]
    arch = platform.machine()
    name = Path(wheel_path).name
    want_name = f"kernel_builder-{version}-py3-none-manylinux2014_{arch}.manylinux_2_17_{arch}.whl"
    if name != want_name:
        errors.append(f"wheel file name {name!r}, expected {want_name!r}")
    data = f"kernel_builder-{version}.data"
    info = f"kernel_builder-{version}.dist-info"

    tracked = subprocess.run(
        ["git", "ls-files", "-z", "--", *FLAKE_FILES], cwd=ROOT, check=True, capture_output=True
    ).stdout.decode().split("\0")
    flake = {f"{data}/data/{FLAKE_PREFIX}{p}": p for p in tracked if p}
    sbom = f"{info}/sboms/kernel-builder.cyclonedx.json"
    want = {
        f"{data}/scripts/kernel-builder",
        "kernel_builder/__init__.py",
        "kernel_builder/__main__.py",
        f"{info}/METADATA",
        f"{info}/WHEEL",
        f"{info}/RECORD",
        f"{info}/licenses/LICENSE",
        sbom,
        *flake,
    }

    with zipfile.ZipFile(wheel_path) as z:
        got = {i.filename for i in z.infolist() if not i.is_dir()}
        for extra in sorted(got - want):
            errors.append(f"unexpected file in the wheel: {extra}")
        for missing in sorted(want - got):
            errors.append(f"missing from the wheel: {missing}")

        for entry, path in flake.items():
            if entry in got and z.read(entry) != (ROOT / path).read_bytes():
                errors.append(f"{entry} differs from {path} in the checkout")
        for entry, path in [
            ("kernel_builder/__init__.py", "python/kernel_builder/__init__.py"),
            ("kernel_builder/__main__.py", "python/kernel_builder/__main__.py"),
            (f"{info}/licenses/LICENSE", "LICENSE"),
        ]:
            if entry in got and z.read(entry) != (ROOT / path).read_bytes():
                errors.append(f"{entry} differs from {path} in the checkout")

        exe = f"{data}/scripts/kernel-builder"
        if exe in got:
            mode = (z.getinfo(exe).external_attr >> 16) & 0o777
            if mode != 0o755:
                errors.append(f"{exe} has mode {mode:o}, expected 755")
            if not z.read(exe).startswith(b"\x7fELF"):
                errors.append(f"{exe} is not an ELF executable")

        wheel_meta = z.read(f"{info}/WHEEL").decode()
        if f"Tag: py3-none-manylinux_2_17_{arch}" not in wheel_meta.splitlines():
            errors.append(f"WHEEL has no `Tag: py3-none-manylinux_2_17_{arch}`:\n{wheel_meta}")
        metadata = z.read(f"{info}/METADATA").decode()
        for line in [f"Name: kernel-builder", f"Version: {version}", "License-Expression: Apache-2.0",
                     "License-File: LICENSE"]:
            if line not in metadata.splitlines():
                errors.append(f"METADATA has no line `{line}`")

        # RECORD: every other file once, with its sha256 and size.
        rows = list(csv.reader(io.StringIO(z.read(f"{info}/RECORD").decode())))
        recorded = {r[0] for r in rows}
        if recorded != got:
            errors.append(f"RECORD lists {sorted(recorded ^ got)[:5]}… differently from the archive")
        for path, digest, size in rows:
            if path == f"{info}/RECORD":
                continue
            body = z.read(path)
            want_digest = "sha256=" + base64.urlsafe_b64encode(hashlib.sha256(body).digest()).rstrip(b"=").decode()
            if digest != want_digest or size != str(len(body)):
                errors.append(f"RECORD's hash or size of {path} is wrong")

        if sbom in got:
            errors.extend(check_sbom(json.loads(z.read(sbom)), version))

    for e in errors:
        print(f"wheel_check: {e}", file=sys.stderr)
    return 1 if errors else 0


def check_sbom(doc: dict, version: str) -> list[str]:
    """The SBOM is CycloneDX, describes kernel-builder `version`, and every crate it names has
    the version Cargo.lock pins; the crates the binary is mostly made of are among them."""
    errors = []
    if doc.get("bomFormat") != "CycloneDX":
        errors.append(f"the SBOM's bomFormat is {doc.get('bomFormat')!r}, not CycloneDX")
    top = doc.get("metadata", {}).get("component", {})
    if (top.get("name"), top.get("version")) != ("kernel-builder", version):
        errors.append(f"the SBOM describes {top.get('name')} {top.get('version')}, not kernel-builder {version}")
    lock = tomllib.loads((ROOT / "Cargo.lock").read_text())
    pinned: dict[str, set[str]] = {}
    for p in lock["package"]:
        pinned.setdefault(p["name"], set()).add(p["version"])
    named = {}
    for c in doc.get("components", []):
        named[c["name"]] = c.get("version")
        if c["name"] not in pinned:
            errors.append(f"the SBOM names {c['name']}, which Cargo.lock does not")
        elif c.get("version") not in pinned[c["name"]]:
            errors.append(f"the SBOM has {c['name']} {c.get('version')}, Cargo.lock {sorted(pinned[c['name']])}")
    for crate in ["clap", "serde", "toml_edit", "ureq", "rustls", "zip", "sha2"]:
        if crate not in named:
            errors.append(f"the SBOM does not name {crate}")
    return errors


if __name__ == "__main__":
    if len(sys.argv) != 2 or not re.search(r"\.whl$", sys.argv[1]):
        sys.exit("usage: python3 scripts/wheel_check.py WHEEL")
    sys.exit(main(sys.argv[1]))
