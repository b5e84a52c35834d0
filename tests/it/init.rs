//! `kernel-builder init`: the files of every template, the resolution of PATH and `--name`,
//! git staging, and the error cases (each asserting its exact message and that nothing was
//! written). Issue 4.

use std::path::Path;

use assert_cmd::Command;
use camino::{Utf8Path, Utf8PathBuf};

/// A scratch directory to run `init` in; commands run with it as the working directory and a
/// local flake reference, so no test reaches the network.
struct Scratch {
    _tmp: tempfile::TempDir,
    root: Utf8PathBuf,
}

impl Scratch {
    fn new() -> Scratch {
        let tmp = tempfile::tempdir().unwrap();
        let root = Utf8PathBuf::from_path_buf(tmp.path().to_owned()).unwrap();
        Scratch { _tmp: tmp, root }
    }

    fn kb(&self) -> Command {
        let mut c = crate::util::kb();
        c.current_dir(&self.root).env("KERNEL_BUILDER_FLAKE_REF", flake_ref()).env_remove("GIT_DIR");
        c
    }

    /// `kernel-builder init ARGS…`: asserts success and returns stdout.
    fn init(&self, args: &[&str]) -> String {
        let out = self.kb().arg("init").args(args).output().unwrap();
        assert!(out.status.success(), "init {args:?} failed:\n{}", String::from_utf8_lossy(&out.stderr));
        String::from_utf8(out.stdout).unwrap()
    }

    /// `kernel-builder init ARGS…`, expected to fail: (exit code, stdout, stderr).
    fn init_fails(&self, args: &[&str]) -> (i32, String, String) {
        let out = self.kb().arg("init").args(args).output().unwrap();
        assert!(!out.status.success(), "init {args:?} should have failed");
        (
            out.status.code().unwrap(),
            String::from_utf8(out.stdout).unwrap(),
            String::from_utf8(out.stderr).unwrap(),
        )
    }
}

/// The root flake of this repository, as a local flake reference.
fn flake_ref() -> String {
    format!("path:{}", env!("CARGO_MANIFEST_DIR"))
}

/// Every file under `dir` except `.git/`, relative, sorted, with its mode.
fn tree(dir: &Utf8Path) -> Vec<String> {
    let mut out: Vec<String> = walkdir::WalkDir::new(dir)
        .min_depth(1)
        .into_iter()
        .filter_entry(|e| e.file_name() != ".git")
        .map(|e| e.unwrap())
        .filter(|e| e.file_type().is_file())
        .map(|e| {
            use std::os::unix::fs::PermissionsExt;
            let mode = e.metadata().unwrap().permissions().mode() & 0o777;
            let rel = e.path().strip_prefix(dir.as_std_path()).unwrap();
            format!("{mode:o} {}", rel.to_str().unwrap())
        })
        .collect();
    out.sort();
    out
}

/// Every entry (files and directories) under `dir`, relative and sorted.
fn entries(dir: &Utf8Path) -> Vec<String> {
    let mut out: Vec<String> = walkdir::WalkDir::new(dir)
        .min_depth(1)
        .into_iter()
        .map(|e| e.unwrap().path().strip_prefix(dir.as_std_path()).unwrap().to_str().unwrap().to_owned())
        .collect();
    out.sort();
    out
}

/// The files staged in the git repository holding `dir`, relative to `dir`.
fn staged(dir: &Utf8Path) -> Vec<String> {
    // (`util::git` asserts that it succeeds.)
    let out = crate::util::git(dir.as_std_path(), &["ls-files", "--stage", "--", "."]);
    out.lines().map(|l| l.split('\t').nth(1).unwrap().to_owned()).collect()
}

fn read(path: impl AsRef<Path>) -> String {
    std::fs::read_to_string(path.as_ref()).unwrap()
}

fn with_mode(files: &[&str]) -> Vec<String> {
    files.iter().map(|f| format!("644 {f}")).collect()
}

const HELION_FILES: [&str; 10] = [
    ".github/workflows/build.yml",
    ".gitignore",
    "CARD.md",
    "README.md",
    "bench.py",
    "build.toml",
    "flake.nix",
    "tests/test_vector_add_helion.py",
    "torch-ext/vector_add_helion/__init__.py",
    "torch-ext/vector_add_helion/op.py",
];

