//! Driving Nix: `nix build` of a kernel flake's bundle (or some of its variants), the sandbox
//! check, and copying the built variants into `<kernel>/build/`.
//!
//! The flake outputs used here are made by `lib.genKernelFlakeOutputs` (`nix/lib/`):
//! `packages.<system>.bundle` (every bundle cell joined as `<variant>/…`) and
//! `packages.<system>.<variant>` (one cell, holding `<variant>/…`). The Nix program is `nix`
//! from `PATH`, or the one named by `KERNEL_BUILDER_NIX`. Every subprocess runs through [`Cmd`]
//! with its output captured, and Nix's build log is shown when a build fails.
//!
//! [`builders`] checks and reports Nix remote builders (`build-and-copy --builders`), [`cache`]
//! pushes built cells to a signed binary cache and pulls them back (`kernel-builder cache`).
//! [`jobs`] holds the small jobs that the Nix library's derivations run with the
//! orchestrator as their builder (`kernel-builder nix-support …`).

pub mod builders;
pub mod cache;
pub mod flake_cells;
pub mod jobs;
mod progress;

use anyhow::{bail, Context};
use camino::{Utf8Path, Utf8PathBuf};
use serde::Deserialize;

use crate::error::{Error, Kind};
use crate::process::Cmd;

/// Environment variable that names the Nix program (default: `nix` from `PATH`).
pub const NIX_ENV: &str = crate::env::NIX.name;

/// Environment variable naming a directory that holds `bin/kernel-builder`: the orchestrator
/// the cells run, handed to the flake as `--override-input kernel-builder/orchestrator`.
pub const ORCHESTRATOR_ENV: &str = crate::env::ORCHESTRATOR.name;

/// Lines of Nix's output shown when a build fails.
const LOG_TAIL_LINES: usize = 200;

/// How many of the last lines of Nix's output are kept while it runs (for the error message
/// and the offline hint).
const KEPT_LOG_LINES: usize = 2000;

/// The Nix program to run: `$KERNEL_BUILDER_NIX`, else `nix`.
///
/// Errors: the variable is not UTF-8 text ([`crate::env::Var::setting`]).
pub fn nix_program() -> anyhow::Result<String> {
    Ok(crate::env::NIX.setting()?.unwrap_or_else(|| "nix".to_owned()))
}

/// `nix ARGS` run to the end ([`Cmd::output`]); Nix that cannot be started is a typed
/// [`Kind::Nix`] error that says how to install it or build without it.
fn nix_output(nix: &str, args: &[&str]) -> Result<crate::process::Output, Error> {
    Cmd::new(nix).args(args.iter().copied()).output().map_err(|e| {
        let command = e.command().to_owned();
        Error::new(Kind::Nix, format!("cannot run `{command}`: Nix is not installed or not on PATH"))
            .hint(format!(
                "install Nix (Debian: `apt-get install nix-bin`, see scripts/setup-nix.sh), set {NIX_ENV} to \
                 its path, or build without Nix (`build-and-copy --nix never`)"
            ))
            .with_source(match e {
                crate::process::Error::Spawn { source, .. } => anyhow::Error::from(source),
                other => anyhow::Error::from(other),
            })
    })
}

/// `nix --version`'s first line (e.g. `nix (Nix) 2.8.0`).
///
/// Errors: Nix cannot be run; the message says how to install it or build without it.
pub fn nix_version() -> anyhow::Result<String> {
    let nix = nix_program()?;
    let out = nix_output(&nix, &["--version"])?;
    if !out.success() {
        bail!("`{nix} --version` failed:\n{}", out.stderr.trim_end());
    }
    Ok(out.stdout.lines().next().unwrap_or("").trim().to_owned())
}

/// The value of the `sandbox` setting, as `nix show-config --json` reports it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Sandbox {
    /// `true`: every build is sandboxed.
    On,
    /// `relaxed` (macOS): sandboxed unless a derivation opts out.
    Relaxed,
    /// `false`, or a value we do not know.
    Off(String),
}

/// `nix show-config --json` as printed (`{"<setting>": {"value": …, …}, …}`).
///
/// Errors: the command cannot run or fails (the message suggests the nix.conf line it needs).
pub fn show_config_json() -> anyhow::Result<String> {
    let nix = nix_program()?;
    let out = nix_output(&nix, &["show-config", "--json"])?;
    if !out.success() {
        return Err(Error::new(
            Kind::Nix,
            format!("`{nix} show-config --json` failed:\n{}", out.stderr.trim_end()),
        )
        .hint("is `experimental-features = nix-command flakes` in /etc/nix/nix.conf?")
        .into());
    }
    Ok(out.stdout)
}

