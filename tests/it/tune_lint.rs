//! `check-config`'s Helion heuristic lint and the card's "Tuned for" section, on the repository's
//! Helion kernels (`kernels/attention-helion`, `kernels/vector-add-helion`) and on fixtures with a
//! backend without a heuristic and heuristic files Helion never loads.

use std::fs;

use camino::{Utf8Path, Utf8PathBuf};

use crate::util::kb as cmd;

fn repo_kernel(name: &str) -> Utf8PathBuf {
    Utf8PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("kernels").join(name)
}

/// `check-config DIR`: (exit code, stdout, stderr).
fn check_config(dir: &Utf8Path, json: bool) -> (i32, String, String) {
    let mut c = cmd();
    c.arg("check-config").arg(dir);
    if json {
        c.arg("--json");
    }
    let out = c.output().unwrap();
    (
        out.status.code().unwrap(),
        String::from_utf8(out.stdout).unwrap(),
        String::from_utf8(out.stderr).unwrap(),
    )
}

fn write(dir: &Utf8Path, rel: &str, text: &str) {
    let p = dir.join(rel);
    fs::create_dir_all(p.parent().unwrap()).unwrap();
    fs::write(p, text).unwrap();
}

/// The shipped attention kernel lists cuda and ships an sm90 heuristic that tunes both of its
/// `@helion.aot_kernel`s: no warning, the summary as before.
#[test]
fn attention_helion_checks_clean() {
    let (code, out, err) = check_config(&repo_kernel("attention-helion"), false);
    assert_eq!(code, 0, "{err}");
    assert_eq!(
        out,
        "name: attention-helion\ngeneration: edition 6\nbackends: cuda\nframework: torch-noarch\nkernels: none\n\
         noarch backends: cuda\nmatrix: 2026-12 (revision 2026-12-01)\n"
    );
    assert_eq!(err, "");
    let (_, json, _) = check_config(&repo_kernel("attention-helion"), true);
    let v: serde_json::Value = serde_json::from_str(&json).unwrap();
    assert_eq!(v.get("helion_warnings"), Some(&serde_json::json!([])), "{v}");
}

/// `--json` always has `helion_warnings`, as README documents it: `[]` for a kernel that does
/// not use Helion (found by review: the key was left out when empty).
#[test]
fn json_has_empty_helion_warnings_for_a_kernel_without_helion() {
    for kernel in ["relu", "silu-and-mul", "relu-tvm-ffi"] {
        let (code, json, err) = check_config(&repo_kernel(kernel), true);
        assert_eq!(code, 0, "{kernel}: {err}");
        let v: serde_json::Value = serde_json::from_str(&json).unwrap();
        assert_eq!(v.get("helion_warnings"), Some(&serde_json::json!([])), "{kernel}: {v}");
    }
}

/// vector-add-helion lists cuda, rocm and xpu but ships only a CUDA heuristic.
#[test]
fn vector_add_helion_warns_about_rocm_and_xpu() {
    let (code, _, err) = check_config(&repo_kernel("vector-add-helion"), false);
    assert_eq!(code, 0, "{err}");
    let src = "torch-ext/vector_add_helion/vector_add.py";
    let expected = ["rocm", "xpu"]
        .iter()
        .map(|b| {
            let (noun, a) = if *b == "rocm" { ("ROCm GPU", "a") } else { ("Intel XPU", "an") };
            format!(
                "helion-heuristic-missing\n\n  ! {src}: backend `{b}` has no Helion heuristic for `vector_add`: no \
                 `torch-ext/vector_add_helion/_helion_aot_vector_add_{b}_<compute>.py` with a compute that \
                 {a} {noun} reports, so on every {noun} Helion runs its default config, untuned\n  help: run `kernel-builder tune` on {a} {noun} of the kind users have; it \
                 writes the heuristic beside `{src}`\n\n"
            )
        })
        .collect::<String>();
    assert_eq!(err, expected);
    let (code, json, _) = check_config(&repo_kernel("vector-add-helion"), true);
    assert_eq!(code, 0);
    let v: serde_json::Value = serde_json::from_str(&json).unwrap();
    let got: Vec<(&str, &str)> = v["helion_warnings"]
        .as_array()
        .unwrap_or_else(|| panic!("no helion_warnings array: {v}"))
        .iter()
        .map(|w| (w["rule"].as_str().unwrap(), w["file"].as_str().unwrap()))
        .collect();
    assert_eq!(got, [("helion-heuristic-missing", src), ("helion-heuristic-missing", src)], "{v}");
}

