//! The gRPC transport: tonic over the TLS of [`crate::tls`].
//!
//! - Callers keep one [`Channel`] per server ([`channel`]): HTTP/2 carries
//!   every call on it, one connection, reused. The connection is made (and
//!   remade after a failure) by our own connector, so the server's
//!   certificate is checked by name exactly as for the framed protocol.
//! - Each call carries a [`Credential`] in its `slurm-cred-bin` metadata,
//!   bound to the method, the SHA-256 of the message's protobuf bytes and
//!   the receiver ([`Binding::for_message`]); [`verify_call`] checks it
//!   before the server decodes anything further or acts.
//! - Servers take connections through [`incoming`]: TLS handshakes run
//!   concurrently (each within a deadline), connections are capped, and each
//!   handler finds the caller's certificate in [`Caller`].

use crate::auth::{AuthError, Binding, Key, ReplayCache};
use crate::net::{self, NetError};
use crate::stepio::{IoFrame, IoKind};
use prost::Message;
use slurm_proto::acct::AcctResponse;
use slurm_proto::grpc::commands::{append_listing, command_response, CommandCall};
use slurm_proto::grpc::dbd::{acct_response, DbdCall};
use slurm_proto::grpc::{ctld_response, node_response, pb, CtldCall, NodeCall, CRED_METADATA};
use slurm_proto::{Credential, Response};
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
pub use tonic::transport::Channel;

/// How long a caller waits for a connection to be made.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);

/// A kept channel to the server at `addr` whose certificate names `server`,
/// inside TLS when `tls` is given. Nothing is connected until the first call.
pub fn channel(
    tls: Option<Arc<rustls::ClientConfig>>,
    addr: &str,
    server: &str,
) -> Result<Channel, NetError> {
    let endpoint = tonic::transport::Endpoint::from_shared(format!("http://{addr}"))
        .map_err(|e| NetError::Connect {
            addr: addr.to_string(),
            source: std::io::Error::new(std::io::ErrorKind::InvalidInput, e.to_string()),
        })?
        .connect_timeout(CONNECT_TIMEOUT)
        .tcp_nodelay(true)
        .http2_keep_alive_interval(Duration::from_secs(30))
        .keep_alive_timeout(Duration::from_secs(10));
    let (addr, server) = (addr.to_string(), server.to_string());
    let connector = tower::service_fn(move |_: tonic::transport::Uri| {
        let (tls, addr, server) = (tls.clone(), addr.clone(), server.clone());
        async move {
            let conn = tokio::time::timeout(
                CONNECT_TIMEOUT,
                net::connect_async_with(tls.as_ref(), &addr, &server),
            )
            .await
            .map_err(|_| std::io::Error::new(std::io::ErrorKind::TimedOut, "connect timed out"))?
            .map_err(std::io::Error::other)?;
            Ok::<_, std::io::Error>(hyper_util::rt::TokioIo::new(conn))
        }
    });
    Ok(endpoint.connect_with_connector_lazy(connector))
}

/// This process's kept channels, by server name and address.
type Kept = std::collections::HashMap<(String, String), Channel>;
static KEPT: std::sync::LazyLock<std::sync::Mutex<Kept>> =
    std::sync::LazyLock::new(Default::default);

/// The kept channel of this process to `server` at `addr` (made with the
/// process's TLS client settings the first time; a server that moved to
/// another address leaves its old channel). Call inside a tokio runtime.
pub fn kept(addr: &str, server: &str) -> Result<Channel, NetError> {
    let mut kept = KEPT.lock().unwrap_or_else(|p| p.into_inner());
    let key = (server.to_string(), addr.to_string());
    if let Some(c) = kept.get(&key) {
        return Ok(c.clone());
    }
    kept.retain(|(s, _), _| s != server);
    let c = channel(crate::tls::client().cloned(), addr, server)?;
    kept.insert(key, c.clone());
    Ok(c)
}

/// Where the status says the call never reached a server (its connection
/// could not be made): the reason. Such a call was not acted on, so it may
/// be sent to another controller.
fn connect_failure(s: &tonic::Status) -> Option<std::io::Error> {
    use std::error::Error;
    if s.code() != tonic::Code::Unavailable {
        return None;
    }
    let mut src = s.source();
    while let Some(e) = src {
        if let Some(io) = e.downcast_ref::<std::io::Error>() {
            // Our connector's own failures: a refused or unreachable
            // address, or no connection within its time.
            if let Some(NetError::Connect { source, .. }) =
                io.get_ref().and_then(|i| i.downcast_ref::<NetError>())
            {
                return Some(std::io::Error::new(source.kind(), source.to_string()));
            }
            if io.kind() == std::io::ErrorKind::TimedOut && io.to_string() == "connect timed out" {
                return Some(std::io::Error::new(io.kind(), io.to_string()));
            }
        }
        src = e.source();
    }
    None
}

/// A gRPC call that did not come back: the status, said plainly (a
/// connection never made is [`NetError::Connect`]).
fn status_error(s: tonic::Status, server: &str) -> NetError {
    use std::error::Error;
    if let Some(source) = connect_failure(&s) {
        return NetError::Connect {
            addr: server.to_string(),
            source,
        };
    }
    let mut why = s.message().to_string();
    let mut src = s.source();
    while let Some(e) = src {
        let more = e.to_string();
        if !why.contains(&more) {
            why = format!("{why}: {more}");
        }
        src = e.source();
    }
    NetError::Rpc {
        code: format!("{:?}", s.code()),
        why,
    }
}

/// The credential `sign` makes for a call of `method` whose (first)
/// message has the protobuf bytes `body`, to the receiver `to`.
fn sign_for(
    method: &str,
    body: &[u8],
    to: &str,
    sign: impl FnOnce(&Binding) -> Result<Credential, AuthError>,
) -> Result<Credential, AuthError> {
    sign(&Binding::for_message(method, body, to))
}

/// A request carrying `msg`, with `cred` in its metadata.
fn signed<T>(msg: T, cred: Credential) -> tonic::Request<T> {
    let mut r = tonic::Request::new(msg);
    let bytes = pb::Credential::from(cred).encode_to_vec();
    r.metadata_mut().insert_bin(
        CRED_METADATA,
        tonic::metadata::MetadataValue::from_bytes(&bytes),
    );
    r
}

/// [`signed`], answered within `within`.
fn with_cred<T>(msg: T, cred: Credential, within: Duration) -> tonic::Request<T> {
    let mut r = signed(msg, cred);
    r.set_timeout(within);
    r
}

/// Largest answer a caller takes from a node daemon.
const MAX_NODE_REPLY: usize = 1 << 20;

/// Send `call` to the node daemon of `node` over `ch`, with the credential
/// `sign` makes for it, and wait at most `within` for the answer.
pub async fn call_node(
    ch: &Channel,
    node: &str,
    call: NodeCall,
    sign: impl FnOnce(&Binding) -> Result<Credential, AuthError>,
    within: Duration,
) -> Result<Response, NetError> {
    let to = crate::auth::to_slurmd(node);
    let cred = sign_for(call.method(), &call.encode(), &to, sign)?;
    let mut client = pb::node_daemon_client::NodeDaemonClient::new(ch.clone())
        .max_decoding_message_size(MAX_NODE_REPLY)
        .max_encoding_message_size(usize::MAX);
    let fut = async move {
        match call {
            NodeCall::LaunchBatch(m) => client.launch_batch(with_cred(*m, cred, within)).await,
            NodeCall::Prologue(m) => client.prologue(with_cred(*m, cred, within)).await,
            NodeCall::SignalJob(m) => client.signal_job(with_cred(m, cred, within)).await,
            NodeCall::NotifyJob(m) => client.notify_job(with_cred(m, cred, within)).await,
            NodeCall::SuspendJob(m) => client.suspend_job(with_cred(m, cred, within)).await,
            NodeCall::TerminateJob(m) => client.terminate_job(with_cred(m, cred, within)).await,
            NodeCall::SignalTasks(m) => client.signal_tasks(with_cred(m, cred, within)).await,
            NodeCall::DaemonStatus(m) => client.daemon_status(with_cred(m, cred, within)).await,
            NodeCall::Ping(m) => client.ping(with_cred(m, cred, within)).await,
            NodeCall::ListPids(m) => client.list_pids(with_cred(m, cred, within)).await,
            NodeCall::Shutdown(m) => client.shutdown(with_cred(m, cred, within)).await,
            NodeCall::Reboot(m) => client.reboot(with_cred(m, cred, within)).await,
            NodeCall::SetDebug(m) => client.set_debug(with_cred(m, cred, within)).await,
        }
    };
    Ok(node_response(within_time(fut, within, node).await?))
}

