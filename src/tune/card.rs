//! The "Tuned for" section of a Helion kernel's card (the Hub `README.md`): which GPUs the
//! shipped heuristics were tuned on, with what software, on which shapes, and the figures of the
//! last tune, read from `tuning/<kind>_<compute>/tune.json` (format 1, written by
//! [`super::TuneReport`]), plus, from Helion's lookup ([`super::lookup`]), the GPUs that use
//! each heuristic.
//!
//! The section sits between [`BEGIN`] and [`END`] marker lines; [`with_tuning`] replaces a
//! section already in the card (so rendering is idempotent) or appends one.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;

use anyhow::Context;
use camino::Utf8Path;
use serde::Deserialize;

use super::lookup;
use crate::config::{BuildConfig, Framework};

/// The line that opens the generated section.
pub const BEGIN: &str =
    "<!-- kernel-builder: tuned-for (generated from tuning/*/tune.json; edits here are replaced) -->";
/// The line that closes it.
pub const END: &str = "<!-- /kernel-builder: tuned-for -->";

/// The part of `tune.json` the card shows (other fields are ignored).
#[derive(Debug, Deserialize)]
pub struct TuneRecord {
    /// Must be 1.
    pub format: u32,
    pub command: String,
    /// What `tune` probed (the same struct it wrote).
    pub environment: super::Environment,
    pub effort: String,
    pub goal: String,
    pub threshold: f64,
    pub max_configs: Option<u32>,
    pub shapes: Vec<RecordShape>,
    pub geomean_speedup: Option<f64>,
}

/// One row of `shapes` of `tune.json` (times in ms).
#[derive(Debug, Deserialize)]
pub struct RecordShape {
    pub kernel: String,
    pub shape: String,
    pub default_ms: Option<f64>,
    pub tuned_ms: Option<f64>,
    pub speedup: Option<f64>,
}

/// Read `kernel_dir/tuning/<kind>_<compute>/tune.json` (`None`: absent).
///
/// # Errors
/// It cannot be read, is not JSON of format 1, or names another kind or compute; the error names
/// the file.
pub fn read_record(kernel_dir: &Utf8Path, kind: &str, compute: &str) -> anyhow::Result<Option<TuneRecord>> {
    let path = kernel_dir.join("tuning").join(format!("{kind}_{compute}")).join("tune.json");
    if !path.is_file() {
        return Ok(None);
    }
    let text = crate::fsutil::read_to_string(&path)?;
    let rec: TuneRecord = serde_json::from_str(&text)
        .with_context(|| format!("`{path}` is not a tune record (`kernel-builder tune` writes it)"))?;
    anyhow::ensure!(
        rec.format == 1,
        "`{path}` has format {}; this kernel-builder reads format 1",
        rec.format
    );
    anyhow::ensure!(
        rec.environment.device_kind == kind && rec.environment.compute == compute,
        "`{path}` records a tune on {} {}, not {kind} {compute}: re-run `kernel-builder tune` there",
        rec.environment.device_kind,
        rec.environment.compute
    );
    Ok(Some(rec))
}

