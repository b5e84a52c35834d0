//! Publishing built bundles to a Hub kernel repository: where the endpoint and token come from
//! ([`auth`]), the HTTP calls ([`client`]), the comparison of local and remote files
//! ([`plan`]) and the upload itself ([`upload`](mod@upload)).
//!
//! The HTTP client is `ureq` (blocking, rustls with the `ring` provider, trusting the
//! certificate authorities [`crate::tls`] loads): every call is a plain request/response, so an async runtime would
//! only add weight.

pub mod auth;
pub mod client;
pub mod plan;
pub mod publish;
pub mod upload;

pub use publish::{publish, PublishOptions};
pub use upload::{prepare, upload, Outcome, Prepared, Status, UploadOptions};

#[cfg(test)]
pub(crate) mod testserver;
