//! The jobs on this node: launching, waiting, signalling, terminating,
//! cleaning up, and re-adopting after a daemon restart.
//!
//! A job's life here: `Launching` (spool files, cgroup, spawn) → `Running`
//! (script alive; its cgroup, or without cgroups its process group, is the
//! job) → `Completing` (script ended: the rest of the job killed, usage and
//! OOM kills read from the cgroup, `BatchComplete` queued) → `Cleaned`
//! (cgroup and spool removed, `JobCleaned` queued). The entry is dropped
//! once the outbox has delivered `JobCleaned`, so the controller sees the
//! job in `running_jobs` until it knows the node is clean.
//!
//! With cgroups, every process of the job is in
//! `.../job_<id>/step_batch` (the script joins before it execs), so
//! processes that leave the script's session (`setsid`, double forks) are
//! still found and killed; `SignalJob` and `TerminateJob`'s SIGTERM reach
//! the script's process group (and the whole cgroup with
//! `SignalChildrenProcesses=yes`), SIGKILL always reaches the whole cgroup.
//!
//! Each running job also has a state file `<spool>/jobstate.<node>/<id>.json`
//! (root's, unlike the job directory which the user owns) with its pid and
//! start time, and its exit status once reported; a restarted daemon
//! re-adopts live jobs from these files and finishes the cleanup of ended
//! ones. It cannot learn the exit status of a script that ended while no
//! daemon was its parent, so such jobs are reported with status 0 and a
//! warning in the log.

use crate::cgroup::{JobCgroup, JobSpec, Usage};
use crate::ctld_link::OutMsg;
use crate::daemon::Ctx;
use crate::launch;
use crate::prolog;
use serde::{Deserialize, Serialize};
use slurm_proto::{BatchLaunch, JobId, Response, RpcError, SlurmError};
use std::collections::{BTreeMap, HashMap};
use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::sync::watch;
use tracing::{debug, error, info, warn};

/// Where a job is in its life on this node.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Phase {
    Launching,
    Running,
    Completing,
    Cleaned,
}

struct Entry {
    phase: Phase,
    /// Process group (= the script's pid); 0 while launching.
    pgid: i32,
    /// The job's user.
    uid: u32,
    /// Becomes `true` when the script has ended.
    exited: Option<watch::Receiver<bool>>,
    cgroup: Option<Arc<JobCgroup>>,
    /// The run's start time as the controller gave it (0: unknown, as for
    /// a job re-adopted from a state file written before it was kept).
    start_time: i64,
}

/// What a launch request is to this node.
#[derive(Debug, PartialEq, Eq)]
enum Begin {
    /// A run to start (reserved as `Launching`).
    New,
    /// The run this node has, or had: the same launch sent again (its
    /// first answer was lost or late). Nothing to do; its end is reported
    /// (or was) through the outbox.
    Again,
    /// An earlier run of the job is still cleaning up here.
    Busy(Phase),
}

/// How long the runs that ended here are remembered (a launch sent again
/// comes within the controller's retries: well under a minute).
const ENDED_KEPT: Duration = Duration::from_secs(600);

/// What `signal` and `terminate` act on.
struct Target {
    phase: Phase,
    pgid: i32,
    exited: Option<watch::Receiver<bool>>,
    cgroup: Option<Arc<JobCgroup>>,
}

/// The table of jobs on this node.
#[derive(Default)]
pub struct JobTable {
    inner: Mutex<BTreeMap<JobId, Entry>>,
    /// Runs (job, start time) whose cleanup the controller acknowledged,
    /// and when.
    ended: Mutex<BTreeMap<(JobId, i64), std::time::Instant>>,
}

impl JobTable {
    fn lock(&self) -> std::sync::MutexGuard<'_, BTreeMap<JobId, Entry>> {
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Ids of every job still here (running or cleaning up), ascending.
    pub fn ids(&self) -> Vec<JobId> {
        self.lock().keys().copied().collect()
    }

    pub fn phase(&self, id: JobId) -> Option<Phase> {
        self.lock().get(&id).map(|e| e.phase)
    }

    fn ended(&self) -> std::sync::MutexGuard<'_, BTreeMap<(JobId, i64), std::time::Instant>> {
        self.ended.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Reserve `id`'s run `start` for a launch, unless this node has or
    /// had that run, or an earlier run of the job is still here.
    fn begin_launch(&self, id: JobId, start: i64) -> Begin {
        let mut t = self.lock();
        let again = |e: &Entry| start != 0 && e.start_time == start;
        match t.get(&id) {
            Some(e) if again(e) => return Begin::Again,
            Some(e) if e.phase != Phase::Cleaned => return Begin::Busy(e.phase),
            _ => {}
        }
        if self
            .ended()
            .get(&(id, start))
            .is_some_and(|t| t.elapsed() < ENDED_KEPT)
        {
            return Begin::Again;
        }
        t.insert(
            id,
            Entry {
                phase: Phase::Launching,
                pgid: 0,
                uid: u32::MAX,
                exited: None,
                cgroup: None,
                start_time: start,
            },
        );
        Begin::New
    }

    fn abort_launch(&self, id: JobId) {
        let mut t = self.lock();
        if t.get(&id).map(|e| e.phase) == Some(Phase::Launching) {
            t.remove(&id);
        }
    }

    fn set_running(
        &self,
        id: JobId,
        (pgid, uid): (i32, u32),
        exited: watch::Receiver<bool>,
        cgroup: Option<Arc<JobCgroup>>,
        start_time: i64,
    ) {
        self.lock().insert(
            id,
            Entry {
                phase: Phase::Running,
                pgid,
                uid,
                exited: Some(exited),
                cgroup,
                start_time,
            },
        );
    }

    /// Each running batch script here: (job, its user, its process group,
    /// its cgroup).
    pub fn running_scripts(&self) -> Vec<(JobId, u32, i32, Option<Arc<JobCgroup>>)> {
        self.lock()
            .iter()
            .filter(|(_, e)| e.phase == Phase::Running)
            .map(|(id, e)| (*id, e.uid, e.pgid, e.cgroup.clone()))
            .collect()
    }