/// The section for the kernel in `kernel_dir` (markers included, ending in a newline), or `None`
/// for a kernel that does not depend on helion. A Helion kernel with no heuristic says it is not
/// pre-tuned.
///
/// # Errors
/// A package file or a tune record cannot be read (see [`read_record`]).
pub fn section(kernel_dir: &Utf8Path, config: &BuildConfig) -> anyhow::Result<Option<String>> {
    if !super::lint::is_helion(config) {
        return Ok(None);
    }
    let pkg = lookup::scan(kernel_dir, &config.general.python_name())?;
    let declared = match &config.framework {
        Framework::TorchNoarch(t) => t.cuda_capabilities.as_deref(),
        _ => None,
    };
    // (kind, compute) → shipped file names; (dir, stem, kind) → computes, for the lookup.
    let mut by_target: BTreeMap<(String, String), Vec<&lookup::HeuristicFile>> = BTreeMap::new();
    let mut shipped: BTreeMap<(String, String, String), BTreeSet<String>> = BTreeMap::new();
    for h in &pkg.heuristics {
        let (Some(stem), Some((kind, compute))) = (&h.stem, &h.kind_compute) else { continue };
        if !lookup::compute_is_reported(kind, compute) {
            continue;
        }
        by_target.entry((kind.clone(), compute.clone())).or_default().push(h);
        shipped.entry((h.dir.to_string(), stem.clone(), kind.clone())).or_default().insert(compute.clone());
    }

    let mut s = format!("{BEGIN}\n## Tuned for\n\n");
    if by_target.is_empty() {
        s.push_str(
            "Not pre-tuned: no Helion heuristic is shipped, so on every GPU Helion runs its default config for each \
             kernel (correct, not tuned). `kernel-builder tune` on a GPU makes one.\n",
        );
        s.push_str(END);
        s.push('\n');
        return Ok(Some(s));
    }
    s.push_str(
        "Helion picks a heuristic by the GPU's exact compute capability, then falls back to older ones (CUDA sm100 \
         down to sm70, ROCm gfx950 down to gfx900); a GPU that reaches none runs Helion's default config.\n\n",
    );
    s.push_str("| GPU | compute | Helion uses it on | driver | runtime | torch | triton | helion | tuned (UTC) | shapes tuned | last tune: geomean over Helion's default config |\n");
    s.push_str("| --- | --- | --- | --- | --- | --- | --- | --- | --- | ---: | ---: |\n");
    let mut details = String::new();
    for ((kind, compute), files) in &by_target {
        // The devices that use this compute's files (any stem; usually one).
        let mut used: Vec<String> = Vec::new();
        for ((_, _, k), set) in &shipped {
            if k == kind && set.contains(compute) {
                let picking =
                    lookup::devices_picking(kind, set, if kind == "cuda" { declared } else { None });
                for d in &picking[compute] {
                    if !used.contains(d) {
                        used.push(d.clone());
                    }
                }
            }
        }
        let used = if used.is_empty() { "none".to_owned() } else { used.join(", ") };
        match read_record(kernel_dir, kind, compute)? {
            None => {
                let _ = writeln!(
                    s,
                    "| unknown (no `tuning/{kind}_{compute}/tune.json`) | {kind} {compute} | {used} | | | | | | | | |"
                );
            }
            Some(r) => {
                let e = &r.environment;
                let geo = r.geomean_speedup.map_or("-".to_owned(), |g| format!("{g:.2}x"));
                // The last tune's shapes only (a slice may time two of many), so say how many.
                let n = r.shapes.len();
                let geo_of_n = format!("{geo} ({n} shape{})", if n == 1 { "" } else { "s" });
                let tuned: Vec<&String> = files.iter().flat_map(|h| &h.tuned_shapes).collect();
                let n_tuned = if tuned.is_empty() { n } else { tuned.len() };
                let _ = writeln!(
                    s,
                    "| {} | {kind} {compute} | {used} | {} | {} | {} | {} | {} | {} | {n_tuned} | {geo_of_n} |",
                    e.device_name, e.driver, e.cuda, e.torch, e.triton, e.helion, e.utc,
                );
                let _ = write!(details, "\n### {} ({kind} {compute})\n\n", e.device_name);
                for h in files {
                    if h.tuned_shapes.is_empty() {
                        let _ = writeln!(details, "`{}` (its header lists no shapes).", h.name);
                    } else {
                        let _ =
                            writeln!(details, "`{}`, tuned on {} shapes:\n", h.name, h.tuned_shapes.len());
                        for shape in &h.tuned_shapes {
                            let _ = writeln!(details, "- {shape}");
                        }
                        if !h.also_measured.is_empty() {
                            let n = h.also_measured.len();
                            let (shapes, them) = if n == 1 { ("shape", "it") } else { ("shapes", "them") };
                            let _ = writeln!(
                                details,
                                "\nEvery config was also timed on {n} more {shapes} that no search ran on; \
                                 the decision trees learn from {them} too:\n",
                            );
                            for shape in &h.also_measured {
                                let _ = writeln!(details, "- {shape}");
                            }
                        }
                    }
                    details.push('\n');
                }
                let _ = write!(
                    details,
                    "The last tune, {} UTC (`{}`; effort {}, goal {} <= {}{}), timed {} shapes with Helion's default \
                     config and with the config the heuristic picks:\n\n",
                    e.utc,
                    r.command,
                    r.effort,
                    r.goal,
                    r.threshold,
                    r.max_configs.map_or(String::new(), |n| format!(", at most {n} configs per kernel")),
                    r.shapes.len(),
                );
                details.push_str("| kernel | shape | default config (ms) | tuned (ms) | speedup |\n");
                details.push_str("| --- | --- | ---: | ---: | ---: |\n");
                let ms = |v: Option<f64>| v.map_or("failed".to_owned(), |v| format!("{v:.4}"));
                for row in &r.shapes {
                    let _ = writeln!(
                        details,
                        "| {} | {} | {} | {} | {} |",
                        row.kernel,
                        row.shape,
                        ms(row.default_ms),
                        ms(row.tuned_ms),
                        row.speedup.map_or("-".to_owned(), |v| format!("{v:.2}x"))
                    );
                }
                let _ = writeln!(details, "| geomean | | | | {geo} |");
            }
        }
    }
    s.push_str(&details);
    s.push_str(END);
    s.push('\n');
    Ok(Some(s))
}

