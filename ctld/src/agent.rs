//! Delivers controller effects to node daemons. Each effect is an async task
//! with its own retries, so a slow or dead node never stalls the writer.

use crate::inbox::Command;
use crate::state::Effect;
use slurm_common::auth::{now, Key};
use slurm_common::grpc;
use slurm_proto::grpc::NodeCall;
use slurm_proto::{BatchLaunch, RequestBody, Response};
use std::sync::mpsc::Sender;
use std::time::Duration;

#[derive(Clone)]
pub struct Agent {
    pub key: Key,
    pub host: String,
    pub cmds: Sender<Command>,
    pub rt: tokio::runtime::Handle,
    /// The accounting outbox's sender task, when accounting goes to slurmdbd.
    pub acct: Option<tokio::sync::mpsc::UnboundedSender<slurm_proto::acct::SeqRecord>>,
    /// The thread appending job completion records (`jobcomp/filetxt`).
    pub jobcomp: Option<Sender<(std::path::PathBuf, Vec<String>)>>,
}

/// Start the thread that appends job completion records to their file,
/// in the order the writer committed them (off the writer: a slow disk
/// holds up nothing else). The file is made 0644, as Slurm's, and only a
/// regular file is written, never through a symbolic link.
pub fn jobcomp_writer() -> Sender<(std::path::PathBuf, Vec<String>)> {
    let (tx, rx) = std::sync::mpsc::channel::<(std::path::PathBuf, Vec<String>)>();
    let spawned = std::thread::Builder::new()
        .name("jobcomp".into())
        .spawn(move || {
            use std::io::Write;
            use std::os::unix::fs::OpenOptionsExt;
            for (path, lines) in rx {
                // Only a regular file (a FIFO there would hold the
                // thread, and every record after, forever).
                let res = std::fs::OpenOptions::new()
                    .append(true)
                    .create(true)
                    .mode(0o644)
                    .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK)
                    .open(&path)
                    .and_then(|f| match f.metadata()?.is_file() {
                        true => Ok(f),
                        false => Err(std::io::Error::other("not a regular file")),
                    })
                    .and_then(|mut f| f.write_all(lines.concat().as_bytes()));
                if let Err(e) = res {
                    tracing::error!(
                        "JobCompLoc {}: {e}: {} job completion record(s) lost",
                        path.display(),
                        lines.len()
                    );
                }
            }
        });
    if let Err(e) = spawned {
        tracing::error!("cannot start the job completion writer: {e}");
    }
    tx
}

impl Agent {
    /// Send `body` to the node daemon of `node` at `addr`, signed by root
    /// for it, and wait at most `within` for the answer.
    async fn send(
        &self,
        addr: &str,
        node: &str,
        body: RequestBody,
        within: Duration,
    ) -> Result<Response, slurm_common::net::NetError> {
        let call = NodeCall::from_body(body).map_err(|b| slurm_common::net::NetError::Rpc {
            code: "InvalidArgument".into(),
            why: format!("not a node daemon's request: {b:?}"),
            // (One kept channel per node daemon: every request to it
            // shares one connection.)
        })?;
        let ch = grpc::kept(addr, node)?;
        grpc::call_node(
            &ch,
            node,
            call,
            |b| Ok(self.key.sign(0, 0, &self.host, now(), b)),
            within,
        )
        .await
    }

    /// Hand the completion records of a committed batch to their writer.
    pub fn jobcomp(&self, records: (std::path::PathBuf, Vec<String>)) {
        if let Some(tx) = &self.jobcomp {
            let _ = tx.send(records);
        }
    }

    /// Hand a durable accounting record to the sender task.
    pub fn account(&self, r: slurm_proto::acct::SeqRecord) {
        if let Some(tx) = &self.acct {
            let _ = tx.send(r);
        }
    }

    pub fn dispatch(&self, e: Effect) {
        let me = self.clone();
        self.rt.spawn(async move { me.deliver(e).await });
    }

    /// Deliver one batch's effects: the launches of one node go in one
    /// call (`LaunchBatches`); each of them it does not take is delivered
    /// again on its own, with its retries.
    pub fn dispatch_all(&self, effects: Vec<Effect>) {
        let mut launches: std::collections::BTreeMap<(String, String), Vec<BatchLaunch>> =
            Default::default();
        for e in effects {
            match e {
                Effect::Launch { node, addr, launch } => {
                    launches.entry((node, addr)).or_default().push(*launch)
                }
                other => self.dispatch(other),
            }
        }
        for ((node, addr), mut ls) in launches {
            if ls.len() == 1 {
                if let Some(launch) = ls.pop() {
                    self.dispatch(Effect::Launch {
                        node,
                        addr,
                        launch: Box::new(launch),
                    });
                }
                continue;
            }
            let me = self.clone();
            self.rt
                .spawn(async move { me.launch_together(node, addr, ls).await });
        }
    }

    /// [`Agent::dispatch_all`]'s call for one node's launches.
    async fn launch_together(self, node: String, addr: String, ls: Vec<BatchLaunch>) {
        let sent = ls.clone();
        let answers = match grpc::kept(&addr, &node) {
            Ok(ch) => grpc::call_node_launches(
                &ch,
                &node,
                sent,
                |b| Ok(self.key.sign(0, 0, &self.host, now(), b)),
                Duration::from_secs(10),
            )
            .await
            .unwrap_or_default(),
            Err(_) => Vec::new(),
        };
        for (i, launch) in ls.into_iter().enumerate() {
            if !matches!(answers.get(i), Some(Response::Ok)) {
                self.dispatch(Effect::Launch {
                    node: node.clone(),
                    addr: addr.clone(),
                    launch: Box::new(launch),
                });
            }
        }
    }