    /// The cgroup of a running job (for its `srun` steps).
    pub fn cgroup(&self, id: JobId) -> Option<Arc<JobCgroup>> {
        self.lock()
            .get(&id)
            .filter(|e| e.phase == Phase::Running)
            .and_then(|e| e.cgroup.clone())
    }

    fn set_phase(&self, id: JobId, phase: Phase) {
        if let Some(e) = self.lock().get_mut(&id) {
            e.phase = phase;
        }
    }

    /// Drop a job whose cleanup the controller has acknowledged.
    /// The run is remembered a while, so a launch of it sent again is
    /// not taken for a new one.
    pub fn remove_cleaned(&self, id: JobId) {
        let mut t = self.lock();
        if t.get(&id).map(|e| e.phase) != Some(Phase::Cleaned) {
            return;
        }
        let start = t.remove(&id).map_or(0, |e| e.start_time);
        if start != 0 {
            let mut ended = self.ended();
            ended.retain(|_, t| t.elapsed() < ENDED_KEPT);
            ended.insert((id, start), std::time::Instant::now());
        }
    }

    fn target(&self, id: JobId) -> Option<Target> {
        self.lock().get(&id).map(|e| Target {
            phase: e.phase,
            pgid: e.pgid,
            exited: e.exited.clone(),
            cgroup: e.cgroup.clone(),
        })
    }
}

/// What a restarted daemon needs to find a running job again.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
struct StateFile {
    job_id: JobId,
    pid: i32,
    start_ticks: u64,
    job_dir: PathBuf,
    /// Set once `BatchComplete` is in the outbox.
    #[serde(default)]
    status: Option<i32>,
    /// The job's cgroup, when it has one.
    #[serde(default)]
    cgroup: Option<JobCgroup>,
    /// The run's start time as the controller gave it (0 in files written
    /// before it was kept).
    #[serde(default)]
    start_time: i64,
    /// The job's user and error file (for the OOM message).
    #[serde(default)]
    uid: u32,
    #[serde(default)]
    stderr: Option<String>,
    /// What the epilog is told (user, partition, account, nodes).
    #[serde(default)]
    env: Option<ScriptInfo>,
}

/// The job facts a prolog or epilog sees, kept with the job's state.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub(crate) struct ScriptInfo {
    pub(crate) gid: u32,
    pub(crate) user: String,
    pub(crate) partition: String,
    pub(crate) account: String,
    pub(crate) nodelist: String,
}

pub(crate) fn script_env(
    ctx: &Ctx,
    job_id: JobId,
    uid: Option<u32>,
    info: Option<&ScriptInfo>,
) -> prolog::ScriptEnv {
    prolog::ScriptEnv {
        job_id,
        uid,
        gid: info.map(|i| i.gid),
        user: info.map(|i| i.user.clone()),
        partition: info.map(|i| i.partition.clone()),
        account: info.map(|i| i.account.clone()),
        nodelist: info.map(|i| i.nodelist.clone()),
        node: ctx.node.clone(),
        cluster: ctx.conf().cluster_name.clone(),
        conf_path: ctx.conf_path_str.clone(),
    }
}

/// `PrologEpilogTimeout` (seconds; unset or 0: no limit).
pub(crate) fn script_timeout(ctx: &Ctx) -> Duration {
    let secs = ctx
        .conf()
        .get("PrologEpilogTimeout")
        .and_then(|v| v.trim().parse::<u64>().ok())
        .filter(|&v| v < 65534)
        .unwrap_or(0);
    Duration::from_secs(secs)
}

/// Run the Epilog (if any) for a job ending here; a failure is reported so
/// the controller drains this node.
async fn epilog(ctx: &Ctx, job_id: JobId, uid: Option<u32>, info: Option<&ScriptInfo>) {
    let Some(path) = ctx.conf().epilog.clone() else {
        return;
    };
    let env = script_env(ctx, job_id, uid, info);
    if let Err(e) = prolog::run(prolog::Kind::Epilog, &path, &env, script_timeout(ctx)).await {
        error!(job = job_id, "{e}");
        ctx.outbox.push(OutMsg::EpilogFailed { job_id });
    }
}

/// The directory of a node's job state files within its spool.
pub fn state_dir(spool: &Path, node: &str) -> PathBuf {
    spool.join(format!("jobstate.{node}"))
}

fn state_path(dir: &Path, id: JobId) -> PathBuf {
    dir.join(format!("{id}.json"))
}

fn rpc_error(error: SlurmError, detail: impl Into<String>) -> Response {
    Response::Error(RpcError {
        error,
        detail: Some(detail.into()),
    })
}

/// A job's share of this node, from its launch request.
pub fn job_spec(l: &BatchLaunch, node: &str) -> JobSpec {
    let a = &l.alloc;
    let idx = a.nodes.iter().position(|n| n == node).unwrap_or(0);
    let cpus = a
        .cpus
        .get(idx)
        .copied()
        .filter(|c| *c > 0)
        .unwrap_or_else(|| l.num_tasks.max(1).saturating_mul(l.cpus_per_task.max(1)));
    let mem_mib = a
        .mem
        .get(idx)
        .copied()
        .filter(|m| *m > 0)
        .or(l.mem_per_node.filter(|m| *m > 0))
        .or(l.mem_per_cpu.map(|m| m.saturating_mul(u64::from(cpus))))
        .unwrap_or(0);
    JobSpec {
        job_id: l.job_id,
        uid: l.uid,
        cpus,
        mem_mib,
        gpus: Some(l.alloc.gpus_on(node)),
    }
}

