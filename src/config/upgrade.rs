//! Every older generation of `build.toml`, upgraded as a *document* transformation: legacy
//! forms to edition 5 ([`upgrade`], what every reader does in memory), and edition 5 to edition
//! 6 ([`to_edition6`], what `update-build` adds before writing).
//!
//! [`upgrade`] edits a parsed [`toml_edit::DocumentMut`] in place: keys are added, renamed or
//! moved one at a time, so the author's comments, blank lines, quoting, array layout and key
//! order survive, and version strings keep their exact text (`maxver = "13.0"` stays `"13.0"`;
//! upstream's migration re-serialised it as `"13"` and Nix's `compareVersions` then dropped
//! every cu130 cell). The parser ([`crate::config::parse_str`]) calls [`upgrade`] first and
//! reads the result with the edition-5 rules; `kernel-builder update-build` writes the same
//! document back. One transformation serves both, so the model read in memory and the model
//! read from the rewritten file are the same, and so are the build variants.
//!
//! # Generations and how they are recognised ([`detect`])
//!
//! Facts from `reference/kernel-builder-cli.md` §2; the oldest marker found wins.
//!
//! | generation | recognised by |
//! |---|---|
//! | edition 6 | `general.edition = 6` |
//! | edition 5 | `general.edition` is present with any other value (only `5` and `6` are accepted) |
//! | v1 | `[torch] name`, `pyroot` or `universal`; a `[kernel.*]` with `language` or `capabilities`, or without `backend` |
//! | v2 | `general.universal`, `general.cuda-minver` or `general.cuda-maxver`; or no `general.backends` |
//! | v4 | `general.version`, `general.license` and exactly one of `[torch]`, `[torch-noarch]`, `[tvm-ffi]` |
//! | v3 | any other file without `edition` |
//!
//! # What the upgrade does
//!
//! Every legacy generation (v1–v4):
//! - `edition = 5` is added after `version` (or after `name` when there is no version);
//! - a missing `version` becomes `version = 1` (what upstream's v3 reader assumed), after `name`;
//! - `name` with underscores (`fused_rms_norm`) becomes dashed (`fused-rms-norm`); the Python
//!   package name (`fused_rms_norm`) is unchanged. Edition-5 files are *not* renamed here: the
//!   validator reports the name with the dashed suggestion, and `update-build` applies
//!   [`dash_name`] to them explicitly;
//! - a missing `license` is a warning (rule `legacy-no-license`): nothing is invented;
//!   `update-build --license SPDX` inserts one, and without it `update-build` refuses to write;
//! - no framework section: `[torch]` is added when the file has `[kernel.*]` tables (compiled
//!   code needs one), otherwise `[torch-noarch]`; either way with a warning
//!   (rule `legacy-no-framework`), never silently. For v3 this is upstream's reading (a
//!   framework-less v3 file is a noarch Torch kernel).
//!
//! v4: nothing else. A string `[torch] stable-abi` stays a string (edition 5 accepts it and it
//! means "every backend").
//!
//! v2 (`build2cmake` era):
//! - `universal = false` is removed (compiled kernels are the default);
//! - `universal = true` is removed and the kernel becomes noarch: when it has no `[kernel.*]`
//!   tables, `[torch]` (if any) is renamed `[torch-noarch]` keeping only `pyext`, otherwise
//!   `[torch-noarch]` is added. Its backends are [`UNIVERSAL_BACKENDS`] (cpu, cuda, metal, rocm,
//!   xpu): the set `build2cmake`'s own v2→v3 migration wrote and the backends the matrix builds
//!   noarch variants for in the bundle; the `torch-universal` variant it replaces was loaded on
//!   any of them. Cann, neuron and tpu did not exist then and need their own runtimes, so they
//!   are not added. A warning (rule `universal-backends`) tells the author to remove the
//!   backends the kernel does not support;
//! - `cuda-minver`/`cuda-maxver` move to `[general.cuda] minver`/`maxver` with the value item
//!   moved verbatim (text and comments);
//! - `python-depends = ["nvidia-cutlass-dsl"]` (a CUDA-only dependency in the edition-5
//!   dependency table) moves to `[general.cuda] python-depends`; `einops` stays general
//!   (upstream's migration dropped `python-depends` entirely);
//! - a missing `backends` is the sorted set of the `[kernel.*]` backends (or
//!   [`UNIVERSAL_BACKENDS`] for `universal = true`).
//!
//! v1 (the oldest form) — everything v2 does (with `[torch] universal`), and:
//! - `[torch] name` and `pyroot` are removed (the package name comes from `general.name`);
//! - `capabilities` is renamed `cuda-capabilities`;
//! - `language = "cuda"` (or no `language` and no `backend`) becomes `backend = "cuda"`;
//!   `language = "metal"` becomes `backend = "metal"`;
//! - `language = "cuda-hipify"` becomes a CUDA kernel plus a copy `<name>_rocm` with
//!   `backend = "rocm"` placed right after it: `rocm-archs` goes to the ROCm copy,
//!   `cuda-capabilities` (and the other CUDA-only keys) stay on the CUDA one. A kernel already
//!   named `<name>_rocm` is an error (rule `hipify-copy-conflict`) and no copy is made;
//! - keys that the kernel's backend does not accept in edition 5 (`rocm-archs` on a CUDA
//!   kernel, …) are removed; v1 accepted and ignored them.
//!
//! Edition 5 and 6: nothing changes; any other `edition` is an error (rule
//! `unsupported-edition`).
//!
//! # Edition 5 to edition 6 ([`to_edition6`])
//!
//! - `edition = 5` becomes `edition = 6` (its comments kept);
//! - each `[kernel.*]`'s `backend = "<b>"` becomes `language = "cpp-<b>"` in the same place
//!   (every edition-5 kernel is C++; Rust kernels are new in edition 6);
//! - `[torch-noarch]`'s `cuda-capabilities` / `rocm-archs` become `cuda_capabilities` /
//!   `rocm_archs`: both spellings are read here, but upstream's parser (the 0.19.1 loader
//!   included) reads only the underscore one.
//!
//! The build variants do not change: an edition-6 kernel of language `cpp-<b>` is built
//! exactly as an edition-5 kernel of backend `<b>`.
//!
//! Every edit is reported as a [`Change`] (for `update-build` to print) and every key that moved
//! as a rename (for diagnostics to point at the original text).