/// Upstream's documented command: PATH after `--`.
#[test]
fn upstream_example_command() {
    let s = Scratch::new();
    let stdout = s.init(&[
        "--name",
        "myorg/vector-add-helion",
        "--backends",
        "cuda",
        "rocm",
        "xpu",
        "--",
        "vector-add-helion",
    ]);
    assert_eq!(
        stdout,
        format!(
            "Created `myorg/vector-add-helion` in `vector-add-helion` (helion template; backends: cuda, rocm, xpu; 10 files)\n  \
             initialized a new git repository and staged the files\n  \
             flake.nix takes kernel-builder from `{}` (from --flake-ref or KERNEL_BUILDER_FLAKE_REF); to use another, \
             edit `inputs.kernel-builder.url` in flake.nix (or pass --flake-ref)\n\
             Next:\n  cd vector-add-helion\n  kernel-builder build-and-copy .\n  python -m pytest tests\n",
            flake_ref()
        )
    );
    let dir = s.root.join("vector-add-helion");
    assert_eq!(tree(&dir), with_mode(&HELION_FILES));
    assert_eq!(staged(&dir), HELION_FILES);
    assert!(dir.join(".git").is_dir());
    assert_eq!(
        read(dir.join("build.toml")),
        r#"[general]
name = "vector-add-helion"
version = 1
edition = 6
license = "Apache-2.0"
backends = ["cuda", "rocm", "xpu"]
python-depends = ["helion"]

[general.hub]
repo-id = "myorg/vector-add-helion"

# A noarch kernel: Python code only, built into one variant per backend (`torch-cuda`, ...).
# The files under torch-ext/vector_add_helion/ with a `pyext` extension (default: py, pyi) are shipped.
[torch-noarch]
"#
    );
    assert_eq!(
        read(dir.join("flake.nix")),
        format!(
            r#"{{
  description = "vector-add-helion: a PyTorch kernel built with kernel-builder";

  inputs.kernel-builder.url = "{}";

  outputs =
    {{ self, kernel-builder }}:
    kernel-builder.lib.genKernelFlakeOutputs {{
      inherit self;
      path = ./.;
    }};
}}
"#,
            flake_ref()
        )
    );
    assert_eq!(
        read(dir.join(".gitignore")).lines().filter(|l| !l.starts_with('#')).collect::<Vec<_>>(),
        ["/build/", "/result*", ".helion_aot/", "__pycache__/", "*.pyc"]
    );
    let op = read(dir.join("torch-ext/vector_add_helion/op.py"));
    assert!(
        op.contains("@helion.aot_kernel()\ndef vector_add_helion_kernel(x: torch.Tensor, y: torch.Tensor)")
    );
    assert_eq!(
        read(dir.join("torch-ext/vector_add_helion/__init__.py")),
        "\"\"\"vector-add-helion: An element-wise addition kernel written in Helion, with configurations tuned \
         ahead of time.\"\"\"\n\nfrom .op import vector_add_helion\n\n__all__ = [\"vector_add_helion\"]\n"
    );
    let test = read(dir.join("tests/test_vector_add_helion.py"));
    assert!(test.contains("BUILD_DIR = Path(__file__).parent.parent / \"build\""));
    assert!(test.contains("return get_local_kernel(BUILD_DIR, backend=BACKEND)"));
    assert!(test.contains("BACKENDS = [\"cuda\", \"rocm\", \"xpu\"]"));
    let bench = read(dir.join("bench.py"));
    assert!(
        bench.contains("run by Helion's AOT runner through\n\n    kernel-builder tune . --effort quick\n")
    );
    assert!(bench.contains("SIZES = [1 << 16, 1 << 20, 1 << 24]"));
    let readme = read(dir.join("README.md"));
    assert!(readme.contains("`torch-ext/vector_add_helion/_helion_aot_op_<device>_<compute>.py`"));
    // Tuning goes through `kernel-builder tune` (what check-config's hint names), and a
    // heuristic ships only in its own backend's variant (found by review: the README said
    // `python -m helion.autotuner.aot_runner` and "ships it in every variant").
    assert!(readme.contains("kernel-builder tune . --effort quick\n"), "{readme}");
    assert!(readme.contains("`kernel-builder tune . --effort quick -- <bench args>`"), "{readme}");
    assert!(!readme.contains("aot_runner"), "{readme}");
    assert!(!readme.contains("every variant and"), "{readme}");
    assert!(
        readme.contains("(`_cuda_` files in `torch-cuda`, `_rocm_` in `torch-rocm`, `_xpu_` in `torch-xpu`;"),
        "{readme}"
    );
    assert!(read(dir.join("CARD.md"))
        .contains("kernel = get_kernel(\"myorg/vector-add-helion\", version=1, trust_remote_code=True)"));
    // Nothing else was created next to the project.
    assert_eq!(std::fs::read_dir(&s.root).unwrap().count(), 1);
}

