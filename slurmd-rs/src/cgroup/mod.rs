//! Control groups for jobs (`ProctrackType=proctrack/cgroup`,
//! `TaskPlugin=task/cgroup`), cgroup v1 and v2, by writing the cgroup file
//! system directly.
//!
//! Layout, under `CgroupMountpoint` (in each v1 hierarchy used: `freezer`,
//! `cpuset`, `memory`, `cpuacct`, `devices`):
//! `slurm_<node>/uid_<uid>/job_<id>/step_batch` (and `step_<n>` for `srun`
//! steps). The node name keeps several daemons on one host apart; a daemon
//! holds an `flock` on its top directory, and a second daemon for the same
//! node name on the host (concurrent test clusters) takes `slurm_<node>.1`,
//! `.2`... instead. Where a job's directories are is saved with the job
//! (see [`JobCgroup`]), so a restarted daemon finds them whatever it took.
//!
//! Processes join before they exec: the child writes its pid into each
//! step's `cgroup.procs` (see `launch::exec`). Limits sit on the job
//! directory: `cpuset.cpus` (ConstrainCores), `memory.limit_in_bytes` /
//! `memory.max` and the swap limit (ConstrainRAMSpace/ConstrainSwapSpace),
//! and, for GPUs not given to the job (ConstrainDevices), `devices.deny`
//! on v1 or an eBPF device program on v2 ([`bpf`]).
//!
//! Killing a job kills every process in its directories: v2 writes
//! `cgroup.kill`; v1 freezes the job, sends SIGKILL to every pid and thaws;
//! both then check that nothing is left. Paths are injectable (the mount
//! point comes from cgroup.conf) so tests run against fake trees.

pub mod bpf;
pub mod conf;
pub mod cpus;

use crate::gres::GresDevice;
use crate::hw::{format_cpu_list, parse_cpu_list};
use conf::{CgroupConf, PluginChoice};
use cpus::CpuBook;
use serde::{Deserialize, Serialize};
use slurm_proto::JobId;
use std::fs::File;
use std::io::{self, Write};
use std::os::fd::AsRawFd;
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// The v1 hierarchies used, in the order jobs join them. The first one
/// mounted is where processes are counted and killed.
pub const V1_CONTROLLERS: &[&str] = &["freezer", "cpuset", "memory", "cpuacct", "devices"];
/// Controllers enabled for jobs on v2.
pub const V2_CONTROLLERS: &[&str] = &["cpuset", "cpu", "memory", "pids"];

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum Version {
    V1,
    V2,
}