use std::collections::BTreeSet;

use toml_edit::{Array, DocumentMut, Item, Key, Table, Value};

use super::{Generation, Problem, Severity};

/// What [`upgrade`] did to a document.
#[derive(Debug, Clone)]
pub struct Upgrade {
    /// The generation the file was written in.
    pub generation: Generation,
    /// Every edit made, in order (empty for an edition-5 file).
    pub changes: Vec<Change>,
    /// `(new key path, old key path)` for every key or table that moved, was copied or was
    /// added, so that diagnostics about the upgraded document point at the original text.
    /// Paths are prefixes: a rename of `kernel.a_rocm` ← `kernel.a` also covers
    /// `kernel.a_rocm.src[0]`; the longest matching prefix wins. An added key maps to the table
    /// it was added to (`general.backends` ← `general`).
    pub renames: Vec<(String, String)>,
    /// Findings of the upgrade: warnings to show (`legacy-no-framework`, `legacy-no-license`,
    /// `universal-backends`) and errors (`unsupported-edition`, `hipify-copy-conflict`,
    /// `legacy-unknown-language`, `legacy-cuda-bound-conflict`).
    pub problems: Vec<Problem>,
}

/// One edit made by [`upgrade`] (or [`dash_name`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Change {
    /// Edition-5 key path of the edited item (`general.cuda.maxver`,
    /// `kernel.activation.cuda-capabilities`); for a removed key, its old path.
    pub key_path: String,
    /// What changed, for `update-build` to print (one sentence, Markdown-style backticks).
    pub description: String,
}

/// The backends a `universal = true` kernel is read as noarch for (see the module docs).
pub const UNIVERSAL_BACKENDS: [&str; 5] = ["cpu", "cuda", "metal", "rocm", "xpu"];

/// The three framework sections of edition 5.
const FRAMEWORKS: [&str; 3] = ["torch", "torch-noarch", "tvm-ffi"];

/// Keys of a `[kernel.*]` table in edition 5, per backend (reference §2.2).
fn kernel_keys(backend: &str) -> &'static [&'static str] {
    const COMMON: &[&str] = &["backend", "depends", "src", "include", "cxx-flags"];
    match backend {
        "cuda" => &[
            "backend",
            "depends",
            "src",
            "include",
            "cxx-flags",
            "cuda-capabilities",
            "cuda-flags",
            "cuda-minver",
        ],
        "rocm" => &["backend", "depends", "src", "include", "cxx-flags", "rocm-archs", "hip-flags"],
        "xpu" => &["backend", "depends", "src", "include", "cxx-flags", "sycl-flags"],
        _ => COMMON,
    }
}

/// Which generation `doc` was written in (rules in the module docs). Never fails: a document
/// that fits no generation well is reported as the closest one and the validator names what is
/// wrong with it.
pub fn detect(doc: &DocumentMut) -> Generation {
    let general = doc.get("general").and_then(Item::as_table_like);
    if let Some(edition) = general.and_then(|g| g.get("edition")) {
        return if edition.as_integer() == Some(6) { Generation::Edition6 } else { Generation::Edition5 };
    }
    if is_v1(doc) {
        return Generation::V1;
    }
    let has = |k: &str| general.is_some_and(|g| g.contains_key(k));
    if has("universal") || has("cuda-minver") || has("cuda-maxver") || (general.is_some() && !has("backends"))
    {
        return Generation::V2;
    }
    let frameworks = FRAMEWORKS.iter().filter(|f| doc.contains_key(f)).count();
    if has("version") && has("license") && frameworks == 1 {
        Generation::V4
    } else {
        Generation::V3
    }
}

fn is_v1(doc: &DocumentMut) -> bool {
    let torch = doc.get("torch").and_then(Item::as_table_like);
    if torch
        .is_some_and(|t| t.contains_key("name") || t.contains_key("pyroot") || t.contains_key("universal"))
    {
        return true;
    }
    kernels(doc).iter().any(|(_, k)| {
        k.as_table_like().is_some_and(|t| {
            t.contains_key("language") || t.contains_key("capabilities") || !t.contains_key("backend")
        })
    })
}

/// The `[kernel.*]` entries, in file order (empty when there are none or `kernel` is not a table).
fn kernels(doc: &DocumentMut) -> Vec<(String, &Item)> {
    doc.get("kernel")
        .and_then(Item::as_table_like)
        .map(|t| t.iter().filter(|(_, v)| v.is_table_like()).map(|(k, v)| (k.to_owned(), v)).collect())
        .unwrap_or_default()
}

