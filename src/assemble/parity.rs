//! What upstream's generated build (huggingface/kernels' `kernel-builder create-pyproject`
//! project, built with torch's CMake) gives every compile without the kernel asking, so a
//! kernel written against it compiles here as there (docs/upstream-parity.md lists what
//! still differs, and why):
//!
//! - nvcc options of every CUDA source of a torch cell ([`TORCH_NVCC_FLAGS`]): torch's CMake
//!   puts `--expt-relaxed-constexpr` and `--expt-extended-lambda` (and its diagnostic
//!   suppressions and `ONNX_NAMESPACE`) into `CMAKE_CUDA_FLAGS`; upstream adds `ENABLE_FP8`
//!   and drops torch's `__CUDA_NO_HALF*` undefines, which this build never passes;
//! - the compile definitions torch's CMake targets carry ([`torch_interface_defines`]:
//!   `USE_DISTRIBUTED`, `USE_C10D_NCCL`, …, read from the installed torch);
//! - nvcc's own threads, which [`crate::assemble::compiled::parallel`] chooses (upstream's rule,
//!   threads = capabilities, leaves cores idle for a kernel of few sources).
//!
//! It also reads a failed compile's log for faults with a known fix in `build.toml`
//! ([`compile_hints`]).

use camino::Utf8Path;

/// nvcc options for every CUDA source of a torch (and stable-ABI) cell, before the kernel's
/// own `cuda-flags` (which come later on the command line, so a kernel can still override).
/// One token each: CMake de-duplicates repeated options of a target.
pub const TORCH_NVCC_FLAGS: &[&str] = &[
    "--expt-relaxed-constexpr",
    "--expt-extended-lambda",
    "-DENABLE_FP8",
    "-DONNX_NAMESPACE=onnx_c2",
    "-Xcudafe=--diag_suppress=cc_clobber_ignored",
    "-Xcudafe=--diag_suppress=field_without_dll_interface",
    "-Xcudafe=--diag_suppress=base_class_has_different_dll_interface",
    "-Xcudafe=--diag_suppress=dll_interface_conflict_none_assumed",
    "-Xcudafe=--diag_suppress=dll_interface_conflict_dllexport_assumed",
    "-Xcudafe=--diag_suppress=bad_friend_decl",
];

/// The torch CMake targets whose `INTERFACE_COMPILE_DEFINITIONS` reach a module that links
/// `torch` (upstream's does, for every backend: `torch` depends on both).
const TORCH_TARGETS: &[&str] = &["torch_cpu", "torch_cuda"];

/// The compile definitions that torch's exported CMake targets give whatever links them
/// (`share/cmake/Caffe2/Caffe2Targets.cmake` below `torch_dir`), in file order without
/// repeats: `USE_DISTRIBUTED`, `USE_C10D_GLOO`, `USE_RPC`, `USE_TENSORPIPE` for PyPI's
/// torch 2.11, plus `USE_NVSHMEM`, `USE_C10D_NCCL` for its CUDA build. Generator expressions
/// (`$<…>`) are left out. A torch without the file (none of its CMake) gives none.
pub fn torch_interface_defines(torch_dir: &Utf8Path) -> Vec<String> {
    let path = torch_dir.join("share/cmake/Caffe2/Caffe2Targets.cmake");
    let Ok(text) = std::fs::read_to_string(&path) else {
        return Vec::new();
    };
    interface_defines(&text, TORCH_TARGETS)
}

fn interface_defines(text: &str, targets: &[&str]) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for target in targets {
        let head = format!("set_target_properties({target} PROPERTIES");
        let Some(start) = text.find(&head) else { continue };
        let block = &text[start..];
        let block = &block[..block.find("\n)").unwrap_or(block.len())];
        for line in block.lines() {
            let Some(rest) = line.trim().strip_prefix("INTERFACE_COMPILE_DEFINITIONS ") else { continue };
            for d in rest.trim().trim_matches('"').split(';') {
                if !d.is_empty() && !d.contains('$') && !out.iter().any(|o| o == d) {
                    out.push(d.to_owned());
                }
            }
        }
    }
    out
}

