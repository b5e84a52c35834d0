//! The CMake work directories of native compiled builds, `cmake-v1/<kernel key>/<variant>/`
//! under the cache root ([`crate::fsutil::cache_root`]): what they are, which kernel each
//! belongs to, and pruning them. The key is a hash of the kernel directory's path, so each
//! key directory records that path in [`KERNEL_FILE`] for `native-cache` to name it.

use anyhow::Context as _;
use camino::{Utf8Path, Utf8PathBuf};

/// The file in `cmake-v1/<key>/` holding the kernel directory's canonical path.
pub const KERNEL_FILE: &str = "kernel-dir";

/// Record `kernel_dir` (canonical) in the key directory `key_dir`, once.
pub fn record_kernel(key_dir: &Utf8Path, kernel_dir: &Utf8Path) -> anyhow::Result<()> {
    let f = key_dir.join(KERNEL_FILE);
    if !f.exists() {
        std::fs::write(&f, kernel_dir.as_str()).with_context(|| format!("cannot write `{f}`"))?;
    }
    Ok(())
}

/// One kernel's work directories.
#[derive(Debug, PartialEq, Eq)]
pub struct WorkDir {
    /// `cmake-v1/<key>`.
    pub dir: Utf8PathBuf,
    /// The kernel directory it was built for; `None` when not recorded (an older build).
    pub kernel: Option<Utf8PathBuf>,
    /// Whether that kernel directory still exists.
    pub kernel_exists: bool,
    /// The variants with a work directory, sorted.
    pub variants: Vec<String>,
    /// Bytes of its files.
    pub size: u64,
}

/// The work directories under `root/cmake-v1`, sorted by path; none when it does not exist.
pub fn list(root: &Utf8Path) -> anyhow::Result<Vec<WorkDir>> {
    let base = root.join("cmake-v1");
    let entries = match std::fs::read_dir(&base) {
        Ok(e) => e,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(e).with_context(|| format!("cannot read `{base}`")),
    };
    let mut out = Vec::new();
    for entry in entries {
        let entry = entry.with_context(|| format!("cannot read `{base}`"))?;
        let Ok(dir) = Utf8PathBuf::from_path_buf(entry.path()) else { continue };
        if !dir.is_dir() {
            continue;
        }
        let kernel = std::fs::read_to_string(dir.join(KERNEL_FILE)).ok().map(Utf8PathBuf::from);
        let mut variants: Vec<String> = std::fs::read_dir(&dir)
            .with_context(|| format!("cannot read `{dir}`"))?
            .filter_map(Result::ok)
            .filter(|e| e.file_type().is_ok_and(|t| t.is_dir()))
            .filter_map(|e| e.file_name().into_string().ok())
            .collect();
        variants.sort();
        out.push(WorkDir {
            kernel_exists: kernel.as_ref().is_some_and(|k| k.is_dir()),
            kernel,
            variants,
            size: crate::fsutil::dir_size(&dir),
            dir,
        });
    }
    out.sort_by(|a, b| a.dir.cmp(&b.dir));
    Ok(out)
}

/// Remove the work directories whose kernel directory is gone or unrecorded (`all`: every
/// one). Safe: a work directory holds nothing a later build needs, only what makes it
/// incremental. Returns what was removed.
pub fn prune(root: &Utf8Path, all: bool) -> anyhow::Result<Vec<WorkDir>> {
    let mut removed = Vec::new();
    for w in list(root)? {
        if all || !w.kernel_exists {
            std::fs::remove_dir_all(&w.dir).with_context(|| format!("cannot remove `{}`", w.dir))?;
            removed.push(w);
        }
    }
    Ok(removed)
}

