//! The kernel's *source set*: the files a build reads, and the unique id derived from them
//! ([`gitid`]: git's object ids); [`provenance`]: the git state a build records.
//!
//! # The rules (the Nix cell's source filter keeps at least these files)
//!
//! Paths are relative to the kernel directory (the directory holding `build.toml`).
//!
//! 1. `build.toml`.
//! 2. Every entry of the framework section's `src` (`[torch] src`, `[tvm-ffi] src`;
//!    `[torch-noarch]` has none) and of every `[kernel.<name>] src`. An entry names a file,
//!    or a directory whose files are all taken (recursively, with rule 4's exclusions). An
//!    entry must be relative and stay inside the kernel directory (`..` is refused); a
//!    missing entry is an error.
//! 3. The package: every file under `torch-ext/<python_name>/` (`tvm-ffi-ext/<python_name>/`
//!    for a `[tvm-ffi]` kernel, [`Framework::ext_dir`]; recursively;
//!    `<python_name>` is `general.name` with `-` replaced by `_`) whose extension is in the
//!    framework's `pyext` list ([`Framework::pyext`], default `py`, `pyi`; a leading `.` in a
//!    `pyext` entry is ignored; matching is case-sensitive). The extension is what follows the
//!    last `.` of the file name; a name like `.gitignore` has none and is never taken. Names
//!    starting with `.` are never taken (`.x.py` neither), nor anything under a directory
//!    whose name starts with `.` (`.ipynb_checkpoints/`, `.git/`).
//! 4. Never taken, anywhere: Python bytecode ([`crate::layout`]: `__pycache__` with everything
//!    under it, files ending in `.pyc`).
//!
//! Symbolic links are read through: a link whose target resolves inside the kernel directory
//! counts as the file (or directory) it points to, at the link's path; a link that resolves
//! outside the kernel directory is an error. Empty directories are not part of the set. (A
//! Nix source filter copies a link as a link: its target must be kept in the filtered source
//! too, or the cell fails to read it; it never silently differs.)
//!
//! A Nix filter may keep more files than this (a README, tests): `kernel-builder assemble`
//! collects the set itself from whatever source it is given, so the id and the output only
//! depend on these files. It must not keep fewer.
//!
//! # Unique id
//!
//! [`SourceSet::tree_id`] is the git tree id of a directory holding exactly the source set
//! ([`gitid`]): blob ids of the files' contents, modes `100755` for files whose owner
//! execute bit is set and `100644` otherwise. When the kernel directory is committed in git
//! and the set has no symbolic links, it equals `git rev-parse HEAD:<kernel dir>` of a commit
//! containing only those files. [`SourceSet::uid`] is its first 7 hex digits, the part of the
//! op namespace `_<python_name>_<backend>_<uid>` that keeps two builds of different sources
//! from sharing `torch.ops` namespaces. It needs no `.git`, so a Nix sandbox computes the same
//! id from its filtered copy.
//!
//! # Layout checks
//!
//! Collected together and reported at once: `torch-ext/<python_name>/` missing (the existing
//! package directories are named, since a name that does not match `general.name` is the
//! usual cause); no `__init__.py` at the top of the package (the loader imports it); a
//! `torch-ext/<python_name>/<python_name>` file or directory (it would shadow the package, as
//! the upstream layout check also refuses); a `metadata.json` at the top of the package (the
//! build writes that file); a `.py`/`.pyi` file that is not UTF-8 (Python reads sources as
//! UTF-8); a path that is not UTF-8.
//!
//! # Helion AOT heuristics
//!
//! A package file named `_helion_aot_<source stem>_<device kind>_<compute>.py` (written by
//! Helion's AOT runner beside the kernel's source file, see the loader reference B6) belongs
//! to one backend: device kind `cuda` → `cuda`, `rocm` → `rocm`, `xpu` → `xpu`, `tpu` →
//! `tpu`, `cpu` → `cpu`. The name is read by [`crate::helion::parse`];
//! the stem may itself contain underscores. [`Role::Package`]'s `heuristic` records it, and the
//! noarch assembler ships the file only in that backend's variant. Warnings: a heuristic for a
//! backend not in `general.backends` (shipped nowhere); a name that starts with
//! `_helion_aot_` but names no known device kind (shipped as an ordinary file); a heuristic
//! with no `<source stem>.py` beside it (Helion looks it up from that file, so it is never
//! used).

