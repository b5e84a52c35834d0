//! The environment variables kernel-builder reads, declared once: name, what it does, default.
//!
//! Every read of an environment variable in the library goes through a [`Var`] of [`RUNTIME`]
//! (or [`Family::var`], or [`recorded`] for the compiler variables a cell's key records), so a
//! variable cannot be read without being declared here; a test scans `src/` for any other
//! `std::env::var`/`var_os` call and for clap `env = "…"` or `option_env!` names missing from
//! this table. README's "Environment variables" section is [`readme_section`], checked by a test.

use std::ffi::OsString;

/// One environment variable the tool interprets.
#[derive(Debug)]
pub struct Var {
    pub name: &'static str,
    /// What it does, one line (README's list shows it).
    pub meaning: &'static str,
    /// What happens when it is unset or empty.
    pub default: &'static str,
}

impl Var {
    /// Its value, `None` when unset or not UTF-8 (`std::env::var(..).ok()`): for variables of
    /// other programs (`PATH`, `HOME`, `CXX`). Ours (`KERNEL_BUILDER_…`) are read with
    /// [`Var::setting`], which refuses what is not UTF-8; a test holds `src/` to that.
    pub fn get(&self) -> Option<String> {
        std::env::var(self.name).ok()
    }

    /// Its value, `None` when unset or empty or not UTF-8.
    pub fn non_empty(&self) -> Option<String> {
        self.get().filter(|v| !v.is_empty())
    }

    /// Its value as a setting: `None` when unset or blank.
    ///
    /// Errors: set to bytes that are not UTF-8, naming the variable (taking it as unset would
    /// quietly apply the default the user meant to change).
    pub fn setting(&self) -> anyhow::Result<Option<String>> {
        match std::env::var(self.name) {
            Ok(v) if v.trim().is_empty() => Ok(None),
            Ok(v) => Ok(Some(v)),
            Err(std::env::VarError::NotPresent) => Ok(None),
            Err(std::env::VarError::NotUnicode(raw)) => Err(not_utf8(self.name, &raw, self.meaning)),
        }
    }

    /// A directory setting: `None` when unset or blank.
    ///
    /// Errors, naming the variable: not UTF-8; `~…` (no shell expanded it); a relative path
    /// (it would land under whatever directory the tool runs in); a path that exists and is no
    /// directory. A user's trial had `'~/tc'` download 1.8 GB into `./~/tc`.
    pub fn dir(&self) -> anyhow::Result<Option<camino::Utf8PathBuf>> {
        match self.setting()? {
            Some(v) => absolute_dir(self.name, &v, self.meaning, None).map(Some),
            None => Ok(None),
        }
    }

    /// A size setting (`500M`, `2G`; [`crate::fsutil::parse_size`]): `default` when unset or
    /// blank.
    ///
    /// Errors: not UTF-8, or not a size; the message names the variable and its value.
    pub fn size(&self, default: u64) -> anyhow::Result<u64> {
        match self.setting()? {
            None => Ok(default),
            Some(v) => crate::fsutil::parse_size(v.trim())
                .map_err(|e| anyhow::anyhow!("{} is `{v}`: {e}", self.name)),
        }
    }

    /// Its raw value, `None` when unset.
    pub fn os(&self) -> Option<OsString> {
        std::env::var_os(self.name)
    }

    /// Its raw value, `None` when unset or empty.
    pub fn os_non_empty(&self) -> Option<OsString> {
        self.os().filter(|v| !v.is_empty())
    }
}

/// A family of variables, one per name (`KERNEL_BUILDER_DEP_<NAME>`).
#[derive(Debug)]
pub struct Family {
    /// The pattern shown to users: the prefix, then `<NAME>`.
    pub pattern: &'static str,
    pub meaning: &'static str,
    pub default: &'static str,
}

impl Family {
    /// The member for `name`: the prefix, then `name` upper-cased with `-` as `_`.
    pub fn name(&self, name: &str) -> String {
        let prefix = self.pattern.trim_end_matches("<NAME>");
        format!("{prefix}{}", name.to_ascii_uppercase().replace('-', "_"))
    }

    /// The value of [`Family::name`]`(name)`, `None` when unset.
    ///
    /// Errors: set to bytes that are not UTF-8, naming the variable.
    pub fn var(&self, name: &str) -> anyhow::Result<Option<String>> {
        let var = self.name(name);
        match std::env::var(&var) {
            Ok(v) => Ok(Some(v)),
            Err(std::env::VarError::NotPresent) => Ok(None),
            Err(std::env::VarError::NotUnicode(raw)) => Err(not_utf8(&var, &raw, self.meaning)),
        }
    }
}

