//! The HTTP agent that fetches pins and wheels, trusting the certificate authorities
//! [`crate::tls`] loads (the system's, or `SSL_CERT_FILE`'s).

use std::time::Duration;

/// An agent with `timeout` for the whole of one request (`None`: none; a download of a large
/// wheel is bounded by the time between two reads instead).
pub fn agent(timeout: Option<Duration>) -> ureq::Agent {
    ureq::Agent::config_builder()
        .tls_config(crate::tls::config())
        .timeout_connect(Some(Duration::from_secs(30)))
        .timeout_recv_body(Some(Duration::from_secs(120)))
        .timeout_global(timeout)
        .http_status_as_error(false)
        .user_agent(concat!("kernel-builder/", env!("CARGO_PKG_VERSION")))
        .build()
        .into()
}