/// The default template is helion, PATH defaults to NAME.
/// A bad KERNEL_BUILDER_FLAKE_REF is refused naming both places it may come from (a user's
/// trial was told `--flake-ref`, which it had not passed), the value escaped.
#[test]
fn a_bad_flake_ref_from_the_environment_is_said_to_be_from_either() {
    let s = Scratch::new();
    let out = s
        .kb()
        .env("KERNEL_BUILDER_FLAKE_REF", "a b\n")
        .args(["init", "--name", "org/k", "k"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert_eq!(
        String::from_utf8(out.stderr).unwrap(),
        "error: `a b\\n` (--flake-ref, or KERNEL_BUILDER_FLAKE_REF when that is not given) is not a flake reference: no spaces, quotes, `\\` or `$` (e.g. `github:org/repo`, `path:/src/kernel-builder`)\n"
    );
    assert!(!s.root.join("k").exists());
}

#[test]
fn defaults_helion_in_name_dir() {
    let s = Scratch::new();
    s.init(&["--name", "myorg/vector-add-helion"]);
    let dir = s.root.join("vector-add-helion");
    assert_eq!(tree(&dir), with_mode(&HELION_FILES));
    assert!(read(dir.join("build.toml")).contains("backends = [\"cuda\", \"rocm\", \"xpu\"]\n"));
}

#[test]
fn triton_files() {
    let s = Scratch::new();
    s.init(&["--template", "triton", "--name", "myorg/add-triton", "--backends", "cuda"]);
    let dir = s.root.join("add-triton");
    assert_eq!(
        tree(&dir),
        with_mode(&[
            ".github/workflows/build.yml",
            ".gitignore",
            "CARD.md",
            "README.md",
            "build.toml",
            "flake.nix",
            "tests/test_add_triton.py",
            "torch-ext/add_triton/__init__.py",
            "torch-ext/add_triton/op.py",
        ])
    );
    let toml = read(dir.join("build.toml"));
    assert!(toml.contains("backends = [\"cuda\"]\npython-depends = []\n"));
    assert!(toml.ends_with("[torch-noarch]\n"));
    assert!(read(dir.join("torch-ext/add_triton/op.py")).contains("@triton.jit\ndef _add_triton_kernel("));
}

#[test]
fn torch_files_cpu_only() {
    let s = Scratch::new();
    s.init(&["--template", "torch", "--name", "myorg/add-torch", "--backends", "cpu"]);
    let dir = s.root.join("add-torch");
    assert_eq!(
        tree(&dir),
        with_mode(&[
            ".github/workflows/build.yml",
            ".gitignore",
            "CARD.md",
            "README.md",
            "build.toml",
            "flake.nix",
            "tests/test_add_torch.py",
            "torch-ext/add_torch/__init__.py",
            "torch-ext/add_torch/op.py",
        ])
    );
    assert!(read(dir.join("build.toml")).contains("backends = [\"cpu\"]\npython-depends = []\n"));
    assert!(read(dir.join("CARD.md")).contains("x = torch.randn(1 << 20, device=\"cpu\")"));
}

#[test]
fn compiled_files_every_backend() {
    let s = Scratch::new();
    s.init(&["--template", "compiled", "--name", "myorg/relu", "--backends", "all"]);
    let dir = s.root.join("relu");
    assert_eq!(
        tree(&dir),
        with_mode(&[
            ".github/workflows/build.yml",
            ".gitignore",
            "CARD.md",
            "README.md",
            "build.toml",
            "flake.nix",
            "relu_cpu/relu.cpp",
            "relu_cuda/relu.cu",
            "relu_metal/relu.metal",
            "relu_metal/relu.mm",
            "relu_xpu/relu.cpp",
            "tests/test_relu.py",
            "torch-ext/relu/__init__.py",
            "torch-ext/torch_binding.cpp",
            "torch-ext/torch_binding.h",
        ])
    );
    assert_eq!(
        read(dir.join("build.toml")),
        r#"[general]
name = "relu"
version = 1
edition = 6
license = "Apache-2.0"
backends = ["cpu", "cuda", "metal", "rocm", "xpu"]
python-depends = []

[general.hub]
repo-id = "myorg/relu"

# A compiled kernel: the torch binding plus one `[kernel.*]` per backend, built into one
# variant per cell of the build matrix (`torch215-cxx11-cu132-x86_64-linux`, ...).
[torch]
src = [
  "torch-ext/torch_binding.cpp",
  "torch-ext/torch_binding.h",
]

[kernel.relu_cpu]
language = "cpp-cpu"
depends = ["torch"]
src = ["relu_cpu/relu.cpp"]

[kernel.relu_cuda]
language = "cpp-cuda"
depends = ["torch"]
# Two capabilities, so the first builds are quick: sm_80 runs on every Ampere/Ada GPU (8.x),
# and 9.0's PTX lets the driver compile for newer ones at load time (slower first call).
# Before publishing, list the capabilities your users' GPUs have (e.g. "10.0", "12.0"), or
# remove this line for the toolkit's default list (ten or more: each one compiles every .cu
# again, so builds take several times as long).
cuda-capabilities = ["8.0", "9.0+PTX"]
src = ["relu_cuda/relu.cu"]

[kernel.relu_metal]
language = "cpp-metal"
depends = ["torch"]
src = [
  "relu_metal/relu.metal",
  "relu_metal/relu.mm",
]

# ROCm compiles the CUDA source through HIP.
[kernel.relu_rocm]
language = "cpp-rocm"
depends = ["torch"]
src = ["relu_cuda/relu.cu"]

[kernel.relu_xpu]
language = "cpp-xpu"
depends = ["torch"]
src = ["relu_xpu/relu.cpp"]
"#
    );
    let binding = read(dir.join("torch-ext/torch_binding.cpp"));
    assert!(binding.contains("TORCH_LIBRARY_EXPAND(TORCH_EXTENSION_NAME, ops) {"));
    assert!(binding.contains("ops.def(\"relu(Tensor! out, Tensor x, Tensor y) -> ()\");"));
    assert!(binding.contains("REGISTER_EXTENSION(TORCH_EXTENSION_NAME)"));
    assert!(read(dir.join("torch-ext/relu/__init__.py")).contains("from ._ops import ops"));
}

#[test]
fn compiled_rocm_only_uses_the_cuda_source() {
    let s = Scratch::new();
    s.init(&["--template", "compiled", "--name", "myorg/relu", "--backends", "rocm"]);
    let files: Vec<String> = tree(&s.root.join("relu")).into_iter().filter(|f| f.contains("relu_")).collect();
    assert_eq!(files, ["644 relu_cuda/relu.cu"]);
}

/// Upstream dropped PATH's parent directories (`init ../x/foo` made `./foo`).
#[test]
fn path_parent_directories_are_kept() {
    let s = Scratch::new();
    s.init(&["--name", "myorg/foo", "--template", "torch", "a/b/foo"]);
    assert_eq!(entries(&s.root)[..3], ["a", "a/b", "a/b/foo"]);
    assert!(s.root.join("a/b/foo/build.toml").is_file());
    assert!(!s.root.join("foo").exists());
    // Relative to the parent too.
    std::fs::create_dir(s.root.join("work")).unwrap();
    let out = s
        .kb()
        .current_dir(s.root.join("work"))
        .args(["init", "--name", "myorg/bar", "../x/bar"])
        .output()
        .unwrap();
    assert!(out.status.success());
    assert!(s.root.join("x/bar/build.toml").is_file());
}

/// `init ORG/NAME` without `--name`: the repository comes from PATH, which is kept as is.
#[test]
fn repo_id_from_org_name_path() {
    let s = Scratch::new();
    let out = s.kb().args(["init", "--template", "torch", "myorg/relu"]).output().unwrap();
    assert!(out.status.success());
    assert_eq!(
        String::from_utf8(out.stderr).unwrap(),
        "note: the Hub repository `myorg/relu` was read from PATH; pass `--name ORG/NAME` to choose another\n"
    );
    assert!(read(s.root.join("myorg/relu/build.toml")).contains("repo-id = \"myorg/relu\"\n"));
}

#[test]
fn empty_directory_and_existing_repo_are_reused() {
    let s = Scratch::new();
    std::fs::create_dir(s.root.join("empty")).unwrap();
    s.init(&["--name", "myorg/empty", "--template", "torch", "empty"]);
    assert!(s.root.join("empty/build.toml").is_file());

    // A directory holding only `.git`: the repository is reused.
    let repo = s.root.join("repo");
    std::fs::create_dir(&repo).unwrap();
    crate::util::git(repo.as_std_path(), &["init", "-q"]);
    s.init(&["--name", "myorg/repo", "--template", "torch", "repo"]);
    assert_eq!(staged(&repo).len(), 9);
}

/// A project inside an existing work tree is staged there, without a nested repository.
/// A project inside a larger repository gets a workflow GitHub never runs (it reads
/// `.github/workflows/` at the repository root only): `init` says so and what to do.
#[test]
fn a_workflow_inside_a_larger_repository_is_warned_about() {
    let s = Scratch::new();
    let mono = s.root.join("mono");
    std::fs::create_dir(&mono).unwrap();
    crate::util::git(mono.as_std_path(), &["init", "-q"]);
    let out = s
        .kb()
        .args(["init", "--name", "myorg/inner", "--template", "torch", "mono/kernels/inner"])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let stderr = String::from_utf8(out.stderr).unwrap();
    let top = std::fs::canonicalize(&mono).unwrap();
    assert!(
        stderr.contains(&format!(
            "; GitHub only runs workflows from `{}/.github/workflows/`, so the generated \
             `.github/workflows/build.yml` does not run there: move it to the repository root",
            top.display()
        )),
        "{stderr}"
    );
    // At a repository's own root there is nothing to say.
    let out =
        s.kb().args(["init", "--name", "myorg/alone", "--template", "torch", "alone"]).output().unwrap();
    assert!(out.status.success());
    assert!(!String::from_utf8(out.stderr).unwrap().contains("GitHub only runs workflows"));
}

#[test]
fn project_inside_a_work_tree_is_staged_there() {
    let s = Scratch::new();
    let mono = s.root.join("mono");
    std::fs::create_dir(&mono).unwrap();
    crate::util::git(mono.as_std_path(), &["init", "-q"]);
    let stdout = s.init(&["--name", "myorg/inner", "--template", "torch", "mono/kernels/inner"]);
    let top = std::fs::canonicalize(&mono).unwrap();
    assert!(stdout
        .contains(&format!("  staged the files in the existing git repository at `{}`\n", top.display())));
    assert!(!mono.join("kernels/inner/.git").exists());
    let out = crate::util::git(mono.as_std_path(), &["ls-files"]) + "\n";
    assert_eq!(
        out,
        "kernels/inner/.github/workflows/build.yml\nkernels/inner/.gitignore\nkernels/inner/CARD.md\nkernels/inner/README.md\nkernels/inner/build.toml\n\
         kernels/inner/flake.nix\nkernels/inner/tests/test_inner.py\nkernels/inner/torch-ext/inner/__init__.py\n\
         kernels/inner/torch-ext/inner/op.py\n"
    );
}

#[test]
fn overwrite_replaces_generated_files_and_keeps_others() {
    let s = Scratch::new();
    let dir = s.root.join("kk");
    std::fs::create_dir(&dir).unwrap();
    std::fs::write(dir.join("notes.txt"), "mine\n").unwrap();
    std::fs::write(dir.join("build.toml"), "stale\n").unwrap();
    s.init(&["--name", "myorg/kk", "--template", "torch", "--overwrite", "kk"]);
    assert_eq!(read(dir.join("notes.txt")), "mine\n");
    assert!(read(dir.join("build.toml")).starts_with("[general]\nname = \"kk\"\n"));
    assert_eq!(tree(&dir).len(), 10);
}

/// The short help, as users see it (the long help adds the templates' descriptions).
#[test]
fn short_help() {
    let out = crate::util::kb()
        .args(["init", "-h"])
        .env_remove("KERNEL_BUILDER_FLAKE_REF")
        .env("COLUMNS", "100")
        .output()
        .unwrap();
    assert!(out.status.success());
    assert_eq!(
        String::from_utf8(out.stdout).unwrap(),
        r#"Create a new kernel project (Helion, Triton, PyTorch or compiled), ready to build

Usage: kernel-builder init [OPTIONS] [PATH]

Arguments:
  [PATH]  Directory to create the project in (missing parent directories are created). It must be
          new or empty unless `--overwrite` is given. Default: the NAME part of `--name`

Options:
      --name <ORG/NAME>        The Hub repository the kernel is published to, `ORG/NAME`. NAME is
                               the kernel's name: lowercase letters, digits and `-`. Default: taken
                               from PATH when PATH is `ORG/NAME`
      --backends <BACKEND>...  Backends to build for (`cuda rocm` or `cuda,rocm`): cpu, cuda, metal,
                               rocm, xpu, or `all` (every backend the template supports). Default:
                               helion and triton cuda rocm xpu; torch cpu cuda; compiled cuda
      --template <TEMPLATE>    The kind of kernel. The op is the same in every template (an
                               element-wise add), ready to build, test and replace; the compiled
                               template builds natively its cpu and cuda cells (`build-and-copy
                               --nix never`) [default: helion] [possible values: compiled, helion,
                               triton, torch]
      --license <LICENSE>      License of the kernel, written into build.toml and the card (an SPDX
                               expression) [default: Apache-2.0]
      --flake-ref <REF>        Flake reference of kernel-builder that the new kernel's flake.nix
                               builds with (its `inputs.kernel-builder.url`). Default: the flake
                               this kernel-builder was installed from, else the checkout it was
                               built from, else the published flake [env: KERNEL_BUILDER_FLAKE_REF=]
      --overwrite              Write into a non-empty directory: generated files replace files of
                               the same name, other files are left as they are
  -q, --quiet                  Say on stderr only what is wrong (warnings, errors, hints, why a
                               command failed): no notes or progress; results on stdout stay. Before
                               or after the command's name
  -v, --verbose                Also say each command kernel-builder runs (`+ cmake -G Ninja …`) on
                               stderr. Not with --quiet
  -h, --help                   Print help (see more with '--help')

`--backends` takes every value up to the next flag: give PATH before it, or after `--`.
"#
    );
}

/// Same arguments, same bytes: no timestamps, paths or randomness in the generated files.
#[test]
fn output_is_deterministic() {
    let s = Scratch::new();
    for t in ["helion", "triton", "torch", "compiled"] {
        s.init(&["--name", "myorg/same", "--template", t, "--backends", "all", "--", &format!("a/{t}")]);
        s.init(&["--name", "myorg/same", "--template", t, "--backends", "all", "--", &format!("b/{t}")]);
        let (a, b) = (s.root.join("a").join(t), s.root.join("b").join(t));
        assert_eq!(tree(&a), tree(&b));
        for f in tree(&a) {
            let rel = &f[4..];
            assert_eq!(
                std::fs::read(a.join(rel)).unwrap(),
                std::fs::read(b.join(rel)).unwrap(),
                "{t}: {rel}"
            );
        }
    }
}

#[test]
fn license_reaches_build_toml_and_card() {
    let s = Scratch::new();
    s.init(&["--name", "myorg/lic", "--template", "torch", "--license", "MIT"]);
    assert!(read(s.root.join("lic/build.toml")).contains("\nlicense = \"MIT\"\n"));
    assert!(read(s.root.join("lic/CARD.md")).starts_with("---\nlibrary_name: kernels\nlicense: mit\n"));
    // The value as checked, trimmed; a Hub id on the card, or `other` with a name of its own.
    for (given, toml, card) in [
        ("  GPL-3.0-or-later ", "GPL-3.0-or-later", "license: gpl-3.0\ntags:"),
        ("MIT OR Apache-2.0", "MIT OR Apache-2.0", "license: other\nlicense_name: mit-or-apache-2.0\ntags:"),
    ] {
        s.init(&["--name", "myorg/lic3", "--template", "torch", "--license", given, "--overwrite"]);
        assert!(
            read(s.root.join("lic3/build.toml")).contains(&format!("\nlicense = \"{toml}\"\n")),
            "{given}"
        );
        assert!(read(s.root.join("lic3/CARD.md")).contains(&format!("\n{card}")), "{given}");
    }
    // Found by review: a newline passed the check as whitespace and split the card's YAML.
    let (code, _, stderr) = s.init_fails(&["--name", "myorg/lic4", "--license", "MIT\nOR Apache-2.0"]);
    assert_eq!(code, 2);
    assert!(stderr.contains("a control character (U+000A) cannot appear in one"), "{stderr}");
    assert!(!s.root.join("lic4").exists());
    let (code, _, stderr) = s.init_fails(&["--name", "myorg/lic2", "--license", "MIT License"]);
    assert_eq!(code, 2);
    assert_eq!(
        stderr,
        "error: `--license`: `MIT License` is not an SPDX license expression (unknown term: \
         `License`)\nhint: Use an id from https://spdx.org/licenses/ (e.g. `Apache-2.0`, `MIT`, `BSD-3-Clause`) \
         or an expression such as `MIT OR Apache-2.0`\n"
    );
}

#[test]
fn overwrite_refuses_a_directory_in_place_of_a_file() {
    let s = Scratch::new();
    std::fs::create_dir_all(s.root.join("kk/build.toml")).unwrap();
    let (code, _, stderr) = s.init_fails(&["--name", "myorg/kk", "--overwrite", "kk"]);
    assert_eq!(code, 1);
    assert_eq!(
        stderr,
        "error: cannot write `kk/build.toml`: a directory is in the way of a generated file\n"
    );
    assert_eq!(entries(&s.root), ["kk", "kk/build.toml"]);
}

// ---- Errors: exact message, exit code, nothing written ----

#[test]
fn invalid_name_states_the_rule_and_suggests_a_fix() {
    let s = Scratch::new();
    let (code, stdout, stderr) = s.init_fails(&["--name", "user/My_Kernel"]);
    assert_eq!((code, stdout.as_str()), (2, ""));
    assert_eq!(
        stderr,
        "error: `My_Kernel` is not a valid kernel name: a kernel name uses lowercase letters, digits and `-`, \
         starts with a letter, does not end with `-`, and is at least 2 characters long (e.g. `vector-add`)\n\
         hint: did you mean `--name user/my-kernel`?\n"
    );
    assert_eq!(entries(&s.root), Vec::<String>::new());
}

/// Regression (second fresh-user review): `in`, `class`, `torch`… follow the name rule, but the
/// generated `from .op import in` does not parse, and an op named `torch` shadows the module.
#[test]
fn names_the_generated_python_cannot_use_are_refused() {
    let s = Scratch::new();
    for (name, why) in [
        ("in", "is a Python keyword"),
        ("class", "is a Python keyword"),
        ("torch", "is the name of a module the generated code imports"),
        ("helion", "is the name of a module the generated code imports"),
    ] {
        let (code, stdout, stderr) = s.init_fails(&["--name", &format!("org/{name}")]);
        assert_eq!((code, stdout.as_str()), (2, ""), "{name}");
        assert_eq!(
            stderr,
            format!(
                "error: `{name}` cannot name a kernel project: its Python name `{name}` {why}, and the \
                 generated package and op are named after it\nhint: did you mean `--name org/{name}-kernel`?\n"
            ),
            "{name}"
        );
    }
    assert_eq!(entries(&s.root), Vec::<String>::new());
}

#[test]
fn invalid_name_from_path() {
    let s = Scratch::new();
    let (code, _, stderr) = s.init_fails(&["myorg/My_Kernel"]);
    assert_eq!(code, 2);
    assert_eq!(
        stderr.lines().last().unwrap(),
        "hint: pass the kernel name with `--name myorg/my-kernel` (the directory can keep its name)"
    );
    assert_eq!(entries(&s.root), Vec::<String>::new());
}

#[test]
fn name_without_org() {
    let s = Scratch::new();
    let (code, _, stderr) = s.init_fails(&["--name", "vector-add"]);
    assert_eq!(code, 2);
    assert_eq!(
        stderr,
        "error: `--name vector-add` must be the Hub repository, ORG/NAME\nhint: for example `--name myorg/vector-add`\n"
    );
    let (code, _, stderr) = s.init_fails(&["some/deep/dir"]);
    assert_eq!(code, 2);
    assert_eq!(
        stderr,
        "error: `init some/deep/dir` cannot tell the Hub repository of the new kernel\n\
         hint: pass `--name ORG/NAME`, e.g. `kernel-builder init --name myorg/dir -- some/deep/dir`\n"
    );
    assert_eq!(entries(&s.root), Vec::<String>::new());
}

#[test]
fn non_empty_directory_names_the_real_flag() {
    let s = Scratch::new();
    let dir = s.root.join("kk");
    std::fs::create_dir_all(dir.join("tests")).unwrap();
    std::fs::write(dir.join("build.toml"), "mine\n").unwrap();
    std::fs::write(dir.join("tests/test_kk.py"), "mine\n").unwrap();
    std::fs::write(dir.join("notes.txt"), "mine\n").unwrap();
    let before = entries(&s.root);
    let (code, stdout, stderr) = s.init_fails(&["--name", "myorg/kk", "--template", "torch", "kk"]);
    assert_eq!((code, stdout.as_str()), (1, ""));
    assert_eq!(
        stderr,
        "error: `kk` is not empty, and `init` writes only into a new or empty directory\n\
         these files would be replaced:\n    build.toml\n    tests/test_kk.py\n\
         it also holds (these would be kept):\n    notes.txt\n\
         hint: pass `--overwrite` to write the project anyway: generated files replace the files of the same \
         name, other files are left as they are\n"
    );
    assert!(!stderr.contains("--force"));
    assert_eq!(entries(&s.root), before);
    assert_eq!(read(dir.join("build.toml")), "mine\n");
}

/// clap reads PATH after `--backends` as one more backend.
#[test]
fn value_after_backends_suggests_double_dash() {
    let s = Scratch::new();
    let (code, stdout, stderr) = s.init_fails(&["--name", "myorg/kk", "--backends", "cuda", "foo"]);
    assert_eq!((code, stdout.as_str()), (2, ""));
    assert_eq!(
        stderr,
        "error: `foo` is not a backend (backends: cuda, rocm, xpu, or `all`)\n\
         hint: `--backends` takes every value after it, so a directory given after it is read as a backend: \
         did you mean `--backends cuda -- foo`?\n"
    );
    assert_eq!(entries(&s.root), Vec::<String>::new());
}

#[test]
fn backend_the_template_does_not_support() {
    let s = Scratch::new();
    let (code, _, stderr) = s.init_fails(&["--name", "myorg/kk", "--backends", "cuda", "cpu"]);
    assert_eq!(code, 2);
    assert_eq!(
        stderr,
        "error: the helion template does not support the `cpu` backend (it supports cuda, rocm, xpu)\n\
         hint: helion kernels run through Triton, on GPUs; for a noarch kernel that runs on `cpu` use \
         `--template torch`\n"
    );
    assert_eq!(entries(&s.root), Vec::<String>::new());
}

#[test]
fn unknown_template_lists_them() {
    let s = Scratch::new();
    let (code, _, stderr) = s.init_fails(&["--name", "myorg/kk", "--template", "cutlass"]);
    assert_eq!(code, 2);
    assert_eq!(
        stderr.lines().take(2).collect::<Vec<_>>(),
        [
            "error: invalid value 'cutlass' for '--template <TEMPLATE>'",
            "  [possible values: compiled, helion, triton, torch]"
        ]
    );
    assert_eq!(entries(&s.root), Vec::<String>::new());
}

#[test]
fn path_blocked_by_a_file() {
    let s = Scratch::new();
    std::fs::write(s.root.join("a"), "file\n").unwrap();
    let (code, _, stderr) = s.init_fails(&["--name", "myorg/kk", "a/b/kk"]);
    assert_eq!(code, 1);
    assert_eq!(stderr, "error: cannot write `a`: it exists and is not a directory\n");
    assert_eq!(entries(&s.root), ["a"]);
    let (code, _, stderr) = s.init_fails(&["--name", "myorg/kk", "a"]);
    assert_eq!(code, 1);
    assert_eq!(stderr, "error: `a` exists and is not a directory\n");
}

/// Without git nothing is written (git is looked up first).
#[test]
fn missing_git_writes_nothing() {
    let s = Scratch::new();
    let out =
        s.kb().env("PATH", "/nonexistent").args(["init", "--name", "myorg/kk", "a/kk"]).output().unwrap();
    assert_eq!(out.status.code(), Some(1));
    let stderr = String::from_utf8(out.stderr).unwrap();
    assert!(stderr.starts_with("error: `git --version` failed in `a/kk`\n--- output ---\n"), "{stderr}");
    assert!(stderr.ends_with("(is git installed and on PATH?)\n---\nnothing was written\n"), "{stderr}");
    assert_eq!(entries(&s.root), Vec::<String>::new());
}

// ---- Generated projects: check-config accepts them, they have the expected variants, and the
// noarch ones build with `build-and-copy --nix never` ----

/// One template × backends case: the variants expected on x86_64-linux and aarch64-darwin
/// (bundle scope), and the `build/` directories `build-and-copy` writes (noarch only).
struct Case {
    template: &'static str,
    backends: &'static [&'static str],
    linux: &'static [&'static str],
    darwin: &'static [&'static str],
}

