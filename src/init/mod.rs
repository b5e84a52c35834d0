//! `kernel-builder init`: new kernel projects from embedded templates.
//!
//! A [`Project`] (repository, template, backends, license, flake reference) is rendered into
//! a [`FileSet`] in memory by [`render_project`], then written by [`write_project`], which
//! refuses a non-empty directory unless asked to overwrite, writes nothing when a check fails,
//! and stages the files in git.
//!
//! Templates (files under `src/init/templates/`, embedded with `include_str!`):
//!
//! | template | framework | default backends | op |
//! |---|---|---|---|
//! | `helion` (default) | `[torch-noarch]`, `python-depends = ["helion"]` | cuda rocm xpu | `@helion.aot_kernel`, with `bench.py` for the AOT runner |
//! | `triton` | `[torch-noarch]` | cuda rocm xpu | `@triton.jit` |
//! | `torch` | `[torch-noarch]` | cpu cuda | plain PyTorch |
//! | `compiled` | `[torch]` + one `[kernel.*]` per backend | cuda | CUDA/HIP, C++, Metal, SYCL |
//!
//! Every project also gets `.github/workflows/build.yml` ([`GITHUB_WORKFLOW`], written as it
//! is): a GitHub Actions workflow that builds the bundle with one job per entry of
//! `kernel-builder ci-matrix`, joins the variants, checks them and uploads.
//!
//! Helion is the default because a Helion kernel is this project's main job (a noarch kernel
//! that builds without a compiler); upstream's default, a compiled kernel, is `--template
//! compiled`. Every template's op is the same, `<python_name>(x, y) = x + y`, so its tests
//! and card are the same too.

use std::collections::BTreeMap;

use camino::Utf8PathBuf;

use crate::config::Backend;

pub mod names;
mod render;
mod write;

pub use names::KernelNames;
pub use render::RenderError;
pub use write::{write_project, GitOutcome};

/// The published flake reference of this project, which provides
/// `lib.genKernelFlakeOutputs`; the last resort of [`default_flake_ref`].
pub const DEFAULT_FLAKE_REF: &str = "github:kernel-builder/kernel-builder";

/// The flake reference a new kernel's `flake.nix` takes kernel-builder from when neither
/// `--flake-ref` nor `KERNEL_BUILDER_FLAKE_REF` is given, and where it comes from (said to
/// the user, who can change `inputs.kernel-builder.url` in `flake.nix`):
///
/// 1. `KERNEL_BUILDER_DEFAULT_FLAKE_REF` at compile time: the flake's own package sets it to
///    its source in the Nix store (`path:/nix/store/…-source`), so a kernel-builder installed
///    through the flake writes the flake it came from, which works offline;
/// 2. the flake its wheel installed beside it ([`installed_flake`]): `path:<dir>`, the same
///    source as the binary, so `pip install kernel-builder` users build with Nix at the
///    binary's own version, offline too;
/// 3. the checkout this binary was built from, when it still holds a `flake.nix`:
///    `git+file://<dir>` when it is a git work tree (Nix then copies only tracked files, not
///    `target/`), else `path:<dir>`; `cargo build` in a clone writes a reference to that clone;
/// 4. [`DEFAULT_FLAKE_REF`].
///
/// A wheel is checked before the checkout: a wheel built in a clone must not name that clone
/// on the machine that built it.
pub fn default_flake_ref() -> (String, &'static str) {
    if let Some(r) = option_env!("KERNEL_BUILDER_DEFAULT_FLAKE_REF").filter(|r| !r.is_empty()) {
        return (r.to_owned(), "the flake this kernel-builder was installed from");
    }
    if let Some(dir) = std::env::current_exe().ok().and_then(|exe| installed_flake(&exe)) {
        return (format!("path:{dir}"), "the flake installed with this kernel-builder's wheel");
    }
    let checkout = env!("CARGO_MANIFEST_DIR");
    let dir = std::path::Path::new(checkout);
    if dir.join("flake.nix").is_file() {
        let scheme = if dir.join(".git").exists() { "git+file://" } else { "path:" };
        return (format!("{scheme}{checkout}"), "the checkout this kernel-builder was built from");
    }
    (DEFAULT_FLAKE_REF.to_owned(), "the published kernel-builder flake")
}