/// Upgrade `doc` to edition 5 in place (rules in the module docs) and say what was done.
///
/// Never panics, whatever the document holds; values of an unexpected type are left for the
/// validator to report.
pub fn upgrade(doc: &mut DocumentMut) -> Upgrade {
    let generation = detect(doc);
    let mut up = Upgrader { changes: Vec::new(), renames: Vec::new(), problems: Vec::new() };
    match generation {
        Generation::Edition5 => up.check_edition(doc),
        Generation::Edition6 => {}
        Generation::V4 | Generation::V3 | Generation::V2 | Generation::V1 => {
            if doc.get("general").is_some_and(Item::is_table_like) {
                up.legacy(doc, generation);
            }
        }
    }
    Upgrade { generation, changes: up.changes, renames: up.renames, problems: up.problems }
}

/// Replace underscores in `general.name` with dashes (`fused_rms_norm` → `fused-rms-norm`),
/// keeping the value's formatting. Returns the change, or `None` when the name has no
/// underscore (or is missing or not a string). [`upgrade`] does this for legacy files;
/// `update-build` calls it for edition-5 files too.
pub fn dash_name(doc: &mut DocumentMut) -> Option<Change> {
    let general = doc.get_mut("general")?.as_table_like_mut()?;
    let item = general.get_mut("name")?;
    let old = item.as_str()?.to_owned();
    if !old.contains('_') {
        return None;
    }
    let new = old.replace('_', "-");
    set_str_keep_decor(item, &new);
    Some(Change {
        key_path: "general.name".to_owned(),
        description: format!(
            "renamed the kernel `{old}` to `{new}` (names use dashes; the Python package stays `{}`)",
            new.replace('-', "_")
        ),
    })
}

/// Rewrite an edition-5 document (a legacy one after [`upgrade`]) as edition 6 in place
/// (rules in the module docs) and say what was done. A document of another edition, or one
/// without an integer `edition = 5`, is left alone (empty result); values of an unexpected
/// type are left for the validator to report.
pub fn to_edition6(doc: &mut DocumentMut) -> Vec<Change> {
    let mut changes = Vec::new();
    let Some(edition) = doc.get_mut("general").and_then(|g| g.get_mut("edition")) else { return changes };
    if edition.as_integer() != Some(5) {
        return changes;
    }
    if let Some(v) = edition.as_value_mut() {
        let decor = v.decor().clone();
        *v = Value::from(6);
        *v.decor_mut() = decor;
    }
    changes.push(Change {
        key_path: "general.edition".to_owned(),
        description: "`edition = 5` became `edition = 6`".to_owned(),
    });
    let names: Vec<String> = kernels(doc).into_iter().map(|(n, _)| n).collect();
    for name in names {
        let Some(kernel) = doc.get_mut("kernel").and_then(|k| k.get_mut(&name)) else { continue };
        let Some(backend) = kernel.get("backend").and_then(Item::as_str).map(str::to_owned) else { continue };
        let Some(language) =
            crate::config::Backend::from_name(&backend).and_then(crate::config::Language::cpp_for)
        else {
            continue; // not a kernel backend: the validator says so
        };
        if kernel.get("language").is_some() || !rename_key(kernel, "backend", "language") {
            continue;
        }
        if let Some(item) = kernel.get_mut("language") {
            set_str_keep_decor(item, language.as_str());
        }
        changes.push(Change {
            key_path: format!("kernel.{}.language", key_part(&name)),
            description: format!("`backend = \"{backend}\"` became `language = \"{language}\"`"),
        });
    }
    if let Some(noarch) = doc.get_mut("torch-noarch") {
        for (kebab, snake) in [("cuda-capabilities", "cuda_capabilities"), ("rocm-archs", "rocm_archs")] {
            if rename_key(noarch, kebab, snake) {
                changes.push(Change {
                    key_path: format!("torch-noarch.{snake}"),
                    description: format!(
                        "renamed `{kebab}` to `{snake}` (the spelling upstream's parser reads)"
                    ),
                });
            }
        }
    }
    changes
}

struct Upgrader {
    changes: Vec<Change>,
    renames: Vec<(String, String)>,
    problems: Vec<Problem>,
}

impl Upgrader {
    fn change(&mut self, key_path: impl Into<String>, description: impl Into<String>) {
        self.changes.push(Change { key_path: key_path.into(), description: description.into() });
    }

    fn rename(&mut self, new: impl Into<String>, old: impl Into<String>) {
        self.renames.push((new.into(), old.into()));
    }

    fn problem(
        &mut self,
        severity: Severity,
        key_path: &str,
        rule: &'static str,
        message: String,
        help: Option<String>,
    ) {
        self.problems.push(Problem { severity, key_path: key_path.to_owned(), rule, message, help });
    }