const CUDA_CELLS: [&str; 4] = [
    "torch214-cxx11-cu126-x86_64-linux",
    "torch214-cxx11-cu130-x86_64-linux",
    "torch214-cxx11-cu132-x86_64-linux",
    "torch215-cxx11-cu132-x86_64-linux",
];

const CASES: &[Case] = &[
    Case {
        template: "helion",
        backends: &[],
        linux: &["torch-cuda", "torch-rocm", "torch-xpu"],
        darwin: &[],
    },
    Case { template: "helion", backends: &["cuda"], linux: &["torch-cuda"], darwin: &[] },
    Case { template: "helion", backends: &["xpu", "rocm"], linux: &["torch-rocm", "torch-xpu"], darwin: &[] },
    Case {
        template: "triton",
        backends: &[],
        linux: &["torch-cuda", "torch-rocm", "torch-xpu"],
        darwin: &[],
    },
    Case { template: "triton", backends: &["rocm"], linux: &["torch-rocm"], darwin: &[] },
    Case { template: "torch", backends: &[], linux: &["torch-cpu", "torch-cuda"], darwin: &["torch-cpu"] },
    Case { template: "torch", backends: &["cpu"], linux: &["torch-cpu"], darwin: &["torch-cpu"] },
    Case {
        template: "torch",
        backends: &["all"],
        linux: &["torch-cpu", "torch-cuda", "torch-rocm", "torch-xpu"],
        darwin: &["torch-cpu", "torch-metal"],
    },
    Case { template: "compiled", backends: &[], linux: &CUDA_CELLS, darwin: &[] },
    Case {
        template: "compiled",
        backends: &["cpu"],
        linux: &["torch214-cxx11-cpu-x86_64-linux", "torch215-cxx11-cpu-x86_64-linux"],
        darwin: &["torch214-cpu-aarch64-darwin", "torch215-cpu-aarch64-darwin"],
    },
    Case {
        template: "compiled",
        backends: &["metal"],
        linux: &[],
        darwin: &["torch214-metal-aarch64-darwin", "torch215-metal-aarch64-darwin"],
    },
    Case {
        template: "compiled",
        backends: &["all"],
        linux: &[
            "torch213-cxx11-rocm71-x86_64-linux",
            "torch213-cxx11-rocm72-x86_64-linux",
            "torch213-cxx11-xpu20260-x86_64-linux",
            "torch214-cxx11-cpu-x86_64-linux",
            "torch214-cxx11-cu126-x86_64-linux",
            "torch214-cxx11-cu130-x86_64-linux",
            "torch214-cxx11-cu132-x86_64-linux",
            "torch214-cxx11-rocm72-x86_64-linux",
            "torch215-cxx11-cpu-x86_64-linux",
            "torch215-cxx11-cu132-x86_64-linux",
        ],
        darwin: &[
            "torch214-cpu-aarch64-darwin",
            "torch214-metal-aarch64-darwin",
            "torch215-cpu-aarch64-darwin",
            "torch215-metal-aarch64-darwin",
        ],
    },
];

