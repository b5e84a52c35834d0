//! `kernel-builder init`: create a new kernel project, ready to build.

use std::process::ExitCode;

use camino::{Utf8Component, Utf8Path, Utf8PathBuf};

use crate::config::Backend;
use crate::init::{self, names, KernelNames, Project, RepoId, Template};

/// Create a new kernel project from a template: build.toml, flake.nix, the op's sources, a
/// pytest that loads the built kernel through `kernels`, a card; then `git init` and stage.
///
/// Example: `kernel-builder init --name myorg/vector-add-helion --backends cuda rocm xpu --
/// vector-add-helion`.
#[derive(Debug, clap::Args)]
#[command(
    after_help = "`--backends` takes every value up to the next flag: give PATH before it, or after `--`."
)]
pub struct Args {
    /// Directory to create the project in (missing parent directories are created). It must be
    /// new or empty unless `--overwrite` is given. Default: the NAME part of `--name`.
    #[arg(value_name = "PATH")]
    pub path: Option<Utf8PathBuf>,

    /// The Hub repository the kernel is published to, `ORG/NAME`. NAME is the kernel's name:
    /// lowercase letters, digits and `-`. Default: taken from PATH when PATH is `ORG/NAME`.
    #[arg(long, value_name = "ORG/NAME")]
    pub name: Option<String>,

    /// Backends to build for (`cuda rocm` or `cuda,rocm`): cpu, cuda, metal, rocm, xpu, or
    /// `all` (every backend the template supports). Default: helion and triton cuda rocm xpu; torch cpu cuda; compiled
    /// cuda.
    #[arg(long, num_args = 1.., value_delimiter = ',', value_name = "BACKEND")]
    pub backends: Vec<String>,

    /// The kind of kernel. The op is the same in every template (an element-wise add), ready
    /// to build, test and replace; the compiled template builds natively its cpu and cuda cells
    /// (`build-and-copy --nix never`).
    #[arg(long, value_enum, default_value_t = Template::Helion)]
    pub template: Template,

    /// License of the kernel, written into build.toml and the card (an SPDX expression)
    ///
    /// An SPDX id or expression (`MIT OR Apache-2.0`). The card states it as the Hub's license
    /// id (`apache-2.0`), or as `other` with a `license_name` when the Hub has none for it.
    #[arg(long, value_name = "LICENSE", default_value = init::DEFAULT_LICENSE)]
    pub license: String,

    /// Flake reference of kernel-builder that the new kernel's flake.nix builds with (its
    /// `inputs.kernel-builder.url`). Default: the flake this kernel-builder was installed from,
    /// else the checkout it was built from, else the published flake.
    #[arg(long, value_name = "REF", env = "KERNEL_BUILDER_FLAKE_REF")]
    pub flake_ref: Option<String>,

    /// Write into a non-empty directory: generated files replace files of the same name,
    /// other files are left as they are.
    #[arg(long)]
    pub overwrite: bool,
}

/// A bad command line: printed as `error:` and `hint:` lines, exit code 2
/// ([`crate::error::Kind::Usage`]).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct UsageError {
    pub message: String,
    pub hint: Option<String>,
}

impl crate::error::Diagnostic for UsageError {
    fn kind(&self) -> crate::error::Kind {
        crate::error::Kind::Usage
    }
    fn hints(&self) -> Vec<String> {
        self.hint.iter().cloned().collect()
    }
}

impl UsageError {
    fn new(message: impl Into<String>, hint: Option<String>) -> UsageError {
        UsageError { message: message.into(), hint }
    }
}

/// What the command line resolved to: the project to render and where to write it.
#[derive(Debug, Clone)]
pub struct Plan {
    pub project: Project,
    pub dir: Utf8PathBuf,
    /// Set when the repository id was read from PATH rather than `--name`.
    pub repo_from_path: bool,
}

/// Resolve the command line into a [`Plan`], checking every value; no I/O.
pub fn resolve(args: &Args) -> Result<Plan, UsageError> {
    let backends = resolve_backends(args.template, &args.backends, args.path.is_some())?;
    let license = check_license(&args.license)?;
    let flake_ref = args.flake_ref.clone().unwrap_or_else(|| init::default_flake_ref().0);
    check_flake_ref(&flake_ref)?;
    let (repo, dir, repo_from_path) = resolve_repo(args.name.as_deref(), args.path.as_deref())?;
    Ok(Plan {
        project: Project { repo, template: args.template, backends, license, flake_ref },
        dir,
        repo_from_path,
    })
}

