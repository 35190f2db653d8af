//! Mail about jobs: `--mail-type`/`--mail-user` through slurm.conf's
//! `MailProg` (default `/bin/mail`) and `MailDomain`, as Slurm's controller
//! sends it: `MailProg -s "Slurm Job_id=12 Name=x Began, Queued time 00:00:01"
//! user`, an empty body, and the job's facts in `SLURM_JOB_*` variables.
//!
//! The mailer reads the published snapshots (never the writer's state): it
//! remembers each job's last state and mails on a change, so a controller
//! run mails each event once. Jobs already there when a controller run
//! starts (its first snapshot) are taken as seen: a restart never mails
//! again about what happened before it. Every ten seconds it also looks at
//! running jobs for `TIME_LIMIT_50/80/90`. `MailProg` runs without a shell
//! (its arguments cannot be read as a command line) and is killed after a
//! minute.

use crate::inbox::Board;
use crate::state::Snapshot;
use slurm_common::mail::has;
use slurm_common::timefmt::format_duration_hms as format_elapsed;
use slurm_proto::{JobReason, JobRecord, JobState};
use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::time::Duration;

/// What the mailer remembers of a job.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Seen {
    state: JobState,
    restarts: u32,
    /// Time-limit percentages already mailed about (50, 80, 90).
    warned: Vec<u32>,
    invalid_depend: bool,
}

/// One mail: its subject, the recipient, the event named in
/// `SLURM_JOB_MAIL_TYPE`, the job.
#[derive(Debug, Clone, PartialEq)]
pub struct Mail {
    pub subject: String,
    pub to: String,
    pub kind: &'static str,
    pub job_id: u32,
    pub name: String,
    pub user: String,
    pub state: &'static str,
    pub work_dir: String,
}

fn clean(s: &str) -> String {
    s.chars().filter(|c| !c.is_control()).collect()
}

