//! Nix remote builders for `build-and-copy --builders SPEC`: Nix itself spreads the cells over
//! the machines (`nix build --builders SPEC`, or the `builders` setting of nix.conf); this
//! module only checks the machines before a build, says afterwards which cell was built where,
//! and, when a build fails, names the builder a failed cell was sent to (Nix 2.8 itself only
//! says `unexpected end-of-file` when a builder dies mid-build).
//!
//! A spec is Nix's machine list (the `builders` setting, see the Nix manual's "Remote Builds"):
//! machines separated by `;` or newlines, `#` starting a comment, `@FILE` reading more machines
//! from FILE (`build-and-copy --builders @FILE` with a FILE that cannot be read is an error;
//! nix.conf's default `@/etc/nix/machines` may be missing). Each machine is whitespace-separated
//! fields, `-` for a default:
//!
//! ```text
//! URI [SYSTEMS [SSH-KEY [MAX-JOBS [SPEED-FACTOR [SUPPORTED-FEATURES [MANDATORY-FEATURES [HOST-KEY-BASE64]]]]]]]
//! ssh-ng://builder@10.0.0.2 x86_64-linux /root/.ssh/id_builder 4 2 big-parallel - c3NoLWVk…
//! ```
//!
//! SYSTEMS and the feature lists are comma-separated. The SSH port is not part of the URI in
//! Nix 2.8: set it in `~/.ssh/config` (of the user Nix runs builds as) or in `NIX_SSHOPTS`
//! (`-p 2222`, read by Nix's ssh when no daemon is in between).

use anyhow::{bail, Context};
use camino::Utf8Path;

/// One machine of a builders spec.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Builder {
    /// The store URI, e.g. `ssh-ng://user@host` or `ssh://host`.
    pub uri: String,
    /// The Nix systems it builds (`x86_64-linux`); empty: the local system.
    pub systems: Vec<String>,
    /// The SSH private key to log in with; `None`: ssh's default.
    pub ssh_key: Option<String>,
    /// How many builds it runs at once (default 1).
    pub max_jobs: u32,
    /// Its relative speed; Nix prefers faster machines (default 1).
    pub speed_factor: u32,
    /// The features it offers (`kvm`, `big-parallel`, …).
    pub supported_features: Vec<String>,
    /// The features a derivation must require to be built there.
    pub mandatory_features: Vec<String>,
    /// The machine's SSH host key (a `.pub` line), base64-encoded as in the spec; `None`: the
    /// user's known_hosts decides.
    pub host_key_base64: Option<String>,
}

impl Builder {
    /// The store URI with the spec's SSH key and host key as store parameters
    /// (`ssh-key=…`, `base64-ssh-public-host-key=…`), for `nix store ping --store`.
    pub fn store_uri(&self) -> String {
        let mut params = Vec::new();
        if let Some(k) = &self.ssh_key {
            params.push(format!("ssh-key={k}"));
        }
        if let Some(h) = &self.host_key_base64 {
            params.push(format!("base64-ssh-public-host-key={h}"));
        }
        if params.is_empty() || !self.uri.starts_with("ssh") {
            return self.uri.clone();
        }
        let sep = if self.uri.contains('?') { '&' } else { '?' };
        format!("{}{sep}{}", self.uri, params.join("&"))
    }
}

/// What to do with an `@FILE` entry whose FILE does not exist.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MissingFile {
    /// An error naming the file: a spec the user gave (`--builders @FILE`).
    Error,
    /// No machines, as Nix does for nix.conf's default `@/etc/nix/machines`.
    NoMachines,
}

/// Parse a builders spec (see the module docs); `@FILE` entries are read relative to the
/// current directory (as Nix does), a missing FILE is handled as `missing` says.
///
/// Errors: an `@FILE` that cannot be read (or, with [`MissingFile::Error`], does not exist),
/// naming the file; a machine line whose MAX-JOBS or SPEED-FACTOR is not a number, or one
/// with more than eight fields, naming the line.
pub fn parse_spec(spec: &str, missing: MissingFile) -> anyhow::Result<Vec<Builder>> {
    let mut out = Vec::new();
    for line in spec.split(['\n', ';']) {
        let line = line.split('#').next().unwrap_or("").trim();
        if line.is_empty() {
            continue;
        }
        if let Some(file) = line.strip_prefix('@') {
            let file = Utf8Path::new(file.trim());
            match std::fs::read_to_string(file) {
                Ok(text) => out.extend(parse_spec(&text, missing).with_context(|| format!("in `{file}`"))?),
                Err(e) if e.kind() == std::io::ErrorKind::NotFound && missing == MissingFile::NoMachines => {}
                Err(e) => {
                    return Err(e).with_context(|| {
                        format!(
                        "cannot read the builders file `{file}` (named by `@{file}` in the builders spec)"
                    )
                    })
                }
            }
            continue;
        }
        out.push(parse_machine(line)?);
    }
    Ok(out)
}

