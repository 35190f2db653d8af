//! The scheduler's own log, as Slurm's `SlurmSchedLogFile`: the scheduling
//! events (a job allocated by the main scheduler, held or released, the
//! level changed) written there, each `sched: [time] ...`, while
//! `SlurmSchedLogLevel` (or `scontrol schedloglevel`) is 1; they go to the
//! controller's log as well, at debug level. Reopened on SIGUSR2 with the
//! main log. A write that fails (a full disk) is dropped; each is one
//! write(2) on the writer thread, as the main log's lines are.

use slurm_common::conf::SlurmConf;
use slurm_common::logging::{LogFile, TimeFormat};
use std::io::Write;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex};

struct Target {
    path: PathBuf,
    file: Arc<LogFile>,
    time: TimeFormat,
}

/// A configuration checked and ready to put in force ([`SchedLog::apply`]).
pub struct Prepared {
    level: u32,
    time: TimeFormat,
    /// `Some`: the target changes to this (`None`: no file any more).
    target: Option<Option<Target>>,
}

/// Where the scheduler's events go, and whether they go there now.
pub struct SchedLog {
    target: Mutex<Option<Target>>,
    level: AtomicU32,
}

/// The controller's scheduler log.
pub static SCHED: SchedLog = SchedLog::new();

impl SchedLog {
    pub const fn new() -> SchedLog {
        SchedLog {
            target: Mutex::new(None),
            level: AtomicU32::new(0),
        }
    }

    /// Take `SlurmSchedLogFile` and `SlurmSchedLogLevel` from `conf` (at
    /// start and on reconfigure): the file opened (again, if it changed),
    /// the level set (0 off, anything else on, as Slurm's 0/1).
    pub fn configure(&self, conf: &SlurmConf) -> Result<(), String> {
        let p = self.prepare(conf)?;
        self.apply(p);
        Ok(())
    }

    /// [`Self::configure`]'s checks (and the new file opened), changing
    /// nothing yet: a reconfigure checks everything before it changes
    /// anything.
    pub fn prepare(&self, conf: &SlurmConf) -> Result<Prepared, String> {
        let level = match conf.get("SlurmSchedLogLevel").map(str::trim) {
            None | Some("") => 0,
            Some(v) => v
                .parse::<u16>()
                .map(u32::from)
                .map_err(|_| format!("SlurmSchedLogLevel={v}: not a number from 0 to 65535"))?,
        };
        let time = TimeFormat::parse(conf.get("LogTimeFormat")).unwrap_or_default();
        let path = conf
            .get("SlurmSchedLogFile")
            .map(str::trim)
            .filter(|p| !p.is_empty())
            .map(PathBuf::from);
        let same = {
            let target = self.target.lock().unwrap_or_else(|p| p.into_inner());
            match (&path, target.as_ref()) {
                (Some(p), Some(t)) => t.path == *p,
                (None, None) => true,
                _ => false,
            }
        };
        if level > 0 && path.is_none() {
            tracing::warn!("SlurmSchedLogLevel requires SlurmSchedLogFile value");
        }
        let target = match path {
            Some(p) if !same => Some(Target {
                file: LogFile::open(&p)
                    .map_err(|e| format!("cannot open SlurmSchedLogFile {}: {e}", p.display()))?,
                path: p,
                time,
            }),
            _ => None,
        };
        Ok(Prepared {
            level,
            time,
            target: if same { None } else { Some(target) },
        })
    }

    /// Put in force what [`Self::prepare`] made ready.
    pub fn apply(&self, p: Prepared) {
        let mut target = self.target.lock().unwrap_or_else(|p| p.into_inner());
        match p.target {
            Some(new) => *target = new,
            None => {
                if let Some(t) = target.as_mut() {
                    t.time = p.time;
                }
            }
        }
        self.level.store(p.level, Ordering::Relaxed);
    }

    /// `scontrol schedloglevel`: on (1) or off (0); the level set, `None`
    /// when there is no `SlurmSchedLogFile` to log to (Slurm's "disabled").
    pub fn set_level(&self, level: u32) -> Option<u32> {
        // (Under the lock: a reconfigure taking the file away in between
        // leaves no level on without a file.)
        let target = self.target.lock().unwrap_or_else(|p| p.into_inner());
        let t = target.as_ref()?;
        let level = level.min(1);
        self.level.store(level, Ordering::Relaxed);
        tracing::debug!("sched: Set scheduler log level to {level}");
        if level > 0 {
            write_line(t, format_args!("Set scheduler log level to {level}"));
        }
        Some(level)
    }

    /// Whether events are written to the file now.
    pub fn on(&self) -> bool {
        self.level.load(Ordering::Relaxed) > 0
    }

    /// The level in force (slurm.conf's number, or the last `scontrol
    /// schedloglevel`'s 0 or 1), as `show config` shows it.
    pub fn level(&self) -> u32 {
        self.level.load(Ordering::Relaxed)
    }

