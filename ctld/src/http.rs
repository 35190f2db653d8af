//! HTTP on the controller's own port, beside the RPC (as Slurm 25.11 does):
//! the first bytes of a connection tell them apart (`GET ` / `HEAD` cannot
//! start an RPC frame, whose length prefix would exceed the frame limit).
//!
//! Probes: `/livez` (the process answers), `/readyz` (state recovered and the
//! writer publishing), `/healthz` (both). Metrics live in [`crate::metrics`].

use crate::state::Snapshot;
use std::sync::Arc;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// Largest request head we read.
const MAX_HEAD: usize = 16 * 1024;

/// Does a connection that starts with `first` carry HTTP?
pub fn is_http(first: &[u8]) -> bool {
    first.starts_with(b"GET ") || first.starts_with(b"HEAD")
}

pub struct Reply {
    pub status: u16,
    pub content_type: &'static str,
    pub body: String,
}

fn text(status: u16, body: impl Into<String>) -> Reply {
    Reply {
        status,
        content_type: "text/plain; charset=utf-8",
        body: body.into(),
    }
}

/// Route one request path against a snapshot.
pub fn route(path: &str, snap: &Snapshot) -> Reply {
    let path = path.split('?').next().unwrap_or("");
    match path {
        "/livez" => text(200, "ok\n"),
        "/readyz" | "/healthz" => {
            if snap.last_update > 0 {
                text(200, "ok\n")
            } else {
                text(503, "not ready\n")
            }
        }
        // As Slurm's: no metrics while PrivateData hides anything (they
        // name users, accounts and jobs to anyone who asks).
        p if (p == "/metrics" || p.starts_with("/metrics/")) && snap.private.any() => {
            text(403, "metrics are disabled while PrivateData is set\n")
        }
        p if p == "/metrics" || p.starts_with("/metrics/") => match crate::metrics::render(p, snap)
        {
            Some(body) => Reply {
                status: 200,
                // The index is plain text; the endpoints are OpenMetrics.
                content_type: if p == "/metrics" || p == "/metrics/" {
                    "text/plain; charset=utf-8"
                } else {
                    "application/openmetrics-text; version=1.0.0; charset=utf-8"
                },
                body,
            },
            None => text(404, format!("unknown metrics endpoint {p}\n")),
        },
        _ => text(404, "not found\n"),
    }
}

fn reason(status: u16) -> &'static str {
    match status {
        200 => "OK",
        400 => "Bad Request",
        403 => "Forbidden",
        404 => "Not Found",
        405 => "Method Not Allowed",
        503 => "Service Unavailable",
        _ => "Error",
    }
}

/// Serve one HTTP request on `sock` and close it.
pub async fn serve(mut sock: TcpStream, snap: Arc<Snapshot>) {
    let mut buf = Vec::with_capacity(1024);
    let mut chunk = [0u8; 1024];
    while !buf.windows(4).any(|w| w == b"\r\n\r\n") {
        match sock.read(&mut chunk).await {
            Ok(0) | Err(_) => return,
            Ok(n) => buf.extend_from_slice(&chunk[..n]),
        }
        if buf.len() > MAX_HEAD {
            let _ = write(&mut sock, &text(400, "request too large\n"), false).await;
            return;
        }
    }
    let head = String::from_utf8_lossy(&buf);
    let line = head.lines().next().unwrap_or("");
    let mut parts = line.split_whitespace();
    let (method, path) = (parts.next().unwrap_or(""), parts.next().unwrap_or(""));
    let reply = match method {
        "GET" | "HEAD" => route(path, &snap),
        _ => text(405, "only GET and HEAD\n"),
    };
    let _ = write(&mut sock, &reply, method == "HEAD").await;
}

async fn write(sock: &mut TcpStream, r: &Reply, head_only: bool) -> std::io::Result<()> {
    let head = format!(
        "HTTP/1.1 {} {}\r\nContent-Type: {}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
        r.status,
        reason(r.status),
        r.content_type,
        r.body.len()
    );
    sock.write_all(head.as_bytes()).await?;
    if !head_only {
        sock.write_all(r.body.as_bytes()).await?;
    }
    sock.flush().await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn probes_and_unknown_paths() {
        let mut s = Snapshot::default();
        assert_eq!(route("/livez", &s).status, 200);
        assert_eq!(route("/readyz", &s).status, 503);
        s.last_update = 1;
        assert_eq!(route("/readyz", &s).status, 200);
        assert_eq!(route("/healthz?verbose", &s).status, 200);
        assert_eq!(route("/nope", &s).status, 404);
        assert!(is_http(b"GET /x"));
        assert!(!is_http(&[0, 0, 1, 0]));
    }
}