/// The environment variable that sets nvcc's `--threads` for native CUDA builds.
pub const NVCC_THREADS_VAR: &str = crate::env::NVCC_THREADS.name;

/// `KERNEL_BUILDER_NVCC_THREADS` as nvcc's `--threads` (how many of a source's `-gencode`
/// targets it compiles at once): `None` when unset or empty (then [`crate::assemble::compiled::parallel`] chooses).
pub fn nvcc_threads_var(value: Option<&std::ffi::OsStr>) -> anyhow::Result<Option<usize>> {
    count_var(NVCC_THREADS_VAR, "nvcc's --threads", value)
}

/// `KERNEL_BUILDER_NVCC_SPLIT_COMPILE` as cicc's `-split-compile` per nvcc thread: `None`
/// when unset or empty (chosen from the machine then).
pub fn nvcc_split_var(value: Option<&std::ffi::OsStr>) -> anyhow::Result<Option<usize>> {
    count_var(crate::env::NVCC_SPLIT_COMPILE.name, "cicc's -split-compile", value)
}

/// The variable `name` (the value `value`) as a whole number of 1 or more, `what` it sets.
fn count_var(name: &str, what: &str, value: Option<&std::ffi::OsStr>) -> anyhow::Result<Option<usize>> {
    match value.map(|v| v.to_str().map(str::trim)) {
        None | Some(Some("")) => Ok(None),
        Some(Some(v)) => match v.parse::<usize>() {
            Ok(n) if n >= 1 => Ok(Some(n)),
            _ => anyhow::bail!(
                "{name} is `{v}`: set it to a whole number of 1 or more ({what}), or unset it to let kernel-builder choose"
            ),
        },
        Some(None) => anyhow::bail!("{name} is not valid UTF-8; set it to a whole number of 1 or more"),
    }
}

/// `NVCC_APPEND_FLAGS` for the compile: the user's own (if any) with `--threads=<threads>`
/// and, for `split` > 1, cicc's `-Xcicc -split-compile=<split>` appended (see
/// [`crate::assemble::compiled::parallel`]), each left out where the user passes their own
/// (`--threads`/`-t`, any `split-compile`); `None` when nothing is added.
pub fn nvcc_append_flags(user: Option<&str>, threads: usize, split: usize) -> Option<String> {
    let user = user.unwrap_or("").trim();
    let has = |f: &dyn Fn(&str) -> bool| user.split_whitespace().any(f);
    let mut ours: Vec<String> = Vec::new();
    if !has(&|t| t == "-t" || t.starts_with("--threads") || t.starts_with("-t=")) {
        ours.push(format!("--threads={threads}"));
    }
    if split > 1 && !has(&|t| t.contains("split-compile")) {
        ours.push(format!("-Xcicc -split-compile={split}"));
    }
    if ours.is_empty() {
        return None;
    }
    Some(if user.is_empty() { ours.join(" ") } else { format!("{user} {}", ours.join(" ")) })
}

/// Hints for a failed compile whose log shows a fault with a known fix in `build.toml`: nvcc
/// asking for a flag this build did not pass (a kernel that removed it), or a header not
/// found that the kernel has. `listed` are the files of the source set (what the build sees),
/// `on_disk` the other files of the kernel directory (relative paths). Empty for none.
pub fn compile_hints(log: &str, listed: &[String], on_disk: &[String]) -> Vec<String> {
    let mut hints: Vec<String> = Vec::new();
    for (asks, flag) in [
        ("--extended-lambda", "--expt-extended-lambda"),
        ("--expt-relaxed-constexpr", "--expt-relaxed-constexpr"),
    ] {
        if log.lines().any(|l| l.contains("error") && l.contains(asks)) {
            hints.push(format!(
                "nvcc asks for `{flag}`: add it to `cuda-flags` of the [kernel.*] whose source failed (`cuda-flags = [\"{flag}\"]`)"
            ));
        }
    }
    for missing in missing_headers(log) {
        let find = |files: &[String]| {
            files.iter().find(|h| h.as_str() == missing || h.ends_with(&format!("/{missing}"))).cloned()
        };
        let hint = if let Some(found) = find(listed) {
            let dir = found.strip_suffix(missing).unwrap_or("").trim_end_matches('/');
            let dir = if dir.is_empty() { "." } else { dir };
            format!(
                "`{missing}` is the kernel's `{found}`: add `\"{dir}\"` to `include` of the table whose source includes it (`[torch] include` for the binding, `[kernel.<name>] include` for a kernel)"
            )
        } else if let Some(found) = find(on_disk) {
            format!(
                "`{missing}` is the kernel's `{found}`, which no `src` lists, so the build does not see it: add `\"{found}\"` to `src` of the [kernel.*] whose sources include it"
            )
        } else {
            continue;
        };
        if !hints.contains(&hint) {
            hints.push(hint);
        }
    }
    hints
}