/// `card` with `section` in place of the one between [`BEGIN`] and [`END`], or appended after a
/// blank line when the card has none.
pub fn splice(card: &str, section: &str) -> String {
    splice_between(card, BEGIN, END, section)
}

/// `card` with `section` in place of the one between the marker lines `begin` and `end`, or
/// appended after a blank line when the card has none.
fn splice_between(card: &str, begin: &str, end: &str, section: &str) -> String {
    if let Some(b) = card.find(begin) {
        if let Some(e) = card[b..].find(end) {
            let mut after = &card[b + e + end.len()..];
            after = after.strip_prefix('\n').unwrap_or(after);
            return format!("{}{section}{after}", &card[..b]);
        }
    }
    let mut out = card.trim_end_matches('\n').to_owned();
    out.push_str("\n\n");
    out.push_str(section);
    out
}

/// The card text to publish for the kernel in `kernel_dir`: `card` with the "Tuned for"
/// section spliced in ([`splice`]) for a Helion kernel, unchanged otherwise.
///
/// # Errors
/// See [`section`].
pub fn with_tuning(kernel_dir: &Utf8Path, config: &BuildConfig, card: &str) -> anyhow::Result<String> {
    Ok(match section(kernel_dir, config)? {
        Some(sec) => splice(card, &sec),
        None => card.to_owned(),
    })
}

/// For `upload`: the card file at `card_path` with the "Tuned for" section spliced in, written
/// to a temporary file that lives as long as the returned path (`None`: publish `card_path`
/// as it is: not a Helion kernel, not UTF-8, or already up to date).
///
/// # Errors
/// The card cannot be read or the temporary file written; see also [`section`].
pub fn rendered_card_file(
    kernel_dir: &Utf8Path,
    config: &BuildConfig,
    card_path: &Utf8Path,
) -> anyhow::Result<Option<tempfile::TempPath>> {
    let bytes = std::fs::read(card_path).with_context(|| format!("cannot read `{card_path}`"))?;
    let Ok(text) = String::from_utf8(bytes) else { return Ok(None) };
    let rendered = with_tuning(kernel_dir, config, &text)?;
    if rendered == text {
        return Ok(None);
    }
    let mut tmp = tempfile::Builder::new()
        .prefix("kernel-builder-card-")
        .suffix(".md")
        .tempfile()
        .context("cannot create a temporary file for the rendered card")?;
    std::io::Write::write_all(&mut tmp, rendered.as_bytes()).context("cannot write the rendered card")?;
    Ok(Some(tmp.into_temp_path()))
}

/// The line that opens the build variants section ([`variants_section`]).
pub const VARIANTS_BEGIN: &str = "<!-- kernel-builder: build-variants (generated by `kernel-builder fill-card` from build.toml and build/*/metadata.json; edits here are replaced) -->";
/// The line that closes it.
pub const VARIANTS_END: &str = "<!-- /kernel-builder: build-variants -->";

