//! `kernel-builder cache push --to URI [DIR] --key-file PATH [-- NIX_ARGS...]` and
//! `kernel-builder cache pull --from URI --public-key KEY [DIR] [-- NIX_ARGS...]`: a signed Nix
//! binary cache of a kernel's cells and bundle ([`crate::nixdrv::cache`]).

use std::process::ExitCode;

use camino::Utf8PathBuf;
use clap::Subcommand;

/// Arguments of `cache`.
#[derive(Debug, clap::Args)]
pub struct Args {
    #[command(subcommand)]
    pub action: Action,
}

/// What to do with the cache.
#[derive(Debug, Subcommand)]
pub enum Action {
    /// Build (or find in the store) the bundle and every cell of this system through Nix, sign
    /// them and their closure, and copy them to the binary cache URI (`nix copy --to`).
    #[command(after_long_help = "\
Make a key pair once: `nix key generate-secret --key-name NAME > secret.key` and \
`nix key convert-secret-to-public < secret.key > public.key`. Push with the secret half; \
whoever pulls trusts the public half (`cache pull --public-key`, or nix.conf's \
`trusted-public-keys` with the URI in `substituters`).")]
    Push {
        /// Kernel directory, holding flake.nix (default: the current directory).
        dir: Option<Utf8PathBuf>,
        /// The binary cache: any store URI Nix can copy to (`file:///srv/kernel-cache`,
        /// `s3://bucket`, `ssh://host`).
        #[arg(long, value_name = "URI")]
        to: String,
        /// The secret signing key (`NAME:BASE64`, from `nix key generate-secret`).
        #[arg(long, value_name = "PATH")]
        key_file: Utf8PathBuf,
        /// Extra arguments for `nix build` (after `--`), e.g. input overrides.
        #[arg(last = true, value_name = "NIX_ARGS")]
        nix_args: Vec<String>,
    },
    /// Fill DIR/build/ with the bundle fetched from the binary cache URI alone, building
    /// nothing: a cache that lacks the bundle or whose signature is not by the key given is an
    /// error before anything is built.
    Pull {
        /// Kernel directory, holding flake.nix (default: the current directory).
        dir: Option<Utf8PathBuf>,
        /// The binary cache to fetch from (the URI pushed to).
        #[arg(long, value_name = "URI")]
        from: String,
        /// The public key the cache's paths must be signed with (`NAME:BASE64`, from
        /// `nix key convert-secret-to-public`).
        #[arg(long, value_name = "KEY")]
        public_key: String,
        /// Extra arguments for `nix build` (after `--`), e.g. input overrides.
        #[arg(last = true, value_name = "NIX_ARGS")]
        nix_args: Vec<String>,
    },
}

/// Run `cache`.
pub fn run(args: Args) -> super::CmdResult {
    match args.action {
        Action::Push { dir, to, key_file, nix_args } => {
            let dir = dir.unwrap_or_else(|| Utf8PathBuf::from("."));
            let pushed = crate::nixdrv::cache::push(&dir, &to, &key_file, &nix_args)?;
            for p in &pushed.paths {
                println!("pushed {p} (signed by {}) -> {to}", pushed.key_name);
            }
        }
        Action::Pull { dir, from, public_key, nix_args } => {
            let dir = dir.unwrap_or_else(|| Utf8PathBuf::from("."));
            let pulled = crate::nixdrv::cache::pull(&dir, &from, &public_key, &nix_args)?;
            if pulled.fetched.is_empty() {
                // Nothing was copied: the local store had the bundle, which the cache has too,
                // signed by the key given.
                println!(
                    "{} was already in the local Nix store; {from} has it, signed by the key given, so that copy was used",
                    pulled.bundle
                );
            }
            for p in &pulled.variants {
                let name = p.file_name().unwrap_or_default();
                if pulled.fetched.is_empty() {
                    println!("copied {name} from the local Nix store -> {p}");
                } else {
                    println!("fetched {name} from {from} -> {p}");
                }
            }
        }
    }
    Ok(ExitCode::SUCCESS)
}