/// Start several batch scripts on `node` at once (`LaunchBatches`) over
/// `ch`, with the credential `sign` makes: the node's answer to each, in
/// order (fewer when it answered fewer).
pub async fn call_node_launches(
    ch: &Channel,
    node: &str,
    launches: Vec<slurm_proto::BatchLaunch>,
    sign: impl FnOnce(&Binding) -> Result<Credential, AuthError>,
    within: Duration,
) -> Result<Vec<Response>, NetError> {
    use slurm_proto::grpc::node_method::LAUNCH_BATCHES;
    let list = pb::BatchLaunchList {
        launches: launches.into_iter().map(Into::into).collect(),
    };
    let to = crate::auth::to_slurmd(node);
    let cred = sign_for(LAUNCH_BATCHES, &list.encode_to_vec(), &to, sign)?;
    let mut client = pb::node_daemon_client::NodeDaemonClient::new(ch.clone())
        .max_decoding_message_size(MAX_NODE_REPLY)
        .max_encoding_message_size(usize::MAX);
    let fut = client.launch_batches(with_cred(list, cred, within));
    let replies = within_time(fut, within, node).await?;
    Ok(replies.replies.into_iter().map(node_response).collect())
}

/// The answer of a call, or why there is none (a status, or no answer
/// from `server` within `within`).
async fn within_time<T>(
    fut: impl std::future::Future<Output = Result<tonic::Response<T>, tonic::Status>>,
    within: Duration,
    server: &str,
) -> Result<T, NetError> {
    match tokio::time::timeout(within, fut).await {
        Ok(Ok(r)) => Ok(r.into_inner()),
        Ok(Err(s)) => Err(status_error(s, server)),
        Err(_) => Err(NetError::Io(std::io::Error::new(
            std::io::ErrorKind::TimedOut,
            format!("no reply from {server} within {within:?}"),
        ))),
    }
}

/// Largest answer a node daemon takes from the controller.
const MAX_CTLD_REPLY: usize = 1 << 20;

/// Send a node daemon's report `call` to the controller (named `server`)
/// over `ch`, with the credential `sign` makes for it, and wait at most
/// `within` for the answer.
pub async fn call_ctld(
    ch: &Channel,
    server: &str,
    call: CtldCall,
    sign: impl FnOnce(&Binding) -> Result<Credential, AuthError>,
    within: Duration,
) -> Result<Response, NetError> {
    let cred = sign_for(call.method(), &call.encode(), crate::auth::TO_CTLD, sign)?;
    let mut client = pb::controller_client::ControllerClient::new(ch.clone())
        .max_decoding_message_size(MAX_CTLD_REPLY)
        .max_encoding_message_size(usize::MAX);
    let fut = async move {
        match call {
            CtldCall::RegisterNode(m) => client.register_node(with_cred(m, cred, within)).await,
            CtldCall::Heartbeat(m) => client.heartbeat(with_cred(m, cred, within)).await,
            CtldCall::BatchComplete(m) => client.batch_complete(with_cred(m, cred, within)).await,
            CtldCall::JobCleaned(m) => client.job_cleaned(with_cred(m, cred, within)).await,
            CtldCall::EpilogFailed(m) => client.epilog_failed(with_cred(m, cred, within)).await,
            CtldCall::PrologFailed(m) => client.prolog_failed(with_cred(m, cred, within)).await,
            CtldCall::StepUsage(m) => client.step_usage(with_cred(m, cred, within)).await,
        }
    };
    Ok(ctld_response(within_time(fut, within, server).await?))
}

/// Send several of a node's job events at once (`NodeReports`) to the
/// controller (named `server`) over `ch`, signed by `sign`: its answer to
/// each, in order (fewer when it answered fewer).
pub async fn call_ctld_reports(
    ch: &Channel,
    server: &str,
    batch: pb::NodeReportBatch,
    sign: impl FnOnce(&Binding) -> Result<Credential, AuthError>,
    within: Duration,
) -> Result<Vec<Response>, NetError> {
    use slurm_proto::grpc::ctld_method::NODE_REPORTS;
    let cred = sign_for(
        NODE_REPORTS,
        &batch.encode_to_vec(),
        crate::auth::TO_CTLD,
        sign,
    )?;
    let mut client = pb::controller_client::ControllerClient::new(ch.clone())
        .max_decoding_message_size(MAX_CTLD_REPLY)
        .max_encoding_message_size(usize::MAX);
    let fut = client.node_reports(with_cred(batch, cred, within));
    let replies = within_time(fut, within, server).await?;
    Ok(replies.replies.into_iter().map(ctld_response).collect())
}

/// Largest Raft message a controller takes from another (a batch of
/// entries or a snapshot chunk).
const MAX_RAFT_MESSAGE: usize = 1 << 30;

/// Send a Raft message to another controller (named `server`) over `ch`,
/// with the credential `sign` makes for it; its answer, within `within`.
pub async fn call_replicate(
    ch: &Channel,
    server: &str,
    msg: pb::RaftMessage,
    sign: impl FnOnce(&Binding) -> Result<Credential, AuthError>,
    within: Duration,
) -> Result<pb::RaftMessage, NetError> {
    use slurm_proto::grpc::commands::command_method::REPLICATE;
    let cred = sign_for(REPLICATE, &msg.encode_to_vec(), crate::auth::TO_CTLD, sign)?;
    let mut client = pb::controller_client::ControllerClient::new(ch.clone())
        .max_decoding_message_size(MAX_RAFT_MESSAGE)
        .max_encoding_message_size(usize::MAX);
    let fut = client.replicate(with_cred(msg, cred, within));
    within_time(fut, within, server).await
}

/// Largest answer a command takes from the controller (a job listing of a
/// big queue).
const MAX_COMMAND_REPLY: usize = 1 << 30;

