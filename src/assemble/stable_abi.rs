//! What a torch stable-ABI cell (`torch-stable-abi<MAJ><MIN>-…`, `[torch] stable-abi`)
//! compiles and links against: torch's stable headers and its C shim, nothing else.
//!
//! A stable-ABI variant is built once per backend (and backend version) and loads in every
//! torch from its target version on, so it may not touch libtorch's C++ ABI. The ABI check
//! ([`crate::abi::torch_abi`]) refuses such symbols after the fact; this module makes them
//! impossible to reach while compiling:
//!
//! - **Headers**: instead of torch's whole `include/` directory (ATen, c10, the C++ API), the
//!   compile sees one include root, `<build>/kb-stable-abi-include/`, holding only links to
//!   the header directories of the stable API ([`STABLE_HEADER_DIRS`]): `torch/csrc/stable/`
//!   (`torch::stable::Tensor`, `STABLE_TORCH_LIBRARY`), `torch/headeronly/` (scalar types,
//!   `STD_TORCH_CHECK`) and the C shim (`torch/csrc/inductor/aoti_torch/c/` and its
//!   `generated/` per-backend shims). These headers include nothing outside those directories
//!   (seen in torch 2.11), so `#include <ATen/ATen.h>` or `<torch/library.h>` fails to compile,
//!   and [`compile_hint`] says why.
//! - **Libraries**: only the libraries that export the C shim functions (`aoti_torch_*`,
//!   `torch_*`): `libtorch_cpu.so`, plus `libtorch_cuda.so` for CUDA cells
//!   ([`link_libraries`]); never `libtorch.so`, `libc10.so` or the C++ API.

use anyhow::Context;
use camino::{Utf8Path, Utf8PathBuf};

use crate::config::Backend;

/// The include root of a stable-ABI compile, below the cell's build directory.
pub const INCLUDE_ROOT: &str = "kb-stable-abi-include";

/// The header directories of torch's stable API, relative to torch's `include/` directory.
/// Each is linked at the same relative path below [`INCLUDE_ROOT`].
pub const STABLE_HEADER_DIRS: &[&str] = &[
    "torch/csrc/stable",
    "torch/headeronly",
    "torch/csrc/inductor/aoti_torch/c",
    "torch/csrc/inductor/aoti_torch/generated",
];

/// The include root for a cell built in `build_dir`.
pub fn include_root(build_dir: &Utf8Path) -> Utf8PathBuf {
    build_dir.join(INCLUDE_ROOT)
}

/// Make `<build_dir>/kb-stable-abi-include/` hold exactly a link to each of
/// [`STABLE_HEADER_DIRS`] in `torch_include` (torch's `include/` directory), replacing links
/// that point elsewhere (another torch). Returns the include root.
///
/// Errors: a stable header directory missing from `torch_include` (a torch without the
/// stable API: older than 2.9, or a broken install), a link that cannot be made.
pub fn prepare_include_root(build_dir: &Utf8Path, torch_include: &Utf8Path) -> anyhow::Result<Utf8PathBuf> {
    let root = include_root(build_dir);
    for rel in STABLE_HEADER_DIRS {
        let target = torch_include.join(rel);
        anyhow::ensure!(
            target.is_dir(),
            "`{target}` does not exist: this torch has no stable-ABI headers (`[torch] stable-abi` needs torch 2.9 or newer with its `include/torch/csrc/stable/`); use a Python environment with such a torch"
        );
        let link = root.join(rel);
        match std::fs::read_link(&link) {
            Ok(old) if old == target.as_std_path() => continue,
            Ok(_) => std::fs::remove_file(&link).with_context(|| format!("cannot replace `{link}`"))?,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(_) => anyhow::bail!("`{link}` exists and is not a link; remove `{root}`"),
        }
        if let Some(parent) = link.parent() {
            std::fs::create_dir_all(parent).with_context(|| format!("cannot create `{parent}`"))?;
        }
        std::os::unix::fs::symlink(&target, &link)
            .with_context(|| format!("cannot link `{link}` to `{target}`"))?;
    }
    Ok(root)
}

/// Host compiler options of a stable-ABI cell built in `build_dir` (after the cell's own
/// `-ffile-prefix-map`s): the include root is spelled `/torch/include` in the binary, as
/// torch's own include directory is, and, with GCC (`gnu`), `-fno-canonical-system-headers`
/// keeps GCC from replacing a header's path through the links by its real path when that is
/// shorter, which would make the bytes depend on the length of the build directory's path
/// (seen: a cached and a fresh build of the same cell differed).
pub fn compile_options(build_dir: &Utf8Path, gnu: bool) -> Vec<String> {
    let mut opts = vec![format!("-ffile-prefix-map={}=/torch/include", include_root(build_dir))];
    if gnu {
        opts.push("-fno-canonical-system-headers".to_owned());
    }
    opts
}

/// The libraries a stable-ABI cell of `backend` links, from torch's `lib/` directory: those
/// that define the C shim functions.
pub fn link_libraries(torch_lib: &Utf8Path, backend: Backend) -> Vec<Utf8PathBuf> {
    let mut libs = vec![torch_lib.join("libtorch_cpu.so")];
    if backend == Backend::Cuda {
        libs.push(torch_lib.join("libtorch_cuda.so"));
    }
    libs
}