/// Make the job's cgroup and have the prepared script join its
/// `step_batch`. `Ok(None)` without cgroups, or when only tracking and the
/// cgroup cannot be made (logged); an error when the job must be confined.
fn job_cgroup(
    ctx: &Ctx,
    l: &BatchLaunch,
    prep: &mut launch::Prepared,
) -> Result<Option<JobCgroup>, launch::LaunchError> {
    let Some(m) = &ctx.cgroups else {
        return Ok(None);
    };
    let made =
        m.create_job(&job_spec(l, &ctx.node))
            .and_then(|jc| match jc.create_step("step_batch") {
                Ok(procs) => Ok((jc, procs)),
                Err(e) => {
                    let _ = m.remove_job(&jc);
                    Err(e)
                }
            });
    match made {
        Ok((jc, procs)) => {
            if let Err(e) = prep.join_cgroups(procs) {
                let _ = m.remove_job(&jc);
                return Err(e);
            }
            debug!(job = l.job_id, cpus = ?jc.cpus, mem = ?jc.mem_limit, "job cgroup ready");
            Ok(Some(jc))
        }
        Err(e) if m.constrains() => Err(launch::LaunchError::Cgroup(e.to_string())),
        Err(e) => {
            warn!(
                job = l.job_id,
                "cannot make the job's cgroup ({e}); tracking it by process group"
            );
            Ok(None)
        }
    }
}

fn killpg(pgid: i32, sig: i32) -> bool {
    if pgid <= 1 {
        return false;
    }
    // SAFETY: kill(2) with a negative pid addresses a process group.
    unsafe { libc::kill(-pgid, sig) == 0 }
}

/// Launch a batch script (`LaunchBatch`). Answers once it has been spawned.
/// Jobs told to end before their launch arrived here (the two requests
/// race), by (node, job): their launch is refused.
type EarlyKey = (String, JobId, i64);

static ENDED_EARLY: std::sync::LazyLock<Mutex<BTreeMap<EarlyKey, std::time::Instant>>> =
    std::sync::LazyLock::new(|| Mutex::new(BTreeMap::new()));

fn ended_early() -> std::sync::MutexGuard<'static, BTreeMap<EarlyKey, std::time::Instant>> {
    ENDED_EARLY.lock().unwrap_or_else(|p| p.into_inner())
}

pub async fn launch(ctx: &Arc<Ctx>, l: BatchLaunch) -> Response {
    let id = l.job_id;
    let l_start = l.start_time;
    {
        let mut early = ended_early();
        early.retain(|_, t| t.elapsed() < Duration::from_secs(600));
        if early
            .remove(&(ctx.node.clone(), id, l.start_time))
            .is_some()
        {
            info!(job = id, "launch of a job already terminated here refused");
            return rpc_error(
                SlurmError::AlreadyDone,
                format!("job {id} was terminated before its launch arrived"),
            );
        }
    }
    match ctx.jobs.begin_launch(id, l_start) {
        Begin::New => {}
        // A repeated request for a run this node has or had.
        Begin::Again | Begin::Busy(Phase::Launching | Phase::Running) => {
            info!(
                job = id,
                "launch sent again for a run this node has or had: nothing to do"
            );
            return Response::Ok;
        }
        Begin::Busy(p) => {
            return rpc_error(
                SlurmError::AlreadyDone,
                format!("job {id} is still cleaning up on this node ({p:?})"),
            )
        }
    }
    if !l.alloc.nodes.is_empty() && !l.alloc.nodes.iter().any(|n| *n == ctx.node) {
        warn!(
            job = id,
            "launch request for a job not allocated to {}", ctx.node
        );
    }
    let info = ScriptInfo {
        gid: l.gid,
        user: l.user_name.clone(),
        partition: l.partition.clone(),
        account: l.account.clone(),
        nodelist: slurm_common::hostlist::compress(&l.alloc.nodes),
    };
    if let Some(path) = ctx.conf().prolog.clone() {
        let env = script_env(ctx, id, Some(l.uid), Some(&info));
        if let Err(e) = prolog::run(prolog::Kind::Prolog, &path, &env, script_timeout(ctx)).await {
            ctx.jobs.abort_launch(id);
            error!(job = id, "{e}");
            return rpc_error(SlurmError::PrologFailed, e);
        }
    }
    let start_time = crate::now();
    let c2 = ctx.clone();
    let uid = l.uid;
    let prepared = tokio::task::spawn_blocking(move || {
        let conf = c2.conf();
        let params = launch::LaunchParams {
            node: &c2.node,
            conf_path: &c2.conf_path_str,
            spool: &c2.spool,
            start_time,
            renumber_gpus: c2
                .cgroups
                .as_ref()
                .is_some_and(|m| m.constrains() && m.conf().constrain_devices),
            task_prolog: conf.task_prolog.as_deref(),
            task_epilog: conf.task_epilog.as_deref(),
            epilog_limit: script_timeout(&c2),
        };
        let mut p = launch::prepare(&l, &params)?;
        match job_cgroup(&c2, &l, &mut p) {
            Ok(cg) => Ok((p, cg)),
            Err(e) => {
                let _ = std::fs::remove_dir_all(&p.job_dir);
                Err(e)
            }
        }
    })
    .await;
    let (prepared, cgroup) = match prepared {
        Ok(Ok(p)) => p,
        Ok(Err(e)) => {
            ctx.jobs.abort_launch(id);
            error!(job = id, "launch failed: {e}");
            let code = match e {
                launch::LaunchError::UnknownUser(_) | launch::LaunchError::Nul(_) => {
                    SlurmError::InvalidRequest
                }
                _ => SlurmError::InternalError,
            };
            return rpc_error(code, e.to_string());
        }
        Err(e) => {
            ctx.jobs.abort_launch(id);
            return rpc_error(
                SlurmError::InternalError,
                format!("launch task failed: {e}"),
            );
        }
    };
    let job_dir = prepared.job_dir.clone();
    let (stdout, user) = (prepared.stdout.clone(), prepared.user_name.clone());
    let stderr = prepared.stderr.clone();
    let epilogs = prepared.epilogs.clone();
    let drop_cgroup = |cg: &Option<JobCgroup>| {
        if let (Some(m), Some(jc)) = (&ctx.cgroups, cg) {
            let _ = m.remove_job(jc);
        }
    };
    // Saved before the spawn, pid unknown: a daemon killed from here on
    // finds the job at start-up and, from the launch record, whether its
    // script runs (see `adopt`).
    let mut state = StateFile {
        job_id: id,
        pid: 0,
        start_ticks: 0,
        job_dir: job_dir.clone(),
        status: None,
        cgroup: cgroup.clone(),
        start_time: l_start,
        uid,
        stderr: Some(stderr),
        env: Some(info),
    };
    write_state(&ctx.state_dir, &state);
    let forget = || {
        drop_cgroup(&cgroup);
        let _ = std::fs::remove_file(state_path(&ctx.state_dir, id));
        let _ = std::fs::remove_file(launch::launch_record(&ctx.state_dir, id));
    };
    // On a blocking thread: the spawn returns once the child has exec'd,
    // and a child opening its user's FIFO as its output waits for a reader
    // (as Slurm's slurmstepd would): that holds one thread, never the
    // daemon's workers (heartbeats, other jobs). The thread lives until the
    // exec, so the child's death signal (tied to the forking thread) holds
    // until it commits.
    let record = launch::launch_record(&ctx.state_dir, id);
    let spawned = tokio::task::spawn_blocking(move || launch::spawn(prepared, &record))
        .await
        .unwrap_or_else(|e| {
            Err(launch::LaunchError::Spawn(std::io::Error::other(format!(
                "the launch thread failed: {e}"
            ))))
        });
    let child = match spawned {
        Ok(c) => c,
        Err(e) => {
            forget();
            ctx.jobs.abort_launch(id);
            error!(job = id, "launch failed: {e}");
            return rpc_error(SlurmError::InternalError, e.to_string());
        }
    };
    let Some(pid) = child.id().map(|p| p as i32) else {
        forget();
        ctx.jobs.abort_launch(id);
        return rpc_error(
            SlurmError::InternalError,
            "the batch script vanished at once",
        );
    };
    let (tx, rx) = watch::channel(false);
    ctx.jobs
        .set_running(id, (pid, uid), rx, cgroup.clone().map(Arc::new), l_start);
    // Suspended before its launch got here (gang scheduling, preemption).
    {
        let c = ctx.clone();
        let run = Some(l_start);
        let _ = tokio::task::spawn_blocking(move || apply_wanted(&c, id, run)).await;
    }
    state.pid = pid;
    state.start_ticks = crate::sysinfo::proc_start(pid).map(|(t, _)| t).unwrap_or(0);
    write_state(&ctx.state_dir, &state);
    // The state file has the pid now: the record has served.
    let _ = std::fs::remove_file(launch::launch_record(&ctx.state_dir, id));
    info!(job = id, pid, user = %user, output = %stdout, "launched batch script");
    tokio::spawn(wait_child(ctx.clone(), child, state, tx, epilogs));
    Response::Ok
}