/// `value` of the variable `name` as a directory setting for `what`: refused, naming the
/// variable, when it starts with `~` (no shell expanded it), is relative (it would land under
/// whatever directory the tool runs in), or exists and is no directory. `other`: the one other
/// value the variable takes (`off`), offered as the alternative.
pub fn absolute_dir(
    name: &str,
    value: &str,
    what: &str,
    other: Option<&str>,
) -> anyhow::Result<camino::Utf8PathBuf> {
    let path = camino::Utf8PathBuf::from(value.trim());
    let (or, or_to) = match other {
        Some(o) => (format!(", or `{o}`"), format!(", or to `{o}`")),
        None => Default::default(),
    };
    anyhow::ensure!(
        !path.as_str().starts_with('~'),
        "{name} is `{path}`, and `~` is not expanded here; write the directory in full (`$HOME/…`){or}"
    );
    anyhow::ensure!(
        path.is_absolute(),
        "{name} is `{path}`, a relative path; set it to an absolute directory ({what}){or_to}"
    );
    anyhow::ensure!(
        !path.exists() || path.is_dir(),
        "{name} is `{path}`, which exists and is not a directory; set it to a directory ({what}){or_to}"
    );
    Ok(path)
}

/// A variable of ours set to bytes that are not UTF-8: refused, since taking it as unset would
/// quietly apply the default the user meant to change.
fn not_utf8(name: &str, raw: &std::ffi::OsStr, meaning: &str) -> anyhow::Error {
    anyhow::anyhow!(
        "{name} is `{}`, which is not UTF-8 text; set it in UTF-8 ({meaning}), or unset it",
        raw.to_string_lossy()
    )
}

macro_rules! vars {
    ($($id:ident = $name:literal, $meaning:literal, default $default:literal;)*) => {
        $(pub const $id: Var = Var { name: $name, meaning: $meaning, default: $default };)*
        /// Every variable read while the tool runs, in README's order.
        pub const RUNTIME: &[Var] = &[$($id),*];
        /// Each variable's constant, by the name the source reads it with.
        #[cfg(test)]
        const IDENTS: &[(&str, &str)] = &[$((stringify!($id), $name)),*];
    };
}