    /// An `edition` that is not 6: only `edition = 5` is accepted.
    fn check_edition(&mut self, doc: &DocumentMut) {
        let Some(item) = doc.get("general").and_then(|g| g.get("edition")) else { return };
        match item.as_integer() {
            Some(5) => {}
            Some(n) => {
                let help = if n < 5 {
                    "files older than edition 5 carry no `edition` key; write `edition = 6` and run `kernel-builder check-config`"
                        .to_owned()
                } else {
                    "this kernel-builder reads editions 5 and 6 (and the older unversioned forms); upgrade kernel-builder".to_owned()
                };
                self.problem(
                    Severity::Error,
                    "general.edition",
                    "unsupported-edition",
                    format!("unsupported edition {n}"),
                    Some(help),
                );
            }
            None => self.problem(
                Severity::Error,
                "general.edition",
                "unsupported-edition",
                format!("`edition` must be the integer 6 (or 5), not {}", describe(item)),
                Some("write `edition = 6`".to_owned()),
            ),
        }
    }

    fn legacy(&mut self, doc: &mut DocumentMut, generation: Generation) {
        self.general_keys(doc);
        let mut universal: Option<bool> = None;
        if generation <= Generation::V2 {
            universal = self.take_universal(doc);
        }
        if generation == Generation::V1 {
            self.v1_torch(doc);
            self.v1_kernels(doc);
        }
        if generation <= Generation::V2 {
            self.v2_cuda_bounds(doc);
            self.v2_python_depends(doc);
        }
        if universal == Some(true) {
            self.make_noarch(doc);
        }
        if generation <= Generation::V2 {
            self.backends(doc, universal == Some(true));
        }
        self.framework(doc, universal == Some(true));
        self.renamed_dependencies(doc);
    }

    /// C++ dependencies renamed since: `cutlass_sycl` (Intel's CUTLASS for SYCL) is now
    /// `sycl_tla`.
    fn renamed_dependencies(&mut self, doc: &mut DocumentMut) {
        let names: Vec<String> = kernels(doc).into_iter().map(|(n, _)| n).collect();
        for name in names {
            let Some(deps) = doc
                .get_mut("kernel")
                .and_then(|k| k.get_mut(&name))
                .and_then(|k| k.get_mut("depends"))
                .and_then(|d| d.as_array_mut())
            else {
                continue;
            };
            for (i, dep) in deps.iter_mut().enumerate() {
                if dep.as_str() == Some("cutlass_sycl") {
                    let decor = dep.decor().clone();
                    *dep = Value::from("sycl_tla");
                    *dep.decor_mut() = decor;
                    self.change(
                        format!("kernel.{}.depends[{i}]", key_part(&name)),
                        "renamed dependency `cutlass_sycl` to `sycl_tla`",
                    );
                }
            }
        }
    }

    /// `[general] universal` (v2) or `[torch] universal` (v1): removed; returns its value.
    fn take_universal(&mut self, doc: &mut DocumentMut) -> Option<bool> {
        let mut found = None;
        for section in ["general", "torch"] {
            let Some(t) = doc.get_mut(section).and_then(Item::as_table_like_mut) else { continue };
            let Some(item) = t.get("universal") else { continue };
            let Some(v) = item.as_bool() else { continue }; // a non-bool is left for the validator
            t.remove("universal");
            let path = format!("{section}.universal");
            if v {
                self.change(
                    path,
                    format!(
                        "removed `universal = true`: the kernel is noarch, built for {}",
                        list(&UNIVERSAL_BACKENDS)
                    ),
                );
            } else {
                self.change(path, "removed `universal = false` (compiled kernels are the default)");
            }
            found = Some(found.unwrap_or(false) || v);
        }
        found
    }

    /// v1 `[torch] name`/`pyroot`: removed.
    fn v1_torch(&mut self, doc: &mut DocumentMut) {
        let Some(t) = doc.get_mut("torch").and_then(Item::as_table_like_mut) else { return };
        for key in ["name", "pyroot"] {
            if let Some(old) = t.remove(key) {
                self.change(
                    format!("torch.{key}"),
                    format!(
                        "removed `[torch] {key} = {}` (edition 5 derives the package from `general.name` and `torch-ext/`)",
                        old.as_value().map(|v| v.to_string().trim().to_owned()).unwrap_or_default()
                    ),
                );
            }
        }
    }