/// Send a command's request `call` to the controller (named `server`) over
/// `ch`, with the credential `sign` makes for it, and wait at most `within`
/// for the answer.
pub async fn call_command(
    ch: &Channel,
    server: &str,
    call: CommandCall,
    sign: impl FnOnce(&Binding) -> Result<Credential, AuthError>,
    within: Duration,
) -> Result<Response, NetError> {
    let cred = sign_for(call.method(), &call.encode(), crate::auth::TO_CTLD, sign)?;
    let mut client = pb::controller_client::ControllerClient::new(ch.clone())
        .max_decoding_message_size(MAX_COMMAND_REPLY)
        .max_encoding_message_size(usize::MAX);
    let call = match call {
        CommandCall::GetJobs(m) => {
            let brief = m.brief;
            let listing = async move {
                let mut parts = client
                    .get_jobs(with_cred(m, cred, within))
                    .await?
                    .into_inner();
                let mut jobs = Vec::new();
                while let Some(part) = parts.message().await? {
                    match append_listing(part, brief, &mut jobs) {
                        Ok((last_update, true)) => {
                            return Ok(tonic::Response::new(Response::Jobs { jobs, last_update }))
                        }
                        Ok((_, false)) => {}
                        Err(answer) => return Ok(tonic::Response::new(answer)),
                    }
                }
                // The stream ended without its last part.
                Ok(tonic::Response::new(Response::Error(
                    slurm_proto::RpcError {
                        error: slurm_proto::SlurmError::ProtocolError,
                        detail: Some("the controller's job listing was cut short".into()),
                    },
                )))
            };
            return within_time(listing, within, server).await;
        }
        other => other,
    };
    let fut = async move {
        match call {
            CommandCall::GetJobs(_) => Err(tonic::Status::internal("a listing is answered above")),
            CommandCall::Ping(m) => client.ping(with_cred(m, cred, within)).await,
            CommandCall::SubmitJob(m) => client.submit_job(with_cred(*m, cred, within)).await,
            CommandCall::TestJob(m) => client.test_job(with_cred(*m, cred, within)).await,
            CommandCall::AllocateJob(m) => client.allocate_job(with_cred(*m, cred, within)).await,
            CommandCall::CancelJobs(m) => client.cancel_jobs(with_cred(m, cred, within)).await,
            CommandCall::CompleteJob(m) => client.complete_job(with_cred(m, cred, within)).await,
            CommandCall::CreateStep(m) => client.create_step(with_cred(m, cred, within)).await,
            CommandCall::StepComplete(m) => client.step_complete(with_cred(m, cred, within)).await,
            CommandCall::CancelStep(m) => client.cancel_step(with_cred(m, cred, within)).await,
            CommandCall::GetNodes(m) => client.get_nodes(with_cred(m, cred, within)).await,
            CommandCall::GetPartitions(m) => {
                client.get_partitions(with_cred(m, cred, within)).await
            }
            CommandCall::UpdateJob(m) => client.update_job(with_cred(m, cred, within)).await,
            CommandCall::SuspendJob(m) => client.suspend_job(with_cred(m, cred, within)).await,
            CommandCall::UpdateNode(m) => client.update_node(with_cred(m, cred, within)).await,
            CommandCall::RebootNodes(m) => client.reboot_nodes(with_cred(m, cred, within)).await,
            CommandCall::TopJobs(m) => client.top_jobs(with_cred(m, cred, within)).await,
            CommandCall::NotifyJob(m) => client.notify_job(with_cred(m, cred, within)).await,
            CommandCall::UpdateStep(m) => client.update_step(with_cred(m, cred, within)).await,
            CommandCall::Reconfigure(m) => client.reconfigure(with_cred(m, cred, within)).await,
            CommandCall::GetToken(m) => client.get_token(with_cred(m, cred, within)).await,
            CommandCall::GetLicenses(m) => client.get_licenses(with_cred(m, cred, within)).await,
            CommandCall::GetTopoConfig(m) => {
                client.get_topo_config(with_cred(m, cred, within)).await
            }
            CommandCall::GetJobScript(m) => client.get_job_script(with_cred(m, cred, within)).await,
            CommandCall::GetConfig(m) => client.get_config(with_cred(m, cred, within)).await,
            CommandCall::GetTopology(m) => client.get_topology(with_cred(m, cred, within)).await,
            CommandCall::GetDiag(m) => client.get_diag(with_cred(m, cred, within)).await,
            CommandCall::ResetDiag(m) => client.reset_diag(with_cred(m, cred, within)).await,
            CommandCall::GetPriorities(m) => {
                client.get_priorities(with_cred(m, cred, within)).await
            }
            CommandCall::GetShares(m) => client.get_shares(with_cred(m, cred, within)).await,
            CommandCall::GetReservations(m) => {
                client.get_reservations(with_cred(m, cred, within)).await
            }
            CommandCall::CreateReservation(m) => {
                client.create_reservation(with_cred(m, cred, within)).await
            }
            CommandCall::UpdateReservation(m) => {
                client.update_reservation(with_cred(m, cred, within)).await
            }
            CommandCall::DeleteReservation(m) => {
                client.delete_reservation(with_cred(m, cred, within)).await
            }
            CommandCall::UpdatePartition(m) => {
                client.update_partition(with_cred(m, cred, within)).await
            }
            CommandCall::CreateNode(m) => client.create_node(with_cred(m, cred, within)).await,
            CommandCall::DeleteNode(m) => client.delete_node(with_cred(m, cred, within)).await,
            CommandCall::CreatePartition(m) => {
                client.create_partition(with_cred(m, cred, within)).await
            }
            CommandCall::DeletePartition(m) => {
                client.delete_partition(with_cred(m, cred, within)).await
            }
            CommandCall::AcctChanged(m) => client.acct_changed(with_cred(m, cred, within)).await,
            CommandCall::GetJobsDelta(m) => client.get_jobs_delta(with_cred(m, cred, within)).await,
            CommandCall::Takeover(m) => client.takeover(with_cred(m, cred, within)).await,
            CommandCall::Shutdown(m) => client.shutdown(with_cred(m, cred, within)).await,
            CommandCall::SetDebug(m) => client.set_debug(with_cred(m, cred, within)).await,
            CommandCall::SetDebugFlags(m) => {
                client.set_debug_flags(with_cred(m, cred, within)).await
            }
            CommandCall::SetSchedLogLevel(m) => {
                client.set_sched_log_level(with_cred(m, cred, within)).await
            }
            CommandCall::SetFsDampeningFactor(m) => {
                client
                    .set_fs_dampening_factor(with_cred(m, cred, within))
                    .await
            }
            CommandCall::RelinquishControl(m) => {
                client.relinquish_control(with_cred(m, cred, within)).await
            }
        }
    };
    Ok(command_response(within_time(fut, within, server).await?))
}

/// Largest answer a caller takes from slurmdbd (sacct over a long history).
const MAX_DBD_REPLY: usize = 1 << 30;

