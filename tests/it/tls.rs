//! Issue 31: HTTPS downloads trust the system's certificate authorities, or those
//! `SSL_CERT_FILE` / `SSL_CERT_DIR` name (src/tls.rs), and a refused certificate is explained.
//! Against a loopback HTTPS server whose certificate authority is made here (rcgen), so no
//! store on this machine holds it.

use std::io::{BufRead, BufReader, Write};
use std::path::Path;
use std::sync::Arc;

/// A loopback HTTPS server answering every request with `status` and `body` (JSON), its
/// certificate (for 127.0.0.1) signed by a certificate authority of its own.
struct Https {
    url: String,
    /// The authority's certificate, PEM.
    ca_pem: String,
}

/// A certificate authority: its issuer and PEM certificate.
fn authority(name: &str) -> (rcgen::CertifiedIssuer<'static, rcgen::KeyPair>, String) {
    let mut params = rcgen::CertificateParams::new(Vec::<String>::new()).unwrap();
    params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
    params.distinguished_name.push(rcgen::DnType::CommonName, name);
    let ca = rcgen::CertifiedIssuer::self_signed(params, rcgen::KeyPair::generate().unwrap()).unwrap();
    let pem = ca.pem();
    (ca, pem)
}

fn https_server(status: u16, body: &'static str) -> Https {
    let (ca, ca_pem) = authority("kernel-builder test CA");
    let key = rcgen::KeyPair::generate().unwrap();
    let cert =
        rcgen::CertificateParams::new(vec!["127.0.0.1".to_owned()]).unwrap().signed_by(&key, &ca).unwrap();
    let config =
        rustls::ServerConfig::builder_with_provider(Arc::new(rustls::crypto::ring::default_provider()))
            .with_safe_default_protocol_versions()
            .unwrap()
            .with_no_client_auth()
            .with_single_cert(
                vec![cert.der().clone()],
                rustls::pki_types::PrivateKeyDer::Pkcs8(key.serialize_der().into()),
            )
            .unwrap();
    let config = Arc::new(config);
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("https://127.0.0.1:{}", listener.local_addr().unwrap().port());
    std::thread::spawn(move || {
        for tcp in listener.incoming() {
            let Ok(tcp) = tcp else { continue };
            let config = config.clone();
            std::thread::spawn(move || {
                let _ = tcp.set_read_timeout(Some(std::time::Duration::from_secs(30)));
                let tls = rustls::StreamOwned::new(rustls::ServerConnection::new(config).unwrap(), tcp);
                let mut reader = BufReader::new(tls);
                // The request head (a client that refused the certificate sends none).
                let mut line = String::new();
                loop {
                    line.clear();
                    match reader.read_line(&mut line) {
                        Ok(n) if n > 0 && line != "\r\n" => {}
                        Ok(n) if n > 0 => break,
                        _ => return,
                    }
                }
                let mut tls = reader.into_inner();
                let _ = write!(
                    tls,
                    "HTTP/1.1 {status} X\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
                    body.len()
                );
                tls.conn.send_close_notify();
                let _ = tls.flush();
            });
        }
    });
    Https { url, ca_pem }
}

/// `lock-kernel-deps` of a kernel depending on `o/n` version 1, against `endpoint`, with
/// `certs` set (`None`: removed) in the environment; exit code and stderr.
fn lock(tmp: &Path, endpoint: &str, certs: &[(&str, Option<&Path>)]) -> (i32, String) {
    let kernel = tmp.join("relu");
    if !kernel.exists() {
        crate::hostile::relu_depending(tmp, "kernel-depends = [{ repo-id = \"o/n\", version = 1 }]\n");
    }
    let mut cmd = crate::util::kb_std();
    cmd.args(["lock-kernel-deps", kernel.to_str().unwrap()])
        .env("HF_ENDPOINT", endpoint)
        .env("HF_HOME", tmp.join("hf"))
        .env_remove("HF_TOKEN")
        .env("KERNEL_BUILDER_CACHE_DIR", tmp.join("cache"));
    for (name, value) in certs {
        match value {
            Some(v) => cmd.env(name, v),
            None => cmd.env_remove(name),
        };
    }
    let out = cmd.output().unwrap();
    (out.status.code().unwrap_or(-1), String::from_utf8_lossy(&out.stderr).into_owned())
}

