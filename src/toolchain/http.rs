//! The HTTP agent that fetches pins and wheels.
//!
//! Where `SSL_CERT_FILE` names a PEM bundle (the OpenSSL convention pip, curl and git follow,
//! e.g. behind a proxy that re-signs TLS), its certificates are the trusted roots; otherwise
//! the Mozilla roots built into the binary are.

use std::time::Duration;

/// An agent with `timeout` for the whole of one request (`None`: none; a download of a large
/// wheel is bounded by the time between two reads instead).
pub fn agent(timeout: Option<Duration>) -> ureq::Agent {
    use ureq::tls::{PemItem, RootCerts, TlsConfig};
    let mut tls = TlsConfig::builder();
    if let Some(pem) = crate::env::SSL_CERT_FILE.os().and_then(|f| std::fs::read(f).ok()) {
        let certs: Vec<ureq::tls::Certificate<'static>> = ureq::tls::parse_pem(&pem)
            .filter_map(|i| match i {
                Ok(PemItem::Certificate(c)) => Some(c),
                _ => None,
            })
            .collect();
        if !certs.is_empty() {
            tls = tls.root_certs(RootCerts::new_with_certs(&certs));
        }
    }
    ureq::Agent::config_builder()
        .tls_config(tls.build())
        .timeout_connect(Some(Duration::from_secs(30)))
        .timeout_recv_body(Some(Duration::from_secs(120)))
        .timeout_global(timeout)
        .http_status_as_error(false)
        .user_agent(concat!("kernel-builder/", env!("CARGO_PKG_VERSION")))
        .build()
        .into()
}