#[derive(Debug, thiserror::Error)]
pub enum CgroupError {
    #[error("no cgroup file system at {0} (neither cgroup.controllers nor v1 hierarchies)")]
    NotMounted(PathBuf),
    #[error("CgroupPlugin=cgroup/{want} but {mount} is not a cgroup {want} file system")]
    WrongVersion { want: &'static str, mount: PathBuf },
    #[error("cannot {what} {path}: {source}")]
    Io {
        what: &'static str,
        path: PathBuf,
        source: io::Error,
    },
    #[error("{0} is still in use by live processes of another job")]
    Busy(PathBuf),
    #[error("every slurm_{0} directory is locked by another daemon")]
    Locked(String),
}

fn io_err(what: &'static str, path: &Path) -> impl FnOnce(io::Error) -> CgroupError {
    let path = path.to_path_buf();
    move |source| CgroupError::Io { what, path, source }
}

/// Write a control file (created in fake trees, where nothing is there).
fn write(path: &Path, value: &str) -> Result<(), CgroupError> {
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .open(path)
        .map_err(io_err("open", path))?;
    f.write_all(value.as_bytes()).map_err(io_err("write", path))
}

fn read(path: &Path) -> Option<String> {
    std::fs::read_to_string(path).ok()
}

/// `key value` lines (`memory.events`, `cpu.stat`, `memory.oom_control`).
fn keyed(text: &str, key: &str) -> Option<u64> {
    text.lines().find_map(|l| {
        let (k, v) = l.split_once(char::is_whitespace)?;
        (k == key).then(|| v.trim().parse().ok()).flatten()
    })
}

fn mkdir(path: &Path) -> Result<bool, CgroupError> {
    match std::fs::create_dir(path) {
        Ok(()) => Ok(true),
        Err(e) if e.kind() == io::ErrorKind::AlreadyExists => Ok(false),
        Err(e) => Err(CgroupError::Io {
            what: "create",
            path: path.to_path_buf(),
            source: e,
        }),
    }
}

/// Every directory under `dir` (itself included), deepest first.
fn subtree(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    fn walk(d: &Path, out: &mut Vec<PathBuf>, depth: u32) {
        if depth > 16 {
            return;
        }
        if let Ok(rd) = std::fs::read_dir(d) {
            for e in rd.flatten() {
                if e.file_type().is_ok_and(|t| t.is_dir()) {
                    walk(&e.path(), out, depth + 1);
                }
            }
        }
        out.push(d.to_path_buf());
    }
    walk(dir, &mut out, 0);
    out
}

/// Live processes listed in `cgroup.procs` of `dir` and every directory
/// below it (the kernel lists no dead ones; a fake tree may).
pub fn pids_under(dir: &Path) -> Vec<i32> {
    let mut out: Vec<i32> = subtree(dir)
        .iter()
        .filter_map(|d| read(&d.join("cgroup.procs")))
        .flat_map(|t| {
            t.split_whitespace()
                .filter_map(|p| p.parse::<i32>().ok())
                .filter(|p| *p > 1)
                .collect::<Vec<_>>()
        })
        .filter(|&p| matches!(crate::sysinfo::proc_start(p), Some((_, s)) if s != 'Z' && s != 'X'))
        .collect();
    out.sort_unstable();
    out.dedup();
    out
}

/// Remove `dir` and its subdirectories, deepest first, retrying briefly
/// while the kernel still counts exiting processes.
fn remove_tree(dir: &Path) -> Result<(), CgroupError> {
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        let mut last = None;
        for d in subtree(dir) {
            if let Err(e) = std::fs::remove_dir(&d) {
                if e.kind() != io::ErrorKind::NotFound {
                    last = Some((d, e));
                }
            }
        }
        let Some((d, e)) = last else { return Ok(()) };
        if Instant::now() >= deadline {
            return Err(CgroupError::Io {
                what: "remove",
                path: d,
                source: e,
            });
        }
        if e.raw_os_error() == Some(libc::ENOTEMPTY) && !is_cgroupfs(&d) {
            // A fake tree holds regular files: clear them, it is ours.
            for sub in subtree(dir) {
                if let Ok(rd) = std::fs::read_dir(&sub) {
                    for f in rd.flatten() {
                        if f.file_type().is_ok_and(|t| t.is_file()) {
                            let _ = std::fs::remove_file(f.path());
                        }
                    }
                }
            }
            continue;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Whether `p` is on a real cgroup file system.
fn is_cgroupfs(p: &Path) -> bool {
    use std::os::unix::ffi::OsStrExt;
    let Ok(c) = std::ffi::CString::new(p.as_os_str().as_bytes()) else {
        return false;
    };
    // SAFETY: statfs fills the zeroed struct; the path is NUL-terminated.
    let mut st: libc::statfs = unsafe { std::mem::zeroed() };
    if unsafe { libc::statfs(c.as_ptr(), &mut st) } != 0 {
        return false;
    }
    const CGROUP_SUPER_MAGIC: i64 = 0x0027_e0eb;
    const CGROUP2_SUPER_MAGIC: i64 = 0x6367_7270;
    matches!(st.f_type as i64, CGROUP_SUPER_MAGIC | CGROUP2_SUPER_MAGIC)
}

/// Which interface the file system at `mount` offers.
pub fn detect_version(mount: &Path) -> Option<Version> {
    if mount.join("cgroup.controllers").is_file() {
        return Some(Version::V2);
    }
    V1_CONTROLLERS
        .iter()
        .any(|c| mount.join(c).join("cgroup.procs").is_file())
        .then_some(Version::V1)
}

/// A job's share of the node.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JobSpec {
    pub job_id: JobId,
    pub uid: u32,
    /// CPUs allocated on this node.
    pub cpus: u32,
    /// Memory allocated on this node, MiB (0 = none given).
    pub mem_mib: u64,
    /// Indices of the GPUs given to the job; `None` = unknown (the
    /// controller does not send them yet): none.
    pub gpus: Option<Vec<u32>>,
}

/// A job's usage, read from its cgroup at the end.
pub use slurm_proto::TaskUsage as Usage;

/// Where a job's cgroup is; saved with the job's state.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct JobCgroup {
    pub version: Version,
    pub job_id: JobId,
    /// The job's directory per hierarchy: (controller, path); v2 has one,
    /// named `unified`. The first is where processes are counted.
    pub dirs: Vec<(String, PathBuf)>,
    /// CPUs of the cpuset (empty when cores are not constrained).
    pub cpus: Vec<u32>,
    /// Memory limit in bytes, when constrained.
    pub mem_limit: Option<u64>,
}

impl JobCgroup {
    fn dir(&self, controller: &str) -> Option<&Path> {
        self.dirs
            .iter()
            .find(|(c, _)| c == controller)
            .map(|(_, p)| p.as_path())
    }

    fn track_dir(&self) -> Option<&Path> {
        self.dirs.first().map(|(_, p)| p.as_path())
    }

    /// Create step directory `name` (`step_batch`, `step_0`...) in every
    /// hierarchy; the `cgroup.procs` files a process writes its pid to.
    pub fn create_step(&self, name: &str) -> Result<Vec<PathBuf>, CgroupError> {
        let mut procs = Vec::with_capacity(self.dirs.len());
        for (ctl, job_dir) in &self.dirs {
            let d = job_dir.join(name);
            mkdir(&d)?;
            if ctl == "cpuset" {
                // From the directory just above (a task's: its step's).
                copy_cpuset(d.parent().unwrap_or(job_dir), &d)?;
            }
            procs.push(d.join("cgroup.procs"));
        }
        Ok(procs)
    }