    /// v1 kernels: `capabilities`, `language`, missing `backend`, the hipify copy.
    fn v1_kernels(&mut self, doc: &mut DocumentMut) {
        let names: Vec<String> = kernels(doc).into_iter().map(|(n, _)| n).collect();
        let Some(ktable) = doc.get_mut("kernel").and_then(Item::as_table_like_mut) else { return };
        let mut taken: BTreeSet<String> = names.iter().cloned().collect();
        for name in &names {
            let base = format!("kernel.{}", key_part(name));
            let Some(kitem) = ktable.get_mut(name) else { continue };
            if rename_key(kitem, "capabilities", "cuda-capabilities") {
                self.change(
                    format!("{base}.cuda-capabilities"),
                    "renamed `capabilities` to `cuda-capabilities`",
                );
                self.rename(format!("{base}.cuda-capabilities"), format!("{base}.capabilities"));
            }
            let Some(kt) = kitem.as_table_like_mut() else { continue };
            if kt.contains_key("backend") {
                // A tagged kernel in a v1 file (mixed forms): keep its backend.
                continue;
            }
            let language = kt.get("language").map(|l| l.as_str().map(str::to_owned));
            let (backend, hipify) = match language.as_ref() {
                None => ("cuda", false),
                Some(Some(l)) if l == "cuda" => ("cuda", false),
                Some(Some(l)) if l == "metal" => ("metal", false),
                Some(Some(l)) if l == "cuda-hipify" => ("cuda", true),
                Some(other) => {
                    let shown = other
                        .as_deref()
                        .map(|s| format!("\"{s}\""))
                        .unwrap_or_else(|| "a non-string".to_owned());
                    self.problem(
                        Severity::Error,
                        &format!("{base}.language"),
                        "legacy-unknown-language",
                        format!("kernel `{name}` has `language = {shown}`"),
                        Some("legacy kernels use `language = \"cuda\"`, `\"cuda-hipify\"` or `\"metal\"`; edition 5 writes `backend = \"cuda\"`".to_owned()),
                    );
                    continue;
                }
            };
            let idx = kt.iter().position(|(k, _)| k == "language").unwrap_or(0);
            kt.remove("language");
            insert_at(kitem, idx, "backend", toml_edit::value(backend));
            let why = match language.as_ref() {
                None => "kernels without `backend` or `language` are CUDA kernels".to_owned(),
                Some(Some(l)) => format!("replaces `language = \"{l}\"`"),
                Some(None) => String::new(),
            };
            self.change(format!("{base}.backend"), format!("added `backend = \"{backend}\"` ({why})"));
            self.rename(
                format!("{base}.backend"),
                if language.is_some() { format!("{base}.language") } else { base.clone() },
            );

            if hipify {
                let rocm_name = format!("{name}_rocm");
                let rocm_base = format!("kernel.{}", key_part(&rocm_name));
                if taken.contains(&rocm_name) {
                    self.problem(
                        Severity::Error,
                        &rocm_base,
                        "hipify-copy-conflict",
                        format!(
                            "kernel `{name}` has `language = \"cuda-hipify\"`, which needs a ROCm copy named `{rocm_name}`, but that name is already taken"
                        ),
                        Some(format!("rename `[kernel.{rocm_name}]`, or write the ROCm kernel yourself with `backend = \"rocm\"`")),
                    );
                } else {
                    let mut copy = kitem.clone();
                    if let Some(ct) = copy.as_table_like_mut() {
                        if let Some(b) = ct.get_mut("backend") {
                            set_str_keep_decor(b, "rocm");
                        }
                    }
                    if let Item::Table(t) = &mut copy {
                        t.decor_mut().set_prefix(format!(
                            "\n# ROCm copy of `{name}`, made by `kernel-builder update-build` from `language = \"cuda-hipify\"`.\n"
                        ));
                    }
                    let dropped = drop_foreign_keys(&mut copy, "rocm");
                    self.change(
                        rocm_base.clone(),
                        format!(
                            "added `[kernel.{rocm_name}]`, the ROCm copy of `{name}` (was `language = \"cuda-hipify\"`){}",
                            if dropped.is_empty() { String::new() } else { format!(", without {}", list(&dropped)) }
                        ),
                    );
                    self.rename(rocm_base, base.clone());
                    taken.insert(rocm_name.clone());
                    // Insert right after the CUDA kernel.
                    let pos = ktable.iter().position(|(k, _)| k == name).map(|p| p + 1).unwrap_or(0);
                    ktable.insert(&rocm_name, copy);
                    move_key_to(ktable, &rocm_name, pos);
                }
            }
            let Some(kitem) = ktable.get_mut(name) else { continue };
            let dropped = drop_foreign_keys(kitem, backend);
            for key in dropped {
                self.change(
                    format!("{base}.{key}"),
                    format!("removed `{key}` from the {backend} kernel `{name}` (edition 5 does not accept it there; the legacy tool ignored it)"),
                );
            }
        }
    }

    /// v2 `[general] cuda-minver`/`cuda-maxver` → `[general.cuda] minver`/`maxver`, verbatim.
    fn v2_cuda_bounds(&mut self, doc: &mut DocumentMut) {
        let Some(general_item) = doc.get_mut("general") else { return };
        let standard = general_item.is_table();
        let Some(general) = general_item.as_table_like_mut() else { return };
        for bound in ["minver", "maxver"] {
            let old_key = format!("cuda-{bound}");
            let Some(old) = general.key(&old_key).cloned() else { continue };
            let Some(item) = general.remove(&old_key) else { continue };
            ensure_general_cuda(general, standard);
            let Some(cuda) = general.get_mut("cuda").and_then(Item::as_table_like_mut) else {
                self.problem(
                    Severity::Error,
                    "general.cuda",
                    "legacy-cuda-bound-conflict",
                    format!("`general.{old_key}` cannot move to `[general.cuda] {bound}`: `general.cuda` is not a table"),
                    Some(format!("remove `general.cuda` or move `{old_key}` by hand")),
                );
                general.insert(&old_key, item);
                continue;
            };
            if cuda.contains_key(bound) {
                self.problem(
                    Severity::Error,
                    &format!("general.cuda.{bound}"),
                    "legacy-cuda-bound-conflict",
                    format!("both `general.{old_key}` and `[general.cuda] {bound}` are set"),
                    Some(format!("keep only `[general.cuda] {bound}`")),
                );
                continue;
            }
            let text = item.as_value().map(|v| v.to_string().trim().to_owned()).unwrap_or_default();
            let new_key = Key::new(bound).with_leaf_decor(old.leaf_decor().clone());
            cuda.entry_format(&new_key).or_insert(item);
            self.change(
                format!("general.cuda.{bound}"),
                format!("moved `cuda-{bound} = {text}` from `[general]` to `[general.cuda] {bound}` (value kept as written)"),
            );
            self.rename(format!("general.cuda.{bound}"), format!("general.{old_key}"));
        }
    }

