//! What a native build says while it runs: the up-front note on how much a build compiles
//! (CUDA cells compile every source once per capability, which is what makes them long) and
//! Ninja's own `[n/m]` counter, read from its output as each compile step starts.

use std::sync::Arc;

use camino::Utf8Path;

use super::compiled::plan::PlannedVariant;
use crate::codegen;
use crate::config::{Backend, BuildConfig};

/// Where the compile steps of the cell being built on this thread are reported: done and
/// total, as Ninja counts them.
pub type StepSink = Arc<dyn Fn(u64, u64) + Send + Sync>;

thread_local! {
    static STEPS: std::cell::RefCell<Option<StepSink>> = const { std::cell::RefCell::new(None) };
}

/// Report the compile steps of whatever `f` builds on this thread to `sink` (the cells of a
/// bundle are built one per worker thread, each through several layers that need not know).
pub fn with_steps<R>(sink: Option<StepSink>, f: impl FnOnce() -> R) -> R {
    let before = STEPS.with(|s| s.replace(sink));
    let r = f();
    STEPS.with(|s| *s.borrow_mut() = before);
    r
}

/// The sink [`with_steps`] installed on this thread, if any.
pub fn current_steps() -> Option<StepSink> {
    STEPS.with(|s| s.borrow().clone())
}

/// Ninja's status counter at the start of `line`: `[3/10] Building CUDA object …` is
/// `(3, 10)`. Anything else (a compiler message, a malformed or impossible counter) is `None`.
pub fn ninja_counter(line: &str) -> Option<(u64, u64)> {
    let rest = line.strip_prefix('[')?;
    let (counter, _) = rest.split_once(']')?;
    let (done, total) = counter.split_once('/')?;
    let digits = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit());
    if !digits(done) || !digits(total) {
        return None;
    }
    let (done, total) = (done.parse().ok()?, total.parse().ok()?);
    (done <= total && total > 0).then_some((done, total))
}

/// The note printed before a native build that compiles CUDA: how many cells, and per CUDA
/// cell how many CUDA files for how many capabilities, with why that is long and how to build
/// one capability for a quick check. `None` when no CUDA cell is among `cells`.
pub fn build_note(config: &BuildConfig, kernel_dir: &Utf8Path, cells: &[PlannedVariant]) -> Option<String> {
    let cuda: Vec<String> = cells
        .iter()
        .filter_map(|v| v.cell.as_deref())
        .filter(|c| c.backend == Backend::Cuda)
        .map(|cell| {
            let files: usize = config
                .kernels
                .iter()
                .filter(|(n, _)| cell.kernels.contains(n))
                .filter_map(|(_, k)| codegen::expand(kernel_dir, &k.src).ok())
                .map(|s| s.iter().filter(|p| codegen::source_kind(p) == codegen::SourceKind::Cuda).count())
                .sum();
            // In the resolved order (oldest first), each once: the last is the newest.
            let mut caps: Vec<&String> = Vec::new();
            for c in cell.cuda_capabilities.values().flatten() {
                if !caps.contains(&c) {
                    caps.push(c);
                }
            }
            cuda_cell_note(&cell.variant, files, &caps, cell.capabilities_only.is_some())
        })
        .collect();
    if cuda.is_empty() {
        return None;
    }
    Some(format!("building {}; {}", plural(cells.len(), "cell", "cells"), cuda.join("; ")))
}

/// One CUDA cell's part of [`build_note`]; `narrowed`: --cuda-capabilities already narrows it
/// (what is left are parts for other GPUs), so the note suggests nothing.
fn cuda_cell_note(variant: &str, files: usize, caps: &[&String], narrowed: bool) -> String {
    let what = format!(
        "{variant} compiles {} for {}",
        plural(files, "CUDA file", "CUDA files"),
        plural(caps.len(), "capability", "capabilities")
    );
    match caps.last() {
        Some(one) if caps.len() > 1 && !narrowed => format!(
            "{what}: nvcc compiles each file once per capability, expect minutes; \
             --cuda-capabilities {one} builds one for a quick check"
        ),
        _ => what,
    }
}

/// `n` and the noun, singular for 1.
fn plural(n: usize, one: &str, many: &str) -> String {
    format!("{n} {}", if n == 1 { one } else { many })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ninja_counters_are_read_and_everything_else_is_not() {
        assert_eq!(
            ninja_counter("[3/10] Building CUDA object CMakeFiles/_relu.dir/relu/relu.cu.o"),
            Some((3, 10))
        );
        assert_eq!(ninja_counter("[10/10] Linking CXX shared module _relu.so\n"), Some((10, 10)));
        assert_eq!(ninja_counter("[0/1] Re-running CMake..."), Some((0, 1)));
        for other in [
            "ninja: no work to do.",
            "relu.cu(12): error: identifier \"x\" is undefined",
            "[11/10] impossible",
            "[3/0] nothing to do",
            "[a/10] not a number",
            "[3/] missing total",
            "[-1/10] negative",
            " [3/10] indented",
            "[3/10",
            "",
        ] {
            assert_eq!(ninja_counter(other), None, "{other:?}");
        }
    }

    #[test]
    fn a_cuda_cell_note_says_why_it_is_long() {
        let caps: Vec<String> = ["7.5", "8.0", "9.0"].map(String::from).to_vec();
        let refs: Vec<&String> = caps.iter().collect();
        assert_eq!(
            cuda_cell_note("torch212-cxx11-cu130-x86_64-linux", 3, &refs, false),
            "torch212-cxx11-cu130-x86_64-linux compiles 3 CUDA files for 3 capabilities: nvcc compiles \
             each file once per capability, expect minutes; --cuda-capabilities 9.0 builds one for a quick check"
        );
        assert_eq!(
            cuda_cell_note("torch212-cxx11-cu130-x86_64-linux", 1, &refs[2..], false),
            "torch212-cxx11-cu130-x86_64-linux compiles 1 CUDA file for 1 capability"
        );
        // A quick check that kept a part for other GPUs at its own capability.
        assert_eq!(
            cuda_cell_note("torch212-cxx11-cu130-x86_64-linux", 2, &refs[1..], true),
            "torch212-cxx11-cu130-x86_64-linux compiles 2 CUDA files for 2 capabilities"
        );
    }

    #[test]
    fn steps_reach_the_sink_of_this_thread_only_while_installed() {
        let seen = Arc::new(std::sync::Mutex::new(Vec::new()));
        let s2 = Arc::clone(&seen);
        let sink: StepSink = Arc::new(move |d, t| s2.lock().unwrap().push((d, t)));
        with_steps(Some(sink), || {
            current_steps().expect("installed")(1, 4);
            std::thread::spawn(|| assert!(current_steps().is_none(), "another thread's")).join().unwrap();
        });
        assert!(current_steps().is_none());
        assert_eq!(*seen.lock().unwrap(), [(1, 4)]);
    }
}