fn write_state(dir: &Path, s: &StateFile) {
    let path = state_path(dir, s.job_id);
    let tmp = path.with_extension("tmp");
    let res = serde_json::to_vec(s)
        .map_err(std::io::Error::other)
        .and_then(|b| std::fs::write(&tmp, b))
        .and_then(|()| std::fs::rename(&tmp, &path));
    if let Err(e) = res {
        warn!(
            job = s.job_id,
            "cannot save job state {}: {e}",
            path.display()
        );
    }
}

async fn wait_child(
    ctx: Arc<Ctx>,
    mut child: tokio::process::Child,
    mut state: StateFile,
    tx: watch::Sender<bool>,
    epilogs: Option<crate::taskscript::Epilogs>,
) {
    let status = match child.wait().await {
        Ok(s) => s.into_raw(),
        Err(e) => {
            error!(
                job = state.job_id,
                "waiting for the batch script failed: {e}"
            );
            poll_until_gone(state.pid, None).await;
            0
        }
    };
    if let Some(e) = epilogs {
        e.run(state.job_id).await;
    }
    state.status = Some(status);
    finish(ctx, state, true, tx).await;
}

/// Poll until `pid` (with start time `start`, when known) is gone or a zombie.
async fn poll_until_gone(pid: i32, start: Option<u64>) {
    loop {
        match crate::sysinfo::proc_start(pid) {
            None => return,
            Some((_, 'Z' | 'X')) => return,
            Some((t, _)) if start.is_some_and(|s| s != t) => return,
            Some(_) => {}
        }
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
}

/// Kill what is left of a job: its process group and its cgroup.
async fn kill_rest(id: JobId, pgid: i32, cgroup: Option<JobCgroup>) {
    killpg(pgid, libc::SIGKILL);
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    loop {
        let cg = cgroup.clone();
        let left = tokio::task::spawn_blocking(move || {
            let mut left = crate::sysinfo::group_members(pgid);
            if let Some(jc) = cg {
                left.extend(jc.kill_all(Duration::from_millis(500)));
            }
            left
        })
        .await
        .unwrap_or_default();
        if left.is_empty() {
            return;
        }
        if tokio::time::Instant::now() >= deadline {
            warn!(
                job = id,
                "processes {left:?} survive SIGKILL; reporting the job clean anyway"
            );
            return;
        }
        killpg(pgid, libc::SIGKILL);
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Slurm's notice of OOM kills, appended to the job's error file.
fn note_oom(path: &str, uid: u32, gid: u32, job: JobId, kills: u64) {
    note_in_stderr(
        path,
        uid,
        gid,
        &format!(
            "slurmstepd: error: Detected {kills} oom_kill event{} in StepId={job}.batch. Some of the step tasks have been OOM Killed.",
            if kills == 1 { "" } else { "s" }
        ),
    );
}

/// How long a notice may take to reach a job's error file.
const NOTICE_LIMIT: Duration = Duration::from_secs(2);

/// Append `line` to a job's error file, if it is still a regular file, as
/// the job's user: a child process that has become the user (no
/// supplementary groups) opens the path, so root never opens a path the
/// user chose (links, devices, another's files are the user's own rights).
/// A file system that hangs holds this at most [`NOTICE_LIMIT`].
fn note_in_stderr(path: &str, uid: u32, gid: u32, line: &str) {
    use std::os::unix::process::CommandExt;
    let child = std::process::Command::new("/bin/sh")
        .arg("-c")
        .arg("[ -f \"$0\" ] && printf '%s\\n' \"$1\" >> \"$0\"")
        .arg(path)
        .arg(line)
        .env_clear()
        .env("PATH", "/usr/bin:/bin")
        .current_dir("/")
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .gid(gid)
        .uid(uid)
        .spawn();
    let Ok(mut child) = child else { return };
    let deadline = std::time::Instant::now() + NOTICE_LIMIT;
    loop {
        match child.try_wait() {
            Ok(Some(_)) | Err(_) => return,
            Ok(None) if std::time::Instant::now() >= deadline => {
                let _ = child.kill();
                let _ = child.wait();
                return;
            }
            Ok(None) => std::thread::sleep(Duration::from_millis(10)),
        }
    }
}

/// The script has ended (`state.status` set): kill what is left, read the
/// usage and OOM kills, report (unless a previous daemon already did),
/// clean up, report clean.
async fn finish(ctx: Arc<Ctx>, state: StateFile, report: bool, tx: watch::Sender<bool>) {
    let (id, pgid) = (state.job_id, state.pid);
    let _ = tx.send(true);
    ctx.jobs.set_phase(id, Phase::Completing);
    kill_rest(id, pgid, state.cgroup.clone()).await;
    let (usage, oom) = match state.cgroup.clone() {
        Some(jc) => tokio::task::spawn_blocking(move || (jc.usage(), jc.oom_kills()))
            .await
            .unwrap_or_default(),
        None => (Usage::default(), 0),
    };
    if report {
        let status = state.status.unwrap_or(0);
        let (code, sig) = slurm_proto::wait_status_pair(status);
        info!(job = id, status, "batch script ended (exit {code}:{sig})");
        if oom > 0 {
            warn!(
                job = id,
                "{oom} process(es) of the job were killed for running out of memory"
            );
            if let (Some(path), Some(gid)) =
                (state.stderr.clone(), state.env.as_ref().map(|e| e.gid))
            {
                let uid = state.uid;
                let _ =
                    tokio::task::spawn_blocking(move || note_oom(&path, uid, gid, id, oom)).await;
            }
        }
        let usage = (ctx.acct_gather && state.cgroup.is_some()).then_some(usage);
        if let Some(u) = &usage {
            info!(
                job = id,
                cpu_usec = u.cpu_usec,
                user_usec = u.user_usec,
                system_usec = u.system_usec,
                max_rss = u.max_rss_bytes,
                "job usage"
            );
        }
        ctx.outbox.push(OutMsg::BatchComplete {
            job_id: id,
            status,
            oom: oom > 0,
            usage,
            job_start: (state.start_time != 0).then_some(state.start_time),
        });
        write_state(&ctx.state_dir, &state);
    }

    if let Some(jc) = state.cgroup.clone() {
        let c2 = ctx.clone();
        let removed = tokio::task::spawn_blocking(move || match &c2.cgroups {
            Some(m) => m.remove_job(&jc),
            None => jc.remove(),
        })
        .await;
        if let Ok(Err(e)) = removed {
            warn!(job = id, "cannot remove the job's cgroup: {e}");
        }
    }
    let (dir, job_dir) = (ctx.state_dir.clone(), state.job_dir);
    let _ = tokio::task::spawn_blocking(move || {
        if let Err(e) = std::fs::remove_dir_all(&job_dir) {
            if e.kind() != std::io::ErrorKind::NotFound {
                warn!(job = id, "cannot remove {}: {e}", job_dir.display());
            }
        }
        let _ = std::fs::remove_file(state_path(&dir, id));
        let _ = std::fs::remove_file(launch::launch_record(&dir, id));
    })
    .await;
    epilog(&ctx, id, Some(state.uid), state.env.as_ref()).await;
    ctx.jobs.set_phase(id, Phase::Cleaned);
    forget_wanted(&ctx.node, id);
    ctx.outbox.push(OutMsg::JobCleaned {
        job_id: id,
        job_start: (state.start_time != 0).then_some(state.start_time),
    });
    debug!(job = id, "job cleaned up");
}

/// Whether signals other than SIGKILL go to the whole cgroup.
fn signal_children(ctx: &Ctx) -> bool {
    ctx.cgroups
        .as_ref()
        .is_some_and(|m| m.conf().signal_children_processes)
}

/// Deliver `signal` to a job's processes (`SignalJob`).
pub fn signal(ctx: &Ctx, id: JobId, signal: i32) -> Response {
    if !(0..=64).contains(&signal) {
        return rpc_error(
            SlurmError::InvalidRequest,
            format!("invalid signal {signal}"),
        );
    }
    match ctx.jobs.target(id) {
        None => Response::Error(SlurmError::InvalidJobId.into()),
        Some(Target {
            phase: Phase::Running,
            pgid,
            cgroup,
            ..
        }) => {
            info!(job = id, signal, "signalling job");
            killpg(pgid, signal);
            if let Some(jc) = cgroup {
                if signal == libc::SIGKILL || (signal != 0 && signal_children(ctx)) {
                    jc.signal(signal);
                }
            }
            Response::Ok
        }
        // Not started yet, or already ending: nothing to signal.
        Some(_) => Response::Ok,
    }
}

/// Where a suspend/resume request stands: the job's run it is for (its
/// start time), the controller run that sent it, and its place among that
/// controller's requests.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Order {
    pub run: Option<i64>,
    pub epoch: u64,
    pub seq: u64,
}

/// What was last asked for a job on a node.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Want {
    order: Order,
    suspended: bool,
}

/// The latest suspend/resume asked for each job on each node daemon of
/// this process.
type Wanted = HashMap<(String, JobId), Want>;

static WANTED: std::sync::LazyLock<Mutex<Wanted>> =
    std::sync::LazyLock::new(|| Mutex::new(HashMap::new()));

fn wanted() -> std::sync::MutexGuard<'static, Wanted> {
    WANTED.lock().unwrap_or_else(|p| p.into_inner())
}

