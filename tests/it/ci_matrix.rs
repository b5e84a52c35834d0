//! `kernel-builder ci-matrix` and the GitHub Actions workflow `init` writes: exact matrices of
//! the example kernels, every bundle variant built by exactly one job, the diagnostics.

use std::collections::BTreeMap;

use camino::{Utf8Path, Utf8PathBuf};
use serde_json::Value;

use super::util::kb;

const REPO: &str = env!("CARGO_MANIFEST_DIR");
const GROUPS: [&str; 3] = ["cell", "backend", "system"];

/// Run `kernel-builder ARGS` in `cwd`; stdout, asserting exit 0.
fn run_ok(cwd: &Utf8Path, args: &[&str]) -> String {
    let out = kb().current_dir(cwd).args(args).output().unwrap();
    assert_eq!(
        out.status.code(),
        Some(0),
        "kernel-builder {}: {}",
        args.join(" "),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

fn kernel(name: &str) -> Utf8PathBuf {
    Utf8Path::new(REPO).join("kernels").join(name)
}

#[test]
fn vector_add_helion_github_matrix_per_group() {
    let dir = kernel("vector-add-helion");
    let out: Vec<String> =
        GROUPS.iter().map(|g| run_ok(&dir, &["ci-matrix", "--format", "github", "--group-by", g])).collect();
    assert_eq!(
        out[0],
        r#"{"include":[{"id":"torch-cuda","system":"x86_64-linux","runner":"ubuntu-latest","attributes":"packages.x86_64-linux.torch-cuda","variants":"torch-cuda","backends":"cuda"},{"id":"torch-rocm","system":"x86_64-linux","runner":"ubuntu-latest","attributes":"packages.x86_64-linux.torch-rocm","variants":"torch-rocm","backends":"rocm"},{"id":"torch-xpu","system":"x86_64-linux","runner":"ubuntu-latest","attributes":"packages.x86_64-linux.torch-xpu","variants":"torch-xpu","backends":"xpu"}]}
"#
    );
    assert_eq!(
        out[1],
        r#"{"include":[{"id":"x86_64-linux-cuda","system":"x86_64-linux","runner":"ubuntu-latest","attributes":"packages.x86_64-linux.torch-cuda","variants":"torch-cuda","backends":"cuda"},{"id":"x86_64-linux-rocm","system":"x86_64-linux","runner":"ubuntu-latest","attributes":"packages.x86_64-linux.torch-rocm","variants":"torch-rocm","backends":"rocm"},{"id":"x86_64-linux-xpu","system":"x86_64-linux","runner":"ubuntu-latest","attributes":"packages.x86_64-linux.torch-xpu","variants":"torch-xpu","backends":"xpu"}]}
"#
    );
    assert_eq!(
        out[2],
        r#"{"include":[{"id":"x86_64-linux","system":"x86_64-linux","runner":"ubuntu-latest","attributes":"packages.x86_64-linux.torch-cuda packages.x86_64-linux.torch-rocm packages.x86_64-linux.torch-xpu","variants":"torch-cuda torch-rocm torch-xpu","backends":"cuda rocm xpu"}]}
"#
    );
}

#[test]
fn vector_add_helion_json_matrix_per_group() {
    let dir = kernel("vector-add-helion");
    for g in GROUPS {
        let out = run_ok(&dir, &["ci-matrix", "--group-by", g]);
        insta::assert_snapshot!(format!("vector_add_helion_{g}"), out);
    }
}

#[test]
fn relu_json_matrix_per_group() {
    let dir = kernel("relu");
    for g in GROUPS {
        let out = run_ok(&dir, &["ci-matrix", "--format", "json", "--group-by", g]);
        insta::assert_snapshot!(format!("relu_{g}"), out);
    }
}

/// The bundle variants `list-variants --all-systems --json` lists for `dir`, each once, with
/// the systems that list it.
fn bundle_variants(dir: &Utf8Path) -> BTreeMap<String, Vec<String>> {
    let cells: Value =
        serde_json::from_str(&run_ok(dir, &["list-variants", "--all-systems", "--json"])).unwrap();
    let mut out: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for c in cells.as_array().unwrap() {
        assert_eq!(c["bundle"], true);
        out.entry(c["name"].as_str().unwrap().to_owned())
            .or_default()
            .push(c["system"].as_str().unwrap().to_owned());
    }
    out
}

/// Each `${{ matrix.KEY }}` a workflow text uses.
fn matrix_keys_used(text: &str) -> Vec<String> {
    let mut keys: Vec<String> = text
        .split("${{")
        .skip(1)
        .filter_map(|s| s.split("}}").next())
        .filter_map(|e| e.trim().strip_prefix("matrix.").map(str::to_owned))
        .collect();
    keys.sort();
    keys.dedup();
    keys
}

/// The `run` scripts of a job's steps, in order.
fn runs(job: &Value) -> Vec<String> {
    job["steps"].as_array().unwrap().iter().filter_map(|s| s["run"].as_str().map(str::to_owned)).collect()
}

/// The arguments the workflow passes to `kernel-builder ci-matrix` in its matrix job.
fn ci_matrix_args(workflow: &Value) -> Vec<String> {
    let scripts = runs(&workflow["jobs"]["matrix"]);
    let line = scripts
        .iter()
        .flat_map(|s| s.lines())
        .find(|l| l.contains(" ci-matrix "))
        .expect("the matrix job runs ci-matrix");
    let (_, rest) = line.split_once(" -- ").expect("`nix run … kernel-builder -- ci-matrix …`");
    rest.trim_end_matches(')').split_whitespace().map(str::to_owned).collect()
}

/// Check the generated workflow's shape and that, for `dir` and each group-by, the matrix it
/// computes builds every bundle variant in exactly one job, on a runner of its system.
fn check_workflow_covers(workflow_text: &str, dir: &Utf8Path) {
    let wf: Value = serde_norway::from_str(workflow_text).unwrap();
    assert!(workflow_text.starts_with("# Generated by `kernel-builder init`"), "{workflow_text}");
    let jobs = wf["jobs"].as_object().unwrap();
    assert_eq!(jobs.keys().collect::<Vec<_>>(), ["matrix", "build", "join"]);
    // matrix → build (one job per entry) → join.
    assert_eq!(wf["jobs"]["matrix"]["outputs"]["matrix"], "${{ steps.matrix.outputs.matrix }}");
    assert!(runs(&wf["jobs"]["matrix"])
        .iter()
        .any(|r| r.contains("echo \"matrix=$m\" >> \"$GITHUB_OUTPUT\"")));
    let build = &wf["jobs"]["build"];
    assert_eq!(build["needs"], "matrix");
    assert_eq!(build["runs-on"], "${{ matrix.runner }}");
    assert_eq!(build["strategy"]["matrix"], "${{ fromJSON(needs.matrix.outputs.matrix) }}");
    assert!(runs(build).iter().any(|r| r.contains("for attr in ${{ matrix.attributes }}")));
    let upload =
        build["steps"].as_array().unwrap().iter().find(|s| s["uses"] == "actions/upload-artifact@v4");
    assert_eq!(upload.unwrap()["with"]["name"], "cells-${{ matrix.id }}");
    let join = &wf["jobs"]["join"];
    assert_eq!(join["needs"], "build");
    let join_runs = runs(join).join("\n");
    assert!(join_runs.contains("nix-support join --out build --source . cells/*"), "{join_runs}");
    assert!(join_runs.contains("diff expected.json built.json"), "{join_runs}");
    assert!(
        join_runs.lines().any(|l| l.trim() == ".kernel-builder/bin/kernel-builder upload"),
        "{join_runs}"
    );

    let args = ci_matrix_args(&wf);
    assert_eq!(args, ["ci-matrix", "--format", "github"]);
    let expected = bundle_variants(dir);
    assert!(!expected.is_empty());
    let runner_of: BTreeMap<&str, &str> = kernel_builder::ci::GITHUB_RUNNERS.iter().copied().collect();
    for g in GROUPS {
        let mut cmd = args.clone();
        cmd.extend(["--group-by".to_owned(), g.to_owned()]);
        let out = run_ok(dir, &cmd.iter().map(String::as_str).collect::<Vec<_>>());
        assert!(out.ends_with("}\n") && out.lines().count() == 1, "one line for $GITHUB_OUTPUT: {out}");
        let matrix: Value = serde_json::from_str(&out).unwrap();
        let include = matrix["include"].as_array().unwrap();
        let mut built: BTreeMap<String, usize> = BTreeMap::new();
        let mut ids = Vec::new();
        for entry in include {
            for key in matrix_keys_used(workflow_text) {
                assert!(entry[&key].is_string(), "the workflow uses matrix.{key}; {entry} lacks it");
            }
            let system = entry["system"].as_str().unwrap();
            assert_eq!(entry["runner"], runner_of[system], "{entry}");
            let variants: Vec<&str> = entry["variants"].as_str().unwrap().split(' ').collect();
            let attributes: Vec<&str> = entry["attributes"].as_str().unwrap().split(' ').collect();
            assert_eq!(attributes.len(), variants.len(), "{entry}");
            for (a, v) in attributes.iter().zip(&variants) {
                assert_eq!(*a, format!("packages.{system}.{v}"));
                assert!(expected[*v].iter().any(|s| s == system), "{v} is not a cell of {system}");
                *built.entry((*v).to_owned()).or_default() += 1;
            }
            ids.push(entry["id"].as_str().unwrap().to_owned());
        }
        let once: BTreeMap<String, usize> = expected.keys().map(|v| (v.clone(), 1)).collect();
        assert_eq!(built, once, "{dir} --group-by {g}: every bundle variant in exactly one job");
        let n = ids.len();
        ids.sort();
        ids.dedup();
        assert_eq!(ids.len(), n, "job ids are unique (artifact names)");
    }
}

fn init_project(root: &Utf8Path, args: &[&str]) -> Utf8PathBuf {
    let out = kb().current_dir(root).arg("init").args(args).output().unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
    root.join(args.last().unwrap())
}

#[test]
fn the_generated_workflow_builds_every_bundle_variant_once() {
    let tmp = tempfile::tempdir().unwrap();
    let root = Utf8Path::from_path(tmp.path()).unwrap();
    let helion = init_project(root, &["--name", "myorg/vadd", "--", "vadd"]);
    let compiled = init_project(
        root,
        &["--template", "compiled", "--name", "myorg/relu", "--backends", "all", "--", "relu"],
    );
    for dir in [&helion, &compiled] {
        let text = std::fs::read_to_string(dir.join(".github/workflows/build.yml")).unwrap();
        check_workflow_covers(&text, dir);
    }
    // The same workflow over the repository's example kernels.
    let text = std::fs::read_to_string(helion.join(".github/workflows/build.yml")).unwrap();
    for k in ["vector-add-helion", "relu"] {
        check_workflow_covers(&text, &kernel(k));
    }
    // The compiled project's noarch-free bundle spans every system.
    let systems: Vec<String> = bundle_variants(&compiled)
        .values()
        .flatten()
        .cloned()
        .collect::<std::collections::BTreeSet<_>>()
        .into_iter()
        .collect();
    assert_eq!(systems, ["aarch64-darwin", "aarch64-linux", "x86_64-linux"]);
}

#[test]
fn runner_overrides_and_bad_runner_syntax() {
    let dir = kernel("vector-add-helion");
    let out = run_ok(
        &dir,
        &["ci-matrix", "--format", "github", "--group-by", "system", "--runner", "x86_64-linux=big"],
    );
    assert!(out.contains(r#""runner":"big""#), "{out}");
    let out = kb().current_dir(&dir).args(["ci-matrix", "--runner", "x86_64-linux"]).output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("expected SYSTEM=LABEL"));
}

/// A `--runner` for a system the matrix does not have would be silently unused: refused,
/// naming the matrix's systems, before anything is printed.
#[test]
fn runner_for_an_unknown_system_is_refused() {
    let dir = kernel("vector-add-helion");
    for (arg, hint) in [("x86_64-linx=big", " (did you mean `x86_64-linux`?)"), ("riscv64-plan9=big", "")] {
        let out = kb().current_dir(&dir).args(["ci-matrix", "--runner", arg]).output().unwrap();
        assert_eq!(out.status.code(), Some(1), "{arg}");
        assert!(out.stdout.is_empty());
        let system = arg.split_once('=').unwrap().0;
        assert_eq!(
            String::from_utf8_lossy(&out.stderr).trim_end(),
            format!(
                "error: --runner `{arg}`: `{system}` is not a system of the matrix{hint}; its systems are: \
                 aarch64-darwin, aarch64-linux, x86_64-linux"
            ),
            "{arg}"
        );
    }
}

#[test]
fn a_missing_dir_or_bad_build_toml_gets_the_usual_diagnostics() {
    let tmp = tempfile::tempdir().unwrap();
    let root = Utf8Path::from_path(tmp.path()).unwrap();
    let out = kb().args(["ci-matrix", root.join("nope").as_str()]).output().unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert!(out.stdout.is_empty());
    let err = String::from_utf8(out.stderr).unwrap();
    assert!(err.contains("nope/build.toml"), "{err}");

    std::fs::write(
        root.join("build.toml"),
        "[general]\nname = \"kk\"\nversion = 1\nedition = 5\nlicense = \"MIT\"\nbackends = [\"cuda\", \"cdua\"]\n\n[torch-noarch]\n",
    )
    .unwrap();
    let out = kb().args(["ci-matrix", "--format", "github", root.as_str()]).output().unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert!(out.stdout.is_empty());
    let err = String::from_utf8(out.stderr).unwrap();
    assert!(err.contains("build.toml:6:"), "{err}");
    assert!(err.contains("cdua"), "{err}");

    // No cell anywhere: JSON says so, GitHub (which refuses an empty matrix) fails.
    std::fs::write(
        root.join("build.toml"),
        "[general]\nname = \"kk\"\nversion = 1\nedition = 5\nlicense = \"MIT\"\nbackends = [\"cuda\"]\n\n[general.cuda]\nminver = \"11.0\"\nmaxver = \"11.8\"\n\n[torch-noarch]\n",
    )
    .unwrap();
    let out = kb().args(["ci-matrix", root.as_str()]).output().unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
    let doc: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(doc["jobs"], serde_json::json!([]));
    let out = kb().args(["ci-matrix", "--format", "github", root.as_str()]).output().unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert!(out.stdout.is_empty());
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("GitHub Actions refuses an empty matrix"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// A matrix file replaces the kernel's matrix for both commands; a bad one is refused naming it.
#[test]
fn matrix_file_is_shared_by_list_variants_and_ci_matrix() {
    let tmp = tempfile::tempdir().unwrap();
    let root = Utf8Path::from_path(tmp.path()).unwrap();
    let mut m: Value = serde_json::from_str(kernel_builder::matrix::data::MATRIX_JSON).unwrap();
    // One more bundle set: torch 2.16 with CUDA 13.2 on both Linux systems.
    m["build_sets"].as_array_mut().unwrap().push(serde_json::json!({
        "torch": "2.16", "backend": "cuda", "version": "13.2",
        "systems": ["x86_64-linux", "aarch64-linux"], "bundle": true
    }));
    let file = root.join("m.json");
    std::fs::write(&file, serde_json::to_string(&m).unwrap()).unwrap();
    let dir = kernel("relu");
    let before = run_ok(&dir, &["list-variants", "--all-systems"]);
    let after = run_ok(&dir, &["list-variants", "--all-systems", "--matrix-file", file.as_str()]);
    let added: Vec<&str> = after.lines().filter(|l| !before.contains(l)).collect();
    assert_eq!(
        added,
        [
            "aarch64-linux\ttorch216-cxx11-cu132-aarch64-linux",
            "x86_64-linux\ttorch216-cxx11-cu132-x86_64-linux"
        ]
    );
    let ci: Value = serde_json::from_str(&run_ok(
        &dir,
        &["ci-matrix", "--group-by", "system", "--matrix-file", file.as_str()],
    ))
    .unwrap();
    let n: usize =
        ci["jobs"].as_array().unwrap().iter().map(|j| j["variants"].as_array().unwrap().len()).sum();
    assert_eq!(n, after.lines().count());

    std::fs::write(&file, "{}").unwrap();
    let out = kb().current_dir(&dir).args(["ci-matrix", "--matrix-file", file.as_str()]).output().unwrap();
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains(&format!("`{file}` is not a build matrix")), "{err}");
}

#[test]
fn help_lists_the_options() {
    let out = kb().args(["ci-matrix", "--help"]).output().unwrap();
    assert_eq!(out.status.code(), Some(0));
    insta::assert_snapshot!(String::from_utf8(out.stdout).unwrap());
    let top = kb().arg("--help").output().unwrap();
    assert!(String::from_utf8(top.stdout).unwrap().contains(
        "\n  ci-matrix         Print the CI build jobs of every variant: a GitHub Actions matrix, or JSON\n"
    ));
}

/// Every attribute the matrix names is a package of the kernel's flake (`nix build .#<it>`
/// takes it), for both example kernels.
#[test]
#[cfg_attr(not(feature = "nix-tests"), ignore = "needs Nix: cargo test --features nix-tests")]
fn every_attribute_is_a_package_of_the_flake() {
    let orch = format!("path:{}", super::nix::orchestrator().display());
    for k in ["vector-add-helion", "relu"] {
        let dir = kernel(k);
        let out = duct::cmd!(
            "nix",
            "eval",
            "--json",
            "--no-write-lock-file",
            "--override-input",
            "kernel-builder/orchestrator",
            &orch,
            ".#packages",
            "--apply",
            "ps: builtins.mapAttrs (s: p: builtins.attrNames p) ps"
        )
        .dir(&dir)
        .stdout_capture()
        .stderr_capture()
        .unchecked()
        .run()
        .unwrap();
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        let packages: BTreeMap<String, Vec<String>> = serde_json::from_slice(&out.stdout).unwrap();
        let doc: Value = serde_json::from_str(&run_ok(&dir, &["ci-matrix", "--group-by", "system"])).unwrap();
        let mut n = 0;
        for job in doc["jobs"].as_array().unwrap() {
            for a in job["attributes"].as_array().unwrap() {
                let parts: Vec<&str> = a.as_str().unwrap().split('.').collect();
                assert_eq!(parts.len(), 3, "{a}");
                assert_eq!(parts[0], "packages");
                assert!(packages[parts[1]].iter().any(|p| p == parts[2]), "{k}: no {a} in the flake");
                n += 1;
            }
        }
        assert_eq!(n, bundle_variants(&dir).len(), "{k}");
    }
}

/// The `run` scripts of a job's steps, in order, each with its environment as GitHub gives it:
/// the workflow's `env`, then the step's, as strings.
fn runs_with_env(workflow: &Value, job: &Value) -> Vec<(String, Vec<(String, String)>)> {
    let pairs = |v: &Value| -> Vec<(String, String)> {
        v.as_object()
            .map(|o| o.iter().map(|(k, v)| (k.clone(), v.as_str().unwrap().to_owned())).collect())
            .unwrap_or_default()
    };
    job["steps"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|s| {
            let script = s["run"].as_str()?.to_owned();
            Some((script, [pairs(&workflow["env"]), pairs(&s["env"])].concat()))
        })
        .collect()
}

/// Run `script` with bash -e in `cwd` as a GitHub Actions step would, each `${{ matrix.KEY }}`
/// replaced by `entry[KEY]` (no other expression may appear), with `path_dir` first on PATH,
/// `$GITHUB_OUTPUT` set and `env` in the environment.
fn run_step(
    script: &str,
    entry: &Value,
    cwd: &Utf8Path,
    path_dir: &Utf8Path,
    output: &Utf8Path,
    env: &[(String, String)],
) {
    let mut text = String::new();
    let mut rest = script;
    while let Some(i) = rest.find("${{") {
        text.push_str(&rest[..i]);
        let end = rest[i..].find("}}").unwrap() + i;
        let key = rest[i + 3..end].trim().strip_prefix("matrix.").unwrap_or_else(|| panic!("{script}"));
        text.push_str(entry[key].as_str().unwrap());
        rest = &rest[end + 2..];
    }
    text.push_str(rest);
    let path = format!("{path_dir}:{}", std::env::var("PATH").unwrap());
    let out = env
        .iter()
        .fold(duct::cmd!("bash", "-e", "-c", &text), |c, (k, v)| c.env(k, v))
        .dir(cwd)
        .env("PATH", path)
        .env("GITHUB_OUTPUT", output)
        .stdout_capture()
        .stderr_capture()
        .unchecked()
        .run()
        .unwrap();
    assert!(
        out.status.success(),
        "step failed in {cwd}:\n{text}\n--- stdout\n{}\n--- stderr\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

/// The generated workflow, run here job by job: every `run` step of the matrix job, of one
/// build job per matrix entry (each in a fresh clone, as actions/checkout gives) and of the
/// join job (with the artifacts laid out as actions/download-artifact lays them), but the
/// upload. `nix` is real (offline, so a shim on PATH adds the orchestrator override to `nix
/// build` and stands this kernel-builder in for `nix run --inputs-from . kernel-builder` and
/// its `nix build`). The joined build/ passes upload's local checks and has the NAR hashes of
/// a native build; the build jobs run again with `KERNEL_BUILDER_CI_BUILD=native` (on the
/// runner, through the compile cache) join into the same `hashes.json`; an artifact
/// downloaded twice fails the join.
#[test]
#[cfg_attr(not(feature = "nix-tests"), ignore = "needs Nix: cargo test --features nix-tests")]
fn the_generated_workflow_runs_here() {
    let tmp = tempfile::tempdir().unwrap();
    let root = Utf8Path::from_path(tmp.path()).unwrap();
    let project = init_project(root, &["--name", "myorg/vadd", "--", "vadd"]);
    super::nix::git(project.as_std_path(), &["commit", "-q", "-m", "init"]);
    let wf_text = std::fs::read_to_string(project.join(".github/workflows/build.yml")).unwrap();
    let wf: Value = serde_norway::from_str(&wf_text).unwrap();

    // The shim: bin/nix, and kb/bin/kernel-builder (this build) for `--inputs-from` links.
    let kb_bin = Utf8PathBuf::from_path_buf(crate::util::kb_path()).unwrap();
    let kb_dir = root.join("kb");
    std::fs::create_dir_all(kb_dir.join("bin")).unwrap();
    std::os::unix::fs::symlink(&kb_bin, kb_dir.join("bin/kernel-builder")).unwrap();
    let shim = root.join("shim");
    std::fs::create_dir(&shim).unwrap();
    let real_nix = duct::cmd!("bash", "-c", "command -v nix").read().unwrap();
    let orch = super::nix::orchestrator();
    std::fs::write(
        shim.join("nix"),
        format!(
            r#"#!/bin/bash
set -e
case " $* " in
  *" run --inputs-from . kernel-builder -- "*)
    args=("$@"); for i in "${{!args[@]}}"; do [ "${{args[$i]}}" = -- ] && break; done
    exec {kb_bin} "${{args[@]:$((i + 1))}}" ;;
  *" build --inputs-from . kernel-builder --out-link "*)
    ln -sfn {kb_dir} "${{@: -1}}"; exit 0 ;;
  *" build "*)
    shift; exec {real_nix} build --override-input kernel-builder/orchestrator path:{orch} "$@" ;;
esac
echo "shim: unexpected nix $*" >&2; exit 1
"#,
            orch = orch.display()
        ),
    )
    .unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(shim.join("nix"), std::fs::Permissions::from_mode(0o755)).unwrap();

    let clone = |name: &str| -> Utf8PathBuf {
        let dir = root.join(name);
        super::nix::git(root.as_std_path(), &["clone", "-q", project.as_str(), dir.as_str()]);
        dir
    };
    let no_matrix = serde_json::json!({});
    let output = root.join("github-output");

    // matrix
    let m_dir = clone("job-matrix");
    for script in runs(&wf["jobs"]["matrix"]) {
        run_step(&script, &no_matrix, &m_dir, &shim, &output, &[]);
    }
    let out_text = std::fs::read_to_string(&output).unwrap();
    let line = out_text.lines().find_map(|l| l.strip_prefix("matrix=")).unwrap();
    let matrix: Value = serde_json::from_str(line).unwrap();
    let entries = matrix["include"].as_array().unwrap();
    assert_eq!(
        entries.iter().map(|e| e["id"].as_str().unwrap()).collect::<Vec<_>>(),
        ["torch-cuda", "torch-rocm", "torch-xpu"]
    );

    // build, one clone per entry; the artifact goes where download-artifact puts it. Once as
    // the workflow is written (Nix), once with KERNEL_BUILDER_CI_BUILD=native (its compile
    // cache steps are `uses` steps, GitHub's own).
    let build_steps = runs_with_env(&wf, &wf["jobs"]["build"]);
    assert!(
        build_steps.iter().all(|(_, env)| env.contains(&("KERNEL_BUILDER_CI_BUILD".into(), "nix".into()))),
        "the workflow builds with Nix unless told otherwise"
    );
    let build_jobs = |mode: &str| -> Utf8PathBuf {
        let artifacts = root.join(format!("artifacts-{mode}"));
        for entry in entries {
            let id = entry["id"].as_str().unwrap();
            let dir = clone(&format!("job-build-{mode}-{id}"));
            for (script, env) in &build_steps {
                let mut env = env.clone();
                for (k, v) in env.iter_mut() {
                    if k == "KERNEL_BUILDER_CI_BUILD" {
                        *v = mode.into();
                    }
                }
                run_step(script, entry, &dir, &shim, &output, &env);
            }
            assert_eq!(dir.join("result").exists(), mode == "nix", "{mode} {id}");
            let a = artifacts.join(format!("cells-{id}"));
            std::fs::create_dir_all(&a).unwrap();
            std::fs::copy(dir.join("cells.tar"), a.join("cells.tar")).unwrap();
        }
        artifacts
    };
    let artifacts = build_jobs("nix");
    let native_artifacts = build_jobs("native");

    // join, without the upload (it needs the Hub and a token; its local checks run below).
    let join = &wf["jobs"]["join"];
    let run_join = |dir: &Utf8Path| {
        for step in join["steps"].as_array().unwrap() {
            if let Some(script) = step["run"].as_str() {
                if step.get("if").is_none() {
                    run_step(script, &no_matrix, dir, &shim, &output, &[]);
                }
            }
        }
    };
    let j_dir = clone("job-join");
    copy_tree(&artifacts, &j_dir.join("artifacts"));
    run_join(&j_dir);
    let built: Value =
        serde_json::from_str(&std::fs::read_to_string(j_dir.join("build/hashes.json")).unwrap()).unwrap();
    let variants: Vec<&String> = built["variants"].as_object().unwrap().keys().collect();
    assert_eq!(variants, ["torch-cuda", "torch-rocm", "torch-xpu"]);
    let said = kernel_builder::report::Collected::default();
    let options = kernel_builder::hub::UploadOptions {
        dir: j_dir.clone(),
        repo_id: None,
        branch: None,
        create_pr: false,
        dry_run: true,
        force: false,
        private: false,
        progress: false,
        build_toml: kernel_builder::kernel::load(&j_dir).map(|k| k.config).map_err(|e| e.render()),
    };
    let prepared = kernel_builder::hub::prepare(&options, &said).unwrap();
    assert_eq!(prepared.variants, ["torch-cuda", "torch-rocm", "torch-xpu"]);
    assert_eq!(
        said.lines()[..3],
        ["hashing build/torch-cuda/ …", "hashing build/torch-rocm/ …", "hashing build/torch-xpu/ …"]
    );
    assert_eq!(prepared.repo_id, "myorg/vadd");

    // The same NAR hashes as a native build of the same source.
    let native = clone("native");
    run_ok(&native, &["build-and-copy", "--nix", "never", "."]);
    let native_manifest: Value =
        serde_json::from_str(&std::fs::read_to_string(native.join("build/hashes.json")).unwrap()).unwrap();
    assert_eq!(built["variants"], native_manifest["variants"]);
    assert_eq!(built["source"], native_manifest["source"]);

    // The native jobs' artifacts join into the same bundle.
    let jn = clone("job-join-native");
    copy_tree(&native_artifacts, &jn.join("artifacts"));
    run_join(&jn);
    assert_eq!(
        std::fs::read_to_string(jn.join("build/hashes.json")).unwrap(),
        std::fs::read_to_string(j_dir.join("build/hashes.json")).unwrap()
    );

    // A variant that two artifacts hold fails the join.
    let j2 = clone("job-join-twice");
    copy_tree(&artifacts, &j2.join("artifacts"));
    copy_tree(&artifacts.join("cells-torch-cuda"), &j2.join("artifacts/cells-torch-cuda-again"));
    let steps: Vec<&str> =
        join["steps"].as_array().unwrap().iter().filter_map(|s| s["run"].as_str()).collect();
    let join_step = steps.iter().find(|s| s.contains("nix-support join")).unwrap();
    for s in &steps[..steps.iter().position(|s| s == join_step).unwrap()] {
        run_step(s, &no_matrix, &j2, &shim, &output, &[]);
    }
    let text = join_step.to_string();
    let out = duct::cmd!("bash", "-e", "-c", &text)
        .dir(&j2)
        .env("PATH", format!("{shim}:{}", std::env::var("PATH").unwrap()))
        .stderr_capture()
        .stdout_null()
        .unchecked()
        .run()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("`torch-cuda` is in both"), "{err}");
    assert!(
        !j2.join("build").exists() || !j2.join("build/hashes.json").exists(),
        "no manifest for a bad join"
    );
}

/// Copy the directory tree `from` to `to` (files and directories).
fn copy_tree(from: &Utf8Path, to: &Utf8Path) {
    for e in walkdir::WalkDir::new(from) {
        let e = e.unwrap();
        let dest = to.as_std_path().join(e.path().strip_prefix(from).unwrap());
        if e.file_type().is_dir() {
            std::fs::create_dir_all(&dest).unwrap();
        } else {
            std::fs::copy(e.path(), &dest).unwrap();
        }
    }
}