/// The job's mails for the change from `prev` (`None`: a job new since the
/// run's first snapshot) to `j`, at `now`. `array_first` says whether this
/// is the first task of its array to begin, `array_last` whether every
/// other task of its array has ended (for arrays mailed as a whole).
pub fn events(
    prev: Option<&Seen>,
    j: &JobRecord,
    now: i64,
    array_first: bool,
    array_last: bool,
    domain: Option<&str>,
) -> (Vec<Mail>, Seen) {
    let mut seen = prev.cloned().unwrap_or(Seen {
        state: JobState::Pending,
        ..Default::default()
    });
    let mut out = Vec::new();
    let Some(types) = j.desc.mail_type.as_deref() else {
        seen.state = j.state;
        seen.restarts = j.restarts;
        return (out, seen);
    };
    let per_task = j.array.is_none() || has(types, "ARRAY_TASKS");
    let to = match j.desc.mail_user.as_deref() {
        Some(u) if u.contains('@') => u.to_string(),
        Some(u) => with_domain(u, domain),
        None => with_domain(&j.user_name, domain),
    };
    let name = clean(&j.name);
    let id_text = match (&j.array, per_task) {
        (Some(a), false) => format!("Array Summary Job_id={}_* ({})", a.job_id, a.job_id),
        _ => format!("Job_id={}", j.display_id()),
    };
    let run_time = j
        .start_time
        .map(|s| j.end_time.unwrap_or(now).saturating_sub(s) - j.suspended_secs)
        .unwrap_or(0)
        .max(0);
    let mut mail = |kind: &'static str, what: String| {
        out.push(Mail {
            subject: format!("Slurm {id_text} Name={name} {what}"),
            to: to.clone(),
            kind,
            job_id: j.job_id,
            name: name.clone(),
            user: j.user_name.clone(),
            state: j.state.name(),
            work_dir: j.desc.work_dir.clone(),
        });
    };
    let started = matches!(j.state, JobState::Running | JobState::Suspended)
        || (j.state.is_finished() && j.start_time.is_some());
    let was_started = matches!(seen.state, JobState::Running | JobState::Suspended);
    if started
        && seen.state == JobState::Pending
        && has(types, "BEGIN")
        && (per_task || array_first)
    {
        let queued = j.start_time.unwrap_or(now) - j.submit_time;
        mail(
            "BEGIN",
            format!("Began, Queued time {}", format_elapsed(queued.max(0))),
        );
    }
    if j.restarts > seen.restarts && has(types, "REQUEUE") {
        mail(
            "REQUEUE",
            format!("Failed, Run time {}, REQUEUED", format_elapsed(run_time)),
        );
    }
    if j.state.is_finished() && !seen.state.is_finished() && (per_task || array_last) {
        let (code, _) = j.exit_code_pair();
        let failed = j.state != JobState::Completed;
        if j.state == JobState::Timeout && has(types, "TIME_LIMIT") {
            mail(
                "TIME_LIMIT",
                format!("Reached time limit, Run time {}", format_elapsed(run_time)),
            );
        }
        if has(types, "END") || (failed && has(types, "FAIL")) {
            let (kind, word) = if has(types, "END") {
                ("END", "Ended")
            } else {
                ("FAIL", "Failed")
            };
            mail(
                kind,
                format!(
                    "{word}, Run time {}, {}, ExitCode {code}",
                    format_elapsed(run_time),
                    j.state.name()
                ),
            );
        }
    }
    if j.state == JobState::Running && was_started {
        if let (Some(limit), Some(start)) = (j.time_limit, j.start_time) {
            let limit = i64::from(limit) * 60;
            let elapsed = now - start - j.suspended_secs;
            for pct in [90u32, 80, 50] {
                let kind = match pct {
                    90 => "TIME_LIMIT_90",
                    80 => "TIME_LIMIT_80",
                    _ => "TIME_LIMIT_50",
                };
                if limit > 0
                    && elapsed * 100 >= limit * i64::from(pct)
                    && has(types, kind)
                    && !seen.warned.contains(&pct)
                {
                    seen.warned.push(pct);
                    mail(
                        kind,
                        format!(
                            "Reached {pct}% of time limit, Run time {}",
                            format_elapsed(elapsed.max(0))
                        ),
                    );
                    // The highest percentage reached says it all.
                    break;
                }
            }
        }
    }
    let never = j.state == JobState::Pending && j.reason == JobReason::DependencyNeverSatisfied;
    if never && !seen.invalid_depend && has(types, "INVALID_DEPEND") {
        mail("INVALID_DEPEND", "Invalid dependency".to_string());
    }
    seen.invalid_depend = never;
    seen.state = j.state;
    seen.restarts = j.restarts;
    (out, seen)
}

fn with_domain(user: &str, domain: Option<&str>) -> String {
    match domain {
        Some(d) if !d.is_empty() => format!("{user}@{d}"),
        _ => user.to_string(),
    }
}

/// The mailer's memory across snapshots.
#[derive(Default)]
pub struct Mailer {
    seen: HashMap<u32, Seen>,
    /// The controller run the memory is of, and the version last read.
    epoch: Option<u64>,
    version: u64,
    /// Arrays (mailed as a whole) one of whose tasks has begun.
    began: HashSet<u32>,
    domain: Option<String>,
}

impl Mailer {
    pub fn new(domain: Option<String>) -> Mailer {
        Mailer {
            domain,
            ..Default::default()
        }
    }