/// Where `fill-card` writes the card: `upload` publishes `build/CARD.md` in preference to the
/// kernel's own `CARD.md`, which stays the author's text.
pub fn filled_card_path(kernel_dir: &Utf8Path) -> camino::Utf8PathBuf {
    kernel_dir.join("build").join("CARD.md")
}

/// The part of a variant's `metadata.json` the card shows (other keys are ignored).
#[derive(Debug, Deserialize)]
struct VariantRecord {
    id: String,
    backend: VariantBackend,
    #[serde(default)]
    build: Option<VariantBuild>,
}

#[derive(Debug, Deserialize)]
struct VariantBackend {
    #[serde(rename = "type")]
    kind: String,
    #[serde(default)]
    archs: Option<Vec<String>>,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "kebab-case")]
struct VariantBuild {
    #[serde(default)]
    toolchain: BTreeMap<String, String>,
    #[serde(default)]
    capabilities_only: Option<Vec<String>>,
}

/// The names the package exports: the strings of `__all__` in
/// `torch-ext/<package>/__init__.py` when it is a plain list or tuple of string literals
/// (what `init` writes); `None` when there is no such `__all__` (the card then names none
/// rather than guess from the code).
pub fn exported_functions(kernel_dir: &Utf8Path, config: &BuildConfig) -> Option<Vec<String>> {
    let path = kernel_dir.join("torch-ext").join(config.general.python_name()).join("__init__.py");
    let text = crate::fsutil::read_to_string(&path).ok()?;
    let start = text.lines().position(|l| l.starts_with("__all__"))?;
    let rest: String = text.lines().skip(start).collect::<Vec<_>>().join("\n");
    let open = rest.find(['[', '('])?;
    let close = open + rest[open..].find([']', ')'])?;
    let mut names = Vec::new();
    for item in rest[open + 1..close].split(',') {
        let item = item.trim();
        if item.is_empty() {
            continue;
        }
        let inner = item
            .strip_prefix('"')
            .and_then(|i| i.strip_suffix('"'))
            .or_else(|| item.strip_prefix('\'').and_then(|i| i.strip_suffix('\'')))?;
        names.push(inner.to_owned());
    }
    Some(names)
}