/// Send `call` to slurmdbd (named `server`) over `ch`, with the credential
/// `cred` made for it ([`Binding::for_message`] of its method and message,
/// to [`crate::auth::TO_DBD`]), and wait at most `within` for the answer.
pub async fn call_dbd(
    ch: &Channel,
    server: &str,
    call: DbdCall,
    cred: Credential,
    within: Duration,
) -> Result<AcctResponse, NetError> {
    let mut client = pb::slurm_dbd_client::SlurmDbdClient::new(ch.clone())
        .max_decoding_message_size(MAX_DBD_REPLY)
        .max_encoding_message_size(usize::MAX);
    let fut = async move {
        let c = &mut client;
        match call {
            DbdCall::Ping(m) => c.ping(with_cred(m, cred, within)).await,
            DbdCall::SendRecords(m) => c.send_records(with_cred(m, cred, within)).await,
            DbdCall::AddClusters(m) => c.add_clusters(with_cred(m, cred, within)).await,
            DbdCall::DeleteClusters(m) => c.delete_clusters(with_cred(m, cred, within)).await,
            DbdCall::AddAccounts(m) => c.add_accounts(with_cred(m, cred, within)).await,
            DbdCall::ModifyAccounts(m) => c.modify_accounts(with_cred(m, cred, within)).await,
            DbdCall::DeleteAccounts(m) => c.delete_accounts(with_cred(m, cred, within)).await,
            DbdCall::AddUsers(m) => c.add_users(with_cred(m, cred, within)).await,
            DbdCall::ModifyUsers(m) => c.modify_users(with_cred(m, cred, within)).await,
            DbdCall::DeleteUsers(m) => c.delete_users(with_cred(m, cred, within)).await,
            DbdCall::ModifyAssocs(m) => c.modify_assocs(with_cred(m, cred, within)).await,
            DbdCall::DeleteAssocs(m) => c.delete_assocs(with_cred(m, cred, within)).await,
            DbdCall::AddQos(m) => c.add_qos(with_cred(m, cred, within)).await,
            DbdCall::ModifyQos(m) => c.modify_qos(with_cred(m, cred, within)).await,
            DbdCall::DeleteQos(m) => c.delete_qos(with_cred(m, cred, within)).await,
            DbdCall::AddCoords(m) => c.add_coords(with_cred(m, cred, within)).await,
            DbdCall::RemoveCoords(m) => c.remove_coords(with_cred(m, cred, within)).await,
            DbdCall::Rollup(m) => c.rollup(with_cred(m, cred, within)).await,
            DbdCall::ListClusters(m) => c.list_clusters(with_cred(m, cred, within)).await,
            DbdCall::ListAccounts(m) => c.list_accounts(with_cred(m, cred, within)).await,
            DbdCall::ListUsers(m) => c.list_users(with_cred(m, cred, within)).await,
            DbdCall::ListAssocs(m) => c.list_assocs(with_cred(m, cred, within)).await,
            DbdCall::ListQos(m) => c.list_qos(with_cred(m, cred, within)).await,
            DbdCall::GetJobs(m) => c.get_jobs(with_cred(m, cred, within)).await,
            DbdCall::GetUsage(m) => c.get_usage(with_cred(m, cred, within)).await,
            DbdCall::GetStats(m) => c.get_stats(with_cred(m, cred, within)).await,
            DbdCall::ListEvents(m) => c.list_events(with_cred(m, cred, within)).await,
            DbdCall::ListTxns(m) => c.list_txns(with_cred(m, cred, within)).await,
            DbdCall::ListResvs(m) => c.list_resvs(with_cred(m, cred, within)).await,
            DbdCall::FixRunaway(m) => c.fix_runaway(with_cred(m, cred, within)).await,
            DbdCall::Shutdown(m) => c.shutdown(with_cred(m, cred, within)).await,
            DbdCall::ClearStats(m) => c.clear_stats(with_cred(m, cred, within)).await,
            DbdCall::GetConfig(m) => c.get_config(with_cred(m, cred, within)).await,
        }
    };
    let reply = within_time(fut, within, server).await?;
    acct_response(reply).map_err(|e| NetError::Rpc {
        code: "DataLoss".into(),
        why: format!("slurmdbd's answer: {e}"),
    })
}

/// Open the controller's watch stream (`Controller.Watch`) over `ch`, with
/// the credential `sign` makes for it: every job and node the caller may
/// see, a `synced` event, then each change.
pub async fn watch(
    ch: &Channel,
    server: &str,
    req: pb::WatchRequest,
    sign: impl FnOnce(&Binding) -> Result<Credential, AuthError>,
) -> Result<tonic::Streaming<pb::WatchEvent>, NetError> {
    let method = slurm_proto::grpc::ctld_method::WATCH;
    let cred = sign_for(method, &req.encode_to_vec(), crate::auth::TO_CTLD, sign)?;
    let mut client = pb::controller_client::ControllerClient::new(ch.clone())
        .max_decoding_message_size(MAX_CTLD_REPLY);
    within_time(client.watch(signed(req, cred)), CONNECT_TIMEOUT * 2, server).await
}

/// Fetch the configuration files a configless node reads from the
/// controller (named `server`) over `ch`: (name, content) pairs.
pub async fn config_files(
    ch: &Channel,
    server: &str,
    sign: impl FnOnce(&Binding) -> Result<Credential, AuthError>,
    within: Duration,
) -> Result<Vec<(String, Vec<u8>)>, NetError> {
    let req = pb::ConfigFilesRequest {};
    let method = slurm_proto::grpc::ctld_method::GET_CONFIG_FILES;
    let cred = sign_for(method, &req.encode_to_vec(), crate::auth::TO_CTLD, sign)?;
    let mut client = pb::controller_client::ControllerClient::new(ch.clone())
        .max_decoding_message_size(64 << 20);
    let files = within_time(
        client.get_config_files(with_cred(req, cred, within)),
        within,
        server,
    )
    .await?;
    Ok(files
        .files
        .into_iter()
        .map(|f| (f.name, f.content))
        .collect())
}

/// The HTTP/2 connection preface's first bytes: a gRPC caller's first four.
pub const H2_PREFACE: &[u8; 4] = b"PRI ";

/// A stream whose first bytes were already read (to tell the protocol),
/// given back before the rest.
pub struct Rewind<S> {
    head: Vec<u8>,
    pos: usize,
    inner: S,
}

impl<S> Rewind<S> {
    pub fn new(head: Vec<u8>, inner: S) -> Rewind<S> {
        Rewind {
            head,
            pos: 0,
            inner,
        }
    }
}

impl<S: AsyncRead + Unpin> AsyncRead for Rewind<S> {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        let me = self.get_mut();
        if me.pos < me.head.len() {
            let n = (me.head.len() - me.pos).min(buf.remaining());
            buf.put_slice(&me.head[me.pos..me.pos + n]);
            me.pos += n;
            return Poll::Ready(Ok(()));
        }
        Pin::new(&mut me.inner).poll_read(cx, buf)
    }
}

impl<S: AsyncWrite + Unpin> AsyncWrite for Rewind<S> {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        Pin::new(&mut self.get_mut().inner).poll_write(cx, buf)
    }
    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.get_mut().inner).poll_flush(cx)
    }
    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.get_mut().inner).poll_shutdown(cx)
    }
}

/// How long a server keeps a gRPC connection: a caller that has made no
/// authenticated call within `first` of connecting is dropped (so peers
/// without the key cannot hold the server's connection slots), and one
/// whose last authenticated call is older than `idle`, with no stream
/// open, is closed (a kept channel simply connects again).
#[derive(Debug, Clone, Copy)]
pub struct Lifetime {
    pub first: Duration,
    pub idle: Duration,
}

/// What a connection has carried, for [`Lifetime`] (in each request's
/// extensions; [`verify_call`] marks it).
#[derive(Debug)]
pub struct Activity {
    opened: std::time::Instant,
    /// Milliseconds after `opened` of the last authenticated call; 0: none.
    last_ok_ms: std::sync::atomic::AtomicU64,
    /// Streams (watches) still open.
    open: std::sync::atomic::AtomicUsize,
    /// The user of its first authenticated call (it counts against theirs).
    owner: std::sync::OnceLock<u32>,
}

/// Connections an ordinary user may hold on one server at once (root's,
/// the daemons', are not counted): the rest of the slots stay for others.
pub const MAX_USER_CONNECTIONS: usize = 32;

/// Connections held, by user, in this process.
static HELD: std::sync::LazyLock<std::sync::Mutex<std::collections::HashMap<u32, usize>>> =
    std::sync::LazyLock::new(Default::default);

fn held() -> std::sync::MutexGuard<'static, std::collections::HashMap<u32, usize>> {
    HELD.lock().unwrap_or_else(|p| p.into_inner())
}

impl Drop for Activity {
    fn drop(&mut self) {
        if let Some(uid) = self.owner.get() {
            let mut h = held();
            if let Some(n) = h.get_mut(uid) {
                *n = n.saturating_sub(1);
                if *n == 0 {
                    h.remove(uid);
                }
            }
        }
    }
}

impl Activity {
    fn new() -> Activity {
        Activity::opened_at(std::time::Instant::now())
    }

    fn opened_at(opened: std::time::Instant) -> Activity {
        Activity {
            opened,
            last_ok_ms: Default::default(),
            open: Default::default(),
            owner: Default::default(),
        }
    }