    /// v2 `python-depends = ["nvidia-cutlass-dsl"]` → `[general.cuda] python-depends`.
    fn v2_python_depends(&mut self, doc: &mut DocumentMut) {
        const CUDA_ONLY: &str = "nvidia-cutlass-dsl";
        let Some(general_item) = doc.get_mut("general") else { return };
        let standard = general_item.is_table();
        let Some(general) = general_item.as_table_like_mut() else { return };
        let Some(arr) = general.get_mut("python-depends").and_then(Item::as_array_mut) else { return };
        let Some(i) = arr.iter().position(|v| v.as_str() == Some(CUDA_ONLY)) else { return };
        arr.remove(i);
        let now_empty = arr.is_empty();
        if now_empty {
            general.remove("python-depends");
        }
        ensure_general_cuda(general, standard);
        let Some(cuda) = general.get_mut("cuda").and_then(Item::as_table_like_mut) else { return };
        match cuda.get_mut("python-depends") {
            Some(existing) => {
                if let Some(a) = existing.as_array_mut() {
                    if !a.iter().any(|v| v.as_str() == Some(CUDA_ONLY)) {
                        a.push(CUDA_ONLY);
                    }
                }
            }
            None => {
                cuda.insert("python-depends", toml_edit::value(Array::from_iter([CUDA_ONLY])));
            }
        }
        self.change(
            "general.cuda.python-depends",
            format!("moved `{CUDA_ONLY}` from `general.python-depends` to `[general.cuda] python-depends` (it is a CUDA dependency)"),
        );
        self.rename("general.cuda.python-depends", "general.python-depends");
    }

    /// `universal = true` without compiled kernels: `[torch]` becomes `[torch-noarch]`.
    fn make_noarch(&mut self, doc: &mut DocumentMut) {
        if !kernels(doc).is_empty() || !doc.contains_key("torch") || doc.contains_key("torch-noarch") {
            return;
        }
        let Some((key, mut item)) = doc.as_table_mut().remove_entry("torch") else { return };
        let mut dropped = Vec::new();
        if let Some(t) = item.as_table_like_mut() {
            let keys: Vec<String> = t.iter().map(|(k, _)| k.to_owned()).collect();
            for k in keys {
                if k != "pyext" {
                    t.remove(&k);
                    dropped.push(k);
                }
            }
        }
        let new_key = Key::new("torch-noarch").with_leaf_decor(key.leaf_decor().clone());
        doc.as_table_mut().insert_formatted(&new_key, item);
        let without = if dropped.is_empty() {
            String::new()
        } else {
            format!(" and removed {} (nothing is compiled)", list(&dropped))
        };
        self.change(
            "torch-noarch",
            format!("renamed `[torch]` to `[torch-noarch]` (`universal = true`){without}"),
        );
        self.rename("torch-noarch", "torch");
    }

    /// A missing `general.backends` (v1, v2): the kernels' backends, or the universal set.
    fn backends(&mut self, doc: &mut DocumentMut, universal: bool) {
        if doc.get("general").is_some_and(|g| g.get("backends").is_some()) {
            return;
        }
        let mut set: BTreeSet<String> = BTreeSet::new();
        if universal {
            set.extend(UNIVERSAL_BACKENDS.iter().map(|s| s.to_string()));
        } else {
            for (_, k) in kernels(doc) {
                if let Some(b) = k.get("backend").and_then(Item::as_str) {
                    set.insert(b.to_owned());
                }
            }
        }
        let backends: Vec<&str> = set.iter().map(String::as_str).collect();
        let Some(general) = doc.get_mut("general") else { return };
        insert_after(
            general,
            &["name", "version", "edition", "license"],
            "backends",
            toml_edit::value(Array::from_iter(backends.iter().copied())),
        );
        let why = if universal {
            "`universal = true`".to_owned()
        } else if backends.is_empty() {
            "the file has no `[kernel.*]` tables".to_owned()
        } else {
            "the backends of the `[kernel.*]` tables".to_owned()
        };
        self.change("general.backends", format!("added `backends = [{}]` ({why})", quoted(&backends)));
        self.rename("general.backends", "general");
        if universal {
            self.problem(
                Severity::Warning,
                "general.backends",
                "universal-backends",
                format!("`universal = true` is read as a noarch kernel for {}", list(&UNIVERSAL_BACKENDS)),
                Some("run `kernel-builder update-build`, then remove from `backends` the ones this kernel does not support".to_owned()),
            );
        }
    }

    /// No framework section: add one, with a warning.
    fn framework(&mut self, doc: &mut DocumentMut, universal: bool) {
        if FRAMEWORKS.iter().any(|f| doc.contains_key(f)) {
            return;
        }
        let compiled = kernels(doc).iter().any(|(_, k)| k.as_table_like().is_some_and(|t| !t.is_empty()));
        let section = if compiled && !universal { "torch" } else { "torch-noarch" };
        let mut t = Table::new();
        t.set_implicit(false);
        if let Some(pos) = last_general_position(doc) {
            t.set_position(pos);
        }
        doc.as_table_mut().insert(section, Item::Table(t));
        self.rename(section, "general");
        if universal {
            self.change(section, format!("added `[{section}]` (`universal = true` kernels are noarch)"));
            return;
        }
        self.change(section, format!("added `[{section}]` (the file has no framework section)"));
        let (message, help) = if section == "torch" {
            (
                "the file has no framework section; it is read as a compiled Torch extension (`[torch]`) because it has `[kernel.*]` tables".to_owned(),
                "run `kernel-builder update-build` to write `[torch]` into build.toml".to_owned(),
            )
        } else {
            (
                "the file has no framework section; it is read as a noarch (pure Python) kernel, `[torch-noarch]`".to_owned(),
                "if that is right, run `kernel-builder update-build` to write `[torch-noarch]`; a compiled kernel needs `[torch]` and `[kernel.*]` tables".to_owned(),
            )
        };
        self.problem(Severity::Warning, section, "legacy-no-framework", message, Some(help));
    }

