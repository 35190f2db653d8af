//! What voids a step credential on this node, kept across daemon restarts:
//! the runs of jobs that ended here (their credentials launch nothing
//! more) and the steps already launched or cancelled here (a credential
//! launches its step once). Saved in the spool (`voided.<node>.json`) on
//! every change. An entry is kept until no credential it voids can still be
//! valid on this node's clock: at least two credential lifetimes
//! (`AuthInfo=cred_expire`, 120 s by default, as Slurm), and beyond that
//! while the credentials' own expiry, stamped by the controller's clock,
//! has not passed here: a controller whose clock runs ahead of the node's
//! makes credentials that stay valid longer, and the entries voiding them
//! stay as long.

use serde::{Deserialize, Serialize};
use slurm_proto::JobId;
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

/// Slurm's default step credential lifetime (`AuthInfo=cred_expire`).
pub const DEFAULT_CRED_EXPIRE: i64 = 120;

#[derive(Debug, Default, Serialize, Deserialize, PartialEq)]
#[serde(default)]
struct Saved {
    /// (job, run start, kept until).
    ended_until: Vec<(JobId, Option<i64>, i64)>,
    /// (job, step, kept until).
    launched_until: Vec<(JobId, u32, i64)>,
    /// Earlier versions': (job, run start, when it ended here), kept for
    /// two credential lifetimes from then.
    ended: Vec<(JobId, Option<i64>, i64)>,
    /// Earlier versions': (job, step, when launched or cancelled here).
    launched: Vec<(JobId, u32, i64)>,
}

/// Each entry with the time (this node's clock) it is kept until.
#[derive(Debug, Default)]
struct Book {
    ended: HashMap<JobId, (Option<i64>, i64)>,
    launched: HashMap<(JobId, u32), i64>,
}

pub struct Ledger {
    path: PathBuf,
    /// Two credential lifetimes: the least an entry is kept.
    keep: i64,
    /// One credential lifetime.
    expire: i64,
    book: Mutex<Book>,
}

impl Ledger {
    /// Load the node's ledger from `path` (an unreadable one is empty).
    pub fn load(path: PathBuf, cred_expire: i64) -> Ledger {
        let saved: Saved = match std::fs::read(&path) {
            Ok(b) => serde_json::from_slice(&b).unwrap_or_else(|e| {
                tracing::warn!("{}: unreadable ({e}); starting it anew", path.display());
                Saved::default()
            }),
            Err(_) => Saved::default(),
        };
        let keep = 2 * cred_expire.max(1);
        let mut book = Book::default();
        for (j, s, at) in saved.ended {
            book.ended.insert(j, (s, at + keep));
        }
        for (j, s, at) in saved.launched {
            book.launched.insert((j, s), at + keep);
        }
        for (j, s, until) in saved.ended_until {
            book.ended.insert(j, (s, until));
        }
        for (j, s, until) in saved.launched_until {
            book.launched.insert((j, s), until);
        }
        Ledger {
            path,
            keep,
            expire: cred_expire.max(1),
            book: Mutex::new(book),
        }
    }

    fn book(&self) -> std::sync::MutexGuard<'_, Book> {
        self.book.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn save(&self, b: &mut Book, now: i64) {
        b.ended.retain(|_, (_, until)| now < *until);
        b.launched.retain(|_, until| now < *until);
        let saved = Saved {
            ended_until: b.ended.iter().map(|(j, (s, u))| (*j, *s, *u)).collect(),
            launched_until: b.launched.iter().map(|((j, s), u)| (*j, *s, *u)).collect(),
            ..Saved::default()
        };
        if let Err(e) = write(&self.path, &saved) {
            tracing::warn!(
                "cannot save {}: {e} (a restart would forget which step credentials are spent)",
                self.path.display()
            );
        }
    }

    /// How long an entry made `now` is kept when the credentials it voids
    /// expire by `expires` at the latest.
    fn until(&self, now: i64, expires: i64) -> i64 {
        (now + self.keep).max(expires.saturating_add(1))
    }

    /// Run `start` of `job` ended here, as the controller said at
    /// `ctld_time` (its clock): its steps' credentials are void, and a
    /// later run starts afresh. The controller made the run's last
    /// credential before then, so none outlives `ctld_time` plus a
    /// credential lifetime.
    pub fn job_ended(&self, job: JobId, start: Option<i64>, now: i64, ctld_time: i64) {
        let mut b = self.book();
        // An end with no run named (the controller's clean-up of a job it
        // holds over) never hides a run's recorded end, nor frees its
        // steps' credentials.
        if start.is_none() && b.ended.get(&job).is_some_and(|(s, _)| s.is_some()) {
            return;
        }
        let until = self.until(now, ctld_time.saturating_add(self.expire));
        b.ended.insert(job, (start, until));
        if start.is_some() {
            b.launched.retain(|(j, _), _| *j != job);
        }
        self.save(&mut b, now);
    }

    /// Why a credential for step `step` of run `start` of `job`, valid
    /// until `expires`, may not launch, if so; otherwise it is recorded as
    /// launched.
    pub fn take(
        &self,
        job: JobId,
        step: u32,
        start: Option<i64>,
        now: i64,
        expires: i64,
    ) -> Result<(), String> {
        let mut b = self.book();
        if let Some((s, _)) = b.ended.get(&job) {
            if s.is_some() && *s == start {
                return Err(format!("job {job} has ended"));
            }
        }
        if b.launched.contains_key(&(job, step)) {
            return Err(format!("step {job}.{step} was already launched here"));
        }
        let until = self.until(now, expires);
        b.launched.insert((job, step), until);
        self.save(&mut b, now);
        Ok(())
    }