    /// Count the connection against `uid` at its first authenticated call;
    /// `false` when that user already holds [`MAX_USER_CONNECTIONS`].
    fn claim(&self, uid: u32) -> bool {
        if uid == 0 || self.owner.get().is_some() {
            return true;
        }
        let mut h = held();
        let n = h.entry(uid).or_default();
        if *n >= MAX_USER_CONNECTIONS {
            return false;
        }
        *n += 1;
        let _ = self.owner.set(uid);
        true
    }

    fn touch(&self) {
        let ms = self.opened.elapsed().as_millis().max(1) as u64;
        self.last_ok_ms
            .store(ms, std::sync::atomic::Ordering::Relaxed);
    }

    /// Whether the connection has outlived `life` now.
    fn expired(&self, life: Lifetime) -> bool {
        use std::sync::atomic::Ordering::Relaxed;
        if self.open.load(Relaxed) > 0 {
            return false;
        }
        let age = self.opened.elapsed();
        match self.last_ok_ms.load(Relaxed) {
            0 => age > life.first,
            ms => age.saturating_sub(Duration::from_millis(ms)) > life.idle,
        }
    }
}

/// Keeps the connection of a stream open while it lives (a watch).
pub struct OpenStream(Arc<Activity>);

impl Drop for OpenStream {
    fn drop(&mut self) {
        self.0
            .open
            .fetch_sub(1, std::sync::atomic::Ordering::Relaxed);
    }
}

/// Hold the connection of `req` open while the result lives.
pub fn hold_open<T>(req: &tonic::Request<T>) -> Option<OpenStream> {
    let a = req.extensions().get::<Arc<Activity>>()?.clone();
    a.open.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    Some(OpenStream(a))
}

/// Serve the gRPC `routes` on one connection a server already took (its
/// TLS handshake done, its protocol told by its first bytes) until the
/// caller closes it, stops answering HTTP/2 pings or outlives `life`: each
/// request gets `caller` in its extensions and draws on `budget` as
/// [`BudgetLayer`] says.
pub async fn serve_connection<S>(
    io: S,
    caller: Caller,
    routes: tonic::service::Routes,
    budget: net::Budget,
    life: Lifetime,
) where
    S: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    let activity = Arc::new(Activity::new());
    let seen = activity.clone();
    let svc = tower::ServiceBuilder::new()
        .map_request(move |r: http::Request<hyper::body::Incoming>| {
            let mut r = r.map(tonic::body::Body::new);
            r.extensions_mut().insert(caller.clone());
            r.extensions_mut().insert(seen.clone());
            r
        })
        .layer(BudgetLayer::new(budget))
        .service(routes.prepare());
    let conn = hyper::server::conn::http2::Builder::new(hyper_util::rt::TokioExecutor::new())
        .initial_connection_window_size(SERVER_CONNECTION_WINDOW)
        .initial_stream_window_size(SERVER_STREAM_WINDOW)
        .max_concurrent_streams(MAX_STREAMS)
        .keep_alive_interval(Some(Duration::from_secs(30)))
        .keep_alive_timeout(Duration::from_secs(10))
        .timer(hyper_util::rt::TokioTimer::new())
        .serve_connection(
            hyper_util::rt::TokioIo::new(io),
            hyper_util::service::TowerToHyperService::new(svc),
        );
    tokio::pin!(conn);
    let check = life.first.min(life.idle).min(Duration::from_secs(5)) / 2;
    let mut closing = false;
    let served = loop {
        tokio::select! {
            r = conn.as_mut() => break r,
            _ = tokio::time::sleep(check), if !closing => {
                if activity.expired(life) {
                    tracing::debug!("closing a gRPC connection: no authenticated call in time");
                    conn.as_mut().graceful_shutdown();
                    closing = true;
                }
            }
            // A caller that does not take its GOAWAY is cut off.
            _ = tokio::time::sleep(Duration::from_secs(1)), if closing => break Ok(()),
        }
    };
    if let Err(e) = served {
        tracing::debug!("gRPC connection ended: {e}");
    }
}

/// Serve `routes` on every connection `incoming` takes ([`incoming`]),
/// each through [`serve_connection`] with `budget` and `life`, until
/// `shutdown` completes or the listener fails for good.
pub async fn serve_incoming(
    incoming: tokio_stream::wrappers::ReceiverStream<Result<Accepted, std::io::Error>>,
    routes: tonic::service::Routes,
    budget: net::Budget,
    life: Lifetime,
    shutdown: impl std::future::Future<Output = ()>,
) {
    let mut incoming = incoming.into_inner();
    tokio::pin!(shutdown);
    loop {
        let conn = tokio::select! {
            _ = &mut shutdown => return,
            c = incoming.recv() => match c {
                Some(Ok(c)) => c,
                Some(Err(_)) => continue,
                None => return,
            },
        };
        let caller = conn.caller();
        tokio::spawn(serve_connection(
            conn,
            caller,
            routes.clone(),
            budget.clone(),
            life,
        ));
    }
}

/// HTTP/2 flow-control windows a server gives each connection and call:
/// what a caller may send before it is read, beyond the requests' budget.
pub const SERVER_CONNECTION_WINDOW: u32 = 512 << 10;
pub const SERVER_STREAM_WINDOW: u32 = 256 << 10;
/// Calls in flight on one connection.
pub const MAX_STREAMS: u32 = 64;

/// The caller's credential, once it is shown to be signed with `key`, valid
/// now, made for exactly this message of `method` and for the receiver
/// `me`, and not seen before. Tokens are not taken here.
pub fn verify_call<T: Message>(
    req: &tonic::Request<T>,
    method: &str,
    me: &str,
    key: &Key,
    now: i64,
    seen: &ReplayCache,
) -> Result<Credential, NetError> {
    verify_call_or_token(req, method, me, key, None, now, seen)
}

/// [`verify_call`] that also takes a user's JWT in place of a signature
/// when `jwt_key` is given (`AuthAltTypes=auth/jwt`: a slurmrestd holding
/// no key passes its client's token on); the call then acts as the user
/// the token names.
pub fn verify_call_or_token<T: Message>(
    req: &tonic::Request<T>,
    method: &str,
    me: &str,
    key: &Key,
    jwt_key: Option<&[u8]>,
    now: i64,
    seen: &ReplayCache,
) -> Result<Credential, NetError> {
    // The message as it will be acted on: fields this side does not know
    // are gone from it, so such a request does not match its signature.
    let body = req.get_ref().encode_to_vec();
    check_cred(
        req.metadata(),
        req.extensions(),
        Checked {
            method,
            body: &body,
            me,
            key,
            jwt_key,
        },
        now,
        seen,
    )
}

/// What a credential is checked against.
struct Checked<'a> {
    method: &'a str,
    body: &'a [u8],
    me: &'a str,
    key: &'a Key,
    jwt_key: Option<&'a [u8]>,
}

/// [`verify_call`] for a call whose first message (`body`, as this side
/// encodes it) is what the credential covers: a stream.
#[allow(clippy::too_many_arguments)]
pub fn verify_cred(
    metadata: &tonic::metadata::MetadataMap,
    extensions: &tonic::Extensions,
    method: &str,
    body: &[u8],
    me: &str,
    key: &Key,
    now: i64,
    seen: &ReplayCache,
) -> Result<Credential, NetError> {
    let what = Checked {
        method,
        body,
        me,
        key,
        jwt_key: None,
    };
    check_cred(metadata, extensions, what, now, seen)
}