/// Read `sandbox` from `nix show-config --json` (`{"sandbox": {"value": true, …}, …}`).
///
/// Errors: the command fails or its JSON has no `sandbox` setting.
pub fn sandbox_setting() -> anyhow::Result<Sandbox> {
    parse_sandbox(&show_config_json()?)
}

/// Parse the `sandbox` value out of `nix show-config --json` output.
pub fn parse_sandbox(json: &str) -> anyhow::Result<Sandbox> {
    let v: serde_json::Value =
        serde_json::from_str(json).context("`nix show-config --json` did not print JSON")?;
    let value = v
        .get("sandbox")
        .map(|s| s.get("value").unwrap_or(s))
        .context("`nix show-config --json` has no `sandbox` setting")?;
    Ok(match value {
        serde_json::Value::Bool(true) => Sandbox::On,
        serde_json::Value::String(s) if s == "true" => Sandbox::On,
        serde_json::Value::String(s) if s == "relaxed" => Sandbox::Relaxed,
        other => Sandbox::Off(other.to_string()),
    })
}

/// Refuse to build unless Nix sandboxes builds: `true` on Linux; `true` or `relaxed` on macOS.
pub fn require_sandbox(setting: &Sandbox) -> anyhow::Result<()> {
    let ok = match setting {
        Sandbox::On => true,
        Sandbox::Relaxed => cfg!(target_os = "macos"),
        Sandbox::Off(_) => false,
    };
    if ok {
        return Ok(());
    }
    let shown = match setting {
        Sandbox::On => "true".to_owned(),
        Sandbox::Relaxed => "relaxed".to_owned(),
        Sandbox::Off(v) => v.clone(),
    };
    bail!(
        "Nix's sandbox is off (`sandbox = {shown}`), so a build could read the host and would not \
         be hermetic. Turn it on: add `sandbox = true` (and `sandbox-fallback = false`) to \
         /etc/nix/nix.conf, then restart nix-daemon if one runs (`systemctl restart nix-daemon`)"
    )
}

/// One entry of `nix build --json`.
#[derive(Debug, Deserialize)]
struct BuildResult {
    outputs: std::collections::BTreeMap<String, Utf8PathBuf>,
}

/// Given to every Nix call on the user's kernel flake: Nix never writes `flake.lock` into the
/// kernel (nor `git add`s it, which it does in a git work tree). A lock Nix has to make up
/// (the kernel has none, or an input moved) lives for that call only; `nix flake lock`
/// writes one when the user wants it.
pub(crate) const NO_WRITE_LOCK: &str = "--no-write-lock-file";

/// Build the kernel flake at `kernel_dir` with Nix and copy the result into `kernel_dir/build/`.
///
/// With `variants` empty, builds `<dir>#bundle` (every bundle cell of this system); otherwise
/// builds `<dir>#<variant>` for each one. `extra_args` go to `nix build` as they are (e.g.
/// `--max-jobs 2`, `--override-input kernel-builder/orchestrator path:/opt/kb`). Without such
/// an override, [`orchestrator_override`] may add one (`$KERNEL_BUILDER_ORCHESTRATOR`, or this
/// executable when it is static), so a machine without nixpkgs builds offline. Afterwards
/// each built variant directory replaces `build/<variant>` atomically (other entries of
/// `build/` are left alone); the copies are writable, and `build/hashes.json` records them as
/// a native build does. Nix's log goes to stderr as it comes, with a progress line under it on
/// a terminal; `quiet` (`--json`) shows neither (the log is still in the error).
///
/// Returns the paths of the variant directories written.
///
/// Errors: Nix missing, sandbox off (with how to turn it on), the build failing (with the tail of
/// Nix's build log), or the copy failing (naming the path).
pub fn build_and_copy(
    kernel_dir: &Utf8Path,
    variants: &[String],
    extra_args: &[String],
    quiet: bool,
) -> anyhow::Result<Vec<Utf8PathBuf>> {
    let outputs = build(kernel_dir, variants, extra_args, quiet)?;
    // `build` linked out of the kernel would make the copy write there.
    let dest = crate::fsutil::inside(kernel_dir, Utf8Path::new("build"))?;
    let mut copied = Vec::new();
    for out in &outputs {
        copied.extend(jobs::copy_variants(out, &dest)?.into_iter().map(|n| dest.join(n)));
    }
    if !variants.is_empty() {
        // Single cells carry no manifest (the bundle does): record them as a native build would.
        let (_kernel, set) = crate::kernel::load_with_sources(kernel_dir)?;
        crate::hash::manifest::Manifest::for_bundle(&dest, variants, &set.tree_id())?.update_in(&dest)?;
    }
    Ok(copied)
}