    /// The mails `s` calls for; `tick` also looks at unchanged running jobs
    /// (for the time-limit percentages).
    pub fn read(&mut self, s: &Snapshot, now: i64, tick: bool) -> Vec<Mail> {
        if s.epoch == 0 {
            // A controller not (yet) in control publishes nothing real.
            return Vec::new();
        }
        let first = self.epoch != Some(s.epoch);
        if first {
            self.epoch = Some(s.epoch);
            self.seen.clear();
            self.began.clear();
            for j in &s.jobs {
                let (_, seen) = events(None, j, now, false, false, None);
                self.seen.insert(j.job_id, seen);
                if let Some(a) = j.array.as_ref().filter(|_| j.start_time.is_some()) {
                    self.began.insert(a.job_id);
                }
            }
            self.version = s.version;
            return Vec::new();
        }
        let since = self.version;
        self.version = s.version;
        let stamps_usable = s.job_changed.len() == s.jobs.len();
        let mut out = Vec::new();
        // Unended tasks per array, counted once if an array task needs it.
        let mut unended: Option<HashMap<u32, usize>> = None;
        for (k, j) in s.jobs.iter().enumerate() {
            let changed = !stamps_usable || s.job_changed[k] > since;
            // Most jobs ask for no mail: nothing to look up for them (a
            // job that stopped asking changed, and is forgotten).
            if j.desc.mail_type.is_none() {
                if changed {
                    self.seen.remove(&j.job_id);
                }
                continue;
            }
            let prev = self.seen.get(&j.job_id);
            let look = changed || (tick && j.state == JobState::Running) || prev.is_none();
            if !look {
                continue;
            }
            let (first_task, last_task) = match &j.array {
                Some(a) => {
                    let first_task = j.start_time.is_some() && !self.began.contains(&a.job_id);
                    let counts = unended.get_or_insert_with(|| {
                        let mut m: HashMap<u32, usize> = HashMap::new();
                        for o in s.jobs.iter().filter(|o| !o.state.is_finished()) {
                            if let Some(oa) = &o.array {
                                *m.entry(oa.job_id).or_default() += 1;
                            }
                        }
                        m
                    });
                    let left = counts.get(&a.job_id).copied().unwrap_or(0);
                    // Every other task has ended (this one counts if it has not).
                    let others_done = left == usize::from(!j.state.is_finished());
                    (first_task, others_done)
                }
                None => (false, false),
            };
            let (mails, seen) = events(prev, j, now, first_task, last_task, self.domain.as_deref());
            if let Some(a) = j.array.as_ref().filter(|_| j.start_time.is_some()) {
                self.began.insert(a.job_id);
            }
            out.extend(mails);
            self.seen.insert(j.job_id, seen);
        }
        // Jobs purged from the controller are forgotten (the snapshot's jobs
        // are in id order; only jobs that asked for mail are kept here).
        self.seen
            .retain(|id, _| s.jobs.binary_search_by_key(id, |j| j.job_id).is_ok());
        out
    }
}

/// Runs `prog -s SUBJECT TO` for `m` (an empty body), killed after a minute.
pub async fn send(prog: &str, m: Mail) {
    let mut cmd = tokio::process::Command::new(prog);
    cmd.arg("-s")
        .arg(&m.subject)
        .arg(&m.to)
        .env("SLURM_JOB_ID", m.job_id.to_string())
        .env("SLURM_JOB_NAME", &m.name)
        .env("SLURM_JOB_USER", &m.user)
        .env("SLURM_JOB_STATE", m.state)
        .env("SLURM_JOB_MAIL_TYPE", mail_type_name(m.kind))
        .env("SLURM_JOB_WORK_DIR", &m.work_dir)
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .kill_on_drop(true);
    let child = match cmd.spawn() {
        Ok(c) => c,
        Err(e) => {
            tracing::warn!(job = m.job_id, "cannot run MailProg {prog}: {e}");
            return;
        }
    };
    match tokio::time::timeout(Duration::from_secs(60), child.wait_with_output()).await {
        Ok(Ok(o)) if !o.status.success() => {
            tracing::warn!(job = m.job_id, "MailProg {prog} failed: {}", o.status)
        }
        Ok(_) => {}
        Err(_) => tracing::warn!(job = m.job_id, "MailProg {prog} took over a minute: killed"),
    }
}

