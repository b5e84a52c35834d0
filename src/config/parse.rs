//! Read an edition-5 or edition-6 document (after [`super::upgrade::upgrade`]) into [`BuildConfig`],
//! collecting every problem instead of stopping at the first.
//!
//! Problems are located by key path (see [`Problem`]); [`super::diagnostics`] maps them back
//! to the original text.

use camino::Utf8Path;
use indexmap::IndexMap;
use toml_edit::{Item, TableLike, Value};

use super::deps::{python_dependency_names, CPP_DEPENDENCY_NAMES};
use super::diagnostics::{join_index, join_key};
use super::model::*;
use super::validate::{self, did_you_mean, suggest_backend, NAME_RULE};
use super::{Problem, Severity};

/// Top-level keys of edition 6 (edition 5 has them all but `mlx-noarch`).
const TOP_KEYS: &[&str] = &["general", "torch", "torch-noarch", "tvm-ffi", "mlx-noarch", "kernel"];
const FRAMEWORKS: &[&str] = &["torch", "torch-noarch", "tvm-ffi", "mlx-noarch"];
/// `[general]` keys of edition 6 (edition 5 has them all but `build-layout`).
const GENERAL_KEYS: &[&str] = &[
    "name",
    "version",
    "edition",
    "license",
    "upstream",
    "source",
    "backends",
    "python-depends",
    "kernel-depends",
    "cuda",
    "neuron",
    "tpu",
    "xpu",
    "hub",
    "build-layout",
    "matrix",
];
const TORCH_KEYS: &[&str] = &["include", "minver", "maxver", "pyext", "src", "stable-abi", "cxx-flags"];
const NOARCH_KEYS: &[&str] = &["pyext", "cuda_capabilities", "rocm_archs", "cuda-capabilities", "rocm-archs"];
const TVM_FFI_KEYS: &[&str] = &["include", "pyext", "src", "cxx-flags"];
const MLX_NOARCH_KEYS: &[&str] = &["pyext"];
const KERNEL_COMMON_KEYS: &[&str] = &["backend", "depends", "src", "include", "cxx-flags"];
/// Kernel keys that only one backend accepts.
const KERNEL_BACKEND_KEYS: &[(&str, Backend)] = &[
    ("cuda-capabilities", Backend::Cuda),
    ("cuda-flags", Backend::Cuda),
    ("cuda-minver", Backend::Cuda),
    ("rocm-archs", Backend::Rocm),
    ("hip-flags", Backend::Rocm),
    ("sycl-flags", Backend::Xpu),
];
const KERNEL_DEP_KEYS: &[&str] = &["repo-id", "version", "revision"];

/// Collects problems while reading.
pub(crate) struct Cx<'a> {
    /// Everything found so far, in the order found.
    pub problems: Vec<Problem>,
    kernel_dir: Option<&'a Utf8Path>,
    canonical_dir: Option<std::path::PathBuf>,
}

impl<'a> Cx<'a> {
    /// With `kernel_dir`, paths are also checked on disk.
    pub fn new(kernel_dir: Option<&'a Utf8Path>) -> Cx<'a> {
        let canonical_dir = kernel_dir.and_then(|d| d.as_std_path().canonicalize().ok());
        Cx { problems: Vec::new(), kernel_dir, canonical_dir }
    }

    fn push(
        &mut self,
        severity: Severity,
        path: &str,
        rule: &'static str,
        message: String,
        help: Option<String>,
    ) {
        // Messages quote the file's values, whose escapes (`"\u001b"`) may be terminal controls.
        let (message, help) = (
            crate::printer::escape_controls(&message).into_owned(),
            help.map(|h| crate::printer::escape_controls(&h).into_owned()),
        );
        self.problems.push(Problem { severity, key_path: path.to_owned(), rule, message, help });
    }

    fn error(&mut self, path: &str, rule: &'static str, message: String, help: Option<String>) {
        self.push(Severity::Error, path, rule, message, help);
    }

    fn warning(&mut self, path: &str, rule: &'static str, message: String, help: Option<String>) {
        self.push(Severity::Warning, path, rule, message, help);
    }
}

/// "a string", "an integer", … for type errors.
fn describe_value(v: &Value) -> &'static str {
    match v {
        Value::String(_) => "a string",
        Value::Integer(_) => "an integer",
        Value::Float(_) => "a float",
        Value::Boolean(_) => "a boolean",
        Value::Datetime(_) => "a date",
        Value::Array(_) => "an array",
        Value::InlineTable(_) => "a table",
    }
}

fn describe(item: &Item) -> &'static str {
    match item {
        Item::None => "nothing",
        Item::Value(v) => describe_value(v),
        Item::Table(_) => "a table",
        Item::ArrayOfTables(_) => "an array of tables",
    }
}

fn wrong_type(cx: &mut Cx, path: &str, expected: &str, found: &str, example: &str) {
    cx.error(
        path,
        "wrong-type",
        format!("`{path}` must be {expected}, found {found}"),
        Some(format!("write it as {example}")),
    );
}

fn as_str(cx: &mut Cx, item: &Item, path: &str, example: &str) -> Option<String> {
    match item.as_str() {
        Some(s) => Some(s.to_owned()),
        None => {
            wrong_type(cx, path, "a string", describe(item), example);
            None
        }
    }
}

fn as_uint(cx: &mut Cx, item: &Item, path: &str, example: &str) -> Option<u64> {
    match item.as_integer() {
        Some(i) if i >= 0 => Some(i as u64),
        Some(i) => {
            cx.error(
                path,
                "wrong-type",
                format!("`{path}` must not be negative, found {i}"),
                Some(format!("write it as {example}")),
            );
            None
        }
        None => {
            wrong_type(cx, path, "a non-negative integer", describe(item), example);
            None
        }
    }
}

/// An array of strings; each element's index is kept so problems can point at it.
fn as_str_list(cx: &mut Cx, item: &Item, path: &str, example: &str) -> Option<Vec<(usize, String)>> {
    let Some(arr) = item.as_array() else {
        wrong_type(cx, path, "an array of strings", describe(item), example);
        return None;
    };
    let mut out = Vec::new();
    for (i, v) in arr.iter().enumerate() {
        match v.as_str() {
            Some(s) => out.push((i, s.to_owned())),
            None => {
                let p = join_index(path, i);
                cx.error(
                    &p,
                    "wrong-type",
                    format!("`{p}` must be a string, found {}", describe_value(v)),
                    Some(format!("write the array as {example}")),
                );
            }
        }
    }
    Some(out)
}

fn plain(list: Vec<(usize, String)>) -> Vec<String> {
    list.into_iter().map(|(_, s)| s).collect()
}

fn as_table<'t>(cx: &mut Cx, item: &'t Item, path: &str) -> Option<&'t dyn TableLike> {
    match item.as_table_like() {
        Some(t) => Some(t),
        None => {
            cx.error(
                path,
                "wrong-type",
                format!("`{path}` must be a table, found {}", describe(item)),
                Some(format!("write it as a `[{path}]` section")),
            );
            None
        }
    }
}

/// Report every key of `table` that is not in `allowed`.
fn check_keys(cx: &mut Cx, table: &dyn TableLike, path: &str, allowed: &[&str]) {
    check_keys_but(cx, table, path, allowed, &[]);
}