/// Refuse a kernel directory without its own `flake.nix`: Nix would otherwise take the flake
/// of an enclosing git repository and fail on a missing attribute.
///
/// Errors: `kernel_dir/flake.nix` is not a file; the message says what a kernel flake holds.
pub fn require_flake(kernel_dir: &Utf8Path) -> anyhow::Result<()> {
    if !kernel_dir.join("flake.nix").is_file() {
        bail!(
            "`{kernel_dir}` has no flake.nix; a kernel flake calls \
             `kernel-builder.lib.genKernelFlakeOutputs {{ inherit self; path = ./.; }}` (see `kernel-builder init`)"
        );
    }
    Ok(())
}

/// Build the bundle (or `variants`) of the kernel flake at `kernel_dir`; returns the output
/// store paths in the order asked for. See [`build_and_copy`] for arguments and errors.
pub fn build(
    kernel_dir: &Utf8Path,
    variants: &[String],
    extra_args: &[String],
    quiet: bool,
) -> anyhow::Result<Vec<Utf8PathBuf>> {
    let version = nix_version()?;
    require_sandbox(&sandbox_setting()?)?;
    require_flake(kernel_dir)?;
    let dir = kernel_dir.canonicalize_utf8().with_context(|| format!("cannot resolve `{kernel_dir}`"))?;
    check_git_tracking(&dir)?;
    let mut extra: Vec<String> = extra_args.to_vec();
    if let Some(orchestrator) = orchestrator_override(extra_args)? {
        extra.extend([
            "--override-input".into(),
            "kernel-builder/orchestrator".into(),
            format!("path:{orchestrator}"),
        ]);
    }
    let extra_args = extra.as_slice();
    if !variants.is_empty() {
        check_variants(&dir, variants, extra_args)?;
    }
    let installables: Vec<String> = if variants.is_empty() {
        vec![format!("{dir}#bundle")]
    } else {
        variants.iter().map(|v| format!("{dir}#{v}")).collect()
    };
    let mut args: Vec<String> =
        vec!["build".into(), "--no-link".into(), "--json".into(), "-L".into(), NO_WRITE_LOCK.into()];
    args.extend(installables.iter().cloned());
    args.extend(extra_args.iter().cloned());
    let nix = nix_program()?;
    // Nix's progress and build log (`-L`) go to stderr as they come, so a long build is not
    // silent (with a progress line under them on a terminal; nothing with `quiet`); the JSON
    // result goes to a file, and the last lines are kept for the error.
    let json =
        tempfile::NamedTempFile::new().context("cannot create a temporary file for `nix build --json`")?;
    // Interrupted (Ctrl-C, SIGTERM, SIGHUP): `nix build` is stopped, this file removed, and the
    // exit status is 128 + signal ([`crate::interrupt`]).
    let json_path = Utf8Path::from_path(json.path())
        .context("the temporary file for `nix build --json` has a non-UTF-8 path")?;
    let _json_registered = crate::interrupt::remove_on_interrupt(json_path, crate::interrupt::Removal::All);
    let mut shown = progress::NixProgress::new(quiet);
    let streamed = Cmd::new(&nix).args(args.iter().cloned()).stdout_file(json.path()).stream(
        KEPT_LOG_LINES,
        |_| {},
        |line| shown.line(line),
    );
    shown.finish();
    let streamed = streamed?;
    let (status, kept, seen) = (streamed.status, streamed.tail, streamed.lines);
    let stdout = std::fs::read(json.path()).context("cannot read the output of `nix build --json`")?;
    let out = std::process::Output { status, stdout, stderr: Vec::new() };
    let log = kept.iter().cloned().collect::<Vec<_>>().join("\n");
    if !out.status.success() {
        let lines: Vec<&str> = log.lines().collect();
        let tail = &lines[lines.len().saturating_sub(LOG_TAIL_LINES)..];
        let message = format!(
            "`{nix} {}` failed ({version}); Nix's build log{}:\n{}{}",
            args.join(" "),
            if tail.len() < seen { " (last lines; `nix log <drv>` has the rest)" } else { "" },
            tail.join("\n"),
            builders::explain_failure(&log).map(|e| format!("\n{e}")).unwrap_or_default(),
        );
        let hints = offline_hint(&log).into_iter().chain(unpacked_hash_hint(&log));
        return Err(Error::new(Kind::Nix, message).with_hints(hints).into());
    }
    for line in builders::summary(&log) {
        crate::printer::stderr!("note: {line}");
    }
    let results: Vec<BuildResult> = serde_json::from_slice(&out.stdout)
        .with_context(|| format!("`{nix} build --json` printed something that is not its JSON"))?;
    let paths: Vec<Utf8PathBuf> = results.into_iter().filter_map(|r| r.outputs.get("out").cloned()).collect();
    if paths.len() != installables.len() {
        bail!("`{nix} build` reported {} outputs for {} installables", paths.len(), installables.len());
    }
    Ok(paths)
}