/// Where a wheel puts the kernel-builder flake, relative to the installation prefix: the
/// wheel's `kernel_builder-<version>.data/data/` goes to the prefix whose `bin/` (`Scripts\`
/// on Windows) receives the executable, in every pip and uv layout (a venv, `--user`,
/// `--prefix`, `--target`, a uv tool). `scripts/build-wheel.sh` stages it.
pub const INSTALLED_FLAKE_DIR: &str = "share/kernel-builder/flake";

/// The flake installed with the executable `exe` (a wheel's data, [`INSTALLED_FLAKE_DIR`] under
/// the prefix above `exe`'s directory), if there is one with a `flake.nix`. `exe` is resolved
/// first: `uv tool install` links `~/.local/bin/kernel-builder` to the tool's own environment.
/// Paths that are not UTF-8 are skipped (a flake reference is a string).
pub fn installed_flake(exe: &std::path::Path) -> Option<Utf8PathBuf> {
    let exe = std::fs::canonicalize(exe).ok()?;
    let prefix = exe.parent()?.parent()?;
    let dir = Utf8PathBuf::from_path_buf(prefix.join(INSTALLED_FLAKE_DIR)).ok()?;
    // A prefix with a space (or a quote) would make `path:<dir>` a reference `init` refuses;
    // `default_flake_ref` then goes on to the next source and says which one it took.
    (is_flake_ref_text(&format!("path:{dir}")) && dir.join("flake.nix").is_file()).then_some(dir)
}

/// Whether `r` can be written as a flake reference into `flake.nix` as it is: not empty, no
/// spaces or control characters, no `"`, `\` or `$` (which would end or interpolate the Nix
/// string).
pub fn is_flake_ref_text(r: &str) -> bool {
    !r.is_empty() && r.chars().all(|c| c.is_ascii_graphic() && !matches!(c, '"' | '\\' | '$'))
}

/// The GitHub Actions workflow every project gets: `kernel-builder ci-matrix` fans the bundle
/// out to one job per cell, a last job joins, checks and uploads (the file's comments say
/// how).
pub const GITHUB_WORKFLOW: &str = ".github/workflows/build.yml";

/// The license written into `build.toml` when `--license` is not given.
pub const DEFAULT_LICENSE: &str = "Apache-2.0";

/// The kind of kernel a new project holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, clap::ValueEnum)]
pub enum Template {
    /// A compiled kernel (`[torch]`): CUDA/HIP, C++, Metal or SYCL sources per backend (this
    /// version builds its cpu and cuda cells natively).
    Compiled,
    /// A Helion kernel (`@helion.aot_kernel`), noarch, with AOT-tuned configurations.
    Helion,
    /// A Triton kernel (`@triton.jit`), noarch.
    Triton,
    /// Plain PyTorch operations, noarch; runs on the CPU too.
    Torch,
}

impl Template {
    /// Every template, in the order shown to users.
    pub const ALL: [Template; 4] = [Template::Compiled, Template::Helion, Template::Triton, Template::Torch];

    /// The name used on the command line.
    pub fn as_str(self) -> &'static str {
        match self {
            Template::Compiled => "compiled",
            Template::Helion => "helion",
            Template::Triton => "triton",
            Template::Torch => "torch",
        }
    }

    /// The backends used when `--backends` is not given.
    pub fn default_backends(self) -> &'static [Backend] {
        match self {
            Template::Compiled => &[Backend::Cuda],
            Template::Helion | Template::Triton => &[Backend::Cuda, Backend::Rocm, Backend::Xpu],
            Template::Torch => &[Backend::Cpu, Backend::Cuda],
        }
    }

    /// The backends the template's code runs on (what `--backends all` means), sorted.
    /// Helion and Triton compile through Triton, which targets GPUs only.
    pub fn supported_backends(self) -> &'static [Backend] {
        match self {
            Template::Helion | Template::Triton => &[Backend::Cuda, Backend::Rocm, Backend::Xpu],
            Template::Compiled | Template::Torch => {
                &[Backend::Cpu, Backend::Cuda, Backend::Metal, Backend::Rocm, Backend::Xpu]
            }
        }
    }

    /// Whether the kernel is noarch (`[torch-noarch]`: one `torch-<backend>` variant each).
    pub fn is_noarch(self) -> bool {
        self != Template::Compiled
    }

    /// One sentence describing the generated kernel, for the card, README and `__init__.py`.
    fn summary(self) -> &'static str {
        match self {
            Template::Compiled => "An element-wise addition kernel, compiled for each backend.",
            Template::Helion => {
                "An element-wise addition kernel written in Helion, with configurations tuned ahead of time."
            }
            Template::Triton => "An element-wise addition kernel written in Triton.",
            Template::Torch => "An element-wise addition op written with PyTorch operations.",
        }
    }
}

