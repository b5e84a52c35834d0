//! Which certificate authorities HTTPS downloads trust: the system's, as pip, curl, git and
//! cargo do, so a proxy that re-signs TLS with a CA in `/etc/ssl/certs` works here too.
//!
//! The certificates are loaded once per process by `rustls-native-certs` (pure Rust, so a
//! statically linked binary keeps working): those `SSL_CERT_FILE` and `SSL_CERT_DIR` name when
//! either is set (OpenSSL's convention, instead of the system's), else the system store where
//! OpenSSL would look for it (`openssl-probe`). Where none is found (a Nix build sandbox has no
//! `/etc/ssl`), the Mozilla roots built into the binary are trusted instead. Every agent
//! (toolchain downloads, the Hub client, kernel dependencies) takes [`config`], and a refused
//! certificate is explained by [`explain`]: what was trusted, and what to do.

use std::sync::OnceLock;

use ureq::tls::{Certificate, RootCerts, TlsConfig};

/// The certificate authorities trusted, and where they came from.
#[derive(Debug, Clone)]
pub struct Trust {
    roots: RootCerts,
    /// `146 certificates from the system's store`, for messages.
    pub from: String,
    /// What could not be read while loading them, one line each.
    pub problems: Vec<String>,
}

impl Trust {
    /// The certificates `SSL_CERT_FILE` / `SSL_CERT_DIR` name when either is set, else the
    /// system store's; the built-in Mozilla roots when there are none.
    pub fn load() -> Trust {
        let file = crate::env::SSL_CERT_FILE.os();
        let dir = crate::env::SSL_CERT_DIR.os();
        let place = match (&file, &dir) {
            (None, None) => "the system's store".to_owned(),
            (Some(f), None) => format!("SSL_CERT_FILE ({})", f.to_string_lossy()),
            (None, Some(d)) => format!("SSL_CERT_DIR ({})", d.to_string_lossy()),
            (Some(f), Some(d)) => {
                format!("SSL_CERT_FILE ({}) and SSL_CERT_DIR ({})", f.to_string_lossy(), d.to_string_lossy())
            }
        };
        // It reads SSL_CERT_FILE and SSL_CERT_DIR itself, with OpenSSL's meaning.
        Trust::from_result(rustls_native_certs::load_native_certs(), &place)
    }

    /// The certificates of the PEM file `file` and the directory `dir` only (tests).
    #[cfg(test)]
    pub fn from_paths(file: Option<&std::path::Path>, dir: Option<&std::path::Path>) -> Trust {
        let place = [file.map(|f| f.display().to_string()), dir.map(|d| d.display().to_string())]
            .into_iter()
            .flatten()
            .collect::<Vec<_>>()
            .join(" and ");
        Trust::from_result(rustls_native_certs::load_certs_from_paths(file, dir), &place)
    }

    fn from_result(r: rustls_native_certs::CertificateResult, place: &str) -> Trust {
        let problems: Vec<String> = r.errors.iter().map(|e| e.to_string()).collect();
        if r.certs.is_empty() {
            return Trust {
                roots: RootCerts::WebPki,
                from: format!("the Mozilla roots built into kernel-builder, as {place} holds no certificate"),
                problems,
            };
        }
        let certs: Vec<Certificate<'static>> =
            r.certs.iter().map(|c| Certificate::from_der(c.as_ref()).to_owned()).collect();
        Trust {
            roots: RootCerts::new_with_certs(&certs),
            from: format!("{} certificates from {place}", certs.len()),
            problems,
        }
    }

    /// A TLS configuration trusting these certificates.
    pub fn config(&self) -> TlsConfig {
        TlsConfig::builder().root_certs(self.roots.clone()).build()
    }