/// Where the Nix route gets the orchestrator its cells run, when that needs no nixpkgs
/// download: an explicit `--override-input …/orchestrator` in `extra_args`, an
/// [`orchestrator_override`] (`$KERNEL_BUILDER_ORCHESTRATOR`, or this executable when it is
/// static), or this executable running from the Nix store (installed through the flake, whose
/// locked nixpkgs built it and so is in the store). `None`: the flake would have to build the
/// orchestrator from a nixpkgs it may not have; `build-and-copy --nix auto` then builds
/// natively.
pub fn offline_orchestrator(extra_args: &[String]) -> anyhow::Result<Option<&'static str>> {
    if extra_args.windows(2).any(|w| w[0] == "--override-input" && w[1].ends_with("/orchestrator")) {
        return Ok(Some("the `--override-input …/orchestrator` given"));
    }
    if crate::env::ORCHESTRATOR.os_non_empty().is_some() {
        orchestrator_override(extra_args)?;
        return Ok(Some("KERNEL_BUILDER_ORCHESTRATOR"));
    }
    if std::env::current_exe().is_ok_and(|e| e.starts_with("/nix/store")) {
        return Ok(Some("this kernel-builder, installed through its flake"));
    }
    Ok(orchestrator_override(extra_args)?.map(|_| "this statically linked kernel-builder"))
}

/// The orchestrator directory to hand the flake, unless `extra_args` already override
/// `…/orchestrator`: `$KERNEL_BUILDER_ORCHESTRATOR`, else this very executable when it is a
/// statically linked ELF (it then runs as the cells' builder in the sandbox, so no nixpkgs is
/// needed), staged once under the user's cache directory; else none (the flake builds the
/// orchestrator with nixpkgs).
///
/// Errors: `$KERNEL_BUILDER_ORCHESTRATOR` names a directory without `bin/kernel-builder`, or
/// the staging copy fails.
pub fn orchestrator_override(extra_args: &[String]) -> anyhow::Result<Option<Utf8PathBuf>> {
    let overridden =
        extra_args.windows(2).any(|w| w[0] == "--override-input" && w[1].ends_with("/orchestrator"));
    if overridden {
        return Ok(None);
    }
    if let Some(dir) = crate::env::ORCHESTRATOR.os_non_empty() {
        let dir = Utf8PathBuf::from_path_buf(dir.into())
            .map_err(|d| anyhow::anyhow!("{ORCHESTRATOR_ENV}={} is not UTF-8", d.display()))?;
        if !dir.join("bin/kernel-builder").is_file() || !dir.join("flake.nix").is_file() {
            bail!("{ORCHESTRATOR_ENV}={dir} needs bin/kernel-builder and flake.nix (scripts/setup-nix.sh makes such a directory and prints it)");
        }
        return Ok(Some(dir));
    }
    let Ok(exe) = std::env::current_exe() else { return Ok(None) };
    let Ok(bytes) = std::fs::read(&exe) else { return Ok(None) };
    if !is_static_elf(&bytes) {
        return Ok(None);
    }
    stage_orchestrator(&bytes).map(Some)
}