fn parse_machine(line: &str) -> anyhow::Result<Builder> {
    let fields: Vec<&str> = line.split_whitespace().collect();
    if fields.len() > 8 {
        bail!(
            "builder `{line}` has {} fields; a machine is `URI [SYSTEMS [SSH-KEY [MAX-JOBS [SPEED-FACTOR [SUPPORTED-FEATURES [MANDATORY-FEATURES [HOST-KEY-BASE64]]]]]]]` (separate machines with `;` or newlines)",
            fields.len()
        );
    }
    let get = |i: usize| fields.get(i).copied().filter(|f| *f != "-" && !f.is_empty());
    let list = |i: usize| get(i).map(|f| f.split(',').map(str::to_owned).collect()).unwrap_or_default();
    let number = |i: usize, what: &str| -> anyhow::Result<u32> {
        match get(i) {
            None => Ok(1),
            Some(f) => f.parse().map_err(|_| {
                anyhow::anyhow!(
                    "builder `{}`: {what} `{f}` is not a whole number (field {})",
                    fields[0],
                    i + 1
                )
            }),
        }
    };
    Ok(Builder {
        uri: fields[0].to_owned(),
        systems: list(1),
        ssh_key: get(2).map(str::to_owned),
        max_jobs: number(3, "MAX-JOBS")?,
        speed_factor: number(4, "SPEED-FACTOR")?,
        supported_features: list(5),
        mandatory_features: list(6),
        host_key_base64: get(7).map(str::to_owned),
    })
}

/// The `builders` setting Nix would use without `--builders` (`nix show-config --json`;
/// nix.conf's `builders`, default `@/etc/nix/machines`).
///
/// Errors: `nix show-config` fails.
pub fn configured_spec() -> anyhow::Result<String> {
    let v: serde_json::Value = serde_json::from_str(&super::show_config_json()?)
        .context("`nix show-config --json` did not print JSON")?;
    Ok(v.get("builders").and_then(|b| b.get("value")).and_then(|b| b.as_str()).unwrap_or("").to_owned())
}

/// Open a connection to `builder`'s store (`nix store ping --store URI`), as Nix's build hook
/// will: the SSH login, the host key and the remote Nix all have to work.
///
/// Errors: the ping fails; the message names the builder and carries Nix's (and ssh's) output.
pub fn ping(builder: &Builder) -> anyhow::Result<()> {
    let nix = super::nix_program()?;
    let uri = builder.store_uri();
    let out = crate::process::Cmd::new(&nix).args(["store", "ping", "--store", &uri]).output()?;
    if !out.success() {
        bail!(
            "remote builder `{}` cannot be reached (`{nix} store ping --store {uri}`):\n{}\n\
             check the SSH login (key, host key, port: NIX_SSHOPTS or ~/.ssh/config) and that Nix is installed there",
            builder.uri,
            out.stderr.trim_end()
        );
    }
    Ok(())
}

/// The `nix build` arguments of `build-and-copy`'s builders: with `--builders SPEC`, every
/// machine of SPEC must answer [`ping`] (else the error names it: Nix would silently build
/// locally instead) and the result is `["--builders", SPEC]`; without it, the machines of
/// nix.conf's `builders` are pinged and one that does not answer is a warning (Nix skips it),
/// and nothing is added. Prints a note naming the machines used.
///
/// An empty (or all-blank) SPEC means no remote builders at all: `["--builders", ""]`, which
/// also turns off nix.conf's.
///
/// Errors: SPEC does not parse (an `@FILE` that cannot be read is named), names no machine
/// (only separators or comments: `;;;`), or one of its machines does not answer.
pub fn prepare(spec: Option<&str>) -> anyhow::Result<Vec<String>> {
    match spec {
        Some(spec) if spec.trim().is_empty() => {
            crate::printer::stderr!(
                "note: --builders '': no remote builders (not even nix.conf's): every cell builds here"
            );
            Ok(vec!["--builders".into(), String::new()])
        }
        Some(spec) => {
            let machines = parse_spec(spec, MissingFile::Error)?;
            if machines.is_empty() {
                bail!(
                    "--builders `{spec}` names no machine; give one as `URI [SYSTEMS [SSH-KEY [MAX-JOBS …]]]` \
                     (e.g. `ssh-ng://me@big x86_64-linux`), or `--builders ''` to build everything here"
                );
            }
            for m in &machines {
                ping(m)?;
            }
            crate::printer::stderr!("note: remote builders: {}", uris(&machines));
            Ok(vec!["--builders".into(), spec.to_owned()])
        }
        None => {
            let machines = parse_spec(&configured_spec()?, MissingFile::NoMachines)?;
            let mut up = Vec::new();
            for m in machines {
                match ping(&m) {
                    Ok(()) => up.push(m),
                    Err(e) => crate::printer::stderr!(
                        "warning: nix.conf's `builders`: {e:#}; Nix builds without it"
                    ),
                }
            }
            if !up.is_empty() {
                crate::printer::stderr!("note: remote builders (nix.conf `builders`): {}", uris(&up));
            }
            Ok(Vec::new())
        }
    }
}