vars! {
    CACHE_DIR = "KERNEL_BUILDER_CACHE_DIR",
        "the cache root: native cell cache, CMake work directories, toolchain and kernel-deps caches",
        default "`$XDG_CACHE_HOME/kernel-builder`, else `~/.cache/kernel-builder`";
    NATIVE_CACHE_MAX_SIZE = "KERNEL_BUILDER_NATIVE_CACHE_MAX_SIZE",
        "the size the native cell cache is pruned to after each build (e.g. `20G`)",
        default "`5G`";
    TOOLCHAIN_CACHE_DIR = "KERNEL_BUILDER_TOOLCHAIN_CACHE_DIR",
        "where pinned torch/CUDA wheels are downloaded and unpacked",
        default "`toolchain-v1/` in the cache root";
    TOOLCHAIN_CACHE_MAX_SIZE = "KERNEL_BUILDER_TOOLCHAIN_CACHE_MAX_SIZE",
        "the size the toolchain cache is pruned to after each build",
        default "`30G`";
    JOBS = "KERNEL_BUILDER_JOBS",
        "Ninja's `-j` inside each native compiled cell (a whole number of 1 or more)",
        default "chosen from the cores, memory and sources, shared by the cells `--jobs` builds at once";
    NVCC_THREADS = "KERNEL_BUILDER_NVCC_THREADS",
        "nvcc's `--threads` for native CUDA builds",
        default "chosen from the cores, memory, sources and targets";
    NVCC_SPLIT_COMPILE = "KERNEL_BUILDER_NVCC_SPLIT_COMPILE",
        "cicc's `-split-compile` per nvcc thread for native CUDA builds (`1`: no split)",
        default "enough for one compile alone to use the cell's slots (cores, within the memory), with the compiles together at most 3 times over them (no split when the CUDA sources fill the slots)";
    COMPILE_CACHE = "KERNEL_BUILDER_COMPILE_CACHE",
        "the compile cache (sccache) of native compiled cells: a directory, or `off`",
        default "`sccache-v1/` in the cache root";
    COMPILE_CACHE_MAX_SIZE = "KERNEL_BUILDER_COMPILE_CACHE_MAX_SIZE",
        "the size the compile cache is pruned to after each build (e.g. `20G`)",
        default "`10G`";
    COMPILE_DIST = "KERNEL_BUILDER_COMPILE_DIST",
        "an sccache-dist scheduler (`http://HOST:PORT`) whose build servers run native cells' compiles",
        default "every compile runs on this machine";
    COMPILE_DIST_TOKEN = "KERNEL_BUILDER_COMPILE_DIST_TOKEN",
        "the client token of that scheduler (its `client_auth` token)",
        default "none; required with `KERNEL_BUILDER_COMPILE_DIST`";
    CUDA_CAPABILITIES = "KERNEL_BUILDER_CUDA_CAPABILITIES",
        "like `--cuda-capabilities`: compile CUDA kernels for fewer capabilities (a check build)",
        default "every capability the kernel publishes";
    NIX = "KERNEL_BUILDER_NIX",
        "the Nix program to run",
        default "`nix` from `PATH`";
    ORCHESTRATOR = "KERNEL_BUILDER_ORCHESTRATOR",
        "a directory with `bin/kernel-builder` and `flake.nix`: the builder Nix cells run",
        default "this binary when statically linked, else built by the flake";
    FLAKE_REF = "KERNEL_BUILDER_FLAKE_REF",
        "like `init --flake-ref`: the kernel-builder flake a new project's flake.nix names",
        default "the flake this binary came from";
    PYTHON = "KERNEL_BUILDER_PYTHON",
        "like `tune --python`: the Python that runs Helion autotuning",
        default "`python3`";
    PLAIN = "KERNEL_BUILDER_PLAIN",
        "non-empty: plain diagnostics (no colours or Unicode) even on a terminal",
        default "fancy on a terminal";
    NO_COLOR = "NO_COLOR",
        "non-empty: the same as `KERNEL_BUILDER_PLAIN`",
        default "fancy on a terminal";
    HUB_TIMEOUT = "KERNEL_BUILDER_HUB_TIMEOUT",
        "seconds a Hub request waits for an answer (1 to 3600)",
        default "`60`";
    HF_ENDPOINT = "HF_ENDPOINT",
        "the Hub to talk to (an http(s) URL)",
        default "`https://huggingface.co`";
    HF_TOKEN = "HF_TOKEN",
        "the Hub token",
        default "the token file";
    HF_TOKEN_PATH = "HF_TOKEN_PATH",
        "the Hub token file",
        default "`$HF_HOME/token`";
    HF_HOME = "HF_HOME",
        "the Hugging Face home directory (its `token`)",
        default "`$XDG_CACHE_HOME/huggingface`, else `~/.cache/huggingface`";
    XDG_CACHE_HOME = "XDG_CACHE_HOME",
        "the user's cache directory",
        default "`~/.cache`";
    HOME = "HOME",
        "the user's home directory (for `~/.cache`)",
        default "none: then a cache directory variable must be set";
    PATH = "PATH",
        "where programs are looked for (nix, cmake, ninja, the C++ compiler, nvcc)",
        default "no program is found there";
    SHELL = "SHELL",
        "the shell `devshell` and `testshell` start when no command is given",
        default "`/bin/sh`";
    PYTHONPATH = "PYTHONPATH",
        "kept after the link directory `testshell` puts first",
        default "only that directory";
    LOCAL_KERNELS = "LOCAL_KERNELS",
        "kept after the `<repo-id>=DIR/build` mapping `testshell` puts first",
        default "only that mapping";
    SSL_CERT_FILE = "SSL_CERT_FILE",
        "a PEM file of the certificate authorities HTTPS downloads trust, instead of the system's (as for OpenSSL, curl and pip)",
        default "the system's store (`/etc/ssl/certs` and the like), else the Mozilla roots built in";
    SSL_CERT_DIR = "SSL_CERT_DIR",
        "directories (`:`-separated) of PEM certificate authorities HTTPS downloads trust, instead of the system's",
        default "as for `SSL_CERT_FILE`";
    RECORD_VARIANTS = "KERNEL_BUILDER_RECORD_VARIANTS",
        "a directory: every variant built is also copied there (the test suite checks each one's digest with the loader's)",
        default "nothing is copied";
    CXX = "CXX",
        "the C++ compiler of native compiled cells",
        default "`c++`, `g++` or `clang++` from `PATH`";
    CUDACXX = "CUDACXX",
        "the nvcc of native CUDA cells",
        default "`$CUDA_HOME/bin/nvcc`, else `PATH`, else PyPI's nvcc in the Python environment";
    CUDA_HOME = "CUDA_HOME",
        "a CUDA toolkit whose `bin/nvcc` native CUDA cells use",
        default "see `CUDACXX`";
    CARGO = "CARGO",
        "the cargo that builds Rust (`rust-cpu`) kernels; the `rustc` beside it compiles them",
        default "`cargo` from `PATH`, else `$CARGO_HOME/bin`";
    CARGO_HOME = "CARGO_HOME",
        "cargo's home; the paths of its registry sources are mapped away in a Rust kernel's library",
        default "`~/.cargo`";
    NVCC_APPEND_FLAGS = "NVCC_APPEND_FLAGS",
        "nvcc flags; kernel-builder appends its `--threads` to them",
        default "only kernel-builder's `--threads`";
}

