//! `symbols.json` read from a variant's Python sources, without importing them: for the trees
//! no Python imports while they are built (noarch, Helion and MLX trees, pinned-wheel and Nix
//! cells, kernels with `kernel-depends`). See [`super::symbols`] for the schema and for the
//! import-based reading that compiled `--python` builds keep.
//!
//! # Why Rust, and which parser
//!
//! A noarch Nix cell runs `kernel-builder assemble` in a sandbox with no Python at all, and a
//! native noarch build must not depend on the machine's Python, so Python's own `ast` module is
//! not always there. `rustpython-parser` (the RustPython project's parser, on crates.io, pure
//! Rust so the static builder the Nix tests use still links) parses Python 3.11 syntax with
//! source ranges; ruff's parser is not published on crates.io.
//!
//! # What is read, and how it differs from importing
//!
//! The package's `__init__.py` and its `layers` module (`layers.py` or `layers/__init__.py`,
//! when present) are parsed; their module-level statements (also inside `if`/`try` blocks, the
//! later binding winning as when the module runs) give each name a binding. `__all__` must be
//! a literal list or tuple of strings (`+=` of one is followed); any other `__all__` cannot be
//! read without running the module: [`extract`] returns [`Extracted::Dynamic`] and the build
//! warns and writes no file rather than a wrong one. A name in `__all__` is followed through
//! `from .x import y [as z]`, `from . import x`, `from .x import *` and `z = y` to its `def` or
//! `class` in the package. Then, as `symbols.py` does: functions of the package's `__all__`
//! and classes of `layers.__all__`, names starting with `_` and `layers` skipped, `doc` cleaned
//! as `inspect.getdoc` cleans it, parameters with their kinds, defaults as the `repr` of
//! literals, annotations as written in the source.
//!
//! What only importing would show is left out or differs, by design:
//! - a name bound outside the package (`from torch import relu`, a native module's function)
//!   is not described (its source is not in the tree);
//! - a decorated `def` is described by its own signature (importing shows what the decorator
//!   returned: Helion's `@helion.kernel` makes an object that `symbols.py` does not list);
//! - a class without `__init__` in the package takes the signature of its nearest base class
//!   in the package, else of `torch.nn.Module` (`(*args: Any, **kwargs: Any) -> None`) for a
//!   layer that derives from it, else none; a class without a docstring has `doc` null (an
//!   import inherits the base class's, e.g. `torch.nn.Module`'s);
//! - annotations are the source text (an import formats the evaluated object: `Tensor` written
//!   after `from torch import Tensor` is `torch.Tensor` there), except that a string annotation
//!   and every annotation of a module with `from __future__ import annotations` are shown as
//!   Python's `repr` of the string, as an import shows them (`'torch.Tensor'`; the import's
//!   string is `ast.unparse` of the annotation, the same text unless it was spaced unusually);
//! - a default that is not a literal (`torch.float32`) is its source text.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::rc::Rc;

use anyhow::Context;
use camino::{Utf8Path, Utf8PathBuf};
use rustpython_parser::ast::{self, Constant, Expr, Ranged, Stmt};
use rustpython_parser::Parse;
use serde_json::{json, Value};

/// The largest Python source read (a kernel's module is kilobytes).
const MAX_SOURCE_BYTES: u64 = 8 << 20;
/// How many re-export steps a name is followed through (a cycle of imports ends here).
const MAX_HOPS: usize = 64;

/// What [`extract`] found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Extracted {
    /// The `symbols.json` document (schema version 1), its bytes.
    Document(Vec<u8>),
    /// `__all__` of `module` is computed, not a literal: the statement's file and line.
    Dynamic { file: Utf8PathBuf, line: usize },
}

/// One parsed module of the package.
struct Module {
    /// Its dotted name below the package (`""` for `__init__.py`, `"layers"`, `"ops.sub"`).
    rel: String,
    /// Whether it is a package's `__init__.py` (relative imports resolve from it, not its parent).
    is_package: bool,
    file: Utf8PathBuf,
    source: String,
    suite: Vec<Stmt>,
    /// `from __future__ import annotations`: every annotation is a string at run time.
    string_annotations: bool,
}

/// What a module-level name is bound to, as far as the source tells.
#[derive(Clone)]
enum Binding {
    /// A `def` or `class` at index `i` of the walk's definitions of this module.
    Def(usize),
    /// `from <package module> import name`.
    From { module: String, name: String },
    /// `z = y`: another name of the same module.
    Alias(String),
    /// An import from outside the package (`torch.nn` for `from torch import nn`), dotted.
    External(String),
    /// Anything else (a computed value).
    Other,
}

/// A module's names and definitions.
struct Scope<'m> {
    bindings: HashMap<String, Binding>,
    defs: Vec<&'m Stmt>,
    /// `__all__` when it is literal; `Err(line)` for a computed one; `None` without one.
    all: Option<Result<Vec<String>, usize>>,
    /// Relative `import *` sources, in order.
    stars: Vec<String>,
}

