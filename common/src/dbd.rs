//! A client for slurmdbd: one request, one answer, over the same framing as
//! the controller's (4-byte length + JSON). Used by the controller's
//! accounting outbox and by the commands (sacct, sacctmgr, sreport).

use crate::net::{exchange_async, exchange_sync, NetError};
use slurm_proto::acct::{AcctResponse, DbdRequest};
use std::time::Duration;

/// Async: send `req` to `addr` and wait for the answer, within `timeout`.
pub async fn call(
    addr: &str,
    req: &DbdRequest,
    timeout: Duration,
) -> Result<AcctResponse, NetError> {
    exchange_async(addr, req, timeout).await
}

/// Blocking twin of [`call`] (for the commands).
pub fn call_sync(
    addr: &str,
    req: &DbdRequest,
    timeout: Duration,
) -> Result<AcctResponse, NetError> {
    exchange_sync(addr, req, timeout)
}