/// The `flake.nix` of an orchestrator directory. The kernel-builder flake's `orchestrator`
/// input follows nixpkgs by default (a flake), so a directory that overrides it must be a
/// flake too; this one has no outputs, only `bin/kernel-builder` beside it.
pub const ORCHESTRATOR_FLAKE: &str = "{\n  description = \"A prebuilt kernel-builder orchestrator (bin/kernel-builder) for the kernel-builder flake\";\n  outputs = { self }: { };\n}\n";

/// Whether `bytes` is a 64-bit little-endian ELF executable with no program interpreter
/// (`PT_INTERP`), i.e. one that runs with nothing else present (static or static-pie).
pub fn is_static_elf(bytes: &[u8]) -> bool {
    const PT_INTERP: u32 = 3;
    let u16_at = |o: usize| bytes.get(o..o + 2).map(|b| u16::from_le_bytes([b[0], b[1]]) as usize);
    let u32_at = |o: usize| bytes.get(o..o + 4).map(|b| u32::from_le_bytes([b[0], b[1], b[2], b[3]]));
    let u64_at =
        |o: usize| bytes.get(o..o + 8).map(|b| u64::from_le_bytes(b.try_into().unwrap_or([0; 8])) as usize);
    if bytes.len() < 64 || &bytes[..4] != b"\x7fELF" || bytes[4] != 2 || bytes[5] != 1 {
        return false;
    }
    let (Some(phoff), Some(phentsize), Some(phnum)) = (u64_at(0x20), u16_at(0x36), u16_at(0x38)) else {
        return false;
    };
    if phnum == 0 || phentsize < 4 {
        return false;
    }
    (0..phnum).all(|i| matches!(u32_at(phoff + i * phentsize), Some(t) if t != PT_INTERP))
}

/// Copy the orchestrator executable to `<cache>/kernel-builder/orchestrator-<sha256 prefix>/bin/`
/// (once per distinct binary; the content-derived name keeps the flake input's store path
/// stable) and return that directory.
fn stage_orchestrator(bytes: &[u8]) -> anyhow::Result<Utf8PathBuf> {
    use sha2::Digest;
    use std::os::unix::fs::PermissionsExt;
    let digest = sha2::Sha256::digest(bytes);
    let id: String = digest.iter().take(8).map(|b| format!("{b:02x}")).collect();
    let cache = crate::env::XDG_CACHE_HOME
        .os_non_empty()
        .map(std::path::PathBuf::from)
        .or_else(|| crate::env::HOME.os().map(|h| std::path::PathBuf::from(h).join(".cache")))
        .context("neither XDG_CACHE_HOME nor HOME is set; set KERNEL_BUILDER_ORCHESTRATOR instead")?;
    let cache = Utf8PathBuf::from_path_buf(cache.join("kernel-builder"))
        .map_err(|p| anyhow::anyhow!("cache directory `{}` is not UTF-8", p.display()))?;
    let dir = cache.join(format!("orchestrator-v2-{id}"));
    if dir.join("bin/kernel-builder").is_file() {
        return Ok(dir);
    }
    std::fs::create_dir_all(&cache).with_context(|| format!("cannot create `{cache}`"))?;
    let staging = tempfile::Builder::new()
        .prefix(".orchestrator-")
        .tempdir_in(&cache)
        .with_context(|| format!("cannot create a temporary directory in `{cache}`"))?;
    let bin = staging.path().join("bin");
    std::fs::create_dir(&bin).with_context(|| format!("cannot create `{}`", bin.display()))?;
    let exe = bin.join("kernel-builder");
    std::fs::write(&exe, bytes).with_context(|| format!("cannot write `{}`", exe.display()))?;
    let flake = staging.path().join("flake.nix");
    std::fs::write(&flake, ORCHESTRATOR_FLAKE)
        .with_context(|| format!("cannot write `{}`", flake.display()))?;
    std::fs::set_permissions(&exe, std::fs::Permissions::from_mode(0o755))
        .with_context(|| format!("cannot set permissions on `{}`", exe.display()))?;
    match std::fs::rename(staging.path(), &dir) {
        Ok(()) => Ok(dir),
        // Another process staged the same binary first.
        Err(_) if dir.join("bin/kernel-builder").is_file() => Ok(dir),
        Err(e) => Err(e).with_context(|| format!("cannot move the orchestrator into `{dir}`")),
    }
}