/// Lock the work directory `dir` for one build (an exclusive `flock` on the directory, held
/// until the returned file is dropped *and* every child that inherited it has ended: the
/// descriptor is left open across exec on purpose). When processes of an earlier build still
/// hold it (a build killed while its compilers ran), says so and waits for them.
///
/// Errors: `dir` cannot be opened or locked.
pub fn lock_work_dir(dir: &Utf8Path) -> anyhow::Result<std::fs::File> {
    use rustix::fs::FlockOperation as Op;
    let file = std::fs::File::open(dir).with_context(|| format!("cannot open `{dir}` to lock it"))?;
    match rustix::fs::flock(&file, Op::NonBlockingLockExclusive) {
        Ok(()) => {}
        Err(e) if e == rustix::io::Errno::WOULDBLOCK => {
            crate::printer::stderr!(
                "note: the work directory `{dir}` is still in use by another build, or by processes \
                 of an earlier one that was killed; waiting for them to finish (`fuser -v {dir}` \
                 lists them)"
            );
            rustix::fs::flock(&file, Op::LockExclusive).with_context(|| format!("cannot lock `{dir}`"))?;
        }
        Err(e) => return Err(std::io::Error::from(e)).with_context(|| format!("cannot lock `{dir}`")),
    }
    rustix::io::fcntl_setfd(&file, rustix::io::FdFlags::empty())
        .with_context(|| format!("cannot lock `{dir}`"))?;
    Ok(file)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_work_directory_is_locked_while_a_child_holding_it_lives() {
        let t = tempfile::tempdir().unwrap();
        let d = Utf8Path::from_path(t.path()).unwrap();
        let lock = lock_work_dir(d).unwrap();
        let mut child = std::process::Command::new("sleep").arg("30").spawn().unwrap();
        drop(lock);
        let again = std::fs::File::open(d).unwrap();
        let try_lock = || rustix::fs::flock(&again, rustix::fs::FlockOperation::NonBlockingLockExclusive);
        assert_eq!(try_lock(), Err(rustix::io::Errno::WOULDBLOCK), "the child still holds it");
        child.kill().unwrap();
        child.wait().unwrap();
        // A process another test spawns meanwhile inherits the descriptor too, briefly.
        let started = std::time::Instant::now();
        while try_lock().is_err() && started.elapsed() < std::time::Duration::from_secs(20) {
            std::thread::sleep(std::time::Duration::from_millis(50));
        }
        assert_eq!(try_lock(), Ok(()));
    }

    #[test]
    fn lists_names_and_prunes_work_dirs_of_gone_kernels() {
        let t = tempfile::tempdir().unwrap();
        let root = Utf8Path::from_path(t.path()).unwrap();
        let kernel = root.join("relu");
        std::fs::create_dir(&kernel).unwrap();
        let live = root.join("cmake-v1/aaaa");
        std::fs::create_dir_all(live.join("torch211-cxx11-cpu-x86_64-linux/build")).unwrap();
        std::fs::write(live.join("torch211-cxx11-cpu-x86_64-linux/build/x.o"), [0u8; 100]).unwrap();
        record_kernel(&live, &kernel).unwrap();
        let gone = root.join("cmake-v1/bbbb");
        std::fs::create_dir_all(gone.join("v")).unwrap();
        record_kernel(&gone, &root.join("deleted")).unwrap();
        let old = root.join("cmake-v1/cccc");
        std::fs::create_dir_all(old.join("v")).unwrap();

        let l = list(root).unwrap();
        assert_eq!(l.len(), 3);
        assert_eq!(l[0].kernel.as_deref(), Some(kernel.as_path()));
        assert!(l[0].kernel_exists);
        assert_eq!(l[0].variants, ["torch211-cxx11-cpu-x86_64-linux"]);
        assert_eq!(l[0].size, 100 + kernel.as_str().len() as u64);
        assert!(!l[1].kernel_exists);
        assert_eq!(l[2].kernel, None);

        let removed: Vec<Utf8PathBuf> = prune(root, false).unwrap().into_iter().map(|w| w.dir).collect();
        assert_eq!(removed, [gone, old]);
        assert_eq!(list(root).unwrap().len(), 1);
        prune(root, true).unwrap();
        assert!(list(root).unwrap().is_empty());
    }
}