    async fn deliver(self, e: Effect) {
        match e {
            Effect::Launch { node, addr, launch } => {
                let job_id = launch.job_id;
                let start_time = launch.start_time;
                let body = RequestBody::LaunchBatch(launch);
                let mut prolog_failed = false;
                let mut refused = false;
                for attempt in 0..5 {
                    match self
                        .send(&addr, &node, body.clone(), Duration::from_secs(10))
                        .await
                    {
                        Ok(Response::Ok) => return,
                        // A credential that expired on its way (a clock
                        // step, a slow node): a new one with the next try.
                        Ok(Response::Error(e))
                            if e.error == slurm_proto::SlurmError::ExpiredCredential =>
                        {
                            tracing::warn!(
                                "launch of job {job_id} on {node}: {e} (attempt {})",
                                attempt + 1
                            );
                            tokio::time::sleep(Duration::from_millis(200)).await;
                        }
                        Ok(Response::Error(e)) => {
                            tracing::error!("launch of job {job_id} on {node} refused: {e}");
                            prolog_failed = e.error == slurm_proto::SlurmError::PrologFailed;
                            // AlreadyDone: the node still cleans up an
                            // earlier run, or this run ended already; a
                            // later try may be taken.
                            refused = e.error != slurm_proto::SlurmError::AlreadyDone;
                            break;
                        }
                        Ok(_) => break,
                        Err(e) => {
                            tracing::warn!(
                                "launch of job {job_id} on {node} failed (attempt {}): {e}",
                                attempt + 1
                            );
                            tokio::time::sleep(Duration::from_millis(500 << attempt)).await;
                        }
                    }
                }
                let _ = self.cmds.send(Command::LaunchFailed {
                    job_id,
                    node,
                    prolog_failed,
                    refused,
                    start_time,
                });
            }
            Effect::Terminate {
                node,
                addr,
                job_id,
                kill_wait,
                start_time,
                cause,
            } => {
                let body = RequestBody::TerminateJob {
                    job_id,
                    kill_wait,
                    start_time,
                    cause,
                };
                for attempt in 0..10u32 {
                    match self
                        .send(&addr, &node, body.clone(), Duration::from_secs(10))
                        .await
                    {
                        Ok(_) => return,
                        Err(e) => {
                            tracing::warn!("terminate of job {job_id} on {node} failed: {e}");
                            tokio::time::sleep(Duration::from_millis(500 * (attempt as u64 + 1)))
                                .await;
                        }
                    }
                }
                // The node will be marked down by its missing heartbeats.
            }
            Effect::SignalStep {
                node,
                addr,
                job_id,
                step_id,
                signal,
                cause,
            } => {
                let body = RequestBody::SignalTasks {
                    job_id,
                    step_id,
                    signal,
                    cause,
                };
                if let Err(e) = self.send(&addr, &node, body, Duration::from_secs(10)).await {
                    tracing::warn!("signal {signal} to step {job_id}.{step_id} failed: {e}");
                }
            }
            Effect::Reboot { node, addr } => {
                // Not taken: the node is set DOWN after ResumeTimeout.
                match self
                    .send(
                        &addr,
                        &node,
                        RequestBody::NodeReboot,
                        Duration::from_secs(10),
                    )
                    .await
                {
                    Ok(Response::Ok) => tracing::info!("reboot sent to {node}"),
                    Ok(other) => tracing::warn!("reboot of {node} refused: {other:?}"),
                    Err(e) => tracing::warn!("reboot of {node} not sent: {e}"),
                }
            }
            Effect::Prologue { node, addr, facts } => {
                let job_id = facts.job_id;
                let body = RequestBody::JobPrologue(facts);
                // A failed prolog is reported by the node itself (it drains).
                match self.send(&addr, &node, body, Duration::from_secs(60)).await {
                    Ok(Response::Ok) => {}
                    Ok(other) => tracing::warn!("prolog of job {job_id} on {node}: {other:?}"),
                    Err(e) => tracing::warn!("prolog of job {job_id} on {node} not sent: {e}"),
                }
            }
            Effect::Suspend {
                node,
                addr,
                job_id,
                suspend,
                seq,
                epoch,
                start_time,
            } => {
                let body = RequestBody::SuspendJobHere {
                    job_id,
                    suspend,
                    seq,
                    epoch,
                    start_time,
                };
                if let Err(e) = self.send(&addr, &node, body, Duration::from_secs(10)).await {
                    tracing::warn!("suspend={suspend} of job {job_id} failed: {e}");
                }
            }
            Effect::Notify {
                node,
                addr,
                job_id,
                message,
            } => {
                let body = RequestBody::NotifyJob { job_id, message };
                match self.send(&addr, &node, body, Duration::from_secs(10)).await {
                    Ok(Response::Ok) => {}
                    Ok(other) => tracing::info!("notify of job {job_id} on {node}: {other:?}"),
                    Err(e) => tracing::warn!("notify of job {job_id} on {node} failed: {e}"),
                }
            }
            Effect::Signal {
                node,
                addr,
                job_id,
                signal,
            } => {
                let body = RequestBody::SignalJob { job_id, signal };
                if let Err(e) = self.send(&addr, &node, body, Duration::from_secs(10)).await {
                    tracing::warn!("signal {signal} to job {job_id} failed: {e}");
                }
            }
        }
    }
}