/// Read the API of the package in `variant_dir` (package files at its top, not yet zipped),
/// named `module_name` as the loader names it.
///
/// Errors: a package file cannot be read or is not valid Python (file, line and column named),
/// or `__all__` names something the module does not define.
pub fn extract(variant_dir: &Utf8Path, module_name: &str) -> anyhow::Result<Extracted> {
    let mut loader = Loader { dir: variant_dir.to_owned(), modules: BTreeMap::new() };
    if loader.load("")?.is_none() {
        anyhow::bail!("`{variant_dir}` has no `__init__.py`, so it has no API to describe");
    }
    let functions = match loader.exported("", module_name, Want::Function)? {
        Ok(f) => f,
        Err(dynamic) => return Ok(dynamic),
    };
    let layers = if loader.load("layers")?.is_some() {
        match loader.exported("layers", module_name, Want::Class)? {
            Ok(l) => l,
            Err(dynamic) => return Ok(dynamic),
        }
    } else {
        Vec::new()
    };
    let doc = json!({
        "schema_version": 1,
        "module": module_name,
        "functions": functions,
        "layers": layers,
    });
    let mut bytes = serde_json::to_vec_pretty(&doc).context("cannot write symbols.json")?;
    bytes.push(b'\n');
    Ok(Extracted::Document(bytes))
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Want {
    Function,
    Class,
}

struct Loader {
    dir: Utf8PathBuf,
    modules: BTreeMap<String, Option<Rc<Module>>>,
}

impl Loader {
    /// Parse the package module `rel` once; `None` when no file has that name.
    fn load(&mut self, rel: &str) -> anyhow::Result<Option<Rc<Module>>> {
        if !self.modules.contains_key(rel) {
            let parts: Utf8PathBuf = rel.split('.').filter(|p| !p.is_empty()).collect();
            let (file, is_package) = {
                let as_file = self.dir.join(&parts).with_extension("py");
                let as_package = self.dir.join(&parts).join("__init__.py");
                if !rel.is_empty() && as_file.is_file() {
                    (as_file, false)
                } else if as_package.is_file() {
                    (as_package, true)
                } else {
                    self.modules.insert(rel.to_owned(), None);
                    return Ok(None);
                }
            };
            let bytes = crate::fsutil::read_bounded(&file, MAX_SOURCE_BYTES, "a Python source")?;
            let source = String::from_utf8(bytes)
                .map_err(|_| anyhow::anyhow!("`{file}` is not UTF-8; Python sources must be"))?;
            let suite = ast::Suite::parse(&source, file.as_str()).map_err(|e| {
                let (line, column) = line_column(&source, e.offset.to_usize());
                anyhow::anyhow!(
                    "`{file}` line {line}, column {column}: {} (symbols.json reads the package's Python 3.11 source); fix the syntax",
                    e.error
                )
            })?;
            let string_annotations = suite.iter().any(|s| {
                matches!(s, Stmt::ImportFrom(i) if i.module.as_ref().is_some_and(|m| m.as_str() == "__future__")
                    && i.names.iter().any(|a| a.name.as_str() == "annotations"))
            });
            let module = Module { rel: rel.to_owned(), is_package, file, source, suite, string_annotations };
            self.modules.insert(rel.to_owned(), Some(Rc::new(module)));
        }
        Ok(self.modules[rel].clone())
    }

    /// The described symbols of `__all__` of module `rel` that are `want`; `Err` with
    /// [`Extracted::Dynamic`] for a computed `__all__`.
    fn exported(
        &mut self,
        rel: &str,
        package: &str,
        want: Want,
    ) -> anyhow::Result<Result<Vec<Value>, Extracted>> {
        let Some(module) = self.load(rel)? else { return Ok(Ok(Vec::new())) };
        let scope = scope_of(&module);
        let names = match &scope.all {
            None => Vec::new(),
            Some(Ok(names)) => names.clone(),
            Some(Err(line)) => return Ok(Err(Extracted::Dynamic { file: module.file.clone(), line: *line })),
        };
        let mut out = Vec::new();
        let mut seen = HashSet::new();
        for name in names {
            if name.starts_with('_') || name == "layers" || !seen.insert(name.clone()) {
                continue;
            }
            match self.resolve(rel, &name, 0)? {
                Resolved::Def(def_rel, index) => {
                    let m = self.get(&def_rel);
                    let s = scope_of(&m);
                    let stmt = s.defs[index];
                    let is_class = matches!(stmt, Stmt::ClassDef(_));
                    if (want == Want::Class) != is_class
                        || def_rel.split('.').any(|p| p == "_private_for_testing")
                    {
                        continue;
                    }
                    out.push(self.describe(&name, &def_rel, stmt, package)?);
                }
                Resolved::Missing => anyhow::bail!(
                    "`{}` names `{name}` in `__all__`, which the module does not define; define or remove it",
                    module.file
                ),
                Resolved::Unknown => {}
            }
        }
        Ok(Ok(out))
    }

    /// A module [`Self::load`] has parsed.
    fn get(&self, rel: &str) -> Rc<Module> {
        self.modules.get(rel).cloned().flatten().expect("a resolved module was parsed")
    }

    /// Follow `name` of module `rel` to its definition.
    fn resolve(&mut self, rel: &str, name: &str, hops: usize) -> anyhow::Result<Resolved> {
        if hops > MAX_HOPS {
            return Ok(Resolved::Unknown);
        }
        let Some(module) = self.load(rel)? else { return Ok(Resolved::Unknown) };
        let scope = scope_of(&module);
        match scope.bindings.get(name).cloned() {
            Some(Binding::Def(i)) => Ok(Resolved::Def(rel.to_owned(), i)),
            Some(Binding::Alias(other)) => self.resolve(rel, &other, hops + 1),
            Some(Binding::From { module: from, name: n }) => {
                // `from .pkg import sub`: an attribute of `pkg`, else its submodule.
                if self.load(&from)?.is_none() {
                    return Ok(Resolved::Unknown);
                }
                match self.resolve(&from, &n, hops + 1)? {
                    Resolved::Missing => Ok(Resolved::Unknown),
                    r => Ok(r),
                }
            }
            Some(Binding::External(_) | Binding::Other) => Ok(Resolved::Unknown),
            None => {
                for star in scope.stars.clone() {
                    let Some(m) = self.load(&star)? else { continue };
                    let s = scope_of(&m);
                    let visible = match &s.all {
                        Some(Ok(names)) => names.iter().any(|n| n == name),
                        Some(Err(_)) => false,
                        None => !name.starts_with('_') && s.bindings.contains_key(name),
                    };
                    if visible {
                        return self.resolve(&star, name, hops + 1);
                    }
                }
                // A submodule imported elsewhere is an attribute of its package too.
                if module.is_package && self.load(&join(rel, name))?.is_some() {
                    return Ok(Resolved::Unknown);
                }
                Ok(Resolved::Missing)
            }
        }
    }

    /// The schema-version-1 entry of the `def` or `class` `stmt` of module `def_rel`.
    fn describe(&mut self, name: &str, def_rel: &str, stmt: &Stmt, package: &str) -> anyhow::Result<Value> {
        let module = self.get(def_rel);
        let dotted = if def_rel.is_empty() { package.to_owned() } else { format!("{package}.{def_rel}") };
        let src = Src { text: module.source.clone(), string_annotations: module.string_annotations };
        // A `def` and an `async def` are described alike (their AST types differ).
        let function = |qualname: &str, body: &[Stmt], args: &ast::Arguments, returns: Option<&Expr>| {
            json!({
                "name": name,
                "qualname": qualname,
                "module": dotted,
                "kind": "function",
                "doc": docstring(body),
                "signature": signature(&src, args, returns, false),
            })
        };
        match stmt {
            Stmt::FunctionDef(f) => Ok(function(f.name.as_str(), &f.body, &f.args, f.returns.as_deref())),
            Stmt::AsyncFunctionDef(f) => {
                Ok(function(f.name.as_str(), &f.body, &f.args, f.returns.as_deref()))
            }
            Stmt::ClassDef(c) => {
                let signature = self.class_signature(def_rel, c, 0)?;
                let mut attributes = serde_json::Map::new();
                for flag in ["has_backward", "can_torch_compile"] {
                    attributes.insert(
                        flag.to_owned(),
                        self.class_flag(def_rel, c, flag, 0)?.map_or(Value::Null, Value::Bool),
                    );
                }
                Ok(json!({
                    "name": name,
                    "qualname": c.name.as_str(),
                    "module": dotted,
                    "kind": "class",
                    "doc": docstring(&c.body),
                    "signature": signature,
                    "attributes": attributes,
                }))
            }
            _ => unreachable!("only def and class statements are definitions"),
        }
    }

    /// A class's signature: its `__init__` without `self`, else its first base's in the
    /// package, else `torch.nn.Module`'s for a subclass of it, else none.
    fn class_signature(
        &mut self,
        rel: &str,
        class: &ast::StmtClassDef,
        hops: usize,
    ) -> anyhow::Result<Value> {
        let m = self.get(rel);
        let src = Src { text: m.source.clone(), string_annotations: m.string_annotations };
        for s in &class.body {
            if let Stmt::FunctionDef(f) = s {
                if f.name.as_str() == "__init__" {
                    return Ok(signature(&src, &f.args, f.returns.as_deref(), true));
                }
            }
        }
        for base in &class.bases {
            match self.base(rel, base, hops)? {
                Base::Class(base_rel, index) => {
                    let m = self.get(&base_rel);
                    let Stmt::ClassDef(b) = scope_of(&m).defs[index] else { continue };
                    return self.class_signature(&base_rel, b, hops + 1);
                }
                Base::External(dotted)
                    if dotted == "torch.nn.Module" || dotted == "torch.nn.modules.module.Module" =>
                {
                    return Ok(json!({
                        "parameters": [
                            {"name": "args", "kind": "VAR_POSITIONAL", "default": null, "annotation": "Any"},
                            {"name": "kwargs", "kind": "VAR_KEYWORD", "default": null, "annotation": "Any"},
                        ],
                        "return_annotation": "None",
                    }));
                }
                _ => {}
            }
        }
        Ok(Value::Null)
    }

    /// A class attribute `flag` bound to a literal boolean in the class or its bases in the
    /// package (first base first).
    fn class_flag(
        &mut self,
        rel: &str,
        class: &ast::StmtClassDef,
        flag: &str,
        hops: usize,
    ) -> anyhow::Result<Option<bool>> {
        let mut found = None;
        let mut bound = false;
        for s in &class.body {
            let (targets, value): (Vec<&Expr>, Option<&Expr>) = match s {
                Stmt::Assign(a) => (a.targets.iter().collect(), Some(&a.value)),
                Stmt::AnnAssign(a) => (vec![&a.target], a.value.as_deref()),
                _ => continue,
            };
            if targets.iter().any(|t| matches!(t, Expr::Name(n) if n.id.as_str() == flag)) {
                bound = true;
                found = match value {
                    Some(Expr::Constant(c)) => match c.value {
                        Constant::Bool(b) => Some(b),
                        _ => None,
                    },
                    _ => None,
                };
            }
        }
        if bound || hops > MAX_HOPS {
            return Ok(found);
        }
        for base in &class.bases {
            if let Base::Class(base_rel, index) = self.base(rel, base, hops)? {
                let m = self.get(&base_rel);
                let Stmt::ClassDef(b) = scope_of(&m).defs[index] else { continue };
                if let Some(v) = self.class_flag(&base_rel, b, flag, hops + 1)? {
                    return Ok(Some(v));
                }
            }
        }
        Ok(None)
    }

    /// What a base-class expression of module `rel` names.
    fn base(&mut self, rel: &str, expr: &Expr, hops: usize) -> anyhow::Result<Base> {
        if hops > MAX_HOPS {
            return Ok(Base::Unknown);
        }
        match expr {
            Expr::Name(n) => {
                let binding = scope_of(&self.get(rel)).bindings.get(n.id.as_str()).cloned();
                match binding {
                    Some(Binding::External(dotted)) => Ok(Base::External(dotted)),
                    _ => match self.resolve(rel, n.id.as_str(), hops)? {
                        Resolved::Def(r, i) => Ok(Base::Class(r, i)),
                        _ => Ok(Base::Unknown),
                    },
                }
            }
            Expr::Attribute(a) => match self.base(rel, &a.value, hops + 1)? {
                Base::External(dotted) => Ok(Base::External(format!("{dotted}.{}", a.attr.as_str()))),
                _ => Ok(Base::Unknown),
            },
            _ => Ok(Base::Unknown),
        }
    }
}

enum Resolved {
    Def(String, usize),
    /// Bound, but not to a definition in the package's source.
    Unknown,
    /// Not bound at all.
    Missing,
}

enum Base {
    Class(String, usize),
    External(String),
    Unknown,
}

/// `parent.name`, or `name` at the top.
fn join(parent: &str, name: &str) -> String {
    match (parent.is_empty(), name.is_empty()) {
        (true, _) => name.to_owned(),
        (false, true) => parent.to_owned(),
        (false, false) => format!("{parent}.{name}"),
    }
}

/// The package module a relative import of `level` dots from `module` names (`None` above the
/// package's top: an import from outside it).
fn relative_base(module: &Module, level: usize) -> Option<String> {
    let mut parts: Vec<&str> = module.rel.split('.').filter(|p| !p.is_empty()).collect();
    if !module.is_package {
        parts.pop()?;
    }
    for _ in 1..level {
        parts.pop()?;
    }
    Some(parts.join("."))
}

/// The bindings of `module`'s top level.
fn scope_of(module: &Module) -> Scope<'_> {
    let mut scope = Scope { bindings: HashMap::new(), defs: Vec::new(), all: None, stars: Vec::new() };
    walk(module, &module.suite, &mut scope);
    scope
}

