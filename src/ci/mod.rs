//! CI fan-out: the build jobs a CI system runs to build a kernel's whole bundle, one job per
//! cell or per group of cells (`kernel-builder ci-matrix`).
//!
//! # From cells to jobs
//!
//! The input is exactly what `list-variants --all-systems --json` lists (the bundle cells of
//! every system, [`crate::matrix::cells_on`]). A compiled cell's name carries its system, so
//! it is built by a runner of that system. A noarch cell (`torch-cuda`) is the same directory
//! whatever system builds it, and `list-variants` lists it once per system that has it; it is
//! built once, on the first system of [`GITHUB_RUNNERS`] that has it (the matrix's order for a
//! system that table lacks). So every variant of the bundle is built by exactly one job.
//!
//! Then the cells are grouped ([`GroupBy`]): one job per cell, per (system, backend) or per
//! system. A job builds the flake attribute `packages.<system>.<variant>` of each of its cells
//! ([`attribute`]: the per-cell outputs of `genKernelFlakeOutputs`, which `nix build
//! .#packages.<system>.<variant>` accepts), each a directory holding `<variant>/`.
//!
//! # Output
//!
//! [`CiMatrix`] serialises as the documented JSON of `ci-matrix --format json`; [`github`]
//! renders the `{"include": [...]}` object GitHub Actions' `strategy.matrix` takes through
//! `fromJSON`, on one line.

use std::collections::BTreeMap;

use serde::Serialize;

use crate::config::Backend;
use crate::matrix::Cell;

/// The GitHub-hosted runner label for each Nix system, in order of preference for noarch
/// cells (which any system can build): x86_64 Linux runners are the most plentiful. The labels
/// are GitHub's standard hosted runners (`ubuntu-24.04-arm` is the arm64 Linux one, free for
/// public repositories; `macos-latest` has been Apple silicon since macOS 14). A system not
/// listed needs `--runner SYSTEM=LABEL` (a self-hosted runner, for instance), which also
/// replaces a label listed here.
pub const GITHUB_RUNNERS: &[(&str, &str)] = &[
    ("x86_64-linux", "ubuntu-latest"),
    ("aarch64-linux", "ubuntu-24.04-arm"),
    ("aarch64-darwin", "macos-latest"),
];

/// GitHub Actions accepts at most this many jobs from one matrix.
pub const GITHUB_MAX_JOBS: usize = 256;

/// The format name of `ci-matrix --format json`.
pub const FORMAT: &str = "kernel-builder-ci-matrix-v1";

/// How cells are grouped into jobs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, clap::ValueEnum)]
#[serde(rename_all = "lowercase")]
pub enum GroupBy {
    /// One job per cell (the job id is the variant name).
    Cell,
    /// One job per system and backend (`x86_64-linux-cuda`).
    Backend,
    /// One job per system (`x86_64-linux`).
    System,
}

/// The runner label of each system: [`GITHUB_RUNNERS`] with the `--runner` overrides.
#[derive(Debug, Clone)]
pub struct Runners {
    /// (system, label), in order of preference for noarch cells.
    labels: Vec<(String, String)>,
}

impl Default for Runners {
    fn default() -> Self {
        Runners { labels: GITHUB_RUNNERS.iter().map(|(s, l)| (s.to_string(), l.to_string())).collect() }
    }
}

impl Runners {
    /// [`GITHUB_RUNNERS`] with each `(system, label)` of `overrides` replacing that system's
    /// label, or added after the listed systems.
    pub fn with_overrides(overrides: &[(String, String)]) -> Runners {
        let mut r = Runners::default();
        for (system, label) in overrides {
            match r.labels.iter_mut().find(|(s, _)| s == system) {
                Some(entry) => entry.1 = label.clone(),
                None => r.labels.push((system.clone(), label.clone())),
            }
        }
        r
    }

    /// The label of `system`, if known.
    pub fn label(&self, system: &str) -> Option<&str> {
        self.labels.iter().find(|(s, _)| s == system).map(|(_, l)| l.as_str())
    }

    /// The rank of `system` for noarch cells: its place in the table, else after all of them.
    fn rank(&self, system: &str) -> usize {
        self.labels.iter().position(|(s, _)| s == system).unwrap_or(self.labels.len())
    }
}