/// `SLURM_JOB_MAIL_TYPE` as Slurm names the event.
fn mail_type_name(kind: &str) -> &'static str {
    match kind {
        "BEGIN" => "Began",
        "END" => "Ended",
        "FAIL" => "Failed",
        "REQUEUE" => "Requeued",
        "TIME_LIMIT" => "Reached time limit",
        "TIME_LIMIT_90" => "Reached 90% of time limit",
        "TIME_LIMIT_80" => "Reached 80% of time limit",
        "TIME_LIMIT_50" => "Reached 50% of time limit",
        "INVALID_DEPEND" => "Invalid dependency",
        _ => "Unknown",
    }
}

/// The mailer: reads each published snapshot (and every ten seconds the
/// latest) and sends what they call for.
pub async fn run(board: Arc<Board>, prog: String, domain: Option<String>) {
    let mut mailer = Mailer::new(domain);
    loop {
        let next = board.next();
        tokio::pin!(next);
        next.as_mut().enable();
        let s = board.latest();
        let mails = mailer.read(&s, slurm_common::auth::now(), true);
        for m in mails {
            tokio::spawn(send_owned(prog.clone(), m));
        }
        tokio::select! {
            _ = &mut next => {}
            _ = tokio::time::sleep(Duration::from_secs(10)) => {}
        }
    }
}

async fn send_owned(prog: String, m: Mail) {
    send(&prog, m).await
}

#[cfg(test)]
mod tests {
    use super::*;

    fn job(types: &str, state: JobState) -> JobRecord {
        let mut j = JobRecord {
            job_id: 12,
            name: "train\nx".into(),
            user_name: "alice".into(),
            state,
            submit_time: 100,
            ..Default::default()
        };
        Arc::make_mut(&mut j.desc).mail_type = Some(types.into());
        j
    }

    #[test]
    fn begin_end_and_failures_are_mailed_once_each() {
        let mut j = job("BEGIN,END", JobState::Running);
        j.start_time = Some(103);
        let (m, seen) = events(None, &j, 105, false, false, Some("example.org"));
        assert_eq!(m.len(), 1);
        assert_eq!(
            m[0].subject,
            "Slurm Job_id=12 Name=trainx Began, Queued time 00:00:03"
        );
        assert_eq!(m[0].to, "alice@example.org");
        // The same state again: nothing.
        let (m, seen) = events(Some(&seen), &j, 106, false, false, None);
        assert!(m.is_empty());
        j.state = JobState::Failed;
        j.end_time = Some(110);
        j.exit_status = 3 << 8;
        let (m, _) = events(Some(&seen), &j, 111, false, false, None);
        assert_eq!(m.len(), 1);
        assert_eq!(
            m[0].subject,
            "Slurm Job_id=12 Name=trainx Ended, Run time 00:00:07, FAILED, ExitCode 3"
        );
        // FAIL alone: only a failure is mailed.
        let mut ok = job("FAIL", JobState::Completed);
        ok.start_time = Some(1);
        assert!(events(None, &ok, 5, false, false, None).0.is_empty());
        let mut bad = job("FAIL", JobState::NodeFail);
        bad.start_time = Some(1);
        let (m, _) = events(None, &bad, 5, false, false, None);
        assert!(m[0].subject.contains("Failed, Run time"), "{m:?}");
    }

    #[test]
    fn time_limit_percentages_requeues_and_no_mail_type() {
        let mut j = job("TIME_LIMIT_50,TIME_LIMIT_90,REQUEUE", JobState::Running);
        j.start_time = Some(0);
        j.time_limit = Some(10);
        let seen = Seen {
            state: JobState::Running,
            ..Default::default()
        };
        let (m, seen) = events(Some(&seen), &j, 299, false, false, None);
        assert!(m.is_empty());
        let (m, seen) = events(Some(&seen), &j, 300, false, false, None);
        assert_eq!(m[0].kind, "TIME_LIMIT_50");
        let (m, seen) = events(Some(&seen), &j, 400, false, false, None);
        assert!(m.is_empty());
        let (m, seen) = events(Some(&seen), &j, 540, false, false, None);
        assert_eq!(m[0].kind, "TIME_LIMIT_90");
        j.restarts = 1;
        j.state = JobState::Pending;
        let (m, _) = events(Some(&seen), &j, 541, false, false, None);
        assert_eq!(m[0].kind, "REQUEUE");
        let mut plain = job("x", JobState::Running);
        Arc::make_mut(&mut plain.desc).mail_type = None;
        assert!(events(None, &plain, 1, false, false, None).0.is_empty());
    }

