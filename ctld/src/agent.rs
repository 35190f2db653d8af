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

/// How often a message that must reach a node is tried.
const TRIES: u32 = 10;

/// A kind of message: Slurm's number and name (in number order).
type Kind = (u32, &'static str);

/// Messages being delivered to node daemons now, for `sdiag`: by kind,
/// how many to each node.
static IN_FLIGHT: std::sync::Mutex<
    std::collections::BTreeMap<Kind, std::collections::BTreeMap<String, u64>>,
> = std::sync::Mutex::new(std::collections::BTreeMap::new());

/// Of them, those waiting to be tried again.
static RETRYING: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

/// `n` messages of `kind` to `node` on their way while this lives.
struct InFlight {
    kind: Kind,
    node: String,
    n: u64,
}

impl InFlight {
    fn start((name, id): (&'static str, u32), node: &str, n: u64) -> InFlight {
        let kind = (id, name);
        let mut m = IN_FLIGHT.lock().unwrap_or_else(|p| p.into_inner());
        *m.entry(kind)
            .or_default()
            .entry(node.to_string())
            .or_default() += n;
        InFlight {
            kind,
            node: node.to_string(),
            n,
        }
    }
}

impl Drop for InFlight {
    fn drop(&mut self) {
        let mut m = IN_FLIGHT.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(nodes) = m.get_mut(&self.kind) {
            if let Some(c) = nodes.get_mut(&self.node) {
                *c = c.saturating_sub(self.n);
                if *c == 0 {
                    nodes.remove(&self.node);
                }
            }
            if nodes.is_empty() {
                m.remove(&self.kind);
            }
        }
    }
}

/// Counts a message as waiting to be tried again while this lives.
struct Waiting;

impl Waiting {
    fn start() -> Waiting {
        RETRYING.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        Waiting
    }
}

impl Drop for Waiting {
    fn drop(&mut self) {
        RETRYING.fetch_sub(1, std::sync::atomic::Ordering::Relaxed);
    }
}

/// What is on its way to node daemons now (`sdiag`): the messages being
/// delivered, those of them waiting to be tried again, and by kind (in
/// message number order) how many and to which nodes.
pub fn in_flight() -> (u64, u64, Vec<slurm_proto::PendingRpc>) {
    let m = IN_FLIGHT.lock().unwrap_or_else(|p| p.into_inner());
    let by_kind: Vec<slurm_proto::PendingRpc> = m
        .iter()
        .map(|((id, name), nodes)| {
            let names: Vec<&str> = nodes.keys().map(String::as_str).collect();
            slurm_proto::PendingRpc {
                name: name.to_string(),
                id: *id,
                count: nodes.values().sum(),
                hosts: slurm_common::hostlist::compress_str(&names),
            }
        })
        .collect();
    let total = by_kind.iter().map(|k| k.count).sum();
    (
        total,
        RETRYING.load(std::sync::atomic::Ordering::Relaxed),
        by_kind,
    )
}

/// Run `attempt` (given its number, from 1) up to `tries` times until it
/// says it is done, waiting 0.5 s after the first failure, 1 s after the
/// second, and so on. Whether it was done.
async fn retry_until_taken<F, Fut>(tries: u32, mut attempt: F) -> bool
where
    F: FnMut(u32) -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    for n in 1..=tries {
        if attempt(n).await {
            return true;
        }
        if n < tries {
            let _waiting = Waiting::start();
            tokio::time::sleep(Duration::from_millis(500 * u64::from(n))).await;
        }
    }
    false
}

#[derive(Clone)]
pub struct Agent {
    pub key: Key,
    pub host: String,
    pub cmds: Sender<Command>,
    pub rt: tokio::runtime::Handle,
    /// The accounting outbox's sender task, when accounting goes to slurmdbd.
    pub acct: Option<tokio::sync::mpsc::UnboundedSender<slurm_proto::acct::SeqRecord>>,
    /// The thread writing job completion records (`JobCompType`).
    pub jobcomp: Option<Sender<slurm_common::jobcomp::Records>>,
}

/// How long a `jobcomp/script` run may take before it is killed (Slurm
/// waits for ever, and one hung script holds back every later record).
const JOBCOMP_SCRIPT_LIMIT: Duration = Duration::from_secs(300);

/// Batches of completion records handed to the writer and not yet done.
static JOBCOMP_QUEUED: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);

