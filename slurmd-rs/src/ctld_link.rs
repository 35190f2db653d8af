//! The daemon's side of the conversation with the controller.
//!
//! - [`run_link`]: register (every second until `Ok`), then heartbeat every
//!   `clamp(SlurmdTimeout/3, 1, 30)` seconds; any failure or error answer
//!   sends us back to registering. With backup controllers, a registration
//!   that fails goes to the next controller in turn: the one that takes it
//!   (the one in control) gets every report until a report fails.
//! - [`Outbox`] / [`run_outbox`]: job events (`BatchComplete`, `JobCleaned`)
//!   delivered in order, once registered, all that are queued in one call
//!   (`NodeReports`), each retried every second until the controller
//!   answers `Ok`. The queue is saved in the spool on every change
//!   so a daemon restart loses none.

use crate::cgroup::Usage;
use crate::daemon::Ctx;
use serde::{Deserialize, Serialize};
use slurm_common::grpc;
use slurm_common::net::NetError;
use slurm_proto::grpc::CtldCall;
use slurm_proto::{JobId, NodeRegistration, RequestBody, Response, SlurmError};
use std::collections::VecDeque;
use std::path::PathBuf;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::sync::Notify;
use tracing::{debug, info, warn};

/// How long one call to the controller may take.
const CALL_TIMEOUT: Duration = Duration::from_secs(10);
/// An event the controller keeps refusing (with an error answer, not a
/// network failure) is dropped after this many tries.
const MAX_REFUSALS: u32 = 30;

/// Seconds between heartbeats for a `SlurmdTimeout` (0 = no timeout).
pub fn heartbeat_interval(slurmd_timeout: u32) -> Duration {
    let s = if slurmd_timeout == 0 {
        30
    } else {
        (slurmd_timeout / 3).clamp(1, 30)
    };
    Duration::from_secs(s.into())
}

/// The controller reports go to now: its index, name and `host:port`.
fn current(ctx: &Ctx) -> (usize, &str, &str) {
    let i = ctx.ctld_current.load(Ordering::SeqCst) % ctx.ctlds.len().max(1);
    match ctx.ctlds.get(i) {
        Some((name, addr)) => (i, name, addr),
        None => (0, "", ""),
    }
}

/// Send one report to the controller in control, signed as root, over
/// this node's kept gRPC channel to it (made at its first report, with this
/// node's certificate when TLS is on).
pub async fn call(ctx: &Ctx, body: RequestBody) -> Result<Response, NetError> {
    let call = CtldCall::from_body(body).map_err(|b| NetError::Rpc {
        code: "InvalidArgument".into(),
        why: format!("not a node daemon's report: {b:?}"),
    })?;
    let (name, ch) = ctld_channel(ctx)?;
    let sign = |b: &_| Ok(ctx.key.sign(0, 0, &ctx.host, crate::now(), b));
    grpc::call_ctld(&ch, name, call, sign, CALL_TIMEOUT).await
}

/// The controller in control's name and this node's kept channel to it.
fn ctld_channel(ctx: &Ctx) -> Result<(&str, grpc::Channel), NetError> {
    let (i, name, addr) = current(ctx);
    let kept = ctx
        .ctld_channels
        .get(i)
        .ok_or_else(|| NetError::Io(std::io::Error::other("no controller is configured")))?;
    let ch = match kept.get() {
        Some(c) => c.clone(),
        None => {
            let tls = ctx.tls.as_ref().map(|t| t.client.clone());
            let c = grpc::channel(tls, addr, name)?;
            kept.get_or_init(|| c).clone()
        }
    };
    Ok((name, ch))
}

/// The answer of a backup controller in standby (another controller is,
/// or is about to be, in control).
fn standby(r: &Result<Response, NetError>) -> bool {
    matches!(r, Ok(Response::Error(e)) if e.error == SlurmError::InStandby)
}

/// What this node tells the controller when it registers.
pub fn registration(ctx: &Ctx) -> NodeRegistration {
    let hw = ctx.hardware.clone();
    let (os, arch) = crate::sysinfo::uname();
    NodeRegistration {
        name: ctx.node.clone(),
        cpus: hw.cpus,
        boards: hw.boards,
        sockets: hw.sockets,
        cores_per_socket: hw.cores_per_socket,
        threads_per_core: hw.threads_per_core,
        real_memory: hw.real_memory,
        tmp_disk: hw.tmp_disk,
        boot_time: match ctx.mock_boot.load(Ordering::SeqCst) {
            0 => crate::sysinfo::boot_time(),
            t => t,
        },
        slurmd_start_time: ctx.start_time,
        version: slurm_proto::SLURM_VERSION.to_string(),
        os,
        arch,
        cpu_load: crate::sysinfo::cpu_load(),
        free_mem: crate::sysinfo::free_mem(),
        running_jobs: ctx.running_jobs(),
        kubelet: ctx.kubelet.is_some(),
    }
}