fn init_case(s: &Scratch, case: &Case) -> Utf8PathBuf {
    let name = format!(
        "k-{}-{}",
        case.template,
        if case.backends.is_empty() { "default".to_owned() } else { case.backends.join("-") }
    );
    let mut args =
        vec!["--name".to_owned(), format!("myorg/{name}"), "--template".to_owned(), case.template.to_owned()];
    if !case.backends.is_empty() {
        args.push("--backends".to_owned());
        args.extend(case.backends.iter().map(|b| b.to_string()));
    }
    args.push("--".to_owned());
    args.push(name.clone());
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    s.init(&args);
    s.root.join(name)
}

#[test]
fn generated_projects_pass_check_config() {
    let s = Scratch::new();
    for case in CASES {
        let dir = init_case(&s, case);
        let out = s.kb().args(["check-config", dir.as_str()]).output().unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success(), "{dir}: check-config failed:\n{stderr}");
        // A fresh Helion project is not tuned yet: exactly one `helion-heuristic-missing` per
        // backend (what to run is in the help), nothing else.
        let json = s.kb().args(["check-config", "--json", dir.as_str()]).output().unwrap();
        let v: serde_json::Value = serde_json::from_slice(&json.stdout).unwrap();
        let warnings = v["helion_warnings"].as_array().cloned().expect("`helion_warnings` is always present");
        let mut missing: Vec<String> = warnings
            .iter()
            .map(|w| {
                assert_eq!(w["rule"], "helion-heuristic-missing", "{dir}: {w}");
                let m = w["message"].as_str().unwrap();
                m.strip_prefix("backend `").and_then(|r| r.split_once('`')).unwrap().0.to_owned()
            })
            .collect();
        missing.sort();
        let mut expected: Vec<String> = if case.template == "helion" {
            case.linux.iter().map(|v| v.strip_prefix("torch-").unwrap().to_owned()).collect()
        } else {
            Vec::new()
        };
        expected.sort();
        assert_eq!(missing, expected, "{dir}");
        let rendered: String = warnings
            .iter()
            .map(|w| {
                let f = |k: &str| w[k].as_str().unwrap().to_owned();
                format!("{}\n\n  ! {}: {}\n  help: {}\n\n", f("rule"), f("file"), f("message"), f("help"))
            })
            .collect();
        assert_eq!(stderr, rendered, "{dir}: check-config warned");
        let stdout = String::from_utf8(out.stdout).unwrap();
        assert!(stdout.contains("generation: edition 6\n"), "{stdout}");
        // And the library agrees: no problem from the build-matrix checks either.
        let loaded = kernel_builder::kernel::load(&dir).unwrap();
        assert_eq!(loaded.warnings, []);
        assert_eq!(kernel_builder::matrix::check(&loaded.config, &loaded.cells), [], "{dir}");
    }
}

