//! Child processes die with the tool, and a build never shares its work directory with the
//! processes of an earlier one that outlived it.
//!
//! Every spawn site passes its command through [`dies_with_parent`] (a duct expression:
//! `.before_spawn(crate::process::before_spawn)`): on Linux the child gets SIGTERM when this
//! process ends, however it ends (`kill -9` included; `PR_SET_PDEATHSIG`). SIGTERM rather
//! than SIGKILL so the tools that start processes of their own (Ninja, CMake, Nix) stop those
//! too; a process that ignores it, or a grandchild that is not told, is what
//! [`lock_work_dir`] is for: the lock it takes is inherited by every child, so it is held
//! until the last process of a build is gone, and the next build waits for that.
//!
//! Caveat of the mechanism: the signal fires when the *thread* that spawned the child ends,
//! so a child must be spawned by a thread that outlives it (every site here waits for its
//! child on the thread that started it).

use std::os::unix::process::CommandExt;

use anyhow::Context;
use camino::Utf8Path;

/// Make the process `cmd` starts receive SIGTERM when this process dies (Linux; elsewhere
/// nothing is done). If this process is already gone by the time the child starts, the child
/// does not run.
pub fn dies_with_parent(cmd: &mut std::process::Command) {
    #[cfg(target_os = "linux")]
    {
        let parent = rustix::process::getpid();
        // SAFETY: the hook makes two system calls and allocates nothing, which is what may run
        // between fork and exec.
        unsafe {
            cmd.pre_exec(move || {
                rustix::process::set_parent_process_death_signal(Some(rustix::process::Signal::TERM))?;
                // The parent may have died between fork and prctl: then no signal would come.
                if rustix::process::getppid() != Some(parent) {
                    return Err(std::io::Error::from_raw_os_error(libc::ESRCH));
                }
                Ok(())
            });
        }
    }
    #[cfg(not(target_os = "linux"))]
    let _ = cmd;
}

/// [`dies_with_parent`] in the shape duct's `before_spawn` takes.
pub fn before_spawn(cmd: &mut std::process::Command) -> std::io::Result<()> {
    dies_with_parent(cmd);
    Ok(())
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

    /// A child of a thread that ends gets SIGTERM: the signal is armed (this is the caveat in
    /// the module doc, used here as the observable effect).
    #[test]
    #[cfg(target_os = "linux")]
    fn the_child_is_told_when_its_parent_goes() {
        let child = std::thread::spawn(|| {
            let mut cmd = std::process::Command::new("sleep");
            cmd.arg("30");
            dies_with_parent(&mut cmd);
            cmd.spawn().unwrap()
        })
        .join()
        .unwrap();
        let mut child = child;
        let started = std::time::Instant::now();
        let status = loop {
            if let Some(s) = child.try_wait().unwrap() {
                break s;
            }
            assert!(started.elapsed() < std::time::Duration::from_secs(10), "the child was not told");
            std::thread::sleep(std::time::Duration::from_millis(20));
        };
        use std::os::unix::process::ExitStatusExt;
        assert_eq!(status.signal(), Some(libc::SIGTERM));
    }

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
}