/// For a failed stable-ABI compile whose log shows a header outside the stable API not being
/// found (`fatal error: ATen/ATen.h: No such file or directory`), a line saying why and what
/// to include instead; `None` for any other failure.
pub fn compile_hint(log: &str) -> Option<String> {
    let missing: Vec<&str> = log
        .lines()
        .filter(|l| l.contains("No such file or directory") && l.contains("fatal error: "))
        .filter_map(|l| l.split("fatal error: ").nth(1)?.split(':').next())
        .filter(|h| ["ATen/", "c10/", "torch/", "caffe2/"].iter().any(|p| h.starts_with(p)))
        .collect();
    let first = missing.first()?;
    Some(format!(
        "`{first}` is not part of torch's stable ABI: this kernel sets `[torch] stable-abi`, so it compiles against the stable headers only ({}); use `torch/csrc/stable/library.h`, `torch::stable::Tensor` and `torch/headeronly/…` instead, or remove `stable-abi` to build against the full C++ API",
        STABLE_HEADER_DIRS.iter().map(|d| format!("{d}/")).collect::<Vec<_>>().join(", ")
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn include_root_links_exactly_the_stable_dirs_and_follows_a_new_torch() {
        let t = tempfile::tempdir().unwrap();
        let d = Utf8Path::from_path(t.path()).unwrap();
        for torch in ["torch-a", "torch-b"] {
            for rel in STABLE_HEADER_DIRS.iter().chain(&["ATen", "c10/util"]) {
                std::fs::create_dir_all(d.join(torch).join("include").join(rel)).unwrap();
            }
        }
        let build = d.join("build");
        let root = prepare_include_root(&build, &d.join("torch-a/include")).unwrap();
        assert_eq!(root, build.join(INCLUDE_ROOT));
        let mut entries: Vec<String> = walkdir::WalkDir::new(&root)
            .sort_by_file_name()
            .into_iter()
            .map(|e| e.unwrap().path().strip_prefix(&root).unwrap().to_string_lossy().into_owned())
            .collect();
        entries.retain(|e| !e.is_empty());
        assert_eq!(
            entries,
            [
                "torch",
                "torch/csrc",
                "torch/csrc/inductor",
                "torch/csrc/inductor/aoti_torch",
                "torch/csrc/inductor/aoti_torch/c",
                "torch/csrc/inductor/aoti_torch/generated",
                "torch/csrc/stable",
                "torch/headeronly",
            ]
        );
        assert!(!root.join("ATen").exists() && !root.join("c10").exists());
        // Again (nothing changes), then with another torch (the links follow it).
        prepare_include_root(&build, &d.join("torch-a/include")).unwrap();
        prepare_include_root(&build, &d.join("torch-b/include")).unwrap();
        assert_eq!(
            std::fs::read_link(root.join("torch/headeronly")).unwrap(),
            d.join("torch-b/include/torch/headeronly").as_std_path()
        );
    }

    #[test]
    fn a_torch_without_stable_headers_is_a_clear_error() {
        let t = tempfile::tempdir().unwrap();
        let d = Utf8Path::from_path(t.path()).unwrap();
        std::fs::create_dir_all(d.join("include/torch/headeronly")).unwrap();
        let err = prepare_include_root(&d.join("build"), &d.join("include")).unwrap_err().to_string();
        assert_eq!(
            err,
            format!("`{d}/include/torch/csrc/stable` does not exist: this torch has no stable-ABI headers (`[torch] stable-abi` needs torch 2.9 or newer with its `include/torch/csrc/stable/`); use a Python environment with such a torch")
        );
    }

    #[test]
    fn the_include_root_is_spelled_like_torchs_include_dir() {
        let b = Utf8Path::new("/w/build");
        assert_eq!(
            compile_options(b, true),
            [
                "-ffile-prefix-map=/w/build/kb-stable-abi-include=/torch/include",
                "-fno-canonical-system-headers"
            ]
        );
        assert_eq!(
            compile_options(b, false),
            ["-ffile-prefix-map=/w/build/kb-stable-abi-include=/torch/include"]
        );
    }

    #[test]
    fn libraries_are_the_shim_ones() {
        let lib = Utf8Path::new("/t/lib");
        assert_eq!(link_libraries(lib, Backend::Cpu), [Utf8PathBuf::from("/t/lib/libtorch_cpu.so")]);
        assert_eq!(
            link_libraries(lib, Backend::Cuda),
            [Utf8PathBuf::from("/t/lib/libtorch_cpu.so"), "/t/lib/libtorch_cuda.so".into()]
        );
    }

    #[test]
    fn hint_names_the_header_outside_the_stable_api() {
        let log = "[1/3] Building CXX\nFAILED: x.o\n/src/relu.cpp:1:10: fatal error: ATen/core/Tensor.h: No such file or directory\n    1 | #include <ATen/core/Tensor.h>\n";
        let hint = compile_hint(log).unwrap();
        assert!(hint.starts_with("`ATen/core/Tensor.h` is not part of torch's stable ABI: "), "{hint}");
        assert!(hint.contains("(torch/csrc/stable/, torch/headeronly/, "), "{hint}");
        // A user's own missing header, or another failure: no hint.
        assert_eq!(compile_hint("a.cpp:1:10: fatal error: mine.h: No such file or directory\n"), None);
        assert_eq!(compile_hint("a.cpp:3:1: error: expected ';'\n"), None);
    }
}