    /// When `e` is a refused server certificate: what was trusted and what to do.
    pub fn explain(&self, e: &ureq::Error) -> Option<String> {
        let rustls = match e {
            ureq::Error::Rustls(r) => Some(r),
            ureq::Error::Io(io) => io.get_ref().and_then(|i| i.downcast_ref::<rustls::Error>()),
            _ => None,
        };
        let Some(rustls::Error::InvalidCertificate(why)) = rustls else {
            return None;
        };
        let what = match why {
            rustls::CertificateError::UnknownIssuer => {
                "the server's certificate is not signed by a certificate authority kernel-builder trusts"
                    .to_owned()
            }
            other => format!("the server's certificate was refused ({other:?})"),
        };
        let problems =
            if self.problems.is_empty() { String::new() } else { format!(" ({})", self.problems.join("; ")) };
        Some(format!(
            "{what}; kernel-builder trusts {}{problems}. If a proxy re-signs HTTPS here, add its CA \
             certificate to the system's store (e.g. /usr/local/share/ca-certificates/ and \
             `update-ca-certificates`) or set SSL_CERT_FILE to a PEM file holding it",
            self.from
        ))
    }
}

/// This process's [`Trust::load`], loaded once; a certificate file named by SSL_CERT_FILE or
/// SSL_CERT_DIR that cannot be read is said on stderr then.
pub fn trust() -> &'static Trust {
    static TRUST: OnceLock<Trust> = OnceLock::new();
    TRUST.get_or_init(|| {
        let t = Trust::load();
        let file = crate::env::SSL_CERT_FILE.os();
        // Nix sets this name in a fixed-output derivation's builder (our kernel-dependency
        // fetcher): the sandbox has no store, and the built-in roots are the ones meant.
        let nix_sandbox = file.as_deref() == Some(std::ffi::OsStr::new("/no-cert-file.crt"));
        let named = file.is_some() || crate::env::SSL_CERT_DIR.os().is_some();
        if named && !nix_sandbox && !t.problems.is_empty() {
            crate::printer::stderr!("warning: HTTPS downloads trust {}: {}", t.from, t.problems.join("; "));
        }
        t
    })
}

/// The TLS configuration of every HTTPS agent ([`trust`]).
pub fn config() -> TlsConfig {
    trust().config()
}

/// [`Trust::explain`] for this process's [`trust`].
pub fn explain(e: &ureq::Error) -> Option<String> {
    trust().explain(e)
}

/// `e` as a message, with [`explain`]'s words after a refused certificate.
pub fn describe(e: &ureq::Error) -> String {
    match explain(e) {
        Some(why) => format!("{e}: {why}"),
        None => e.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The error ureq gives for a server certificate no trusted authority signed.
    fn unknown_issuer() -> ureq::Error {
        ureq::Error::Io(std::io::Error::new(
            std::io::ErrorKind::InvalidData,
            rustls::Error::InvalidCertificate(rustls::CertificateError::UnknownIssuer),
        ))
    }

    #[test]
    fn a_refused_certificate_is_explained_and_other_failures_are_not() {
        let t = tempfile::tempdir().unwrap();
        let missing = t.path().join("missing.pem");
        let trust = Trust::from_paths(Some(&missing), None);
        let why = trust.explain(&unknown_issuer()).unwrap();
        assert!(
            why.starts_with(&format!(
                "the server's certificate is not signed by a certificate authority kernel-builder trusts; kernel-builder trusts the Mozilla roots built into kernel-builder, as {} holds no certificate (",
                missing.display()
            )),
            "{why}"
        );
        assert!(why.ends_with(". If a proxy re-signs HTTPS here, add its CA certificate to the system's store (e.g. /usr/local/share/ca-certificates/ and `update-ca-certificates`) or set SSL_CERT_FILE to a PEM file holding it"), "{why}");
        assert_eq!(trust.explain(&ureq::Error::ConnectionFailed), None);
        assert_eq!(trust.explain(&ureq::Error::Io(std::io::Error::other("reset"))), None);
    }

    /// The toolchain's wheel downloads keep ureq's error in the chain: the CLI shows the same
    /// explanation as a hint.
    #[test]
    fn the_explanation_is_a_hint_of_a_chain_holding_the_error() {
        let err = anyhow::Error::from(unknown_issuer()).context("cannot download torch.whl");
        assert_eq!(crate::error::hints(&err), [explain(&unknown_issuer()).unwrap()]);
        assert_eq!(crate::error::hints(&anyhow::anyhow!("disk full")), Vec::<String>::new());
    }
}
