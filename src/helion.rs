//! Helion's names: the AOT heuristic file `_helion_aot_<source stem>_<device kind>_<compute>.py`
//! that Helion's runner writes beside a kernel's source file and looks up at load time
//! (reference: kernels-loader-and-helion.md B6, B7), the compute names a device reports, and the
//! names of the data files its AOT runner writes for a hardware id.
//!
//! One rule reads such a name ([`split`]); the build uses it to ship a heuristic only in its
//! backend's variant ([`parse`]), `tune`'s lint and the card to find the source a heuristic
//! belongs to. The stem may itself hold underscores and even a device kind, so a name can be
//! cut in several places: a cut whose stem is a source beside the file wins (Helion asks for
//! the exact name of a source and a device), then one whose remainder is a device Helion can
//! report, then one whose kind is known, then the longest stem.

/// Every heuristic file name starts with this.
pub const PREFIX: &str = "_helion_aot_";

/// … and ends with this.
pub const SUFFIX: &str = ".py";

/// The device kinds a heuristic name can carry: those Helion's `get_hardware_info()` reports
/// (`cuda`, `rocm`, `xpu`, `tpu`), and `cpu`, whose files the build ships in the CPU variant
/// although Helion never looks one up.
pub const DEVICE_KINDS: [&str; 5] = ["cuda", "rocm", "xpu", "tpu", "cpu"];

/// The heuristic file name of a source stem and a device (the inverse of the parse, for its
/// round-trip test; the build reads names, it never makes one).
#[cfg(test)]
fn file_name(stem: &str, kind: &str, compute: &str) -> String {
    format!("{PREFIX}{stem}_{kind}_{compute}{SUFFIX}")
}

/// The file in which Helion's AOT runner records the configs it searched on the hardware
/// `hardware_id` (`cuda_NVIDIA_H200_13.0`; reference B6).
pub fn tuned_configs_file(hardware_id: &str) -> String {
    format!("tuned_configs_{hardware_id}.json")
}

/// The file in which Helion's AOT runner summarizes the heuristic it fitted on `hardware_id`.
pub fn heuristic_summary_file(hardware_id: &str) -> String {
    format!("heuristic_summary_{hardware_id}.json")
}

/// The file in which Helion's AOT runner writes its measurements (one row per shape and config).
pub fn measurements_file(hardware_id: &str) -> String {
    format!("measurements_{hardware_id}.csv")
}

/// Whether `name` is named like a heuristic file (`_helion_aot_*.py`), well-formed or not.
pub fn is_heuristic(name: &str) -> bool {
    name.starts_with(PREFIX) && name.ends_with(SUFFIX)
}

/// `sm<major><minor>` as `(major, minor)`: the last digit is the minor (`sm90` → (9, 0),
/// `sm121` → (12, 1)). `None` for anything else (`sm90a`, `sm_90`, `9.0`, `sm090`).
pub fn parse_sm(compute: &str) -> Option<(u32, u32)> {
    let digits = compute.strip_prefix("sm")?;
    if digits.len() < 2 || !digits.bytes().all(|b| b.is_ascii_digit()) || digits.starts_with('0') {
        return None;
    }
    let n: u32 = digits.parse().ok()?;
    Some((n / 10, n % 10))
}

/// Whether a device of `kind` can report `compute`: `sm<major><minor>` for CUDA, `gfx` and hex
/// digits for ROCm, any non-empty name for XPU and TPU.
pub fn compute_is_reported(kind: &str, compute: &str) -> bool {
    match kind {
        "cuda" => parse_sm(compute).is_some(),
        "rocm" => compute.strip_prefix("gfx").is_some_and(|h| {
            (3..=4).contains(&h.len()) && h.bytes().all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
        }),
        "xpu" | "tpu" => !compute.is_empty(),
        _ => false,
    }
}