fn check_cred(
    metadata: &tonic::metadata::MetadataMap,
    extensions: &tonic::Extensions,
    what: Checked<'_>,
    now: i64,
    seen: &ReplayCache,
) -> Result<Credential, NetError> {
    let raw = metadata
        .get_bin(CRED_METADATA)
        .ok_or(AuthError::Missing)?
        .to_bytes()
        .map_err(|_| AuthError::BadSignature)?;
    let mut cred: Credential = pb::Credential::decode(raw.as_ref())
        .map_err(|_| AuthError::BadSignature)?
        .into();
    if !cred.token.is_empty() {
        crate::auth::take_token(&mut cred, what.jwt_key, now)?;
    } else {
        let b = Binding::for_message(what.method, what.body, what.me);
        what.key.verify(&cred, now, &b)?;
        seen.check(&cred, now)?;
    }
    if let Some(a) = extensions.get::<Arc<Activity>>() {
        if !a.claim(cred.uid) {
            return Err(NetError::Rpc {
                code: "ResourceExhausted".into(),
                why: format!(
                    "uid {} holds {MAX_USER_CONNECTIONS} connections to this server already",
                    cred.uid
                ),
            });
        }
        a.touch();
    }
    Ok(cred)
}

/// A task's output or input as the `RunTasks` stream carries it.
pub fn task_io(f: IoFrame) -> pb::TaskIo {
    pb::TaskIo {
        kind: f.kind as u32,
        task: f.task,
        data: f.data,
    }
}

/// A `RunTasks` output message as a frame (`None`: not a task's output).
pub fn io_frame(t: pb::TaskIo) -> Option<IoFrame> {
    let kind = IoKind::from_u8(u8::try_from(t.kind).ok()?)?;
    matches!(kind, IoKind::Stdout | IoKind::Stderr | IoKind::Exit).then_some(IoFrame {
        kind,
        task: t.task,
        data: t.data,
    })
}

/// A step running on one node: its tasks' output, frame by frame.
pub struct StepOutput(tonic::Streaming<pb::StepOutput>);

impl StepOutput {
    /// The next frame of the tasks' output; `None` when the node daemon
    /// has sent everything (or the stream broke).
    pub async fn next(&mut self) -> Option<IoFrame> {
        loop {
            match self.0.message().await {
                Ok(Some(pb::StepOutput {
                    output: Some(pb::step_output::Output::Io(t)),
                })) => {
                    if let Some(f) = io_frame(t) {
                        return Some(f);
                    }
                }
                Ok(Some(_)) => continue,
                _ => return None,
            }
        }
    }
}

/// Start a step's tasks on the node daemon of `node` (srun): the launch
/// `t`, signed by `sign`, then `stdin` (frames for task 0: data and its
/// end) as they come. The node's answer to the launch, and, when it
/// launched, the tasks' output.
pub async fn run_tasks(
    ch: &Channel,
    node: &str,
    t: pb::TaskLaunch,
    sign: impl FnOnce(&Binding) -> Result<Credential, AuthError>,
    stdin: tokio::sync::mpsc::Receiver<IoFrame>,
    within: Duration,
) -> Result<(Response, Option<StepOutput>), NetError> {
    use pb::step_input::Input;
    use tokio_stream::StreamExt;
    let method = slurm_proto::grpc::node_method::RUN_TASKS;
    let to = crate::auth::to_slurmd(node);
    let cred = sign_for(method, &t.encode_to_vec(), &to, sign)?;
    let first = pb::StepInput {
        input: Some(Input::Launch(t)),
    };
    let rest = tokio_stream::wrappers::ReceiverStream::new(stdin).map(|f| pb::StepInput {
        input: Some(match f.kind {
            IoKind::StdinEof => Input::StdinEof(pb::Empty {}),
            _ => Input::Stdin(f.data),
        }),
    });
    let input = tokio_stream::once(first).chain(rest);
    let mut client = pb::node_daemon_client::NodeDaemonClient::new(ch.clone())
        .max_decoding_message_size(MAX_NODE_REPLY + crate::stepio::MAX_IO)
        .max_encoding_message_size(usize::MAX);
    let req = signed(input, cred);
    let fut = async {
        let mut out = client.run_tasks(req).await?.into_inner();
        let first = out.message().await?;
        Ok(tonic::Response::new((first, out)))
    };
    let (first, out) = within_time(fut, within, node).await?;
    match first.and_then(|m| m.output) {
        Some(pb::step_output::Output::Launched(r)) => {
            let r = node_response(r);
            let ok = matches!(r, Response::Ok);
            Ok((r, ok.then_some(StepOutput(out))))
        }
        _ => Err(NetError::Rpc {
            code: "Internal".into(),
            why: format!("{node} did not answer the launch"),
        }),
    }
}

/// Who is on the other end of a server's connection (in each request's
/// extensions).
#[derive(Debug, Clone)]
pub struct Caller {
    pub peer: crate::tls::Peer,
    pub addr: SocketAddr,
}

/// A connection a server took, its TLS handshake done.
pub struct Accepted {
    conn: net::Conn,
    caller: Caller,
    _slot: tokio::sync::OwnedSemaphorePermit,
}

impl Accepted {
    /// Who is on the other end.
    pub fn caller(&self) -> Caller {
        self.caller.clone()
    }
}

impl tonic::transport::server::Connected for Accepted {
    type ConnectInfo = Caller;
    fn connect_info(&self) -> Caller {
        self.caller.clone()
    }
}

impl AsyncRead for Accepted {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.get_mut().conn).poll_read(cx, buf)
    }
}

impl AsyncWrite for Accepted {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        Pin::new(&mut self.get_mut().conn).poll_write(cx, buf)
    }
    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.get_mut().conn).poll_flush(cx)
    }
    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.get_mut().conn).poll_shutdown(cx)
    }
}

/// The connections `listener` takes, for a tonic server: at most `max` at
/// once (the next waits until one closes), each TLS handshake (with
/// `acceptor`) done concurrently within `handshake`. Ends when the listener
/// fails for good or the server stops reading.
pub fn incoming(
    listener: tokio::net::TcpListener,
    acceptor: Option<tokio_rustls::TlsAcceptor>,
    max: usize,
    handshake: Duration,
) -> tokio_stream::wrappers::ReceiverStream<Result<Accepted, std::io::Error>> {
    let (tx, rx) = tokio::sync::mpsc::channel(16);
    let slots = Arc::new(tokio::sync::Semaphore::new(max));
    tokio::spawn(async move {
        loop {
            let Ok(slot) = slots.clone().acquire_owned().await else {
                return;
            };
            let (sock, addr) = tokio::select! {
                _ = tx.closed() => return,
                a = listener.accept() => match a {
                    Ok(a) => a,
                    Err(e) => {
                        tracing::warn!("accept failed: {e}");
                        tokio::time::sleep(Duration::from_millis(100)).await;
                        continue;
                    }
                },
            };
            let (tx, acceptor) = (tx.clone(), acceptor.clone());
            tokio::spawn(async move {
                if let Some((conn, peer)) =
                    net::accept_within(sock, acceptor.as_ref(), handshake).await
                {
                    let a = Accepted {
                        conn,
                        caller: Caller { peer, addr },
                        _slot: slot,
                    };
                    let _ = tx.send(Ok(a)).await;
                }
            });
        }
    });
    tokio_stream::wrappers::ReceiverStream::new(rx)
}

/// The caller of a request a server is handling; `None` when the request
/// did not come through [`incoming`] (to be refused: nothing is known).
pub fn caller_of<T>(req: &tonic::Request<T>) -> Option<Caller> {
    req.extensions().get::<Caller>().cloned()
}

/// Bytes of each request read before it draws on the server's budget.
const FREE_BYTES: usize = 64 << 10;

/// A tower layer for a tonic server: past its first 64 KiB, a request's
/// body takes its bytes from a shared [`net::Budget`] and is refused (`too
/// many large requests are being read`) when the budget is spent, so
/// callers together cannot make the server hold more, however many
/// connections and streams they open, before any credential is checked.
/// A message is charged for the length its gRPC header announces as soon as
/// the header arrives (tonic reserves that much to decode it), else for
/// the bytes as they arrive. The bytes go back when the request is done
/// with.
#[derive(Clone)]
pub struct BudgetLayer {
    budget: net::Budget,
}

