//! `kernel-builder native-cache [show|prune --max-size SIZE]`: the native cell cache
//! ([`crate::bundle::cellcache`]) that native builds reuse cells from.

use std::process::ExitCode;

use crate::assemble::compiled::compile_cache;
use crate::assemble::workdirs;
use crate::bundle::cellcache::{build_max_bytes, CellCache};
use crate::fsutil::parse_size;
use crate::toolchain::store::{self, FetchOptions, Store};

/// Arguments of `native-cache`.
#[derive(Debug, clap::Args)]
#[command(after_long_help = "\
A native build (`build-and-copy --nix never`, `build-and-upload`) keeps each cell it builds in \
native-cells-v1/ in the cache directory ($KERNEL_BUILDER_CACHE_DIR, else \
$XDG_CACHE_HOME/kernel-builder, else ~/.cache/kernel-builder), keyed by the source set's tree \
id, the cell and the toolchain, and reuses it when all three are the same (the build then says \
`reused`). Each entry is checked against its NAR hash before it is used. After storing cells a \
build removes the least recently used entries beyond 5 GiB \
($KERNEL_BUILDER_NATIVE_CACHE_MAX_SIZE changes that bound). `build-and-copy --no-cache` \
bypasses the cache; `verify` never reads it.

The compile cache (sccache, `sccache-v1/` in the cache directory, or \
$KERNEL_BUILDER_COMPILE_CACHE; `off` turns it off) keeps each translation unit a native cell \
compiled, shared by every cell, checkout and kernel with the same compiler and flags; after \
each build it is pruned to 10 GiB ($KERNEL_BUILDER_COMPILE_CACHE_MAX_SIZE changes that bound), \
least recently used first. `--no-cache` still uses it; `verify` and Nix cells never do.

`show` also lists the toolchain cache (toolchain-v1/), the kernel-dependency cache \
(kernel-deps/: the trees kernels.lock pins, which `lock-kernel-deps`, `get-kernel-deps` and \
builds fetch; never pruned by a build) and the CMake work directories.")]
pub struct Args {
    #[command(subcommand)]
    pub action: Option<Action>,
}

/// What to do with the cache.
#[derive(Debug, clap::Subcommand)]
pub enum Action {
    /// Print where the cache is, its entries (least recently used first) and their total size
    /// (the default).
    Show,
    /// Remove the least recently used entries until the cache holds at most SIZE.
    Prune {
        /// The most the cache may hold after pruning: bytes, or a number with K, M, G or T
        /// (powers of 1024), e.g. `500M`; `0` empties it.
        #[arg(long, value_name = "SIZE", value_parser = parse_size, default_value = "5G")]
        max_size: u64,
        /// Also prune the toolchain cache (pinned wheels and their unpacked trees) to at most
        /// SIZE, least recently used first; waits for builds using it.
        #[arg(long, value_name = "SIZE", value_parser = parse_size)]
        toolchain_max_size: Option<u64>,
        /// Also prune the kernel-dependency cache (kernel-deps/) to at most SIZE: what
        /// interrupted downloads left, then the least recently used trees (a later build
        /// downloads a removed tree again); waits for commands fetching into it.
        #[arg(long, value_name = "SIZE", value_parser = parse_size)]
        kernel_deps_max_size: Option<u64>,
        /// Also prune the compile cache to at most SIZE, least recently used first; waits for
        /// builds using it.
        #[arg(long, value_name = "SIZE", value_parser = parse_size)]
        compile_max_size: Option<u64>,
    },
    /// Remove the CMake work directories (cmake-v1/) of kernel directories that no longer
    /// exist (or that an older kernel-builder made without naming theirs). Always safe: the
    /// next build of such a kernel compiles from scratch.
    PruneWork {
        /// Remove every work directory, also those of existing kernels.
        #[arg(long)]
        all: bool,
    },
}

use crate::fsutil::human_size as human;