/// Inside a git work tree Nix sees only the files git tracks (untracked files are left out of
/// the flake's source). An untracked flake.nix or build.toml is an error; other untracked
/// files of the kernel directory get a warning that names them. Outside git, nothing to check.
fn check_git_tracking(dir: &Utf8Path) -> anyhow::Result<()> {
    let untracked =
        match Cmd::git().args(["ls-files", "--others", "--exclude-standard", "--", "."]).dir(dir).run() {
            Ok(out) => out.stdout,
            // No git, or not a work tree: Nix copies the directory as it is.
            _ => return Ok(()),
        };
    let files: Vec<&str> = untracked.lines().filter(|l| !l.is_empty() && !l.starts_with("build/")).collect();
    let fatal: Vec<&str> =
        files.iter().copied().filter(|f| *f == "flake.nix" || *f == "build.toml").collect();
    if !fatal.is_empty() {
        bail!(
            "{} in `{dir}` {} not tracked by git, and Nix only sees tracked files of a git work tree; \
             run `git -C {dir} add {}`",
            fatal.join(" and "),
            if fatal.len() == 1 { "is" } else { "are" },
            fatal.join(" ")
        );
    }
    if !files.is_empty() {
        const SHOWN: usize = 10;
        crate::printer::stderr!(
            "warning: {} file(s) in `{dir}` are not tracked by git, so Nix does not see them (`git add` them if the build needs them): {}{}",
            files.len(),
            files.iter().take(SHOWN).copied().collect::<Vec<_>>().join(", "),
            if files.len() > SHOWN { ", …" } else { "" }
        );
    }
    Ok(())
}

/// When an unpacked toolchain tree (a fixed-output path by its NAR hash pinned in
/// nix/torch-wheels.json's `unpacked`) came out different: the unpacking changed since the hash
/// was recorded.
fn unpacked_hash_hint(log: &str) -> Option<String> {
    let mismatch = log
        .lines()
        .any(|l| l.contains("hash mismatch in fixed-output derivation") && l.contains("-unpacked.drv"));
    mismatch.then(|| {
        "an unpacked toolchain differs from the NAR hash nix/torch-wheels.json records for it \
         (`unpacked`): this kernel-builder unpacks wheels differently from the one that recorded \
         it. Build one of its cells natively (`--nix never`, the same unpacking), then run \
         `kernel-builder matrix pin-unpacked` to record the new hash"
            .to_owned()
    })
}

/// When Nix failed to download something (no network, no binary cache), how to build offline.
/// What failed decides: a pinned wheel or a package of the compiled cells' toolchain (whose
/// absence no orchestrator makes up for), or an input of the flakes (nixpkgs, kernel-builder),
/// where handing over a prebuilt orchestrator helps.
fn offline_hint(log: &str) -> Option<String> {
    let offline =
        ["unable to download", "Could not resolve host", "Couldn't resolve host", "unable to fetch"]
            .iter()
            .any(|needle| log.contains(needle));
    if !offline {
        return None;
    }
    let native = "or build natively with `--nix never`";
    match failed_download(log) {
        Some(url) if url.ends_with(".whl") => {
            let file = url.rsplit('/').next().unwrap_or(url);
            Some(format!(
                "Nix could not download the pinned wheel `{file}` (a compiled cell's torch or CUDA \
                 toolchain, nix/torch-wheels.json): with no network, add the file to the store first \
                 (`nix-store --add-fixed sha256 {file}`; a native build keeps it in the toolchain \
                 cache, which `kernel-builder native-cache` shows), {native}"
            ))
        }
        Some(url) if !url.contains("github.com") && !url.contains("channels.nixos.org") => Some(format!(
            "Nix could not download `{url}`, part of the compiled cells' toolchain (their compiler, \
             CMake and Python come from nixpkgs and its binary cache; a prebuilt orchestrator does \
             not replace them): build once with the network so that the store holds them, {native}"
        )),
        _ => Some(
            "Nix could not fetch an input (offline?). The cells only need the orchestrator: \
             hand the flake a statically linked one: run `scripts/setup-nix.sh` and set \
             KERNEL_BUILDER_ORCHESTRATOR to the directory it prints (or pass \
             `-- --override-input kernel-builder/orchestrator path:<dir>`), or run a static kernel-builder, \
             which hands itself over. If the unreachable input is kernel-builder itself (a kernel made by \
             `kernel-builder init` points at its public flake), add `-- --override-input kernel-builder \
             path:<kernel-builder checkout>`, or build natively with `--nix never`"
                .to_owned(),
        ),
    }
}