    /// Whether an event would go anywhere (to the file, or the controller's
    /// log at debug level): callers build its text only then.
    pub fn wanted(&self) -> bool {
        self.on() || tracing::enabled!(tracing::Level::DEBUG)
    }

    /// One scheduling event: to the file while the level is on, and to
    /// the controller's log at debug level (Slurm's at info: one line per
    /// job started is too much for a controller starting thousands a
    /// second).
    pub fn info(&self, msg: std::fmt::Arguments<'_>) {
        tracing::debug!("sched: {msg}");
        if !self.on() {
            return;
        }
        let target = self.target.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(t) = target.as_ref() {
            write_line(t, msg);
        }
    }

    /// Open the file again under its name (logrotate moved it); not under
    /// the lock, so a slow file system holds up no event meanwhile.
    pub fn reopen(&self) {
        let open = {
            let target = self.target.lock().unwrap_or_else(|p| p.into_inner());
            target.as_ref().map(|t| (t.file.clone(), t.path.clone()))
        };
        if let Some((file, path)) = open {
            if let Err(e) = file.reopen() {
                tracing::error!("cannot reopen SlurmSchedLogFile {}: {e}", path.display());
            }
        }
    }
}

/// One line of the scheduler log, as Slurm's: `sched: [time] message`. A
/// write that fails (a full disk) is dropped.
fn write_line(t: &Target, msg: std::fmt::Arguments<'_>) {
    let line = format!("sched: [{}] {msg}\n", t.time.stamp());
    let _ = t.file.writer().write_all(line.as_bytes());
}

/// A job as Slurm's logs name it (`%pJ`): `JobId=N`, or `JobId=A_T(N)`
/// for an array task.
pub fn job_label(j: &slurm_proto::JobRecord) -> String {
    match &j.array {
        Some(a) => format!("JobId={}_{}({})", a.job_id, a.task_id, j.job_id),
        None => format!("JobId={}", j.job_id),
    }
}

impl Default for SchedLog {
    fn default() -> Self {
        SchedLog::new()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn conf(dir: &std::path::Path, extra: &str) -> SlurmConf {
        let path = dir.join("slurm.conf");
        std::fs::write(
            &path,
            format!(
                "ClusterName=c\nSlurmctldHost=localhost\nNodeName=n1 CPUs=1\n\
                 PartitionName=p Nodes=n1\n{extra}"
            ),
        )
        .unwrap();
        SlurmConf::load(&path).unwrap()
    }

    #[test]
    fn events_reach_the_file_only_while_the_level_is_on() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("sched.log");
        let log = SchedLog::new();
        let text = || std::fs::read_to_string(&file).unwrap_or_default();
        // No file: nothing to turn on.
        log.configure(&conf(dir.path(), "")).unwrap();
        assert_eq!(log.set_level(1), None);
        // A file, level 0 (the default): nothing written.
        let with_file = format!("SlurmSchedLogFile={}\n", file.display());
        log.configure(&conf(dir.path(), &with_file)).unwrap();
        log.info(format_args!("Allocate JobId=1"));
        assert_eq!(text(), "");
        // Turned on: each event a line of its own.
        assert_eq!(log.set_level(5), Some(1));
        log.info(format_args!("Allocate JobId=2 NodeList=n1"));
        let t = text();
        let lines: Vec<&str> = t.lines().collect();
        assert_eq!(lines.len(), 2, "{t}");
        let whole = |l: &str, msg: &str| {
            l.starts_with("sched: [")
                && l.ends_with(&format!("] {msg}"))
                && l.len() > msg.len() + 12
        };
        assert!(whole(lines[0], "Set scheduler log level to 1"), "{t}");
        assert!(whole(lines[1], "Allocate JobId=2 NodeList=n1"), "{t}");
        // Off again; then on from slurm.conf.
        assert_eq!(log.set_level(0), Some(0));
        log.info(format_args!("Allocate JobId=3"));
        assert!(!text().contains("JobId=3"));
        log.configure(&conf(
            dir.path(),
            &format!("{with_file}SlurmSchedLogLevel=1\n"),
        ))
        .unwrap();
        log.info(format_args!("Allocate JobId=4"));
        assert!(text().contains("] Allocate JobId=4\n"));
        // A bad level is named, and changes nothing.
        let bad = conf(dir.path(), &format!("{with_file}SlurmSchedLogLevel=lots\n"));
        assert_eq!(
            log.configure(&bad).unwrap_err(),
            "SlurmSchedLogLevel=lots: not a number from 0 to 65535"
        );
        assert!(log.on());
        // slurm.conf's number is kept as given (show config shows it).
        log.configure(&conf(
            dir.path(),
            &format!("{with_file}SlurmSchedLogLevel=3\n"),
        ))
        .unwrap();
        assert_eq!(log.level(), 3);
    }
}