/// One build job.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Job {
    /// Unique among the jobs, usable in artifact names: the variant (`--group-by cell`),
    /// `<system>-<backend>` (`backend`) or `<system>` (`system`).
    pub id: String,
    /// The Nix system the job builds for, e.g. `x86_64-linux`.
    pub system: String,
    /// The runner label it needs (`runs-on`), e.g. `ubuntu-latest`.
    pub runner: String,
    /// The flake attributes to build, one per variant, in the order of `variants`:
    /// `packages.<system>.<variant>`.
    pub attributes: Vec<String>,
    /// The variant directories the job yields (`build/<variant>/`), sorted.
    pub variants: Vec<String>,
    /// The backends of those variants, sorted, each once.
    pub backends: Vec<Backend>,
}

/// The whole matrix of jobs: the JSON document of `ci-matrix --format json`.
///
/// ```json
/// {
///   "format": "kernel-builder-ci-matrix-v1",
///   "kernel": "relu",
///   "matrix": "2026-12",
///   "matrix_revision": "2026-12-01",
///   "group_by": "cell",
///   "jobs": [
///     {
///       "id": "torch214-cxx11-cpu-x86_64-linux",
///       "system": "x86_64-linux",
///       "runner": "ubuntu-latest",
///       "attributes": ["packages.x86_64-linux.torch214-cxx11-cpu-x86_64-linux"],
///       "variants": ["torch214-cxx11-cpu-x86_64-linux"],
///       "backends": ["cpu"]
///     }
///   ]
/// }
/// ```
///
/// Jobs are sorted by `id`. Changing a key or its meaning needs a new [`FORMAT`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct CiMatrix {
    /// Always [`FORMAT`].
    pub format: &'static str,
    /// `general.name`.
    pub kernel: String,
    /// The matrix the cells come from and its revision.
    pub matrix: String,
    pub matrix_revision: String,
    /// How the cells were grouped (`cell`, `backend`, `system`).
    pub group_by: GroupBy,
    /// The jobs, sorted by `id`.
    pub jobs: Vec<Job>,
}

/// A system that has cells but no runner label.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "no runner is known for system `{system}` (cells {cells}); pass `--runner {system}=LABEL` (GitHub runners are known for {known})"
)]
pub struct NoRunner {
    /// The system without a label.
    pub system: String,
    /// The cells of that system, comma-separated.
    pub cells: String,
    /// The systems that have a label.
    pub known: String,
}

/// The flake attribute of the cell `variant` of `system`, as `nix build .#<attribute>` takes
/// it: `packages.<system>.<variant>`; a part holding anything but letters, digits, `_`, `-`
/// and `'` is quoted.
pub fn attribute(system: &str, variant: &str) -> String {
    let part = |s: &str| {
        if !s.is_empty() && s.chars().all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '\'')) {
            s.to_owned()
        } else {
            format!("\"{}\"", s.replace('\\', "\\\\").replace('"', "\\\""))
        }
    };
    format!("packages.{}.{}", part(system), part(variant))
}

/// The jobs that build `cells` (all systems' cells, as [`crate::matrix::cells_on`] lists
/// them), grouped by `group_by`, sorted by id (see the module doc).
///
/// # Errors
/// [`NoRunner`] for the first system (in cell order) that a job needs and `runners` lacks.
pub fn jobs(cells: &[Cell], group_by: GroupBy, runners: &Runners) -> Result<Vec<Job>, NoRunner> {
    // One cell per variant name: a name listed by several systems goes to the best-ranked one.
    let mut chosen: BTreeMap<&str, &Cell> = BTreeMap::new();
    for cell in cells {
        match chosen.get(cell.name.as_str()) {
            Some(c) if runners.rank(&c.system) <= runners.rank(&cell.system) => {}
            _ => {
                chosen.insert(&cell.name, cell);
            }
        }
    }
    let mut groups: BTreeMap<String, Vec<&Cell>> = BTreeMap::new();
    for cell in chosen.values() {
        let id = match group_by {
            GroupBy::Cell => cell.name.clone(),
            GroupBy::Backend => format!("{}-{}", cell.system, cell.backend),
            GroupBy::System => cell.system.clone(),
        };
        groups.entry(id).or_default().push(cell);
    }
    let mut out = Vec::with_capacity(groups.len());
    for (id, group) in groups {
        let system = group[0].system.clone();
        let Some(runner) = runners.label(&system) else {
            let on_system: Vec<&str> =
                chosen.values().filter(|c| c.system == system).map(|c| c.name.as_str()).collect();
            return Err(NoRunner {
                system,
                cells: on_system.join(", "),
                known: runners.labels.iter().map(|(s, _)| s.as_str()).collect::<Vec<_>>().join(", "),
            });
        };
        // `chosen` is sorted by name, so each group is too.
        let variants: Vec<String> = group.iter().map(|c| c.name.clone()).collect();
        let mut backends: Vec<Backend> = group.iter().map(|c| c.backend).collect();
        backends.sort();
        backends.dedup();
        out.push(Job {
            id,
            attributes: variants.iter().map(|v| attribute(&system, v)).collect(),
            runner: runner.to_owned(),
            system,
            variants,
            backends,
        });
    }
    Ok(out)
}