impl BudgetLayer {
    pub fn new(budget: net::Budget) -> BudgetLayer {
        BudgetLayer { budget }
    }
}

impl<S> tower::Layer<S> for BudgetLayer {
    type Service = Budgeted<S>;
    fn layer(&self, inner: S) -> Budgeted<S> {
        Budgeted {
            inner,
            budget: self.budget.clone(),
        }
    }
}

/// The service [`BudgetLayer`] makes.
#[derive(Clone)]
pub struct Budgeted<S> {
    inner: S,
    budget: net::Budget,
}

impl<S> tower::Service<http::Request<tonic::body::Body>> for Budgeted<S>
where
    S: tower::Service<http::Request<tonic::body::Body>>,
{
    type Response = S::Response;
    type Error = S::Error;
    type Future = S::Future;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), S::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, req: http::Request<tonic::body::Body>) -> S::Future {
        let budget = self.budget.clone();
        self.inner
            .call(req.map(|body| tonic::body::Body::new(BudgetBody::new(body, budget))))
    }
}

struct BudgetBody {
    inner: tonic::body::Body,
    budget: net::Budget,
    /// Bytes of the body read so far.
    read: usize,
    held: Option<tokio::sync::OwnedSemaphorePermit>,
    /// The gRPC framing seen so far: where the message being read ends (a
    /// body offset), and the part of the next 5-byte header read.
    msg_end: usize,
    head: Vec<u8>,
    /// Bytes charged for (read, or announced by a message header).
    charged: usize,
}

impl BudgetBody {
    fn new(inner: tonic::body::Body, budget: net::Budget) -> BudgetBody {
        BudgetBody {
            inner,
            budget,
            read: 0,
            held: None,
            msg_end: 0,
            head: Vec::new(),
            charged: 0,
        }
    }

    /// Follow the gRPC framing through `d` (the body's next bytes, from
    /// offset `self.read`): how far the body is committed to, the
    /// announced ends of its messages included.
    fn committed(&mut self, d: &[u8]) -> usize {
        let mut at = self.read;
        let end = self.read.saturating_add(d.len());
        let mut committed = end;
        while at < end {
            if at < self.msg_end {
                at = self.msg_end.min(end);
                continue;
            }
            let want = 5 - self.head.len();
            let take = want.min(end - at);
            let from = at - self.read;
            self.head.extend_from_slice(&d[from..from + take]);
            at += take;
            if self.head.len() == 5 {
                let len =
                    u32::from_be_bytes([self.head[1], self.head[2], self.head[3], self.head[4]]);
                self.msg_end = at.saturating_add(len as usize);
                committed = committed.max(self.msg_end);
                self.head.clear();
            }
        }
        committed
    }
}

