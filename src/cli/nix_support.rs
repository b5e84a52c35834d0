//! `kernel-builder nix-support …` (hidden): the command line of the jobs the Nix library's
//! derivations run with the orchestrator as their builder, inside the sandbox (no shell there).
//! The jobs themselves are [`crate::nixdrv::jobs`]; see `nix/lib/` for the derivations.

use camino::Utf8PathBuf;
use clap::Subcommand;

use crate::nixdrv::jobs;

/// Arguments of the hidden `nix-support` command.
#[derive(Debug, clap::Args)]
pub struct Args {
    #[command(subcommand)]
    pub job: Job,
}

/// One job.
#[derive(Debug, Subcommand)]
pub enum Job {
    /// Join cell outputs into a bundle: every top-level entry of each DIR copied into OUT.
    Join {
        #[arg(long)]
        out: Utf8PathBuf,
        /// The kernel's filtered source: also write OUT/hashes.json for it.
        #[arg(long)]
        source: Option<Utf8PathBuf>,
        dirs: Vec<Utf8PathBuf>,
    },
    /// Write OUT/bin/build-and-copy, which refreshes ./build from BUNDLE.
    Runner {
        #[arg(long)]
        out: Utf8PathBuf,
        /// The kernel-builder executable the script runs.
        #[arg(long)]
        orchestrator: Utf8PathBuf,
        #[arg(long)]
        bundle: Utf8PathBuf,
    },
    /// Replace DEST/<variant> with each variant of FROM (a bundle or a cell), atomically.
    CopyVariants { from: Utf8PathBuf, dest: Utf8PathBuf },
    /// Check a built cell's layout and metadata (and, for a compiled cell, the ABI of its
    /// shared objects, as `check-abi`); write OUT on success.
    CheckCell {
        #[arg(long)]
        out: Utf8PathBuf,
        #[arg(long)]
        variant: String,
        /// Also check the ABI, enforcing this manylinux policy (the cell's package set's).
        #[arg(long, value_name = "POLICY")]
        manylinux: Option<String>,
        /// With --manylinux: the variant is a torch stable-ABI one targeting this torch.
        #[arg(long, value_name = "VERSION", requires = "manylinux")]
        torch_stable_abi: Option<String>,
        cell: Utf8PathBuf,
    },
    /// Check that BUNDLE's variants have the NAR hashes of the committed manifest EXPECTED.
    CheckManifest {
        #[arg(long)]
        out: Utf8PathBuf,
        #[arg(long)]
        expected: Utf8PathBuf,
        bundle: Utf8PathBuf,
    },
    /// Download the tree of REPO_ID at COMMIT from HF_ENDPOINT into OUT (the builder of a
    /// kernel dependency's fixed-output derivation, which Nix checks against the locked hash).
    FetchKernelTree {
        #[arg(long)]
        out: Utf8PathBuf,
        #[arg(long)]
        repo_id: String,
        #[arg(long)]
        commit: String,
    },
    /// Write OUT/kernel-paths.json (kernels' `KernelPaths`) and OUT/local-kernels (a
    /// `LOCAL_KERNELS` value) for the locked dependency trees, each `REPO_ID=PIN=PATH` where
    /// PIN is `version:N` or `revision:R`.
    KernelDepPaths {
        #[arg(long)]
        out: Utf8PathBuf,
        deps: Vec<String>,
    },
    /// Unpack the pinned wheels WHEEL… together into OUT (never installed), as the native
    /// toolchain cache unpacks them: a compiled cell's torch or CUDA toolkit.
    UnpackWheels {
        #[arg(long)]
        out: Utf8PathBuf,
        wheels: Vec<Utf8PathBuf>,
    },
    /// Fail with MESSAGE (a cell that cannot be built yet).
    Fail {
        #[arg(long)]
        message: String,
    },
}

/// Run the job.
pub fn run(args: Args) -> super::CmdResult {
    match args.job {
        Job::Join { out, source, dirs } => jobs::join(&out, &dirs, source.as_deref())?,
        Job::Runner { out, orchestrator, bundle } => jobs::write_runner(&out, &orchestrator, &bundle)?,
        Job::CopyVariants { from, dest } => {
            jobs::copy_variants(&from, &dest)?;
        }
        Job::CheckCell { out, variant, manylinux, torch_stable_abi, cell } => {
            let policy = match manylinux {
                Some(m) => Some(super::check_abi::policy_of(&super::check_abi::Args {
                    dir: None,
                    manylinux: Some(m),
                    python_abi: "3.9".into(),
                    torch_stable_abi,
                    json: false,
                })?),
                None => None,
            };
            jobs::check_cell(&out, &variant, &cell, policy.as_ref())?
        }
        Job::CheckManifest { out, expected, bundle } => jobs::check_manifest(&out, &expected, &bundle)?,
        Job::FetchKernelTree { out, repo_id, commit } => {
            crate::kdeps::fetch::HubReader::from_env()?.download_tree(&repo_id, &commit, &out)?;
        }
        Job::KernelDepPaths { out, deps } => crate::kdeps::write_dep_paths(&out, &deps)?,
        Job::UnpackWheels { out, wheels } => crate::toolchain::store::unpack_into(&wheels, &out)?,
        Job::Fail { message } => anyhow::bail!("{message}"),
    }
    Ok(std::process::ExitCode::SUCCESS)
}