/// Stop (`suspend`) or continue every process of a job on this node
/// (`SuspendJobHere`, for `scontrol suspend|resume`, preemption and gang
/// scheduling). Requests for an earlier run of the job, or older than one
/// the same controller run sent for this run, are ignored (a restarted
/// controller's supersede the old one's); the wanted
/// state is kept for processes the run starts here later (a launch or step
/// still on its way). A suspend sent again is applied again (freezing is
/// idempotent); a resume sent again is not (it would wake processes
/// stopped on purpose). Blocks briefly while the kernel freezes; requests
/// are applied one at a time, in the order they are taken.
pub fn suspend(ctx: &Ctx, id: JobId, suspend: bool, order: Order) -> Response {
    let mut w = wanted();
    let key = (ctx.node.clone(), id);
    let new = Want {
        order,
        suspended: suspend,
    };
    if let Some(old) = w.get(&key) {
        let (o, n) = (old.order, order);
        let older_run = matches!((n.run, o.run), (Some(r), Some(p)) if r < p);
        let same_run = n.run == o.run || n.run.is_none() || o.run.is_none();
        if older_run || (same_run && n.epoch == o.epoch && n.seq < o.seq) {
            debug!(job = id, seq = n.seq, "stale suspend request ignored");
            return Response::Ok;
        }
        if *old == new && !suspend {
            return Response::Ok;
        }
    }
    w.insert(key, new);
    // Applied under the lock: requests land in the order they were taken.
    apply_suspend(ctx, id, suspend);
    Response::Ok
}