    /// `version`, `edition`, the name, and the license warning.
    fn general_keys(&mut self, doc: &mut DocumentMut) {
        if let Some(change) = dash_name(doc) {
            self.changes.push(change);
        }
        let Some(general) = doc.get_mut("general") else { return };
        let Some(g) = general.as_table_like() else { return };
        let has_version = g.contains_key("version");
        let has_license = g.contains_key("license");
        if !has_version {
            insert_after(general, &["name"], "version", toml_edit::value(1));
            self.change("general.version", "added `version = 1` (files without a version are version 1)");
            self.rename("general.version", "general");
        }
        insert_after(general, &["name", "version"], "edition", toml_edit::value(5));
        self.change("general.edition", "added `edition = 5`");
        self.rename("general.edition", "general");
        if !has_license {
            self.problem(
                Severity::Warning,
                "general.license",
                "legacy-no-license",
                "the file has no `license`; edition 5 requires one".to_owned(),
                Some("add `license = \"<SPDX id>\"` to `[general]`, or run `kernel-builder update-build --license <SPDX id>`".to_owned()),
            );
        }
    }
}

/// Add an empty `[general.cuda]` when `general` has none: a table section when `[general]` is
/// one (`standard`), an inline table when `general` is itself inline.
fn ensure_general_cuda(general: &mut dyn toml_edit::TableLike, standard: bool) {
    if general.contains_key("cuda") {
        return;
    }
    let t = if standard {
        let mut t = Table::new();
        t.set_implicit(false);
        Item::Table(t)
    } else {
        Item::Value(Value::InlineTable(toml_edit::InlineTable::new()))
    };
    general.insert("cuda", t);
}

/// The largest table position among `[general]` and its sub-tables.
fn last_general_position(doc: &DocumentMut) -> Option<usize> {
    fn walk(t: &Table, best: &mut Option<usize>) {
        if let Some(p) = t.position() {
            *best = Some(best.map_or(p, |b: usize| b.max(p)));
        }
        for (_, item) in t.iter() {
            if let Item::Table(sub) = item {
                walk(sub, best);
            }
        }
    }
    let mut best = None;
    if let Some(Item::Table(g)) = doc.get("general") {
        walk(g, &mut best);
    }
    best
}

/// Remove the keys `backend` does not accept in a kernel table; returns their names.
fn drop_foreign_keys(kernel: &mut Item, backend: &str) -> Vec<String> {
    let allowed = kernel_keys(backend);
    let Some(t) = kernel.as_table_like_mut() else { return Vec::new() };
    // Only keys that some backend accepts are foreign; unknown keys are left for the validator.
    let known = |k: &str| ["cuda", "rocm", "xpu", "cpu", "metal"].iter().any(|b| kernel_keys(b).contains(&k));
    let foreign: Vec<String> =
        t.iter().map(|(k, _)| k.to_owned()).filter(|k| known(k) && !allowed.contains(&k.as_str())).collect();
    for k in &foreign {
        t.remove(k);
    }
    foreign
}

/// Rename `old` to `new` in a table item, keeping its place, value and comments.
fn rename_key(item: &mut Item, old: &str, new: &str) -> bool {
    let Some(t) = item.as_table_like_mut() else { return false };
    if !t.contains_key(old) || t.contains_key(new) {
        return false;
    }
    let Some(idx) = t.iter().position(|(k, _)| k == old) else { return false };
    let Some(key) = t.key(old).cloned() else { return false };
    let Some(value) = t.remove(old) else { return false };
    let new_key =
        Key::new(new).with_leaf_decor(key.leaf_decor().clone()).with_dotted_decor(key.dotted_decor().clone());
    t.entry_format(&new_key).or_insert(value);
    move_key_to(t, new, idx);
    true
}

/// Insert `key` into a table item right after the last of `anchors` present (first if none).
fn insert_after(item: &mut Item, anchors: &[&str], key: &str, value: Item) {
    let Some(t) = item.as_table_like() else { return };
    let idx =
        t.iter().enumerate().filter(|(_, (k, _))| anchors.contains(k)).map(|(i, _)| i + 1).max().unwrap_or(0);
    insert_at(item, idx, key, value);
}

/// Insert `key` into a table item at index `idx` of its key/value pairs.
fn insert_at(item: &mut Item, idx: usize, key: &str, value: Item) {
    let Some(t) = item.as_table_like_mut() else { return };
    t.insert(key, value);
    move_key_to(t, key, idx);
}