/// The URL of the download a Nix log says failed: the one of an `error:` line, else the first.
fn failed_download(log: &str) -> Option<&str> {
    fn url(line: &str) -> Option<&str> {
        let rest = line.split_once("unable to download '")?.1;
        rest.split_once('\'').map(|(u, _)| u)
    }
    let lines = || log.lines().map(str::trim_start);
    lines().filter(|l| l.starts_with("error:")).find_map(url).or_else(|| lines().find_map(url))
}

/// Refuse variants the flake does not build on this system, listing those it does (read from
/// the flake's `variants.<system>` output).
fn check_variants(dir: &Utf8Path, variants: &[String], extra_args: &[String]) -> anyhow::Result<()> {
    let system = crate::matrix::host_system();
    // Only the flags that change what is evaluated (input overrides, lock handling).
    let stdout = flake_cells::eval_variants(dir, &format!("variants.{system}"), &eval_flags(extra_args))?;
    #[derive(Deserialize)]
    struct Named {
        name: String,
    }
    let cells: Vec<Named> = serde_json::from_str(&stdout).with_context(|| {
        format!(
            "`{dir}#variants.{system}` is not a list of cells; is the flake made by genKernelFlakeOutputs?"
        )
    })?;
    let known: Vec<&str> = cells.iter().map(|c| c.name.as_str()).collect();
    let unknown: Vec<&str> = variants.iter().map(String::as_str).filter(|v| !known.contains(v)).collect();
    if !unknown.is_empty() {
        let message = format!(
            "`{dir}` has no variant {} on {system}; its variants are: {}",
            unknown.iter().map(|v| format!("`{}`", v.escape_debug())).collect::<Vec<_>>().join(", "),
            if known.is_empty() { "(none)".to_owned() } else { known.join(", ") },
        );
        // A near miss, a kernels 0.19 spelling, another system's variant: as the native path
        // says them.
        return Err(crate::bundle::no_such_variant(message, &unknown, &known));
    }
    Ok(())
}