fn describe(r: &Result<Response, NetError>) -> String {
    match r {
        Ok(Response::Error(e)) => e.to_string(),
        Ok(other) => format!("unexpected answer {other:?}"),
        Err(e) => e.to_string(),
    }
}

/// Register, then heartbeat, forever.
pub async fn run_link(ctx: Arc<Ctx>) {
    let interval = heartbeat_interval(ctx.conf().slurmd_timeout);
    let mut last_problem = String::new();
    loop {
        loop {
            let reg = registration(&ctx);
            let r = call(&ctx, RequestBody::RegisterNode(reg)).await;
            if matches!(r, Ok(Response::Ok)) {
                break;
            }
            let (i, _, addr) = current(&ctx);
            let problem = describe(&r);
            if problem != last_problem {
                warn!("registration with the controller at {addr} failed: {problem}; retrying");
                last_problem = problem;
            } else {
                debug!("registration retry failed: {problem}");
            }
            // The next controller in turn: the one in control takes it.
            let n = ctx.ctlds.len().max(1);
            ctx.ctld_current.store((i + 1) % n, Ordering::SeqCst);
            // A round of every controller once a second.
            if (i + 1) % n == 0 {
                tokio::time::sleep(Duration::from_secs(1)).await;
            }
        }
        last_problem.clear();
        ctx.registered.store(true, Ordering::SeqCst);
        info!("registered with the controller at {}", current(&ctx).2);
        ctx.outbox.wake();
        loop {
            tokio::time::sleep(interval).await;
            let r = call(
                &ctx,
                RequestBody::Heartbeat {
                    node: ctx.node.clone(),
                    running_jobs: ctx.running_jobs(),
                },
            )
            .await;
            if !matches!(r, Ok(Response::Ok)) {
                warn!("heartbeat failed: {}; registering again", describe(&r));
                ctx.registered.store(false, Ordering::SeqCst);
                break;
            }
        }
    }
}

/// A job event for the controller.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum OutMsg {
    BatchComplete {
        job_id: JobId,
        status: i32,
        /// The kernel killed processes of the job for lack of memory
        /// (`OUT_OF_MEMORY`).
        #[serde(default)]
        oom: bool,
        /// What the job used, from its cgroup (with a gathering
        /// `JobAcctGatherType`).
        #[serde(default)]
        usage: Option<Usage>,
        /// The run the script belonged to (its launch's start time; none
        /// for a record written before it was kept).
        #[serde(default)]
        job_start: Option<i64>,
    },
    JobCleaned {
        job_id: JobId,
        /// The run cleaned up, where this node knows it.
        #[serde(default)]
        job_start: Option<i64>,
    },
    /// The Epilog failed for this job (the node is to be drained).
    EpilogFailed { job_id: JobId },
    /// The Prolog failed here before a step of the job could start.
    PrologFailed { job_id: JobId },
    /// A step's tasks here ended; what they used (from its cgroup; none
    /// without one).
    StepUsage {
        job_id: JobId,
        step_id: u32,
        #[serde(default)]
        usage: Option<Usage>,
        /// The run the step belongs to (its credential's job start).
        #[serde(default)]
        job_start: Option<i64>,
    },
}

impl OutMsg {
    pub fn job_id(&self) -> JobId {
        match self {
            OutMsg::BatchComplete { job_id, .. }
            | OutMsg::JobCleaned { job_id, .. }
            | OutMsg::EpilogFailed { job_id }
            | OutMsg::PrologFailed { job_id }
            | OutMsg::StepUsage { job_id, .. } => *job_id,
        }
    }

    pub fn to_request(&self, node: &str) -> RequestBody {
        match *self {
            OutMsg::BatchComplete {
                job_id,
                status,
                oom,
                usage,
                job_start,
            } => RequestBody::BatchComplete {
                job_id,
                node: node.to_string(),
                status,
                oom,
                usage,
                job_start,
            },
            OutMsg::JobCleaned { job_id, job_start } => RequestBody::JobCleaned {
                job_id,
                node: node.to_string(),
                job_start,
            },
            OutMsg::EpilogFailed { job_id } => RequestBody::EpilogFailed {
                job_id,
                node: node.to_string(),
            },
            OutMsg::PrologFailed { job_id } => RequestBody::PrologFailed {
                job_id,
                node: node.to_string(),
            },
            OutMsg::StepUsage {
                job_id,
                step_id,
                usage,
                job_start,
            } => RequestBody::StepUsage {
                job_id,
                step_id,
                node: node.to_string(),
                usage,
                job_start,
            },
        }
    }
}