/// [`check_keys`], leaving `reported_elsewhere` (keys another check reports) alone and out of
/// the list of allowed keys.
fn check_keys_but(
    cx: &mut Cx,
    table: &dyn TableLike,
    path: &str,
    allowed: &[&str],
    reported_elsewhere: &[&str],
) {
    for (key, _) in table.iter() {
        if allowed.contains(&key) || reported_elsewhere.contains(&key) {
            continue;
        }
        let kp = join_key(path, key);
        let where_ = if path.is_empty() { "at the top level".to_owned() } else { format!("in `[{path}]`") };
        let help = match did_you_mean(key, allowed) {
            Some(s) => format!("did you mean `{s}`?"),
            None => format!("allowed keys: {}", allowed.join(", ")),
        };
        cx.error(&kp, "unknown-key", format!("unknown key `{key}` {where_}"), Some(help));
    }
}

fn version(cx: &mut Cx, table: &dyn TableLike, path: &str, key: &str) -> Option<Version> {
    let item = table.get(key)?;
    let p = join_key(path, key);
    let s = as_str(cx, item, &p, "a quoted version, e.g. \"2.9\"")?;
    match Version::parse(&s) {
        Ok(v) => Some(v),
        Err(e) => {
            cx.error(
                &p,
                "bad-version",
                format!("`{p}`: {e}"),
                Some("write dot-separated numbers, e.g. \"12.8\"".to_owned()),
            );
            None
        }
    }
}

fn check_bounds(cx: &mut Cx, path: &str, min: &Option<Version>, max: &Option<Version>) {
    if let (Some(lo), Some(hi)) = (min, max) {
        if lo > hi {
            cx.error(
                &join_key(path, "maxver"),
                "version-bounds",
                format!(
                    "`{path}.maxver` ({hi}) is lower than `{path}.minver` ({lo}), so nothing would be built"
                ),
                Some("swap the two values or widen the range".to_owned()),
            );
        }
    }
}

fn str_list(cx: &mut Cx, table: &dyn TableLike, path: &str, key: &str) -> Option<Vec<String>> {
    let item = table.get(key)?;
    as_str_list(cx, item, &join_key(path, key), "[\"…\", \"…\"]").map(plain)
}

/// `src`/`include` lists: shape, and (with a kernel directory) existence and confinement.
fn paths(cx: &mut Cx, table: &dyn TableLike, path: &str, key: &str) -> Option<Vec<String>> {
    let item = table.get(key)?;
    let p = join_key(path, key);
    let list = as_str_list(cx, item, &p, "[\"dir/file.cu\"]")?;
    for (i, s) in &list {
        let ip = join_index(&p, *i);
        let result = validate::check_path_shape(s).and_then(|()| match (cx.kernel_dir, &cx.canonical_dir) {
            (Some(dir), Some(canon)) => validate::check_path_on_disk(dir, canon, s),
            _ => Ok(()),
        });
        if let Err(e) = result {
            cx.error(&ip, e.rule, e.message, e.help);
        }
    }
    Some(plain(list))
}

fn capabilities(cx: &mut Cx, table: &dyn TableLike, path: &str, key: &str) -> Option<Vec<CudaCapability>> {
    let item = table.get(key)?;
    let p = join_key(path, key);
    let list = as_str_list(cx, item, &p, "[\"8.0\", \"9.0a\"]")?;
    if item.as_array().is_some_and(|a| a.is_empty()) {
        cx.error(
            &p,
            "empty-capabilities",
            format!("`{p}` is empty, so this would build for no GPU"),
            Some("list the capabilities to build (e.g. [\"8.0\", \"9.0\"]) or remove the key to build every capability the CUDA version supports".to_owned()),
        );
    }
    let mut out = Vec::new();
    for (i, s) in list {
        match CudaCapability::parse(&s) {
            Ok(c) => out.push(c),
            Err(e) => cx.error(&join_index(&p, i), "bad-capability", e.to_string(), None),
        }
    }
    Some(out)
}

fn rocm_archs(cx: &mut Cx, table: &dyn TableLike, path: &str, key: &str) -> Option<Vec<String>> {
    let item = table.get(key)?;
    let p = join_key(path, key);
    let list = as_str_list(cx, item, &p, "[\"gfx942\"]")?;
    if item.as_array().is_some_and(|a| a.is_empty()) {
        cx.error(
            &p,
            "empty-rocm-archs",
            format!("`{p}` is empty, so this would build for no GPU"),
            Some("list the gfx targets to build (e.g. [\"gfx942\"]) or remove the key to build every target the ROCm version supports".to_owned()),
        );
    }
    Some(plain(list))
}

/// `python-depends` of `[general]` (`backend = None`, checked against the general table) or of
/// `[general.<backend>]` (checked against that backend's table only, as upstream's generators
/// and Nix do: a general name there is an error whose help says to move it to
/// `general.python-depends`, so a file accepted here also builds upstream).
fn python_depends(cx: &mut Cx, table: &dyn TableLike, path: &str, backend: Option<Backend>) -> Vec<String> {
    let Some(item) = table.get("python-depends") else {
        return Vec::new();
    };
    let p = join_key(path, "python-depends");
    let Some(list) = as_str_list(cx, item, &p, "[\"einops\"]") else {
        return Vec::new();
    };
    let known = python_dependency_names(backend);
    for (i, name) in &list {
        let ip = join_index(&p, *i);
        match (&known, backend) {
            (None, Some(b)) => cx.error(
                &ip,
                "unknown-python-dependency",
                format!(
                    "unknown Python dependency `{name}`: no Python dependencies are defined for backend {b}"
                ),
                Some("remove it; general dependencies go in `general.python-depends`".to_owned()),
            ),
            (Some(k), _) if !k.contains(&name.as_str()) => {
                let scope = match backend {
                    None => "general".to_owned(),
                    Some(b) => format!("backend {b}"),
                };
                let listed = if k.is_empty() { "none".to_owned() } else { k.join(", ") };
                let mut help = match did_you_mean(name, k) {
                    Some(s) => format!("did you mean `{s}`? "),
                    None => String::new(),
                };
                // Point at the right table when the name is known elsewhere.
                if backend.is_some()
                    && python_dependency_names(None).unwrap_or_default().contains(&name.as_str())
                {
                    help.push_str(&format!(
                        "`{name}` is a general dependency: list it in `general.python-depends`. "
                    ));
                } else if backend.is_none() {
                    for b in Backend::ALL {
                        if python_dependency_names(Some(b)).unwrap_or_default().contains(&name.as_str()) {
                            help.push_str(&format!(
                                "`{name}` is a {b} dependency: list it in `[general.{b}] python-depends`. "
                            ));
                        }
                    }
                }
                help.push_str(&format!("known {scope} Python dependencies: {listed}"));
                cx.error(
                    &ip,
                    "unknown-python-dependency",
                    format!("unknown Python dependency `{name}` ({scope})"),
                    Some(help),
                );
            }
            _ => {}
        }
    }
    plain(list)
}

/// A Hub repository id: `owner/name` by the Hub's rules ([`super::validate::repo_id_problem`]).
fn repo_id(cx: &mut Cx, item: &Item, path: &str) -> Option<String> {
    let s = as_str(cx, item, path, "\"owner/name\"")?;
    if let Some(why) = super::validate::repo_id_problem(&s) {
        cx.error(
            path,
            "bad-repo-id",
            format!("`{s}` is not a Hub repository id: {why}"),
            Some("write `owner/name`, e.g. \"kernels-community/relu\"".to_owned()),
        );
        return None;
    }
    Some(s)
}