    /// Create step directory `name` holding `want` of the job's CPUs
    /// (`srun --exact`): those the job's other steps here hold least,
    /// first in the job's order; the same as [`create_step`] when `want`
    /// is none or not fewer than the job's, or cores are not confined.
    /// The CPUs its tasks may use (empty: the job's).
    ///
    /// [`create_step`]: JobCgroup::create_step
    pub fn create_step_holding(
        &self,
        name: &str,
        want: Option<u32>,
    ) -> Result<(Vec<PathBuf>, Vec<u32>), CgroupError> {
        let mut mine = Vec::new();
        let want = want.map_or(0, |w| w.max(1) as usize);
        let cpuset_dir = match self.version {
            Version::V1 => self.dir("cpuset"),
            Version::V2 => self.track_dir(),
        };
        if let (Some(dir), true) = (cpuset_dir, want > 0 && want < self.cpus.len()) {
            // Two steps starting at once must not both see the same CPUs
            // free.
            static PICKING: Mutex<()> = Mutex::new(());
            let _g = PICKING.lock().unwrap_or_else(|e| e.into_inner());
            mine = pick_step_cpus(&self.cpus, &siblings_cpus(dir, name), want);
            let d = dir.join(name);
            mkdir(&d)?;
            let list = format_cpu_list(&mine);
            if let Err(e) = write(&d.join("cpuset.cpus"), &list) {
                // (v2 without the cpuset controller below the job: no
                // cpuset others could see, so none of its own.)
                tracing::debug!("step {name}: its CPUs {list} not confined: {e}");
                mine.clear();
            }
        }
        let procs = self.create_step(name)?;
        Ok((procs, mine))
    }

    /// End a step: kill what is left of it and remove its directories.
    pub fn end_step(&self, name: &str) {
        if let Some(t) = self.track_dir() {
            let d = t.join(name);
            let deadline = Instant::now() + Duration::from_secs(5);
            loop {
                let left = pids_under(&d);
                if left.is_empty() || Instant::now() >= deadline {
                    break;
                }
                for p in left {
                    // SAFETY: kill(2) on a pid of the step.
                    unsafe { libc::kill(p, libc::SIGKILL) };
                }
                std::thread::sleep(Duration::from_millis(20));
            }
        }
        for (_, job_dir) in &self.dirs {
            let _ = remove_tree(&job_dir.join(name));
        }
    }

    /// A step that asked its own memory (`srun --mem`): its directory's
    /// limit, where the job's memory is confined.
    pub fn limit_step_memory(&self, step: &str, mib: u64) -> Result<(), CgroupError> {
        let Some(job_limit) = self.mem_limit else {
            return Ok(());
        };
        let bytes = mib.saturating_mul(1 << 20).min(job_limit).to_string();
        // (Only where the job's own memory is limited: a v2 tree without
        // the memory controller below the job limits neither.)
        match self.version {
            Version::V1 => {
                if let Some(d) = self.dir("memory") {
                    write(&d.join(step).join("memory.limit_in_bytes"), &bytes)?;
                }
            }
            Version::V2 => {
                if let Some(d) = self.track_dir().filter(|d| d.join("memory.max").exists()) {
                    write(&d.join(step).join("memory.max"), &bytes)?;
                }
            }
        }
        Ok(())
    }

    /// Remove the job's directories (its processes are gone), and its
    /// user's directories once empty.
    pub fn remove(&self) -> Result<(), CgroupError> {
        let mut res = Ok(());
        for (_, d) in &self.dirs {
            if let Err(e) = remove_tree(d) {
                if res.is_ok() {
                    res = Err(e);
                }
            }
            if let Some(uid_dir) = d.parent() {
                let _ = std::fs::remove_dir(uid_dir);
            }
        }
        res
    }

    /// Live processes of the job.
    pub fn pids(&self) -> Vec<i32> {
        self.track_dir().map(pids_under).unwrap_or_default()
    }

    /// Send `sig` to every process of the job; how many were signalled.
    pub fn signal(&self, sig: i32) -> usize {
        let me = std::process::id() as i32;
        self.pids()
            .into_iter()
            .filter(|&p| p != me)
            // SAFETY: kill(2) on a pid.
            .filter(|&p| unsafe { libc::kill(p, sig) } == 0)
            .count()
    }

    /// Freeze (`true`) or thaw every process of the job (v1 `freezer.state`,
    /// v2 `cgroup.freeze`), waiting briefly until the kernel says it is
    /// done; `false` when the cgroup has no freezer.
    pub fn set_frozen(&self, on: bool) -> bool {
        if self.version == Version::V1 {
            return self.freeze(if on { "FROZEN" } else { "THAWED" });
        }
        let Some(d) = self.track_dir() else {
            return false;
        };
        let f = d.join("cgroup.freeze");
        if !f.exists() || write(&f, if on { "1" } else { "0" }).is_err() {
            return false;
        }
        let want = if on { "frozen 1" } else { "frozen 0" };
        let until = Instant::now() + Duration::from_millis(500);
        while Instant::now() < until {
            if read(&d.join("cgroup.events")).is_some_and(|s| s.lines().any(|l| l.trim() == want)) {
                break;
            }
            std::thread::sleep(Duration::from_millis(5));
        }
        true
    }

    fn freeze(&self, state: &str) -> bool {
        let Some(d) = self.dir("freezer") else {
            return false;
        };
        if write(&d.join("freezer.state"), state).is_err() {
            return false;
        }
        let until = Instant::now() + Duration::from_millis(500);
        while Instant::now() < until {
            if read(&d.join("freezer.state")).is_some_and(|s| s.trim() == state) {
                break;
            }
            std::thread::sleep(Duration::from_millis(5));
        }
        true
    }