/// `KERNEL_BUILDER_DEP_<NAME>`: a checkout of a pinned C++ dependency for native builds.
pub const DEP: Family = Family {
    pattern: "KERNEL_BUILDER_DEP_<NAME>",
    meaning: "a local checkout of the pinned C++ dependency `<name>` (e.g. `CUTLASS_3_6`) for native builds",
    default: "none: a native build needing it fails naming the pin and how to fetch it",
};

/// The variables CMake, the C++ compiler and nvcc read that change what they produce; the
/// tool never interprets them, but each one's value is part of a compiled cell's key.
pub const COMPILER_ENV: &[&str] = &[
    "CFLAGS",
    "CXXFLAGS",
    "CPPFLAGS",
    "LDFLAGS",
    "CUDAFLAGS",
    "CUDAHOSTCXX",
    "CUDAARCHS",
    "NVCC_PREPEND_FLAGS",
    "NVCC_APPEND_FLAGS",
    "NVCC_CCBIN",
    "CPATH",
    "C_INCLUDE_PATH",
    "CPLUS_INCLUDE_PATH",
    "LIBRARY_PATH",
    "GCC_EXEC_PREFIX",
    "COMPILER_PATH",
    "SOURCE_DATE_EPOCH",
    "CMAKE_PREFIX_PATH",
    "CMAKE_TOOLCHAIN_FILE",
    "CMAKE_CXX_COMPILER_LAUNCHER",
    "CMAKE_CUDA_COMPILER_LAUNCHER",
];

/// Variables read when kernel-builder itself is compiled (`option_env!`), not when it runs.
pub const BUILD_TIME: &[Var] = &[
    Var {
        name: "KERNEL_BUILDER_DEFAULT_FLAKE_REF",
        meaning: "the flake `init` names by default (set by the flake's own build)",
        default: "the flake a wheel installed beside the executable, else the checkout it was built from",
    },
    Var {
        name: "KERNEL_BUILDER_GIT_COMMIT",
        meaning: "the git commit recorded as the builder's provenance",
        default: "not recorded",
    },
    Var {
        name: "KERNEL_BUILDER_GIT_DIRTY",
        meaning: "`true`/`false`: whether that commit's tree had changes",
        default: "not recorded",
    },
];

/// The raw value of `name`, a variable of [`COMPILER_ENV`] (or `CC`, or a declared [`Var`])
/// recorded, not interpreted, in a compiled cell's key.
pub fn recorded(name: &str) -> Option<OsString> {
    debug_assert!(
        COMPILER_ENV.contains(&name) || name == "CC" || RUNTIME.iter().any(|v| v.name == name),
        "`{name}` is not declared in src/env.rs"
    );
    std::env::var_os(name)
}

/// README's "Environment variables" list, generated from the tables above.
pub fn readme_section() -> String {
    let mut out = String::new();
    let line = |out: &mut String, name: &str, meaning: &str, default: &str| {
        out.push_str(&format!("- `{name}`: {meaning}. Unset: {default}.\n"));
    };
    for v in RUNTIME {
        line(&mut out, v.name, v.meaning, v.default);
    }
    line(&mut out, DEP.pattern, DEP.meaning, DEP.default);
    let compiler: Vec<String> = COMPILER_ENV.iter().map(|n| format!("`{n}`")).collect();
    out.push_str(&format!(
        "- {} and `CC`: not read by kernel-builder, but passed to CMake and the compilers; their values are part of a compiled cell's cache key.\n",
        compiler.join(", ")
    ));
    out.push_str("\nRead when kernel-builder itself is compiled:\n\n");
    for v in BUILD_TIME {
        line(&mut out, v.name, v.meaning, v.default);
    }
    out
}