/// A heuristic file name cut after its source stem.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Split<'a> {
    /// The source stem.
    pub stem: &'a str,
    /// `<kind>` and `<compute>` after `<stem>_`, cut at the first `_` (either may be empty);
    /// `None` when nothing follows the stem or no `_` does.
    pub device: Option<(&'a str, &'a str)>,
}

/// Cut the heuristic file name `name` after a stem `is_stem` accepts (the stems of the sources
/// beside it; `|_| true` when they are not known): of the stems the name can start with, the
/// one followed by a device Helion can report ([`compute_is_reported`]), else by a known kind
/// ([`DEVICE_KINDS`]), else the longest. `None`: not a heuristic name, or no stem fits.
pub fn split<'a>(name: &'a str, is_stem: impl Fn(&str) -> bool) -> Option<Split<'a>> {
    let body = name.strip_prefix(PREFIX)?.strip_suffix(SUFFIX)?;
    let ends = body.match_indices('_').map(|(i, _)| i).chain([body.len()]);
    ends.filter(|&i| i > 0)
        .map(|i| Split { stem: &body[..i], device: body.get(i + 1..).and_then(|rest| rest.split_once('_')) })
        .filter(|s| is_stem(s.stem))
        .max_by_key(|s| {
            let reported = s.device.is_some_and(|(k, c)| compute_is_reported(k, c));
            let known = s.device.is_some_and(|(k, _)| DEVICE_KINDS.contains(&k));
            (reported, known, s.stem.len())
        })
}

/// A well-formed heuristic name: a known device kind and a non-empty stem and compute.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HeuristicName {
    /// The kernel source file's stem (`vector_add`).
    pub stem: String,
    /// One of [`DEVICE_KINDS`].
    pub kind: String,
    /// What the device reports (`sm90`, `gfx950`, a device name).
    pub compute: String,
}

