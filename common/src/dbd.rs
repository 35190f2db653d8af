//! A client for slurmdbd: one request, one answer, over the same framing as
//! the controller's (4-byte length + JSON). Used by the controller's
//! accounting outbox and by the commands (sacct, sacctmgr, sreport).

use crate::net::{encode, read_frame, read_frame_sync, write_frame, NetError};
use slurm_proto::acct::{AcctResponse, DbdRequest};
use std::io::Write;
use std::net::{TcpStream, ToSocketAddrs};
use std::time::Duration;

/// Async: send `req` to `addr` and wait for the answer, within `timeout`.
pub async fn call(
    addr: &str,
    req: &DbdRequest,
    timeout: Duration,
) -> Result<AcctResponse, NetError> {
    let fut = async {
        let mut s = tokio::net::TcpStream::connect(addr)
            .await
            .map_err(|e| NetError::Connect {
                addr: addr.to_string(),
                source: e,
            })?;
        s.set_nodelay(true)?;
        write_frame(&mut s, req).await?;
        read_frame(&mut s).await?.ok_or(NetError::Closed)
    };
    match tokio::time::timeout(timeout, fut).await {
        Ok(r) => r,
        Err(_) => Err(NetError::Io(std::io::Error::new(
            std::io::ErrorKind::TimedOut,
            format!("no reply from {addr} within {timeout:?}"),
        ))),
    }
}

/// Blocking twin of [`call`] (for the commands).
pub fn call_sync(
    addr: &str,
    req: &DbdRequest,
    timeout: Duration,
) -> Result<AcctResponse, NetError> {
    let addrs: Vec<_> = addr
        .to_socket_addrs()
        .map_err(|e| NetError::Connect {
            addr: addr.to_string(),
            source: e,
        })?
        .collect();
    let mut last = None;
    for a in addrs {
        match TcpStream::connect_timeout(&a, timeout) {
            Ok(mut s) => {
                s.set_nodelay(true)?;
                s.set_read_timeout(Some(timeout))?;
                s.set_write_timeout(Some(timeout))?;
                s.write_all(&encode(req)?)?;
                s.flush()?;
                return read_frame_sync(&mut s);
            }
            Err(e) => last = Some(e),
        }
    }
    Err(NetError::Connect {
        addr: addr.to_string(),
        source: last.unwrap_or_else(|| std::io::Error::other("no address")),
    })
}