    /// Kill every process of the job and wait until none is left (at most
    /// `patience`); the survivors when some are.
    pub fn kill_all(&self, patience: Duration) -> Vec<i32> {
        let deadline = Instant::now() + patience;
        loop {
            let left = self.pids();
            if left.is_empty() || Instant::now() >= deadline {
                return left;
            }
            let via_kill_file = self.version == Version::V2
                && self
                    .track_dir()
                    .map(|d| d.join("cgroup.kill"))
                    .filter(|k| k.exists() && is_cgroupfs(k))
                    .is_some_and(|k| write(&k, "1").is_ok());
            if !via_kill_file {
                // Frozen processes cannot fork while we go through them;
                // they die as they thaw.
                let frozen = self.freeze("FROZEN");
                self.signal(libc::SIGKILL);
                if frozen {
                    self.freeze("THAWED");
                }
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// OOM kills in the job (v2 `memory.events`, hierarchical; v1
    /// `memory.oom_control` of every directory, else a hit limit counted
    /// by `memory.failcnt` with the peak at the limit).
    pub fn oom_kills(&self) -> u64 {
        match self.version {
            Version::V2 => self
                .dir("unified")
                .and_then(|d| read(&d.join("memory.events")))
                .and_then(|t| keyed(&t, "oom_kill"))
                .unwrap_or(0),
            Version::V1 => {
                let Some(d) = self.dir("memory") else {
                    return 0;
                };
                let mut kills = 0;
                let mut counted = false;
                for sub in subtree(d) {
                    if let Some(n) =
                        read(&sub.join("memory.oom_control")).and_then(|t| keyed(&t, "oom_kill"))
                    {
                        kills += n;
                        counted = true;
                    }
                }
                if counted {
                    return kills;
                }
                let num = |f: &str| {
                    read(&d.join(f))
                        .and_then(|t| t.trim().parse::<u64>().ok())
                        .unwrap_or(0)
                };
                let limit = num("memory.limit_in_bytes");
                u64::from(
                    num("memory.failcnt") > 0
                        && limit > 0
                        && num("memory.max_usage_in_bytes") >= limit,
                )
            }
        }
    }

    /// CPU time and peak memory of the job so far.
    pub fn usage(&self) -> Usage {
        self.usage_of(None)
    }

    /// What one step's processes used (its directory under the job's).
    pub fn step_usage(&self, name: &str) -> Usage {
        self.usage_of(Some(name))
    }

    fn usage_of(&self, step: Option<&str>) -> Usage {
        let mut u = Usage::default();
        let num = |p: PathBuf| read(&p).and_then(|t| t.trim().parse::<u64>().ok());
        let dir = |c: &str| {
            self.dir(c).map(|d| match step {
                Some(s) => d.join(s),
                None => d.to_path_buf(),
            })
        };
        match self.version {
            Version::V2 => {
                let Some(d) = dir("unified") else {
                    return u;
                };
                if let Some(t) = read(&d.join("cpu.stat")) {
                    u.cpu_usec = keyed(&t, "usage_usec").unwrap_or(0);
                    u.user_usec = keyed(&t, "user_usec").unwrap_or(0);
                    u.system_usec = keyed(&t, "system_usec").unwrap_or(0);
                }
                u.max_rss_bytes = num(d.join("memory.peak"))
                    .or_else(|| num(d.join("memory.current")))
                    .unwrap_or(0);
            }
            Version::V1 => {
                if let Some(d) = dir("cpuacct") {
                    u.cpu_usec = num(d.join("cpuacct.usage")).unwrap_or(0) / 1000;
                    if let Some(t) = read(&d.join("cpuacct.stat")) {
                        // SAFETY: sysconf has no preconditions.
                        let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) }.max(1) as u64;
                        let usec = |k| keyed(&t, k).unwrap_or(0).saturating_mul(1_000_000) / hz;
                        u.user_usec = usec("user");
                        u.system_usec = usec("system");
                    }
                }
                if let Some(d) = dir("memory") {
                    u.max_rss_bytes = num(d.join("memory.max_usage_in_bytes")).unwrap_or(0);
                }
            }
        }
        u
    }
}

/// Remove every directory below `dir` that holds no process, deepest first;
/// thaw those a daemon that died mid-kill left frozen (their processes got
/// SIGKILL and die as they thaw, or go on if they were not being killed).
fn sweep_empty(dir: &Path) {
    let Ok(rd) = std::fs::read_dir(dir) else {
        return;
    };
    for e in rd.flatten() {
        let p = e.path();
        if !e.file_type().is_ok_and(|t| t.is_dir()) {
            continue;
        }
        sweep_empty(&p);
        let state = p.join("freezer.state");
        if read(&state).is_some_and(|s| matches!(s.trim(), "FROZEN" | "FREEZING")) {
            let _ = write(&state, "THAWED");
        }
        let empty = read(&p.join("cgroup.procs")).is_some_and(|t| t.trim().is_empty());
        if empty {
            let _ = std::fs::remove_dir(&p);
        }
    }
}

/// The CPUs each other step of a job holds (`step_*` directories under the
/// job's `dir` but `skip`, the batch and extern steps; a step with all of
/// the job's is sharing them, holding none).
fn siblings_cpus(dir: &Path, skip: &str) -> Vec<Vec<u32>> {
    let all = read(&dir.join("cpuset.cpus")).and_then(|s| parse_cpu_list(&s));
    let Ok(rd) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    rd.flatten()
        .filter_map(|e| {
            let n = e.file_name().to_string_lossy().into_owned();
            if !n.starts_with("step_") || n == skip || n == "step_batch" || n == "step_extern" {
                return None;
            }
            let v = parse_cpu_list(&read(&e.path().join("cpuset.cpus"))?)?;
            (!v.is_empty() && Some(&v) != all.as_ref()).then_some(v)
        })
        .collect()
}

/// `want` of the job's CPUs (`job`, in the order to take them): the least
/// held by `others` first; sorted ids.
fn pick_step_cpus(job: &[u32], others: &[Vec<u32>], want: usize) -> Vec<u32> {
    let mut by_use: Vec<(usize, usize, u32)> = job
        .iter()
        .enumerate()
        .map(|(pos, &c)| (others.iter().filter(|o| o.contains(&c)).count(), pos, c))
        .collect();
    by_use.sort_unstable();
    let mut got: Vec<u32> = by_use.into_iter().take(want).map(|(_, _, c)| c).collect();
    got.sort_unstable();
    got
}

/// v1 cpuset: a directory takes no process before it has CPUs and memory
/// nodes; give `child` those of `parent` where it has none.
fn copy_cpuset(parent: &Path, child: &Path) -> Result<(), CgroupError> {
    for f in ["cpuset.cpus", "cpuset.mems"] {
        let mine = read(&child.join(f)).unwrap_or_default();
        if mine.trim().is_empty() {
            let theirs = read(&parent.join(f)).unwrap_or_default();
            write(&child.join(f), theirs.trim())?;
        }
    }
    Ok(())
}

/// What the daemon needs to manage its jobs' cgroups.
pub struct ManagerOpts<'a> {
    pub conf: CgroupConf,
    pub node: &'a str,
    /// `TaskPlugin` includes `task/cgroup`: apply cgroup.conf's constraints.
    pub constrain: bool,
    /// Kernel CPU ids in allocation order.
    pub cpu_order: Vec<u32>,
    /// The node's RealMemory, MiB.
    pub node_mem_mib: u64,
    /// The node's GRES devices (for ConstrainDevices).
    pub devices: Vec<GresDevice>,
    /// The top directory name this node used before (kept in its spool):
    /// tried first, so a restarted daemon finds its running jobs even when
    /// other daemons on the host serve a node of the same name.
    pub prefer: Option<String>,
}

/// One daemon's cgroups.
pub struct Manager {
    pub version: Version,
    conf: CgroupConf,
    constrain: bool,
    /// Top directory per hierarchy: (controller, path).
    tops: Vec<(String, PathBuf)>,
    /// Controllers usable below the top (v2).
    v2_enabled: Vec<String>,
    /// cgroup v2 device programs load here (ConstrainDevices works).
    v2_devices: bool,
    node_mem_mib: u64,
    devices: Vec<GresDevice>,
    cpus: Mutex<CpuBook>,
    /// Serialises creating and removing directories.
    tree: Mutex<()>,
    _lock: File,
    /// Things worth one line in the log at start-up.
    pub notes: Vec<String>,
}

/// Whether a cgroup below `dir` (down to `depth` levels) has a process.
fn holds_processes(dir: &Path, depth: u32) -> bool {
    if depth == 0 {
        return false;
    }
    let Ok(entries) = std::fs::read_dir(dir) else {
        return false;
    };
    entries.flatten().any(|e| {
        let p = e.path();
        e.file_type().is_ok_and(|t| t.is_dir())
            && (read(&p.join("cgroup.procs")).is_some_and(|s| !s.trim().is_empty())
                || holds_processes(&p, depth - 1))
    })
}

fn lock_dir(dir: &Path) -> Result<Option<File>, CgroupError> {
    let f = File::open(dir).map_err(io_err("open", dir))?;
    // SAFETY: flock on a descriptor we own.
    if unsafe { libc::flock(f.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) } == 0 {
        Ok(Some(f))
    } else {
        let e = io::Error::last_os_error();
        if e.raw_os_error() == Some(libc::EWOULDBLOCK) {
            Ok(None)
        } else {
            Err(CgroupError::Io {
                what: "lock",
                path: dir.to_path_buf(),
                source: e,
            })
        }
    }
}

/// Enable [`V2_CONTROLLERS`] for the children of `dir`, as far as `dir` has
/// them (its `cgroup.controllers`, or `available` where that cannot be
/// read, as in fake trees); the ones enabled.
fn enable_v2(dir: &Path, available: &[String]) -> Vec<String> {
    let have: Vec<String> = match read(&dir.join("cgroup.controllers")) {
        Some(t) => t.split_whitespace().map(str::to_string).collect(),
        None => available.to_vec(),
    };
    let mut on = Vec::new();
    for c in V2_CONTROLLERS {
        if have.iter().any(|h| h == c) {
            // One write per controller: one refused does not stop the rest.
            if write(&dir.join("cgroup.subtree_control"), &format!("+{c}")).is_ok() {
                on.push(c.to_string());
            }
        }
    }
    on
}

impl Manager {
    /// Set up this node's top directories; `Ok(None)` when cgroups are
    /// disabled in cgroup.conf.
    pub fn new(o: ManagerOpts) -> Result<Option<Manager>, CgroupError> {
        let mount = o.conf.mountpoint.clone();
        let version = match (o.conf.plugin, detect_version(&mount)) {
            (PluginChoice::Disabled, _) => return Ok(None),
            (PluginChoice::V1, Some(Version::V1))
            | (PluginChoice::Autodetect, Some(Version::V1)) => Version::V1,
            (PluginChoice::V2, Some(Version::V2))
            | (PluginChoice::Autodetect, Some(Version::V2)) => Version::V2,
            (PluginChoice::V1, Some(_)) => {
                return Err(CgroupError::WrongVersion { want: "v1", mount })
            }
            (PluginChoice::V2, Some(_)) => {
                return Err(CgroupError::WrongVersion { want: "v2", mount })
            }
            (_, None) => return Err(CgroupError::NotMounted(mount)),
        };
        let bases: Vec<(String, PathBuf)> = match version {
            Version::V2 => vec![("unified".to_string(), mount.clone())],
            Version::V1 => V1_CONTROLLERS
                .iter()
                .filter(|c| mount.join(c).join("cgroup.procs").is_file())
                .map(|c| (c.to_string(), mount.join(c)))
                .collect(),
        };
        let safe: String = o
            .node
            .chars()
            .map(|c| {
                if c == '/' || c.is_whitespace() {
                    '_'
                } else {
                    c
                }
            })
            .collect();
        if bases.is_empty() {
            return Err(CgroupError::NotMounted(mount));
        }
        let mut notes = Vec::new();
        let mut chosen = None;
        let ours = |n: &str| {
            n == format!("slurm_{safe}")
                || n.strip_prefix(&format!("slurm_{safe}."))
                    .and_then(|i| i.parse::<u32>().ok())
                    .is_some_and(|i| (1..64).contains(&i))
        };
        let earlier = o.prefer.as_deref().filter(|n| ours(n)).map(str::to_string);
        let names = earlier.clone().into_iter().chain((0..64).map(|i| {
            if i == 0 {
                format!("slurm_{safe}")
            } else {
                format!("slurm_{safe}.{i}")
            }
        }));
        for name in names {
            let tops: Vec<(String, PathBuf)> = bases
                .iter()
                .map(|(c, b)| (c.clone(), b.join(&name)))
                .collect();
            for (ctl, top) in &tops {
                mkdir(top)?;
                if ctl == "cpuset" {
                    copy_cpuset(top.parent().unwrap_or(&mount), top)?;
                }
            }
            if let Some(lock) = lock_dir(&tops[0].1)? {
                // A hierarchy whose jobs still run belongs to a daemon that
                // was killed and will come back for them (it prefers its
                // own name): another daemon of the same node name taking it
                // meanwhile would leave those jobs to it.
                if Some(&name) != earlier.as_ref()
                    && tops.iter().any(|(_, t)| holds_processes(t, 4))
                {
                    continue;
                }
                if name != format!("slurm_{safe}") && Some(&name) != earlier.as_ref() {
                    notes.push(format!(
                        "another slurmd on this host serves a node named {}; using {name}",
                        o.node
                    ));
                }
                chosen = Some((tops, lock));
                break;
            }
        }
        let Some((tops, lock)) = chosen else {
            return Err(CgroupError::Locked(safe));
        };
        // A daemon that died left its jobs' directories: those with no
        // process left are gone with it (live ones stay, to be re-adopted).
        for (_, top) in &tops {
            sweep_empty(top);
        }
        if o.constrain && version == Version::V1 {
            let has = |c: &str| tops.iter().any(|(n, _)| n == c);
            let c = &o.conf;
            for (wanted, ctl, what) in [
                (c.constrain_cores, "cpuset", "cores"),
                (
                    c.constrain_ram_space || c.constrain_swap_space,
                    "memory",
                    "memory",
                ),
                (c.constrain_devices, "devices", "devices"),
            ] {
                if wanted && !has(ctl) {
                    notes.push(format!(
                        "no {ctl} hierarchy under {}; {what} are not confined",
                        mount.display()
                    ));
                }
            }
        }
        let mut v2_enabled = Vec::new();
        if version == Version::V2 {
            let root_on = enable_v2(&mount, &[]);
            v2_enabled = enable_v2(&tops[0].1, &root_on);
        }
        let mut v2_devices = false;
        if o.constrain && o.conf.constrain_devices && version == Version::V2 {
            match bpf::available() {
                Ok(()) => v2_devices = true,
                Err(e) => notes.push(format!(
                    "ConstrainDevices=yes but this kernel refuses cgroup device programs ({e}); jobs are not confined to their GPUs"
                )),
            }
        }
        if o.constrain
            && o.conf.constrain_cores
            && version == Version::V2
            && !v2_enabled.iter().any(|c| c == "cpuset")
        {
            notes.push("ConstrainCores=yes but the cpuset controller cannot be enabled; cores are not confined".into());
        }
        if o.constrain
            && (o.conf.constrain_ram_space || o.conf.constrain_swap_space)
            && version == Version::V2
            && !v2_enabled.iter().any(|c| c == "memory")
        {
            notes.push("ConstrainRAMSpace=yes but the memory controller cannot be enabled; memory is not confined".into());
        }
        Ok(Some(Manager {
            version,
            conf: o.conf,
            constrain: o.constrain,
            tops,
            v2_enabled,
            v2_devices,
            node_mem_mib: o.node_mem_mib,
            devices: o.devices,
            cpus: Mutex::new(CpuBook::new(o.cpu_order)),
            tree: Mutex::new(()),
            _lock: lock,
            notes,
        }))
    }