fn kernel_depends(cx: &mut Cx, table: &dyn TableLike, path: &str) -> Vec<KernelDependency> {
    let Some(item) = table.get("kernel-depends") else {
        return Vec::new();
    };
    let p = join_key(path, "kernel-depends");
    let example = "[{ repo-id = \"kernels-community/relu\", version = 1 }]";
    let entries: Vec<(usize, Option<&dyn TableLike>, &'static str)> = if let Some(arr) = item.as_array() {
        arr.iter()
            .enumerate()
            .map(|(i, v)| (i, v.as_inline_table().map(|t| t as &dyn TableLike), describe_value(v)))
            .collect()
    } else if let Some(aot) = item.as_array_of_tables() {
        aot.iter().enumerate().map(|(i, t)| (i, Some(t as &dyn TableLike), "a table")).collect()
    } else {
        wrong_type(cx, &p, "an array of tables", describe(item), example);
        return Vec::new();
    };
    let mut out = Vec::new();
    for (i, t, found) in entries {
        let ip = join_index(&p, i);
        let Some(t) = t else {
            wrong_type(cx, &ip, "a table", found, example);
            continue;
        };
        check_keys(cx, t, &ip, KERNEL_DEP_KEYS);
        let repo_id = match t.get("repo-id") {
            Some(r) => repo_id(cx, r, &join_key(&ip, "repo-id")),
            None => {
                cx.error(&ip, "missing-key", format!("`{ip}` has no `repo-id`"), Some(example.to_owned()));
                None
            }
        };
        let version =
            t.get("version").and_then(|v| as_uint(cx, v, &join_key(&ip, "version"), "an integer, e.g. 1"));
        let revision = t
            .get("revision")
            .and_then(|v| as_str(cx, v, &join_key(&ip, "revision"), "a quoted git revision"));
        let pin = match (t.get("version").is_some(), t.get("revision").is_some()) {
            (true, true) => {
                cx.error(
                    &ip,
                    "kernel-dependency-pin",
                    format!("`{ip}` has both `version` and `revision`"),
                    Some("keep exactly one of them".to_owned()),
                );
                None
            }
            (false, false) => {
                cx.error(
                    &ip,
                    "kernel-dependency-pin",
                    format!("`{ip}` has neither `version` nor `revision`"),
                    Some("add `version = <major>` or `revision = \"<git revision>\"`".to_owned()),
                );
                None
            }
            _ => version.map(KernelPin::Version).or(revision.map(KernelPin::Revision)),
        };
        if let (Some(repo_id), Some(pin)) = (repo_id, pin) {
            out.push(KernelDependency { repo_id, pin });
        }
    }
    out
}

fn backend_general(cx: &mut Cx, general: &dyn TableLike, b: Backend, allowed: &[&str]) -> BackendGeneral {
    let path = format!("general.{b}");
    let Some(item) = general.get(b.as_str()) else {
        return BackendGeneral::default();
    };
    let Some(t) = as_table(cx, item, &path) else {
        return BackendGeneral::default();
    };
    check_keys(cx, t, &path, allowed);
    BackendGeneral {
        python_depends: python_depends(cx, t, &path, Some(b)),
        kernel_depends: if allowed.contains(&"kernel-depends") {
            kernel_depends(cx, t, &path)
        } else {
            Vec::new()
        },
    }
}

fn git_url(cx: &mut Cx, table: &dyn TableLike, key: &str) -> Option<String> {
    let item = table.get(key)?;
    let p = join_key("general", key);
    let s = as_str(cx, item, &p, "\"https://github.com/owner/repo\"")?;
    if let Err(e) = validate::check_git_url(&s) {
        cx.error(&p, "bad-git-url", e.to_string(), None);
    }
    Some(s)
}

fn general(cx: &mut Cx, root: &dyn TableLike, generation: Generation) -> General {
    let mut g = General::default();
    let Some(item) = root.get("general") else {
        cx.error(
            "general",
            "missing-key",
            "build.toml has no `[general]` section".to_owned(),
            Some(
                "add `[general]` with `name`, `version`, `edition = 6`, `license` and `backends`".to_owned(),
            ),
        );
        return g;
    };
    let Some(t) = as_table(cx, item, "general") else {
        return g;
    };
    if generation == Generation::Edition6 {
        check_keys(cx, t, "general", GENERAL_KEYS);
    } else {
        // `build-layout` gets its own message (an edition-6 key) below.
        let edition5: Vec<&str> = GENERAL_KEYS.iter().copied().filter(|k| *k != "build-layout").collect();
        check_keys_but(cx, t, "general", &edition5, &["build-layout"]);
    }

    let missing = |cx: &mut Cx, key: &str, example: &str| {
        cx.error(
            "general",
            "missing-key",
            format!("`general.{key}` is required"),
            Some(format!("add `{key} = {example}` to `[general]`")),
        );
    };

    match t.get("name") {
        None => missing(cx, "name", "\"my-kernel\""),
        Some(i) => {
            if let Some(name) = general_name(cx, i) {
                g.name = name;
            }
        }
    }
    match t.get("version") {
        None => missing(cx, "version", "1"),
        Some(i) => {
            g.version = as_uint(cx, i, "general.version", "an integer, e.g. `version = 1`").unwrap_or(0)
        }
    }
    // A present but wrong `edition` is reported by the upgrade step, which reads it first.
    if t.get("edition").is_none() && generation == Generation::Edition5 {
        missing(cx, "edition", "5");
    }
    match t.get("license") {
        // A legacy file may lack it: the upgrade step already warned (update-build takes
        // `--license`), and edition 5 requires it.
        None if generation.is_legacy() => {}
        None => missing(cx, "license", "\"Apache-2.0\""),
        Some(i) => g.license = general_license(cx, i),
    }
    g.upstream = git_url(cx, t, "upstream");
    g.source = git_url(cx, t, "source");

    match t.get("backends") {
        None => missing(cx, "backends", "[\"cuda\"]"),
        Some(i) => g.backends = general_backends(cx, i),
    }
    if t.get("backends").and_then(Item::as_array).is_some_and(|a| a.is_empty()) {
        cx.warning(
            "general.backends",
            "no-backends",
            "`general.backends` is empty, so nothing is built".to_owned(),
            Some("list the backends to build, e.g. `backends = [\"cuda\"]`".to_owned()),
        );
    }
    g.python_depends = python_depends(cx, t, "general", None);
    g.kernel_depends = kernel_depends(cx, t, "general");

    if let Some(item) = t.get("cuda") {
        if let Some(c) = as_table(cx, item, "general.cuda") {
            g.cuda = general_cuda(cx, c);
        }
    }
    g.neuron = backend_general(cx, t, Backend::Neuron, &["kernel-depends", "python-depends"]);
    g.tpu = backend_general(cx, t, Backend::Tpu, &["python-depends"]);
    g.xpu = backend_general(cx, t, Backend::Xpu, &["kernel-depends", "python-depends"]);
    if let Some(item) = t.get("build-layout") {
        if let Some(l) = build_layout(cx, item, generation) {
            g.build_layout = l;
        }
    }
    g.matrix = t.get("matrix").and_then(|i| as_str(cx, i, "general.matrix", "\"upstream-2026-08\""));
    if let Some(item) = t.get("hub") {
        if let Some(h) = as_table(cx, item, "general.hub") {
            check_keys(cx, h, "general.hub", &["repo-id", "branch"]);
            g.hub.repo_id = h.get("repo-id").and_then(|i| repo_id(cx, i, "general.hub.repo-id"));
            g.hub.branch = h.get("branch").and_then(|i| as_str(cx, i, "general.hub.branch", "\"v1\""));
        }
    }
    g
}

