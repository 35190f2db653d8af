//! Durability in StateSaveLocation: a snapshot (`state.json`) plus an
//! append-only journal (`journal.log`, one JSON entry per line).
//!
//! The writer appends every change of a batch, then makes the batch durable
//! with one `fdatasync` (group commit) before any reply of that batch leaves.
//! Start-up loads the snapshot, replays the journal, writes a fresh snapshot
//! and empties the journal. A torn last line (a crash mid-write) is dropped;
//! a corrupt line elsewhere is an error unless `-i` asks to skip it.

use serde::{Deserialize, Serialize};
use slurm_proto::{JobId, JobRecord};
use std::collections::BTreeMap;
use std::fs::{File, OpenOptions};
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// A job's batch script and environment, kept apart from the record so the
/// queue listings stay small.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Payload {
    pub script: String,
    pub environment: Vec<String>,
}

/// Admin-set node state that survives restarts.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct NodeAdmin {
    pub drain: bool,
    /// Set DOWN by an admin or by a failure (not by config).
    pub down: bool,
    pub reason: Option<String>,
    pub reason_time: Option<i64>,
    pub reason_uid: Option<u32>,
    /// Features set at run time (replacing the configured ones).
    #[serde(default)]
    pub features: Option<Vec<String>>,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub enum Entry {
    Job(Arc<JobRecord>),
    Payload(JobId, Arc<Payload>),
    RemoveJob(JobId),
    Node(String, NodeAdmin),
    NextJobId(u32),
    Reservation(slurm_proto::ReservationRecord),
    RemoveReservation(String),
    DynNode(slurm_proto::NodeSpec),
    RemoveNode(String),
    /// An accounting record queued for slurmdbd.
    Acct(Box<slurm_proto::acct::SeqRecord>),
    /// slurmdbd has every record up to this seq.
    AcctAcked(u64),
}

/// Everything recovered at start-up.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct Saved {
    pub next_job_id: u32,
    pub jobs: BTreeMap<JobId, Arc<JobRecord>>,
    pub payloads: BTreeMap<JobId, Arc<Payload>>,
    pub nodes: BTreeMap<String, NodeAdmin>,
    #[serde(default)]
    pub reservations: BTreeMap<String, slurm_proto::ReservationRecord>,
    /// Nodes created at run time (`scontrol create NodeName=...`).
    #[serde(default)]
    pub dyn_nodes: BTreeMap<String, slurm_proto::NodeSpec>,
    /// The accounting outbox.
    #[serde(default)]
    pub acct: crate::acct::AcctQueue,
}

