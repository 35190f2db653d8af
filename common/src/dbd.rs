//! A client for slurmdbd's gRPC service (`SlurmDbd`, inside TLS when it is
//! on). Used by the controller's accounting outbox and association fetcher,
//! slurmrestd and the commands (sacct, sacctmgr, sreport).
//!
//! A [`DbdRequest`] is the request and its credential, bound to the call it
//! travels as ([`bound`]): its method, its message's protobuf bytes and the
//! receiver `slurmdbd`.

use crate::net::NetError;
use slurm_proto::acct::{AcctRequest, AcctResponse, DbdRequest};
use slurm_proto::grpc::dbd::DbdCall;
use std::time::Duration;

/// Async: send `req` to slurmdbd at `addr` (whose TLS certificate names
/// `server`: `SlurmConf::dbd_name`) over this process's kept channel, and
/// wait for the answer within `timeout`. Call inside a tokio runtime.
pub async fn call(
    addr: &str,
    server: &str,
    req: &DbdRequest,
    timeout: Duration,
) -> Result<AcctResponse, NetError> {
    let ch = crate::grpc::kept(addr, server)?;
    let call = DbdCall::from_body(req.body.clone());
    crate::grpc::call_dbd(&ch, server, call, req.cred.clone(), timeout).await
}

/// Blocking twin of [`call`] (for the commands): a channel of its own,
/// driven by a runtime of its own for this one call.
pub fn call_sync(
    addr: &str,
    server: &str,
    req: &DbdRequest,
    timeout: Duration,
) -> Result<AcctResponse, NetError> {
    let run = || {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(NetError::Io)?;
        rt.block_on(async {
            let ch = crate::grpc::channel(crate::tls::client().cloned(), addr, server)?;
            let call = DbdCall::from_body(req.body.clone());
            crate::grpc::call_dbd(&ch, server, call, req.cred.clone(), timeout).await
        })
    };
    if tokio::runtime::Handle::try_current().is_err() {
        run()
    } else {
        std::thread::scope(|s| s.spawn(run).join().unwrap_or(Err(NetError::Closed)))
    }
}

/// A request to slurmdbd signed with the cluster key as root (daemons),
/// its credential bound to it.
pub fn request(key: &crate::auth::Key, host: &str, body: AcctRequest) -> DbdRequest {
    let b = bound(&body);
    DbdRequest {
        cred: key.sign(0, 0, host, crate::auth::now(), &b),
        body,
    }
}

/// What a credential for `body` must be bound to: the call it travels as.
pub fn bound(body: &AcctRequest) -> crate::auth::Binding {
    let call = DbdCall::from_body(body.clone());
    crate::auth::Binding::for_message(call.method(), &call.encode(), crate::auth::TO_DBD)
}