const HELION_TOML: &str = r#"[general]
name = "toy-helion"
version = 1
edition = 5
license = "Apache-2.0"
backends = ["cuda", "rocm"]
python-depends = ["helion"]

[torch-noarch]
"#;

const OP_PY: &str = "import helion\nimport torch\n\n\n@helion.aot_kernel(\n    static_shapes=True,\n)\ndef scale(x: torch.Tensor) -> torch.Tensor:\n    return x\n\n\n@helion.aot_kernel()\ndef shift(x: torch.Tensor) -> torch.Tensor:\n    return x\n\n\ndef helper(x):\n    return x\n";

fn heuristic(kernels: &[&str]) -> String {
    kernels
        .iter()
        .map(|k| format!("def key_{k}(*args) -> int:\n    return 0\n\n\ndef autotune_{k}(*args) -> dict:\n    return {{}}\n\n\n"))
        .collect()
}

/// A kernel for cuda and rocm with no ROCm heuristic and five files Helion never loads, plus an
/// sm90 file that misses one kernel and tunes one the source no longer has.
#[test]
fn missing_backend_and_never_picked_files_warn() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = Utf8Path::from_path(tmp.path()).unwrap();
    write(dir, "build.toml", HELION_TOML);
    let pkg = "torch-ext/toy_helion";
    write(dir, &format!("{pkg}/__init__.py"), "from .op import scale, shift\n");
    write(dir, &format!("{pkg}/op.py"), OP_PY);
    write(dir, &format!("{pkg}/_helion_aot_op_cuda_sm90.py"), &heuristic(&["scale", "gone"]));
    write(dir, &format!("{pkg}/_helion_aot_op_cuda_sm80.py"), &heuristic(&["scale", "shift"]));
    for never in [
        "_helion_aot_op_cuda_sm90a.py",
        "_helion_aot_op_xpu_Intel(R) Arc(TM) A770.py",
        "_helion_aot_ops_cuda_sm90.py",
        "_helion_aot_op_nvidia_sm90.py",
        "_helion_aot_op.py",
    ] {
        write(dir, &format!("{pkg}/{never}"), &heuristic(&["scale", "shift"]));
    }
    let (code, out, err) = check_config(dir, false);
    assert_eq!(code, 0, "{err}");
    assert!(out.starts_with("name: toy-helion\n"), "{out}");
    insta::assert_snapshot!("helion_lint_fixture", err);

    let (code, json, _) = check_config(dir, true);
    assert_eq!(code, 0);
    let v: serde_json::Value = serde_json::from_str(&json).unwrap();
    let got: Vec<(String, String)> = v["helion_warnings"]
        .as_array()
        .unwrap()
        .iter()
        .map(|w| (w["rule"].as_str().unwrap().to_owned(), w["file"].as_str().unwrap().to_owned()))
        .collect();
    let f = |rule: &str, name: &str| (rule.to_owned(), format!("{pkg}/{name}"));
    assert_eq!(
        got,
        [
            f("helion-heuristic-missing", "op.py"),
            f("helion-heuristic-never-used", "_helion_aot_op.py"),
            f("helion-heuristic-incomplete", "_helion_aot_op_cuda_sm90.py"),
            f("helion-heuristic-stale", "_helion_aot_op_cuda_sm90.py"),
            f("helion-heuristic-never-used", "_helion_aot_op_cuda_sm90a.py"),
            f("helion-heuristic-never-used", "_helion_aot_op_nvidia_sm90.py"),
            f("helion-heuristic-never-used", "_helion_aot_op_xpu_Intel(R) Arc(TM) A770.py"),
            f("helion-heuristic-never-used", "_helion_aot_ops_cuda_sm90.py"),
        ]
    );
}