/// The GitHub Actions matrix of `jobs`: `{"include": [{"id", "system", "runner",
/// "attributes", "variants", "backends"}, …]}` on one line without a newline, each list
/// joined with single spaces (a workflow uses them in shell commands:
/// `for a in ${{ matrix.attributes }}`), for `echo "matrix=…" >> "$GITHUB_OUTPUT"` and
/// `strategy.matrix: ${{ fromJSON(needs.<job>.outputs.matrix) }}`.
pub fn github(jobs: &[Job]) -> String {
    let join = |v: &[String]| v.join(" ");
    let include: Vec<serde_json::Value> = jobs
        .iter()
        .map(|j| {
            serde_json::json!({
                "id": j.id,
                "system": j.system,
                "runner": j.runner,
                "attributes": join(&j.attributes),
                "variants": join(&j.variants),
                "backends": j.backends.iter().map(ToString::to_string).collect::<Vec<_>>().join(" "),
            })
        })
        .collect();
    serde_json::json!({ "include": include }).to_string()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Backend::*;
    use crate::matrix::testutil::{noarch_config, torch_config};
    use crate::matrix::{cells_on, data::named, Scope};

    fn all_cells(config: &crate::config::BuildConfig) -> Vec<Cell> {
        let m = named("upstream-2026-08").unwrap();
        cells_on(m, config, &m.systems, Scope::Bundle)
    }

    fn ids(jobs: &[Job]) -> Vec<&str> {
        jobs.iter().map(|j| j.id.as_str()).collect()
    }

    #[test]
    fn noarch_cells_are_built_once_on_the_preferred_system() {
        let c = noarch_config(&[Cuda, Metal, Rocm]);
        let cells = all_cells(&c);
        // torch-cuda is listed by aarch64-linux and x86_64-linux; torch-metal only by darwin.
        assert_eq!(cells.iter().filter(|c| c.name == "torch-cuda").count(), 2);
        let jobs = jobs(&cells, GroupBy::Cell, &Runners::default()).unwrap();
        let facts: Vec<(&str, &str, &str)> =
            jobs.iter().map(|j| (j.id.as_str(), j.system.as_str(), j.runner.as_str())).collect();
        assert_eq!(
            facts,
            [
                ("torch-cuda", "x86_64-linux", "ubuntu-latest"),
                ("torch-metal", "aarch64-darwin", "macos-latest"),
                ("torch-rocm", "x86_64-linux", "ubuntu-latest"),
            ]
        );
        assert_eq!(jobs[0].attributes, ["packages.x86_64-linux.torch-cuda"]);
        let by_system = super::jobs(&cells, GroupBy::System, &Runners::with_overrides(&[])).unwrap();
        assert_eq!(ids(&by_system), ["aarch64-darwin", "x86_64-linux"]);
        // A table that prefers aarch64-linux builds torch-cuda there, and lacks darwin.
        let arm_first = Runners {
            labels: vec![("aarch64-linux".into(), "arm".into()), ("x86_64-linux".into(), "x86".into())],
        };
        let linux: Vec<Cell> = cells.iter().filter(|c| c.system != "aarch64-darwin").cloned().collect();
        let arm_jobs = super::jobs(&linux, GroupBy::Cell, &arm_first).unwrap();
        let facts: Vec<(&str, &str, &str)> =
            arm_jobs.iter().map(|j| (j.id.as_str(), j.system.as_str(), j.runner.as_str())).collect();
        assert_eq!(facts, [("torch-cuda", "aarch64-linux", "arm"), ("torch-rocm", "x86_64-linux", "x86")]);
        let err = super::jobs(&cells, GroupBy::System, &arm_first).unwrap_err();
        assert_eq!(
            err.to_string(),
            "no runner is known for system `aarch64-darwin` (cells torch-metal); pass `--runner aarch64-darwin=LABEL` (GitHub runners are known for aarch64-linux, x86_64-linux)"
        );
    }

    #[test]
    fn groups_cover_every_cell_once() {
        let c = torch_config(&[Cpu, Cuda, Metal, Rocm, Xpu], &[Cpu, Cuda, Metal, Rocm, Xpu]);
        let cells = all_cells(&c);
        let mut names: Vec<&str> = cells.iter().map(|c| c.name.as_str()).collect();
        names.sort();
        for g in [GroupBy::Cell, GroupBy::Backend, GroupBy::System] {
            let jobs = jobs(&cells, g, &Runners::default()).unwrap();
            let mut built: Vec<&str> =
                jobs.iter().flat_map(|j| j.variants.iter().map(String::as_str)).collect();
            built.sort();
            assert_eq!(built, names, "{g:?}");
            for j in &jobs {
                assert_eq!(j.attributes.len(), j.variants.len());
                for (a, v) in j.attributes.iter().zip(&j.variants) {
                    assert_eq!(a, &format!("packages.{}.{v}", j.system));
                }
            }
        }
        let by_backend = jobs(&cells, GroupBy::Backend, &Runners::default()).unwrap();
        assert_eq!(
            ids(&by_backend),
            [
                "aarch64-darwin-cpu",
                "aarch64-darwin-metal",
                "aarch64-linux-cpu",
                "aarch64-linux-cuda",
                "x86_64-linux-cpu",
                "x86_64-linux-cuda",
                "x86_64-linux-rocm",
                "x86_64-linux-xpu",
            ]
        );
        let x86_cuda = &by_backend[5];
        assert_eq!(
            x86_cuda.variants,
            [
                "torch212-cxx11-cu126-x86_64-linux",
                "torch212-cxx11-cu130-x86_64-linux",
                "torch212-cxx11-cu132-x86_64-linux",
                "torch213-cxx11-cu126-x86_64-linux",
                "torch213-cxx11-cu130-x86_64-linux",
                "torch213-cxx11-cu132-x86_64-linux",
            ]
        );
        assert_eq!(x86_cuda.backends, [Cuda]);
    }

    #[test]
    fn runner_overrides_replace_or_add() {
        let r = Runners::with_overrides(&[
            ("x86_64-linux".into(), "gpu-box".into()),
            ("riscv64-linux".into(), "self-hosted".into()),
        ]);
        assert_eq!(r.label("x86_64-linux"), Some("gpu-box"));
        assert_eq!(r.label("aarch64-darwin"), Some("macos-latest"));
        assert_eq!(r.label("riscv64-linux"), Some("self-hosted"));
        assert_eq!(r.rank("x86_64-linux"), 0);
        assert_eq!(r.rank("riscv64-linux"), 3);
        assert_eq!(r.rank("mips-linux"), 4);
    }

    #[test]
    fn attributes_quote_what_nix_would_split() {
        assert_eq!(attribute("x86_64-linux", "torch-cuda"), "packages.x86_64-linux.torch-cuda");
        assert_eq!(attribute("x86_64-linux", "a.b"), "packages.x86_64-linux.\"a.b\"");
    }

    #[test]
    fn github_matrix_is_one_line_of_strings() {
        let c = noarch_config(&[Cuda, Rocm]);
        let jobs = jobs(&all_cells(&c), GroupBy::System, &Runners::default()).unwrap();
        assert_eq!(
            github(&jobs),
            r#"{"include":[{"id":"x86_64-linux","system":"x86_64-linux","runner":"ubuntu-latest","attributes":"packages.x86_64-linux.torch-cuda packages.x86_64-linux.torch-rocm","variants":"torch-cuda torch-rocm","backends":"cuda rocm"}]}"#
        );
    }
}
