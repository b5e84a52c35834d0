//! Driving Nix. Placeholder in this branch: the Nix module replaces this file when it is
//! merged, keeping [`build_and_copy`]'s signature.

use camino::Utf8Path;

/// Build the kernel in `kernel_dir` through its flake (`nix build`) and copy the requested
/// variants (all when empty) into `kernel_dir/build/`. `nix_args` are passed to `nix build`.
///
/// Errors: always, in this build: the Nix path is not wired in yet.
pub fn build_and_copy(
    kernel_dir: &Utf8Path,
    variants: &[String],
    nix_args: &[String],
) -> anyhow::Result<()> {
    let _ = (variants, nix_args);
    anyhow::bail!(
        "the Nix path is not wired in this build; build `{kernel_dir}` natively with `--nix never`"
    )
}