pub mod gitid;
pub mod provenance;

use std::collections::BTreeMap;
use std::fmt;
use std::os::unix::fs::PermissionsExt;

use anyhow::Context;
use camino::{Utf8Component, Utf8Path, Utf8PathBuf};

use self::gitid::{FileMode, ObjectId, TreeFile};
use crate::config::{Backend, BuildConfig, Framework};

/// A non-fatal finding while collecting sources or assembling a variant (a stray Helion
/// heuristic file, a source `_ops.py` that the generated one replaces, …). The build goes on;
/// the CLI prints each one as `warning: …`.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct Warning {
    /// The file the warning is about, relative to the kernel directory, when there is one.
    pub path: Option<Utf8PathBuf>,
    /// What is wrong and what happens because of it.
    pub message: String,
}

impl fmt::Display for Warning {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.path {
            Some(p) => write!(f, "`{p}`: {}", self.message),
            None => f.write_str(&self.message),
        }
    }
}

/// Why a file is in the source set.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Role {
    /// `build.toml`.
    BuildToml,
    /// Named by a `src` list (framework section or a `[kernel.*]`); read by compiled builds.
    Src,
    /// Under `torch-ext/<python_name>/`; `in_package` is the path below that directory, which
    /// is where the file goes in a variant directory.
    Package { in_package: Utf8PathBuf, heuristic: Option<Heuristic> },
}

/// A Helion AOT heuristic file (`_helion_aot_<stem>_<kind>_<compute>.py`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Heuristic {
    /// The kernel source file's stem (`vector_add`).
    pub stem: String,
    /// Helion's device kind (`cuda`, `rocm`, …).
    pub device_kind: String,
    /// The compute part (`sm90`, `gfx950`, …).
    pub compute: String,
    /// The backend whose variant ships the file.
    pub backend: Backend,
}

/// One file of the source set.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SourceFile {
    /// Path relative to the kernel directory, `/`-separated.
    pub rel: Utf8PathBuf,
    /// Where to read it (the kernel directory joined with `rel`; links are followed on read).
    pub abs: Utf8PathBuf,
    /// The mode git would record.
    pub mode: FileMode,
    /// Size in bytes.
    pub len: u64,
    pub role: Role,
}

/// The source set of one kernel, sorted by path, with its git tree id.
#[derive(Debug, Clone)]
pub struct SourceSet {
    root: Utf8PathBuf,
    python_name: String,
    ext_dir: &'static str,
    files: Vec<SourceFile>,
    tree_id: ObjectId,
    warnings: Vec<Warning>,
}

