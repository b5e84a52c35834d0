//! The per-shape table of a tune (tuned config against Helion's default config), as text and
//! as `tuning/<kind>_<compute>/tune.json`.

use camino::{Utf8Path, Utf8PathBuf};
use serde::{Deserialize, Serialize};

use super::{Environment, Options};

/// `measure.py`'s output file.
#[derive(Debug, Deserialize)]
pub(super) struct MeasureTable {
    pub(super) calls: Vec<MeasuredCall>,
}

/// One row of `measure.py`'s output.
#[derive(Debug, Deserialize)]
pub(super) struct MeasuredCall {
    kernel: String,
    features: serde_json::Map<String, serde_json::Value>,
    heuristic_file: Option<String>,
    tuned_config: Option<serde_json::Value>,
    default_config: Option<serde_json::Value>,
    tuned_ms: Option<f64>,
    default_ms: Option<f64>,
    error: Option<String>,
}

/// One shape of the table.
#[derive(Debug, Clone, Serialize)]
pub struct ShapeRow {
    /// Kernel (function) name.
    pub kernel: String,
    /// The call's arguments, e.g. `bf16[8, 32, 1024, 64] x3` ([`describe_features`]).
    pub shape: String,
    /// Helion's shape features of the call.
    pub features: serde_json::Map<String, serde_json::Value>,
    /// Median kernel time with Helion's default config, ms (`None`: it failed).
    pub default_ms: Option<f64>,
    /// Median kernel time with the config the new heuristic picks, ms.
    pub tuned_ms: Option<f64>,
    /// `default_ms / tuned_ms`.
    pub speedup: Option<f64>,
    /// Whether the heuristic Helion found for this call is one this tune wrote.
    pub heuristic_used: bool,
    /// The config the heuristic picked.
    pub tuned_config: Option<serde_json::Value>,
    /// Helion's default config for the call.
    pub default_config: Option<serde_json::Value>,
    /// What failed, if anything.
    pub error: Option<String>,
}

/// The whole record of one tune (the `tune.json` format, version 1).
#[derive(Debug, Clone, Serialize)]
pub struct TuneReport {
    /// Format version of this file.
    pub format: u32,
    /// The command line that made it.
    pub command: String,
    /// kernel-builder's version.
    pub kernel_builder: String,
    /// Device and software versions.
    pub environment: Environment,
    /// The bench script, relative to the kernel directory, and its arguments.
    pub bench: Vec<String>,
    /// `quick` or `full`.
    pub effort: super::Effort,
    /// The runner's goal and threshold.
    pub goal: super::Goal,
    /// The slowdown threshold.
    pub threshold: f64,
    /// `--max-configs`, when given.
    pub max_configs: Option<u32>,
    /// Heuristic files written, relative to `torch-ext/`.
    pub heuristic_files: Vec<Utf8PathBuf>,
    /// One row per distinct (kernel, shape) the bench script called.
    pub shapes: Vec<ShapeRow>,
    /// Geometric mean of `speedup` over the rows that have one.
    pub geomean_speedup: Option<f64>,
    /// The runner's `heuristic_summary_<hw>.json` (configs chosen, slowdowns, tree accuracy).
    pub runner_summary: serde_json::Value,
    /// The calls the collect phase searched or took from the records (the heuristic's configs
    /// come from these), in the runner's order.
    pub searched_shapes: Vec<NamedShape>,
    /// The calls the measure phase timed every config on: the decision trees' training set
    /// (empty when the runner's measurements could not be read).
    pub measured_shapes: Vec<NamedShape>,
}

/// A kernel and one call's shape, described as in the table (`bf16[8, 32, 1024, 64] x3`).
#[derive(Debug, Clone, Serialize)]
pub struct NamedShape {
    pub kernel: String,
    pub shape: String,
}

impl NamedShape {
    fn list(shapes: &[super::TunedShape]) -> Vec<NamedShape> {
        shapes
            .iter()
            .map(|s| NamedShape { kernel: s.kernel.clone(), shape: describe_features(&s.features) })
            .collect()
    }
}

impl TuneReport {
    /// One warning per kernel whose heuristic misses `goal`'s `threshold` (the runner's
    /// `performance_stats`), saying what to change.
    pub fn goal_warnings(&self, goal: super::Goal, threshold: f64) -> Vec<String> {
        let Some(summary) = self.runner_summary.as_object() else { return Vec::new() };
        let mut out = Vec::new();
        for (kernel, s) in summary {
            let stat = |k: &str| s.pointer(&format!("/performance_stats/{k}")).and_then(|v| v.as_f64());
            if let Some(max) = stat(goal.as_str()).or_else(|| stat("max_slowdown")) {
                if max > threshold {
                    out.push(format!(
                        "{kernel}: the heuristic's {} is {max:.3}, above the goal {threshold}: raise --max-configs or the threshold, or tune with --effort full",
                        goal.as_str()
                    ));
                }
            }
        }
        out
    }