#[test]
fn downloads_trust_ssl_cert_file_or_dir_and_explain_a_refused_certificate() {
    let hub = https_server(404, r#"{"error": "Repository not found"}"#);
    let t = tempfile::tempdir().unwrap();
    let ca_file = t.path().join("ca.pem");
    std::fs::write(&ca_file, &hub.ca_pem).unwrap();
    let ca_dir = t.path().join("certs");
    std::fs::create_dir(&ca_dir).unwrap();
    std::fs::write(ca_dir.join("test-ca.pem"), &hub.ca_pem).unwrap();
    // The Hub answered (404): TLS worked.
    let reached = format!("error: o/n (version 1): no kernel repository `o/n` at {}\n", hub.url);

    let (code, err) = lock(t.path(), &hub.url, &[("SSL_CERT_FILE", Some(&ca_file)), ("SSL_CERT_DIR", None)]);
    assert_eq!((code, err.as_str()), (1, reached.as_str()));
    let (code, err) = lock(t.path(), &hub.url, &[("SSL_CERT_FILE", None), ("SSL_CERT_DIR", Some(&ca_dir))]);
    assert_eq!((code, err.as_str()), (1, reached.as_str()));

    // A file holding another authority: refused, saying what was trusted and what to do, once
    // (a refused certificate is not retried).
    let other = t.path().join("other.pem");
    std::fs::write(&other, authority("another CA").1).unwrap();
    let (code, err) = lock(t.path(), &hub.url, &[("SSL_CERT_FILE", Some(&other)), ("SSL_CERT_DIR", None)]);
    assert_eq!(code, 1);
    assert_eq!(
        err,
        format!(
            "error: GET {}/api/kernels/o/n/refs failed: io: invalid peer certificate: UnknownIssuer: the server's certificate is not signed by a certificate authority kernel-builder trusts; kernel-builder trusts 1 certificates from SSL_CERT_FILE ({}). If a proxy re-signs HTTPS here, add its CA certificate to the system's store (e.g. /usr/local/share/ca-certificates/ and `update-ca-certificates`) or set SSL_CERT_FILE to a PEM file holding it\n",
            hub.url,
            other.display()
        )
    );

    // Neither variable: the system's store, which does not hold this test's authority.
    let (code, err) = lock(t.path(), &hub.url, &[("SSL_CERT_FILE", None), ("SSL_CERT_DIR", None)]);
    assert_eq!(code, 1);
    let start = format!(
        "error: GET {}/api/kernels/o/n/refs failed: io: invalid peer certificate: UnknownIssuer: the server's certificate is not signed by a certificate authority kernel-builder trusts; kernel-builder trusts ",
        hub.url
    );
    assert!(err.starts_with(&start), "{err}");
    assert!(
        err.ends_with(" the system's store. If a proxy re-signs HTTPS here, add its CA certificate to the system's store (e.g. /usr/local/share/ca-certificates/ and `update-ca-certificates`) or set SSL_CERT_FILE to a PEM file holding it\n")
            || err.contains("the Mozilla roots built into kernel-builder, as the system's store holds no certificate"),
        "{err}"
    );

    // A SSL_CERT_FILE that cannot be read: said, and the built-in roots are used instead.
    let missing = t.path().join("missing.pem");
    let (code, err) = lock(t.path(), &hub.url, &[("SSL_CERT_FILE", Some(&missing)), ("SSL_CERT_DIR", None)]);
    assert_eq!(code, 1);
    let first = err.lines().next().unwrap();
    assert!(
        first.starts_with(&format!(
            "warning: HTTPS downloads trust the Mozilla roots built into kernel-builder, as SSL_CERT_FILE ({}) holds no certificate: ",
            missing.display()
        )),
        "{err}"
    );
    assert!(err.contains("invalid peer certificate: UnknownIssuer"), "{err}");
}

/// The toolchain's agent (wheel pins and downloads) trusts the same authorities: `matrix pin`
/// against an HTTPS index.
#[test]
fn the_toolchain_index_is_read_with_the_same_trust() {
    let index = https_server(404, r#"{"error": "not found"}"#);
    let t = tempfile::tempdir().unwrap();
    let ca_file = t.path().join("ca.pem");
    std::fs::write(&ca_file, &index.ca_pem).unwrap();
    let url = format!("{}/simple", index.url);
    let mut pins: serde_json::Value =
        serde_json::from_str(kernel_builder::toolchain::pins::PINS_JSON).unwrap();
    pins["build-tools"]["x86_64-linux"].as_array_mut().unwrap().push(
        serde_json::json!({"project": "tool", "version": "1.0", "index": url, "file": null, "url": null, "sha256": null}),
    );
    let file = t.path().join("pins.json");
    std::fs::write(&file, serde_json::to_string(&pins).unwrap()).unwrap();
    let pin = |cert: Option<&Path>| {
        let mut cmd = crate::util::kb_std();
        cmd.args(["matrix", "pin", "--index", &url, "--pins", file.to_str().unwrap()])
            .env_remove("SSL_CERT_DIR");
        match cert {
            Some(c) => cmd.env("SSL_CERT_FILE", c),
            None => cmd.env_remove("SSL_CERT_FILE"),
        };
        let out = cmd.output().unwrap();
        String::from_utf8_lossy(&out.stderr).into_owned()
    };
    let trusted = pin(Some(&ca_file));
    assert!(trusted.contains("HTTP 404"), "{trusted}");
    assert!(!trusted.contains("certificate"), "{trusted}");
    let refused = pin(None);
    assert!(
        refused.contains("invalid peer certificate: UnknownIssuer: the server's certificate is not signed by a certificate authority kernel-builder trusts; kernel-builder trusts "),
        "{refused}"
    );
}