/// Whether the job's run `run` here is to stay stopped (a step arriving
/// now waits until it may go on).
pub fn wanted_stopped(node: &str, id: JobId, run: Option<i64>) -> bool {
    wanted()
        .get(&(node.to_string(), id))
        .is_some_and(|w| w.suspended && same_run(w.order.run, run))
}

/// Put a job's run that just started processes here in the state last
/// asked for.
pub fn apply_wanted(ctx: &Ctx, id: JobId, run: Option<i64>) {
    let w = wanted();
    if w.get(&(ctx.node.clone(), id))
        .is_some_and(|w| w.suspended && same_run(w.order.run, run))
    {
        apply_suspend(ctx, id, true);
    }
}

/// Whether two run stamps may be the same run (unknown matches any).
fn same_run(a: Option<i64>, b: Option<i64>) -> bool {
    a.is_none() || b.is_none() || a == b
}

/// Forget what was asked for a job that is ending or has left this node.
pub fn forget_wanted(node: &str, id: JobId) {
    wanted().remove(&(node.to_string(), id));
}

/// Freeze or thaw the job's cgroup when it has one, else SIGSTOP or
/// SIGCONT its batch script and step tasks.
fn apply_suspend(ctx: &Ctx, id: JobId, suspend: bool) {
    let cgroup = any_cgroup(ctx, id);
    let mut pgids = crate::steps::job_pgids(id);
    if let Some(Target {
        phase: Phase::Running,
        pgid,
        ..
    }) = ctx.jobs.target(id)
    {
        pgids.push(pgid);
    }
    if pgids.is_empty() && cgroup.is_none() {
        debug!(job = id, suspend, "nothing of the job here yet");
        return;
    }
    if let Some(m) = &ctx.cgroups {
        m.mark_stopped(id, suspend);
    }
    let frozen = cgroup.as_ref().is_some_and(|jc| jc.set_frozen(suspend));
    if !frozen {
        let sig = if suspend {
            libc::SIGSTOP
        } else {
            libc::SIGCONT
        };
        for p in &pgids {
            killpg(*p, sig);
        }
        if let Some(jc) = &cgroup {
            jc.signal(sig);
        }
    }
    info!(
        job = id,
        suspend,
        frozen,
        "job {}",
        if suspend { "suspended" } else { "resumed" }
    );
}

/// The job's cgroup here, whether its batch script or only steps run here.
fn any_cgroup(ctx: &Ctx, id: JobId) -> Option<Arc<JobCgroup>> {
    ctx.jobs
        .cgroup(id)
        .or_else(|| crate::steps::job_cgroup(&ctx.node, id))
}

/// Thaw a job's cgroup (a suspended job being ended must see its signals).
pub fn thaw(ctx: &Ctx, id: JobId) {
    if let Some(jc) = any_cgroup(ctx, id) {
        jc.set_frozen(false);
    }
}

/// Runs already told why they ended, by (node, job, run start): a
/// terminate sent again says nothing twice.
static TOLD: std::sync::LazyLock<Mutex<std::collections::HashSet<(String, JobId, i64)>>> =
    std::sync::LazyLock::new(Default::default);

/// Why the controller ends a job's batch script running here, to be told
/// in its error file once its processes are gone (`*** JOB 5 ON n1
/// CANCELLED AT ... ***`; written earlier, the script's own writes at its
/// file offset could cover it): once per run, only for the run being
/// ended (`start_time`).
pub struct EndNotice {
    path: String,
    uid: u32,
    gid: u32,
    line: String,
}

/// The error file of job `id`'s batch script running here, its user and
/// group, and the run (start time): (path, uid, gid, run).
async fn batch_stderr(ctx: &Ctx, id: JobId) -> Option<(String, u32, u32, i64)> {
    if ctx.jobs.phase(id) != Some(Phase::Running) {
        return None;
    }
    let path = state_path(&ctx.state_dir, id);
    tokio::task::spawn_blocking(move || {
        let st: StateFile = std::fs::read(&path)
            .ok()
            .and_then(|b| serde_json::from_slice(&b).ok())?;
        let StateFile {
            uid,
            stderr: Some(err),
            status: None,
            env: Some(info),
            start_time: run,
            ..
        } = st
        else {
            return None;
        };
        Some((err, uid, info.gid, run))
    })
    .await
    .ok()
    .flatten()
}