impl SourceSet {
    /// Collect the source set of the kernel in `kernel_dir` described by `config`, hash it,
    /// and check the package layout.
    ///
    /// Errors: every layout problem found (see the module doc), listed together; an
    /// unreadable file or directory, named.
    pub fn collect(kernel_dir: &Utf8Path, config: &BuildConfig) -> anyhow::Result<SourceSet> {
        let canon_root = kernel_dir
            .canonicalize_utf8()
            .with_context(|| format!("cannot open the kernel directory `{kernel_dir}`"))?;
        let python_name = config.general.python_name();
        let mut c = Collector {
            root: kernel_dir.to_owned(),
            canon_root,
            files: BTreeMap::new(),
            errors: Vec::new(),
            warnings: Vec::new(),
        };

        c.add_file(Utf8Path::new("build.toml"), "build.toml", Role::BuildToml);

        let framework_src: &[String] = match &config.framework {
            Framework::Torch(t) => &t.src,
            Framework::TvmFfi(t) => &t.src,
            Framework::TorchNoarch(_) | Framework::MlxNoarch(_) => &[],
        };
        let section = config.framework.section();
        for (i, s) in framework_src.iter().enumerate() {
            c.add_src(s, &format!("{section}.src[{i}]"));
        }
        for (name, k) in &config.kernels {
            for (i, s) in k.src.iter().enumerate() {
                c.add_src(s, &format!("kernel.{name}.src[{i}]"));
            }
            // A crate builds from its manifest and, `--locked`, the lock file beside it (cargo
            // says what to do when that is missing).
            if let Some(manifest) = &k.cargo_manifest {
                c.add_src(manifest, &format!("kernel.{name}.cargo-manifest"));
                let lock = Utf8Path::new(manifest).with_file_name("Cargo.lock");
                if kernel_dir.join(&lock).is_file() {
                    c.add_src(lock.as_str(), &format!("kernel.{name}.cargo-manifest"));
                }
            }
        }

        let pyext: Vec<String> =
            config.framework.pyext().iter().map(|e| e.trim_start_matches('.').to_owned()).collect();
        c.add_package(&python_name, &pyext, config);

        if !c.errors.is_empty() {
            let n = c.errors.len();
            let list: String = c.errors.iter().map(|e| format!("\n  - {e}")).collect();
            anyhow::bail!(
                "the kernel in `{kernel_dir}` cannot be built ({n} problem{}):{list}",
                if n == 1 { "" } else { "s" }
            );
        }

        let files: Vec<SourceFile> = c.files.into_values().collect();
        let tree_files: Vec<TreeFile> = files
            .iter()
            .map(|f| -> anyhow::Result<TreeFile> {
                Ok(TreeFile { path: f.rel.to_string(), mode: f.mode, blob: hash_file(f)? })
            })
            .collect::<anyhow::Result<_>>()?;
        let tree_id = gitid::tree_id(&tree_files)?;
        let mut warnings = c.warnings;
        warnings.sort();
        warnings.dedup();
        Ok(SourceSet {
            root: kernel_dir.to_owned(),
            python_name,
            ext_dir: config.framework.ext_dir(),
            files,
            tree_id,
            warnings,
        })
    }

    /// The kernel directory the set was collected from.
    pub fn root(&self) -> &Utf8Path {
        &self.root
    }

    /// `general.name` with `-` replaced by `_`.
    pub fn python_name(&self) -> &str {
        &self.python_name
    }

    /// `torch-ext/<python_name>` (`tvm-ffi-ext/<python_name>` for `[tvm-ffi]`), relative to
    /// the kernel directory.
    pub fn package_dir(&self) -> Utf8PathBuf {
        Utf8PathBuf::from(format!("{}/{}", self.ext_dir, self.python_name))
    }

    /// Every file, sorted by path.
    pub fn files(&self) -> &[SourceFile] {
        &self.files
    }

    /// The package files (role [`Role::Package`]), sorted by path.
    pub fn package_files(&self) -> impl Iterator<Item = &SourceFile> {
        self.files.iter().filter(|f| matches!(f.role, Role::Package { .. }))
    }

    /// The git tree id of the set, 40 lowercase hex digits.
    pub fn tree_id(&self) -> String {
        gitid::to_hex(&self.tree_id)
    }

    /// The unique id used in op namespaces: the first 7 hex digits of [`Self::tree_id`].
    pub fn uid(&self) -> String {
        self.tree_id()[..7].to_owned()
    }

    /// Warnings found while collecting (stray heuristics, …), sorted, each once.
    pub fn warnings(&self) -> &[Warning] {
        &self.warnings
    }
}

/// The git blob id of a file of the set (streamed; the error names the file).
fn hash_file(f: &SourceFile) -> anyhow::Result<ObjectId> {
    let file = std::fs::File::open(&f.abs).with_context(|| format!("cannot read `{}`", f.abs))?;
    gitid::blob_id_of_reader(f.len, file).with_context(|| format!("cannot read `{}`", f.abs))
}