    /// A launch recorded by [`Ledger::take`] did not happen (srun could
    /// not be reached): the credential may come again.
    pub fn untake(&self, job: JobId, step: u32, now: i64) {
        let mut b = self.book();
        if b.launched.remove(&(job, step)).is_some() {
            self.save(&mut b, now);
        }
    }

    /// The controller cancelled the step, saying so at `ctld_time` (its
    /// clock): it launches nothing here later.
    pub fn cancelled(&self, job: JobId, step: u32, now: i64, ctld_time: i64) {
        let mut b = self.book();
        let until = self.until(now, ctld_time.saturating_add(self.expire));
        let e = b.launched.entry((job, step)).or_insert(until);
        *e = (*e).max(until);
        self.save(&mut b, now);
    }
}

fn write(path: &Path, saved: &Saved) -> std::io::Result<()> {
    write_private(
        path,
        &serde_json::to_vec(saved).map_err(std::io::Error::other)?,
    )
}

/// Written whole to a fresh private file (never through a link planted in
/// the spool), synced, then renamed over the old one.
pub(crate) fn write_private(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    write_whole(path, bytes, 0o600)
}

/// `bytes` written whole to a fresh file of `mode` beside `path` (never
/// through a link planted there), synced, then renamed over `path`.
pub(crate) fn write_whole(path: &Path, bytes: &[u8], mode: u32) -> std::io::Result<()> {
    use std::io::Write;
    use std::os::unix::fs::OpenOptionsExt;
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let tmp = path.with_file_name(format!(".{name}.new"));
    let _ = std::fs::remove_file(&tmp);
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(mode)
        .custom_flags(libc::O_NOFOLLOW)
        .open(&tmp)?;
    f.write_all(bytes)?;
    f.sync_all()?;
    std::fs::rename(&tmp, path)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_restarted_daemon_remembers_spent_credentials() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("voided.n1.json");
        let l = Ledger::load(p.clone(), 120);
        l.take(7, 0, Some(100), 1000, 1100).unwrap();
        assert!(
            l.take(7, 0, Some(100), 1001, 1100).is_err(),
            "launched twice"
        );
        l.take(7, 1, Some(100), 1001, 1100).unwrap();
        l.untake(7, 1, 1002);
        l.cancelled(7, 2, 1002, 1002);
        l.job_ended(8, Some(200), 1003, 1003);
        drop(l);
        let l = Ledger::load(p.clone(), 120);
        assert!(l.take(7, 0, Some(100), 1004, 1100).is_err());
        assert!(
            l.take(7, 2, Some(100), 1004, 1100).is_err(),
            "cancelled step launched"
        );
        assert!(
            l.take(7, 1, Some(100), 1004, 1100).is_ok(),
            "an untaken launch may come again"
        );
        assert!(
            l.take(8, 0, Some(200), 1004, 1100).is_err(),
            "ended run launched"
        );
        // A later run of job 8 starts afresh.
        assert!(l.take(8, 0, Some(300), 1004, 1100).is_ok());
        // An end naming no run hides no run's end.
        l.job_ended(8, Some(300), 1004, 1004);
        l.job_ended(8, None, 1004, 1004);
        assert!(l.take(8, 1, Some(300), 1004, 1100).is_err());
        // Entries past two credential lifetimes go.
        l.job_ended(9, Some(1), 2000, 2000);
        let saved: Saved = serde_json::from_slice(&std::fs::read(&p).unwrap()).unwrap();
        assert_eq!(saved.ended_until.len(), 1);
        assert!(saved.launched_until.is_empty());
    }

    #[test]
    fn a_controller_clock_ahead_keeps_entries_while_its_credentials_live() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("voided.n1.json");
        let l = Ledger::load(p.clone(), 120);
        // The controller's clock is an hour ahead of this node's: its
        // credentials expire an hour later here than they would otherwise.
        let ahead = 3600;
        l.take(5, 0, Some(10), 1000, 1000 + ahead + 120).unwrap();
        l.job_ended(6, Some(20), 1000, 1000 + ahead);
        l.cancelled(7, 3, 1000, 1000 + ahead);
        // Long past two lifetimes on this clock, but before the
        // credentials expire: still void.
        let later = 1000 + ahead;
        assert!(l.take(5, 0, Some(10), later, later + 1).is_err());
        assert!(l.take(6, 1, Some(20), later, later + 1).is_err());
        assert!(l.take(7, 3, Some(30), later, later + 1).is_err());
        drop(l);
        let l = Ledger::load(p.clone(), 120);
        assert!(l.take(6, 2, Some(20), later + 100, later + 101).is_err());
        // Once they expired here, the entries go.
        l.job_ended(1, Some(1), later + 1000, later + 1000);
        let saved: Saved = serde_json::from_slice(&std::fs::read(&p).unwrap()).unwrap();
        assert_eq!(saved.ended_until.len(), 1, "{saved:?}");
    }

    #[test]
    fn a_ledger_of_an_earlier_version_keeps_its_entries() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("voided.n1.json");
        let now = crate::now();
        std::fs::write(
            &p,
            format!(r#"{{"ended":[[4,10,{now}]],"launched":[[3,0,{now}]]}}"#),
        )
        .unwrap();
        let l = Ledger::load(p, 120);
        assert!(l.take(4, 0, Some(10), now + 1, now + 2).is_err());
        assert!(l.take(3, 0, None, now + 1, now + 2).is_err());
    }

    #[test]
    fn a_damaged_ledger_is_empty() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("voided.n1.json");
        std::fs::write(&p, "{not json").unwrap();
        let l = Ledger::load(p, 120);
        assert!(l.take(1, 0, None, 10, 20).is_ok());
    }
}