impl http_body::Body for BudgetBody {
    type Data = bytes::Bytes;
    type Error = tonic::Status;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<http_body::Frame<bytes::Bytes>, tonic::Status>>> {
        let me = self.get_mut();
        let frame = match Pin::new(&mut me.inner).poll_frame(cx) {
            Poll::Ready(Some(Ok(f))) => f,
            other => return other,
        };
        if let Some(d) = frame.data_ref() {
            let committed = me.committed(d);
            me.read = me.read.saturating_add(d.len());
            let before = me.charged;
            me.charged = me.charged.max(committed);
            let over = me
                .charged
                .saturating_sub(FREE_BYTES.max(before))
                .min(u32::MAX as usize);
            if me.charged.saturating_sub(FREE_BYTES) > me.budget.total() {
                // Larger than the whole budget: it could never be read.
                return Poll::Ready(Some(Err(tonic::Status::out_of_range(format!(
                    "a message of {} bytes is larger than this server takes",
                    me.charged
                )))));
            }
            if over > 0 {
                match me.budget.take(over as u32) {
                    Some(p) => match &mut me.held {
                        Some(h) => h.merge(p),
                        None => me.held = Some(p),
                    },
                    None => {
                        return Poll::Ready(Some(Err(tonic::Status::resource_exhausted(
                            NetError::Busy.to_string(),
                        ))))
                    }
                }
            }
        }
        Poll::Ready(Some(Ok(frame)))
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> http_body::SizeHint {
        self.inner.size_hint()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use http_body::Body as _;

    /// A request body that arrives as `n` frames of `size` bytes.
    struct Frames(std::collections::VecDeque<bytes::Bytes>);

    impl http_body::Body for Frames {
        type Data = bytes::Bytes;
        type Error = std::convert::Infallible;
        fn poll_frame(
            self: Pin<&mut Self>,
            _: &mut Context<'_>,
        ) -> Poll<Option<Result<http_body::Frame<bytes::Bytes>, Self::Error>>> {
            Poll::Ready(
                self.get_mut()
                    .0
                    .pop_front()
                    .map(|b| Ok(http_body::Frame::data(b))),
            )
        }
    }

    fn body(budget: &net::Budget, n: usize, size: usize) -> BudgetBody {
        BudgetBody::new(
            tonic::body::Body::new(Frames(
                (0..n)
                    .map(|_| bytes::Bytes::from(vec![0u8; size]))
                    .collect(),
            )),
            budget.clone(),
        )
    }

    /// A body whose gRPC header announces `len` bytes, of which `sent`
    /// follow, in chunks of 3 bytes (headers split across frames).
    fn announcing(budget: &net::Budget, len: u32, sent: usize) -> BudgetBody {
        let mut bytes = vec![0u8];
        bytes.extend_from_slice(&len.to_be_bytes());
        bytes.resize(5 + sent, 1);
        BudgetBody::new(
            tonic::body::Body::new(Frames(
                bytes.chunks(3).map(bytes::Bytes::copy_from_slice).collect(),
            )),
            budget.clone(),
        )
    }

    #[tokio::test]
    async fn an_announced_length_is_charged_when_its_header_arrives() {
        let budget = net::Budget::new(16 << 20);
        // 15 MiB announced, 10 bytes sent: the budget holds 15 MiB less the
        // free part until the body is dropped.
        let mut b = announcing(&budget, 15 << 20, 10);
        assert_eq!(drain(&mut b).await.unwrap(), 15);
        // (The 5 header bytes are the body's too.)
        assert_eq!(
            budget.available(),
            (16 << 20) - ((15 << 20) + 5 - FREE_BYTES)
        );
        // A second such announcement does not fit: refused at its header.
        let mut c = announcing(&budget, 15 << 20, 10);
        let e = drain(&mut c).await.unwrap_err();
        assert_eq!(e.code(), tonic::Code::ResourceExhausted);
        drop(b);
        drop(c);
        assert_eq!(budget.available(), 16 << 20);
        // More than the whole budget could ever give: too large, not "try
        // again".
        let mut huge = announcing(&budget, 1 << 30, 0);
        let e = drain(&mut huge).await.unwrap_err();
        assert_eq!(e.code(), tonic::Code::OutOfRange, "{e}");
        drop(huge);
        assert_eq!(budget.available(), 16 << 20);
        // Small messages, one after another, cost nothing.
        let mut small = Vec::new();
        for _ in 0..100 {
            small.extend_from_slice(&[0, 0, 0, 0, 10]);
            small.extend_from_slice(&[7u8; 10]);
        }
        let mut d = BudgetBody::new(
            tonic::body::Body::new(Frames(
                small.chunks(7).map(bytes::Bytes::copy_from_slice).collect(),
            )),
            budget.clone(),
        );
        assert_eq!(drain(&mut d).await.unwrap(), 1500);
        assert_eq!(budget.available(), 16 << 20);
    }

    /// Read `b` to its end, or to its first error.
    async fn drain(b: &mut BudgetBody) -> Result<usize, tonic::Status> {
        let mut got = 0;
        while let Some(f) = std::future::poll_fn(|cx| Pin::new(&mut *b).poll_frame(cx)).await {
            got += f?.into_data().map(|d| d.len()).unwrap_or(0);
        }
        Ok(got)
    }

    /// A request carrying `msg` (decoded from `bytes`) and `cred`.
    fn request_with(
        bytes: &[u8],
        cred: Option<Credential>,
    ) -> tonic::Request<pb::SignalJobRequest> {
        let msg = pb::SignalJobRequest::decode(bytes).unwrap();
        match cred {
            Some(c) => signed(msg, c),
            None => tonic::Request::new(msg),
        }
    }

    #[test]
    fn a_call_is_taken_only_with_its_own_credential() {
        use slurm_proto::grpc::node_method::{SIGNAL_JOB, TERMINATE_JOB};
        let key = Key::from_bytes(&[7u8; 32]);
        let me = crate::auth::to_slurmd("n1");
        let now = crate::auth::now();
        let seen = ReplayCache::new(100);
        let bytes = pb::SignalJobRequest {
            job_id: 5,
            signal: 9,
        }
        .encode_to_vec();
        let sign = |method: &str, body: &[u8], to: &str| {
            key.sign(0, 0, "h", now, &Binding::for_message(method, body, to))
        };
        let check = |r: &tonic::Request<pb::SignalJobRequest>, method| {
            verify_call(r, method, &me, &key, now, &seen)
        };
        // No credential; one for another method, another node, another
        // key; a token.
        let r = request_with(&bytes, None);
        assert!(matches!(
            check(&r, SIGNAL_JOB),
            Err(NetError::Auth(AuthError::Missing))
        ));
        let r = request_with(&bytes, Some(sign(TERMINATE_JOB, &bytes, &me)));
        assert!(matches!(
            check(&r, SIGNAL_JOB),
            Err(NetError::Auth(AuthError::WrongBody))
        ));
        let r = request_with(&bytes, Some(sign(SIGNAL_JOB, &bytes, "slurmd:n2")));
        assert!(matches!(
            check(&r, SIGNAL_JOB),
            Err(NetError::Auth(AuthError::WrongReceiver(_)))
        ));
        let other = Key::from_bytes(&[8u8; 32]);
        let forged = other.sign(
            0,
            0,
            "h",
            now,
            &Binding::for_message(SIGNAL_JOB, &bytes, &me),
        );
        let r = request_with(&bytes, Some(forged));
        assert!(matches!(
            check(&r, SIGNAL_JOB),
            Err(NetError::Auth(AuthError::BadSignature))
        ));
        let mut token = sign(SIGNAL_JOB, &bytes, &me);
        token.token = "eyJ".into();
        let r = request_with(&bytes, Some(token));
        assert!(matches!(
            check(&r, SIGNAL_JOB),
            Err(NetError::Auth(AuthError::Token(_)))
        ));
        // Signed over bytes with a field this side does not know (field
        // 15, varint 1): what it would act on is not what was signed.
        let mut extra = bytes.clone();
        extra.extend_from_slice(&[15 << 3, 1]);
        let r = request_with(&extra, Some(sign(SIGNAL_JOB, &extra, &me)));
        assert!(matches!(
            check(&r, SIGNAL_JOB),
            Err(NetError::Auth(AuthError::WrongBody))
        ));
        // Its own credential is taken, once.
        let good = sign(SIGNAL_JOB, &bytes, &me);
        let r = request_with(&bytes, Some(good.clone()));
        assert_eq!(check(&r, SIGNAL_JOB).unwrap().uid, 0);
        let r = request_with(&bytes, Some(good));
        assert!(matches!(
            check(&r, SIGNAL_JOB),
            Err(NetError::Auth(AuthError::Replayed))
        ));
    }

    #[test]
    fn task_output_round_trips_and_nothing_else_passes_for_it() {
        for f in [
            IoFrame {
                kind: IoKind::Stdout,
                task: 3,
                data: b"hello\n".to_vec(),
            },
            IoFrame {
                kind: IoKind::Stderr,
                task: 0,
                data: vec![],
            },
            IoFrame::exit(7, 256),
        ] {
            assert_eq!(io_frame(task_io(f.clone())), Some(f));
        }
        assert_eq!(IoFrame::exit(7, 256).status(), 256);
        // Stdin is not output; an unknown kind is nothing.
        let stdin = IoFrame {
            kind: IoKind::Stdin,
            task: 0,
            data: b"x".to_vec(),
        };
        assert_eq!(io_frame(task_io(stdin)), None);
        for kind in [0, 9, 300] {
            let t = pb::TaskIo {
                kind,
                task: 0,
                data: vec![],
            };
            assert_eq!(io_frame(t), None);
        }
    }

    #[test]
    fn a_connection_lives_by_its_authenticated_calls() {
        let life = Lifetime {
            first: Duration::from_secs(5),
            idle: Duration::from_secs(60),
        };
        let fresh = Activity::new();
        assert!(!fresh.expired(life));
        // Ten seconds old and never authenticated: dropped.
        let old = Activity::opened_at(std::time::Instant::now() - Duration::from_secs(10));
        assert!(old.expired(life));
        // An authenticated call now: kept until it has been idle a minute.
        old.touch();
        assert!(!old.expired(life));
        let idle = Activity::opened_at(std::time::Instant::now() - Duration::from_secs(100));
        idle.last_ok_ms
            .store(1_000, std::sync::atomic::Ordering::Relaxed);
        assert!(idle.expired(life));
        // A watch open on it keeps it.
        idle.open.store(1, std::sync::atomic::Ordering::Relaxed);
        assert!(!idle.expired(life));
    }

    #[test]
    fn a_user_holds_a_bounded_number_of_connections() {
        // (uid 4242 is used by no other test in this process.)
        let conns: Vec<Activity> = (0..MAX_USER_CONNECTIONS).map(|_| Activity::new()).collect();
        for c in &conns {
            assert!(c.claim(4242));
            // Another call on the same connection counts nothing more.
            assert!(c.claim(4242));
        }
        let one_more = Activity::new();
        assert!(!one_more.claim(4242));
        // Root is not counted; another user has slots of their own.
        assert!(Activity::new().claim(0));
        assert!(Activity::new().claim(4243));
        // A connection closed gives its slot back.
        drop(conns);
        assert!(one_more.claim(4242));
    }

    #[tokio::test]
    async fn request_bodies_past_their_first_64_kib_draw_on_the_shared_budget() {
        let k = 64 << 10;
        let budget = net::Budget::new(4 * k);
        // The first 64 KiB are free; the next 256 KiB spend the budget.
        let mut a = body(&budget, 5, k);
        assert_eq!(drain(&mut a).await.unwrap(), 5 * k);
        assert_eq!(budget.available(), 0);
        // While it is held, another large request is refused past its
        // free bytes; a small one still goes through.
        let mut b = body(&budget, 2, k);
        let e = drain(&mut b).await.unwrap_err();
        assert_eq!(e.code(), tonic::Code::ResourceExhausted);
        assert!(e.message().contains("try again"), "{e}");
        let mut small = body(&budget, 1, k);
        assert_eq!(drain(&mut small).await.unwrap(), k);
        // Done with, its bytes go back.
        drop(a);
        drop(b);
        assert_eq!(budget.available(), 4 * k);
        let mut c = body(&budget, 4, k);
        assert_eq!(drain(&mut c).await.unwrap(), 4 * k);
        assert_eq!(budget.available(), k);
    }
}