    /// Whether jobs are confined (and a failure to make a job's cgroup
    /// must fail its launch), or only tracked.
    pub fn constrains(&self) -> bool {
        self.constrain
            && (self.conf.constrain_cores
                || self.conf.constrain_ram_space
                || self.conf.constrain_swap_space
                || self.conf.constrain_devices)
    }

    /// Whether jobs' and steps' devices can be confined here (v1: a
    /// devices hierarchy; v2: device programs load).
    pub fn confines_devices(&self) -> bool {
        match self.version {
            Version::V1 => self.tops.iter().any(|(c, _)| c == "devices"),
            Version::V2 => self.v2_devices,
        }
    }

    pub fn conf(&self) -> &CgroupConf {
        &self.conf
    }

    /// The top directory of the first hierarchy (`.../slurm_<node>`).
    pub fn top(&self) -> &Path {
        &self.tops[0].1
    }

    fn book(&self) -> std::sync::MutexGuard<'_, CpuBook> {
        self.cpus.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// A job was suspended or resumed here: its CPUs may go to others
    /// meanwhile (after free ones).
    pub fn mark_stopped(&self, job: slurm_proto::JobId, stopped: bool) {
        self.book().set_stopped(job, stopped);
    }

    fn tree_lock(&self) -> std::sync::MutexGuard<'_, ()> {
        self.tree.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Make a job's directories with its limits. Blocking (file system).
    pub fn create_job(&self, spec: &JobSpec) -> Result<JobCgroup, CgroupError> {
        let cores = self.constrain && self.conf.constrain_cores;
        let cpus = if cores {
            self.book().take(spec.job_id, spec.cpus)
        } else {
            Vec::new()
        };
        let res = self.create_dirs(spec, &cpus);
        if res.is_err() {
            self.book().release(spec.job_id);
        }
        res
    }

