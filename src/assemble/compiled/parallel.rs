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
//!    of 4 threads, a kernel of 100 sources runs 16 compiles of 1 thread.
//!
//! Memory is what `/proc/meminfo` says is available, lowered to the cgroup's limit less its
//! usage where one applies (a container or CI job): 2 cores and 24 GiB give 2 slots, 16 cores
//! and 128 GiB give 16 (16 × 3 GiB = 48 GiB), 16 cores and 20 GiB give 6. Upstream's rule
//! (nvcc threads = capabilities, Ninja = cores / threads) ignores memory and, for a kernel
//! with fewer sources than cores / capabilities, leaves cores idle.

use camino::Utf8Path;

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
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Plan {
    /// Ninja's `-j`.
    pub ninja_jobs: usize,
    /// nvcc's `--threads` (1 for a CPU cell).
    pub nvcc_threads: usize,
}

/// The parallelism of one cell among `cells_at_once`, with `sources` CUDA sources (all sources
/// of a CPU cell) and at most `targets` `-gencode` targets per source (`cuda`: a CUDA cell).
/// A pure function of its arguments; see the module doc for the rule.
pub fn plan(r: Resources, cells_at_once: usize, sources: usize, targets: usize, cuda: bool) -> Plan {
    let cells = cells_at_once.max(1) as u64;
    let cores = (r.cores.max(1) as u64 / cells).max(1);
    let per_slot = if cuda { CUDA_BYTES_PER_SLOT } else { CXX_BYTES_PER_SLOT };
    let by_memory = r.memory.map_or(u64::MAX, |m| (m / cells / per_slot).max(1));
    let slots = cores.min(by_memory).max(1) as usize;
    if !cuda {
        return Plan { ninja_jobs: slots, nvcc_threads: 1 };
    }
    let jobs = sources.clamp(1, slots);
    let threads = (slots / jobs).clamp(1, targets.max(1));
    Plan { ninja_jobs: jobs, nvcc_threads: threads }
}

/// `plan` with one of its two numbers set by the user: the other fills the slots left.
pub fn plan_with(
    r: Resources,
    cells_at_once: usize,
    sources: usize,
    targets: usize,
    cuda: bool,
    jobs: Option<usize>,
    threads: Option<usize>,
) -> Plan {
    let auto = plan(r, cells_at_once, sources, targets, cuda);
    let slots = auto.ninja_jobs * auto.nvcc_threads;
    match (jobs, threads) {
        (Some(j), Some(t)) => Plan { ninja_jobs: j.max(1), nvcc_threads: t.max(1) },
        (Some(j), None) if cuda => {
            Plan { ninja_jobs: j.max(1), nvcc_threads: (slots / j.max(1)).clamp(1, targets.max(1)) }
        }
        (Some(j), None) => Plan { ninja_jobs: j.max(1), nvcc_threads: 1 },
        (None, Some(t)) => Plan { ninja_jobs: (slots / t.max(1)).max(1), nvcc_threads: t.max(1) },
        (None, None) => auto,
    }
}

/// Upstream's rule, for comparison (`bench/`): nvcc threads = the targets, Ninja = the cores
/// divided by them.
pub fn upstream_plan(cores: usize, targets: usize) -> Plan {
    let threads = targets.max(1);
    Plan { ninja_jobs: (cores / threads).max(1), nvcc_threads: threads }
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

    #[test]
    fn a_few_huge_sources_spread_their_capabilities_over_nvcc_threads() {
        // paged-attention: 4 CUDA sources, 10 capabilities, on the GPU machine.
        assert_eq!(plan(r(16, 128), 1, 4, 10, true), Plan { ninja_jobs: 4, nvcc_threads: 4 });
        // One capability: nothing for threads to do; the sources are the parallelism.
        assert_eq!(plan(r(16, 128), 1, 4, 1, true), Plan { ninja_jobs: 4, nvcc_threads: 1 });
        // Many sources: processes first.
        assert_eq!(plan(r(16, 128), 1, 100, 10, true), Plan { ninja_jobs: 16, nvcc_threads: 1 });
        // One source, three capabilities.
        assert_eq!(plan(r(16, 128), 1, 1, 3, true), Plan { ninja_jobs: 1, nvcc_threads: 3 });
    }

    #[test]
    fn memory_bounds_the_compiles_so_nothing_swaps() {
        // This machine: 2 cores, 24 GiB.
        assert_eq!(plan(r(2, 24), 1, 4, 10, true), Plan { ninja_jobs: 2, nvcc_threads: 1 });
        assert_eq!(plan(r(2, 24), 1, 1, 10, true), Plan { ninja_jobs: 1, nvcc_threads: 2 });
        // 16 cores but 20 GiB free: 6 slots of 3 GiB.
        assert_eq!(plan(r(16, 20), 1, 4, 10, true), Plan { ninja_jobs: 4, nvcc_threads: 1 });
        assert_eq!(plan(r(16, 20), 1, 1, 10, true), Plan { ninja_jobs: 1, nvcc_threads: 6 });
        // Less than one slot's memory still compiles, one at a time.
        assert_eq!(plan(r(16, 1), 1, 8, 4, true), Plan { ninja_jobs: 1, nvcc_threads: 1 });
        // A CPU cell's compiles take less.
        assert_eq!(plan(r(16, 12), 1, 40, 0, false), Plan { ninja_jobs: 8, nvcc_threads: 1 });
        // Unknown memory: the cores decide.
        let unknown = Resources { cores: 8, memory: None };
        assert_eq!(plan(unknown, 1, 8, 2, true), Plan { ninja_jobs: 8, nvcc_threads: 1 });
        for (cores, gib) in [(2, 24), (16, 128), (16, 20), (64, 32)] {
            for sources in [1, 4, 30] {
                for targets in [1, 3, 10] {
                    let p = plan(r(cores, gib), 1, sources, targets, true);
                    let used = (p.ninja_jobs * p.nvcc_threads) as u64;
                    assert!(used <= cores as u64, "{cores} cores: {p:?}");
                    assert!(used == 1 || used * CUDA_BYTES_PER_SLOT <= gib * G, "{gib} GiB: {p:?}");
                }
            }
        }
    }

    #[test]
    fn cells_built_at_once_share_the_machine() {
        assert_eq!(plan(r(16, 128), 4, 4, 10, true), Plan { ninja_jobs: 4, nvcc_threads: 1 });
        assert_eq!(plan(r(16, 128), 2, 4, 10, true), Plan { ninja_jobs: 4, nvcc_threads: 2 });
        assert_eq!(plan(r(2, 24), 4, 4, 10, true), Plan { ninja_jobs: 1, nvcc_threads: 1 });
    }

    #[test]
    fn a_number_the_user_sets_keeps_and_the_other_fills_the_rest() {
        let m = r(16, 128);
        assert_eq!(plan_with(m, 1, 4, 10, true, Some(2), None), Plan { ninja_jobs: 2, nvcc_threads: 8 });
        assert_eq!(plan_with(m, 1, 4, 10, true, None, Some(8)), Plan { ninja_jobs: 2, nvcc_threads: 8 });
        assert_eq!(plan_with(m, 1, 4, 10, true, Some(3), Some(5)), Plan { ninja_jobs: 3, nvcc_threads: 5 });
        assert_eq!(plan_with(m, 1, 4, 0, false, Some(3), None), Plan { ninja_jobs: 3, nvcc_threads: 1 });
        assert_eq!(upstream_plan(16, 10), Plan { ninja_jobs: 1, nvcc_threads: 10 });
        assert_eq!(upstream_plan(16, 1), Plan { ninja_jobs: 16, nvcc_threads: 1 });
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