/// The notice for job `id` ending for `cause`, if its script runs here.
pub async fn end_notice(
    ctx: &Ctx,
    id: JobId,
    cause: slurm_proto::TermCause,
    start_time: Option<i64>,
) -> Option<EndNotice> {
    let when = slurm_common::timefmt::format_timestamp(crate::now());
    let line = cause.notice(&format!("JOB {id}"), &ctx.node, &when)?;
    let (path, uid, gid, run) = batch_stderr(ctx, id).await?;
    if start_time.is_some_and(|s| run != 0 && s != run) {
        return None;
    }
    let mut told = TOLD.lock().unwrap_or_else(|p| p.into_inner());
    if told.len() > 10_000 {
        told.clear();
    }
    told.insert((ctx.node.clone(), id, run))
        .then_some(EndNotice {
            path,
            uid,
            gid,
            line,
        })
}

/// `scontrol notify` (`NotifyJob`): the job's batch script running here
/// gets `slurmstepd: error: MESSAGE` on its error file, as Slurm's (written
/// as the job's user); without one, its steps' sruns get `srun: MESSAGE`.
pub async fn notify(ctx: &Ctx, id: JobId, message: &str) -> Response {
    // A launch in progress (the controller has the job running already)
    // finishes first (bounded).
    let mut waited = 0;
    while ctx.jobs.phase(id) == Some(Phase::Launching) && waited < 200 {
        tokio::time::sleep(Duration::from_millis(50)).await;
        waited += 1;
    }
    if let Some((path, uid, gid, _)) = batch_stderr(ctx, id).await {
        let line = format!("slurmstepd: error: {message}");
        let _ = tokio::task::spawn_blocking(move || note_in_stderr(&path, uid, gid, &line)).await;
        info!(job = id, "job notified (batch script's error file)");
        return Response::Ok;
    }
    match crate::steps::notify(id, &format!("srun: {message}\n")) {
        0 => rpc_error(
            SlurmError::Disabled,
            format!("job {id} has neither a batch script nor a step's srun to tell here"),
        ),
        n => {
            info!(job = id, "job notified ({n} srun(s))");
            Response::Ok
        }
    }
}

/// Write `n` (at most two seconds of the caller's time).
pub async fn tell_ended(n: EndNotice) {
    let _ =
        tokio::task::spawn_blocking(move || note_in_stderr(&n.path, n.uid, n.gid, &n.line)).await;
}

/// End a job on this node (`TerminateJob`): SIGCONT and SIGTERM to its
/// processes, SIGKILL after `kill_wait` seconds. A job not running here
/// (a node of a multi-node job without the script) is reported clean at once.
pub async fn terminate(ctx: Arc<Ctx>, id: JobId, kill_wait: u32, start_time: Option<i64>) {
    // A launch in progress finishes first (bounded).
    let mut waited = 0;
    while ctx.jobs.phase(id) == Some(Phase::Launching) && waited < 600 {
        tokio::time::sleep(Duration::from_millis(50)).await;
        waited += 1;
    }
    match ctx.jobs.target(id) {
        None => {
            debug!(
                job = id,
                "terminate: job not running here; reporting it clean"
            );
            if let Some(st) = start_time {
                ended_early().insert((ctx.node.clone(), id, st), std::time::Instant::now());
            }
            // Steps may have run here without the batch script.
            let here = crate::steps::end_job(&ctx, id).await;
            epilog(
                &ctx,
                id,
                here.as_ref().map(|h| h.0),
                here.as_ref().map(|h| &h.1),
            )
            .await;
            ctx.outbox.push(OutMsg::JobCleaned {
                job_id: id,
                job_start: start_time,
            });
        }
        Some(Target {
            phase: Phase::Running,
            pgid,
            exited,
            cgroup,
        }) => {
            info!(job = id, kill_wait, "terminating job");
            killpg(pgid, libc::SIGCONT);
            killpg(pgid, libc::SIGTERM);
            if let (Some(jc), true) = (&cgroup, signal_children(&ctx)) {
                jc.signal(libc::SIGCONT);
                jc.signal(libc::SIGTERM);
            }
            let ended = match exited {
                Some(mut rx) => tokio::time::timeout(
                    Duration::from_secs(kill_wait.into()),
                    rx.wait_for(|done| *done),
                )
                .await
                .is_ok(),
                None => false,
            };
            if !ended && ctx.jobs.phase(id) == Some(Phase::Running) {
                // A task epilog still running is ended with the job.
                crate::taskscript::kill_epilogs(id);
                info!(job = id, "job outlived KillWait; sending SIGKILL");
                killpg(pgid, libc::SIGKILL);
                if let Some(jc) = cgroup {
                    jc.signal(libc::SIGKILL);
                }
            }
        }
        // Already ending: its waiter reports as usual.
        Some(_) => {}
    }
}

/// A job whose daemon stopped during its launch, before its script was
/// committed to run (no pid in its launch record): it never ran here and
/// never will. Its leftovers go; not being among the daemon's jobs, the
/// controller finds it lost and requeues it (or ends it NODE_FAIL).
fn drop_unlaunched(ctx: &Ctx, st: &StateFile, path: &Path) {
    warn!(
        job = st.job_id,
        "slurmd stopped during the job's launch, before its script ran: the job did not start here"
    );
    if let Some(jc) = &st.cgroup {
        let left = jc.kill_all(Duration::from_secs(2));
        if !left.is_empty() {
            warn!(
                job = st.job_id,
                "processes left in the job's cgroup: {left:?}"
            );
        }
        let removed = match &ctx.cgroups {
            Some(m) => {
                m.adopt(jc);
                m.remove_job(jc)
            }
            None => jc.remove(),
        };
        if let Err(e) = removed {
            warn!(job = st.job_id, "cannot remove the job's cgroup: {e}");
        }
    }
    let _ = std::fs::remove_dir_all(&st.job_dir);
    let _ = std::fs::remove_file(path);
    let _ = std::fs::remove_file(launch::launch_record(&ctx.state_dir, st.job_id));
}

