#!/usr/bin/env bash
# The wheel as a user installs it (`pip install kernel-builder`, `uvx kernel-builder`), run by
# scripts/test.sh after the cargo tests:
#   1. package the statically linked release build that scripts/setup-nix.sh made (same
#      RUSTFLAGS, profile and target, so cargo finds it up to date and maturin only links and
#      packs it) with scripts/build-wheel.sh; check its contents (scripts/wheel_check.py) and
#      its manylinux tag (auditwheel show);
#   2. install it with pip into a fresh venv and run it from a directory with no checkout above
#      it and no checkout on PATH: --version, `python -m kernel_builder`, `init` (which must name
#      the flake the wheel installed, never this checkout) and `build-and-copy --nix never` of
#      the new noarch kernel (exact tree), then `--nix always` with the flake the wheel
#      installed (needs Nix: scripts/setup-nix.sh), which must give the same NAR hashes;
#   3. the same with `uvx --from <wheel>` (uv from PyPI), and the executable and flake found
#      after `pip install --target`, `--prefix` and `--user`.
# Prints the wheel's size and pip's install time. Tools (maturin, uv, auditwheel) are pinned and
# installed from PyPI into target/wheel-tools.
set -euo pipefail
cd "$(dirname "$0")/.."
repo=$PWD
fail() { echo "test-wheel.sh: FAILED: $*" >&2; exit 1; }
now() { date +%s.%N; }
since() { python3 -c "import sys; print(f'{float(sys.argv[2]) - float(sys.argv[1]):.1f}')" "$1" "$(now)"; }
t_start=$(now)

tools=target/wheel-tools
if [ ! -x "$tools/bin/uv" ] || ! "$tools/bin/maturin" --version 2>/dev/null | grep -qx 'maturin 1.16.0'; then
    rm -rf "$tools"
    python3 -m venv "$tools"
    "$tools/bin/pip" install -q --disable-pip-version-check maturin==1.16.0 uv==0.13.9 auditwheel==6.8.2
fi

# 1. The wheel, from the build scripts/setup-nix.sh made.
target=x86_64-unknown-linux-gnu
case "$(uname -m)" in aarch64) target=aarch64-unknown-linux-gnu ;; esac
t0=$(now)
wheel=$(RUSTFLAGS='-C target-feature=+crt-static' MATURIN="$repo/$tools/bin/maturin" \
    scripts/build-wheel.sh --target "$target" | tail -n 1)
echo "test-wheel.sh: built $(basename "$wheel") in $(since "$t0") s" >&2
python3 scripts/wheel_check.py "$wheel" || fail "the wheel's contents (above)"
# The tag auditwheel finds must be manylinux_2_17 or older (the static build needs no glibc
# symbols at all: manylinux_2_5).
audit=$("$tools/bin/auditwheel" show "$wheel" 2>&1) || fail "auditwheel show: $audit"
glibc_minor=$(tr '\n' ' ' <<<"$audit" | sed -n "s/.*consistent with the following platform tag: \"manylinux_2_\([0-9]*\)_$(uname -m)\".*/\1/p")
[ -n "$glibc_minor" ] && [ "$glibc_minor" -le 17 ] || fail "auditwheel does not find the wheel manylinux_2_17: $audit"
size=$(stat -c %s "$wheel")