fn walk<'m>(module: &'m Module, body: &'m [Stmt], scope: &mut Scope<'m>) {
    for stmt in body {
        match stmt {
            Stmt::FunctionDef(f) => define(scope, f.name.as_str(), stmt),
            Stmt::AsyncFunctionDef(f) => define(scope, f.name.as_str(), stmt),
            Stmt::ClassDef(c) => define(scope, c.name.as_str(), stmt),
            Stmt::Import(i) => {
                for alias in &i.names {
                    let full = alias.name.as_str();
                    match &alias.asname {
                        // `import a.b as c` binds c to a.b; `import a.b` binds a.
                        Some(as_name) => {
                            scope.bindings.insert(as_name.to_string(), Binding::External(full.to_owned()))
                        }
                        None => {
                            let top = full.split('.').next().unwrap_or(full);
                            scope.bindings.insert(top.to_owned(), Binding::External(top.to_owned()))
                        }
                    };
                }
            }
            Stmt::ImportFrom(i) => {
                let level = i.level.map_or(0, |l| l.to_u32() as usize);
                let from = i.module.as_ref().map(|m| m.to_string()).unwrap_or_default();
                let base =
                    if level == 0 { None } else { relative_base(module, level).map(|b| join(&b, &from)) };
                for alias in &i.names {
                    let name = alias.name.as_str();
                    if name == "*" {
                        if let Some(b) = &base {
                            scope.stars.push(b.clone());
                        }
                        continue;
                    }
                    let bound = alias.asname.as_ref().map_or(name, |a| a.as_str()).to_owned();
                    // `from . import x` is the package's `x`, or its submodule (resolve tells).
                    let binding = match &base {
                        None => Binding::External(join(&from, name)),
                        Some(b) => Binding::From { module: b.clone(), name: name.to_owned() },
                    };
                    scope.bindings.insert(bound, binding);
                }
            }
            Stmt::Assign(a) => {
                for t in &a.targets {
                    if let Expr::Name(n) = t {
                        if n.id.as_str() == "__all__" {
                            scope.all = Some(literal_names(&a.value).ok_or_else(|| line_of(module, stmt)));
                        }
                        let b = match &*a.value {
                            Expr::Name(v) => Binding::Alias(v.id.to_string()),
                            _ => Binding::Other,
                        };
                        scope.bindings.insert(n.id.to_string(), b);
                    }
                }
            }
            Stmt::AnnAssign(a) => {
                if let Expr::Name(n) = &*a.target {
                    if n.id.as_str() == "__all__" {
                        scope.all =
                            a.value.as_deref().map(|v| literal_names(v).ok_or_else(|| line_of(module, stmt)));
                    }
                    scope.bindings.insert(n.id.to_string(), Binding::Other);
                }
            }
            Stmt::AugAssign(a) => {
                if matches!(&*a.target, Expr::Name(n) if n.id.as_str() == "__all__") {
                    scope.all = match (scope.all.take(), literal_names(&a.value), a.op) {
                        (Some(Ok(mut names)), Some(more), ast::Operator::Add) => {
                            names.extend(more);
                            Some(Ok(names))
                        }
                        (Some(Err(line)), _, _) => Some(Err(line)),
                        _ => Some(Err(line_of(module, stmt))),
                    };
                }
            }
            Stmt::If(s) => {
                walk(module, &s.body, scope);
                walk(module, &s.orelse, scope);
            }
            Stmt::Try(s) => {
                walk(module, &s.body, scope);
                for h in &s.handlers {
                    let ast::ExceptHandler::ExceptHandler(h) = h;
                    walk(module, &h.body, scope);
                }
                walk(module, &s.orelse, scope);
                walk(module, &s.finalbody, scope);
            }
            _ => {}
        }
    }
}

