//! `kernel-builder lock-kernel-deps [DIR]` and `kernel-builder get-kernel-deps [DIR]`.

use std::process::ExitCode;

use camino::Utf8PathBuf;

use crate::kdeps::{self, fetch::HubReader, lock::describe};

/// Arguments of `lock-kernel-deps`.
#[derive(Debug, clap::Args)]
#[command(after_long_help = "\
Resolves every `kernel-depends` entry of build.toml ([general] and [general.<backend>]), and \
the kernel-depends of those kernels' variants in turn, against HF_ENDPOINT (default \
https://huggingface.co): `version = N` to the head of branch vN, `revision` to its commit. \
Each commit's whole tree is downloaded into the dependency cache \
($KERNEL_BUILDER_CACHE_DIR/kernel-deps, else $XDG_CACHE_HOME/kernel-builder/kernel-deps, else \
~/.cache/kernel-builder/kernel-deps) and its NAR hash computed. DIR/kernels.lock is then \
written in the shape kernels 0.17 reads (`NixKernelLocks`): a sorted JSON list of \
{\"dependency\": {\"repo-id\", \"version\"|\"revision\"}, \"lock\": {\"commit\", \"hash\"}}. \
The same Hub state always gives the same bytes. Builds then fetch exactly these trees. \
Python bytecode (__pycache__/, *.pyc) is never downloaded nor hashed. Each download is said on \
stderr before it starts; the closure is followed at most 16 levels deep and to at most 100 \
kernels.")]
pub struct Args {
    /// Kernel directory, holding build.toml (default: the current directory).
    pub dir: Option<Utf8PathBuf>,
}

/// Arguments of `get-kernel-deps`.
#[derive(Debug, clap::Args)]
#[command(after_long_help = "\
Makes sure every tree DIR/kernels.lock pins is in the dependency cache with the locked NAR \
hash (downloading only what is missing or does not match; nothing at all when all are cached), \
then prints on stdout the LOCAL_KERNELS value that makes kernels load exactly those trees:\n\n  \
LOCAL_KERNELS=$(kernel-builder get-kernel-deps DIR) python -c '...get_local_kernel(...)'")]
pub struct FetchArgs {
    /// Kernel directory, holding build.toml and kernels.lock (default: the current directory).
    pub dir: Option<Utf8PathBuf>,
}

/// Run `lock-kernel-deps`.
pub fn run(args: Args) -> super::CmdResult {
    let dir = super::kernel_dir_arg(args.dir)?;
    let loaded = crate::kernel::load(&dir)?;
    let deps = kdeps::direct(&loaded.config);
    let path = kdeps::lock::lock_path(&dir);
    if deps.is_empty() && !path.exists() {
        crate::printer::stderr!("build.toml has no kernel-depends: nothing to lock");
        return Ok(ExitCode::SUCCESS);
    }
    let hub = HubReader::from_env()?;
    let cache = kdeps::fetch::cache_dir()?;
    let (lock, trees) = kdeps::resolve(&loaded.config, &hub, &cache, &super::report::Terminal)?;
    for t in &trees {
        crate::printer::stderr!(
            "locked {} at {} ({})",
            describe(&t.dependency),
            t.pinned.commit,
            t.pinned.hash
        );
    }
    let written = lock.write(&dir)?;
    println!("wrote {written} ({} kernel(s))", lock.entries.len());
    Ok(ExitCode::SUCCESS)
}

/// Run `get-kernel-deps`.
pub fn run_fetch(args: FetchArgs) -> super::CmdResult {
    let dir = super::kernel_dir_arg(args.dir)?;
    let loaded = super::load_config_locked(&dir)?;
    let trees = kdeps::fetch_for_build(&loaded.config, &dir, &super::report::Terminal)?;
    println!("{}", kdeps::local_kernels(&trees));
    Ok(ExitCode::SUCCESS)
}