/// `general.name`, checked against the kernel name rule and the Hub's length bound (an error
/// says so, and the name is still taken).
fn general_name(cx: &mut Cx, i: &Item) -> Option<String> {
    let name = as_str(cx, i, "general.name", "\"my-kernel\"")?;
    if !validate::is_valid_name(&name) {
        let help = match validate::suggest_name(&name) {
            Some(s) => format!("write `name = \"{s}\"`: lowercase letters, digits and `-`, starting with a letter, not ending with `-`"),
            None => "use lowercase letters, digits and `-`, starting with a letter, not ending with `-`, at least 2 characters".to_owned(),
        };
        cx.error(
            "general.name",
            "kernel-name",
            format!("invalid kernel name `{name}`: a name must match {NAME_RULE}"),
            Some(help),
        );
    } else if name.len() > validate::MAX_NAME_LEN {
        cx.error(
            "general.name",
            "kernel-name",
            format!(
                "the kernel name is {} characters long; a Hub repository name, which it becomes, has at most {}",
                name.len(),
                validate::MAX_NAME_LEN
            ),
            Some(format!("shorten `name` to {} characters or fewer", validate::MAX_NAME_LEN)),
        );
    }
    Some(name)
}

/// `general.license` (empty when it is no string); a warning when it is no SPDX id.
fn general_license(cx: &mut Cx, i: &Item) -> String {
    let license =
        as_str(cx, i, "general.license", "a quoted license id, e.g. \"Apache-2.0\"").unwrap_or_default();
    // A warning, not an error: the Hub takes any string, and published files carry
    // `other` and lower-case ids; but a card's license field wants an SPDX id.
    if i.is_str() {
        if let Err(e) = super::license::check(&license) {
            cx.warning("general.license", "license-not-spdx", e.message, Some(e.help));
        }
    }
    license
}

/// `general.backends`, in file order, each once (a repeat is a warning, an unknown name an
/// error with the nearest known one).
fn general_backends(cx: &mut Cx, i: &Item) -> Vec<Backend> {
    let mut backends = Vec::new();
    let Some(list) = as_str_list(cx, i, "general.backends", "[\"cuda\", \"metal\"]") else {
        return backends;
    };
    let known: Vec<&str> = Backend::ALL.iter().map(|b| b.as_str()).collect();
    for (idx, s) in list {
        let p = join_index("general.backends", idx);
        match Backend::from_name(&s) {
            Some(b) if backends.contains(&b) => cx.warning(
                &p,
                "duplicate-backend",
                format!("backend `{s}` is listed twice"),
                Some("remove the second entry".to_owned()),
            ),
            Some(b) => backends.push(b),
            None => {
                let help = match suggest_backend(&s) {
                    Some(b) => format!("did you mean `{b}`? known backends: {}", known.join(", ")),
                    None => format!("known backends: {}", known.join(", ")),
                };
                cx.error(&p, "unknown-backend", format!("unknown backend `{s}`"), Some(help));
            }
        }
    }
    backends
}

/// `[general.cuda]`: the CUDA bounds and the CUDA-only dependencies.
fn general_cuda(cx: &mut Cx, c: &dyn TableLike) -> CudaGeneral {
    check_keys(cx, c, "general.cuda", &["minver", "maxver", "kernel-depends", "python-depends"]);
    let minver = version(cx, c, "general.cuda", "minver");
    let maxver = version(cx, c, "general.cuda", "maxver");
    check_bounds(cx, "general.cuda", &minver, &maxver);
    let deps = BackendGeneral {
        python_depends: python_depends(cx, c, "general.cuda", Some(Backend::Cuda)),
        kernel_depends: kernel_depends(cx, c, "general.cuda"),
    };
    CudaGeneral { minver, maxver, deps }
}

/// `general.build-layout` (an edition-6 key), or `None` when it names no layout.
fn build_layout(cx: &mut Cx, item: &Item, generation: Generation) -> Option<BuildLayout> {
    if generation != Generation::Edition6 {
        edition_6_only(cx, "general.build-layout", "`build-layout` is an edition-6 key");
    }
    let layouts: Vec<&str> = BuildLayout::ALL.iter().map(|l| l.as_str()).collect();
    let s = as_str(cx, item, "general.build-layout", "\"files\" or \"zip\"")?;
    let layout = BuildLayout::from_name(&s);
    if layout.is_none() {
        cx.error(
            "general.build-layout",
            "unknown-build-layout",
            format!("unknown build layout `{s}`"),
            Some(match did_you_mean(&s.to_lowercase(), &layouts) {
                Some(l) => format!("did you mean `{l}`? layouts: files (a directory tree, every loader), zip (Python and data files in one zip, kernels >= 0.19.0)"),
                None => "layouts: files (a directory tree, every loader), zip (Python and data files in one zip, kernels >= 0.19.0)".to_owned(),
            }),
        );
    }
    layout
}

fn stable_abi(cx: &mut Cx, t: &dyn TableLike) -> StableAbi {
    let Some(item) = t.get("stable-abi") else {
        return StableAbi::None;
    };
    let p = "torch.stable-abi";
    if item.is_str() {
        return version(cx, t, "torch", "stable-abi").map(StableAbi::All).unwrap_or_default();
    }
    let Some(tab) = item.as_table_like() else {
        wrong_type(
            cx,
            p,
            "a version string or a table of backend = version",
            describe(item),
            "\"2.10\" or { cuda = \"2.10\" }",
        );
        return StableAbi::None;
    };
    let mut map = IndexMap::new();
    let known: Vec<&str> = Backend::ALL.iter().map(|b| b.as_str()).collect();
    for (key, _) in tab.iter() {
        match Backend::from_name(key) {
            Some(b) => {
                if let Some(v) = version(cx, tab, p, key) {
                    map.insert(b, v);
                }
            }
            None => {
                let help = match suggest_backend(key) {
                    Some(b) => format!("did you mean `{b}`?"),
                    None => format!("known backends: {}", known.join(", ")),
                };
                cx.error(
                    &join_key(p, key),
                    "unknown-backend",
                    format!("unknown backend `{key}` in `[torch.stable-abi]`"),
                    Some(help),
                );
            }
        }
    }
    StableAbi::PerBackend(map)
}