/// Wait (at most `limit`) for the completion records handed over so far to
/// be written or run: a controller stopping does not lose them.
pub fn jobcomp_drain(limit: Duration) {
    let deadline = std::time::Instant::now() + limit;
    while JOBCOMP_QUEUED.load(std::sync::atomic::Ordering::SeqCst) > 0 {
        if std::time::Instant::now() >= deadline {
            tracing::error!("job completion records still being written at shutdown: left");
            return;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// Start the thread that writes job completion records, in the order the
/// writer committed them (off the writer: a slow disk or script holds up
/// nothing else): `jobcomp/filetxt` lines appended to their file (made
/// 0644, as Slurm's; only a regular file, never through a symbolic link),
/// or `jobcomp/script`'s script run once for each job, one at a time.
pub fn jobcomp_writer() -> Sender<slurm_common::jobcomp::Records> {
    use slurm_common::jobcomp::Records;
    let (tx, rx) = std::sync::mpsc::channel::<Records>();
    let spawned = std::thread::Builder::new()
        .name("jobcomp".into())
        .spawn(move || {
            for records in rx {
                match records {
                    Records::Lines(path, lines) => append_jobcomp(&path, &lines),
                    Records::Script(run) => {
                        let tz = std::env::var("TZ").ok();
                        let user = slurm_common::users::user_by_name(&run.user);
                        if user.is_none() {
                            tracing::error!(
                                "jobcomp/script: SlurmUser {} is not known: {} job record(s) not run",
                                run.user,
                                run.jobs.len()
                            );
                        }
                        for e in run.jobs.iter().filter(|_| user.is_some()) {
                            let env =
                                slurm_common::jobcomp::script_env(e, &run.cluster, tz.as_deref());
                            let who = user.as_ref().map_or((0, 0), |u| (u.uid, u.gid));
                            run_jobcomp_script(&run.script, &env, who, e.job.job_id);
                        }
                    }
                }
                JOBCOMP_QUEUED.fetch_sub(1, std::sync::atomic::Ordering::SeqCst);
            }
        });
    if let Err(e) = spawned {
        tracing::error!("cannot start the job completion writer: {e}");
    }
    tx
}

/// Append `jobcomp/filetxt` lines to `path`.
fn append_jobcomp(path: &std::path::Path, lines: &[String]) {
    use std::io::Write;
    use std::os::unix::fs::OpenOptionsExt;
    // Only a regular file (a FIFO there would hold the thread, and every
    // record after, forever).
    let res = std::fs::OpenOptions::new()
        .append(true)
        .create(true)
        .mode(0o644)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK)
        .open(path)
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

/// Run the `jobcomp/script` program for one job, as Slurm's plugin does:
/// as `SlurmUser` (`who`: uid, gid; no supplementary groups), in `/tmp`,
/// with nothing but the job's variables in its environment and its input
/// and output on `/dev/null`, in a process group of its own; waited for (at
/// most [`JOBCOMP_SCRIPT_LIMIT`], then its whole group killed), failures
/// logged.
fn run_jobcomp_script(path: &std::path::Path, env: &[(String, String)], who: (u32, u32), job: u32) {
    use std::os::unix::process::CommandExt;
    use std::process::{Command, Stdio};
    let mut cmd = Command::new(path);
    cmd.env_clear()
        .envs(env.iter().map(|(k, v)| (k, v)))
        .current_dir("/tmp")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .process_group(0);
    // SAFETY: getuid has no preconditions.
    if unsafe { libc::getuid() } == 0 && who.0 != 0 {
        cmd.gid(who.1).uid(who.0);
    }
    let child = cmd.spawn();
    let mut child = match child {
        Ok(c) => c,
        Err(e) => {
            tracing::error!(
                "jobcomp/script: execve({}): {e} (job {job})",
                path.display()
            );
            return;
        }
    };
    let deadline = std::time::Instant::now() + JOBCOMP_SCRIPT_LIMIT;
    // Polled from 1 ms up to 50 ms: a quick script costs little more than
    // its own run.
    let mut pause = Duration::from_millis(1);
    let status = loop {
        match child.try_wait() {
            Ok(Some(s)) => break Some(s),
            Ok(None) if std::time::Instant::now() < deadline => {
                std::thread::sleep(pause);
                pause = (pause * 2).min(Duration::from_millis(50));
            }
            Ok(None) => {
                // The whole group: what the script started too.
                // SAFETY: kill with a negative pid signals that group only.
                unsafe { libc::kill(-(child.id() as i32), libc::SIGKILL) };
                let _ = child.wait();
                tracing::error!(
                    "jobcomp/script: script {} still running after {} s for job {job}: killed",
                    path.display(),
                    JOBCOMP_SCRIPT_LIMIT.as_secs()
                );
                break None;
            }
            Err(e) => {
                tracing::error!("jobcomp/script: waitpid: {e}");
                break None;
            }
        }
    };
    if let Some(code) = status.and_then(|s| s.code()).filter(|c| *c != 0) {
        tracing::error!(
            "jobcomp/script: script {} exited with status {code} (job {job})",
            path.display()
        );
    }
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

    /// Send `body` to a node until it answers (whatever the answer): ten
    /// tries, each of up to 10 s, waiting a little longer after each
    /// failure (at most about two minutes in all). Only for a message that
    /// names its run (a late one reaches no other). The first and last
    /// failures are warned of. Whether it was taken.
    async fn send_until_taken(
        &self,
        addr: &str,
        node: &str,
        body: RequestBody,
        what: impl Fn() -> String,
    ) -> bool {
        retry_until_taken(TRIES, |attempt| {
            let body = body.clone();
            let what = &what;
            async move {
                match self.send(addr, node, body, Duration::from_secs(10)).await {
                    Ok(_) => true,
                    Err(e) if attempt == 1 || attempt == TRIES => {
                        tracing::warn!("{} on {node} failed (attempt {attempt}): {e}", what());
                        false
                    }
                    Err(e) => {
                        tracing::debug!("{} on {node} failed (attempt {attempt}): {e}", what());
                        false
                    }
                }
            }
        })
        .await
    }

    /// Hand the completion records of a committed batch to their writer.
    pub fn jobcomp(&self, records: slurm_common::jobcomp::Records) {
        if let Some(tx) = &self.jobcomp {
            JOBCOMP_QUEUED.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            if tx.send(records).is_err() {
                JOBCOMP_QUEUED.fetch_sub(1, std::sync::atomic::Ordering::SeqCst);
            }
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
        let on_its_way = InFlight::start(slurm_proto::BATCH_JOB_LAUNCH, &node, ls.len() as u64);
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
        // (Those not taken are each on their way again, on their own.)
        drop(on_its_way);
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
                let _on_its_way = InFlight::start(body.message_type(), &node, 1);
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
                            let _waiting = Waiting::start();
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
                            if attempt < 4 {
                                let _waiting = Waiting::start();
                                tokio::time::sleep(Duration::from_millis(500 << attempt)).await;
                            }
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
                let _on_its_way = InFlight::start(body.message_type(), &node, 1);
                // (Not taken at all: the node will be marked down by its
                // missing heartbeats.)
                self.send_until_taken(&addr, &node, body, || format!("terminate of job {job_id}"))
                    .await;
            }
            Effect::SignalStep {
                node,
                addr,
                job_id,
                step_id,
                signal,
                cause,
                job_start,
            } => {
                let body = RequestBody::SignalTasks {
                    job_id,
                    step_id,
                    signal,
                    cause,
                    job_start,
                };
                let _on_its_way = InFlight::start(body.message_type(), &node, 1);
                // The controller ending a step (its time limit) tries again
                // while the node cannot be reached: the message names the
                // run, so a late one reaches no other run's step. Users'
                // signals go once (two tried apart could arrive out of
                // order: STOP after CONT).
                if cause != slurm_proto::TermCause::None && job_start.is_some() {
                    self.send_until_taken(&addr, &node, body, || {
                        format!("signal {signal} to step {job_id}.{step_id}")
                    })
                    .await;
                } else if let Err(e) = self.send(&addr, &node, body, Duration::from_secs(10)).await
                {
                    tracing::warn!("signal {signal} to step {job_id}.{step_id} failed: {e}");
                }
            }
            Effect::Reboot { node, addr } => {
                let _on_its_way = InFlight::start(RequestBody::NodeReboot.message_type(), &node, 1);
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
                let _on_its_way = InFlight::start(body.message_type(), &node, 1);
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
                let _on_its_way = InFlight::start(body.message_type(), &node, 1);
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
                let _on_its_way = InFlight::start(body.message_type(), &node, 1);
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
                let _on_its_way = InFlight::start(body.message_type(), &node, 1);
                if let Err(e) = self.send(&addr, &node, body, Duration::from_secs(10)).await {
                    tracing::warn!("signal {signal} to job {job_id} failed: {e}");
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn a_message_is_tried_again_until_taken_and_given_up_after_the_last_try() {
        let tried = std::sync::atomic::AtomicU32::new(0);
        let t0 = tokio::time::Instant::now();
        // Taken at the third try: after waits of 0.5 s and 1 s.
        let taken = retry_until_taken(TRIES, |n| {
            tried.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            async move { n == 3 }
        })
        .await;
        assert!(taken);
        assert_eq!(tried.load(std::sync::atomic::Ordering::SeqCst), 3);
        assert_eq!(t0.elapsed(), Duration::from_millis(1500));
        // Never taken: every try made, no wait after the last.
        tried.store(0, std::sync::atomic::Ordering::SeqCst);
        let t0 = tokio::time::Instant::now();
        let taken = retry_until_taken(TRIES, |_| {
            tried.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            async { false }
        })
        .await;
        assert!(!taken);
        assert_eq!(tried.load(std::sync::atomic::Ordering::SeqCst), TRIES);
        assert_eq!(t0.elapsed(), Duration::from_millis(500 * 45));
    }
}
