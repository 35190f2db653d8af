//! The single writer: a plain thread that owns the [`Controller`] and the
//! [`Journal`]. It takes commands in batches, applies them in order, runs a
//! scheduling pass when something changed, makes the batch durable with one
//! sync, and only then replies, dispatches effects and publishes a snapshot.

use crate::agent::Agent;
use crate::inbox::{Command, Published, Shared};
use crate::journal::Journal;
use crate::state::Controller;
use slurm_proto::{RequestBody, Response};
use std::sync::mpsc::{Receiver, RecvTimeoutError};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Compact the journal into a snapshot past this size (by default;
/// `SlurmctldParameters=journal_compact_bytes=N` sets another).
pub const COMPACT_BYTES: u64 = 64 << 20;
const MAX_BATCH: usize = 1024;

/// About what a command adds to the journal: a submission its script and
/// environment, anything else a small record.
fn journal_bytes(c: &Command) -> u64 {
    let small = 512;
    match c {
        Command::Rpc { body, .. } => match body.as_ref() {
            RequestBody::SubmitBatchJob(d) | RequestBody::AllocateJob(d) => {
                let env: usize = d.environment.iter().map(|e| e.len() + 8).sum();
                let argv: usize = d.argv.iter().map(|a| a.len() + 8).sum();
                (d.script.len() + env + argv) as u64 + small
            }
            _ => small,
        },
        _ => small,
    }
}

/// Why a batch was not made durable.
#[derive(Debug)]
pub enum NotSaved {
    /// Not now (a full disk): the same batch is tried again.
    Retry(String),
    /// This controller is no longer in control (the other controllers
    /// chose another): nothing of the batch may be acknowledged or acted
    /// on, and the writer stops.
    Deposed(String),
}

/// Where the writer makes its batches durable: the journal in
/// `StateSaveLocation`, or the controllers' agreement
/// ([`crate::replica::Replicated`]).
pub trait Durable {
    /// Queue an entry; durable after the next [`Durable::commit`].
    fn append(&mut self, e: crate::journal::Entry);
    /// Make everything queued durable, as one batch.
    fn commit(&mut self) -> Result<(), NotSaved>;
    /// Whether new work may be taken (see [`Journal::check_space`]).
    fn check_space(&mut self) -> Result<(), String>;
    /// Bytes kept for the changes of work already taken (0: none).
    fn reserve(&self) -> u64;
    /// After a batch: compact what has grown (`saved`: the state now).
    fn after_batch(&mut self, saved: &crate::journal::Saved);
    /// Whether this controller may still act as in control (with
    /// replicated state: still chosen, and heard by a majority).
    fn in_control(&self) -> Result<(), String> {
        Ok(())
    }
}

/// The journal in `StateSaveLocation`, compacted past `compact_bytes`.
pub struct Local {
    pub journal: Journal,
    pub compact_bytes: u64,
    compact_after: Instant,
}

impl Local {
    pub fn new(journal: Journal, compact_bytes: u64) -> Local {
        Local {
            journal,
            compact_bytes,
            compact_after: Instant::now(),
        }
    }
}

impl Durable for Local {
    fn append(&mut self, e: crate::journal::Entry) {
        self.journal.append(&e);
    }

    fn commit(&mut self) -> Result<(), NotSaved> {
        self.journal
            .commit()
            .map_err(|e| NotSaved::Retry(e.to_string()))
    }

    fn check_space(&mut self) -> Result<(), String> {
        self.journal.check_space()
    }

    fn reserve(&self) -> u64 {
        self.journal.reserve()
    }

    fn after_batch(&mut self, saved: &crate::journal::Saved) {
        if self.journal.size > self.compact_bytes && Instant::now() >= self.compact_after {
            // A failed compaction (no room for the snapshot) leaves the
            // journal as it was; try again a little later.
            if let Err(e) = self.journal.compact(saved) {
                tracing::error!("cannot compact state: {e}; will try again in 30 s");
                self.compact_after = Instant::now() + Duration::from_secs(30);
            }
        }
    }
}

/// How the writer ended.
#[derive(Debug, PartialEq, Eq)]
pub enum Ended {
    /// Told to stop ([`Command::Shutdown`]) or every sender gone.
    Stopped,
    /// No longer in control ([`NotSaved::Deposed`]).
    Deposed,
}

pub fn run(
    mut ctl: Controller,
    mut journal: impl Durable,
    rx: Receiver<Command>,
    published: Published,
    agent: Agent,
    shared: Shared,
) -> Ended {
    let tick = Duration::from_secs(1);
    let mut version = 0u64;
    // Tells this run's versions from another's (clients cache by both).
    let epoch = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos() as u64)
        .unwrap_or(1)
        | 1;
    ctl.set_run_id(epoch);
    let mut next_tick = Instant::now() + tick;
    let mut clock = crate::clock::StepDetector::new(crate::clock::wall_ms(), Instant::now());
    loop {
        let wait = next_tick.saturating_duration_since(Instant::now());
        let mut batch = Vec::new();
        match rx.recv_timeout(wait) {
            Ok(c) => batch.push(c),
            Err(RecvTimeoutError::Timeout) => {}
            Err(RecvTimeoutError::Disconnected) => return Ended::Stopped,
        }
        // A batch is written whole or not at all: keep it well within the
        // journal's reserve, so on a full disk the reserve always holds
        // the next batch (one larger than the reserve would be retried
        // forever).
        let limit = match journal.reserve() {
            0 => u64::MAX,
            r => r / 4,
        };
        let mut bytes: u64 = batch.iter().map(journal_bytes).sum();
        while batch.len() < MAX_BATCH && bytes < limit {
            match rx.try_recv() {
                Ok(c) => {
                    bytes += journal_bytes(&c);
                    batch.push(c);
                }
                Err(_) => break,
            }
        }
        if let Err(why) = journal.in_control() {
            tracing::error!("no longer in control: {why}");
            return Ended::Deposed;
        }
        let now = slurm_common::auth::now();
        if let Some(step) = clock.observe(crate::clock::wall_ms(), Instant::now()) {
            tracing::warn!(
                "the system clock stepped by {step} s: running jobs' times and nodes' last \
                 contact move with it"
            );
            ctl.clock_stepped(step);
        }
        // A full StateSaveLocation stops new work, never the controller.
        match journal.check_space() {
            Ok(()) => {
                if ctl.space_low.take().is_some() {
                    tracing::info!("StateSaveLocation has room again: taking new work");
                }
            }
            Err(m) => {
                if ctl.space_low.is_none() {
                    tracing::error!("{m}: refusing new work until space returns");
                }
                ctl.space_low = Some(m);
            }
        }
        let mut replies = Vec::with_capacity(batch.len());
        let mut shutdown = false;
        // The counters sdiag reads changed (a pass, or `sdiag -r`).
        let mut stats_changed = false;
        for c in batch {
            match c {
                Command::Rpc {
                    uid,
                    gid,
                    body,
                    identity,
                    reply,
                } => {
                    if let Some(id) = identity {
                        ctl.identify(uid, gid, *id);
                    }
                    let who = ctl.caller(uid, gid);
                    replies.push((reply, ctl.handle(who, *body, now)));
                }
                Command::Reconfigure {
                    uid,
                    gid,
                    identity,
                    read,
                    reply,
                } => {
                    if let Some(id) = identity {
                        ctl.identify(uid, gid, *id);
                    }
                    let who = ctl.caller(uid, gid);
                    let r = ctl.reconfigure(who, *read, now);
                    replies.push((reply, r.unwrap_or_else(Response::Error)));
                }
                Command::LaunchFailed {
                    job_id,
                    node,
                    prolog_failed,
                    refused,
                    start_time,
                } => ctl.launch_failed(job_id, &node, prolog_failed, refused, start_time, now),
                Command::AcctAcked(n) => ctl.acct_acked(n),
                Command::AcctAssocs(c) => ctl.set_assocs(*c, now),
                Command::ResetStats => {
                    ctl.reset_stats(now);
                    stats_changed = true;
                }
                Command::Shutdown => shutdown = true,
            }
        }
        // Heartbeats answered meanwhile, before any node is judged silent.
        let taken = std::mem::take(&mut *shared.heard.lock().unwrap_or_else(|p| p.into_inner()));
        if !taken.is_empty() {
            ctl.heard_from(taken, now);
        }
        if Instant::now() >= next_tick {
            ctl.tick(now);
            next_tick = Instant::now() + tick;
        }
        if ctl.sched_needed {
            let t0 = Instant::now();
            let planned = ctl.schedule(now);
            ctl.pass_took(t0.elapsed().as_micros() as u64, planned);
            stats_changed = true;
        }
        if stats_changed {
            if let Ok(mut live) = shared.stats.lock() {
                live.clone_from(&ctl.stats);
            }
        }
        for e in ctl.take_entries() {
            journal.append(e);
        }
        // Nothing of this batch is acknowledged or sent on before it is
        // durable: on an error (the reserve used up on a full disk), wait
        // and try again rather than lose it.
        let mut delay = Duration::from_millis(100);
        let mut failures = 0u32;
        loop {
            let e = match journal.commit() {
                Ok(()) => break,
                Err(NotSaved::Deposed(why)) => {
                    tracing::error!("no longer in control: {why}");
                    return Ended::Deposed;
                }
                Err(NotSaved::Retry(e)) => e,
            };
            if failures.is_multiple_of(20) {
                tracing::error!("cannot save state: {e}; retrying until it can");
            }
            failures += 1;
            std::thread::sleep(delay);
            delay = (delay * 2).min(Duration::from_secs(2));
        }
        if failures > 0 {
            tracing::info!("state saved after {failures} failed tries");
        }
        // Publish before replying, so a client reads its own writes.
        if ctl.dirty {
            ctl.dirty = false;
            ctl.last_update = now;
            version += 1;
            let prev = published.latest();
            let mut snap = ctl.snapshot_after(Some(&*prev));
            snap.version = version;
            snap.epoch = epoch;
            snap.job_changed = crate::state::stamp_changes(
                Some((&prev.jobs, &prev.job_changed)),
                &snap.jobs,
                |j| j.job_id,
                version,
            );
            published.publish(Arc::new(snap));
        }
        for (reply, r) in replies {
            let _ = reply.send(r);
        }
        agent.dispatch_all(ctl.take_effects());
        // Accounting records leave only once durable here.
        for r in ctl.take_acct() {
            agent.account(r);
        }
        if let Some(records) = ctl.take_jobcomp() {
            agent.jobcomp(records);
        }
        journal.after_batch(&ctl.p);
        if shutdown {
            return Ended::Stopped;
        }
    }
}