/// A cuda-only toy Helion kernel with `torch-ext/toy_helion/op.py` and no heuristic yet.
fn cuda_only_kernel() -> tempfile::TempDir {
    let tmp = tempfile::tempdir().unwrap();
    let dir = Utf8Path::from_path(tmp.path()).unwrap();
    write(dir, "build.toml", &HELION_TOML.replace("[\"cuda\", \"rocm\"]", "[\"cuda\"]"));
    write(dir, "torch-ext/toy_helion/op.py", OP_PY);
    tmp
}

/// Two sources whose stems both fit `_helion_aot_op_cuda_sm90.py`: Helion asks for that exact
/// name for `op.py` on an sm90 GPU (kind `cuda`, compute `sm90`), never for `op_cuda.py` (whose
/// file would be `_helion_aot_op_cuda_cuda_sm90.py`). Found re-reading the lint: it took the
/// longest stem, called the file unused and `op.py` untuned.
#[test]
fn a_heuristic_belongs_to_the_stem_helion_would_look_it_up_for() {
    let (tmp, pkg) = (cuda_only_kernel(), "torch-ext/toy_helion");
    let dir = Utf8Path::from_path(tmp.path()).unwrap();
    write(dir, &format!("{pkg}/op_cuda.py"), OP_PY);
    write(dir, &format!("{pkg}/_helion_aot_op_cuda_sm90.py"), &heuristic(&["scale", "shift"]));
    let (code, json, err) = check_config(dir, true);
    assert_eq!(code, 0, "{err}");
    let v: serde_json::Value = serde_json::from_str(&json).unwrap();
    let got: Vec<(&str, &str)> = v["helion_warnings"]
        .as_array()
        .unwrap()
        .iter()
        .map(|w| (w["rule"].as_str().unwrap(), w["file"].as_str().unwrap()))
        .collect();
    assert_eq!(got, [("helion-heuristic-missing", format!("{pkg}/op_cuda.py").as_str())], "{v}");
}

/// The lint sees what the build ships: a heuristic that is a symbolic link counts (the build
/// follows links), and a file whose name is not UTF-8 and not `.py` is no reason to fail the
/// check (found by review: a false "missing", and `--json` printing nothing but an error).
#[test]
fn linked_heuristics_count_and_odd_file_names_are_ignored() {
    use std::os::unix::ffi::OsStrExt;
    let (tmp, pkg) = (cuda_only_kernel(), "torch-ext/toy_helion");
    let dir = Utf8Path::from_path(tmp.path()).unwrap();
    write(dir, "tuned/heuristic.py", &heuristic(&["scale", "shift"]));
    std::os::unix::fs::symlink(
        dir.join("tuned/heuristic.py"),
        dir.join(format!("{pkg}/_helion_aot_op_cuda_sm90.py")),
    )
    .unwrap();
    let odd = std::ffi::OsStr::from_bytes(b"caf\xe9.bin");
    fs::write(dir.join(pkg).as_std_path().join(odd), "data").unwrap();
    let (code, json, err) = check_config(dir, true);
    assert_eq!(code, 0, "{err}");
    let v: serde_json::Value = serde_json::from_str(&json).unwrap();
    assert_eq!(v["helion_warnings"], serde_json::json!([]), "{v}");
}

/// `cuda-capabilities = ["8.0"]`: the loader refuses sm90 and newer GPUs, so the sm90 file is
/// never loaded, while the sm80 one serves 8.0–8.9.
#[test]
fn declared_capabilities_leave_a_heuristic_unused() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = Utf8Path::from_path(tmp.path()).unwrap();
    write(
        dir,
        "build.toml",
        &HELION_TOML
            .replace("[\"cuda\", \"rocm\"]", "[\"cuda\"]")
            .replace("[torch-noarch]\n", "[torch-noarch]\ncuda-capabilities = [\"8.0\"]\n"),
    );
    let pkg = "torch-ext/toy_helion";
    write(dir, &format!("{pkg}/op.py"), OP_PY);
    write(dir, &format!("{pkg}/_helion_aot_op_cuda_sm90.py"), &heuristic(&["scale", "shift"]));
    write(dir, &format!("{pkg}/_helion_aot_op_cuda_sm80.py"), &heuristic(&["scale", "shift"]));
    let (code, json, err) = check_config(dir, true);
    assert_eq!(code, 0, "{err}");
    let v: serde_json::Value = serde_json::from_str(&json).unwrap();
    assert_eq!(
        v["helion_warnings"],
        serde_json::json!([{
            "rule": "helion-heuristic-never-used",
            "file": format!("{pkg}/_helion_aot_op_cuda_sm90.py"),
            "message": "Helion never loads `_helion_aot_op_cuda_sm90.py`: `[torch-noarch] cuda-capabilities` (8.0) \
                        lets the loader run the kernel only on GPUs that find another heuristic first (sm80, sm86, \
                        sm87, sm89 take `sm80`)",
            "help": "add \"9.0\" (the capability it was tuned for) to `[torch-noarch] cuda-capabilities`, or \
                     delete the file",
        }])
    );
}