impl std::fmt::Display for Template {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A Hub repository id, `org/name`, whose name part is a valid kernel name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RepoId {
    /// The Hub organisation or user (see [`names::ORG_RULE`]).
    pub org: String,
    /// The kernel name and its spellings.
    pub names: KernelNames,
}

impl std::fmt::Display for RepoId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}/{}", self.org, self.names.display)
    }
}

/// Everything a new project is rendered from (already validated by the caller).
#[derive(Debug, Clone)]
pub struct Project {
    pub repo: RepoId,
    pub template: Template,
    /// Distinct backends, each one of `template.supported_backends()`, sorted.
    pub backends: Vec<Backend>,
    /// A license id such as `Apache-2.0` (letters, digits, `.`, `-`, `+`).
    pub license: String,
    /// The flake reference of kernel-builder written into `flake.nix`.
    pub flake_ref: String,
}

/// The files of a project: path relative to the project root (`/`-separated) → contents.
/// Sorted by path.
pub type FileSet = BTreeMap<Utf8PathBuf, String>;

/// Embedded template files, by the name used in render errors.
mod tpl {
    pub const GITIGNORE: &str = include_str!("templates/common/gitignore");
    pub const FLAKE: &str = include_str!("templates/common/flake.nix");
    pub const CARD: &str = include_str!("templates/common/CARD.md");
    pub const README: &str = include_str!("templates/common/README.md");
    pub const TEST: &str = include_str!("templates/common/test.py");
    /// Written as it is, not rendered: GitHub's `${{ … }}` is not a placeholder.
    pub const GITHUB_BUILD: &str = include_str!("templates/common/github-build.yml");

    pub const NOARCH_BUILD: &str = include_str!("templates/noarch/build.toml");
    pub const NOARCH_INIT: &str = include_str!("templates/noarch/__init__.py");

    pub const HELION_OP: &str = include_str!("templates/helion/op.py");
    pub const HELION_BENCH: &str = include_str!("templates/helion/bench.py");
    pub const HELION_README: &str = include_str!("templates/helion/readme.md");
    pub const TRITON_OP: &str = include_str!("templates/triton/op.py");
    pub const TRITON_README: &str = include_str!("templates/triton/readme.md");
    pub const TORCH_OP: &str = include_str!("templates/torch/op.py");
    pub const TORCH_README: &str = include_str!("templates/torch/readme.md");

    pub const COMPILED_BUILD: &str = include_str!("templates/compiled/build.toml");
    pub const COMPILED_INIT: &str = include_str!("templates/compiled/__init__.py");
    pub const COMPILED_README: &str = include_str!("templates/compiled/readme.md");
    pub const BINDING_CPP: &str = include_str!("templates/compiled/torch_binding.cpp");
    pub const BINDING_H: &str = include_str!("templates/compiled/torch_binding.h");
    pub const KERNEL_CPU: &str = include_str!("templates/compiled/kernel-cpu.toml");
    pub const KERNEL_CUDA: &str = include_str!("templates/compiled/kernel-cuda.toml");
    pub const KERNEL_METAL: &str = include_str!("templates/compiled/kernel-metal.toml");
    pub const KERNEL_ROCM: &str = include_str!("templates/compiled/kernel-rocm.toml");
    pub const KERNEL_XPU: &str = include_str!("templates/compiled/kernel-xpu.toml");
    pub const SRC_CPU: &str = include_str!("templates/compiled/cpu.cpp");
    pub const SRC_CUDA: &str = include_str!("templates/compiled/cuda.cu");
    pub const SRC_METAL: &str = include_str!("templates/compiled/metal.metal");
    pub const SRC_METAL_MM: &str = include_str!("templates/compiled/metal.mm");
    pub const SRC_XPU: &str = include_str!("templates/compiled/xpu.cpp");
}

/// A TOML basic string holding `s` (quoted and escaped).
fn toml_string(s: &str) -> String {
    toml_edit::Value::from(s).to_string().trim().to_owned()
}

