//! What a failed build step's output says about the machine rather than the kernel: a full
//! disk, or a compiler killed by signal 9 (what the kernel's out-of-memory killer sends). A
//! step's output is streamed and never kept whole, so it is read here line by line; a failure
//! that shows either gets a hint saying what to change, as data ([`crate::error::Error::hint`]),
//! so `--json` lists it too.
//!
//! A killed compiler is seen when the tools say so: gcc's `Killed signal terminated program
//! cc1plus`, nvcc's `'cicc' died due to signal 9 (Kill signal)`, a shell's `Killed`. A full
//! disk, when any tool says `No space left on device` (strerror's text for ENOSPC; every step
//! runs under `LC_ALL=C`), and also when the build directory's file system has less than
//! [`LOW_DISK`] left after the failure: CMake's compiler check on a full disk says only that
//! the compiler "is not able to compile a simple test program" (seen: `Unknown extension
//! ".cxx"` for its own test file).

use camino::Utf8Path;

/// Free space below which a failed step's build directory is called full: a heavy CUDA source
/// writes hundreds of MB of temporary files.
pub const LOW_DISK: u64 = 256 << 20;

/// The machine faults a step's output showed.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Symptoms {
    /// A write failed with ENOSPC.
    pub disk_full: bool,
    /// A compiler process was killed by signal 9.
    pub killed: bool,
}

impl Symptoms {
    /// Take one line of the step's output into account; whether it shows a machine fault (such
    /// a line is shown among a failed step's first error lines, where a long tail would hide it).
    pub fn see(&mut self, line: &str) -> bool {
        let disk_full = line.contains("No space left on device");
        let killed = is_killed_line(line);
        self.disk_full |= disk_full;
        self.killed |= killed;
        disk_full || killed
    }

    /// What to do, for a step that compiled in `build_dir` with its temporary files in
    /// `tmp_dir`; empty when the output showed neither fault.
    ///
    /// `free`: the bytes left on `build_dir`'s file system (`None`: unknown), [`free_bytes`].
    pub fn hints(&self, build_dir: &Utf8Path, tmp_dir: &Utf8Path, free: Option<u64>) -> Vec<String> {
        let mut out = Vec::new();
        let low = free.filter(|&f| f < LOW_DISK);
        if self.disk_full || low.is_some() {
            let said = match (self.disk_full, low) {
                (true, _) => "is full (`No space left on device`)".to_owned(),
                (false, Some(f)) => format!("has only {} free", crate::fsutil::human_size(f)),
                (false, None) => unreachable!("one of the two holds"),
            };
            out.push(format!(
                "the disk {said}: this cell compiles in `{build_dir}` with its temporary files in `{tmp_dir}`; free space there (`kernel-builder native-cache` shows what kernel-builder's caches hold; `native-cache prune-work --all` removes the CMake work directories, `native-cache prune --max-size 2G --compile-max-size 2G` shrinks the cell and compile caches), or point {} at a larger disk",
                crate::env::CACHE_DIR.name
            ));
        }
        if self.killed {
            out.push(format!(
                "a compiler was killed by signal 9, as the out-of-memory killer does when compiles at once need more memory than the machine has: build fewer cells at once (`--jobs 1`) or fewer compiles per cell ({}=1, {}=1, {}=1)",
                crate::env::JOBS.name,
                crate::env::NVCC_THREADS.name,
                crate::env::NVCC_SPLIT_COMPILE.name
            ));
        }
        out
    }
}

/// The bytes an unprivileged user can still write on `dir`'s file system; `None` when it
/// cannot be read.
pub fn free_bytes(dir: &Utf8Path) -> Option<u64> {
    let st = rustix::fs::statvfs(dir.as_std_path()).ok()?;
    Some(st.f_bavail.saturating_mul(st.f_frsize))
}

/// Whether `line` says a compiler was killed by signal 9 (SIGKILL).
fn is_killed_line(line: &str) -> bool {
    let l = line.trim();
    l.contains("Killed signal terminated program")
        || l.contains("died due to signal 9")
        || l == "Killed"
        // bash's report of a child it waited for: `/bin/sh: line 1:  4242 Killed  c++ …`.
        || l.split_whitespace().collect::<Vec<_>>().windows(2).any(|w| {
            w[1] == "Killed" && !w[0].is_empty() && w[0].bytes().all(|b| b.is_ascii_digit())
        })
        || l.contains("internal compiler error: Killed")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn seen(log: &str) -> Symptoms {
        let mut s = Symptoms::default();
        log.lines().for_each(|l| {
            s.see(l);
        });
        s
    }

    #[test]
    fn the_compilers_own_words_are_read() {
        // gcc under the OOM killer, nvcc's cicc under it, a shell reporting its child.
        for log in [
            "g++: fatal error: Killed signal terminated program cc1plus\ncompilation terminated.",
            "nvcc error   : 'cicc' died due to signal 9 (Kill signal)",
            "/bin/sh: line 1: 4242 Killed                  /usr/bin/c++ -c a.cpp",
            "c++: internal compiler error: Killed (program cc1plus)",
        ] {
            assert_eq!(seen(log), Symptoms { disk_full: false, killed: true }, "{log}");
        }
        let full = "a.cpp:1: fatal error: error writing to /tmp/ccX.s: No space left on device";
        assert_eq!(seen(full), Symptoms { disk_full: true, killed: false });
        // A kernel's own words are not a machine fault.
        for log in ["error: use of undeclared identifier 'Killed'", "x.cu(3): error: signal 9 unknown", ""] {
            assert_eq!(seen(log), Symptoms::default(), "{log}");
        }
    }

    #[test]
    fn each_fault_has_its_hint_naming_the_directories_and_knobs() {
        let s = Symptoms { disk_full: true, killed: true };
        let hints = s.hints(Utf8Path::new("/w/build"), Utf8Path::new("/w/tmp"), Some(LOW_DISK));
        assert_eq!(hints.len(), 2);
        assert!(hints[0].contains("`/w/build` with its temporary files in `/w/tmp`"), "{}", hints[0]);
        assert!(hints[0].contains("KERNEL_BUILDER_CACHE_DIR"), "{}", hints[0]);
        assert!(
            hints[1].ends_with(
                "(`--jobs 1`) or fewer compiles per cell (KERNEL_BUILDER_JOBS=1, KERNEL_BUILDER_NVCC_THREADS=1, KERNEL_BUILDER_NVCC_SPLIT_COMPILE=1)"
            ),
            "{}",
            hints[1]
        );
        assert!(hints[0].starts_with("the disk is full (`No space left on device`): "), "{}", hints[0]);
        let (b, t) = (Utf8Path::new("/b"), Utf8Path::new("/t"));
        assert!(Symptoms::default().hints(b, t, Some(LOW_DISK)).is_empty());
        assert!(Symptoms::default().hints(b, t, None).is_empty());
        // A full disk the output does not name (CMake's compiler check) is found by its space.
        let low = Symptoms::default().hints(b, t, Some(3 << 20));
        assert_eq!(low.len(), 1);
        assert!(
            low[0].starts_with("the disk has only 3.0 MiB free: this cell compiles in `/b`"),
            "{}",
            low[0]
        );
        assert!(free_bytes(Utf8Path::new("/")).is_some_and(|f| f > 0));
        assert_eq!(free_bytes(Utf8Path::new("/no/such/dir")), None);
        let mut s = Symptoms::default();
        assert!(s.see("nvcc error   : 'cicc' died due to signal 9 (Kill signal)"));
        assert!(!s.see("FAILED: a.o"));
        assert!(s.killed, "a line that is no symptom keeps what was seen");
    }
}