fn card_of(dir: &Utf8Path) -> String {
    let loaded = kernel_builder::kernel::load(dir).unwrap();
    let card = fs::read_to_string(dir.join("CARD.md")).unwrap_or_else(|_| "# card\n".to_owned());
    kernel_builder::tune::card::with_tuning(dir, &loaded.config, &card).unwrap()
}

/// The published card of attention-helion: CARD.md, then the GPUs it is tuned for and the last
/// tune's per-shape figures from `tuning/cuda_sm90/tune.json`. Rendering again is a no-op.
#[test]
fn attention_helion_card_lists_the_h200_tune() {
    let dir = repo_kernel("attention-helion");
    let card = card_of(&dir);
    insta::assert_snapshot!("attention_helion_card", card);
    let loaded = kernel_builder::kernel::load(&dir).unwrap();
    assert_eq!(kernel_builder::tune::card::with_tuning(&dir, &loaded.config, &card).unwrap(), card);
}

/// A Helion kernel without a heuristic says it is not pre-tuned; a kernel without helion gets
/// its card unchanged.
#[test]
fn untuned_and_non_helion_cards() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = Utf8Path::from_path(tmp.path()).unwrap();
    write(dir, "build.toml", HELION_TOML);
    write(dir, "torch-ext/toy_helion/op.py", OP_PY);
    assert_eq!(
        card_of(dir),
        "# card\n\n<!-- kernel-builder: tuned-for (generated from tuning/*/tune.json; edits here are replaced) -->\n\
         ## Tuned for\n\nNot pre-tuned: no Helion heuristic is shipped, so on every GPU Helion runs its default \
         config for each kernel (correct, not tuned). `kernel-builder tune` on a GPU makes one.\n\
         <!-- /kernel-builder: tuned-for -->\n"
    );
    // A heuristic without its tune record: listed, with the GPUs that use it, figures unknown.
    write(dir, "torch-ext/toy_helion/_helion_aot_op_cuda_sm80.py", &heuristic(&["scale", "shift"]));
    let card = card_of(dir);
    assert!(
        card.contains(
            "| unknown (no `tuning/cuda_sm80/tune.json`) | cuda sm80 | sm80, sm86, sm87, sm89, sm90, sm100, sm103, \
             sm110, sm120, sm121 | | | | | | | | |\n"
        ),
        "{card}"
    );
    write(dir, "build.toml", &HELION_TOML.replace("python-depends = [\"helion\"]\n", ""));
    assert_eq!(card_of(dir), "# card\n");
}

/// A tune record that is not one fails with the file named.
#[test]
fn a_broken_tune_record_is_an_error_naming_it() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = Utf8Path::from_path(tmp.path()).unwrap();
    write(dir, "build.toml", HELION_TOML);
    write(dir, "torch-ext/toy_helion/op.py", OP_PY);
    write(dir, "torch-ext/toy_helion/_helion_aot_op_cuda_sm90.py", &heuristic(&["scale", "shift"]));
    write(dir, "tuning/cuda_sm90/tune.json", "{\"format\": 2}");
    let loaded = kernel_builder::kernel::load(dir).unwrap();
    let e = kernel_builder::tune::card::with_tuning(dir, &loaded.config, "# card\n").unwrap_err();
    assert_eq!(
        format!("{e:#}").split(": missing field").next().unwrap(),
        format!("`{dir}/tuning/cuda_sm90/tune.json` is not a tune record (`kernel-builder tune` writes it)")
    );
}