    pub(super) fn new(
        opts: &Options,
        env: &Environment,
        produced: &[Utf8PathBuf],
        table: MeasureTable,
        runner_summary: serde_json::Value,
        bench_rel: &Utf8Path,
    ) -> TuneReport {
        let shapes: Vec<ShapeRow> = table
            .calls
            .into_iter()
            .map(|c| {
                let speedup = match (c.default_ms, c.tuned_ms) {
                    (Some(d), Some(t)) if t > 0.0 => Some(d / t),
                    _ => None,
                };
                let heuristic_used = c
                    .heuristic_file
                    .as_deref()
                    .is_some_and(|f| produced.iter().any(|p| f.ends_with(&format!("/{}", p.as_str()))));
                ShapeRow {
                    shape: describe_features(&c.features),
                    kernel: c.kernel,
                    features: c.features,
                    default_ms: c.default_ms,
                    tuned_ms: c.tuned_ms,
                    speedup,
                    heuristic_used,
                    tuned_config: c.tuned_config,
                    default_config: c.default_config,
                    error: c.error,
                }
            })
            .collect();
        let logs: Vec<f64> = shapes.iter().filter_map(|r| r.speedup).map(f64::ln).collect();
        let geomean_speedup =
            (!logs.is_empty()).then(|| (logs.iter().sum::<f64>() / logs.len() as f64).exp());
        TuneReport {
            format: 1,
            command: opts.command_line.clone(),
            kernel_builder: env!("CARGO_PKG_VERSION").to_owned(),
            environment: env.clone(),
            bench: std::iter::once(bench_rel.to_string()).chain(opts.bench_args.iter().cloned()).collect(),
            effort: opts.effort,
            goal: opts.goal,
            threshold: opts.threshold,
            max_configs: opts.max_configs,
            heuristic_files: produced.to_vec(),
            shapes,
            geomean_speedup,
            runner_summary,
            searched_shapes: Vec::new(),
            measured_shapes: Vec::new(),
        }
    }

    /// The report with the calls the collect phase searched and the measure phase timed.
    pub(super) fn with_shapes(
        mut self,
        searched: &[super::TunedShape],
        measured: &[super::TunedShape],
    ) -> Self {
        self.searched_shapes = NamedShape::list(searched);
        self.measured_shapes = NamedShape::list(measured);
        self
    }

    /// The report as pretty JSON with a final newline.
    pub fn to_json(&self) -> String {
        serde_json::to_string_pretty(self).expect("a report serialises") + "\n"
    }

    /// The table printed on stdout: one line per shape, then the geometric mean.
    pub fn render_table(&self) -> String {
        let ms = |v: Option<f64>| v.map_or("failed".to_owned(), |v| format!("{v:.4}"));
        let kw = self.shapes.iter().map(|r| r.kernel.len()).max().unwrap_or(6).max(6);
        let sw = self.shapes.iter().map(|r| r.shape.len()).max().unwrap_or(5).max(5);
        let mut out = format!(
            "{:kw$}  {:sw$}  {:>10}  {:>10}  {:>7}\n",
            "kernel", "shape", "default ms", "tuned ms", "speedup"
        );
        for r in &self.shapes {
            let speedup = r.speedup.map_or("-".to_owned(), |s| format!("{s:.2}x"));
            out.push_str(&format!(
                "{:kw$}  {:sw$}  {:>10}  {:>10}  {:>7}{}\n",
                r.kernel,
                r.shape,
                ms(r.default_ms),
                ms(r.tuned_ms),
                speedup,
                if r.heuristic_used { "" } else { "  (no new heuristic used)" },
            ));
        }
        if let Some(g) = self.geomean_speedup {
            out.push_str(&format!("geomean speedup over Helion's default config: {g:.2}x\n"));
        }
        out
    }
}