    #[test]
    fn the_mailer_reads_snapshots_and_mails_an_array_once() {
        let task = |id: u32, t: u32, state: JobState| {
            let mut j = job("BEGIN,END", state);
            j.job_id = id;
            j.start_time = (state != JobState::Pending).then_some(101);
            j.array = Some(slurm_proto::ArrayInfo {
                job_id: 20,
                task_id: t,
                task_count: 2,
                task_min: 1,
                task_max: 2,
                task_step: None,
                max_running: None,
            });
            j
        };
        let snap = |jobs: Vec<JobRecord>, version: u64| Snapshot {
            job_changed: std::iter::repeat_n(version, jobs.len()).collect(),
            jobs: jobs.into_iter().map(Arc::new).collect(),
            epoch: 7,
            version,
            ..Default::default()
        };
        let kinds = |m: Vec<Mail>| m.into_iter().map(|m| m.kind).collect::<Vec<_>>();
        let mut m = Mailer::new(None);
        use JobState::*;
        // A standby controller's empty picture, then the first real one:
        // taken as seen.
        assert!(m.read(&Snapshot::default(), 0, false).is_empty());
        let first = snap(vec![task(20, 1, Pending), task(21, 2, Pending)], 1);
        assert!(m.read(&first, 0, false).is_empty());
        let both_run = snap(vec![task(20, 1, Running), task(21, 2, Running)], 2);
        assert_eq!(kinds(m.read(&both_run, 0, false)), ["BEGIN"]);
        let one_ends = snap(vec![task(20, 1, Completed), task(21, 2, Running)], 3);
        assert!(m.read(&one_ends, 0, false).is_empty());
        let both_end = snap(vec![task(20, 1, Completed), task(21, 2, Completed)], 4);
        assert_eq!(kinds(m.read(&both_end, 0, false)), ["END"]);
        // The same snapshot again, or an unchanged one: nothing more.
        assert!(m.read(&both_end, 0, true).is_empty());
    }

    #[test]
    fn an_array_is_mailed_as_a_whole_unless_array_tasks() {
        let mut t = job("BEGIN,END", JobState::Running);
        t.start_time = Some(101);
        t.array = Some(slurm_proto::ArrayInfo {
            job_id: 12,
            task_id: 1,
            task_count: 2,
            task_min: 1,
            task_max: 2,
            task_step: None,
            max_running: None,
        });
        // Not the first task to begin: no mail; the first: one.
        assert!(events(None, &t, 102, false, false, None).0.is_empty());
        let (m, _) = events(None, &t, 102, true, false, None);
        assert!(m[0]
            .subject
            .starts_with("Slurm Array Summary Job_id=12_* (12)"));
        // Ended, but another task runs on: no mail.
        t.state = JobState::Completed;
        let run = Seen {
            state: JobState::Running,
            ..Default::default()
        };
        assert!(events(Some(&run), &t, 103, false, false, None).0.is_empty());
        assert_eq!(events(Some(&run), &t, 103, false, true, None).0.len(), 1);
        // ARRAY_TASKS: each task on its own.
        Arc::make_mut(&mut t.desc).mail_type = Some("END,ARRAY_TASKS".into());
        let (m, _) = events(Some(&run), &t, 103, false, false, None);
        assert!(m[0].subject.starts_with("Slurm Job_id=12_1 Name="), "{m:?}");
    }
}
