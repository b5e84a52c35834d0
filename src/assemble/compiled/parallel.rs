//! How many compiles a native compiled cell runs at once: Ninja's `-j` and nvcc's `--threads`,
//! from the cores and the memory this process may use, the cells built at once, and the cell's
//! translation units and CUDA targets.
//!
//! # The rule ([`plan`])
//!
//! 1. The machine's share for one cell: its cores and its available memory divided by the
//!    cells built at once (`build-and-copy --jobs N`).
//! 2. Compiler slots: the cores of that share, but no more than its memory holds at
//!    [`CUDA_BYTES_PER_SLOT`] (3 GiB: cicc or ptxas of one architecture of a heavy CUTLASS
//!    translation unit; a paged-attention source peaked at 2.5 GB) for a CUDA cell, or
//!    [`CXX_BYTES_PER_SLOT`] (1.5 GiB: a C++ source including torch's headers) for a CPU cell;
//!    at least one.
//! 3. A CPU cell: Ninja runs that many compiles.
//! 4. A CUDA cell: Ninja runs one compile per CUDA source up to the slots (more processes beat
//!    more nvcc threads when there are sources enough, flashinfer#305), and each nvcc gets the
//!    slots left per compile as `--threads`, at most its targets (nvcc runs one thread per
//!    `-gencode` target): a kernel of 4 sources and 10 capabilities on 16 cores runs 4 compiles
//!    of 4 threads, a kernel of 100 sources runs 16 compiles of 1 thread. Its C/C++ sources
//!    (the binding) get the Ninja jobs the CUDA sources leave, as far as the memory beyond the
//!    CUDA slots holds them at [`CXX_BYTES_PER_SLOT`]: they share the CUDA compiles' cores while
//!    they run, so a `.cu` and its binding compile at once instead of one after the other.
//! 5. A CUDA cell's cicc splits each nvcc thread's optimisation ([`Plan::split_compile`],
//!    cicc's `-split-compile`) so that one compile can use every slot once it runs alone
//!    (slots / threads): a kernel's heaviest source outlasts the others, and the slots they
//!    leave would otherwise idle while it finishes. While the compiles run together, their
//!    cicc threads exceed the slots by at most min([`MAX_SPLIT_OVERSUBSCRIPTION`],
//!    slots / CUDA compiles) times, so a cell with as many CUDA sources as slots gets no
//!    split. causal-conv1d at two capabilities on 16 cores (3 `.cu`, its heaviest 140 s of
//!    the build's 151 s) runs 3 compiles × 2 threads × 8 splits: measured on the GPU machine,
//!    125.2 s against 150.7 s for the former rule's 2 splits (the slots left once every
//!    compile had its threads) and 169.3 s for upstream's (no split), with the build's peak
//!    memory 3.61 GiB against 3.53 GiB (BENCHMARKS.md, "The parallelism sweep").
//!    paged-attention's 4 sources at one capability run 4 compiles × 1 thread × 12 splits
//!    (48 cicc threads on 16 cores while all 4 run). Memory bounds the
//!    compiles (jobs × threads, rule 2), and the splits through the slots: one compile's
//!    threads × splits never exceed them; a split is a thread inside cicc's process (8 splits
//!    instead of 2 raised causal-conv1d's largest process by nothing measurable, 1.30 GiB).
//!
//! Only cicc splits (`-Xcicc -split-compile=N`), not ptxas: nvcc's `--split-compile=N` also
//! hands ptxas `-split-compile=N`, which ptxas writes into every cubin's `.note.nv.tkinfo`,
//! so the module's bytes would depend on the machine that built it; cicc's split leaves
//! the object byte for byte the same (BENCHMARKS.md), and cicc is most of a heavy source's
//! device time. Needs CUDA 11.8 or later ([`split_compile_supported`]).
//!
//! Memory is what `/proc/meminfo` says is available, lowered to the cgroup's limit less its
//! usage where one applies (a container or CI job): 2 cores and 24 GiB give 2 slots, 16 cores
//! and 128 GiB give 16 (16 × 3 GiB = 48 GiB), 16 cores and 20 GiB give 6. Upstream's rule
//! (nvcc threads = capabilities, Ninja = cores / threads) ignores memory and, for a kernel
//! with fewer sources than cores / capabilities, leaves cores idle.