fn define<'m>(scope: &mut Scope<'m>, name: &str, stmt: &'m Stmt) {
    scope.defs.push(stmt);
    scope.bindings.insert(name.to_owned(), Binding::Def(scope.defs.len() - 1));
}

fn line_of(module: &Module, stmt: &Stmt) -> usize {
    line_column(&module.source, stmt.start().to_usize()).0
}

/// 1-based line and column (in characters) of byte `offset` of `source`.
fn line_column(source: &str, offset: usize) -> (usize, usize) {
    let before = &source[..source.floor_char_boundary_compat(offset)];
    let line = before.matches('\n').count() + 1;
    let column = before.rsplit('\n').next().unwrap_or("").chars().count() + 1;
    (line, column)
}

trait FloorCharBoundary {
    fn floor_char_boundary_compat(&self, i: usize) -> usize;
}

impl FloorCharBoundary for str {
    fn floor_char_boundary_compat(&self, i: usize) -> usize {
        let mut i = i.min(self.len());
        while !self.is_char_boundary(i) {
            i -= 1;
        }
        i
    }
}

/// The strings of a literal list or tuple of strings.
fn literal_names(expr: &Expr) -> Option<Vec<String>> {
    let elts = match expr {
        Expr::List(l) => &l.elts,
        Expr::Tuple(t) => &t.elts,
        _ => return None,
    };
    elts.iter()
        .map(|e| match e {
            Expr::Constant(c) => match &c.value {
                Constant::Str(s) => Some(s.clone()),
                _ => None,
            },
            _ => None,
        })
        .collect()
}

