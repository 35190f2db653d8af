//! A client for slurmdbd: one request, one answer, over the same framing as
//! the controller's (4-byte length + JSON, inside TLS when it is on). Used by the controller's
//! accounting outbox and by the commands (sacct, sacctmgr, sreport).

use crate::net::{exchange_async, exchange_sync, NetError};
use slurm_proto::acct::{AcctResponse, DbdRequest};
use std::time::Duration;

/// Async: send `req` to `addr` (slurmdbd, whose TLS certificate names
/// `server`: `SlurmConf::dbd_name`) and wait for the answer, within `timeout`.
pub async fn call(
    addr: &str,
    server: &str,
    req: &DbdRequest,
    timeout: Duration,
) -> Result<AcctResponse, NetError> {
    exchange_async(addr, server, req, timeout).await
}

/// Blocking twin of [`call`] (for the commands).
pub fn call_sync(
    addr: &str,
    server: &str,
    req: &DbdRequest,
    timeout: Duration,
) -> Result<AcctResponse, NetError> {
    exchange_sync(addr, server, req, timeout)
}

/// A request to slurmdbd signed with the cluster key as root (daemons),
/// its credential bound to it.
pub fn request(
    key: &crate::auth::Key,
    host: &str,
    body: slurm_proto::acct::AcctRequest,
) -> DbdRequest {
    let b = bound(&body);
    DbdRequest {
        cred: key.sign(0, 0, host, crate::auth::now(), &b),
        body,
    }
}

/// The binding of a request to slurmdbd.
pub fn bound(body: &slurm_proto::acct::AcctRequest) -> crate::auth::Binding {
    crate::auth::Binding::for_body(body, crate::auth::TO_DBD)
        .unwrap_or_else(|_| crate::auth::Binding::for_bytes(b"", crate::auth::TO_DBD))
}
