//! A signed Nix binary cache of a kernel's cells and bundle (`kernel-builder cache push` and
//! `cache pull`).
//!
//! Push builds (or finds in the store) the flake's `bundle` and every cell of this system
//! (`variants.<system>`), signs their closures with a secret key (`nix store sign -r -k FILE`,
//! a key from `nix key generate-secret --key-name NAME`) and copies them, closure and
//! signatures, to the cache (`nix copy --to URI`; any store URI Nix knows: `file:///srv/cache`,
//! `s3://bucket`, `ssh://host`).
//!
//! Pull makes the bundle come from such a cache and from nowhere else: before anything is
//! built it checks that the URI is a store URI, that the cache exists (`file://`: its
//! `nix-cache-info`; others: `nix store ping`), that it has the bundle signed by the key given
//! (even when the bundle is already in the local store), and asks Nix what a
//! build with that cache as the only substituter and the given public key as the only trusted
//! key would do (`nix build --dry-run`). Any derivation it would build is an error naming the
//! reason (the cache lacks the path, or its signatures are by other keys than the one given),
//! so a wrong key or URL never turns into a silent rebuild; the real build then runs with
//! `--max-jobs 0` (Nix may substitute but not build) and copies the bundle into `build/`.

use anyhow::{bail, Context};
use camino::{Utf8Path, Utf8PathBuf};

/// What `push` copied.
#[derive(Debug)]
pub struct Pushed {
    /// The bundle's output path, then each cell's, as built.
    pub paths: Vec<Utf8PathBuf>,
    /// The key name (the part of the secret key before `:`) the paths were signed with.
    pub key_name: String,
}

/// What `pull` wrote, and where the bundle came from.
#[derive(Debug)]
pub struct Pulled {
    /// The variant directories written into `build/`, as [`super::build_and_copy`] returns.
    pub variants: Vec<Utf8PathBuf>,
    /// The bundle's store path.
    pub bundle: String,
    /// The paths copied from the cache into the local store (the bundle and what it needs that
    /// the store lacked); empty when the bundle was already in the local store, so the pull
    /// only checked that the cache has it, signed by the key given, and copied it out.
    pub fetched: Vec<String>,
}

/// Run `nix ARGS` with captured output; the error carries Nix's stderr.
fn nix(args: &[String]) -> anyhow::Result<String> {
    let nix = super::nix_program()?;
    Ok(crate::process::Cmd::new(nix).args(args.iter().cloned()).run()?.stdout)
}

/// The name of a Nix signing key file (`NAME:BASE64`, as `nix key generate-secret` writes).
///
/// Errors: the file cannot be read or does not hold such a key.
pub fn key_name(key_file: &Utf8Path) -> anyhow::Result<String> {
    let text = std::fs::read_to_string(key_file)
        .with_context(|| format!("cannot read the signing key `{key_file}`"))?;
    match text.trim().split_once(':') {
        Some((name, key)) if !name.is_empty() && !key.is_empty() => Ok(name.to_owned()),
        _ => bail!(
            "`{key_file}` is not a Nix secret key (`NAME:BASE64`); make one with \
             `nix key generate-secret --key-name NAME > {key_file}` and give the public half \
             (`nix key convert-secret-to-public < {key_file}`) to whoever pulls"
        ),
    }
}

/// The cell names of the flake at `dir` on this system (`variants.<system>`).
fn flake_variants(dir: &Utf8Path, eval_flags: &[String]) -> anyhow::Result<Vec<String>> {
    let system = crate::matrix::host_system();
    let mut args: Vec<String> =
        vec!["eval".into(), "--json".into(), super::NO_WRITE_LOCK.into(), format!("{dir}#variants.{system}")];
    args.extend(eval_flags.iter().cloned());
    #[derive(serde::Deserialize)]
    struct Named {
        name: String,
    }
    let cells: Vec<Named> = serde_json::from_str(&nix(&args)?)
        .with_context(|| format!("`{dir}#variants.{system}` is not a list of cells"))?;
    Ok(cells.into_iter().map(|c| c.name).collect())
}