/// The script a launch record names, if it is still the one this job's
/// launch committed: a process group leader running as the job's user,
/// started before the record was written (a pid reused since started
/// later). Its start time in clock ticks.
fn committed_script(st: &StateFile, pid: i32, written: std::time::SystemTime) -> Option<u64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let (pgrp, state, ticks) = crate::sysinfo::parse_proc_stat(&stat)?;
    let written = written
        .duration_since(std::time::UNIX_EPOCH)
        .ok()?
        .as_secs() as i64;
    (pgrp == pid
        && state != 'Z'
        && state != 'X'
        && crate::sysinfo::proc_uid(pid) == Some(st.uid)
        && crate::sysinfo::proc_start_secs(ticks) <= written + 1)
        .then_some(ticks)
}

/// Re-adopt the jobs a previous daemon left running (from the state files);
/// report those that ended meanwhile. Call once at start-up.
pub fn adopt(ctx: &Arc<Ctx>) {
    let Ok(rd) = std::fs::read_dir(&ctx.state_dir) else {
        return;
    };
    for e in rd.flatten() {
        let path = e.path();
        match path.extension().and_then(|x| x.to_str()) {
            Some("json") => {}
            // Read with its job's state file (and removed with it).
            Some("launched") if path.with_extension("json").exists() => continue,
            _ => {
                let _ = std::fs::remove_file(&path);
                continue;
            }
        }
        let st: StateFile = match std::fs::read(&path)
            .ok()
            .and_then(|b| serde_json::from_slice(&b).ok())
        {
            Some(s) => s,
            None => {
                warn!("ignoring malformed job state file {}", path.display());
                let _ = std::fs::remove_file(&path);
                continue;
            }
        };
        let mut st = st;
        if st.pid == 0 && st.status.is_none() {
            // Saved during a launch: the launch record says whether the
            // script was committed to run.
            let record = launch::launch_record(&ctx.state_dir, st.job_id);
            match launch::read_launch_record(&record) {
                Some((pid, written)) => {
                    match committed_script(&st, pid, written) {
                        Some(ticks) => {
                            st.pid = pid;
                            st.start_ticks = ticks;
                        }
                        // It ran and ended while the daemon was down (its
                        // pid may be another's now: -1, nothing is
                        // signalled by it).
                        None => st.pid = -1,
                    }
                    write_state(&ctx.state_dir, &st);
                    let _ = std::fs::remove_file(&record);
                }
                None => {
                    drop_unlaunched(ctx, &st, &path);
                    continue;
                }
            }
        }
        let alive = st.pid > 1
            && matches!(crate::sysinfo::proc_start(st.pid),
                Some((t, s)) if t == st.start_ticks && s != 'Z' && s != 'X');
        let (tx, rx) = watch::channel(false);
        if let (Some(m), Some(jc)) = (&ctx.cgroups, &st.cgroup) {
            m.adopt(jc);
        }
        let cg = st.cgroup.clone().map(Arc::new);
        ctx.jobs
            .set_running(st.job_id, (st.pid, st.uid), rx, cg, st.start_time);
        let ctx2 = ctx.clone();
        let report = st.status.is_none();
        if report && alive {
            info!(job = st.job_id, pid = st.pid, "re-adopted running job");
        } else if report {
            warn!(
                job = st.job_id,
                "job ended while slurmd was down; its exit status is unknown (reported as 0)"
            );
        } else {
            info!(job = st.job_id, "finishing the cleanup of an ended job");
        }
        tokio::spawn(async move {
            if report && alive {
                poll_until_gone(st.pid, Some(st.start_ticks)).await;
                warn!(
                    job = st.job_id,
                    "adopted job ended; its exit status is unknown (reported as 0)"
                );
            }
            if report {
                st.status = Some(0);
            }
            finish(ctx2, st, report, tx).await;
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The controller sends a launch again when its first answer was lost
    /// or late (a busy node): the run must neither start twice nor be
    /// refused (a refusal requeues a job that ran).
    #[test]
    fn a_launch_sent_again_is_the_same_run_until_long_after_it_ended() {
        let t = JobTable::default();
        assert_eq!(t.begin_launch(7, 100), Begin::New);
        assert_eq!(t.begin_launch(7, 100), Begin::Again, "while launching");
        let (_tx, rx) = watch::channel(false);
        t.set_running(7, (4242, 1000), rx, None, 100);
        assert_eq!(t.begin_launch(7, 100), Begin::Again, "while running");
        t.set_phase(7, Phase::Completing);
        assert_eq!(t.begin_launch(7, 100), Begin::Again, "while completing");
        // Another run of the job (requeued) waits for this one's cleanup.
        assert_eq!(t.begin_launch(7, 160), Begin::Busy(Phase::Completing));
        t.set_phase(7, Phase::Cleaned);
        assert_eq!(
            t.begin_launch(7, 100),
            Begin::Again,
            "cleaned, not yet told"
        );
        t.remove_cleaned(7);
        assert!(t.ids().is_empty());
        assert_eq!(t.begin_launch(7, 100), Begin::Again, "after it ended here");
        assert!(t.ids().is_empty(), "nothing reserved for a run that ended");
        // The next run is a new one.
        assert_eq!(t.begin_launch(7, 160), Begin::New);
    }

    #[test]
    fn runs_ended_long_ago_are_forgotten() {
        let t = JobTable::default();
        let long_ago = std::time::Instant::now()
            .checked_sub(ENDED_KEPT + Duration::from_secs(1))
            .expect("an instant in the past");
        t.ended().insert((7, 100), long_ago);
        assert_eq!(t.begin_launch(7, 100), Begin::New);
        // Forgotten from the list at the next job's end.
        t.set_phase(7, Phase::Cleaned);
        t.remove_cleaned(7);
        assert_eq!(t.ended().len(), 1);
        assert!(t
            .ended()
            .get(&(7, 100))
            .is_some_and(|i| i.elapsed() < ENDED_KEPT));
    }
}