# 2. A user's machine: a scratch directory outside any checkout, PATH without this checkout or
# any other kernel-builder, none of the test suite's KERNEL_BUILDER_* settings.
scratch=$(mktemp -d "${TMPDIR:-/tmp}/kb-wheel.XXXXXX")
trap 'rm -rf "$scratch"' EXIT
case "$scratch/" in "$repo"/*) fail "the scratch directory $scratch is inside the checkout" ;; esac
if git -C "$scratch" rev-parse --show-toplevel >/dev/null 2>&1; then
    fail "$scratch is inside a git work tree"
fi
clean_path=
IFS=: read -r -a path_dirs <<<"$PATH"
for d in "${path_dirs[@]}"; do
    case "$d/" in "$repo"/* | "") continue ;; esac
    [ -e "$d/kernel-builder" ] && continue
    clean_path="${clean_path:+$clean_path:}$d"
done
user_env() {
    env -u KERNEL_BUILDER_ORCHESTRATOR -u KERNEL_BUILDER_FLAKE_REF -u KERNEL_BUILDER -u CARGO_TARGET_DIR \
        -u VIRTUAL_ENV -u PYTHONPATH PATH="$1:$clean_path" "${@:2}"
}

venv="$scratch/venv"
python3 -m venv "$venv"
t0=$(now)
"$venv/bin/pip" install -q --disable-pip-version-check --no-index "$wheel"
install_s=$(since "$t0")
[ "$(cd "$scratch" && user_env "$venv/bin" sh -c 'command -v kernel-builder')" = "$venv/bin/kernel-builder" ] \
    || fail "kernel-builder on PATH is not the venv's"
version=$(python3 -c 'import tomllib; print(tomllib.load(open("Cargo.toml", "rb"))["package"]["version"])')

# The version line, also through `python -m kernel_builder`.
v=$(cd "$scratch" && user_env "$venv/bin" kernel-builder --version)
case "$v" in "kernel-builder $version (matrix "*) ;; *) fail "kernel-builder --version printed: $v" ;; esac
[ "$(cd "$scratch" && user_env "$venv/bin" python -m kernel_builder --version)" = "$v" ] \
    || fail "python -m kernel_builder --version differs from kernel-builder --version"

# `init` names the flake the wheel installed, and says so.
check_init() { # DIR BIN WANT_FLAKE_DIR: init a torch kernel in DIR/wheel-add with BIN
    local out
    out=$(cd "$1" && user_env "$(dirname "$2")" "$2" init --name test/wheel-add --template torch -- wheel-add) \
        || fail "init with $2"
    grep -qxF "  flake.nix takes kernel-builder from \`path:$3\` (the flake installed with this kernel-builder's wheel); to use another, edit \`inputs.kernel-builder.url\` in flake.nix (or pass --flake-ref)" <<<"$out" \
        || fail "init with $2 did not name path:$3: $out"
    grep -qxF "  inputs.kernel-builder.url = \"path:$3\";" "$1/wheel-add/flake.nix" \
        || fail "$1/wheel-add/flake.nix does not take path:$3: $(grep -n url "$1/wheel-add/flake.nix")"
    cmp -s "$3/flake.nix" flake.nix || fail "$3/flake.nix is not this checkout's flake.nix"
    if grep -rqF "$repo" "$1/wheel-add"; then
        fail "the new kernel names the checkout $repo: $(grep -rlF "$repo" "$1/wheel-add")"
    fi
}
mkdir "$scratch/venv-user"
check_init "$scratch/venv-user" "$venv/bin/kernel-builder" "$venv/share/kernel-builder/flake"

# build-and-copy of the noarch kernel, natively: exactly its two variants and the manifest.
(cd "$scratch/venv-user/wheel-add" && user_env "$venv/bin" kernel-builder build-and-copy --nix never .) \
    || fail "build-and-copy --nix never"
tree=$(cd "$scratch/venv-user/wheel-add/build" && find . -mindepth 1 | LC_ALL=C sort | tr '\n' ' ')
want_tree="./hashes.json ./torch-cpu ./torch-cpu/__init__.py ./torch-cpu/_ops.py ./torch-cpu/metadata.json ./torch-cpu/op.py ./torch-cpu/symbols.json ./torch-cuda ./torch-cuda/__init__.py ./torch-cuda/_ops.py ./torch-cuda/metadata.json ./torch-cuda/op.py ./torch-cuda/symbols.json "
[ "$tree" = "$want_tree" ] || fail "build/ holds: $tree"
python3 - "$scratch/venv-user/wheel-add/build" "$version" <<'PY' || fail "build/ metadata (above)"
import json, sys
build, version = sys.argv[1], sys.argv[2]
hashes = json.load(open(f"{build}/hashes.json"))
assert hashes["kernel_builder"] == version, hashes
assert sorted(hashes["variants"]) == ["torch-cpu", "torch-cuda"], hashes
for v, backend in [("torch-cpu", "cpu"), ("torch-cuda", "cuda")]:
    m = json.load(open(f"{build}/{v}/metadata.json"))
    assert m["backend"] == {"type": backend}, m
    assert m["provenance"]["kernel-builder"]["version"] == version, m
PY

# The same kernel through Nix with the flake the wheel installed (the kernel's flake.nix names
# it): offline, since this static executable hands itself to the cells as their builder. The
# variants must be the native ones, byte for byte (same NAR hashes).
cp "$scratch/venv-user/wheel-add/build/hashes.json" "$scratch/native-hashes.json"
(cd "$scratch/venv-user/wheel-add" && user_env "$venv/bin" kernel-builder build-and-copy --nix always .) \
    || fail "build-and-copy --nix always with the wheel's flake"
cmp "$scratch/native-hashes.json" "$scratch/venv-user/wheel-add/build/hashes.json" \
    || fail "the Nix build's hashes.json differs from the native build's"

# 3. uvx, from the wheel file, offline: its own environment in uv's cache.
export UV_CACHE_DIR="$scratch/uv-cache" UV_TOOL_DIR="$scratch/uv-tools" UV_PYTHON_DOWNLOADS=never UV_NO_CONFIG=1
uvx=("$repo/$tools/bin/uvx" --offline --from "$wheel" kernel-builder)
[ "$(cd "$scratch" && user_env "$scratch/none" "${uvx[@]}" --version)" = "$v" ] || fail "uvx … --version"
mkdir "$scratch/uvx-user"
uvx_out=$(cd "$scratch/uvx-user" && user_env "$scratch/none" "${uvx[@]}" init --name test/wheel-add --template torch -- wheel-add) \
    || fail "uvx … init"
uvx_flake=$(sed -n 's/^  inputs.kernel-builder.url = "path:\(.*\)";$/\1/p' "$scratch/uvx-user/wheel-add/flake.nix")
case "$uvx_flake" in "$UV_CACHE_DIR"/*/share/kernel-builder/flake) ;; *) fail "uvx init wrote kernel-builder.url = $uvx_flake: $uvx_out" ;; esac
cmp -s "$uvx_flake/flake.nix" flake.nix || fail "uvx's $uvx_flake/flake.nix is not this checkout's"
(cd "$scratch/uvx-user/wheel-add" && user_env "$scratch/none" "${uvx[@]}" build-and-copy --nix never .) \
    || fail "uvx … build-and-copy --nix never"