fn framework(cx: &mut Cx, root: &dyn TableLike, generation: Generation) -> Framework {
    let listed = if generation == Generation::Edition6 {
        "`[torch]`, `[torch-noarch]`, `[tvm-ffi]`, `[mlx-noarch]`"
    } else {
        "`[torch]`, `[torch-noarch]`, `[tvm-ffi]`"
    };
    let mut present: Vec<&str> = FRAMEWORKS.iter().copied().filter(|f| root.contains_key(f)).collect();
    // In file order: the section written second is the one reported as the extra one.
    present.sort_by_key(|f| {
        root.get(f).and_then(|i| i.as_table()).and_then(|t| t.position()).unwrap_or(usize::MAX)
    });
    let Some(&first) = present.first() else {
        cx.error(
            "general",
            "framework-section",
            "build.toml has no framework section".to_owned(),
            Some(if generation == Generation::Edition6 {
                "add exactly one of `[torch]` (compiled Torch extension), `[torch-noarch]` (Python/Triton/Helion kernel), `[tvm-ffi]` or `[mlx-noarch]` (Python MLX kernel for Apple silicon)"
            } else {
                "add exactly one of `[torch]` (compiled Torch extension), `[torch-noarch]` (Python/Triton/Helion kernel) or `[tvm-ffi]`"
            }.to_owned()),
        );
        return Framework::TorchNoarch(TorchNoarch::default());
    };
    for extra in &present[1..] {
        cx.error(
            extra,
            "framework-section",
            format!("`[{extra}]` is a second framework section (there is already `[{first}]`)"),
            Some(format!("keep exactly one of {listed}")),
        );
    }
    let item = root.get(first).unwrap_or(&Item::None);
    let Some(t) = as_table(cx, item, first) else {
        return Framework::TorchNoarch(TorchNoarch::default());
    };
    match first {
        "mlx-noarch" => {
            if generation != Generation::Edition6 {
                edition_6_only(cx, "mlx-noarch", "`[mlx-noarch]` is an edition-6 section");
            }
            check_keys(cx, t, "mlx-noarch", MLX_NOARCH_KEYS);
            Framework::MlxNoarch(MlxNoarch { pyext: str_list(cx, t, "mlx-noarch", "pyext") })
        }
        "torch" => {
            check_keys(cx, t, "torch", TORCH_KEYS);
            let minver = version(cx, t, "torch", "minver");
            let maxver = version(cx, t, "torch", "maxver");
            check_bounds(cx, "torch", &minver, &maxver);
            Framework::Torch(TorchArch {
                include: paths(cx, t, "torch", "include").unwrap_or_default(),
                minver,
                maxver,
                pyext: str_list(cx, t, "torch", "pyext"),
                src: paths(cx, t, "torch", "src").unwrap_or_default(),
                stable_abi: stable_abi(cx, t),
                cxx_flags: str_list(cx, t, "torch", "cxx-flags").unwrap_or_default(),
            })
        }
        "torch-noarch" => {
            check_keys(cx, t, "torch-noarch", NOARCH_KEYS);
            // Upstream's parser only takes the snake-case keys, its documentation the kebab-case
            // ones; both are read here, one at a time.
            for (snake, kebab) in [("cuda_capabilities", "cuda-capabilities"), ("rocm_archs", "rocm-archs")] {
                if t.contains_key(snake) && t.contains_key(kebab) {
                    cx.error(
                        &join_key("torch-noarch", kebab),
                        "duplicate-key",
                        format!("both `{snake}` and `{kebab}` are set in `[torch-noarch]`"),
                        Some(format!("keep one of them (upstream kernel-builder reads only `{snake}`)")),
                    );
                }
            }
            let caps_key =
                if t.contains_key("cuda_capabilities") { "cuda_capabilities" } else { "cuda-capabilities" };
            let archs_key = if t.contains_key("rocm_archs") { "rocm_archs" } else { "rocm-archs" };
            Framework::TorchNoarch(TorchNoarch {
                pyext: str_list(cx, t, "torch-noarch", "pyext"),
                cuda_capabilities: capabilities(cx, t, "torch-noarch", caps_key),
                rocm_archs: rocm_archs(cx, t, "torch-noarch", archs_key),
            })
        }
        _ => {
            check_keys(cx, t, "tvm-ffi", TVM_FFI_KEYS);
            // A kernel all of whose `[kernel.*]` are Rust crates needs no binding: each crate
            // exports its TVM-FFI functions itself (the 0.19 loader accepts it too).
            let rust_only = only_rust_kernels(root);
            if !t.contains_key("src") && !rust_only {
                cx.error(
                    "tvm-ffi",
                    "missing-key",
                    "`tvm-ffi.src` is required".to_owned(),
                    Some("add `src = [\"tvm-ffi-ext/binding.cpp\"]` to `[tvm-ffi]`".to_owned()),
                );
            }
            let src = paths(cx, t, "tvm-ffi", "src");
            // The binding sources are what the module is built from: without them the compile
            // fails inside CMake. (`[torch] src` may be empty: upstream defaults it to `[]`, and
            // a `[torch]` kernel whose backends have no `[kernel.*]` builds Python only.)
            if !rust_only && t.get("src").and_then(Item::as_array).is_some_and(|a| a.is_empty()) {
                cx.error(
                    "tvm-ffi.src",
                    "no-sources",
                    "`[tvm-ffi]` has no source files (`src = []`): a tvm-ffi kernel is built from its binding sources".to_owned(),
                    Some("list the binding's sources, e.g. `src = [\"tvm-ffi-ext/binding.cpp\"]`".to_owned()),
                );
            }
            Framework::TvmFfi(TvmFfi {
                include: paths(cx, t, "tvm-ffi", "include").unwrap_or_default(),
                pyext: str_list(cx, t, "tvm-ffi", "pyext"),
                src: src.unwrap_or_default(),
                cxx_flags: str_list(cx, t, "tvm-ffi", "cxx-flags").unwrap_or_default(),
            })
        }
    }
}

/// Whether the file has `[kernel.*]` tables and every one is in a Rust `language`.
fn only_rust_kernels(root: &dyn TableLike) -> bool {
    let Some(kernels) = root.get("kernel").and_then(Item::as_table_like) else { return false };
    !kernels.is_empty()
        && kernels.iter().all(|(_, k)| {
            k.as_table_like()
                .and_then(|k| k.get("language"))
                .and_then(Item::as_str)
                .and_then(Language::from_name)
                .is_some_and(Language::is_rust)
        })
}

/// How `[kernel.<name>]` names what it compiles: `backend` (edition 5 and the upgraded older
/// forms) or `language` (edition 6).
#[derive(Clone, Copy, PartialEq, Eq)]
enum KernelForm {
    Backend,
    Language,
}

/// Edition 5: `backend`, read as the C++ language of that backend.
fn kernel_backend(cx: &mut Cx, path: &str, t: &dyn TableLike) -> Option<Language> {
    let compile: Vec<&str> = Backend::ALL.iter().filter(|b| b.can_compile()).map(|b| b.as_str()).collect();
    let backend = match t.get("backend") {
        None => {
            cx.error(
                path,
                "missing-key",
                format!("`[{path}]` has no `backend`"),
                Some(format!("add `backend = \"…\"` with one of {}", compile.join(", "))),
            );
            None
        }
        Some(i) => match as_str(cx, i, &join_key(path, "backend"), "\"cuda\"") {
            None => None,
            Some(s) => match Backend::from_name(&s) {
                Some(b) if b.can_compile() => Some(b),
                Some(b) => {
                    cx.error(&join_key(path, "backend"), "kernel-backend", format!("a `[kernel.*]` cannot target backend {b}: only {} kernels are compiled", compile.join(", ")), Some(format!("{b} ships Python code only: remove this kernel and keep `{b}` in `general.backends`")));
                    None
                }
                None => {
                    let help = match suggest_backend(&s).filter(|b| b.can_compile()) {
                        Some(b) => format!("did you mean `{b}`? kernel backends: {}", compile.join(", ")),
                        None => format!("kernel backends: {}", compile.join(", ")),
                    };
                    cx.error(
                        &join_key(path, "backend"),
                        "unknown-backend",
                        format!("unknown backend `{s}` for `[{path}]`"),
                        Some(help),
                    );
                    None
                }
            },
        },
    };
    backend.and_then(Language::cpp_for)
}