    fn create_dirs(&self, spec: &JobSpec, cpus: &[u32]) -> Result<JobCgroup, CgroupError> {
        let _g = self.tree_lock();
        let (c, on) = (&self.conf, self.constrain);
        let mem_limit = if on {
            c.ram_limit(spec.mem_mib, self.node_mem_mib)
        } else {
            None
        };
        let swap_limit = if on {
            c.ram_swap_limit(spec.mem_mib, self.node_mem_mib)
        } else {
            None
        };
        let mut jc = JobCgroup {
            version: self.version,
            job_id: spec.job_id,
            dirs: Vec::new(),
            cpus: cpus.to_vec(),
            mem_limit,
        };
        for (ctl, top) in &self.tops {
            let uid_dir = top.join(format!("uid_{}", spec.uid));
            let job_dir = uid_dir.join(format!("job_{}", spec.job_id));
            mkdir(&uid_dir)?;
            if !mkdir(&job_dir)? {
                // Left by a job that ended while no daemon watched it, or
                // another daemon's: reuse only when nothing lives there.
                if !pids_under(&job_dir).is_empty() {
                    return Err(CgroupError::Busy(job_dir));
                }
                for d in subtree(&job_dir) {
                    if d != job_dir {
                        let _ = remove_tree(&d);
                    }
                }
            }
            jc.dirs.push((ctl.clone(), job_dir.clone()));
            match (self.version, ctl.as_str()) {
                (Version::V1, "cpuset") => {
                    copy_cpuset(top, &uid_dir)?;
                    if !cpus.is_empty() {
                        write(&job_dir.join("cpuset.cpus"), &format_cpu_list(cpus))?;
                    }
                    copy_cpuset(&uid_dir, &job_dir)?;
                }
                (Version::V1, "memory") => {
                    if let Some(m) = mem_limit {
                        write(&job_dir.join("memory.limit_in_bytes"), &m.to_string())?;
                    }
                    if let Some(s) = swap_limit {
                        if mem_limit.is_none() {
                            write(&job_dir.join("memory.limit_in_bytes"), &s.to_string())?;
                        }
                        write(&job_dir.join("memory.memsw.limit_in_bytes"), &s.to_string())
                            .map_err(|e| match e {
                                CgroupError::Io { path, source, .. } => CgroupError::Io {
                                    what: "limit swap (is swap accounting on?) with",
                                    path,
                                    source,
                                },
                                e => e,
                            })?;
                    }
                    if let (true, Some(sw)) = (on, c.memory_swappiness) {
                        let _ = write(&job_dir.join("memory.swappiness"), &sw.to_string());
                    }
                }
                (Version::V1, "devices") if on && c.constrain_devices => {
                    for d in &self.devices {
                        let given = spec.gpus.as_ref().is_some_and(|g| g.contains(&d.index));
                        if let (false, Some((maj, min))) = (given, d.dev) {
                            write(&job_dir.join("devices.deny"), &format!("c {maj}:{min} rwm"))?;
                        }
                    }
                }
                (Version::V2, _) => {
                    let uid_on = enable_v2(&uid_dir, &self.v2_enabled);
                    enable_v2(&job_dir, &uid_on);
                    if on && c.constrain_devices && self.v2_devices {
                        let deny: Vec<(u32, u32)> = self
                            .devices
                            .iter()
                            .filter(|d| !spec.gpus.as_ref().is_some_and(|g| g.contains(&d.index)))
                            .filter_map(|d| d.dev)
                            .collect();
                        if !deny.is_empty() {
                            bpf::deny_devices(&job_dir, &deny)
                                .map_err(io_err("attach a device program to", &job_dir))?;
                        }
                    }
                    let has = |c: &str| uid_on.iter().any(|x| x == c);
                    if !cpus.is_empty() && has("cpuset") {
                        write(&job_dir.join("cpuset.cpus"), &format_cpu_list(cpus))?;
                    }
                    if has("memory") {
                        if let Some(m) = mem_limit {
                            write(&job_dir.join("memory.max"), &m.to_string())?;
                        }
                        if let Some(s) = swap_limit {
                            let ram = mem_limit.unwrap_or(s);
                            write(
                                &job_dir.join("memory.swap.max"),
                                &s.saturating_sub(ram).to_string(),
                            )?;
                        }
                        if let (true, Some(sw)) = (on, c.memory_swappiness) {
                            let _ = write(&job_dir.join("memory.swappiness"), &sw.to_string());
                        }
                    }
                }
                _ => {}
            }
        }
        Ok(jc)
    }