use camino::Utf8Path;

/// How many times the cicc threads of a cell's CUDA compiles may exceed its slots while they
/// run together (rule 5 of the module doc): the most measured, 3 compiles × 2 threads × 8
/// splits on 16 cores.
pub const MAX_SPLIT_OVERSUBSCRIPTION: usize = 3;

/// Memory one CUDA compile slot (one nvcc thread) is assumed to need.
pub const CUDA_BYTES_PER_SLOT: u64 = 3 << 30;
/// Memory one C++ compile is assumed to need.
pub const CXX_BYTES_PER_SLOT: u64 = 3 << 29;

/// What a cell's compiles may use.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Resources {
    pub cores: usize,
    /// Bytes of memory available (`None`: unknown, then cores alone decide).
    pub memory: Option<u64>,
}

/// One cell's parallelism.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "kebab-case")]
pub struct Plan {
    /// Ninja's `-j`.
    pub ninja_jobs: usize,
    /// nvcc's `--threads` (1 for a CPU cell).
    pub nvcc_threads: usize,
    /// cicc's `-split-compile` per nvcc thread (1: no split; always 1 for a CPU cell).
    pub split_compile: usize,
}

impl Plan {
    /// `4 jobs × 1 nvcc thread × 4 cicc splits` (a CPU cell: `8 jobs`), for the build line.
    pub fn summary(&self, cuda: bool) -> String {
        let n = |k: usize, one: &str, many: &str| format!("{k} {}", if k == 1 { one } else { many });
        let jobs = n(self.ninja_jobs, "job", "jobs");
        if !cuda {
            return jobs;
        }
        let threads = n(self.nvcc_threads, "nvcc thread", "nvcc threads");
        let split = n(self.split_compile, "cicc split", "cicc splits");
        format!("{jobs} × {threads} × {split}")
    }

    /// This plan without cicc's split (an nvcc older than 11.8).
    pub fn without_split(self) -> Plan {
        Plan { split_compile: 1, ..self }
    }
}

/// Whether the nvcc of version `version` (`13.0.88`, `11.8`) has `-split-compile`: CUDA 11.8
/// or later. A version that does not parse is taken as not having it.
pub fn split_compile_supported(version: &str) -> bool {
    let mut parts = version.trim().split('.').map(|p| p.parse::<u32>());
    match (parts.next(), parts.next()) {
        (Some(Ok(major)), Some(Ok(minor))) => (major, minor) >= (11, 8),
        _ => false,
    }
}

/// cicc's split per nvcc thread when `jobs` CUDA compiles of `threads` threads share `slots`
/// (rule 5 of the module doc): enough for one compile alone to use every slot, with the
/// compiles together at most min([`MAX_SPLIT_OVERSUBSCRIPTION`], slots / jobs) times over the
/// slots; at least 1.
fn split_for(slots: usize, jobs: usize, threads: usize) -> usize {
    let (jobs, threads) = (jobs.max(1), threads.max(1));
    let oversubscription = (slots / jobs).clamp(1, MAX_SPLIT_OVERSUBSCRIPTION);
    (slots / threads).min(oversubscription * slots / (jobs * threads)).max(1)
}

/// Compiler slots of one cell among `cells_at_once` (rules 1 and 2 of the module doc).
fn slots(r: Resources, cells_at_once: usize, cuda: bool) -> usize {
    let cells = cells_at_once.max(1) as u64;
    let cores = (r.cores.max(1) as u64 / cells).max(1);
    let per_slot = if cuda { CUDA_BYTES_PER_SLOT } else { CXX_BYTES_PER_SLOT };
    let by_memory = r.memory.map_or(u64::MAX, |m| (m / cells / per_slot).max(1));
    cores.min(by_memory).max(1) as usize
}