/// Ordered, persisted queue of job events.
pub struct Outbox {
    queue: Mutex<VecDeque<OutMsg>>,
    notify: Notify,
    path: Option<PathBuf>,
}

impl Outbox {
    /// An outbox kept in memory only.
    pub fn in_memory() -> Outbox {
        Outbox {
            queue: Mutex::new(VecDeque::new()),
            notify: Notify::new(),
            path: None,
        }
    }

    /// An outbox saved at `path`, starting with what a previous run left there.
    pub fn load(path: PathBuf) -> Outbox {
        let queue = match std::fs::read(&path) {
            Ok(b) => match serde_json::from_slice::<VecDeque<OutMsg>>(&b) {
                Ok(q) => {
                    if !q.is_empty() {
                        info!(
                            "{} job event(s) left by the previous run will be sent",
                            q.len()
                        );
                    }
                    q
                }
                Err(e) => {
                    warn!("ignoring malformed outbox {}: {e}", path.display());
                    VecDeque::new()
                }
            },
            Err(_) => VecDeque::new(),
        };
        Outbox {
            queue: Mutex::new(queue),
            notify: Notify::new(),
            path: Some(path),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, VecDeque<OutMsg>> {
        self.queue.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn save(&self, q: &VecDeque<OutMsg>) {
        let Some(path) = &self.path else { return };
        let tmp = path.with_extension("tmp");
        let res = serde_json::to_vec(q)
            .map_err(std::io::Error::other)
            .and_then(|b| std::fs::write(&tmp, b))
            .and_then(|()| std::fs::rename(&tmp, path));
        if let Err(e) = res {
            warn!("cannot save the outbox {}: {e}", path.display());
        }
    }

    pub fn push(&self, m: OutMsg) {
        let mut q = self.lock();
        q.push_back(m);
        self.save(&q);
        drop(q);
        self.notify.notify_one();
    }

    /// Wake the sender (e.g. after registering).
    pub fn wake(&self) {
        self.notify.notify_one();
    }

    pub fn len(&self) -> usize {
        self.lock().len()
    }

    pub fn is_empty(&self) -> bool {
        self.lock().is_empty()
    }

    /// Jobs with events not yet delivered.
    pub fn pending_jobs(&self) -> Vec<JobId> {
        self.lock().iter().map(OutMsg::job_id).collect()
    }

    /// The first `n` events (fewer when fewer are queued).
    fn front_n(&self, n: usize) -> Vec<OutMsg> {
        self.lock().iter().take(n).cloned().collect()
    }

    /// Drop the first `n` events (delivered), saving once.
    fn pop_n(&self, n: usize) {
        if n == 0 {
            return;
        }
        let mut q = self.lock();
        let n = n.min(q.len());
        q.drain(..n);
        self.save(&q);
    }
}

/// Most events sent in one call (`NodeReports`).
const MAX_BATCH: usize = 256;

/// Deliver the outbox, forever: what is queued goes in one call (one
/// event alone as its own report), each event's answer settling it in
/// order; the first one not settled waits a second with those after it.
pub async fn run_outbox(ctx: Arc<Ctx>) {
    let mut refusals = 0u32;
    loop {
        // Events wait for registration: a restarted controller learns the
        // node's running jobs first, then how the others ended.
        if !ctx.registered.load(Ordering::SeqCst) {
            tokio::select! {
                _ = ctx.outbox.notify.notified() => {}
                _ = tokio::time::sleep(Duration::from_secs(1)) => {}
            }
            continue;
        }
        let batch = ctx.outbox.front_n(MAX_BATCH);
        if batch.is_empty() {
            ctx.outbox.notify.notified().await;
            continue;
        }
        let answers = send_events(&ctx, &batch).await;
        let mut settled = 0;
        for (msg, r) in batch.iter().zip(&answers) {
            if !settles(msg, r, &mut refusals) {
                break;
            }
            refusals = 0;
            settled += 1;
        }
        ctx.outbox.pop_n(settled);
        for msg in &batch[..settled] {
            if let OutMsg::JobCleaned { job_id, .. } = msg {
                ctx.jobs.remove_cleaned(*job_id);
            }
        }
        if settled < batch.len() {
            tokio::time::sleep(Duration::from_secs(1)).await;
        }
    }
}

/// Send `batch` to the controller: the answer to each event, in order (a
/// failed call answers the first only).
async fn send_events(ctx: &Ctx, batch: &[OutMsg]) -> Vec<Result<Response, NetError>> {
    if let [one] = batch {
        return vec![call(ctx, one.to_request(&ctx.node)).await];
    }
    let reports = batch.iter().map(|m| m.to_request(&ctx.node)).collect();
    let calls = match slurm_proto::grpc::node_report_batch(&ctx.node, reports) {
        Ok(b) => b,
        Err(why) => {
            return vec![Err(NetError::Rpc {
                code: "InvalidArgument".into(),
                why,
            })]
        }
    };
    let (name, ch) = match ctld_channel(ctx) {
        Ok(c) => c,
        Err(e) => return vec![Err(e)],
    };
    let sign = |b: &_| Ok(ctx.key.sign(0, 0, &ctx.host, crate::now(), b));
    match grpc::call_ctld_reports(&ch, name, calls, sign, CALL_TIMEOUT).await {
        Ok(answers) => answers.into_iter().map(Ok).collect(),
        Err(e) => vec![Err(e)],
    }
}

/// Whether the controller's answer `r` settles `msg` (delivered, or
/// refused for good): else it is sent again.
fn settles(msg: &OutMsg, r: &Result<Response, NetError>, refusals: &mut u32) -> bool {
    match r {
        // Control is changing hands: keep it for the controller in
        // control (the link registers with it first).
        _ if standby(r) => {
            debug!(job = msg.job_id(), "controller in standby: {msg:?} waits");
            false
        }
        Ok(Response::Ok) => {
            debug!(job = msg.job_id(), "delivered {msg:?}");
            true
        }
        Ok(Response::Error(e))
            if matches!(e.error, SlurmError::InvalidJobId | SlurmError::AlreadyDone) =>
        {
            warn!(
                job = msg.job_id(),
                "controller refused {msg:?} ({e}); dropping it"
            );
            true
        }
        Ok(_) => {
            *refusals += 1;
            if *refusals >= MAX_REFUSALS {
                warn!(
                    job = msg.job_id(),
                    "controller keeps refusing {msg:?} ({}); dropping it",
                    describe(r)
                );
                true
            } else {
                debug!(
                    job = msg.job_id(),
                    "controller refused {msg:?}: {}",
                    describe(r)
                );
                false
            }
        }
        Err(e) => {
            debug!(job = msg.job_id(), "cannot deliver {msg:?}: {e}");
            false
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn heartbeat_interval_is_clamped() {
        assert_eq!(heartbeat_interval(300), Duration::from_secs(30));
        assert_eq!(heartbeat_interval(60), Duration::from_secs(20));
        assert_eq!(heartbeat_interval(2), Duration::from_secs(1));
        assert_eq!(heartbeat_interval(0), Duration::from_secs(30));
    }

    #[test]
    fn outbox_persists_in_order() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("outbox.json");
        let o = Outbox::load(p.clone());
        assert!(o.is_empty());
        o.push(OutMsg::BatchComplete {
            job_id: 3,
            status: 256,
            oom: true,
            usage: None,
            job_start: Some(100),
        });
        let cleaned = |job_id| OutMsg::JobCleaned {
            job_id,
            job_start: Some(100),
        };
        o.push(cleaned(3));
        o.push(cleaned(9));
        o.pop_n(1);
        let again = Outbox::load(p.clone());
        assert_eq!(again.pending_jobs(), vec![3, 9]);
        assert_eq!(again.front_n(5), vec![cleaned(3), cleaned(9)]);
        again.pop_n(9);
        assert!(Outbox::load(p.clone()).is_empty());
        std::fs::write(&p, b"{not json").unwrap();
        assert!(Outbox::load(p).is_empty());
        let r = OutMsg::BatchComplete {
            job_id: 3,
            status: 9,
            oom: false,
            usage: Some(Usage::default()),
            job_start: Some(100),
        }
        .to_request("n1");
        // An outbox saved by an older daemon still loads.
        let old: VecDeque<OutMsg> =
            serde_json::from_str(r#"[{"BatchComplete":{"job_id":5,"status":0}}]"#).unwrap();
        assert!(matches!(
            old[0],
            OutMsg::BatchComplete {
                job_id: 5,
                status: 0,
                oom: false,
                usage: None,
                job_start: None,
            }
        ));
        assert!(
            matches!(r, RequestBody::BatchComplete { job_id: 3, status: 9, ref node, job_start: Some(100), .. } if node == "n1")
        );
    }
}