    /// A step given only some of its job's GPUs (`srun --gpus=1`): its
    /// directory denies the job's others (ConstrainDevices), so its tasks
    /// can open only its own.
    pub fn restrict_step_devices(
        &self,
        jc: &JobCgroup,
        step: &str,
        allowed: &[u32],
    ) -> Result<(), CgroupError> {
        if !self.constrain || !self.conf.constrain_devices {
            return Ok(());
        }
        let deny: Vec<(u32, u32)> = self
            .devices
            .iter()
            .filter(|d| d.name == "gpu" && !allowed.contains(&d.index))
            .filter_map(|d| d.dev)
            .collect();
        if deny.is_empty() {
            return Ok(());
        }
        match jc.version {
            Version::V1 => {
                if let Some(dir) = jc.dir("devices") {
                    let d = dir.join(step);
                    for (maj, min) in &deny {
                        write(&d.join("devices.deny"), &format!("c {maj}:{min} rwm"))?;
                    }
                }
            }
            Version::V2 if self.v2_devices => {
                if let Some(dir) = jc.track_dir() {
                    let d = dir.join(step);
                    bpf::deny_devices(&d, &deny)
                        .map_err(io_err("attach a device program to", &d))?;
                }
            }
            Version::V2 => {}
        }
        Ok(())
    }