/// The parallelism of one cell among `cells_at_once`: a CUDA cell (`cuda`) with `sources`
/// CUDA sources of at most `targets` `-gencode` targets each, and `other` C/C++ sources (the
/// binding, host code) beside them; a CPU cell with `sources` sources in all. A pure function
/// of its arguments; see the module doc for the rule.
pub fn plan(
    r: Resources,
    cells_at_once: usize,
    sources: usize,
    other: usize,
    targets: usize,
    cuda: bool,
) -> Plan {
    let slots = slots(r, cells_at_once, cuda);
    if !cuda {
        return Plan { ninja_jobs: slots, nvcc_threads: 1, split_compile: 1 };
    }
    let cuda_jobs = sources.clamp(1, slots);
    let threads = (slots / cuda_jobs).clamp(1, targets.max(1));
    // The C/C++ sources compile beside the CUDA ones, on the Ninja jobs those leave and the
    // memory left over after the CUDA slots, sharing their cores while they run (short next
    // to a heavy `.cu`): a `.cu` and its binding compile at once.
    let memory_left = r.memory.map_or(usize::MAX, |m| {
        let share = m / cells_at_once.max(1) as u64;
        (share.saturating_sub(slots as u64 * CUDA_BYTES_PER_SLOT) / CXX_BYTES_PER_SLOT) as usize
    });
    let other_jobs = other.min(slots - cuda_jobs).min(memory_left);
    Plan {
        ninja_jobs: cuda_jobs + other_jobs,
        nvcc_threads: threads,
        split_compile: split_for(slots, cuda_jobs, threads),
    }
}

/// `plan` with Ninja's jobs or nvcc's threads set by the user: the other, then cicc's split,
/// fill the slots left (with both set, only the split does).
#[allow(clippy::too_many_arguments)]
pub fn plan_with(
    r: Resources,
    cells_at_once: usize,
    sources: usize,
    other: usize,
    targets: usize,
    cuda: bool,
    jobs: Option<usize>,
    threads: Option<usize>,
) -> Plan {
    let auto = plan(r, cells_at_once, sources, other, targets, cuda);
    let slots = slots(r, cells_at_once, cuda);
    let (j, t) = match (jobs, threads) {
        (None, None) => return auto,
        (Some(j), None) if !cuda => return Plan { ninja_jobs: j.max(1), nvcc_threads: 1, split_compile: 1 },
        (Some(j), Some(t)) => (j.max(1), t.max(1)),
        (Some(j), None) => (j.max(1), (slots / j.max(1)).clamp(1, targets.max(1))),
        (None, Some(t)) => ((slots / t.max(1)).max(1), t.max(1)),
    };
    let split = if cuda { split_for(slots, j, t) } else { 1 };
    Plan { ninja_jobs: j, nvcc_threads: t, split_compile: split }
}

/// Upstream's rule, for comparison (`bench/`): nvcc threads = the targets, Ninja = the cores
/// divided by them.
#[cfg(test)]
pub fn upstream_plan(cores: usize, targets: usize) -> Plan {
    let threads = targets.max(1);
    Plan { ninja_jobs: (cores / threads).max(1), nvcc_threads: threads, split_compile: 1 }
}

/// `MemAvailable` of `/proc/meminfo`'s text, in bytes.
pub fn mem_available(meminfo: &str) -> Option<u64> {
    meminfo.lines().find_map(|l| {
        let rest = l.strip_prefix("MemAvailable:")?;
        let mut parts = rest.split_whitespace();
        let n: u64 = parts.next()?.parse().ok()?;
        match parts.next() {
            Some("kB") => n.checked_mul(1024),
            None => Some(n),
            _ => None,
        }
    })
}

/// What a cgroup still lets this process take: its limit (`memory.max`, v2, or
/// `memory.limit_in_bytes`, v1) less its usage (`memory.current` / `memory.usage_in_bytes`);
/// `None` for no limit (`max`, or v1's huge number).
pub fn cgroup_headroom(limit: &str, usage: &str) -> Option<u64> {
    let limit: u64 = limit.trim().parse().ok()?;
    if limit >= 1 << 60 {
        return None;
    }
    let usage: u64 = usage.trim().parse().unwrap_or(0);
    Some(limit.saturating_sub(usage))
}