struct Collector {
    root: Utf8PathBuf,
    canon_root: Utf8PathBuf,
    files: BTreeMap<Utf8PathBuf, SourceFile>,
    errors: Vec<String>,
    warnings: Vec<Warning>,
}

impl Collector {
    /// Normalise a `src` entry to a relative path inside the kernel, or record why not.
    fn normalise(&mut self, entry: &str, key: &str) -> Option<Utf8PathBuf> {
        let mut out = Utf8PathBuf::new();
        for comp in Utf8Path::new(entry).components() {
            match comp {
                Utf8Component::Normal(p) => out.push(p),
                Utf8Component::CurDir => {}
                Utf8Component::ParentDir | Utf8Component::RootDir | Utf8Component::Prefix(_) => {
                    self.errors.push(format!(
                        "`{key}` is `{entry}`: source paths must be relative to the kernel directory and stay inside it"
                    ));
                    return None;
                }
            }
        }
        if out.as_str().is_empty() {
            self.errors.push(format!("`{key}` is empty: name a file or directory of the kernel"));
            return None;
        }
        Some(out)
    }

    fn add_src(&mut self, entry: &str, key: &str) {
        let Some(rel) = self.normalise(entry, key) else {
            return;
        };
        let abs = self.root.join(&rel);
        match std::fs::metadata(&abs) {
            Ok(m) if m.is_dir() => {
                if self.inside(&abs, &rel) {
                    self.walk(&rel, &mut |_, _| true, &|_| Role::Src);
                }
            }
            Ok(_) => self.add_file(&rel, key, Role::Src),
            Err(_) => self
                .errors
                .push(format!("`{key}` names `{rel}`, which does not exist in the kernel directory")),
        }
    }

    /// Whether `abs` (the path `rel` of the kernel) resolves inside the kernel directory;
    /// records an error when it does not.
    fn inside(&mut self, abs: &Utf8Path, rel: &Utf8Path) -> bool {
        match abs.canonicalize_utf8() {
            Ok(real) if real.starts_with(&self.canon_root) => true,
            Ok(real) => {
                self.errors.push(format!(
                    "`{rel}` is a symbolic link to `{real}`, outside the kernel directory; copy the file into the kernel instead"
                ));
                false
            }
            Err(e) => {
                self.errors.push(format!("cannot resolve `{rel}`: {e}"));
                false
            }
        }
    }

    fn add_file(&mut self, rel: &Utf8Path, what: &str, role: Role) {
        if rel.as_str().contains(['\n', '\r']) {
            self.errors.push(format!(
                "{:?} has a line break in its name, which hashes.json, the Hub and most tools cannot show on one line; rename it",
                rel.as_str()
            ));
            return;
        }
        let abs = self.root.join(rel);
        let meta = match std::fs::metadata(&abs) {
            Ok(m) => m,
            Err(e) => {
                self.errors.push(format!("cannot read `{rel}` (named by `{what}`): {e}"));
                return;
            }
        };
        if !meta.is_file() {
            self.errors.push(format!("`{rel}` (named by `{what}`) is not a regular file"));
            return;
        }
        if !self.inside(&abs, rel) {
            return;
        }
        let mode =
            if meta.permissions().mode() & 0o100 != 0 { FileMode::Executable } else { FileMode::Regular };
        if matches!(rel.extension(), Some("py" | "pyi")) {
            match std::fs::File::open(&abs).and_then(crate::fsutil::check_utf8) {
                Ok(Ok(())) => {}
                Ok(Err(crate::fsutil::NotUtf8 { line })) => {
                    self.errors.push(format!(
                        "`{rel}` is not UTF-8 (invalid byte on line {line}); Python reads sources as UTF-8, so re-save it as UTF-8"
                    ));
                    return;
                }
                Err(e) => {
                    self.errors.push(format!("cannot read `{rel}`: {e}"));
                    return;
                }
            }
        }
        let file = SourceFile { rel: rel.to_owned(), abs, mode, len: meta.len(), role };
        // A package file keeps its package role even if a `src` list also names it.
        let keep_old = matches!(self.files.get(rel), Some(old) if matches!(old.role, Role::Package { .. }));
        if !keep_old {
            self.files.insert(rel.to_owned(), file);
        }
    }