/// The placeholder values shared by every file of `p`.
fn vars(p: &Project) -> render::Vars {
    let n = &p.repo.names;
    let quoted: Vec<String> = p.backends.iter().map(|b| format!("\"{b}\"")).collect();
    let python_depends = if p.template == Template::Helion { "\"helion\"" } else { "" };
    let example_device = match p.backends.first() {
        Some(Backend::Cuda | Backend::Rocm) | None => "cuda",
        Some(Backend::Xpu) => "xpu",
        Some(Backend::Metal) => "mps",
        Some(_) => "cpu",
    };
    let py = &n.python;
    let layout = match p.template {
        Template::Compiled => format!(
            "- `build.toml`: the build configuration (`[torch]` and one `[kernel.*]` per backend).\n\
             - `torch-ext/{py}/`: the Python package users import; `torch-ext/torch_binding.cpp`\n  \
             registers the op with PyTorch.\n\
             - `{py}_<backend>/`: the op's source for each backend."
        ),
        Template::Helion => format!(
            "- `build.toml`: the build configuration (`[torch-noarch]`, `python-depends = [\"helion\"]`).\n\
             - `torch-ext/{py}/`: the Python package users import; the kernel is in `op.py`, and\n  \
             the heuristic files of Helion's AOT runner (`_helion_aot_op_*.py`) go next to it.\n\
             - `bench.py`: the calls to pre-tune the kernel for."
        ),
        Template::Triton | Template::Torch => format!(
            "- `build.toml`: the build configuration (`[torch-noarch]`).\n\
             - `torch-ext/{py}/`: the Python package users import; the op is in `op.py`."
        ),
    };
    let section_tpl = match p.template {
        Template::Compiled => tpl::COMPILED_README,
        Template::Helion => tpl::HELION_README,
        Template::Triton => tpl::TRITON_README,
        Template::Torch => tpl::TORCH_README,
    };
    let mut v = render::Vars::new();
    v.insert("name", n.display.clone());
    v.insert("python_name", n.python.clone());
    v.insert("class_name", n.class.clone());
    v.insert("repo_id", p.repo.to_string());
    v.insert("license_toml", toml_string(&p.license));
    // The card states the license as the Hub does: its own id, or `other` with a name.
    let card_license = crate::config::license::card_front_matter(&p.license);
    v.insert("card_license", card_license);
    v.insert("flake_ref", p.flake_ref.clone());
    v.insert("backends_toml", quoted.join(", "));
    v.insert("backends_py", quoted.join(", "));
    v.insert("backends_list", p.backends.iter().map(|b| format!("`{b}`")).collect::<Vec<_>>().join(", "));
    v.insert("python_depends_toml", python_depends.to_owned());
    v.insert("summary", p.template.summary().to_owned());
    v.insert("template", p.template.as_str().to_owned());
    v.insert("example_device", example_device.to_owned());
    v.insert("layout", layout);
    // Rendered with the same values, so a section may use any of them.
    let section = render::render("readme section", section_tpl, &v).unwrap_or_default();
    v.insert("template_section", section);
    v
}