/// A short description of one call from Helion's shape features: each argument as
/// `dtype[d0, d1, …]` (tensors) or its value (numbers), consecutive equal ones folded as
/// `… x3`. Features named otherwise (a custom key's `key_0`, …) are listed as `name=value`.
pub fn describe_features(features: &serde_json::Map<String, serde_json::Value>) -> String {
    let mut parts: Vec<String> = Vec::new();
    let mut i = 0;
    loop {
        let p = format!("arg{i}_");
        if !features.keys().any(|k| k.starts_with(&p)) {
            break;
        }
        let get = |k: &str| features.get(&format!("{p}{k}"));
        if let Some(ndim) = get("ndim").and_then(|v| v.as_u64()) {
            let dims: Vec<String> = (0..ndim)
                .map(|j| get(&format!("dim{j}")).map_or("?".to_owned(), |v| v.to_string()))
                .collect();
            let dtype = get("dtype").and_then(|v| v.as_str()).unwrap_or("?");
            let dtype = dtype.strip_prefix("torch.").unwrap_or(dtype);
            let short = match dtype {
                "bfloat16" => "bf16",
                "float16" => "fp16",
                "float32" => "fp32",
                "float64" => "fp64",
                d => d,
            };
            parts.push(format!("{short}[{}]", dims.join(", ")));
        } else if let Some(v) = get("scalar") {
            parts.push(v.to_string());
        }
        i += 1;
    }
    for (k, v) in features {
        if !k.starts_with("arg") {
            parts.push(format!("{k}={v}"));
        }
    }
    let mut folded: Vec<(String, usize)> = Vec::new();
    for p in parts {
        match folded.last_mut() {
            Some((last, n)) if *last == p => *n += 1,
            _ => folded.push((p, 1)),
        }
    }
    folded
        .into_iter()
        .map(|(p, n)| if n > 1 { format!("{p} x{n}") } else { p })
        .collect::<Vec<_>>()
        .join(", ")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn features(v: serde_json::Value) -> serde_json::Map<String, serde_json::Value> {
        v.as_object().unwrap().clone()
    }

    #[test]
    fn attention_call_folds_three_equal_tensors() {
        let mut f = serde_json::Map::new();
        for i in 0..3 {
            f.insert(format!("arg{i}_ndim"), 4.into());
            for (j, d) in [8, 32, 1024, 64].iter().enumerate() {
                f.insert(format!("arg{i}_dim{j}"), (*d).into());
            }
            f.insert(format!("arg{i}_numel"), 16777216.into());
            f.insert(format!("arg{i}_dtype"), "torch.bfloat16".into());
        }
        assert_eq!(describe_features(&f), "bf16[8, 32, 1024, 64] x3");
    }

    #[test]
    fn tensors_scalars_and_key_features() {
        let f = features(serde_json::json!({
            "arg0_ndim": 2, "arg0_dim0": 4096, "arg0_dim1": 1024, "arg0_dtype": "torch.float32",
            "arg1_scalar": 1e-05,
            "key_0": 7,
        }));
        assert_eq!(describe_features(&f), "fp32[4096, 1024], 0.00001, key_0=7");
    }

    #[test]
    fn measured_shapes_read_helions_csv() {
        // Two configs timed on each of two calls, as helion 1.4's aot_cache.py writes the file.
        let csv = "kernel_name,shape_hash,config_hash,config,shape_features,timing_ms\n\
            k,a1,c1,\"{\"\"block_sizes\"\": [64]}\",\"{\"\"arg0_scalar\"\": 1}\",0.5\n\
            k,a1,c2,\"{\"\"block_sizes\"\": [32]}\",\"{\"\"arg0_scalar\"\": 1}\",0.7\n\
            k,b2,c1,\"{\"\"block_sizes\"\": [64]}\",\"{\"\"arg0_ndim\"\": 1, \"\"arg0_dim0\"\": 8, \"\"arg0_dtype\"\": \"\"torch.float16\"\"}\",0.1\n";
        let shapes = super::super::measured_shapes(csv).unwrap();
        let described: Vec<String> =
            shapes.iter().map(|s| format!("{}: {}", s.kernel, describe_features(&s.features))).collect();
        assert_eq!(described, ["k: 1", "k: fp16[8]"]);
        assert_eq!(
            super::super::measured_shapes("kernel_name,timing_ms\n").unwrap_err().to_string(),
            "no `shape_features` column"
        );
        let bad = "kernel_name,shape_features\nk,[1]\n";
        assert_eq!(
            super::super::measured_shapes(bad).unwrap_err().to_string(),
            "row 2: `shape_features` is not a JSON object"
        );
    }

    #[test]
    fn tuned_shapes_are_distinct_and_in_file_order() {
        let doc = serde_json::json!({
            "k": [
                {"shape_features": {"arg0_scalar": 1}},
                {"shape_features": {"arg0_scalar": 2}},
                {"shape_features": {"arg0_scalar": 1}},
            ],
        });
        let shapes = super::super::tuned_shapes(&doc);
        let described: Vec<String> = shapes.iter().map(|s| describe_features(&s.features)).collect();
        assert_eq!(described, ["1", "2"]);
    }
}