#[test]
fn generated_projects_have_the_expected_variants() {
    let s = Scratch::new();
    for case in CASES {
        let dir = init_case(&s, case);
        for (system, expected) in [("x86_64-linux", case.linux), ("aarch64-darwin", case.darwin)] {
            let out = s.kb().args(["list-variants", dir.as_str(), "--system", system]).output().unwrap();
            assert!(
                out.status.success(),
                "{dir}: list-variants failed:\n{}",
                String::from_utf8_lossy(&out.stderr)
            );
            let stdout = String::from_utf8(out.stdout).unwrap();
            assert_eq!(stdout.lines().collect::<Vec<_>>(), expected, "{dir} on {system}");
        }
    }
}

#[test]
fn generated_noarch_projects_build() {
    let s = Scratch::new();
    for case in CASES.iter().filter(|c| c.template != "compiled") {
        let dir = init_case(&s, case);
        let out = s.kb().args(["build-and-copy", dir.as_str(), "--nix", "never"]).output().unwrap();
        assert!(
            out.status.success(),
            "{dir}: build-and-copy failed:\n{}",
            String::from_utf8_lossy(&out.stderr)
        );
        // Every backend of build.toml gets its noarch variant, whatever the system.
        let config = kernel_builder::kernel::load(&dir).unwrap().config;
        let expected: Vec<String> = config.general.backends.iter().map(|b| format!("torch-{b}")).collect();
        // The variant directories (build/ also holds the build's hash manifest).
        let mut built: Vec<String> = std::fs::read_dir(dir.join("build"))
            .unwrap()
            .map(|e| e.unwrap())
            .filter(|e| e.file_type().unwrap().is_dir())
            .map(|e| e.file_name().into_string().unwrap())
            .collect();
        built.sort();
        assert_eq!(built, expected, "{dir}");
        for variant in &built {
            let files: Vec<String> =
                tree(&dir.join("build").join(variant)).into_iter().map(|f| f[4..].to_owned()).collect();
            assert_eq!(
                files,
                ["__init__.py", "_ops.py", "metadata.json", "op.py", "symbols.json"],
                "{dir}/build/{variant}"
            );
            let py = dir.file_name().unwrap().replace('-', "_");
            assert_eq!(
                read(dir.join("build").join(variant).join("__init__.py")),
                read(dir.join("torch-ext").join(&py).join("__init__.py"))
            );
        }
    }
}