/// The headers a compile log says were not found (`fatal error: x.h: No such file or
/// directory` of GCC and clang, `catastrophic error: cannot open source file "x.h"` of nvcc),
/// in order, without repeats.
fn missing_headers(log: &str) -> Vec<&str> {
    let mut out: Vec<&str> = Vec::new();
    for line in log.lines() {
        let name = match line.split_once("fatal error: ") {
            Some((_, rest)) => rest.split_once(": No such file").map(|(n, _)| n),
            None => line.split_once("cannot open source file \"").and_then(|(_, r)| r.split('"').next()),
        };
        if let Some(n) = name.map(str::trim).filter(|n| !n.is_empty()) {
            if !out.contains(&n) {
                out.push(n);
            }
        }
    }
    out
}

/// The files of `kernel_dir` (relative, `/`-separated) up to eight levels down, leaving out
/// `build/`, hidden directories and `__pycache__`, at most `limit` of them: where a compile's
/// missing header may sit without being listed in `src`. Read only after a compile failed.
pub fn kernel_files(kernel_dir: &Utf8Path, limit: usize) -> Vec<String> {
    walkdir::WalkDir::new(kernel_dir)
        .max_depth(8)
        .into_iter()
        .filter_entry(|e| {
            let n = e.file_name().to_string_lossy();
            e.depth() == 0 || !(n.starts_with('.') || n == "__pycache__" || (e.depth() == 1 && n == "build"))
        })
        .filter_map(Result::ok)
        .filter(|e| e.file_type().is_file())
        .filter_map(|e| Some(e.path().strip_prefix(kernel_dir).ok()?.to_str()?.to_owned()))
        .take(limit)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn interface_defines_are_read_per_target_without_generator_expressions() {
        let text = "add_library(torch_cpu SHARED IMPORTED)\n\nset_target_properties(torch_cpu PROPERTIES\n  INTERFACE_COMPILE_DEFINITIONS \"USE_DISTRIBUTED;USE_C10D_GLOO;USE_RPC\"\n  INTERFACE_INCLUDE_DIRECTORIES \"${_IMPORT_PREFIX}/include\"\n)\n\nset_target_properties(torch_cpu_library PROPERTIES\n  INTERFACE_COMPILE_DEFINITIONS \"\\$<TARGET_PROPERTY:torch_cpu,INTERFACE_COMPILE_DEFINITIONS>\"\n)\nset_target_properties(torch_cuda PROPERTIES\n  INTERFACE_COMPILE_DEFINITIONS \"USE_NVSHMEM;USE_C10D_NCCL;USE_RPC\"\n)\n";
        assert_eq!(
            interface_defines(text, TORCH_TARGETS),
            ["USE_DISTRIBUTED", "USE_C10D_GLOO", "USE_RPC", "USE_NVSHMEM", "USE_C10D_NCCL"]
        );
        assert!(interface_defines("", TORCH_TARGETS).is_empty());
    }

    #[test]
    fn nvcc_threads_and_split_variables_refuse_nonsense() {
        assert_eq!(nvcc_threads_var(None).unwrap(), None);
        assert_eq!(nvcc_threads_var(Some("8".as_ref())).unwrap(), Some(8));
        assert_eq!(
            nvcc_threads_var(Some("zero".as_ref())).unwrap_err().to_string(),
            "KERNEL_BUILDER_NVCC_THREADS is `zero`: set it to a whole number of 1 or more (nvcc's --threads), or unset it to let kernel-builder choose"
        );
        assert!(nvcc_threads_var(Some("0".as_ref())).is_err());
        assert_eq!(nvcc_split_var(Some(" 4 ".as_ref())).unwrap(), Some(4));
        assert_eq!(
            nvcc_split_var(Some("0".as_ref())).unwrap_err().to_string(),
            "KERNEL_BUILDER_NVCC_SPLIT_COMPILE is `0`: set it to a whole number of 1 or more (cicc's -split-compile), or unset it to let kernel-builder choose"
        );
    }

    #[test]
    fn nvcc_append_flags_keep_the_users_and_never_pass_threads_or_a_split_twice() {
        assert_eq!(nvcc_append_flags(None, 4, 1).as_deref(), Some("--threads=4"));
        assert_eq!(nvcc_append_flags(Some("-lineinfo"), 2, 1).as_deref(), Some("-lineinfo --threads=2"));
        assert_eq!(nvcc_append_flags(Some("-t 8"), 2, 1), None);
        assert_eq!(nvcc_append_flags(Some("--threads=8"), 2, 1), None);
        assert_eq!(nvcc_append_flags(None, 1, 4).as_deref(), Some("--threads=1 -Xcicc -split-compile=4"));
        assert_eq!(nvcc_append_flags(Some("-t 2"), 1, 4).as_deref(), Some("-t 2 -Xcicc -split-compile=4"));
        assert_eq!(
            nvcc_append_flags(Some("--split-compile=0"), 1, 4).as_deref(),
            Some("--split-compile=0 --threads=1")
        );
        assert_eq!(nvcc_append_flags(Some("--threads=2 --split-compile=3"), 1, 4), None);
    }

    #[test]
    fn hints_name_the_flag_and_the_include_directory() {
        let log = "rotary.cu(12): error: The closure type for a lambda (\"lambda []()->void\") cannot be used in the template argument type of a __global__ function template instantiation, unless the lambda is defined within a __device__ or __global__ function, or the flag '-extended-lambda' is specified and the lambda is an extended lambda (a __device__ or __host__ __device__ lambda defined within a __host__ or __host__ __device__ function)\nx.cu(3): error: __host__ or __device__ annotation on lambda requires --extended-lambda nvcc flag\n";
        assert_eq!(
            compile_hints(log, &[], &[]),
            ["nvcc asks for `--expt-extended-lambda`: add it to `cuda-flags` of the [kernel.*] whose source failed (`cuda-flags = [\"--expt-extended-lambda\"]`)"]
        );
        let log = "torch-ext/torch_binding.cpp:9:10: fatal error: cumsum.h: No such file or directory\n";
        assert_eq!(
            compile_hints(log, &["csrc/cumsum.h".into(), "csrc/cumsum.cu".into()], &[]),
            ["`cumsum.h` is the kernel's `csrc/cumsum.h`: add `\"csrc\"` to `include` of the table whose source includes it (`[torch] include` for the binding, `[kernel.<name>] include` for a kernel)"]
        );
        let log = "x/a.cu(3): catastrophic error: cannot open source file \"util/hidden.cuh\"\n";
        assert_eq!(
            compile_hints(log, &["x/a.cu".into()], &["x/util/hidden.cuh".into()]),
            ["`util/hidden.cuh` is the kernel's `x/util/hidden.cuh`, which no `src` lists, so the build does not see it: add `\"x/util/hidden.cuh\"` to `src` of the [kernel.*] whose sources include it"]
        );
        let log = "a.cpp:1:10: fatal error: nothere.h: No such file or directory";
        assert!(compile_hints(log, &["csrc/x.h".into()], &[]).is_empty());
        assert!(compile_hints("all fine", &[], &[]).is_empty());
    }
}