    /// Walk the directory `rel` (following links, checking each stays inside), adding every
    /// file for which `want(rel, name)` holds, with the role `role(rel)`.
    fn walk(
        &mut self,
        rel: &Utf8Path,
        want: &mut dyn FnMut(&Utf8Path, &str) -> bool,
        role: &dyn Fn(&Utf8Path) -> Role,
    ) {
        let top = self.root.join(rel);
        let mut walker =
            walkdir::WalkDir::new(&top).follow_links(true).sort_by_file_name().into_iter().filter_entry(
                |e| e.depth() == 0 || !crate::layout::is_bytecode(e.file_name(), e.file_type().is_dir()),
            );
        while let Some(entry) = walker.next() {
            let entry = match entry {
                Ok(e) => e,
                Err(e) => {
                    let at = e.path().map(|p| p.display().to_string()).unwrap_or_else(|| top.to_string());
                    // A link whose target is missing: say so, not just "No such file".
                    let dangling = e.path().and_then(|p| {
                        let link = std::fs::read_link(p).ok()?;
                        (!p.exists()).then_some(link)
                    });
                    match dangling {
                        Some(link) => self.errors.push(format!(
                            "`{at}` is a symbolic link to `{}`, which does not exist; fix the link or remove it",
                            link.display()
                        )),
                        None => self.errors.push(format!("cannot read `{at}`: {e}")),
                    }
                    continue;
                }
            };
            let Some(path) = Utf8Path::from_path(entry.path()) else {
                self.errors
                    .push(format!("`{}` has a name that is not UTF-8; rename it", entry.path().display()));
                continue;
            };
            let Ok(below) = path.strip_prefix(&self.root) else {
                continue;
            };
            let below = below.to_owned();
            // A linked directory that leaves the kernel: one error, and nothing below it.
            if entry.path_is_symlink() && entry.file_type().is_dir() && !self.inside(path, &below) {
                walker.skip_current_dir();
                continue;
            }
            if !entry.file_type().is_file() {
                continue;
            }
            let name = entry.file_name().to_str().unwrap_or_default().to_owned();
            if crate::layout::is_bytecode(entry.file_name(), false) || !want(&below, &name) {
                continue;
            }
            let r = role(&below);
            self.add_file(&below, rel.as_str(), r);
        }
    }

    /// Add the package's files (rule 3) and check the package: its directory, its top
    /// (`__init__.py`, nothing shadowing it), what was left out, and the files taken.
    fn add_package(&mut self, python_name: &str, pyext: &[String], config: &BuildConfig) {
        let ext = config.framework.ext_dir();
        let pkg = Utf8PathBuf::from(format!("{ext}/{python_name}"));
        let abs = self.root.join(&pkg);
        if !abs.is_dir() {
            self.missing_package(ext, &pkg, config);
            return;
        }
        if !self.inside(&abs, &pkg) {
            return;
        }
        let has_init = self.check_package_top(&pkg, &abs, python_name);
        let skipped = self.walk_package(&pkg, pyext);
        let init = pkg.join("__init__.py");
        if has_init && !self.files.contains_key(&init) {
            self.errors.push(format!(
                "`{init}` is not packaged because `py` is not in `pyext` ({}); add \"py\" to `{}.pyext`",
                pyext.iter().map(|e| format!("\"{e}\"")).collect::<Vec<_>>().join(", "),
                config.framework.section()
            ));
        }
        if !skipped.is_empty() {
            self.warn_skipped_by_extension(&pkg, &skipped, pyext, config);
        }
        let heuristics = self.check_package_files();
        self.check_heuristics(heuristics, config);
    }