/// Move `key` to index `idx` by removing and re-appending the keys after that index, with their
/// formatting (so comments and spacing stay with their keys).
fn move_key_to(t: &mut dyn toml_edit::TableLike, key: &str, idx: usize) {
    let keys: Vec<String> = t.iter().map(|(k, _)| k.to_owned()).collect();
    if keys.iter().position(|k| k == key) == Some(idx) {
        return;
    }
    let tail: Vec<String> = keys.iter().filter(|k| k.as_str() != key).skip(idx).cloned().collect();
    let mut moved = Vec::new();
    for k in &tail {
        let formatted = t.key(k).cloned().unwrap_or_else(|| Key::new(k.as_str()));
        if let Some(v) = t.remove(k) {
            moved.push((formatted, v));
        }
    }
    let formatted = t.key(key).cloned().unwrap_or_else(|| Key::new(key));
    if let Some(v) = t.remove(key) {
        t.entry_format(&formatted).or_insert(v);
    }
    for (k, v) in moved {
        t.entry_format(&k).or_insert(v);
    }
}

/// Replace a string value, keeping its surrounding whitespace and comments.
fn set_str_keep_decor(item: &mut Item, new: &str) {
    if let Some(v) = item.as_value_mut() {
        let decor = v.decor().clone();
        let mut nv = Value::from(new);
        *nv.decor_mut() = decor;
        *v = nv;
    }
}

/// A key as written in a key path: bare when it can be, otherwise quoted.
fn key_part(k: &str) -> String {
    if !k.is_empty() && k.chars().all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_') {
        k.to_owned()
    } else {
        format!("\"{}\"", k.replace('\\', "\\\\").replace('"', "\\\""))
    }
}

fn describe(item: &Item) -> String {
    match item.as_value() {
        Some(v) => format!("`{}`", v.to_string().trim()),
        None => format!("a {}", item.type_name()),
    }
}

fn list<S: AsRef<str>>(items: &[S]) -> String {
    items.iter().map(|s| format!("`{}`", s.as_ref())).collect::<Vec<_>>().join(", ")
}

fn quoted<S: AsRef<str>>(items: &[S]) -> String {
    items.iter().map(|s| format!("\"{}\"", s.as_ref())).collect::<Vec<_>>().join(", ")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn doc(text: &str) -> DocumentMut {
        text.parse().expect("test TOML")
    }

    #[test]
    fn insert_after_places_the_key_after_the_last_anchor_present() {
        let mut d = doc("[general]\nname = \"a\"\n# about x\nx = 1\nlicense = \"MIT\"\n");
        insert_after(&mut d["general"], &["name", "version"], "version", toml_edit::value(1));
        assert_eq!(
            d.to_string(),
            "[general]\nname = \"a\"\nversion = 1\n# about x\nx = 1\nlicense = \"MIT\"\n"
        );
        insert_after(&mut d["general"], &["nothing"], "first", toml_edit::value(0));
        assert_eq!(
            d.to_string(),
            "[general]\nfirst = 0\nname = \"a\"\nversion = 1\n# about x\nx = 1\nlicense = \"MIT\"\n"
        );
    }

    #[test]
    fn rename_key_keeps_place_comment_and_value_text() {
        let mut d = doc("[k]\na = 1\n# caps\ncapabilities = [ \"8.0\" ] # why\nz = 2\n");
        assert!(rename_key(&mut d["k"], "capabilities", "cuda-capabilities"));
        assert_eq!(d.to_string(), "[k]\na = 1\n# caps\ncuda-capabilities = [ \"8.0\" ] # why\nz = 2\n");
        assert!(!rename_key(&mut d["k"], "missing", "other"));
        // Never overwrites an existing key.
        assert!(!rename_key(&mut d["k"], "a", "z"));
    }

    #[test]
    fn inline_tables_are_edited_in_place() {
        let mut d = doc("k = { language = \"metal\", src = [] }\n");
        let idx = 0;
        d["k"].as_table_like_mut().unwrap().remove("language");
        insert_at(&mut d["k"], idx, "backend", toml_edit::value("metal"));
        assert_eq!(d.to_string(), "k = { backend = \"metal\", src = [] }\n");
    }

    #[test]
    fn key_paths_quote_keys_that_are_not_bare() {
        assert_eq!(key_part("relu_rocm"), "relu_rocm");
        assert_eq!(key_part("a.b"), "\"a.b\"");
        assert_eq!(key_part(""), "\"\"");
    }

    #[test]
    fn detection_follows_the_oldest_marker() {
        let g = |t: &str| detect(&doc(t));
        assert_eq!(g("[general]\nedition = 5\nuniversal = true\n"), Generation::Edition5);
        assert_eq!(g("[general]\nuniversal = true\n[torch]\nname = \"x\"\n"), Generation::V1);
        assert_eq!(g("[general]\nbackends = []\n[kernel.k]\nsrc = []\n"), Generation::V1);
        assert_eq!(g("[general]\nbackends = []\ncuda-maxver = \"13.0\"\n"), Generation::V2);
        assert_eq!(g("[general]\nname = \"x\"\n[torch]\n"), Generation::V2);
        assert_eq!(g("[general]\nbackends = []\nversion = 1\n[torch]\n"), Generation::V3);
        assert_eq!(g("[general]\nbackends = []\nversion = 1\nlicense = \"MIT\"\n"), Generation::V3);
        assert_eq!(
            g("[general]\nbackends = []\nversion = 1\nlicense = \"MIT\"\n[torch-noarch]\n"),
            Generation::V4
        );
        assert_eq!(g(""), Generation::V3);
    }
}