/// The docstring of a body, cleaned as `inspect.cleandoc` does.
fn docstring(body: &[Stmt]) -> Value {
    match body.first() {
        Some(Stmt::Expr(e)) => match &*e.value {
            Expr::Constant(c) => match &c.value {
                Constant::Str(s) => Value::String(cleandoc(s)),
                _ => Value::Null,
            },
            _ => Value::Null,
        },
        _ => Value::Null,
    }
}

/// `inspect.cleandoc`: tabs expanded to 8 columns, the first line stripped of leading
/// whitespace, the common indentation of the other lines removed, blank lines removed from
/// both ends.
pub fn cleandoc(doc: &str) -> String {
    let expanded = expand_tabs(doc);
    // str.splitlines also splits on \r, \x0b, \x0c, \x1c-\x1e, \x85, \u2028, \u2029.
    let mut lines: Vec<&str> = split_lines(&expanded);
    let margin = lines
        .iter()
        .skip(1)
        .filter_map(|l| {
            let content = l.trim_start_matches(' ');
            (!content.is_empty()).then(|| l.len() - content.len())
        })
        .min();
    let mut out: Vec<String> = Vec::with_capacity(lines.len());
    if let Some(first) = lines.first() {
        out.push(first.trim_start_matches(' ').to_owned());
    }
    for l in lines.drain(..).skip(1) {
        out.push(match margin {
            Some(m) => l.get(m..).unwrap_or("").to_owned(),
            None => l.to_owned(),
        });
    }
    while out.last().is_some_and(|l| l.is_empty()) {
        out.pop();
    }
    while out.first().is_some_and(|l| l.is_empty()) {
        out.remove(0);
    }
    out.join("\n")
}

/// `str.expandtabs()` with Python's default tab size 8.
fn expand_tabs(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    let mut column = 0;
    for c in s.chars() {
        match c {
            '\t' => {
                let n = 8 - column % 8;
                out.extend(std::iter::repeat_n(' ', n));
                column += n;
            }
            '\n' | '\r' => {
                out.push(c);
                column = 0;
            }
            _ => {
                out.push(c);
                column += 1;
            }
        }
    }
    out
}

/// `str.splitlines()`.
fn split_lines(s: &str) -> Vec<&str> {
    let mut lines = Vec::new();
    let mut start = 0;
    let mut chars = s.char_indices().peekable();
    while let Some((i, c)) = chars.next() {
        let is_break = matches!(
            c,
            '\n' | '\r' | '\x0b' | '\x0c' | '\x1c' | '\x1d' | '\x1e' | '\u{85}' | '\u{2028}' | '\u{2029}'
        );
        if is_break {
            lines.push(&s[start..i]);
            let mut end = i + c.len_utf8();
            if c == '\r' {
                if let Some((_, '\n')) = chars.peek() {
                    chars.next();
                    end += 1;
                }
            }
            start = end;
        }
    }
    if start < s.len() {
        lines.push(&s[start..]);
    }
    lines
}

/// A module's source text, and how its annotations are kept at run time.
struct Src {
    text: String,
    string_annotations: bool,
}

/// The `signature` entry of a `def` (`skip_self`: of a class's `__init__`, without its first
/// parameter, as `inspect.signature` of the class shows it).
fn signature(src: &Src, args: &ast::Arguments, returns: Option<&Expr>, skip_self: bool) -> Value {
    let mut params = Vec::new();
    let param = |name: &str, kind: &str, default: Option<&Expr>, annotation: Option<&Expr>| {
        json!({
            "name": name,
            "kind": kind,
            "default": default.map(|d| default_repr(&src.text, d)),
            "annotation": annotation.map(|a| annotation_text(src, a)),
        })
    };
    // In the order `inspect.signature` lists them: positional-only, positional-or-keyword,
    // *args, keyword-only, **kwargs.
    let with_defaults = |params: &mut Vec<Value>, list: &[ast::ArgWithDefault], kind: &str| {
        for a in list {
            params.push(param(a.def.arg.as_str(), kind, a.default.as_deref(), a.def.annotation.as_deref()));
        }
    };
    with_defaults(&mut params, &args.posonlyargs, "POSITIONAL_ONLY");
    with_defaults(&mut params, &args.args, "POSITIONAL_OR_KEYWORD");
    if let Some(a) = &args.vararg {
        params.push(param(a.arg.as_str(), "VAR_POSITIONAL", None, a.annotation.as_deref()));
    }
    with_defaults(&mut params, &args.kwonlyargs, "KEYWORD_ONLY");
    if let Some(a) = &args.kwarg {
        params.push(param(a.arg.as_str(), "VAR_KEYWORD", None, a.annotation.as_deref()));
    }
    if skip_self && !params.is_empty() {
        params.remove(0);
    }
    json!({"parameters": params, "return_annotation": returns.map(|r| annotation_text(src, r))})
}

