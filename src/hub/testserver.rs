//! A hostile HTTP server on 127.0.0.1 for unit tests of the Hub readers: each request is
//! answered by a closure, one thread per connection, every connection closed after its answer.

use std::io::{Read, Write};
use std::sync::{Arc, Mutex};

/// What the server answers to one request.
pub(crate) enum Reply {
    /// A status, headers and a body (Content-Length is added).
    Full(u16, Vec<(String, String)>, Vec<u8>),
    /// 200 with `head` of the body, then `filler` bytes repeated `times` times, then `tail`
    /// (Content-Length is the sum): a large body without holding it in memory.
    Large { head: Vec<u8>, filler: Vec<u8>, times: usize, tail: Vec<u8>, headers: Vec<(String, String)> },
    /// Read the request and never answer (until the client hangs up or 120 s pass).
    Silent,
    /// The reply, after a pause.
    After(std::time::Duration, Box<Reply>),
}

impl Reply {
    pub(crate) fn json(v: serde_json::Value) -> Reply {
        Reply::Full(200, vec![("Content-Type".into(), "application/json".into())], v.to_string().into_bytes())
    }

    pub(crate) fn redirect(location: &str) -> Reply {
        Reply::Full(307, vec![("Location".into(), location.to_owned())], Vec::new())
    }
}

/// One request as the server saw it.
#[derive(Debug, Clone)]
pub(crate) struct Seen {
    /// `GET /path?query`.
    pub line: String,
    /// It had an `Authorization` header.
    pub authorized: bool,
}

pub(crate) struct TestServer {
    /// `http://127.0.0.1:PORT`.
    pub url: String,
    pub seen: Arc<Mutex<Vec<Seen>>>,
}

impl TestServer {
    /// Serve every request with `answer(method, path)`; `answer` also gets the server's URL.
    pub(crate) fn start(answer: impl Fn(&str, &str, &str) -> Reply + Send + Sync + 'static) -> TestServer {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        let seen = Arc::new(Mutex::new(Vec::new()));
        let (s, u, answer) = (seen.clone(), url.clone(), Arc::new(answer));
        std::thread::spawn(move || {
            for conn in listener.incoming() {
                let Ok(mut conn) = conn else { continue };
                let (s, u, answer) = (s.clone(), u.clone(), answer.clone());
                std::thread::spawn(move || {
                    let _ = conn.set_read_timeout(Some(std::time::Duration::from_secs(120)));
                    // The head, line by line, up to the empty line.
                    let mut head = Vec::new();
                    let mut lines = std::io::BufReader::new(conn.try_clone().unwrap());
                    while head.len() < 65536 && !head.ends_with(b"\r\n\r\n") {
                        match std::io::BufRead::read_until(&mut lines, b'\n', &mut head) {
                            Ok(n) if n > 0 => {}
                            _ => break,
                        }
                    }
                    let text = String::from_utf8_lossy(&head).into_owned();
                    let line = text.lines().next().unwrap_or_default().to_owned();
                    let authorized =
                        text.lines().any(|l| l.to_ascii_lowercase().starts_with("authorization:"));
                    let mut parts = line.split(' ');
                    let (method, path) = (parts.next().unwrap_or_default(), parts.next().unwrap_or_default());
                    let line = format!("{method} {path}");
                    s.lock().unwrap().push(Seen { line: line.clone(), authorized });
                    let mut reply = answer(&u, method, path);
                    while let Reply::After(pause, then) = reply {
                        std::thread::sleep(pause);
                        reply = *then;
                    }
                    let write_head = |conn: &mut std::net::TcpStream,
                                      status: u16,
                                      headers: &[(String, String)],
                                      len: u64| {
                        let mut h =
                            format!("HTTP/1.1 {status} X\r\nContent-Length: {len}\r\nConnection: close\r\n");
                        for (k, v) in headers {
                            h.push_str(&format!("{k}: {v}\r\n"));
                        }
                        h.push_str("\r\n");
                        conn.write_all(h.as_bytes())
                    };
                    let _ = match reply {
                        Reply::Full(status, headers, body) => {
                            write_head(&mut conn, status, &headers, body.len() as u64)
                                .and_then(|_| conn.write_all(&body))
                        }
                        Reply::Large { head, filler, times, tail, headers } => {
                            let len = (head.len() + filler.len() * times + tail.len()) as u64;
                            write_head(&mut conn, 200, &headers, len).and_then(|_| {
                                conn.write_all(&head)?;
                                for _ in 0..times {
                                    conn.write_all(&filler)?;
                                }
                                conn.write_all(&tail)
                            })
                        }
                        Reply::Silent | Reply::After(..) => {
                            let _ = conn.read(&mut [0u8; 1]);
                            Ok(())
                        }
                    };
                });
            }
        });
        TestServer { url, seen }
    }

    /// The request lines seen so far.
    pub(crate) fn lines(&self) -> Vec<String> {
        self.seen.lock().unwrap().iter().map(|s| s.line.clone()).collect()
    }
}