/// Render every file of `p` in memory.
///
/// Errors: a [`RenderError`] only if an embedded template is broken (a bug; the unit tests
/// render every template with every backend).
pub fn render_project(p: &Project) -> Result<FileSet, RenderError> {
    let mut v = vars(p);
    let py = p.repo.names.python.clone();
    let mut files: Vec<(String, &'static str, &'static str)> = vec![
        (".gitignore".into(), "common/gitignore", tpl::GITIGNORE),
        ("flake.nix".into(), "common/flake.nix", tpl::FLAKE),
        ("CARD.md".into(), "common/CARD.md", tpl::CARD),
        ("README.md".into(), "common/README.md", tpl::README),
        (format!("tests/test_{py}.py"), "common/test.py", tpl::TEST),
    ];
    match p.template {
        Template::Compiled => {
            let mut tables = String::new();
            for b in &p.backends {
                let (name, table, src): (&str, &str, Vec<(String, &str, &'static str)>) = match b {
                    Backend::Cpu => (
                        "compiled/kernel-cpu.toml",
                        tpl::KERNEL_CPU,
                        vec![(format!("{py}_cpu/{py}.cpp"), "compiled/cpu.cpp", tpl::SRC_CPU)],
                    ),
                    Backend::Cuda => (
                        "compiled/kernel-cuda.toml",
                        tpl::KERNEL_CUDA,
                        vec![(format!("{py}_cuda/{py}.cu"), "compiled/cuda.cu", tpl::SRC_CUDA)],
                    ),
                    Backend::Rocm => (
                        "compiled/kernel-rocm.toml",
                        tpl::KERNEL_ROCM,
                        vec![(format!("{py}_cuda/{py}.cu"), "compiled/cuda.cu", tpl::SRC_CUDA)],
                    ),
                    Backend::Metal => (
                        "compiled/kernel-metal.toml",
                        tpl::KERNEL_METAL,
                        vec![
                            (format!("{py}_metal/{py}.metal"), "compiled/metal.metal", tpl::SRC_METAL),
                            (format!("{py}_metal/{py}.mm"), "compiled/metal.mm", tpl::SRC_METAL_MM),
                        ],
                    ),
                    Backend::Xpu => (
                        "compiled/kernel-xpu.toml",
                        tpl::KERNEL_XPU,
                        vec![(format!("{py}_xpu/{py}.cpp"), "compiled/xpu.cpp", tpl::SRC_XPU)],
                    ),
                    other => {
                        return Err(RenderError {
                            template: "compiled".to_owned(),
                            problem: format!("backend `{other}` has no compiled kernel source"),
                        })
                    }
                };
                tables.push_str(&render::render(name, table, &v)?);
                for (path, name, text) in src {
                    // ROCm and CUDA share one source: listed once.
                    if !files.iter().any(|(p, _, _)| *p == path) {
                        files.push((path, name, text));
                    }
                }
            }
            v.insert("kernel_tables", tables);
            files.push(("build.toml".into(), "compiled/build.toml", tpl::COMPILED_BUILD));
            files.push((format!("torch-ext/{py}/__init__.py"), "compiled/__init__.py", tpl::COMPILED_INIT));
            files.push((
                "torch-ext/torch_binding.cpp".into(),
                "compiled/torch_binding.cpp",
                tpl::BINDING_CPP,
            ));
            files.push(("torch-ext/torch_binding.h".into(), "compiled/torch_binding.h", tpl::BINDING_H));
        }
        t => {
            let (name, op) = match t {
                Template::Helion => ("helion/op.py", tpl::HELION_OP),
                Template::Triton => ("triton/op.py", tpl::TRITON_OP),
                _ => ("torch/op.py", tpl::TORCH_OP),
            };
            files.push(("build.toml".into(), "noarch/build.toml", tpl::NOARCH_BUILD));
            files.push((format!("torch-ext/{py}/__init__.py"), "noarch/__init__.py", tpl::NOARCH_INIT));
            files.push((format!("torch-ext/{py}/op.py"), name, op));
            if t == Template::Helion {
                files.push(("bench.py".into(), "helion/bench.py", tpl::HELION_BENCH));
            }
        }
    }
    let mut out = FileSet::new();
    for (path, name, text) in files {
        out.insert(Utf8PathBuf::from(path), render::render(name, text, &v)?);
    }
    out.insert(Utf8PathBuf::from(GITHUB_WORKFLOW), tpl::GITHUB_BUILD.to_owned());
    Ok(out)
}

/// The rendered `build.toml` failed the checks `check-config` runs (a bug in a template):
/// every problem found, rendered against the generated text.
#[derive(Debug, thiserror::Error)]
#[error("the generated build.toml does not pass check-config (a bug in kernel-builder's `{template}` template):\n{rendered}")]
pub struct InvalidScaffold {
    pub template: Template,
    pub rendered: String,
}

/// Check the rendered `build.toml` of `files` the way `check-config` does: it must parse
/// (shape only: no file is on disk yet) with no error and no warning, and the build-matrix
/// checks must find nothing.
pub fn check_rendered(template: Template, files: &FileSet) -> Result<(), InvalidScaffold> {
    let path = camino::Utf8Path::new("build.toml");
    let Some(text) = files.get(path) else {
        return Err(InvalidScaffold { template, rendered: "no build.toml was generated".to_owned() });
    };
    let loaded = crate::kernel::load_str(path, text, None)
        .map_err(|e| InvalidScaffold { template, rendered: e.render() })?;
    if !loaded.warnings.is_empty() {
        return Err(InvalidScaffold { template, rendered: loaded.rendered_warnings });
    }
    let problems = crate::matrix::check(&loaded.config, &loaded.cells);
    if !problems.is_empty() {
        let rendered =
            problems.iter().map(|p| format!("{}: {}", p.key_path, p.message)).collect::<Vec<_>>().join("\n");
        return Err(InvalidScaffold { template, rendered });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn project(template: Template, backends: &[Backend]) -> Project {
        Project {
            repo: RepoId { org: "myorg".into(), names: KernelNames::new("vector-add").unwrap() },
            template,
            backends: backends.to_vec(),
            license: "Apache-2.0".into(),
            flake_ref: "path:/kb".into(),
        }
    }

    fn paths(fs: &FileSet) -> Vec<&str> {
        fs.keys().map(|p| p.as_str()).collect()
    }

    /// A wheel's layout: `<prefix>/bin/kernel-builder` and `<prefix>/share/kernel-builder/flake`.
    fn wheel_prefix(root: &std::path::Path) -> std::path::PathBuf {
        let exe = root.join("bin/kernel-builder");
        std::fs::create_dir_all(exe.parent().unwrap()).unwrap();
        std::fs::write(&exe, "").unwrap();
        std::fs::create_dir_all(root.join(INSTALLED_FLAKE_DIR)).unwrap();
        exe
    }

    #[test]
    fn installed_flake_is_the_share_dir_beside_bin_with_a_flake_nix() {
        let t = tempfile::tempdir().unwrap();
        let root = t.path().canonicalize().unwrap();
        let exe = wheel_prefix(&root);
        // No flake.nix (a wheel built without its data): none.
        assert_eq!(installed_flake(&exe), None);
        std::fs::write(root.join(INSTALLED_FLAKE_DIR).join("flake.nix"), "{ }").unwrap();
        let want = Utf8PathBuf::from_path_buf(root.join("share/kernel-builder/flake")).unwrap();
        assert_eq!(installed_flake(&exe), Some(want.clone()));
        // A link elsewhere (`uv tool install` links ~/.local/bin/kernel-builder) resolves to
        // the environment that holds the flake.
        let link = root.join("elsewhere/bin/kernel-builder");
        std::fs::create_dir_all(link.parent().unwrap()).unwrap();
        std::os::unix::fs::symlink(&exe, &link).unwrap();
        assert_eq!(installed_flake(&link), Some(want));
        // A missing executable or one at the root: none.
        assert_eq!(installed_flake(&root.join("bin/nothing")), None);
        assert_eq!(installed_flake(std::path::Path::new("/")), None);
    }

    #[test]
    fn installed_flake_under_a_prefix_with_a_space_is_not_taken() {
        let t = tempfile::tempdir().unwrap();
        let root = t.path().canonicalize().unwrap().join("my env");
        let exe = wheel_prefix(&root);
        std::fs::write(root.join(INSTALLED_FLAKE_DIR).join("flake.nix"), "{ }").unwrap();
        assert_eq!(installed_flake(&exe), None);
    }

    #[test]
    fn flake_ref_text() {
        for ok in ["github:org/repo", "path:/src/kernel-builder", "git+file:///a/b?ref=main"] {
            assert!(is_flake_ref_text(ok), "{ok}");
        }
        for bad in ["", "path:/a b", "path:/a\"b", "path:/a\\b", "path:/${x}", "path:/a\tb", "path:/é"] {
            assert!(!is_flake_ref_text(bad), "{bad}");
        }
    }

    #[test]
    fn every_template_renders_with_every_supported_backend() {
        for t in Template::ALL {
            for b in t.supported_backends() {
                let fs = render_project(&project(t, &[*b])).unwrap();
                for (path, text) in &fs {
                    // The workflow's `${{ … }}` are GitHub's expressions, written as they are.
                    if path != GITHUB_WORKFLOW {
                        assert!(!text.contains("{{"), "{t} {b}: placeholder left in {path}");
                    }
                }
                assert_eq!(fs[camino::Utf8Path::new(GITHUB_WORKFLOW)], tpl::GITHUB_BUILD);
                check_rendered(t, &fs).unwrap();
            }
            let fs = render_project(&project(t, t.supported_backends())).unwrap();
            assert!(fs.iter().all(|(p, s)| p == GITHUB_WORKFLOW || !s.contains("{{")));
            check_rendered(t, &fs).unwrap();
        }
    }

    #[test]
    fn helion_files() {
        let fs = render_project(&project(Template::Helion, &[Backend::Cuda, Backend::Rocm, Backend::Xpu]))
            .unwrap();
        assert_eq!(
            paths(&fs),
            [
                ".github/workflows/build.yml",
                ".gitignore",
                "CARD.md",
                "README.md",
                "bench.py",
                "build.toml",
                "flake.nix",
                "tests/test_vector_add.py",
                "torch-ext/vector_add/__init__.py",
                "torch-ext/vector_add/op.py",
            ]
        );
        assert_eq!(
            fs[camino::Utf8Path::new("build.toml")],
            "[general]\nname = \"vector-add\"\nversion = 1\nedition = 6\nlicense = \"Apache-2.0\"\n\
             backends = [\"cuda\", \"rocm\", \"xpu\"]\npython-depends = [\"helion\"]\n\n\
             [general.hub]\nrepo-id = \"myorg/vector-add\"\n\n\
             # A noarch kernel: Python code only, built into one variant per backend (`torch-cuda`, ...).\n\
             # The files under torch-ext/vector_add/ with a `pyext` extension (default: py, pyi) are shipped.\n[torch-noarch]\n"
        );
        assert!(fs[camino::Utf8Path::new("torch-ext/vector_add/op.py")]
            .contains("@helion.aot_kernel()\ndef vector_add_kernel("));
        assert!(fs[camino::Utf8Path::new("flake.nix")].contains("inputs.kernel-builder.url = \"path:/kb\";"));
        assert!(fs[camino::Utf8Path::new("tests/test_vector_add.py")]
            .contains("BACKENDS = [\"cuda\", \"rocm\", \"xpu\"]"));
        assert!(fs[camino::Utf8Path::new("tests/test_vector_add.py")].contains("class TestVectorAdd:"));
    }

    #[test]
    fn compiled_files_per_backend() {
        let fs =
            render_project(&project(Template::Compiled, Template::Compiled.supported_backends())).unwrap();
        assert_eq!(
            paths(&fs),
            [
                ".github/workflows/build.yml",
                ".gitignore",
                "CARD.md",
                "README.md",
                "build.toml",
                "flake.nix",
                "tests/test_vector_add.py",
                "torch-ext/torch_binding.cpp",
                "torch-ext/torch_binding.h",
                "torch-ext/vector_add/__init__.py",
                "vector_add_cpu/vector_add.cpp",
                "vector_add_cuda/vector_add.cu",
                "vector_add_metal/vector_add.metal",
                "vector_add_metal/vector_add.mm",
                "vector_add_xpu/vector_add.cpp",
            ]
        );
        let toml = &fs[camino::Utf8Path::new("build.toml")];
        let tables: Vec<&str> = toml.lines().filter(|l| l.starts_with("[kernel.")).collect();
        assert_eq!(
            tables,
            [
                "[kernel.vector_add_cpu]",
                "[kernel.vector_add_cuda]",
                "[kernel.vector_add_metal]",
                "[kernel.vector_add_rocm]",
                "[kernel.vector_add_xpu]"
            ]
        );
        let rocm_only = render_project(&project(Template::Compiled, &[Backend::Rocm])).unwrap();
        assert!(rocm_only.contains_key(camino::Utf8Path::new("vector_add_cuda/vector_add.cu")));
    }

    #[test]
    fn a_broken_build_toml_is_caught_before_writing() {
        let mut fs = render_project(&project(Template::Torch, &[Backend::Cpu])).unwrap();
        let toml = fs.get_mut(camino::Utf8Path::new("build.toml")).unwrap();
        *toml = toml.replace("edition = 6", "edition = 6\nbogus = 1");
        let err = check_rendered(Template::Torch, &fs).unwrap_err();
        assert!(err.to_string().starts_with("the generated build.toml does not pass check-config"));
        assert!(err.rendered.contains("bogus"), "{}", err.rendered);
        fs.remove(camino::Utf8Path::new("build.toml"));
        assert_eq!(check_rendered(Template::Torch, &fs).unwrap_err().rendered, "no build.toml was generated");
    }

    #[test]
    fn license_is_escaped_in_toml() {
        assert_eq!(toml_string("Apache-2.0"), "\"Apache-2.0\"");
        assert_eq!(toml_string("a\"b"), "'a\"b'");
    }
}