impl Saved {
    pub fn apply(&mut self, e: Entry) {
        match e {
            Entry::Job(j) => {
                self.jobs.insert(j.job_id, j);
            }
            Entry::Payload(id, p) => {
                self.payloads.insert(id, p);
            }
            Entry::RemoveJob(id) => {
                self.jobs.remove(&id);
                self.payloads.remove(&id);
            }
            Entry::Node(n, a) => {
                self.nodes.insert(n, a);
            }
            Entry::NextJobId(n) => self.next_job_id = n,
            Entry::Reservation(r) => {
                self.reservations.insert(r.name.clone(), r);
            }
            Entry::RemoveReservation(n) => {
                self.reservations.remove(&n);
            }
            Entry::DynNode(n) => {
                self.dyn_nodes.insert(n.name.clone(), n);
            }
            Entry::RemoveNode(n) => {
                self.dyn_nodes.remove(&n);
            }
            Entry::Acct(r) => self.acct.push(*r),
            Entry::AcctAcked(n) => self.acct.acked(n),
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum JournalError {
    #[error("{path}: {source}")]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{path}:{line}: corrupt state entry ({msg}); start with -i to skip it")]
    Corrupt {
        path: PathBuf,
        line: usize,
        msg: String,
    },
}

fn io(path: &Path) -> impl FnOnce(std::io::Error) -> JournalError + '_ {
    move |source| JournalError::Io {
        path: path.to_path_buf(),
        source,
    }
}

pub struct Journal {
    dir: PathBuf,
    file: File,
    /// Bytes appended since the last snapshot.
    pub size: u64,
    buf: Vec<u8>,
}

impl Journal {
    /// Recover state from `dir` (creating it) and open a fresh journal.
    /// `ignore_errors` skips corrupt entries (`slurmctld -i`); `clear`
    /// discards saved jobs (`slurmctld -c`).
    pub fn open(
        dir: &Path,
        ignore_errors: bool,
        clear: bool,
    ) -> Result<(Journal, Saved), JournalError> {
        std::fs::create_dir_all(dir).map_err(io(dir))?;
        let snap = dir.join("state.json");
        let jpath = dir.join("journal.log");
        let mut saved = match std::fs::read(&snap) {
            Ok(b) => serde_json::from_slice(&b).map_err(|e| JournalError::Corrupt {
                path: snap.clone(),
                line: 1,
                msg: e.to_string(),
            }),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(Saved::default()),
            Err(e) => Err(io(&snap)(e)),
        };
        if ignore_errors {
            saved = saved.or_else(|_| Ok(Saved::default()));
        }
        let mut saved = saved?;
        match File::open(&jpath) {
            Ok(f) => {
                let lines: Vec<String> = BufReader::new(f)
                    .lines()
                    .collect::<Result<_, _>>()
                    .map_err(io(&jpath))?;
                let n = lines.len();
                for (i, l) in lines.into_iter().enumerate() {
                    if l.trim().is_empty() {
                        continue;
                    }
                    match serde_json::from_str::<Entry>(&l) {
                        Ok(e) => saved.apply(e),
                        // A torn final line is what a crash mid-append leaves.
                        Err(_) if i + 1 == n => {}
                        Err(_) if ignore_errors => {}
                        Err(e) => {
                            return Err(JournalError::Corrupt {
                                path: jpath.clone(),
                                line: i + 1,
                                msg: e.to_string(),
                            })
                        }
                    }
                }
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return Err(io(&jpath)(e)),
        }
        if clear {
            saved.jobs.clear();
            saved.payloads.clear();
        }
        write_snapshot(dir, &saved)?;
        let file = OpenOptions::new()
            .create(true)
            .write(true)
            .truncate(true)
            .open(&jpath)
            .map_err(io(&jpath))?;
        file.sync_all().map_err(io(&jpath))?;
        Ok((
            Journal {
                dir: dir.to_path_buf(),
                file,
                size: 0,
                buf: Vec::new(),
            },
            saved,
        ))
    }

    /// Queue an entry; it is durable after the next [`Journal::commit`].
    pub fn append(&mut self, e: &Entry) {
        if serde_json::to_writer(&mut self.buf, e).is_ok() {
            self.buf.push(b'\n');
        }
    }

    pub fn pending(&self) -> bool {
        !self.buf.is_empty()
    }

    /// Write and sync everything queued (one fdatasync for the whole batch).
    pub fn commit(&mut self) -> Result<(), JournalError> {
        if self.buf.is_empty() {
            return Ok(());
        }
        let path = self.dir.join("journal.log");
        self.file.write_all(&self.buf).map_err(io(&path))?;
        self.file.sync_data().map_err(io(&path))?;
        self.size += self.buf.len() as u64;
        self.buf.clear();
        Ok(())
    }

    /// Replace snapshot + journal by a snapshot of `saved`.
    pub fn compact(&mut self, saved: &Saved) -> Result<(), JournalError> {
        self.commit()?;
        write_snapshot(&self.dir, saved)?;
        let path = self.dir.join("journal.log");
        self.file.set_len(0).map_err(io(&path))?;
        self.file.sync_all().map_err(io(&path))?;
        self.size = 0;
        Ok(())
    }
}

fn write_snapshot(dir: &Path, saved: &Saved) -> Result<(), JournalError> {
    let tmp = dir.join("state.json.new");
    let fin = dir.join("state.json");
    let body = serde_json::to_vec(saved).map_err(|e| io(&tmp)(std::io::Error::other(e)))?;
    let mut f = File::create(&tmp).map_err(io(&tmp))?;
    f.write_all(&body).map_err(io(&tmp))?;
    f.sync_all().map_err(io(&tmp))?;
    std::fs::rename(&tmp, &fin).map_err(io(&fin))?;
    if let Ok(d) = File::open(dir) {
        let _ = d.sync_all();
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn entries_survive_reopen_and_torn_tail_is_dropped() {
        let d = tempfile::tempdir().unwrap();
        let (mut j, s) = Journal::open(d.path(), false, false).unwrap();
        assert_eq!(s, Saved::default());
        j.append(&Entry::NextJobId(5));
        j.append(&Entry::Node(
            "n1".into(),
            NodeAdmin {
                drain: true,
                ..Default::default()
            },
        ));
        j.commit().unwrap();
        drop(j);
        // A crash mid-append leaves half a line.
        let mut f = OpenOptions::new()
            .append(true)
            .open(d.path().join("journal.log"))
            .unwrap();
        f.write_all(b"{\"NextJobId\":").unwrap();
        let (_, s) = Journal::open(d.path(), false, false).unwrap();
        assert_eq!(s.next_job_id, 5);
        assert!(s.nodes["n1"].drain);
    }

    #[test]
    fn corrupt_middle_entry_is_an_error_unless_ignored() {
        let d = tempfile::tempdir().unwrap();
        std::fs::write(d.path().join("journal.log"), "garbage\n{\"NextJobId\":9}\n").unwrap();
        let e = Journal::open(d.path(), false, false).err().unwrap();
        assert!(e.to_string().contains("journal.log:1"), "{e}");
        let (_, s) = Journal::open(d.path(), true, false).unwrap();
        assert_eq!(s.next_job_id, 9);
    }
}