fn uris(machines: &[Builder]) -> String {
    machines
        .iter()
        .map(|m| format!("{} ({} job{})", m.uri, m.max_jobs, if m.max_jobs == 1 { "" } else { "s" }))
        .collect::<Vec<_>>()
        .join(", ")
}

/// The derivations Nix's log says it sent to a remote builder, in order:
/// `(drv path, builder URI)` from its lines `building '/nix/store/….drv' on 'ssh-ng://…'...`.
pub fn dispatched(log: &str) -> Vec<(String, String)> {
    log.lines()
        .filter_map(|l| {
            let rest = l.trim_start().strip_prefix("building '")?;
            let (drv, rest) = rest.split_once("' on '")?;
            let (uri, _) = rest.split_once('\'')?;
            Some((drv.to_owned(), uri.to_owned()))
        })
        .collect()
}

/// The name of a derivation path without its hash and `.drv` (`/nix/store/abc-foo.drv` → `foo`).
fn drv_name(drv: &str) -> &str {
    let base = drv.rsplit('/').next().unwrap_or(drv);
    let base = base.strip_suffix(".drv").unwrap_or(base);
    base.split_once('-').map(|(_, n)| n).unwrap_or(base)
}

/// One `note: NAME was built on URI` line per derivation the log shows sent to a builder.
pub fn summary(log: &str) -> Vec<String> {
    dispatched(log).iter().map(|(drv, uri)| format!("{} was built on {uri}", drv_name(drv))).collect()
}