/// The `nix build` arguments that `nix eval` needs too: `--override-input A B`, `--impure`,
/// `--no-write-lock-file`, `--recreate-lock-file`, `--no-update-lock-file`, `--offline`.
pub(crate) fn eval_flags(extra_args: &[String]) -> Vec<String> {
    let mut out = Vec::new();
    let mut i = 0;
    while i < extra_args.len() {
        let a = extra_args[i].as_str();
        match a {
            "--override-input" => {
                out.extend(extra_args[i..(i + 3).min(extra_args.len())].iter().cloned());
                i += 3;
                continue;
            }
            "--impure"
            | "--no-write-lock-file"
            | "--recreate-lock-file"
            | "--no-update-lock-file"
            | "--offline" => out.push(a.to_owned()),
            _ => {}
        }
        i += 1;
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A minimal ELF64 LE header with the given program header types.
    fn elf(types: &[u32]) -> Vec<u8> {
        let mut b = vec![0u8; 64 + 56 * types.len()];
        b[..4].copy_from_slice(b"\x7fELF");
        b[4] = 2;
        b[5] = 1;
        b[0x20..0x28].copy_from_slice(&64u64.to_le_bytes());
        b[0x36..0x38].copy_from_slice(&56u16.to_le_bytes());
        b[0x38..0x3a].copy_from_slice(&(types.len() as u16).to_le_bytes());
        for (i, t) in types.iter().enumerate() {
            b[64 + 56 * i..64 + 56 * i + 4].copy_from_slice(&t.to_le_bytes());
        }
        b
    }

    #[test]
    fn static_elf_has_no_interpreter() {
        assert!(is_static_elf(&elf(&[6, 1, 1, 2])));
        assert!(!is_static_elf(&elf(&[6, 3, 1, 2])));
        assert!(!is_static_elf(&elf(&[])));
        assert!(!is_static_elf(b"#!/bin/sh\n"));
        let mut truncated = elf(&[1, 1]);
        truncated.truncate(64 + 56);
        assert!(!is_static_elf(&truncated));
    }

    #[test]
    fn an_explicit_orchestrator_override_wins() {
        let args: Vec<String> =
            ["--override-input", "builder/orchestrator", "path:/x"].map(String::from).to_vec();
        assert_eq!(orchestrator_override(&args).unwrap(), None);
    }

    #[test]
    fn eval_flags_keep_overrides_and_lock_flags_only() {
        let args: Vec<String> = [
            "-L",
            "--max-jobs",
            "2",
            "--override-input",
            "kernel-builder/orchestrator",
            "path:/o",
            "--no-write-lock-file",
        ]
        .map(String::from)
        .to_vec();
        assert_eq!(
            eval_flags(&args),
            ["--override-input", "kernel-builder/orchestrator", "path:/o", "--no-write-lock-file"]
        );
    }

    #[test]
    fn offline_failures_get_the_override_hint() {
        assert!(offline_hint(
            "error: unable to download 'https://github.com/...': Couldn't resolve host name"
        )
        .unwrap()
        .contains("--override-input"));
        assert_eq!(offline_hint("error: builder failed with exit code 1"), None);
        let mismatch = "error: hash mismatch in fixed-output derivation '/nix/store/3x-torch-2.15.0-241fea2bac4e-unpacked.drv':\n  specified: sha256-AAAA\n     got:    sha256-BBBB";
        assert!(unpacked_hash_hint(mismatch).unwrap().contains("kernel-builder matrix pin-unpacked"));
        assert_eq!(
            unpacked_hash_hint(
                "error: hash mismatch in fixed-output derivation '/nix/store/3x-torch.whl.drv':"
            ),
            None
        );
        assert!(offline_hint(
            "error: unable to download 'https://api.github.com/repos/nixos/nixpkgs/tarball/x'"
        )
        .unwrap()
        .contains("KERNEL_BUILDER_ORCHESTRATOR"));
    }

    /// Issue 31: `cache push` named the orchestrator when what Nix could not download was
    /// the compiled cells' toolchain, which no orchestrator replaces.
    #[test]
    fn a_missing_toolchain_is_named_not_the_orchestrator() {
        let wheel = "warning: unable to download 'https://cache.nixos.org/x.narinfo': Couldn't resolve host name\n\
                     error: unable to download 'https://files.pythonhosted.org/packages/ab/torch-2.14.0-cp313-cp313-manylinux_2_28_x86_64.whl': Couldn't resolve host name (6)";
        assert_eq!(
            offline_hint(wheel).unwrap(),
            "Nix could not download the pinned wheel `torch-2.14.0-cp313-cp313-manylinux_2_28_x86_64.whl` (a compiled cell's torch or CUDA toolchain, nix/torch-wheels.json): with no network, add the file to the store first (`nix-store --add-fixed sha256 torch-2.14.0-cp313-cp313-manylinux_2_28_x86_64.whl`; a native build keeps it in the toolchain cache, which `kernel-builder native-cache` shows), or build natively with `--nix never`"
        );
        let gcc = "error: unable to download 'https://ftp.gnu.org/gnu/gcc/gcc-14.3.0/gcc-14.3.0.tar.xz': Could not resolve host: ftp.gnu.org";
        assert_eq!(
            offline_hint(gcc).unwrap(),
            "Nix could not download `https://ftp.gnu.org/gnu/gcc/gcc-14.3.0/gcc-14.3.0.tar.xz`, part of the compiled cells' toolchain (their compiler, CMake and Python come from nixpkgs and its binary cache; a prebuilt orchestrator does not replace them): build once with the network so that the store holds them, or build natively with `--nix never`"
        );
    }

    #[test]
    fn sandbox_values_from_show_config() {
        assert_eq!(parse_sandbox(r#"{"sandbox":{"value":true}}"#).unwrap(), Sandbox::On);
        assert_eq!(parse_sandbox(r#"{"sandbox":{"value":"relaxed"}}"#).unwrap(), Sandbox::Relaxed);
        assert_eq!(parse_sandbox(r#"{"sandbox":{"value":false}}"#).unwrap(), Sandbox::Off("false".into()));
        assert!(parse_sandbox(r#"{"cores":{"value":0}}"#).is_err());
    }

    #[test]
    fn sandbox_off_is_refused_with_the_fix() {
        let err = require_sandbox(&Sandbox::Off("false".into())).unwrap_err().to_string();
        assert!(err.contains("sandbox = true"), "{err}");
        assert!(err.contains("/etc/nix/nix.conf"), "{err}");
        assert!(require_sandbox(&Sandbox::On).is_ok());
        assert_eq!(require_sandbox(&Sandbox::Relaxed).is_ok(), cfg!(target_os = "macos"));
    }
}