/// Run the command.
pub fn run(args: Args) -> super::CmdResult {
    let plan = resolve(&args).map_err(crate::error::Error::from)?;
    let files = init::render_project(&plan.project)?;
    init::check_rendered(plan.project.template, &files)?;
    let written =
        init::write_project(&plan.dir, &files, args.overwrite).map_err(crate::error::Error::from)?;
    let p = &plan.project;
    if plan.repo_from_path {
        crate::printer::stderr!(
            "note: the Hub repository `{}` was read from PATH; pass `--name ORG/NAME` to choose another",
            p.repo
        );
    }
    let backends: Vec<&str> = p.backends.iter().map(|b| b.as_str()).collect();
    println!(
        "Created `{}` in `{}` ({} template; backends: {}; {} files)",
        p.repo,
        written.dir,
        p.template,
        backends.join(", "),
        files.len()
    );
    println!("  {}", written.git);
    let same_dir = |a: &camino::Utf8Path, b: &camino::Utf8Path| {
        std::fs::canonicalize(a).ok().zip(std::fs::canonicalize(b).ok()).is_some_and(|(a, b)| a == b)
    };
    if let init::GitOutcome::Reused(top) = written.git.clone() {
        // GitHub reads workflows only from the repository root, and the workflow's steps run
        // in the kernel's directory as `.`: inside a larger repository it never runs as written.
        if !same_dir(&top, &written.dir) {
            crate::printer::stderr!(
                "warning: `{}` is inside the repository at `{top}`; GitHub only runs workflows from \
             `{top}/.github/workflows/`, so the generated `{}` does not run there: move it to the \
             repository root and set `working-directory` to the kernel's directory in its steps, or \
             give the kernel its own repository",
                written.dir,
                init::GITHUB_WORKFLOW
            );
        }
    }
    let from = if args.flake_ref.is_some() {
        "from --flake-ref or KERNEL_BUILDER_FLAKE_REF"
    } else {
        init::default_flake_ref().1
    };
    println!(
        "  flake.nix takes kernel-builder from `{}` ({from}); to use another, edit `inputs.kernel-builder.url` in flake.nix (or pass --flake-ref)",
        p.flake_ref
    );
    println!("Next:");
    println!("  cd {}", shell_quote(written.dir.as_str()));
    if p.template == Template::Compiled {
        // Native builds of compiled cells take torch from a Python environment.
        println!("  kernel-builder build-and-copy --nix never --python <python with torch> .");
    } else {
        println!("  kernel-builder build-and-copy .");
    }
    println!("  python -m pytest tests");
    Ok(ExitCode::SUCCESS)
}

/// The backends of `--backends` (case-insensitive, `all` = every backend the template
/// supports), or the template's defaults; distinct and sorted.
///
/// `path_given`: whether PATH was given. When it was not and the last value is not a backend,
/// the value was most likely meant as PATH (clap reads every value after `--backends` as a
/// backend), and the hint shows the command with `--`.
pub fn resolve_backends(
    template: Template,
    given: &[String],
    path_given: bool,
) -> Result<Vec<Backend>, UsageError> {
    if given.is_empty() {
        return Ok(template.default_backends().to_vec());
    }
    let supported = template.supported_backends();
    let supported_list = supported.iter().map(|b| b.as_str()).collect::<Vec<_>>().join(", ");
    let mut out = Vec::new();
    for (i, value) in given.iter().enumerate() {
        let lower = value.to_ascii_lowercase();
        if lower == "all" {
            out.extend_from_slice(supported);
            continue;
        }
        match Backend::from_name(&lower) {
            Some(b) if supported.contains(&b) => out.push(b),
            Some(b) => {
                let hint = match (template, b) {
                    (Template::Helion | Template::Triton, Backend::Cpu | Backend::Metal) => Some(format!(
                        "{template} kernels run through Triton, on GPUs; for a noarch kernel that runs on `{b}` use `--template torch`"
                    )),
                    _ => None,
                };
                return Err(UsageError::new(
                    format!("the {template} template does not support the `{b}` backend (it supports {supported_list})"),
                    hint,
                ));
            }
            None => {
                let message = format!("`{value}` is not a backend (backends: {supported_list}, or `all`)");
                let close = supported.iter().map(|b| b.as_str()).chain(["all"]).find(|b| {
                    crate::suggest::distance(b, &lower) <= 1 || (lower.len() >= 3 && b.starts_with(&lower))
                });
                let hint = if let Some(c) = close {
                    Some(format!("did you mean `{c}`?"))
                } else if !path_given && i + 1 == given.len() && i > 0 {
                    Some(format!(
                        "`--backends` takes every value after it, so a directory given after it is read as a \
                         backend: did you mean `--backends {} -- {value}`?",
                        given[..i].join(" ")
                    ))
                } else {
                    None
                };
                return Err(UsageError::new(message, hint));
            }
        }
    }
    out.sort();
    out.dedup();
    Ok(out)
}