/// An annotation as written (whitespace runs across lines joined to one space); a string
/// annotation, and every annotation under `from __future__ import annotations`, as Python's
/// `repr` of the string, as `inspect` formats it after an import.
fn annotation_text(src: &Src, expr: &Expr) -> String {
    if let Expr::Constant(c) = expr {
        if let Constant::Str(s) = &c.value {
            return py_str_repr(s);
        }
    }
    let text = source_text(&src.text, expr);
    if src.string_annotations {
        py_str_repr(&text)
    } else {
        text
    }
}

fn source_text(src: &str, expr: &Expr) -> String {
    let text = &src[expr.range()];
    if text.contains('\n') {
        text.split_whitespace().collect::<Vec<_>>().join(" ")
    } else {
        text.to_owned()
    }
}

/// A default's `repr` when it is a literal (constants, `-` of a number, tuples, lists, sets and
/// dicts of literals), else its source text.
fn default_repr(src: &str, expr: &Expr) -> String {
    literal_repr(expr).unwrap_or_else(|| source_text(src, expr))
}

fn literal_repr(expr: &Expr) -> Option<String> {
    let seq = |elts: &[Expr]| elts.iter().map(literal_repr).collect::<Option<Vec<_>>>();
    match expr {
        Expr::Constant(c) => Some(constant_repr(&c.value)),
        Expr::UnaryOp(u) if u.op == ast::UnaryOp::USub => match &*u.operand {
            Expr::Constant(c) => match &c.value {
                Constant::Int(i) => Some(format!("{}", -i.clone())),
                Constant::Float(f) => Some(py_float_repr(-f)),
                Constant::Complex { real, imag } => Some(complex_repr(-real, -imag)),
                _ => None,
            },
            _ => None,
        },
        Expr::Tuple(t) => {
            let items = seq(&t.elts)?;
            Some(if items.len() == 1 {
                format!("({},)", items[0])
            } else {
                format!("({})", items.join(", "))
            })
        }
        Expr::List(l) => Some(format!("[{}]", seq(&l.elts)?.join(", "))),
        Expr::Dict(d) => {
            let mut items = Vec::new();
            for (k, v) in d.keys.iter().zip(&d.values) {
                items.push(format!("{}: {}", literal_repr(k.as_ref()?)?, literal_repr(v)?));
            }
            Some(format!("{{{}}}", items.join(", ")))
        }
        _ => None,
    }
}

fn constant_repr(c: &Constant) -> String {
    match c {
        Constant::None => "None".to_owned(),
        Constant::Bool(true) => "True".to_owned(),
        Constant::Bool(false) => "False".to_owned(),
        Constant::Str(s) => py_str_repr(s),
        Constant::Bytes(b) => py_bytes_repr(b),
        Constant::Int(i) => i.to_string(),
        Constant::Float(f) => py_float_repr(*f),
        Constant::Complex { real, imag } => complex_repr(*real, *imag),
        Constant::Ellipsis => "Ellipsis".to_owned(),
        Constant::Tuple(items) => {
            let items: Vec<String> = items.iter().map(constant_repr).collect();
            if items.len() == 1 {
                format!("({},)", items[0])
            } else {
                format!("({})", items.join(", "))
            }
        }
    }
}

/// `repr(complex)` of a literal (`1j`, `-2j`; a literal's real part is 0 unless negated).
fn complex_repr(real: f64, imag: f64) -> String {
    let part = |f: f64| {
        let r = py_float_repr(f);
        r.strip_suffix(".0").map(str::to_owned).unwrap_or(r)
    };
    if real == 0.0 && real.is_sign_positive() {
        format!("{}j", part(imag))
    } else {
        let i = part(imag);
        let sign = if i.starts_with('-') { "" } else { "+" };
        format!("({}{sign}{i}j)", part(real))
    }
}

/// Python's `repr(float)`: the shortest digits that round-trip, positional for exponents
/// -4 ≤ e < 16, else scientific with a signed, at least two-digit exponent.
pub fn py_float_repr(f: f64) -> String {
    if f.is_nan() {
        return "nan".to_owned();
    }
    if f.is_infinite() {
        return if f > 0.0 { "inf" } else { "-inf" }.to_owned();
    }
    // Rust's `{:e}` gives the shortest round-trip digits: `-1.2345e-7`.
    let sci = format!("{f:e}");
    let (mantissa, exp) = sci.split_once('e').expect("`{:e}` has an exponent");
    let exp: i32 = exp.parse().expect("`{:e}`'s exponent is an integer");
    let (sign, mantissa) = mantissa.strip_prefix('-').map_or(("", mantissa), |m| ("-", m));
    let digits: String = mantissa.chars().filter(|c| *c != '.').collect();
    if (-4..16).contains(&exp) {
        let point = exp + 1; // digits before the decimal point
        let body = if point <= 0 {
            format!("0.{}{digits}", "0".repeat((-point) as usize))
        } else if (point as usize) >= digits.len() {
            format!("{digits}{}.0", "0".repeat(point as usize - digits.len()))
        } else {
            format!("{}.{}", &digits[..point as usize], &digits[point as usize..])
        };
        format!("{sign}{body}")
    } else {
        let m = if digits.len() == 1 { digits.clone() } else { format!("{}.{}", &digits[..1], &digits[1..]) };
        let esign = if exp < 0 { '-' } else { '+' };
        format!("{sign}{m}e{esign}{:02}", exp.abs())
    }
}