/// The memory this process's compiles may use: [`mem_available`], lowered to the cgroup's
/// headroom where there is one.
pub fn available_memory() -> Option<u64> {
    let read = |p: &str| std::fs::read_to_string(Utf8Path::new(p)).ok();
    let mem = read("/proc/meminfo").as_deref().and_then(mem_available);
    let cgroup = [
        ("/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory.current"),
        ("/sys/fs/cgroup/memory/memory.limit_in_bytes", "/sys/fs/cgroup/memory/memory.usage_in_bytes"),
    ]
    .iter()
    .find_map(|(l, u)| cgroup_headroom(&read(l)?, &read(u).unwrap_or_default()));
    match (mem, cgroup) {
        (Some(m), Some(c)) => Some(m.min(c)),
        (m, c) => m.or(c),
    }
}

/// The resources of this machine now.
pub fn resources() -> Resources {
    Resources {
        cores: std::thread::available_parallelism().map(|n| n.get()).unwrap_or(1),
        memory: available_memory(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const G: u64 = 1 << 30;

    fn r(cores: usize, gib: u64) -> Resources {
        Resources { cores, memory: Some(gib * G) }
    }

    fn p(ninja_jobs: usize, nvcc_threads: usize, split_compile: usize) -> Plan {
        Plan { ninja_jobs, nvcc_threads, split_compile }
    }

    #[test]
    fn a_few_huge_sources_spread_over_nvcc_threads_then_cicc_splits() {
        // The GPU machine: 16 cores, 128 GiB.
        let m = r(16, 128);
        // paged-attention: 4 CUDA sources, 10 capabilities: the threads take the cores, and
        // cicc splits 3 ways (48 cicc threads on 16 cores while the 4 run together).
        assert_eq!(plan(m, 1, 4, 0, 10, true), p(4, 4, 3));
        // At one capability nvcc's threads have nothing to do: cicc splits each source 12
        // ways, so the last source running has 12 of the 16 cores.
        assert_eq!(plan(m, 1, 4, 0, 1, true), p(4, 1, 12));
        // Many sources: processes first, no split.
        assert_eq!(plan(m, 1, 100, 0, 10, true), p(16, 1, 1));
        assert_eq!(plan(m, 1, 16, 0, 1, true), p(16, 1, 1));
        // 8 sources: twice the slots at most (8 × 4 = 32 cicc threads).
        assert_eq!(plan(m, 1, 8, 0, 1, true), p(8, 1, 4));
        // One source, three capabilities: 3 threads of 5 splits (15 of 16 cores).
        assert_eq!(plan(m, 1, 1, 0, 3, true), p(1, 3, 5));
        // One source, one capability: one cicc over all the cores.
        assert_eq!(plan(m, 1, 1, 0, 1, true), p(1, 1, 16));
        // causal-conv1d at 8.0 and 9.0 (3 `.cu`, 2 C++ sources), the sweep's best: 5 × 2 × 8.
        assert_eq!(plan(m, 1, 3, 2, 2, true), p(5, 2, 8));
        assert_eq!(plan(m, 1, 3, 0, 2, true), p(3, 2, 8));
    }

    #[test]
    fn memory_bounds_the_compiles_so_nothing_swaps() {
        // This machine: 2 cores, 24 GiB.
        assert_eq!(plan(r(2, 24), 1, 4, 0, 10, true), p(2, 1, 1));
        assert_eq!(plan(r(2, 24), 1, 1, 0, 10, true), p(1, 2, 1));
        assert_eq!(plan(r(2, 24), 1, 1, 0, 1, true), p(1, 1, 2));
        // 16 cores but 20 GiB free: 6 slots of 3 GiB, splits included.
        assert_eq!(plan(r(16, 20), 1, 4, 0, 10, true), p(4, 1, 1));
        assert_eq!(plan(r(16, 20), 1, 4, 0, 1, true), p(4, 1, 1));
        assert_eq!(plan(r(16, 20), 1, 1, 0, 10, true), p(1, 6, 1));
        assert_eq!(plan(r(16, 20), 1, 1, 0, 1, true), p(1, 1, 6));
        assert_eq!(plan(r(16, 20), 1, 2, 0, 1, true), p(2, 1, 6));
        // Less than one slot's memory still compiles, one at a time.
        assert_eq!(plan(r(16, 1), 1, 8, 0, 4, true), p(1, 1, 1));
        assert_eq!(plan(r(16, 1), 1, 1, 0, 1, true), p(1, 1, 1));
        // A CPU cell's compiles take less, and never split.
        assert_eq!(plan(r(16, 12), 1, 40, 0, 0, false), p(8, 1, 1));
        assert_eq!(plan(r(16, 12), 1, 1, 0, 0, false), p(8, 1, 1));
        // Unknown memory: the cores decide.
        let unknown = Resources { cores: 8, memory: None };
        assert_eq!(plan(unknown, 1, 8, 0, 2, true), p(8, 1, 1));
        assert_eq!(plan(unknown, 1, 2, 0, 1, true), p(2, 1, 8));
        for (cores, gib) in [(2, 24), (16, 128), (16, 20), (64, 32), (128, 2048)] {
            for sources in [1, 2, 4, 30] {
                for targets in [1, 3, 10] {
                    let q = plan(r(cores, gib), 1, sources, 0, targets, true);
                    let s = slots(r(cores, gib), 1, true) as u64;
                    // The compiles (processes) within the cores and the memory...
                    let compiles = (q.ninja_jobs * q.nvcc_threads) as u64;
                    assert!(compiles <= cores as u64, "{cores} cores: {q:?}");
                    assert!(compiles == 1 || compiles * CUDA_BYTES_PER_SLOT <= gib * G, "{gib} GiB: {q:?}");
                    // ...one compile's splits within the slots, all of them within 3 × the slots.
                    assert!((q.nvcc_threads * q.split_compile) as u64 <= s, "{q:?}");
                    let cicc = compiles * q.split_compile as u64;
                    assert!(cicc <= s * MAX_SPLIT_OVERSUBSCRIPTION as u64, "{q:?}");
                    if sources >= s as usize {
                        assert_eq!(q.split_compile, 1, "{q:?}");
                    }
                }
            }
        }
    }

    #[test]
    fn the_binding_compiles_beside_the_cuda_sources_within_the_memory() {
        // relu here: one `.cu`, its binding, one capability.
        assert_eq!(plan(r(2, 24), 1, 1, 1, 1, true), p(2, 1, 2));
        // paged-attention on the GPU machine: 4 `.cu` and the binding.
        assert_eq!(plan(r(16, 128), 1, 4, 1, 10, true), p(5, 4, 3));
        assert_eq!(plan(r(16, 128), 1, 4, 1, 1, true), p(5, 1, 12));
        // 20 GiB: 6 CUDA slots (18 GiB), room for one C++ compile; 18 GiB: none.
        assert_eq!(plan(r(16, 20), 1, 4, 1, 10, true), p(5, 1, 1));
        assert_eq!(plan(r(16, 18), 1, 4, 1, 10, true), p(4, 1, 1));
        // The CUDA sources take every job: the binding waits.
        assert_eq!(plan(r(16, 128), 1, 100, 5, 10, true), p(16, 1, 1));
        assert_eq!(plan(r(16, 1), 1, 8, 3, 4, true), p(1, 1, 1));
        let unknown = Resources { cores: 8, memory: None };
        assert_eq!(plan(unknown, 1, 1, 2, 1, true), p(3, 1, 8));
        for (cores, gib) in [(2, 24), (16, 128), (16, 20), (64, 32)] {
            for (sources, other) in [(1, 1), (4, 1), (4, 8), (30, 2)] {
                let q = plan(r(cores, gib), 1, sources, other, 3, true);
                let s = slots(r(cores, gib), 1, true);
                let cuda_jobs = sources.min(s);
                assert!(q.ninja_jobs <= s, "{cores} cores, {gib} GiB: {q:?}");
                assert!(q.nvcc_threads * q.split_compile <= s, "{q:?}");
                assert!(
                    cuda_jobs * q.nvcc_threads * q.split_compile <= s * MAX_SPLIT_OVERSUBSCRIPTION,
                    "{q:?}"
                );
                let others = (q.ninja_jobs - cuda_jobs) as u64;
                assert!(
                    s as u64 * CUDA_BYTES_PER_SLOT + others * CXX_BYTES_PER_SLOT <= gib * G,
                    "{gib} GiB: {q:?}"
                );
            }
        }
    }

    #[test]
    fn cells_built_at_once_share_the_machine() {
        assert_eq!(plan(r(16, 128), 4, 4, 0, 10, true), p(4, 1, 1));
        assert_eq!(plan(r(16, 128), 2, 4, 0, 10, true), p(4, 2, 2));
        assert_eq!(plan(r(16, 128), 2, 4, 0, 1, true), p(4, 1, 4));
        assert_eq!(plan(r(2, 24), 4, 4, 0, 10, true), p(1, 1, 1));
    }

    #[test]
    fn a_number_the_user_sets_keeps_and_the_other_fills_the_rest() {
        let m = r(16, 128);
        assert_eq!(plan_with(m, 1, 4, 0, 10, true, Some(2), None), p(2, 8, 2));
        assert_eq!(plan_with(m, 1, 4, 0, 10, true, None, Some(8)), p(2, 8, 2));
        assert_eq!(plan_with(m, 1, 4, 0, 10, true, Some(3), Some(5)), p(3, 5, 3));
        // One capability: the threads cannot take the cores the jobs leave; cicc's split does.
        assert_eq!(plan_with(m, 1, 4, 0, 1, true, Some(2), None), p(2, 1, 16));
        assert_eq!(plan_with(m, 1, 4, 0, 1, true, Some(2), Some(1)), p(2, 1, 16));
        // As many jobs as slots: no split.
        assert_eq!(plan_with(m, 1, 40, 0, 1, true, Some(16), None), p(16, 1, 1));
        assert_eq!(plan_with(m, 1, 4, 0, 1, true, Some(32), None), p(32, 1, 1));
        assert_eq!(plan_with(m, 1, 4, 0, 0, false, Some(3), None), p(3, 1, 1));
        assert_eq!(upstream_plan(16, 10), p(1, 10, 1));
        assert_eq!(upstream_plan(16, 1), p(16, 1, 1));
    }

    #[test]
    fn the_build_line_names_the_split_and_old_nvcc_has_none() {
        assert_eq!(p(4, 1, 4).summary(true), "4 jobs × 1 nvcc thread × 4 cicc splits");
        assert_eq!(p(1, 3, 1).summary(true), "1 job × 3 nvcc threads × 1 cicc split");
        assert_eq!(p(8, 1, 1).summary(false), "8 jobs");
        assert_eq!(p(4, 1, 4).without_split(), p(4, 1, 1));
        assert!(split_compile_supported("13.0.88"));
        assert!(split_compile_supported("11.8"));
        assert!(split_compile_supported("12.0"));
        assert!(!split_compile_supported("11.7.1"));
        assert!(!split_compile_supported("10.2"));
        assert!(!split_compile_supported("thirteen"));
    }

    #[test]
    fn memory_is_read_from_meminfo_and_the_cgroup() {
        let meminfo = "MemTotal:       24576000 kB\nMemFree:  100 kB\nMemAvailable:   23068672 kB\n";
        assert_eq!(mem_available(meminfo), Some(23068672 * 1024));
        assert_eq!(mem_available("MemTotal: 1 kB\n"), None);
        assert_eq!(mem_available("MemAvailable: lots kB\n"), None);
        assert_eq!(cgroup_headroom("max\n", "123\n"), None);
        assert_eq!(cgroup_headroom("9223372036854771712\n", "5\n"), None);
        assert_eq!(cgroup_headroom("8589934592\n", "1073741824\n"), Some(7 << 30));
        assert_eq!(cgroup_headroom("100\n", "200\n"), Some(0));
    }
}