/// Run `native-cache`.
pub fn run(args: Args) -> super::CmdResult {
    let cache = CellCache::user()?;
    match args.action.unwrap_or(Action::Show) {
        Action::Show => {
            show_cells(&cache)?;
            show_toolchains()?;
            show_kernel_deps()?;
            show_compile_cache()?;
            show_work_dirs()?;
        }
        Action::PruneWork { all } => {
            let root = crate::fsutil::cache_root()?;
            let removed = workdirs::prune(&root, all)?;
            for w in &removed {
                println!("removed {} ({})", w.dir, human(w.size));
            }
            println!(
                "removed {} work director{} ({}) from {}",
                removed.len(),
                if removed.len() == 1 { "y" } else { "ies" },
                human(removed.iter().map(|w| w.size).sum()),
                root.join("cmake-v1")
            );
        }
        Action::Prune { max_size, toolchain_max_size, kernel_deps_max_size, compile_max_size } => {
            if let Some(max) = kernel_deps_max_size {
                prune_kernel_deps(max)?;
            }
            if let Some(max) = compile_max_size {
                prune_compile_cache(max)?;
            }
            if let Some(max) = toolchain_max_size {
                prune_toolchains(max)?;
            }
            let r = cache.prune(max_size)?;
            println!(
                "removed {} entr{} ({}); {} left ({}) in {}",
                r.removed,
                if r.removed == 1 { "y" } else { "ies" },
                human(r.removed_bytes),
                r.kept,
                human(r.kept_bytes),
                cache.dir()
            );
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// The native cell cache: each entry, then the count, size and bound.
fn show_cells(cache: &CellCache) -> anyhow::Result<()> {
    let entries = cache.entries()?;
    let total: u64 = entries.iter().map(|e| e.size).sum();
    println!("{}", cache.dir());
    for e in &entries {
        println!(
            "  {}  {:>10}  {}",
            e.dir.file_name().unwrap_or_default(),
            human(e.size),
            e.variant.as_deref().unwrap_or("(unreadable entry)")
        );
    }
    println!(
        "{} entr{}, {} ({})",
        entries.len(),
        if entries.len() == 1 { "y" } else { "ies" },
        human(total),
        what_builds_prune_to(build_max_bytes())
    );
    Ok(())
}

/// What builds bound a cache to: its size, or (a bad setting) that builds refuse to start.
/// A user's trial read "builds prune to nothing: …" as "the cache will be emptied".
fn what_builds_prune_to(max: anyhow::Result<u64>) -> String {
    match max {
        Ok(bytes) => format!("builds prune to {}", human(bytes)),
        Err(e) => format!("builds refuse to start until this is fixed: {e:#}"),
    }
}

/// The toolchain cache, when there is one (a build without --python made it).
fn show_toolchains() -> anyhow::Result<()> {
    let dir = store::user_root()?;
    if !dir.is_dir() {
        return Ok(());
    }
    let s = Store::user(FetchOptions::default())?;
    let entries = s.entries()?;
    println!("{}", s.root());
    for e in &entries {
        println!("  {}  {:>10}  {}", e.path.file_name().unwrap_or_default(), human(e.size), e.what);
    }
    println!(
        "{} toolchain entr{}, {} ({})",
        entries.len(),
        if entries.len() == 1 { "y" } else { "ies" },
        human(entries.iter().map(|e| e.size).sum()),
        what_builds_prune_to(store::max_bytes())
    );
    Ok(())
}

/// The kernel-dependency cache, when there is one.
fn show_kernel_deps() -> anyhow::Result<()> {
    let kdeps = crate::kdeps::fetch::cache_dir()?;
    if !kdeps.is_dir() {
        return Ok(());
    }
    let entries = crate::kdeps::cache::entries(&kdeps)?;
    println!("{kdeps}");
    for e in &entries {
        println!(
            "  {}  {:>10}{}",
            e.dir.file_name().unwrap_or_default(),
            human(e.size),
            if e.leftover { "  (left by an interrupted download)" } else { "" }
        );
    }
    println!(
        "{} kernel-dependency entr{}, {} (`native-cache prune --kernel-deps-max-size SIZE` prunes them; builds never do)",
        entries.len(),
        if entries.len() == 1 { "y" } else { "ies" },
        human(entries.iter().map(|e| e.size).sum())
    );
    Ok(())
}

/// The compile cache (or that it is off), and the compilers sccache packaged for
/// sccache-dist's build servers when there are any.
fn show_compile_cache() -> anyhow::Result<()> {
    match compile_cache::setting()? {
        compile_cache::Setting::Off => {
            println!("compile cache: off ({}=off)", crate::env::COMPILE_CACHE.name)
        }
        compile_cache::Setting::Dir(dir) => {
            let files = compile_cache::files(&dir);
            println!(
                "compile cache {dir}: {} file{}, {} ({})",
                files.len(),
                if files.len() == 1 { "" } else { "s" },
                human(files.iter().map(|f| f.size).sum()),
                what_builds_prune_to(compile_cache::max_bytes())
            );
        }
    }
    let dist = crate::fsutil::cache_root()?.join(compile_cache::DIST_DIR_NAME);
    if dist.is_dir() {
        println!(
            "compilers packaged for sccache-dist {dist}: {} (sccache keeps them to 5 GiB)",
            human(crate::fsutil::dir_size(&dist))
        );
    }
    Ok(())
}

/// The CMake work directories, each with its kernel and variants.
fn show_work_dirs() -> anyhow::Result<()> {
    let work = workdirs::list(&crate::fsutil::cache_root()?)?;
    println!("CMake work directories (cmake-v1/, kept for incremental builds, never pruned by a build):");
    for w in &work {
        println!(
            "  {}  {:>10}  {} ({})",
            w.dir.file_name().unwrap_or_default(),
            human(w.size),
            match (&w.kernel, w.kernel_exists) {
                (Some(k), true) => k.to_string(),
                (Some(k), false) => format!("{k}, gone"),
                (None, _) => "kernel not recorded".to_owned(),
            },
            w.variants.join(", ")
        );
    }
    println!(
        "{} work director{}, {} (`native-cache prune-work` removes those of gone kernels)",
        work.len(),
        if work.len() == 1 { "y" } else { "ies" },
        human(work.iter().map(|w| w.size).sum())
    );
    Ok(())
}

/// `prune --kernel-deps-max-size MAX`.
fn prune_kernel_deps(max: u64) -> anyhow::Result<()> {
    let dir = crate::kdeps::fetch::cache_dir()?;
    let removed = crate::kdeps::cache::prune(&dir, max)?;
    println!(
        "removed {} kernel-dependency entr{} ({}) from {dir}",
        removed.len(),
        if removed.len() == 1 { "y" } else { "ies" },
        human(removed.iter().map(|e| e.size).sum())
    );
    Ok(())
}

/// `prune --compile-max-size MAX` (waits for builds using the compile cache).
fn prune_compile_cache(max: u64) -> anyhow::Result<()> {
    match compile_cache::setting()? {
        compile_cache::Setting::Off => {
            println!("compile cache: off ({}=off), nothing pruned", crate::env::COMPILE_CACHE.name)
        }
        compile_cache::Setting::Dir(dir) => {
            let p = compile_cache::prune(&dir, max, true)?.unwrap_or_default();
            println!(
                "removed {} compile cache file{} ({}); {} left in {dir}",
                p.removed,
                if p.removed == 1 { "" } else { "s" },
                human(p.freed),
                human(p.left)
            );
        }
    }
    Ok(())
}

/// `prune --toolchain-max-size MAX` (waits for builds using the toolchain cache).
fn prune_toolchains(max: u64) -> anyhow::Result<()> {
    let store = Store::user(FetchOptions::default())?;
    let root = store.root().to_owned();
    let removed = store.prune(max, true)?.unwrap_or_default().removed;
    println!(
        "removed {} toolchain entr{} ({}) from {root}",
        removed.len(),
        if removed.len() == 1 { "y" } else { "ies" },
        human(removed.iter().map(|e| e.size).sum())
    );
    Ok(())
}

/// Arguments of the hidden `compile-launch`: the compiler launcher of a native cell built
/// through the compile cache (see [`compile_cache::relative_args`]).
#[derive(Debug, clap::Args)]
pub struct LaunchArgs {
    /// The cell's source mirror.
    #[arg(long)]
    pub src: String,
    /// The cell's build directory (where Ninja runs the compile).
    #[arg(long)]
    pub build: String,
    /// The sccache to run.
    #[arg(long)]
    pub sccache: String,
    /// The compiler and its arguments.
    #[arg(last = true, required = true)]
    pub command: Vec<String>,
}

/// Run `compile-launch`.
pub fn run_launch(args: LaunchArgs) -> super::CmdResult {
    compile_cache::launch(&args.src, &args.build, &args.sccache, &args.command)
}