/// Read `name` by [`split`] with no sources known; `None` unless it names a known device kind
/// and a compute.
pub fn parse(name: &str) -> Option<HeuristicName> {
    let s = split(name, |_| true)?;
    let (kind, compute) = s.device?;
    (DEVICE_KINDS.contains(&kind) && !compute.is_empty()).then(|| HeuristicName {
        stem: s.stem.to_owned(),
        kind: kind.to_owned(),
        compute: compute.to_owned(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn parsed(name: &str) -> Option<(String, String, String)> {
        parse(name).map(|h| (h.stem, h.kind, h.compute))
    }

    fn owned(s: &str, k: &str, c: &str) -> Option<(String, String, String)> {
        Some((s.to_owned(), k.to_owned(), c.to_owned()))
    }

    #[test]
    fn names_of_the_build() {
        assert_eq!(parsed("_helion_aot_vector_add_cuda_sm90.py"), owned("vector_add", "cuda", "sm90"));
        assert_eq!(parsed("_helion_aot_op_rocm_gfx950.py"), owned("op", "rocm", "gfx950"));
        // The stem may contain a device kind: the cut before a reported device wins.
        assert_eq!(parsed("_helion_aot_cuda_utils_xpu_max_1550.py"), owned("cuda_utils", "xpu", "max_1550"));
        assert_eq!(parsed("_helion_aot_op_cpu_x86.py"), owned("op", "cpu", "x86"));
        assert_eq!(parsed("_helion_aot_vector_add.py"), None);
        assert_eq!(parsed("_helion_aot_cuda_sm90.py"), None);
        assert_eq!(parsed("_helion_aot_x_cuda_.py"), None);
        assert_eq!(parsed("_helion_aot_x_gpu_sm90.py"), None, "not a device kind");
        assert_eq!(parsed("heuristic_vector_add.py"), None);
    }

    #[test]
    fn the_sources_beside_the_file_decide_the_stem() {
        let name = "_helion_aot_op_cuda_cuda_sm90.py";
        let among = |stems: &'static [&'static str]| split(name, move |s| stems.contains(&s));
        assert_eq!(
            among(&["op", "op_cuda"]).unwrap(),
            Split { stem: "op_cuda", device: Some(("cuda", "sm90")) }
        );
        assert_eq!(among(&["op"]).unwrap(), Split { stem: "op", device: Some(("cuda", "cuda_sm90")) });
        assert_eq!(among(&["other"]), None);
        // A stem with nothing after it, or no `_<kind>_<compute>`.
        let s = split("_helion_aot_op.py", |s| s == "op").unwrap();
        assert_eq!(s, Split { stem: "op", device: None });
        let s = split("_helion_aot_op_cuda.py", |s| s == "op").unwrap();
        assert_eq!(s, Split { stem: "op", device: None });
        assert_eq!(split("_helion_aot_op_gpu_x.py", |s| s == "op").unwrap().device, Some(("gpu", "x")));
    }

    #[test]
    fn reported_computes() {
        assert_eq!(parse_sm("sm90"), Some((9, 0)));
        assert_eq!(parse_sm("sm121"), Some((12, 1)));
        for bad in ["sm90a", "sm_90", "9.0", "sm9", "sm090", "SM90"] {
            assert_eq!(parse_sm(bad), None, "{bad}");
        }
        assert!(compute_is_reported("rocm", "gfx90a") && !compute_is_reported("rocm", "mi300"));
        assert!(compute_is_reported("xpu", "Intel(R) Arc(TM) A770") && !compute_is_reported("xpu", ""));
        assert!(!compute_is_reported("cpu", "x86"));
        assert!(is_heuristic("_helion_aot_x.py") && !is_heuristic("_helion_aot_x.pyc"));
        assert_eq!(tuned_configs_file("cuda_NVIDIA_H200_13.0"), "tuned_configs_cuda_NVIDIA_H200_13.0.json");
        assert_eq!(heuristic_summary_file("h"), "heuristic_summary_h.json");
        assert_eq!(measurements_file("h"), "measurements_h.csv");
    }

    /// A stem word: lower-case letters and digits, never a device kind.
    fn word() -> impl Strategy<Value = String> {
        "[a-z][a-z0-9]{0,6}".prop_filter("a device kind", |w| !DEVICE_KINDS.contains(&w.as_str()))
    }

    /// A compute as a device of `kind` reports it, without `_` (what tune writes).
    fn device() -> impl Strategy<Value = (String, String)> {
        prop_oneof![
            (7u32..13, 0u32..10).prop_map(|(a, b)| ("cuda".to_owned(), format!("sm{a}{b}"))),
            "gfx[0-9][0-9a-f]{1,2}".prop_map(|c| ("rocm".to_owned(), c)),
            "[A-Za-z0-9() ]{1,12}".prop_map(|c| ("xpu".to_owned(), c)),
            "v[0-9][a-z]?".prop_map(|c| ("tpu".to_owned(), c)),
        ]
    }

    proptest! {
        /// What tune writes reads back as what it was written from, sources known or not.
        #[test]
        fn a_written_name_reads_back(words in proptest::collection::vec(word(), 1..4), (kind, compute) in device()) {
            let stem = words.join("_");
            let name = file_name(&stem, &kind, &compute);
            prop_assert_eq!(parsed(&name), owned(&stem, &kind, &compute));
            let s = split(&name, |s| s == stem).unwrap();
            prop_assert_eq!((s.stem, s.device), (stem.as_str(), Some((kind.as_str(), compute.as_str()))));
        }

        /// Any name: no panic, and what is read renders back to the same name.
        #[test]
        fn a_reading_renders_back(body in "[a-z_0-9A-Zé]{0,24}") {
            let name = format!("{PREFIX}{body}{SUFFIX}");
            if let Some(h) = parse(&name) {
                prop_assert_eq!(file_name(&h.stem, &h.kind, &h.compute), name.clone());
            }
            if let Some(s) = split(&name, |_| true) {
                prop_assert!(body.starts_with(s.stem) && !s.stem.is_empty());
            }
        }
    }
}