/// The library's source files (path under `src/`, text), for the tests that scan them.
#[cfg(test)]
pub(crate) fn sources() -> Vec<(String, String)> {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut out = Vec::new();
    let mut stack = vec![root.clone()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap() {
            let p = e.unwrap().path();
            if p.is_dir() {
                stack.push(p);
            } else if p.extension().is_some_and(|x| x == "rs") {
                let rel = p.strip_prefix(&root).unwrap().display().to_string();
                out.push((rel, std::fs::read_to_string(&p).unwrap()));
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    const BEGIN: &str = "<!-- env-table begin: generated from src/env.rs, see its test -->\n";
    const END: &str = "<!-- env-table end -->";

    /// The quoted names after each `marker` in `text`.
    fn quoted_after(text: &str, marker: &str) -> Vec<String> {
        text.match_indices(marker)
            .filter_map(|(i, _)| {
                let rest = &text[i + marker.len()..];
                rest.find('"').map(|end| rest[..end].to_owned())
            })
            .collect()
    }

    /// Each line of `src/` outside this file, as `src/FILE:N: line`, with its code (the line
    /// without a `//` comment).
    fn code_lines() -> Vec<(String, String)> {
        let mut out = Vec::new();
        for (file, text) in sources().into_iter().filter(|(f, _)| f != "env.rs") {
            for (n, l) in text.lines().enumerate() {
                let code = l.split("//").next().unwrap_or("").to_owned();
                out.push((format!("src/{file}:{}: {}", n + 1, l.trim()), code));
            }
        }
        out
    }

    #[test]
    fn every_read_goes_through_the_table() {
        let mut stray: Vec<String> = code_lines()
            .into_iter()
            .filter(|(_, code)| {
                code.contains("env::var(") || code.contains("env::var_os(") || code.contains("env::vars")
            })
            .map(|(at, _)| at)
            .collect();
        for (file, text) in sources() {
            if file == "env.rs" {
                continue;
            }
            let declared = |name: &str| RUNTIME.iter().chain(BUILD_TIME).any(|v| v.name == name);
            for name in
                quoted_after(&text, "env = \"").into_iter().chain(quoted_after(&text, "option_env!(\""))
            {
                if !declared(&name) {
                    stray.push(format!("src/{file}: `{name}` is not declared in src/env.rs"));
                }
            }
        }
        assert!(stray.is_empty(), "read environment variables through src/env.rs:\n{}", stray.join("\n"));
    }

    /// Ours are read as settings: `get`/`non_empty` take bytes that are not UTF-8 for unset,
    /// which would quietly apply a default the user meant to change. (`os`/`os_non_empty` stay
    /// open to ours: their callers parse the raw value themselves, or only ask whether it is set.)
    #[test]
    fn ours_are_read_as_settings() {
        let ours: Vec<&str> = IDENTS
            .iter()
            .filter(|(_, name)| name.starts_with("KERNEL_BUILDER_"))
            .map(|(id, _)| *id)
            .collect();
        assert!(ours.len() > 10, "{ours:?}");
        let stray: Vec<String> = code_lines()
            .into_iter()
            .filter(|(_, code)| {
                ours.iter().any(|id| {
                    [".get()", ".non_empty()"].iter().any(|r| code.contains(&format!("env::{id}{r}")))
                })
            })
            .map(|(at, _)| at)
            .collect();
        assert!(stray.is_empty(), "read KERNEL_BUILDER_ variables with Var::setting:\n{}", stray.join("\n"));
    }

    #[test]
    fn names_are_unique() {
        let mut names: Vec<&str> = RUNTIME.iter().chain(BUILD_TIME).map(|v| v.name).collect();
        names.extend(COMPILER_ENV.iter().filter(|n| **n != "NVCC_APPEND_FLAGS"));
        let n = names.len();
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), n);
    }

    #[test]
    fn family_names() {
        assert_eq!(DEP.name("cutlass_3_6"), "KERNEL_BUILDER_DEP_CUTLASS_3_6");
        assert_eq!(DEP.name("metal-cpp"), "KERNEL_BUILDER_DEP_METAL_CPP");
    }

    #[test]
    fn readme_lists_the_table() {
        let readme =
            std::fs::read_to_string(std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("README.md"))
                .unwrap();
        let want = readme_section();
        let got = readme
            .split_once(BEGIN)
            .and_then(|(_, rest)| rest.split_once(END))
            .map(|(section, _)| section.trim_start_matches('\n'));
        assert_eq!(
            got,
            Some(want.as_str()),
            "README.md's environment variable list is not src/env.rs's table; put this between `{}` and `{END}`:\n{want}",
            BEGIN.trim_end()
        );
    }
}