/// Build (or find) the bundle and every cell of the kernel flake at `kernel_dir`, sign them
/// and their closure with `key_file` and copy them to the store `to`. `extra_args` go to
/// `nix build` (and the input overrides among them to `nix eval`).
///
/// Errors: `to` is not a store URI ([`check_store_uri`]), `kernel_dir` has no flake.nix, the
/// key file is not a Nix secret key, a build fails, signing or copying fails (with
/// Nix's message).
pub fn push(
    kernel_dir: &Utf8Path,
    to: &str,
    key_file: &Utf8Path,
    extra_args: &[String],
) -> anyhow::Result<Pushed> {
    // Interrupted: the Nix process running is stopped too, and the exit status is 128 + signal.
    crate::interrupt::stop_children_on_interrupt();
    check_store_uri(to)?;
    super::require_flake(kernel_dir)?;
    let key_name = key_name(key_file)?;
    let mut extra = extra_args.to_vec();
    if let Some(o) = super::orchestrator_override(extra_args)? {
        extra.extend(["--override-input".into(), "kernel-builder/orchestrator".into(), format!("path:{o}")]);
    }
    let dir = kernel_dir.canonicalize_utf8().with_context(|| format!("cannot resolve `{kernel_dir}`"))?;
    let variants = flake_variants(&dir, &super::eval_flags(&extra))?;
    let mut paths = super::build(&dir, &[], &extra, false)?;
    if !variants.is_empty() {
        paths.extend(super::build(&dir, &variants, &extra, false)?);
    }
    let mut sign: Vec<String> =
        vec!["store".into(), "sign".into(), "--recursive".into(), "--key-file".into(), key_file.to_string()];
    sign.extend(paths.iter().map(|p| p.to_string()));
    nix(&sign)?;
    let mut copy: Vec<String> = vec!["copy".into(), "--to".into(), to.to_owned()];
    copy.extend(paths.iter().map(|p| p.to_string()));
    nix(&copy)?;
    Ok(Pushed { paths, key_name })
}

/// The URI schemes of the Nix stores a binary cache can live in (Nix 2.8).
pub const CACHE_SCHEMES: [&str; 6] = ["file", "http", "https", "s3", "ssh", "ssh-ng"];

/// Refuse what is not a Nix store URI of a binary cache (`SCHEME://…`, SCHEME one of
/// [`CACHE_SCHEMES`]): Nix itself would take such a string for a local store path or ignore it.
///
/// Errors: `uri` has no `://` or another scheme; the message lists the schemes.
pub fn check_store_uri(uri: &str) -> anyhow::Result<()> {
    match uri.split_once("://") {
        Some((scheme, rest)) if CACHE_SCHEMES.contains(&scheme) && !rest.is_empty() => Ok(()),
        _ => bail!(
            "`{uri}` is not a binary cache URI: give a Nix store URI with one of the schemes {} \
             (`file:///srv/kernel-cache`, `https://cache.example.org`, `s3://bucket`, `ssh://host`)",
            CACHE_SCHEMES.map(|s| format!("`{s}://`")).join(", ")
        ),
    }
}

/// For a `file://` URI, the cache directory it names (query and fragment dropped).
fn file_cache_dir(uri: &str) -> Option<Utf8PathBuf> {
    let rest = uri.strip_prefix("file://")?;
    Some(Utf8PathBuf::from(rest.split(['?', '#']).next().unwrap_or(rest)))
}

/// What a `nix build --dry-run` log says: the derivations that would be built (the lines under
/// `this derivation will be built:` / `these N derivations will be built:`) and the paths that
/// would be fetched (under `these N paths will be fetched (…):`).
pub fn dry_run_lists(dry_run_log: &str) -> (Vec<String>, Vec<String>) {
    let (mut built, mut fetched) = (Vec::new(), Vec::new());
    let mut into: Option<&mut Vec<String>> = None;
    for line in dry_run_log.lines() {
        if line.contains("will be built:") {
            into = Some(&mut built);
        } else if line.contains("will be fetched") {
            into = Some(&mut fetched);
        } else if let (true, Some(list)) = (line.starts_with("  "), into.as_mut()) {
            list.push(line.trim().to_owned());
        } else {
            into = None;
        }
    }
    (built, fetched)
}

/// The `nix build` options that make `from` the only substituter and `public_key` the only
/// trusted key.
fn substitute_args(from: &str, public_key: &str) -> Vec<String> {
    ["--option", "substituters", from, "--option", "trusted-public-keys", public_key]
        .map(String::from)
        .to_vec()
}

/// Why the cache `from` cannot give `path` under `public_key`: missing, or signed by others.
fn why_not_substitutable(from: &str, public_key: &str, path: &str) -> String {
    let key = public_key.split(':').next().unwrap_or(public_key);
    let args: Vec<String> =
        ["path-info", "--json", "--sigs", "--store", from, path].map(String::from).to_vec();
    match nix(&args) {
        Ok(json)
            if serde_json::from_str::<serde_json::Value>(&json)
                .ok()
                .and_then(|v| v.get(0).and_then(|e| e.get("valid")).and_then(|b| b.as_bool()))
                != Some(false) =>
        {
            let v: serde_json::Value = serde_json::from_str(&json).unwrap_or_default();
            let sigs: Vec<String> = v
                .get(0)
                .and_then(|e| e.get("signatures"))
                .and_then(|s| s.as_array())
                .map(|a| a.iter().filter_map(|s| s.as_str()).map(str::to_owned).collect())
                .unwrap_or_default();
            let names: Vec<&str> = sigs.iter().map(|s| s.split(':').next().unwrap_or(s)).collect();
            if names.is_empty() {
                format!("the cache has `{path}` but unsigned; push it with `--key-file` (its public half is the key to pull with)")
            } else if names.contains(&key) {
                format!(
                    "the cache has `{path}` signed by `{key}`, but not with the public key given: the key `{public_key}` does not match that signature (is it the public half of the key pushed with? `nix key convert-secret-to-public < SECRET`)"
                )
            } else {
                format!(
                    "the cache has `{path}`, signed by {}, not by the key given (`{key}`): use the public key of the one who pushed",
                    names.iter().map(|n| format!("`{n}`")).collect::<Vec<_>>().join(", ")
                )
            }
        }
        _ => format!(
            "the cache has no `{path}`: nobody pushed this bundle (the same source and kernel-builder) there; push it with `kernel-builder cache push --to {from}`"
        ),
    }
}