/// Edition 6: `language`. An edition-5 `backend` gets a message that names its replacement.
fn kernel_language(cx: &mut Cx, path: &str, t: &dyn TableLike) -> Option<Language> {
    let languages: Vec<&str> = Language::ALL.iter().map(|l| l.as_str()).collect();
    let Some(item) = t.get("language") else {
        match t.get("backend") {
            Some(b) => {
                let written = b.as_str().unwrap_or("…");
                let help = match Backend::from_name(written).and_then(Language::cpp_for) {
                    Some(l) => format!("replace `backend = \"{written}\"` with `language = \"{l}\"` (or `language = \"rust-…\"` for a Rust kernel)"),
                    None => format!("replace `backend` with `language = \"…\"`, one of {}", languages.join(", ")),
                };
                cx.error(
                    &join_key(path, "backend"),
                    "backend-in-edition-6",
                    format!("`[{path}]` names a `backend`, the edition-5 key; edition 6 names the kernel's `language`"),
                    Some(help),
                );
            }
            None => cx.error(
                path,
                "missing-key",
                format!("`[{path}]` has no `language`"),
                Some(format!("add `language = \"…\"` with one of {}", languages.join(", "))),
            ),
        }
        return None;
    };
    let lp = join_key(path, "language");
    let s = as_str(cx, item, &lp, "\"cpp-cuda\"")?;
    if let Some(l) = Language::from_name(&s) {
        return Some(l);
    }
    // A backend name (`cuda`) or an edition-5 habit gets the C++ language of that backend.
    let suggestion = Backend::from_name(&s)
        .or_else(|| suggest_backend(&s))
        .and_then(Language::cpp_for)
        .map(|l| l.as_str())
        .or_else(|| did_you_mean(&s, &languages));
    let help = match suggestion {
        Some(l) => format!("did you mean `{l}`? languages: {}", languages.join(", ")),
        None => format!("languages: {}", languages.join(", ")),
    };
    let message = match Backend::from_name(&s) {
        Some(b) if !b.can_compile() => format!(
            "unknown language `{s}` for `[{path}]`: {b} is a backend, and no `[kernel.*]` compiles for it"
        ),
        _ => format!("unknown language `{s}` for `[{path}]`"),
    };
    cx.error(&lp, "unknown-language", message, Some(help));
    None
}

/// One `[kernel.<name>]` of a file whose framework section is `framework`.
fn kernel(
    cx: &mut Cx,
    name: &str,
    t: &dyn TableLike,
    backends: &[Backend],
    framework: &Framework,
    form: KernelForm,
) -> Kernel {
    let path = join_key("kernel", name);
    let tvm_ffi = matches!(framework, Framework::TvmFfi(_));
    let language = match form {
        KernelForm::Backend => kernel_backend(cx, &path, t),
        KernelForm::Language => kernel_language(cx, &path, t),
    };
    let backend = language.map(Language::backend);
    // The key that names what the kernel compiles, where problems about it point.
    let naming_key = match form {
        KernelForm::Backend => "backend",
        KernelForm::Language => "language",
    };

    match form {
        KernelForm::Backend => backend_form_keys(cx, &path, t, backend),
        KernelForm::Language => language_form_keys(cx, &path, t, language),
    }
    let accepts = |key: &str| match form {
        KernelForm::Backend => {
            KERNEL_COMMON_KEYS.contains(&key)
                || KERNEL_BACKEND_KEYS
                    .iter()
                    .any(|(k, b)| *k == key && (backend.is_none() || Some(*b) == backend))
        }
        KernelForm::Language => language.is_none_or(|l| l.keys().contains(&key)),
    };

    if let Some(l) = language.filter(|l| l.is_rust()) {
        if !tvm_ffi {
            cx.error(
                &join_key(&path, "language"),
                "rust-needs-tvm-ffi",
                format!("`[{path}]` is a Rust kernel ({l}), and Rust kernels are built as `[tvm-ffi]` extensions only, but the framework section is `[{}]`", framework.section()),
                Some(format!("replace `[{}]` with `[tvm-ffi]` (and its `src`), or write the kernel in C++ (`language = \"{}\"`)", framework.section(), Language::cpp_for(l.backend()).map_or("cpp-cpu", |c| c.as_str()))),
            );
        }
    }

    let depends = cpp_depends(cx, t, &path, tvm_ffi, accepts("depends"));
    let src = paths(cx, t, &path, "src");
    check_sources(cx, t, &path, src.as_deref());

    if let Some(b) = backend {
        if !backends.contains(&b) {
            let what = match (form, language) {
                (KernelForm::Language, Some(l)) => format!("`[{path}]` ({l}) targets {b}"),
                _ => format!("`[{path}]` targets {b}"),
            };
            cx.warning(
                &join_key(&path, naming_key),
                "kernel-not-built",
                format!("{what}, which is not in `general.backends`, so it is never built"),
                Some(format!("add \"{b}\" to `general.backends`, or remove the kernel")),
            );
        }
    }

    let cargo_manifest =
        if accepts("cargo-manifest") { cargo_manifest(cx, t, &path, language) } else { None };
    let tileiras_minver =
        if accepts("tileiras-minver") { tileiras_minver(cx, t, &path, language) } else { None };
    let language = language.unwrap_or(Language::CppCpu);
    Kernel {
        language,
        backend: language.backend(),
        depends,
        src: src.unwrap_or_default(),
        include: paths(cx, t, &path, "include").unwrap_or_default(),
        cxx_flags: str_list(cx, t, &path, "cxx-flags").unwrap_or_default(),
        cuda_capabilities: if accepts("cuda-capabilities") {
            capabilities(cx, t, &path, "cuda-capabilities")
        } else {
            None
        },
        cuda_flags: if accepts("cuda-flags") {
            str_list(cx, t, &path, "cuda-flags").unwrap_or_default()
        } else {
            Vec::new()
        },
        cuda_minver: if accepts("cuda-minver") { version(cx, t, &path, "cuda-minver") } else { None },
        rocm_archs: if accepts("rocm-archs") { rocm_archs(cx, t, &path, "rocm-archs") } else { None },
        hip_flags: if accepts("hip-flags") {
            str_list(cx, t, &path, "hip-flags").unwrap_or_default()
        } else {
            Vec::new()
        },
        sycl_flags: if accepts("sycl-flags") {
            str_list(cx, t, &path, "sycl-flags").unwrap_or_default()
        } else {
            Vec::new()
        },
        cargo_manifest,
        tileiras_minver,
    }
}

/// The `depends` of the kernel at `path` (`accepted`: its form takes the key; one it does not
/// take is reported with the other keys); an unknown name is an error naming the known ones.
fn cpp_depends(
    cx: &mut Cx,
    t: &dyn TableLike,
    path: &str,
    tvm_ffi: bool,
    accepted: bool,
) -> Vec<CppDependency> {
    let mut depends = Vec::new();
    match t.get("depends") {
        _ if !accepted => {}
        None => cx.error(
            path,
            "missing-key",
            format!("`[{path}]` has no `depends`"),
            Some("add `depends = [\"torch\"]` (or `depends = []`)".to_owned()),
        ),
        Some(i) => {
            let dp = join_key(path, "depends");
            for (idx, s) in as_str_list(cx, i, &dp, "[\"torch\"]").unwrap_or_default() {
                match CppDependency::from_name(&s) {
                    Some(CppDependency::Torch) if tvm_ffi => {
                        // Upstream accepts it; a tvm-ffi build compiles against tvm-ffi only.
                        cx.warning(
                            &join_index(&dp, idx),
                            "torch-in-tvm-ffi",
                            format!("`[{path}]` depends on `torch`, but a `[tvm-ffi]` kernel is built against tvm-ffi only: it gets no torch headers or libraries"),
                            Some("remove \"torch\" from `depends` (take tensors as `tvm::ffi::TensorView`), or use `[torch]` to build a torch extension".to_owned()),
                        );
                        depends.push(CppDependency::Torch);
                    }
                    Some(d) => depends.push(d),
                    None => cx.error(
                        &join_index(&dp, idx),
                        "unknown-dependency",
                        format!("unknown C++ dependency `{s}`"),
                        Some(unknown_dependency_help(&s)),
                    ),
                }
            }
        }
    }
    depends
}