// ---- With Nix: the generated flake.nix builds through the root flake's genKernelFlakeOutputs ----

/// A copy of the root flake (what a kernel's `kernel-builder` input needs), so that a `path:`
/// reference to it does not copy this checkout's `target/` into the store.
fn root_flake_copy(into: &Utf8Path) -> Utf8PathBuf {
    let repo = Utf8Path::new(env!("CARGO_MANIFEST_DIR"));
    let dest = into.join("kernel-builder");
    for f in ["flake.nix", "flake.lock", "Cargo.toml", "Cargo.lock"] {
        let to = dest.join(f);
        std::fs::create_dir_all(to.parent().unwrap()).unwrap();
        std::fs::copy(repo.join(f), to).unwrap();
    }
    for e in walkdir::WalkDir::new(repo.join("nix")) {
        let e = e.unwrap();
        let rel = e.path().strip_prefix(repo.as_std_path()).unwrap();
        if e.file_type().is_dir() {
            std::fs::create_dir_all(dest.join(rel.to_str().unwrap())).unwrap();
        } else {
            std::fs::copy(e.path(), dest.join(rel.to_str().unwrap())).unwrap();
        }
    }
    dest
}

/// The static orchestrator directory (`scripts/setup-nix.sh` builds it).
fn orchestrator() -> Utf8PathBuf {
    let dir = std::env::var("KERNEL_BUILDER_ORCHESTRATOR")
        .map(Utf8PathBuf::from)
        .unwrap_or_else(|_| Utf8Path::new(env!("CARGO_MANIFEST_DIR")).join("target/nix-orchestrator"));
    assert!(
        dir.join("bin/kernel-builder").is_file(),
        "no static orchestrator in {dir}: run scripts/setup-nix.sh first"
    );
    dir
}