/// Fill `kernel_dir/build/` with the bundle from the binary cache `from` only, trusting only
/// `public_key` (`NAME:BASE64`, from `nix key convert-secret-to-public`), building nothing.
/// Returns the variant directories written, as [`super::build_and_copy`] does, and what was
/// fetched ([`Pulled`]).
///
/// The cache is checked even when the bundle is already in the local store (then that copy is
/// used, and [`Pulled::fetched`] is empty): it must have the bundle, signed by `public_key`.
///
/// Errors (all before anything is built or `build/` is touched): `from` is not a store URI
/// ([`check_store_uri`]); `kernel_dir` has no flake.nix; no cache at `from` (`file://`: no
/// `nix-cache-info`; others: `nix store ping` fails); a bundle or cell the cache lacks or
/// that is not signed by `public_key`, each said with the reason; then any failure of the
/// build or the copy.
pub fn pull(
    kernel_dir: &Utf8Path,
    from: &str,
    public_key: &str,
    extra_args: &[String],
) -> anyhow::Result<Pulled> {
    anyhow::ensure!(
        public_key.split_once(':').is_some_and(|(n, k)| !n.is_empty() && !k.is_empty()),
        "`{public_key}` is not a Nix public key (`NAME:BASE64`, as `nix key convert-secret-to-public` prints)"
    );
    // Interrupted: the Nix process running is stopped too, and the exit status is 128 + signal.
    crate::interrupt::stop_children_on_interrupt();
    check_store_uri(from)?;
    super::require_flake(kernel_dir)?;
    if let Some(dir) = file_cache_dir(from) {
        if !dir.join("nix-cache-info").is_file() {
            bail!(
                "no binary cache at `{from}`: `{}` does not exist (a cache that `kernel-builder cache push --to {from}` filled has one)",
                dir.join("nix-cache-info")
            );
        }
    } else {
        // (Not for `file://`: opening a local binary cache creates its `nix-cache-info`.)
        let ping: Vec<String> = [
            "store",
            "ping",
            "--store",
            from,
            "--option",
            "connect-timeout",
            "15",
            "--option",
            "download-attempts",
            "1",
        ]
        .map(String::from)
        .to_vec();
        nix(&ping)
            .map_err(|e| anyhow::anyhow!("no binary cache at `{from}` (it cannot be opened): {e:#}"))?;
    }
    let mut extra = extra_args.to_vec();
    if let Some(o) = super::orchestrator_override(extra_args)? {
        extra.extend(["--override-input".into(), "kernel-builder/orchestrator".into(), format!("path:{o}")]);
    }
    extra.extend(substitute_args(from, public_key));
    let dir = kernel_dir.canonicalize_utf8().with_context(|| format!("cannot resolve `{kernel_dir}`"))?;
    let mut dry: Vec<String> = vec![
        "build".into(),
        "--dry-run".into(),
        "--no-link".into(),
        super::NO_WRITE_LOCK.into(),
        format!("{dir}#bundle"),
    ];
    dry.extend(extra.iter().cloned());
    let nixp = super::nix_program()?;
    let out = crate::process::Cmd::new(&nixp).args(dry.iter().cloned()).output()?;
    let log = out.stderr;
    if !out.status.success() {
        bail!("`{nixp} {}` failed:\n{}", dry.join(" "), log.trim_end());
    }
    let (builds, mut fetched) = dry_run_lists(&log);
    let bundle_out = nix(&[
        vec!["eval".into(), "--raw".into(), super::NO_WRITE_LOCK.into(), format!("{dir}#bundle.outPath")],
        super::eval_flags(&extra),
    ]
    .concat())?;
    let bundle_out = bundle_out.trim();
    if !builds.is_empty() {
        bail!(
            "the bundle would be built, not fetched, from `{from}`: {}; {} derivation(s) would be built ({}); nothing was built and `{}` is unchanged",
            why_not_substitutable(from, public_key, bundle_out),
            builds.len(),
            builds.iter().map(|d| d.rsplit('/').next().unwrap_or(d)).collect::<Vec<_>>().join(", "),
            dir.join("build")
        );
    }
    // The bundle may already be in the local store (a dry run then lists nothing): the cache
    // must still have it, signed by the key given, or the pull would vouch for a cache it
    // never looked at.
    let has: Vec<String> = ["path-info", "--store", from, bundle_out].map(String::from).to_vec();
    if nix(&has).is_err() {
        bail!(
            "`{from}` does not have the bundle: {}; nothing was built and `{}` is unchanged",
            why_not_substitutable(from, public_key, bundle_out),
            dir.join("build")
        );
    }
    // What the dry run would copy in; nothing when the bundle is already in the local store.
    let copied = fetched.clone();
    if !fetched.iter().any(|p| p == bundle_out) {
        fetched.push(bundle_out.to_owned());
    }
    // Nix 2.8's dry run does not look at signatures (a wrong key shows up only when the
    // substitution is refused): check them now, with the key given as the only trusted one.
    {
        let mut verify: Vec<String> =
            ["store", "verify", "--no-contents", "--store", from].map(String::from).to_vec();
        verify.extend(["--option".into(), "trusted-public-keys".into(), public_key.to_owned()]);
        verify.extend(fetched.iter().cloned());
        let out = crate::process::Cmd::new(&nixp).args(verify.iter().cloned()).output()?;
        if !out.success() {
            let log = out.stderr;
            let untrusted: Vec<&str> = log
                .lines()
                .filter_map(|l| l.strip_prefix("path '")?.strip_suffix("' is untrusted"))
                .collect();
            let first = untrusted.first().copied().unwrap_or(fetched[0].as_str());
            bail!(
                "`{from}` has the bundle, but {} of the {} path(s) checked are not signed by the key given: {}; nothing was built and `{}` is unchanged",
                untrusted.len().max(1),
                fetched.len(),
                why_not_substitutable(from, public_key, first),
                dir.join("build")
            );
        }
    }
    // `--max-jobs 0`: should the cache change between the check and the build, Nix fails
    // instead of building.
    extra.extend(["--max-jobs".into(), "0".into()]);
    let variants = super::build_and_copy(&dir, &[], &extra, false)?;
    Ok(Pulled { variants, bundle: bundle_out.to_owned(), fetched: copied })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dry_run_lists_the_derivations_to_build_and_the_paths_to_fetch() {
        let log = "these 2 derivations will be built:\n  /nix/store/a-x.drv\n  /nix/store/b-y.drv\nthese 3 paths will be fetched (0.01 MiB download, 0.05 MiB unpacked):\n  /nix/store/c-z\n";
        assert_eq!(
            dry_run_lists(log),
            (
                vec!["/nix/store/a-x.drv".to_owned(), "/nix/store/b-y.drv".to_owned()],
                vec!["/nix/store/c-z".to_owned()]
            )
        );
        assert_eq!(
            dry_run_lists("this derivation will be built:\n  /nix/store/a-x.drv\n").0,
            ["/nix/store/a-x.drv"]
        );
        assert_eq!(dry_run_lists("warning: x\n  not a list\n"), (vec![], vec![]));
    }

    #[test]
    fn key_files_need_a_name() {
        let t = tempfile::tempdir().unwrap();
        let f = Utf8PathBuf::from_path_buf(t.path().join("k")).unwrap();
        std::fs::write(&f, "kb-test-1:c2VjcmV0\n").unwrap();
        assert_eq!(key_name(&f).unwrap(), "kb-test-1");
        std::fs::write(&f, "c2VjcmV0").unwrap();
        assert!(key_name(&f).unwrap_err().to_string().contains("nix key generate-secret"));
    }

    #[test]
    fn cache_uris_need_a_store_scheme() {
        for ok in ["file:///srv/c", "https://c.example.org/x", "s3://b", "ssh://h", "ssh-ng://u@h"] {
            check_store_uri(ok).unwrap();
        }
        for bad in ["not a uri", "/srv/cache", "ftp://h/c", "file://"] {
            assert_eq!(
                check_store_uri(bad).unwrap_err().to_string(),
                format!(
                    "`{bad}` is not a binary cache URI: give a Nix store URI with one of the schemes \
                     `file://`, `http://`, `https://`, `s3://`, `ssh://`, `ssh-ng://` \
                     (`file:///srv/kernel-cache`, `https://cache.example.org`, `s3://bucket`, `ssh://host`)"
                )
            );
        }
    }

    #[test]
    fn file_uris_name_their_directory() {
        assert_eq!(file_cache_dir("file:///srv/c?compression=none").unwrap(), "/srv/c");
        assert_eq!(file_cache_dir("s3://b"), None);
    }
}