/// What to write instead of the unknown C++ dependency `s`: the nearest name, then the known
/// cutlass versions and the other dependencies.
fn unknown_dependency_help(s: &str) -> String {
    let cutlass: Vec<&str> =
        CPP_DEPENDENCY_NAMES.iter().copied().filter(|n| n.starts_with("cutlass_")).collect();
    let others: Vec<&str> =
        CPP_DEPENDENCY_NAMES.iter().copied().filter(|n| !n.starts_with("cutlass_")).collect();
    let mut help = match did_you_mean(s, &CPP_DEPENDENCY_NAMES) {
        Some(m) if m != s => format!("did you mean `{m}`? "),
        _ => String::new(),
    };
    help.push_str(&format!(
        "known cutlass versions: {}; other dependencies: {}",
        cutlass.join(", "),
        others.join(", ")
    ));
    help
}

/// A kernel must list its sources: no `src`, or `src = []`, is an error.
fn check_sources(cx: &mut Cx, t: &dyn TableLike, path: &str, src: Option<&[String]>) {
    match src {
        None if !t.contains_key("src") => cx.error(
            path,
            "no-sources",
            format!("`[{path}]` has no `src`"),
            Some("add `src = [\"…\"]` with the kernel's source files".to_owned()),
        ),
        Some(s)
            if s.is_empty() && t.get("src").is_some_and(|i| i.as_array().is_some_and(|a| a.is_empty())) =>
        {
            cx.error(
                &join_key(path, "src"),
                "no-sources",
                format!("`[{path}]` has no source files (`src = []`)"),
                Some("list the kernel's source files, or remove the kernel".to_owned()),
            )
        }
        _ => {}
    }
}

/// An edition-6 key or section in an older file.
fn edition_6_only(cx: &mut Cx, path: &str, what: &str) {
    cx.error(
        path,
        "edition-6-key",
        format!("{what}, but this file is edition 5"),
        Some("write `edition = 6` and name each kernel's `language` instead of its `backend` (`kernel-builder update-build` rewrites the file so)".to_owned()),
    );
}

/// `[kernel.*]` keys of an edition-5 kernel: the common ones plus its backend's; another
/// backend's key gets its own message.
fn backend_form_keys(cx: &mut Cx, path: &str, t: &dyn TableLike, backend: Option<Backend>) {
    let mut allowed: Vec<&str> = KERNEL_COMMON_KEYS.to_vec();
    for (k, b) in KERNEL_BACKEND_KEYS {
        if backend.is_none() || backend == Some(*b) {
            allowed.push(k);
        }
    }
    for (key, _) in t.iter() {
        if allowed.contains(&key) {
            continue;
        }
        let kp = join_key(path, key);
        if EDITION_6_KERNEL_KEYS.contains(&key) {
            edition_6_only(cx, &kp, &format!("`{key}` is an edition-6 key"));
            continue;
        }
        if let (Some(own), Some((_, other))) = (backend, KERNEL_BACKEND_KEYS.iter().find(|(k, _)| *k == key))
        {
            cx.error(&kp, "key-for-other-backend", format!("`{key}` applies to {other} kernels, but `[{path}]` has backend {own}"), Some(format!("remove `{key}`, or move it to a kernel with `backend = \"{other}\"`; {own} kernels accept: {}", allowed.join(", "))));
            continue;
        }
        let all: Vec<&str> =
            KERNEL_COMMON_KEYS.iter().chain(KERNEL_BACKEND_KEYS.iter().map(|(k, _)| k)).copied().collect();
        let help = match did_you_mean(key, &allowed).or_else(|| did_you_mean(key, &all)) {
            Some(s) => format!("did you mean `{s}`?"),
            None => format!("allowed keys: {}", allowed.join(", ")),
        };
        cx.error(&kp, "unknown-key", format!("unknown key `{key}` in `[{path}]`"), Some(help));
    }
}

/// Kernel keys that edition 5 does not have.
const EDITION_6_KERNEL_KEYS: &[&str] = &["language", "cargo-manifest", "tileiras-minver"];

/// `[kernel.*]` keys of an edition-6 kernel: `language` plus that language's keys (the 0.19.1
/// loader's sets); a key of another language names the languages that take it.
fn language_form_keys(cx: &mut Cx, path: &str, t: &dyn TableLike, language: Option<Language>) {
    let all = all_language_keys();
    let allowed: Vec<&str> = match language {
        Some(l) => std::iter::once("language").chain(l.keys().iter().copied()).collect(),
        None => all.clone(),
    };
    for (key, _) in t.iter() {
        if allowed.contains(&key) || (key == "backend" && !t.contains_key("language")) {
            continue; // a lone `backend` was reported by `kernel_language`
        }
        let kp = join_key(path, key);
        let Some(own) = language else { continue };
        if key == "backend" {
            cx.error(&kp, "backend-in-edition-6", format!("`backend` is the edition-5 key; in edition 6 `language` (here {own}) decides the backend"), Some("remove `backend`".to_owned()));
            continue;
        }
        let takers: Vec<&str> =
            Language::ALL.iter().filter(|l| l.keys().contains(&key)).map(|l| l.as_str()).collect();
        if !takers.is_empty() {
            let whose = match takers.as_slice() {
                [one] => format!("with `language = \"{one}\"`"),
                many => format!("whose `language` is one of {}", many.join(", ")),
            };
            cx.error(
                &kp,
                "key-for-other-language",
                format!(
                    "`{key}` applies to {} kernels, but `[{path}]` has language {own}",
                    takers.join(", ")
                ),
                Some(format!(
                    "remove `{key}`, or move it to a kernel {whose}; {own} kernels accept: {}",
                    allowed.join(", ")
                )),
            );
            continue;
        }
        let help = match did_you_mean(key, &allowed).or_else(|| did_you_mean(key, &all)) {
            Some(s) => format!("did you mean `{s}`?"),
            None => format!("allowed keys: {}", allowed.join(", ")),
        };
        cx.error(&kp, "unknown-key", format!("unknown key `{key}` in `[{path}]`"), Some(help));
    }
}

/// `language` and every key some language accepts, each once.
fn all_language_keys() -> Vec<&'static str> {
    let mut v = vec!["language"];
    for l in Language::ALL {
        for k in l.keys() {
            if !v.contains(k) {
                v.push(k);
            }
        }
    }
    v
}

/// `cargo-manifest` of a Rust kernel: required, a path inside the kernel directory (checked
/// on disk as `src` is).
fn cargo_manifest(cx: &mut Cx, t: &dyn TableLike, path: &str, language: Option<Language>) -> Option<String> {
    let Some(item) = t.get("cargo-manifest") else {
        if let Some(l) = language {
            cx.error(
                path,
                "missing-cargo-manifest",
                format!("`[{path}]` is a {l} kernel but has no `cargo-manifest`"),
                Some("add `cargo-manifest = \"Cargo.toml\"`: the path of the kernel crate's manifest, relative to the kernel directory".to_owned()),
            );
        }
        return None;
    };
    let p = join_key(path, "cargo-manifest");
    let s = as_str(cx, item, &p, "\"Cargo.toml\"")?;
    let result = validate::check_path_shape(&s).and_then(|()| match (cx.kernel_dir, &cx.canonical_dir) {
        (Some(dir), Some(canon)) => validate::check_path_on_disk(dir, canon, &s),
        _ => Ok(()),
    });
    if let Err(e) = result {
        cx.error(&p, e.rule, e.message, e.help);
    }
    Some(s)
}