    /// Record that the package directory `pkg` does not exist, naming the directories that do
    /// exist in `ext` (a name that does not match `general.name` is the usual cause).
    fn missing_package(&mut self, ext: &str, pkg: &Utf8Path, config: &BuildConfig) {
        let mut found: Vec<String> = std::fs::read_dir(self.root.join(ext))
            .map(|rd| {
                rd.filter_map(|e| e.ok())
                    .filter(|e| e.path().is_dir())
                    .filter_map(|e| e.file_name().to_str().map(str::to_owned))
                    .collect()
            })
            .unwrap_or_default();
        found.sort();
        let hint = if found.is_empty() {
            format!("create `{pkg}/__init__.py`")
        } else {
            format!(
                "found {}; the package directory must be named after `general.name` (`{}`) with `-` replaced by `_`",
                found.iter().map(|f| format!("`{ext}/{f}/`")).collect::<Vec<_>>().join(", "),
                config.general.name
            )
        };
        self.errors.push(format!("the package directory `{pkg}/` does not exist; {hint}"));
    }

    /// Check the top of the package `pkg` (at `abs`): nothing named after the package, an
    /// `__init__.py`. Returns whether the `__init__.py` exists.
    fn check_package_top(&mut self, pkg: &Utf8Path, abs: &Utf8Path, python_name: &str) -> bool {
        let shadow = abs.join(python_name);
        if shadow.symlink_metadata().is_ok() {
            self.errors.push(format!(
                "`{pkg}/{python_name}` must not exist: a file or directory named after the package shadows it when the variant is imported; rename it"
            ));
        }
        let has_init = abs.join("__init__.py").symlink_metadata().is_ok();
        if !has_init {
            self.errors.push(format!(
                "`{pkg}/__init__.py` is missing; the `kernels` loader imports the package through it"
            ));
        }
        has_init
    }

    /// Add the files of the package `pkg` whose extension is in `pyext`, each with its
    /// [`Role::Package`]. Returns the files left out only because of their extension.
    fn walk_package(&mut self, pkg: &Utf8Path, pyext: &[String]) -> Vec<Utf8PathBuf> {
        // Dot-files (`.gitignore`) have no extension and are never taken.
        // Files left out only because of their extension, reported in one warning.
        let mut skipped: Vec<Utf8PathBuf> = Vec::new();
        let mut want = |below: &Utf8Path, name: &str| -> bool {
            // Dot-files, and everything under a dot-directory (`.ipynb_checkpoints/`, `.git/`).
            if name.starts_with('.') || below.components().any(|c| c.as_str().starts_with('.')) {
                return false;
            }
            let taken = Utf8Path::new(name).extension().is_some_and(|e| pyext.iter().any(|p| p == e));
            if !taken {
                skipped.push(below.to_owned());
            }
            taken
        };
        let role = |below: &Utf8Path| package_role(pkg, below);
        self.walk(pkg, &mut want, &role);
        skipped
    }

    /// Warn, once for all of them, about the files of the package `pkg` left out because their
    /// extension is not in `pyext` (the first few named).
    fn warn_skipped_by_extension(
        &mut self,
        pkg: &Utf8Path,
        skipped: &[Utf8PathBuf],
        pyext: &[String],
        config: &BuildConfig,
    ) {
        const SHOWN: usize = 5;
        let mut list: Vec<String> = skipped.iter().take(SHOWN).map(|p| format!("`{p}`")).collect();
        if skipped.len() > SHOWN {
            list.push(format!("and {} more", skipped.len() - SHOWN));
        }
        self.warnings.push(Warning {
            path: None,
            message: format!(
                "{} file{} in `{pkg}/` {} not packaged because {} extension is not in `{}.pyext` ({}): {}",
                skipped.len(),
                if skipped.len() == 1 { "" } else { "s" },
                if skipped.len() == 1 { "is" } else { "are" },
                if skipped.len() == 1 { "its" } else { "their" },
                config.framework.section(),
                pyext.join(", "),
                list.join(", ")
            ),
        });
    }