    /// Hold the CPUs of a job found again after a restart.
    pub fn adopt(&self, jc: &JobCgroup) {
        if !jc.cpus.is_empty() {
            self.book().hold(jc.job_id, jc.cpus.clone());
        }
    }

    /// Remove a job's directories (its processes are gone) and free its
    /// CPUs; the user's directory goes too once empty.
    pub fn remove_job(&self, jc: &JobCgroup) -> Result<(), CgroupError> {
        let _g = self.tree_lock();
        let res = jc.remove();
        self.book().release(jc.job_id);
        res
    }

    /// At shutdown: remove the top directories if no job is left in them.
    pub fn tidy(&self) {
        let _g = self.tree_lock();
        for (_, top) in &self.tops {
            if pids_under(top).is_empty() {
                if let Ok(rd) = std::fs::read_dir(top) {
                    for e in rd.flatten() {
                        if e.file_type().is_ok_and(|t| t.is_dir()) {
                            let _ = std::fs::remove_dir(e.path());
                        }
                    }
                }
                let _ = std::fs::remove_dir(top);
            }
        }
    }

    /// Give `n` CPUs to `job` from the same book as the jobs' cpusets
    /// (a pod's placeholder job: see [`crate::kubelet`]).
    pub fn take_cpus(&self, job: JobId, n: u32) -> Vec<u32> {
        self.book().take(job, n)
    }

    /// Record CPUs `job` already holds (a pod pinned before a restart).
    pub fn hold_cpus(&self, job: JobId, cpus: Vec<u32>) {
        self.book().hold(job, cpus);
    }

    pub fn release_cpus(&self, job: JobId) {
        self.book().release(job);
    }

    /// What the processes under `rel` used: a directory below each
    /// hierarchy's top that is not the daemon's (a kubelet's pod).
    pub fn usage_at(&self, rel: &Path) -> Usage {
        let mount = &self.conf.mountpoint;
        let dirs = match self.version {
            Version::V2 => vec![("unified".to_string(), mount.join(rel))],
            Version::V1 => ["cpuacct", "memory"]
                .iter()
                .map(|c| (c.to_string(), mount.join(c).join(rel)))
                .collect(),
        };
        JobCgroup {
            version: self.version,
            job_id: 0,
            dirs,
            cpus: Vec::new(),
            mem_limit: None,
        }
        .usage()
    }

    /// CPUs `job` holds.
    pub fn cpus_of(&self, job: JobId) -> Vec<u32> {
        self.book()
            .held_by(job)
            .map(<[u32]>::to_vec)
            .unwrap_or_default()
    }
}

#[cfg(test)]
mod tests;