/// When a failed build had sent derivations to remote builders: which of them failed, and on
/// which builder (from the `builder for '….drv' failed` lines; a derivation sent to a builder
/// that fails without such a line counts as well when the log shows the connection ending,
/// `unexpected end-of-file`). `None` when no failed derivation went to a builder.
pub fn explain_failure(log: &str) -> Option<String> {
    let sent = dispatched(log);
    if sent.is_empty() {
        return None;
    }
    let failed: Vec<&str> = log
        .lines()
        .filter_map(|l| {
            let rest = l.split_once("builder for '")?.1;
            rest.split_once('\'').map(|(d, _)| d)
        })
        .collect();
    let lost = log.contains("unexpected end-of-file") || log.contains("Connection reset");
    let mut named: Vec<String> = sent
        .iter()
        .filter(|(drv, _)| failed.contains(&drv.as_str()))
        .map(|(drv, uri)| format!("{} on {uri}", drv_name(drv)))
        .collect();
    if named.is_empty() && lost {
        // Nix lost the connection before it could say which build failed: the last derivation
        // sent to each builder was the one running there.
        let mut last: Vec<(&str, &str)> = Vec::new();
        for (drv, uri) in &sent {
            last.retain(|(_, u)| u != uri);
            last.push((drv, uri));
        }
        named = last.iter().map(|(drv, uri)| format!("{} on {uri}", drv_name(drv))).collect();
    }
    if named.is_empty() {
        return None;
    }
    named.dedup();
    let why = if lost {
        "the connection to the builder ended (`unexpected end-of-file`): the builder, its sshd or its nix-daemon died or the network dropped"
    } else {
        "see its build log above"
    };
    Some(format!("remote build failed: {}; {why}", named.join(", ")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_spec_with_defaults_keys_and_several_machines() {
        let spec = "ssh-ng://root@127.0.0.1 x86_64-linux /k/key 2 1 - - aG9zdA==; \
                    ssh://b aarch64-linux,x86_64-linux - - 3 big-parallel,kvm kvm # fast\n\n# all comment\n";
        let m = parse_spec(spec, MissingFile::Error).unwrap();
        assert_eq!(m.len(), 2);
        assert_eq!(
            m[0],
            Builder {
                uri: "ssh-ng://root@127.0.0.1".into(),
                systems: vec!["x86_64-linux".into()],
                ssh_key: Some("/k/key".into()),
                max_jobs: 2,
                speed_factor: 1,
                supported_features: vec![],
                mandatory_features: vec![],
                host_key_base64: Some("aG9zdA==".into()),
            }
        );
        assert_eq!(m[1].systems, ["aarch64-linux", "x86_64-linux"]);
        assert_eq!((m[1].ssh_key.as_deref(), m[1].max_jobs, m[1].speed_factor), (None, 1, 3));
        assert_eq!(m[1].supported_features, ["big-parallel", "kvm"]);
        assert_eq!(m[1].mandatory_features, ["kvm"]);
        assert_eq!(
            m[0].store_uri(),
            "ssh-ng://root@127.0.0.1?ssh-key=/k/key&base64-ssh-public-host-key=aG9zdA=="
        );
        assert_eq!(m[1].store_uri(), "ssh://b");
    }

    #[test]
    fn machine_files_are_read_and_a_missing_one_is_an_error_unless_from_nix_conf() {
        let t = tempfile::tempdir().unwrap();
        let f = t.path().join("machines");
        std::fs::write(&f, "ssh://a\nssh://b x86_64-linux\n").unwrap();
        let m = parse_spec(&format!("@{}; ssh://c", f.display()), MissingFile::Error).unwrap();
        assert_eq!(m.iter().map(|b| b.uri.as_str()).collect::<Vec<_>>(), ["ssh://a", "ssh://b", "ssh://c"]);
        let none = t.path().join("none");
        assert_eq!(parse_spec(&format!("@{}", none.display()), MissingFile::NoMachines).unwrap(), []);
        let e = format!("{:#}", parse_spec(&format!("@{}", none.display()), MissingFile::Error).unwrap_err());
        assert_eq!(
            e,
            format!(
                "cannot read the builders file `{0}` (named by `@{0}` in the builders spec): No such file or directory (os error 2)",
                none.display()
            )
        );
        assert_eq!(parse_spec("", MissingFile::Error).unwrap(), []);
    }

    #[test]
    fn a_spec_of_only_separators_is_refused_and_an_empty_one_means_no_builders() {
        let e = prepare(Some(";;;")).unwrap_err().to_string();
        assert_eq!(
            e,
            "--builders `;;;` names no machine; give one as `URI [SYSTEMS [SSH-KEY [MAX-JOBS …]]]` \
             (e.g. `ssh-ng://me@big x86_64-linux`), or `--builders ''` to build everything here"
        );
        assert!(prepare(Some(" # only a comment\n")).unwrap_err().to_string().contains("names no machine"));
        assert_eq!(prepare(Some("")).unwrap(), ["--builders", ""]);
    }

    #[test]
    fn bad_numbers_and_too_many_fields_are_named() {
        let e = parse_spec("ssh://a x86_64-linux - four", MissingFile::Error).unwrap_err().to_string();
        assert!(e.contains("MAX-JOBS `four`") && e.contains("ssh://a"), "{e}");
        let e = parse_spec("ssh://a 1 2 3 4 5 6 7 8", MissingFile::Error).unwrap_err().to_string();
        assert!(e.contains("9 fields"), "{e}");
    }

    const LOG: &str = "\
building '/nix/store/aaa-k-torch-cpu.drv' on 'ssh-ng://root@127.0.0.1'...
copying 0 paths...
building '/nix/store/aaa-k-torch-cpu.drv'...
building '/nix/store/bbb-k-torch-cuda.drv'...
building '/nix/store/ccc-k-cell.drv' on 'ssh://b'...
";

    #[test]
    fn the_log_says_what_was_built_where() {
        assert_eq!(
            dispatched(LOG),
            [
                ("/nix/store/aaa-k-torch-cpu.drv".to_owned(), "ssh-ng://root@127.0.0.1".to_owned()),
                ("/nix/store/ccc-k-cell.drv".to_owned(), "ssh://b".to_owned())
            ]
        );
        assert_eq!(
            summary(LOG),
            ["k-torch-cpu was built on ssh-ng://root@127.0.0.1", "k-cell was built on ssh://b"]
        );
        assert_eq!(explain_failure("building '/nix/store/x-y.drv'...\nerror: boom"), None);
    }

    #[test]
    fn a_lost_builder_is_named() {
        let log = format!(
            "{LOG}k-cell> compiling\nerror: unexpected end-of-file\nerror: builder for '/nix/store/ccc-k-cell.drv' failed with exit code 1\n"
        );
        let e = explain_failure(&log).unwrap();
        assert!(e.contains("k-cell on ssh://b"), "{e}");
        assert!(!e.contains("torch-cpu"), "{e}");
        assert!(e.contains("unexpected end-of-file"), "{e}");
        // Without the `builder for` line: the last derivation sent to each builder.
        let e = explain_failure(&format!("{LOG}error: unexpected end-of-file\n")).unwrap();
        assert!(e.contains("k-torch-cpu on ssh-ng://root@127.0.0.1, k-cell on ssh://b"), "{e}");
        // A local failure after remote successes names no builder.
        assert_eq!(
            explain_failure(&format!("{LOG}error: builder for '/nix/store/bbb-k-torch-cuda.drv' failed")),
            None
        );
    }
}