/// The repository id and target directory from `--name` and PATH; the flag tells whether the
/// repository id came from PATH.
fn resolve_repo(
    name: Option<&str>,
    path: Option<&Utf8Path>,
) -> Result<(RepoId, Utf8PathBuf, bool), UsageError> {
    if let Some(name) = name {
        let (org, kernel) = match name.split_once('/') {
            Some((o, k)) if !o.is_empty() && !k.is_empty() && !k.contains('/') => (o, k),
            _ => {
                let last = name.rsplit('/').next().unwrap_or("");
                let example = if names::is_valid_kernel_name(last) {
                    last.to_owned()
                } else {
                    names::suggest_kernel_name(last).unwrap_or_else(|| "my-kernel".to_owned())
                };
                return Err(UsageError::new(
                    format!("`--name {name}` must be the Hub repository, ORG/NAME"),
                    Some(format!("for example `--name myorg/{example}`")),
                ));
            }
        };
        check_org(org)?;
        let names = kernel_names(kernel, |fixed| format!("did you mean `--name {org}/{fixed}`?"))?;
        let dir = path.map(Utf8Path::to_owned).unwrap_or_else(|| Utf8PathBuf::from(&names.display));
        return Ok((RepoId { org: org.to_owned(), names }, dir, false));
    }
    let Some(path) = path else {
        return Err(UsageError::new(
            "`init` needs the Hub repository of the new kernel",
            Some("pass `--name ORG/NAME`, e.g. `kernel-builder init --name myorg/my-kernel`".to_owned()),
        ));
    };
    let parts: Vec<&str> = path
        .components()
        .map(|c| match c {
            Utf8Component::Normal(s) => Some(s),
            _ => None,
        })
        .collect::<Option<Vec<_>>>()
        .unwrap_or_default();
    if let [org, kernel] = parts[..] {
        if names::is_valid_org(org) {
            let names = kernel_names(kernel, |fixed| {
                format!("pass the kernel name with `--name {org}/{fixed}` (the directory can keep its name)")
            })?;
            return Ok((RepoId { org: org.to_owned(), names }, path.to_owned(), true));
        }
    }
    let last = path.file_name().unwrap_or("my-kernel");
    let kernel = if names::is_valid_kernel_name(last) {
        last.to_owned()
    } else {
        names::suggest_kernel_name(last).unwrap_or_else(|| "my-kernel".to_owned())
    };
    Err(UsageError::new(
        format!("`init {path}` cannot tell the Hub repository of the new kernel"),
        Some(format!("pass `--name ORG/NAME`, e.g. `kernel-builder init --name myorg/{kernel} -- {path}`")),
    ))
}

/// `s` as one shell word: unchanged when it holds only safe characters, else single-quoted.
fn shell_quote(s: &str) -> String {
    let safe =
        |c: char| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-' | '/' | '+' | ':' | '@' | ',');
    if !s.is_empty() && s.chars().all(safe) {
        s.to_owned()
    } else {
        format!("'{}'", s.replace('\'', "'\\''"))
    }
}

fn kernel_names(name: &str, hint: impl Fn(&str) -> String) -> Result<KernelNames, UsageError> {
    KernelNames::new(name).map_err(|e| {
        let h = e.suggestion.as_deref().map(&hint);
        UsageError::new(e.to_string(), h)
    })
}

fn check_org(org: &str) -> Result<(), UsageError> {
    if names::is_valid_org(org) {
        Ok(())
    } else {
        Err(UsageError::new(format!("`{org}` is not a valid Hub organisation: {}", names::ORG_RULE), None))
    }
}

/// An SPDX expression ([`crate::config::license::check`], which also keeps quotes, newlines
/// and other characters that would break the generated build.toml and card out of it),
/// without surrounding whitespace. The message quotes the value once, shortened.
fn check_license(license: &str) -> Result<String, UsageError> {
    crate::config::license::check(license)
        .map_err(|e| UsageError::new(format!("`--license`: {}", e.message), Some(e.help)))
}