[ "$(cd "$scratch/uvx-user/wheel-add/build" && find . -mindepth 1 | LC_ALL=C sort | tr '\n' ' ')" = "$want_tree" ] \
    || fail "uvx's build/ differs"

# pip's other layouts: where `python -m kernel_builder` finds the executable, and which flake
# that executable names. A second venv without the wheel runs them (the first one's own bin/
# would be found first, and its pip sees the wheel installed and installs nothing), seeing
# user site-packages for `--user`.
python3 -m venv --system-site-packages "$scratch/venv-sys"
bare="$scratch/venv-sys/bin/python"
found() { # PYTHON [ENV...]: the executable kernel_builder finds
    (cd "$scratch" && user_env "$scratch/none" "${@:2}" "$1" -c 'import kernel_builder; print(kernel_builder.find_kernel_builder_bin())')
}
pyver=$("$venv/bin/python" -c 'import sys; print(f"python{sys.version_info[0]}.{sys.version_info[1]}")')
[ "$(found "$venv/bin/python")" = "$venv/bin/kernel-builder" ] || fail "in the venv, kernel_builder finds $(found "$venv/bin/python")"

"$scratch/venv-sys/bin/pip" install -q --disable-pip-version-check --no-index --target "$scratch/t" "$wheel"
[ "$(found "$bare" PYTHONPATH="$scratch/t")" = "$scratch/t/bin/kernel-builder" ] \
    || fail "--target: kernel_builder finds $(found "$bare" PYTHONPATH="$scratch/t")"
mkdir "$scratch/target-user"
check_init "$scratch/target-user" "$scratch/t/bin/kernel-builder" "$scratch/t/share/kernel-builder/flake"

# (Not the first venv's pip: it finds the wheel already installed and does nothing.)
"$scratch/venv-sys/bin/pip" install -q --disable-pip-version-check --no-index --prefix "$scratch/p" "$wheel"
site="$scratch/p/lib/$pyver/site-packages"
[ "$(found "$bare" PYTHONPATH="$site")" = "$scratch/p/bin/kernel-builder" ] \
    || fail "--prefix: kernel_builder finds $(found "$bare" PYTHONPATH="$site")"
[ "$(cd "$scratch" && user_env "$scratch/none" PYTHONPATH="$site" "$bare" -m kernel_builder --version)" = "$v" ] \
    || fail "--prefix: python -m kernel_builder --version"
mkdir "$scratch/prefix-user"
check_init "$scratch/prefix-user" "$scratch/p/bin/kernel-builder" "$scratch/p/share/kernel-builder/flake"

PYTHONUSERBASE="$scratch/u" "$scratch/venv-sys/bin/pip" install -q --disable-pip-version-check --no-index --user "$wheel"
[ "$(found "$bare" PYTHONUSERBASE="$scratch/u")" = "$scratch/u/bin/kernel-builder" ] \
    || fail "--user: kernel_builder finds $(found "$bare" PYTHONUSERBASE="$scratch/u")"
mkdir "$scratch/user-user"
check_init "$scratch/user-user" "$scratch/u/bin/kernel-builder" "$scratch/u/share/kernel-builder/flake"

echo "test-wheel.sh: ok: $(basename "$wheel"): $size bytes, pip install ${install_s} s; whole check $(since "$t_start") s" >&2