/// Python's `repr(str)`: single quotes unless the text has `'` and no `"`; backslash, the
/// quote, `\n`, `\r`, `\t` escaped; other control characters as `\xNN`/`\uNNNN`.
pub fn py_str_repr(s: &str) -> String {
    let quote = if s.contains('\'') && !s.contains('"') { '"' } else { '\'' };
    let mut out = String::with_capacity(s.len() + 2);
    out.push(quote);
    for c in s.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if c == quote => {
                out.push('\\');
                out.push(c);
            }
            c if (c as u32) < 0x20 || c as u32 == 0x7f || (0x80..0xa0).contains(&(c as u32)) => {
                out.push_str(&format!("\\x{:02x}", c as u32));
            }
            c if matches!(c, '\u{2028}' | '\u{2029}' | '\u{ad}' | '\u{feff}') => {
                out.push_str(&format!("\\u{:04x}", c as u32));
            }
            c => out.push(c),
        }
    }
    out.push(quote);
    out
}

/// Python's `repr(bytes)`.
fn py_bytes_repr(b: &[u8]) -> String {
    let quote = if b.contains(&b'\'') && !b.contains(&b'"') { b'"' } else { b'\'' };
    let mut out = String::from("b");
    out.push(quote as char);
    for &c in b {
        match c {
            b'\\' => out.push_str("\\\\"),
            b'\n' => out.push_str("\\n"),
            b'\r' => out.push_str("\\r"),
            b'\t' => out.push_str("\\t"),
            c if c == quote => {
                out.push('\\');
                out.push(c as char);
            }
            0x20..=0x7e => out.push(c as char),
            c => out.push_str(&format!("\\x{c:02x}")),
        }
    }
    out.push(quote as char);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn package(files: &[(&str, &str)]) -> tempfile::TempDir {
        let dir = tempfile::tempdir().unwrap();
        for (name, text) in files {
            let path = dir.path().join(name);
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            std::fs::write(path, text).unwrap();
        }
        dir
    }

    fn extract_json(dir: &tempfile::TempDir) -> Value {
        let path = Utf8Path::from_path(dir.path()).unwrap();
        match extract(path, "_k_abc").unwrap() {
            Extracted::Document(bytes) => serde_json::from_slice(&bytes).unwrap(),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn float_repr_is_pythons() {
        let cases = [
            (1.0, "1.0"),
            (0.1, "0.1"),
            (1e-5, "1e-05"),
            (0.0001, "0.0001"),
            (1e16, "1e+16"),
            (1234567890123456.0, "1234567890123456.0"),
            (1.5e300, "1.5e+300"),
            (-2.5, "-2.5"),
            (-0.0, "-0.0"),
            (123.456, "123.456"),
            (f64::INFINITY, "inf"),
        ];
        for (f, want) in cases {
            assert_eq!(py_float_repr(f), want, "{f}");
        }
    }

    #[test]
    fn str_repr_is_pythons() {
        assert_eq!(py_str_repr("abc"), "'abc'");
        assert_eq!(py_str_repr("it's"), "\"it's\"");
        assert_eq!(py_str_repr("'\""), "'\\'\"'");
        assert_eq!(py_str_repr("a\\b\n\t\u{1}é"), "'a\\\\b\\n\\t\\x01é'");
        assert_eq!(py_bytes_repr(b"a'\xff"), "b\"a'\\xff\"");
    }

    #[test]
    fn cleandoc_is_inspects() {
        assert_eq!(cleandoc("  First.\n\n    Body\n      indented\n    "), "First.\n\nBody\n  indented");
        assert_eq!(cleandoc("\n    Only body.\n"), "Only body.");
        assert_eq!(cleandoc("One line"), "One line");
        assert_eq!(cleandoc("A\n\tTabbed"), "A\nTabbed");
    }

    #[test]
    fn functions_and_layers_through_re_exports() {
        let dir = package(&[
            (
                "__init__.py",
                "from typing import Optional\nimport torch\nfrom ._ops import ops\nfrom .impl import relu as relu_, gelu\nfrom . import layers\n\
                 from .star import *\nrelu = relu_\nif torch.cuda.is_available():\n    from torch import silu\n\
                 __all__ = [\"relu\", \"gelu\", \"layers\", \"silu\", \"scale\", \"_hidden\", \"ops\", \"relu\"]\n__all__ += (\"Act\",)\n",
            ),
            ("_ops.py", "import torch\nops = torch.ops._k_abc\n"),
            (
                "impl.py",
                "import torch\n\ndef relu(x: torch.Tensor, out: Optional[torch.Tensor] = None) -> torch.Tensor:\n    \"\"\"`max(x, 0)`.\n\n    Into `out`.\n    \"\"\"\n\n\
                 async def gelu(x, /, approx: \"str\" = 'tanh', *rest: int, eps=-1e-5, dims=(1,), opts={'a': [1, 2.0]}, dtype=torch.float32, **kw) -> None:\n    pass\n",
            ),
            ("star.py", "__all__ = ['scale', 'Act']\ndef scale(x, factor: float = 2):\n    return x\nclass Act:\n    pass\n"),
            (
                "layers/__init__.py",
                "from torch import nn\nfrom .base import Base\n\nclass ReLU(nn.Module):\n    \"\"\"A layer.\"\"\"\n    has_backward = False\n    can_torch_compile: bool = True\n\n    def forward(self, x):\n        return x\n\n\
                 class Mine(Base):\n    has_backward = 1\n\ndef helper():\n    pass\n\n__all__ = ['ReLU', 'Mine', 'helper']\n",
            ),
            ("layers/base.py", "class Base:\n    can_torch_compile = True\n    def __init__(self, size: int, *, bias=True) -> None:\n        pass\n"),
        ]);
        let got = extract_json(&dir);
        let param = |name: &str, kind: &str, default: Option<&str>, annotation: Option<&str>| json!({"name": name, "kind": kind, "default": default, "annotation": annotation});
        assert_eq!(
            got,
            json!({
                "schema_version": 1,
                "module": "_k_abc",
                "functions": [
                    {
                        "name": "relu", "qualname": "relu", "module": "_k_abc.impl", "kind": "function",
                        "doc": "`max(x, 0)`.\n\nInto `out`.",
                        "signature": {"parameters": [
                            param("x", "POSITIONAL_OR_KEYWORD", None, Some("torch.Tensor")),
                            param("out", "POSITIONAL_OR_KEYWORD", Some("None"), Some("Optional[torch.Tensor]")),
                        ], "return_annotation": "torch.Tensor"},
                    },
                    {
                        "name": "gelu", "qualname": "gelu", "module": "_k_abc.impl", "kind": "function", "doc": null,
                        "signature": {"parameters": [
                            param("x", "POSITIONAL_ONLY", None, None),
                            param("approx", "POSITIONAL_OR_KEYWORD", Some("'tanh'"), Some("'str'")),
                            param("rest", "VAR_POSITIONAL", None, Some("int")),
                            param("eps", "KEYWORD_ONLY", Some("-1e-05"), None),
                            param("dims", "KEYWORD_ONLY", Some("(1,)"), None),
                            param("opts", "KEYWORD_ONLY", Some("{'a': [1, 2.0]}"), None),
                            param("dtype", "KEYWORD_ONLY", Some("torch.float32"), None),
                            param("kw", "VAR_KEYWORD", None, None),
                        ], "return_annotation": "None"},
                    },
                    {
                        "name": "scale", "qualname": "scale", "module": "_k_abc.star", "kind": "function", "doc": null,
                        "signature": {"parameters": [
                            param("x", "POSITIONAL_OR_KEYWORD", None, None),
                            param("factor", "POSITIONAL_OR_KEYWORD", Some("2"), Some("float")),
                        ], "return_annotation": null},
                    },
                ],
                "layers": [
                    {
                        "name": "ReLU", "qualname": "ReLU", "module": "_k_abc.layers", "kind": "class", "doc": "A layer.",
                        "signature": {"parameters": [
                            param("args", "VAR_POSITIONAL", None, Some("Any")),
                            param("kwargs", "VAR_KEYWORD", None, Some("Any")),
                        ], "return_annotation": "None"},
                        "attributes": {"has_backward": false, "can_torch_compile": true},
                    },
                    {
                        "name": "Mine", "qualname": "Mine", "module": "_k_abc.layers", "kind": "class", "doc": null,
                        "signature": {"parameters": [
                            param("size", "POSITIONAL_OR_KEYWORD", None, Some("int")),
                            param("bias", "KEYWORD_ONLY", Some("True"), None),
                        ], "return_annotation": "None"},
                        // `has_backward = 1` is not a boolean; `can_torch_compile` is Base's.
                        "attributes": {"has_backward": null, "can_torch_compile": true},
                    },
                ],
            })
        );
    }

    #[test]
    fn the_same_bytes_every_time() {
        let dir = package(&[("__init__.py", "def f(a=1.5):\n    'Doc.'\n__all__ = ['f']\n")]);
        let path = Utf8Path::from_path(dir.path()).unwrap();
        let first = extract(path, "_k").unwrap();
        assert_eq!(first, extract(path, "_k").unwrap());
        let Extracted::Document(bytes) = first else { panic!() };
        assert_eq!(
            String::from_utf8(bytes).unwrap(),
            "{\n  \"schema_version\": 1,\n  \"module\": \"_k\",\n  \"functions\": [\n    {\n      \"name\": \"f\",\n      \"qualname\": \"f\",\n      \"module\": \"_k\",\n      \"kind\": \"function\",\n      \"doc\": \"Doc.\",\n      \"signature\": {\n        \"parameters\": [\n          {\n            \"name\": \"a\",\n            \"kind\": \"POSITIONAL_OR_KEYWORD\",\n            \"default\": \"1.5\",\n            \"annotation\": null\n          }\n        ],\n        \"return_annotation\": null\n      }\n    }\n  ],\n  \"layers\": []\n}\n"
        );
    }

    #[test]
    fn a_computed_all_is_named_not_guessed() {
        let dir = package(&[
            ("__init__.py", "from .x import f\n\n__all__ = [n for n in dir() if not n.startswith('_')]\n"),
            ("x.py", "def f(): pass\n"),
        ]);
        let path = Utf8Path::from_path(dir.path()).unwrap();
        assert_eq!(
            extract(path, "_k").unwrap(),
            Extracted::Dynamic { file: path.join("__init__.py"), line: 3 }
        );
    }

    #[test]
    fn bad_sources_are_named() {
        let dir = package(&[("__init__.py", "def f(:\n    pass\n")]);
        let path = Utf8Path::from_path(dir.path()).unwrap();
        let err = format!("{:#}", extract(path, "_k").unwrap_err());
        assert!(err.starts_with(&format!("`{path}/__init__.py` line 1, column 7: ")), "{err}");
        assert!(
            err.ends_with("(symbols.json reads the package's Python 3.11 source); fix the syntax"),
            "{err}"
        );

        let dir = package(&[("__init__.py", "__all__ = ['missing']\n")]);
        let path = Utf8Path::from_path(dir.path()).unwrap();
        assert_eq!(
            format!("{:#}", extract(path, "_k").unwrap_err()),
            format!("`{path}/__init__.py` names `missing` in `__all__`, which the module does not define; define or remove it")
        );

        // No __all__: nothing exported, as an import shows.
        let dir = package(&[("__init__.py", "def f(): pass\n")]);
        assert_eq!(
            extract_json(&dir),
            json!({"schema_version": 1, "module": "_k_abc", "functions": [], "layers": []})
        );
    }
}
