//! What voids a step credential on this node, kept across daemon restarts:
//! the runs of jobs that ended here (their credentials launch nothing
//! more) and the steps already launched or cancelled here (a credential
//! launches its step once). Saved in the spool (`voided.<node>.json`) on
//! every change; entries older than two credential lifetimes
//! (`AuthInfo=cred_expire`, 120 s by default, as Slurm) are dropped, since
//! no credential they could void is still valid.

use serde::{Deserialize, Serialize};
use slurm_proto::JobId;
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

/// Slurm's default step credential lifetime (`AuthInfo=cred_expire`).
pub const DEFAULT_CRED_EXPIRE: i64 = 120;

#[derive(Debug, Default, Serialize, Deserialize, PartialEq)]
struct Saved {
    /// (job, run start, when it ended here).
    ended: Vec<(JobId, Option<i64>, i64)>,
    /// (job, step, when launched or cancelled here).
    launched: Vec<(JobId, u32, i64)>,
}

#[derive(Debug, Default)]
struct Book {
    ended: HashMap<JobId, (Option<i64>, i64)>,
    launched: HashMap<(JobId, u32), i64>,
}

pub struct Ledger {
    path: PathBuf,
    keep: i64,
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
        let book = Book {
            ended: saved
                .ended
                .into_iter()
                .map(|(j, s, at)| (j, (s, at)))
                .collect(),
            launched: saved
                .launched
                .into_iter()
                .map(|(j, s, at)| ((j, s), at))
                .collect(),
        };
        Ledger {
            path,
            keep: 2 * cred_expire.max(1),
            book: Mutex::new(book),
        }
    }

    fn book(&self) -> std::sync::MutexGuard<'_, Book> {
        self.book.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn save(&self, b: &mut Book, now: i64) {
        b.ended.retain(|_, (_, at)| now - *at < self.keep);
        b.launched.retain(|_, at| now - *at < self.keep);
        let saved = Saved {
            ended: b.ended.iter().map(|(j, (s, at))| (*j, *s, *at)).collect(),
            launched: b
                .launched
                .iter()
                .map(|((j, s), at)| (*j, *s, *at))
                .collect(),
        };
        if let Err(e) = write(&self.path, &saved) {
            tracing::warn!(
                "cannot save {}: {e} (a restart would forget which step credentials are spent)",
                self.path.display()
            );
        }
    }

    /// Run `start` of `job` ended here: its steps' credentials are void,
    /// and a later run starts afresh.
    pub fn job_ended(&self, job: JobId, start: Option<i64>, now: i64) {
        let mut b = self.book();
        // An end with no run named (the controller's clean-up of a job it
        // holds over) never hides a run's recorded end, nor frees its
        // steps' credentials.
        if start.is_none() && b.ended.get(&job).is_some_and(|(s, _)| s.is_some()) {
            return;
        }
        b.ended.insert(job, (start, now));
        if start.is_some() {
            b.launched.retain(|(j, _), _| *j != job);
        }
        self.save(&mut b, now);
    }

    /// Why a credential for step `step` of run `start` of `job` may not
    /// launch, if so; otherwise it is recorded as launched.
    pub fn take(&self, job: JobId, step: u32, start: Option<i64>, now: i64) -> Result<(), String> {
        let mut b = self.book();
        if let Some((s, _)) = b.ended.get(&job) {
            if s.is_some() && *s == start {
                return Err(format!("job {job} has ended"));
            }
        }
        if b.launched.contains_key(&(job, step)) {
            return Err(format!("step {job}.{step} was already launched here"));
        }
        b.launched.insert((job, step), now);
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

    /// The controller cancelled the step: it launches nothing here later.
    pub fn cancelled(&self, job: JobId, step: u32, now: i64) {
        let mut b = self.book();
        b.launched.insert((job, step), now);
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
        l.take(7, 0, Some(100), 1000).unwrap();
        assert!(l.take(7, 0, Some(100), 1001).is_err(), "launched twice");
        l.take(7, 1, Some(100), 1001).unwrap();
        l.untake(7, 1, 1002);
        l.cancelled(7, 2, 1002);
        l.job_ended(8, Some(200), 1003);
        drop(l);
        let l = Ledger::load(p.clone(), 120);
        assert!(l.take(7, 0, Some(100), 1004).is_err());
        assert!(
            l.take(7, 2, Some(100), 1004).is_err(),
            "cancelled step launched"
        );
        assert!(
            l.take(7, 1, Some(100), 1004).is_ok(),
            "an untaken launch may come again"
        );
        assert!(l.take(8, 0, Some(200), 1004).is_err(), "ended run launched");
        // A later run of job 8 starts afresh.
        assert!(l.take(8, 0, Some(300), 1004).is_ok());
        // An end naming no run hides no run's end.
        l.job_ended(8, Some(300), 1004);
        l.job_ended(8, None, 1004);
        assert!(l.take(8, 1, Some(300), 1004).is_err());
        // Entries past two credential lifetimes go.
        l.job_ended(9, Some(1), 2000);
        let saved: Saved = serde_json::from_slice(&std::fs::read(&p).unwrap()).unwrap();
        assert_eq!(saved.ended.len(), 1);
        assert!(saved.launched.is_empty());
    }

    #[test]
    fn a_damaged_ledger_is_empty() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("voided.n1.json");
        std::fs::write(&p, "{not json").unwrap();
        let l = Ledger::load(p, 120);
        assert!(l.take(1, 0, None, 10).is_ok());
    }
}