/// `tileiras-minver` of a `rust-cutile` kernel: required, `major.minor`, at least 13.2 (the
/// first CUDA with cuTile).
fn tileiras_minver(
    cx: &mut Cx,
    t: &dyn TableLike,
    path: &str,
    language: Option<Language>,
) -> Option<Version> {
    let (maj, min) = CUTILE_MIN_CUDA;
    if !t.contains_key("tileiras-minver") {
        if language.is_some() {
            cx.error(
                path,
                "missing-key",
                format!("`[{path}]` is a rust-cutile kernel but has no `tileiras-minver`"),
                Some(format!("add `tileiras-minver = \"{maj}.{min}\"`: the lowest CUDA whose tileiras compiles the kernel ({maj}.{min} or later)")),
            );
        }
        return None;
    }
    let v = version(cx, t, path, "tileiras-minver")?;
    let p = join_key(path, "tileiras-minver");
    if v.parts.len() != 2 {
        cx.error(
            &p,
            "bad-version",
            format!("`{p}` is `{v}`; it must be `major.minor`"),
            Some(format!("write it as e.g. \"{maj}.{min}\"")),
        );
        return None;
    }
    if (v.part(0), v.part(1)) < (maj, min) {
        cx.error(
            &p,
            "tileiras-minver",
            format!("`{p}` is {v}, but cuTile needs CUDA {maj}.{min} or later"),
            Some(format!("write `tileiras-minver = \"{maj}.{min}\"` or higher")),
        );
        return None;
    }
    Some(v)
}

/// Read an (upgraded) edition-5 document into the model. The model is complete only when no
/// [`Severity::Error`] problem was reported; missing values are filled with placeholders.
pub(crate) fn read(
    cx: &mut Cx,
    root: &dyn TableLike,
    path: &Utf8Path,
    generation: Generation,
) -> BuildConfig {
    check_keys(cx, root, "", TOP_KEYS);
    let general = general(cx, root, generation);
    let framework = framework(cx, root, generation);
    if let Framework::MlxNoarch(_) = framework {
        mlx_backends(cx, root, &general.backends);
    }
    helion_zip(cx, &general);
    let form = if generation == Generation::Edition6 { KernelForm::Language } else { KernelForm::Backend };
    let mut kernels = IndexMap::new();
    if let Some(item) = root.get("kernel") {
        if let Some(t) = as_table(cx, item, "kernel") {
            for (name, k) in t.iter() {
                let kp = join_key("kernel", name);
                if let Some(kt) = as_table(cx, k, &kp) {
                    if framework.is_noarch() {
                        cx.warning(
                            &kp,
                            "kernel-in-noarch",
                            format!(
                                "`[{kp}]` is never compiled: the framework section is `[{}]`",
                                framework.section()
                            ),
                            Some("use `[torch]` to compile kernels, or remove the kernel".to_owned()),
                        );
                    }
                    let parsed = kernel(cx, name, kt, &general.backends, &framework, form);
                    kernels.insert(name.to_owned(), parsed);
                }
            }
        }
    }
    if let Framework::TvmFfi(_) = framework {
        tvm_ffi_backends_have_kernels(cx, root, &general.backends, &kernels, form);
    }
    BuildConfig { path: path.to_owned(), generation, general, framework, kernels }
}

/// A `[tvm-ffi]` kernel is compiled code only: unlike `[torch]`, whose backends without a
/// `[kernel.*]` become pure-Python `torch-<backend>` variants, a tvm-ffi backend without one
/// would build nothing a tvm-ffi loader can open. Each such backend of `general.backends` is
/// an error at its entry.
fn tvm_ffi_backends_have_kernels(
    cx: &mut Cx,
    root: &dyn TableLike,
    backends: &[Backend],
    kernels: &IndexMap<String, Kernel>,
    form: KernelForm,
) {
    let written = root.get("general").and_then(|g| g.get("backends")).and_then(Item::as_array);
    for b in backends {
        if kernels.values().any(|k| k.backend == *b) {
            continue;
        }
        // The entry as written (the model drops unknown and repeated names).
        let key = written
            .and_then(|a| a.iter().position(|v| v.as_str() == Some(b.as_str())))
            .map_or_else(|| "general.backends".to_owned(), |i| join_index("general.backends", i));
        let (message, help) = if b.can_compile() {
            (
                format!("backend `{b}` has no `[kernel.*]`; a `[tvm-ffi]` kernel has no pure-Python variant, so nothing would be built for `{b}`"),
                match (form, Language::cpp_for(*b)) {
                    (KernelForm::Language, Some(l)) => format!("add `[kernel.<name>]` with `language = \"{l}\"` (and its `depends` and `src`), or remove \"{b}\" from `general.backends`"),
                    _ => format!("add `[kernel.<name>]` with `backend = \"{b}\"` (and its `depends` and `src`), or remove \"{b}\" from `general.backends`"),
                },
            )
        } else {
            (
                format!("backend `{b}` cannot have a `[kernel.*]`, and a `[tvm-ffi]` kernel has no pure-Python variant, so nothing would be built for `{b}`"),
                format!("remove \"{b}\" from `general.backends`"),
            )
        };
        cx.error(&key, "tvm-ffi-backend-without-kernel", message, Some(help));
    }
}

/// `[mlx-noarch]` builds the `mlx-metal` variant only: every other backend of
/// `general.backends` is an error at its entry (the 0.19.1 loader refuses such a file too).
/// A Helion kernel (`helion` in a backend's `python-depends`) in the zip layout runs untuned:
/// Helion looks for its heuristic files (`_helion_aot_*.py`) with `Path.exists()` beside the
/// kernel's source, which under zipimport is inside `<id>.zip` (seen with Helion 1.4.0:
/// tests/python/test_helion_zip_layout.py). A warning, as the Helion lint's are; the build
/// refuses such a kernel once it ships heuristic files (`assemble::build_layout`).
fn helion_zip(cx: &mut Cx, general: &General) {
    let helion =
        general.backends.iter().any(|b| general.python_depends_for(*b).iter().any(|d| d == "helion"));
    if helion && general.build_layout == BuildLayout::Zip {
        cx.warning(
            "general.build-layout",
            "helion-zip-layout",
            "a Helion kernel in the zip layout runs untuned: Helion looks for its heuristic files (`_helion_aot_*.py`) beside the kernel's source on the file system, and inside the variant's zip archive it finds none; a build of the kernel with heuristic files is refused".to_owned(),
            Some("write `build-layout = \"files\"` (the default, read by every loader), or remove the line".to_owned()),
        );
    }
}

fn mlx_backends(cx: &mut Cx, root: &dyn TableLike, backends: &[Backend]) {
    let written = root.get("general").and_then(|g| g.get("backends")).and_then(Item::as_array);
    for b in backends.iter().filter(|b| **b != Backend::Metal) {
        let key = written
            .and_then(|a| a.iter().position(|v| v.as_str() == Some(b.as_str())))
            .map_or_else(|| "general.backends".to_owned(), |i| join_index("general.backends", i));
        cx.error(
            &key,
            "mlx-noarch-backend",
            format!("`[mlx-noarch]` builds for the metal backend only, but `general.backends` lists `{b}`"),
            Some(format!("remove \"{b}\" from `general.backends`; for other backends write the kernel as `[torch-noarch]`")),
        );
    }
}