    /// Checks on the collected package files: no `metadata.json` (the build writes it), a
    /// warning for an `_ops.py` (the generated one replaces it). Returns the files named like
    /// Helion heuristics: path, the parsed name (`None`: no known device kind), file name.
    fn check_package_files(&mut self) -> Vec<(Utf8PathBuf, Option<Heuristic>, String)> {
        let mut heuristics: Vec<(Utf8PathBuf, Option<Heuristic>, String)> = Vec::new();
        for f in self.files.values() {
            let Role::Package { in_package, heuristic } = &f.role else {
                continue;
            };
            if in_package.as_str() == "metadata.json" {
                self.errors.push(format!(
                    "`{}` must not exist: the build writes `metadata.json` into every variant; remove it from the package",
                    f.rel
                ));
            }
            if in_package.as_str() == "_ops.py" {
                self.warnings.push(Warning {
                    path: Some(f.rel.clone()),
                    message: "is replaced in every variant by the generated `_ops.py` (the op namespace is fixed per variant); remove it from the package".to_owned(),
                });
            }
            let name = in_package.file_name().unwrap_or_default();
            if crate::helion::is_heuristic(name) {
                heuristics.push((f.rel.clone(), heuristic.clone(), name.to_owned()));
            }
        }
        heuristics
    }

    /// Warn about Helion heuristic files that are never used or shipped as ordinary files (see
    /// the module doc): no known device kind, a backend not built, no source file beside them.
    fn check_heuristics(
        &mut self,
        heuristics: Vec<(Utf8PathBuf, Option<Heuristic>, String)>,
        config: &BuildConfig,
    ) {
        for (rel, h, name) in heuristics {
            match h {
                None => self.warnings.push(Warning {
                    path: Some(rel),
                    message: format!(
                        "starts with `_helion_aot_` but names no Helion device kind (`{name}` should be `_helion_aot_<source stem>_<cuda|rocm|xpu|tpu|cpu>_<compute>.py`); it is shipped as an ordinary file in every variant"
                    ),
                }),
                Some(h) => {
                    if !config.general.backends.contains(&h.backend) {
                        self.warnings.push(Warning {
                            path: Some(rel.clone()),
                            message: format!(
                                "is a Helion heuristic for `{}`, which is not in `general.backends`; it is left out of every variant",
                                h.backend
                            ),
                        });
                    }
                    let source = rel.with_file_name(format!("{}.py", h.stem));
                    if !self.files.contains_key(&source) {
                        self.warnings.push(Warning {
                            path: Some(rel.clone()),
                            message: format!(
                                "is a Helion heuristic for `{}.py`, but there is no `{source}`; Helion looks the heuristic up beside the kernel's source file, so it would never be used",
                                h.stem
                            ),
                        });
                    }
                }
            }
        }
    }
}

/// The role of the package file `below` (relative to the kernel directory) of the package
/// `pkg`: its path in the package, and the Helion heuristic its name describes, if any.
fn package_role(pkg: &Utf8Path, below: &Utf8Path) -> Role {
    let in_package = below.strip_prefix(pkg).unwrap_or(below).to_owned();
    let heuristic = in_package.file_name().and_then(crate::helion::parse).and_then(|h| {
        Some(Heuristic {
            backend: Backend::from_name(&h.kind)?,
            stem: h.stem,
            device_kind: h.kind,
            compute: h.compute,
        })
    });
    Role::Package { in_package, heuristic }
}