#[test]
#[cfg_attr(not(feature = "nix-tests"), ignore = "needs Nix: cargo test --features nix-tests")]
fn generated_flake_builds_the_bundle_with_nix() {
    let s = Scratch::new();
    let root = root_flake_copy(&s.root);
    let orch = format!("path:{}", orchestrator());
    for (template, backends) in [("helion", &["cuda", "rocm", "xpu"][..]), ("torch", &["cpu", "cuda"][..])] {
        let name = format!("nix-{template}");
        let mut args =
            vec!["--name".to_owned(), format!("myorg/{name}"), "--template".into(), template.into()];
        args.extend(["--flake-ref".into(), format!("path:{root}"), "--backends".into()]);
        args.extend(backends.iter().map(|b| b.to_string()));
        args.extend(["--".into(), name.clone()]);
        let out = s.kb().arg("init").args(&args).env_remove("KERNEL_BUILDER_FLAKE_REF").output().unwrap();
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        let dir = s.root.join(&name);

        let out =
            duct::cmd("nix", ["build", ".#bundle", "--override-input", "kernel-builder/orchestrator", &orch])
                .dir(&dir)
                .stdout_capture()
                .stderr_capture()
                .unchecked()
                .run()
                .unwrap();
        assert!(out.status.success(), "nix build of {name}:\n{}", String::from_utf8_lossy(&out.stderr));

        // One variant per backend, holding the package's sources as they are.
        let result = dir.join("result");
        let mut variants: Vec<String> = std::fs::read_dir(&result)
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .filter(|n| n != "hashes.json")
            .collect();
        variants.sort();
        let expected: Vec<String> = backends.iter().map(|b| format!("torch-{b}")).collect();
        assert_eq!(variants, expected, "{name}");
        assert!(result.join("hashes.json").is_file(), "{name}: the bundle carries its manifest");
        let py = name.replace('-', "_");
        for v in &variants {
            for f in ["__init__.py", "op.py"] {
                assert_eq!(
                    read(result.join(v).join(f)),
                    read(dir.join("torch-ext").join(&py).join(f)),
                    "{name}: {v}/{f}"
                );
            }
            assert!(result.join(v).join("metadata.json").is_file());
        }
    }
}

/// The seed workflow as README tells it, with no flake reference given: `init` writes this
/// checkout (`git+file://`, so Nix copies tracked files only) and says how to change it, and
/// `build-and-copy .` works with no override: natively with a note when Nix would have to
/// download nixpkgs first, and (with Nix) through Nix, offline, once the orchestrator is
/// known.
#[test]
fn init_without_a_flake_ref_takes_this_checkout_and_builds_with_no_override() {
    let s = Scratch::new();
    let out = s
        .kb()
        .env_remove("KERNEL_BUILDER_FLAKE_REF")
        .args(["init", "--name", "myorg/vector-add-helion", "--", "vector-add-helion"])
        .output()
        .unwrap();
    let stdout = String::from_utf8(out.stdout).unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let repo = env!("CARGO_MANIFEST_DIR");
    let want = format!("git+file://{repo}");
    assert!(
        stdout.contains(&format!(
            "  flake.nix takes kernel-builder from `{want}` (the checkout this kernel-builder was built from); to use another, edit `inputs.kernel-builder.url` in flake.nix (or pass --flake-ref)\n"
        )),
        "{stdout}"
    );
    let dir = s.root.join("vector-add-helion");
    assert!(read(dir.join("flake.nix")).contains(&format!("inputs.kernel-builder.url = \"{want}\";")));

    let out = s
        .kb()
        .current_dir(&dir)
        .env_remove("KERNEL_BUILDER_ORCHESTRATOR")
        .args(["build-and-copy", "."])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert!(dir.join("build/torch-cuda/metadata.json").is_file());
    if which_nix() {
        assert!(
            stderr.contains(
                "note: building natively: Nix is on PATH, but this kernel-builder is not statically linked"
            ),
            "{stderr}"
        );
    }
}

fn which_nix() -> bool {
    duct::cmd!("nix", "--version").stdout_null().stderr_null().run().is_ok()
}

/// The same project through Nix, offline, with the orchestrator `scripts/setup-nix.sh` made:
/// the flake reference `init` wrote resolves without the network.
#[test]
#[cfg_attr(not(feature = "nix-tests"), ignore = "needs Nix: cargo test --features nix-tests")]
fn the_flake_ref_init_writes_builds_through_nix_offline() {
    let s = Scratch::new();
    let out = s
        .kb()
        .env_remove("KERNEL_BUILDER_FLAKE_REF")
        .args(["init", "--name", "myorg/seed-nix", "--", "seed-nix"])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let dir = s.root.join("seed-nix");
    let out = s
        .kb()
        .current_dir(&dir)
        .env("KERNEL_BUILDER_ORCHESTRATOR", orchestrator())
        .args(["build-and-copy", "."])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert!(stderr.contains("note: building through Nix"), "{stderr}");
    assert!(
        String::from_utf8_lossy(&out.stdout).contains("built torch-cuda (through Nix) -> ./build/torch-cuda")
    );
}

/// `--backends cuda,rocm` is the same as `--backends cuda rocm`.
#[test]
fn backends_separated_by_commas_or_spaces_are_the_same() {
    let s = Scratch::new();
    let a = s.init(&["--name", "myorg/comma", "--backends", "cuda,rocm", "--", "a"]);
    let b = s.init(&["--name", "myorg/comma", "--backends", "cuda", "rocm", "--", "b"]);
    assert!(a.contains("backends: cuda, rocm;"), "{a}");
    assert_eq!(read(s.root.join("a/build.toml")), read(s.root.join("b/build.toml")));
    assert_eq!(a.replace("`a`", "`b`").replace(" a\n", " b\n"), b);
}

/// `init` in a directory that an enclosing repository ignores: the kernel gets its own
/// repository there, with the files staged, and says why (it used to fail: "`git add -- .`
/// failed … The following paths are ignored").
#[test]
fn init_inside_an_ignored_directory_makes_the_kernels_own_repository() {
    let s = Scratch::new();
    let outer = s.root.join("outer");
    std::fs::create_dir_all(outer.join("ignored")).unwrap();
    crate::util::git(outer.as_std_path(), &["init", "-q"]);
    std::fs::write(outer.join(".gitignore"), "ignored/\n").unwrap();
    let out = s.init(&["--name", "myorg/vector-add-helion", "--", "outer/ignored/k"]);
    assert!(
        out.contains(&format!(
            "  initialized a new git repository and staged the files (the repository at `{outer}` ignores this directory)\n"
        )),
        "{out}"
    );
    let dir = outer.join("ignored/k");
    assert!(dir.join(".git").is_dir());
    assert_eq!(staged(&dir), HELION_FILES);
}