/// The build variants section: the kernel's name, version, license, backends and exported
/// functions from build.toml, then one row per variant directory of `kernel_dir/build/` (sorted,
/// so the text depends on the files only) with its backend, capabilities, op namespace and
/// the torch it was built against, from its `metadata.json`.
///
/// # Errors
/// `build/` is missing or holds no variant, or a `metadata.json` is missing or unreadable; the
/// error names the file and what to run.
pub fn variants_section(kernel_dir: &Utf8Path, config: &BuildConfig) -> anyhow::Result<String> {
    let build = kernel_dir.join("build");
    let entries = std::fs::read_dir(&build).map_err(|e| {
        if e.kind() == std::io::ErrorKind::NotFound {
            anyhow::anyhow!("`{build}` does not exist: build the variants first (`kernel-builder build-and-copy {kernel_dir}`)")
        } else {
            anyhow::anyhow!("cannot read `{build}`: {e}")
        }
    })?;
    let mut variants = BTreeSet::new();
    for entry in entries {
        let entry = entry.with_context(|| format!("cannot read `{build}`"))?;
        if entry.file_type().with_context(|| format!("cannot read `{build}`"))?.is_dir() {
            let name = entry.file_name();
            let name = name
                .to_str()
                .with_context(|| format!("`{build}` holds a directory whose name is not UTF-8"))?;
            variants.insert(name.to_owned());
        }
    }
    anyhow::ensure!(
        !variants.is_empty(),
        "`{build}` holds no variant directory: build the variants first (`kernel-builder build-and-copy {kernel_dir}`)"
    );
    let g = &config.general;
    let mut s = format!("{VARIANTS_BEGIN}\n## Build variants\n\n");
    let backends: Vec<String> = g.backends.iter().map(|b| format!("`{b}`")).collect();
    let _ = write!(
        s,
        "`{}` version {} (branch `v{}`), license `{}`, for {}.",
        g.name,
        g.version,
        g.version,
        g.license,
        if backends.is_empty() { "no backend".to_owned() } else { backends.join(", ") }
    );
    if let Some(functions) = exported_functions(kernel_dir, config).filter(|f| !f.is_empty()) {
        let list: Vec<String> = functions.iter().map(|f| format!("`{f}`")).collect();
        let _ = write!(s, " The package `{}` exports {}.", g.python_name(), list.join(", "));
    }
    let deps: Vec<String> = g
        .kernel_depends
        .iter()
        .map(|d| match &d.pin {
            crate::config::KernelPin::Version(v) => format!("`{}` (version {v})", d.repo_id),
            crate::config::KernelPin::Revision(r) => format!("`{}` (revision `{r}`)", d.repo_id),
        })
        .collect();
    if !deps.is_empty() {
        let _ = write!(s, " It loads the kernels {} (`kernel-depends`).", deps.join(", "));
    }
    s.push_str("\n\nThe `kernels` loader picks the variant that matches the installed torch and device:\n\n");
    s.push_str("| variant | backend | capabilities | op namespace | built with torch |\n");
    s.push_str("| --- | --- | --- | --- | --- |\n");
    for v in &variants {
        let path = build.join(v).join("metadata.json");
        let text = crate::fsutil::read_to_string(&path).with_context(|| {
            format!("variant `{v}` has no readable metadata.json: rebuild it (`kernel-builder build-and-copy {kernel_dir}`)")
        })?;
        let rec: VariantRecord = serde_json::from_str(&text).with_context(|| {
            format!("`{path}` is not a variant's metadata.json (`kernel-builder build-and-copy` writes it)")
        })?;
        let only = rec.build.as_ref().and_then(|b| b.capabilities_only.clone());
        let caps = match (only, rec.backend.archs) {
            (Some(only), _) => format!("{} (quick check only)", only.join(", ")),
            (None, Some(archs)) if !archs.is_empty() => archs.join(", "),
            _ => "any".to_owned(),
        };
        let torch = rec
            .build
            .as_ref()
            .and_then(|b| b.toolchain.get("torch").cloned())
            .unwrap_or_else(|| "any (noarch)".to_owned());
        let _ = writeln!(s, "| `{v}` | {} | {caps} | `{}` | {torch} |", rec.backend.kind, rec.id);
    }
    s.push_str(VARIANTS_END);
    s.push('\n');
    Ok(s)
}

/// The card `fill-card` writes ([`filled_card_path`]): the kernel's own `CARD.md` (or, without
/// one, a heading and the Hub's front matter from build.toml) with the build variants section
/// and, for a Helion kernel, the "Tuned for" section spliced in. The same files give the same
/// text.
///
/// # Errors
/// `CARD.md` is not UTF-8; see also [`variants_section`] and [`section`].
pub fn filled_card(kernel_dir: &Utf8Path, config: &BuildConfig) -> anyhow::Result<String> {
    let own = kernel_dir.join("CARD.md");
    let base = if own.is_file() {
        crate::fsutil::read_to_string(&own)?
    } else {
        let license = crate::config::license::card_front_matter(&config.general.license);
        let mut base = format!(
            "---\nlibrary_name: kernels\nlicense: {license}\ntags:\n  - kernels\n---\n\n# {}\n",
            config.general.name
        );
        if let Some(repo) = &config.general.hub.repo_id {
            let _ = write!(
                base,
                "\n## Usage\n\n```python\nfrom kernels import get_kernel\n\nkernel = get_kernel(\"{repo}\", version={}, trust_remote_code=True)\n```\n",
                config.general.version
            );
        }
        base
    };
    let card = splice_between(&base, VARIANTS_BEGIN, VARIANTS_END, &variants_section(kernel_dir, config)?);
    with_tuning(kernel_dir, config, &card)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn splice_replaces_or_appends() {
        let sec = format!("{BEGIN}\nnew\n{END}\n");
        assert_eq!(splice("# k\n", &sec), format!("# k\n\n{sec}"));
        let old = format!("# k\n\n{BEGIN}\nold\n{END}\n\n## More\n");
        assert_eq!(splice(&old, &sec), format!("# k\n\n{sec}\n## More\n"));
        assert_eq!(splice(&splice("# k\n", &sec), &sec), splice("# k\n", &sec));
    }
}