/// Copy a source file to the new file `dest` with mode `mode`, streaming (a source file is
/// never held whole in memory); the error names the file.
pub fn copy_source(f: &SourceFile, dest: &Utf8Path, mode: u32) -> anyhow::Result<()> {
    crate::fsutil::copy_new_file(&f.abs, dest, mode)?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(text: &str) -> BuildConfig {
        crate::kernel::load_str(Utf8Path::new("build.toml"), text, None).unwrap().config
    }

    fn put(root: &Utf8Path, rel: &str) {
        let p = root.join(rel);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, rel).unwrap();
    }

    const TORCH: &str = "[general]\nname = \"relu\"\nversion = 1\nedition = 5\nlicense = \"MIT\"\nbackends = [\"cuda\", \"metal\"]\n\n[torch]\nsrc = [\"torch-ext/torch_binding.cpp\", \"./torch-ext/torch_binding.h\"]\npyext = [\".py\", \"json\"]\n\n[kernel.relu]\nbackend = \"cuda\"\ndepends = [\"torch\"]\nsrc = [\"relu_cuda\", \"torch-ext/relu/data.json\"]\n";

    #[test]
    fn src_lists_files_and_directories_and_package_files_keep_their_role() {
        let t = tempfile::tempdir().unwrap();
        let root = Utf8Path::from_path(t.path()).unwrap();
        for f in [
            "build.toml",
            "torch-ext/torch_binding.cpp",
            "torch-ext/torch_binding.h",
            "relu_cuda/relu.cu",
            "relu_cuda/sub/util.cuh",
            "relu_cuda/__pycache__/x.pyc",
            "torch-ext/relu/__init__.py",
            "torch-ext/relu/data.json",
            "torch-ext/relu/types.pyi",
            "README.md",
        ] {
            put(root, f);
        }
        let set = SourceSet::collect(root, &config(TORCH)).unwrap();
        let got: Vec<(&str, &str)> = set
            .files()
            .iter()
            .map(|f| {
                let role = match &f.role {
                    Role::BuildToml => "build.toml",
                    Role::Src => "src",
                    Role::Package { .. } => "package",
                };
                (f.rel.as_str(), role)
            })
            .collect();
        assert_eq!(
            got,
            [
                ("build.toml", "build.toml"),
                ("relu_cuda/relu.cu", "src"),
                ("relu_cuda/sub/util.cuh", "src"),
                ("torch-ext/relu/__init__.py", "package"),
                ("torch-ext/relu/data.json", "package"),
                ("torch-ext/torch_binding.cpp", "src"),
                ("torch-ext/torch_binding.h", "src"),
            ]
        );
        assert_eq!(set.uid().len(), 7);
        assert_eq!(
            set.warnings().iter().map(|w| w.to_string()).collect::<Vec<_>>(),
            ["1 file in `torch-ext/relu/` is not packaged because its extension is not in `torch.pyext` (py, json): `torch-ext/relu/types.pyi`"]
        );
    }

    #[test]
    fn src_problems_are_listed_together() {
        let t = tempfile::tempdir().unwrap();
        let root = Utf8Path::from_path(t.path()).unwrap();
        put(root, "build.toml");
        put(root, "torch-ext/relu/__init__.py");
        // The config check refuses `..` too; the source set must not rely on it.
        let mut c = config(TORCH);
        c.kernels.get_mut("relu").unwrap().src[0] = "../outside.cu".into();
        let err = SourceSet::collect(root, &c).unwrap_err().to_string();
        let err = err.replace(root.as_str(), "<DIR>");
        assert_eq!(
            err,
            "the kernel in `<DIR>` cannot be built (4 problems):\n  \
             - `torch.src[0]` names `torch-ext/torch_binding.cpp`, which does not exist in the kernel directory\n  \
             - `torch.src[1]` names `torch-ext/torch_binding.h`, which does not exist in the kernel directory\n  \
             - `kernel.relu.src[0]` is `../outside.cu`: source paths must be relative to the kernel directory and stay inside it\n  \
             - `kernel.relu.src[1]` names `torch-ext/relu/data.json`, which does not exist in the kernel directory"
        );
    }
}