fn check_flake_ref(r: &str) -> Result<(), UsageError> {
    if init::is_flake_ref_text(r) {
        Ok(())
    } else {
        Err(UsageError::new(
            format!("`{}` (--flake-ref, or KERNEL_BUILDER_FLAKE_REF when that is not given) is not a flake reference: no spaces, quotes, `\\` or `$` (e.g. `github:org/repo`, `path:/src/kernel-builder`)", r.escape_debug()),
            None,
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn s(v: &[&str]) -> Vec<String> {
        v.iter().map(|x| x.to_string()).collect()
    }

    #[test]
    fn backends_defaults_all_and_order() {
        assert_eq!(
            resolve_backends(Template::Helion, &[], false).unwrap(),
            [Backend::Cuda, Backend::Rocm, Backend::Xpu]
        );
        assert_eq!(resolve_backends(Template::Torch, &[], false).unwrap(), [Backend::Cpu, Backend::Cuda]);
        assert_eq!(resolve_backends(Template::Compiled, &[], false).unwrap(), [Backend::Cuda]);
        assert_eq!(
            resolve_backends(Template::Torch, &s(&["XPU", "cpu", "xpu"]), false).unwrap(),
            [Backend::Cpu, Backend::Xpu]
        );
        assert_eq!(
            resolve_backends(Template::Compiled, &s(&["all"]), false).unwrap(),
            [Backend::Cpu, Backend::Cuda, Backend::Metal, Backend::Rocm, Backend::Xpu]
        );
    }

    #[test]
    fn backend_swallowing_the_path() {
        let e = resolve_backends(Template::Helion, &s(&["cuda", "rocm", "foo"]), false).unwrap_err();
        assert_eq!(e.message, "`foo` is not a backend (backends: cuda, rocm, xpu, or `all`)");
        assert_eq!(
            e.hint.as_deref(),
            Some(
                "`--backends` takes every value after it, so a directory given after it is read as a backend: \
                 did you mean `--backends cuda rocm -- foo`?"
            )
        );
        // With PATH given, or a near miss, the hint is different.
        let e = resolve_backends(Template::Helion, &s(&["cuda", "foo"]), true).unwrap_err();
        assert_eq!(e.hint, None);
        let e = resolve_backends(Template::Helion, &s(&["cuda", "rcom"]), false).unwrap_err();
        assert_eq!(e.hint.as_deref(), Some("did you mean `rocm`?"));
    }

    #[test]
    fn unsupported_backend() {
        let e = resolve_backends(Template::Helion, &s(&["cpu"]), false).unwrap_err();
        assert_eq!(
            e.message,
            "the helion template does not support the `cpu` backend (it supports cuda, rocm, xpu)"
        );
        let e = resolve_backends(Template::Torch, &s(&["tpu"]), false).unwrap_err();
        assert_eq!(
            e.message,
            "the torch template does not support the `tpu` backend (it supports cpu, cuda, metal, rocm, xpu)"
        );
        assert_eq!(e.hint, None);
    }

    #[test]
    fn repo_resolution() {
        let (r, d, from_path) = resolve_repo(Some("myorg/vector-add"), None).unwrap();
        assert_eq!((r.to_string(), d.as_str(), from_path), ("myorg/vector-add".into(), "vector-add", false));
        let (r, d, _) = resolve_repo(Some("myorg/vector-add"), Some(Utf8Path::new("a/b/c"))).unwrap();
        assert_eq!((r.to_string(), d.as_str()), ("myorg/vector-add".into(), "a/b/c"));
        let (r, d, from_path) = resolve_repo(None, Some(Utf8Path::new("myorg/relu"))).unwrap();
        assert_eq!((r.to_string(), d.as_str(), from_path), ("myorg/relu".into(), "myorg/relu", true));

        let e = resolve_repo(Some("user/My_Kernel"), None).unwrap_err();
        assert_eq!(e.hint.as_deref(), Some("did you mean `--name user/my-kernel`?"));
        let e = resolve_repo(Some("vector-add"), None).unwrap_err();
        assert_eq!(e.message, "`--name vector-add` must be the Hub repository, ORG/NAME");
        assert_eq!(e.hint.as_deref(), Some("for example `--name myorg/vector-add`"));
        let e = resolve_repo(None, Some(Utf8Path::new("../x/My_Kernel"))).unwrap_err();
        assert_eq!(
            e.hint.as_deref(),
            Some(
                "pass `--name ORG/NAME`, e.g. `kernel-builder init --name myorg/my-kernel -- ../x/My_Kernel`"
            )
        );
        assert!(resolve_repo(None, None).is_err());
        assert!(resolve_repo(Some("a/b/c"), None).is_err());
        assert!(resolve_repo(Some("-a/bc"), None).is_err());
    }

    #[test]
    fn shell_quoting() {
        assert_eq!(shell_quote("a/b-c_d.e"), "a/b-c_d.e");
        assert_eq!(shell_quote("my dir"), "'my dir'");
        assert_eq!(shell_quote("it's"), "'it'\\''s'");
        assert_eq!(shell_quote(""), "''");
    }

    #[test]
    fn license_and_flake_ref() {
        assert!(check_license("Apache-2.0").is_ok());
        assert!(check_license("GPL-2.0-or-later").is_ok());
        assert!(check_license("MIT OR Apache-2.0").is_ok());
        assert!(check_license("GPL-2.0+").is_err()); // deprecated in the SPDX list
        assert!(check_license("a\"b").is_err());
        assert!(check_license("").is_err());
        assert!(check_flake_ref("path:/x/y").is_ok());
        assert!(check_flake_ref("github:o/r?dir=nix").is_ok());
        assert!(check_flake_ref("a b").is_err());
        assert!(check_flake_ref("x\"; y").is_err());
    }
}
