//! The state machine on its own: no sockets, no threads, no sleeps. The
//! clock is a number each test moves; node daemons and clients are the
//! requests they would send. Every test ends by replaying the journal
//! entries the controller made onto an empty saved state: it must reach
//! the controller's own, and a controller started from it must show the
//! same jobs.

use super::*;
use std::path::PathBuf;

const ROOT: Caller = Caller {
    uid: 0,
    gid: 0,
    privileged: true,
    operator: true,
    admin: true,
};
const ALICE: Caller = Caller {
    uid: 1000,
    gid: 1000,
    privileged: false,
    operator: false,
    admin: false,
};
const BOB: Caller = Caller {
    uid: 1001,
    gid: 1001,
    privileged: false,
    operator: false,
    admin: false,
};
const T0: i64 = 1_800_000_000;

/// A controller over two 2-CPU nodes, both registered.
struct Sim {
    ctl: Controller,
    replayed: Saved,
    /// Every journal entry made, in order.
    journaled: Vec<Entry>,
    effects: Vec<Effect>,
    now: i64,
    path: PathBuf,
    _dir: tempfile::TempDir,
}

fn conf_text(dir: &std::path::Path, extra: &str) -> String {
    format!(
        "ClusterName=unit\nSlurmctldHost=localhost\nStateSaveLocation={}\n\
         SlurmdTimeout=30\nMinJobAge=300\n\
         NodeName=n[1-2] CPUs=2 Sockets=1 CoresPerSocket=2 ThreadsPerCore=1 RealMemory=1000\n\
         PartitionName=debug Nodes=n[1-2] Default=YES MaxTime=60 State=UP\n{extra}",
        dir.display()
    )
}

fn scheduler(conf: &SlurmConf) -> Box<dyn Scheduler> {
    slurm_plugins::registry::scheduler_with_params(
        &conf.scheduler_type,
        conf.get("SchedulerParameters").unwrap_or(""),
    )
    .expect("scheduler")
    .plugin
}

fn sim(extra: &str) -> Sim {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("slurm.conf");
    std::fs::write(&path, conf_text(dir.path(), extra)).expect("write slurm.conf");
    let conf = SlurmConf::load(&path).expect("slurm.conf");
    let sched = scheduler(&conf);
    let mut ctl = Controller::new(Arc::new(conf), Saved::default(), sched, T0);
    // Names as the server would have looked them up: none come from the
    // machine's user database.
    for (who, name) in [(ALICE, "alice"), (BOB, "bob")] {
        ctl.identify(
            who.uid,
            who.gid,
            Identity {
                user: Some(name.into()),
                group: name.into(),
                groups: vec![name.into()],
            },
        );
    }
    // The journal replays onto what the controller starts from.
    let replayed = ctl.p.clone();
    let mut s = Sim {
        ctl,
        replayed,
        journaled: Vec::new(),
        effects: Vec::new(),
        now: T0,
        path,
        _dir: dir,
    };
    s.register("n1");
    s.register("n2");
    s
}

fn script() -> JobDesc {
    JobDesc {
        name: Some("t".into()),
        script: "#!/bin/sh\ntrue\n".into(),
        work_dir: "/tmp".into(),
        environment: vec!["PATH=/bin".into()],
        ..Default::default()
    }
}

impl Sim {
    /// What the writer does after a batch: a pass if one is due, the
    /// journal entries kept (here: replayed), effects and records taken.
    fn settle(&mut self) {
        if self.ctl.sched_needed {
            self.ctl.schedule(self.now);
        }
        for e in self.ctl.take_entries() {
            self.journaled.push(e.clone());
            self.replayed.apply(e);
        }
        self.effects.extend(self.ctl.take_effects());
        let _ = self.ctl.take_acct();
    }

    fn req(&mut self, who: Caller, body: RequestBody) -> Response {
        let r = self.ctl.handle(who, body, self.now);
        self.settle();
        r
    }

    fn ok(&mut self, who: Caller, body: RequestBody) {
        let r = self.req(who, body.clone());
        assert!(matches!(r, Response::Ok), "{body:?}: {r:?}");
    }

    fn tick(&mut self, secs: i64) {
        self.now += secs;
        self.ctl.tick(self.now);
        self.settle();
    }

    fn register(&mut self, node: &str) {
        self.register_booted(node, self.now - 100);
    }

    fn submit_as(&mut self, who: Caller, f: impl FnOnce(&mut JobDesc)) -> Result<JobId, RpcError> {
        let mut d = script();
        f(&mut d);
        match self.req(who, RequestBody::SubmitBatchJob(d)) {
            Response::Submitted { job_id, .. } => Ok(job_id),
            Response::Error(e) => Err(e),
            r => panic!("submit answered {r:?}"),
        }
    }

    fn submit(&mut self, f: impl FnOnce(&mut JobDesc)) -> JobId {
        self.submit_as(ALICE, f).expect("submitted")
    }

    fn job(&self, id: JobId) -> &JobRecord {
        self.ctl.p.jobs.get(&id).expect("job")
    }

    fn state(&self, id: JobId) -> JobState {
        self.job(id).state
    }

    fn launched(&self, id: JobId) -> bool {
        self.effects
            .iter()
            .any(|e| matches!(e, Effect::Launch { launch, .. } if launch.job_id == id))
    }

    /// The batch script of `id` ended with wait status `status`, and its
    /// processes are gone from every node.
    fn finish(&mut self, id: JobId, status: i32) {
        let nodes = self.job(id).alloc.nodes.clone();
        let node = nodes.first().cloned().expect("a running job has nodes");
        self.ok(
            ROOT,
            RequestBody::BatchComplete {
                job_id: id,
                node,
                status,
                oom: false,
                usage: None,
                job_start: self.job(id).start_time,
            },
        );
        for n in nodes {
            self.ok(
                ROOT,
                RequestBody::JobCleaned {
                    job_id: id,
                    node: n,
                    job_start: None,
                },
            );
        }
    }

    /// The journal replayed reaches the controller's saved state, and a
    /// controller started from it shows the same jobs. A pending job's
    /// reason and last evaluation are the scheduler's notes, written again
    /// by every pass and not journaled: they are left out (the last
    /// notable reason is journaled when it changes).
    fn check_replay(&self) {
        let notes = |p: &Saved| {
            let mut p = p.clone();
            for j in p.jobs.values_mut() {
                if j.state == JobState::Pending {
                    // Notes each pass makes again (the planned start too),
                    // never journaled.
                    let j = Arc::make_mut(j);
                    j.reason = JobReason::None;
                    j.last_sched_eval = None;
                    j.start_time = None;
                }
            }
            p
        };
        assert_eq!(
            notes(&self.replayed),
            notes(&self.ctl.p),
            "replayed journal differs"
        );
        let conf = self.ctl.conf.clone();
        let sched = scheduler(&conf);
        let again = Controller::new(conf, self.replayed.clone(), sched, self.now);
        let show = |c: &Controller| {
            c.snapshot()
                .jobs
                .iter()
                .map(|j| (j.job_id, j.state, j.alloc.nodes.clone(), j.exit_status))
                .collect::<Vec<_>>()
        };
        assert_eq!(show(&again), show(&self.ctl));
    }
}

#[test]
fn a_job_runs_on_a_free_node_and_completes() {
    let mut s = sim("");
    let id = s.submit(|_| {});
    assert_eq!(s.state(id), JobState::Running);
    assert!(s.launched(id), "its launch was sent");
    let j = s.job(id);
    assert_eq!(j.user_name, "alice");
    assert_eq!(j.group_name, "alice");
    assert_eq!(j.start_time, Some(T0));
    assert_eq!(j.alloc.nodes.len(), 1);
    s.now += 7;
    s.finish(id, 0);
    let j = s.job(id);
    assert_eq!((j.state, j.completing), (JobState::Completed, false));
    assert_eq!(j.end_time, Some(T0 + 7));
    // A script exiting 3 fails its job, with the code kept.
    let id2 = s.submit(|_| {});
    s.finish(id2, 3 << 8);
    assert_eq!(s.state(id2), JobState::Failed);
    assert_eq!(s.job(id2).exit_status, 3 << 8);
    // Ended jobs leave after MinJobAge.
    s.tick(301);
    assert!(!s.ctl.p.jobs.contains_key(&id));
    s.check_replay();
}

#[test]
fn jobs_wait_for_cores_and_start_when_they_free() {
    let mut s = sim("");
    let a = s.submit(|d| {
        d.min_nodes = Some(2);
        d.exclusive = true;
    });
    let b = s.submit(|_| {});
    assert_eq!(s.state(a), JobState::Running);
    assert_eq!(s.state(b), JobState::Pending);
    assert_eq!(s.job(b).reason, JobReason::Resources);
    s.now += 5;
    s.finish(a, 0);
    assert_eq!(s.state(b), JobState::Running);
    assert_eq!(s.job(b).start_time, Some(T0 + 5));
    s.check_replay();
}

/// The reservation records sent to accounting since the last call.
fn resv_records(s: &mut Sim) -> Vec<slurm_proto::acct::AcctResv> {
    let out = s
        .journaled
        .iter()
        .filter_map(|e| match e {
            Entry::Acct(r) => match &r.record {
                slurm_proto::acct::AcctRecord::Resv(v) => Some(v.clone()),
                _ => None,
            },
            _ => None,
        })
        .collect();
    s.journaled.clear();
    out
}

#[test]
fn reservations_reach_accounting_as_one_record_per_time_they_held_the_same_nodes() {
    let mut s = sim("");
    s.ctl.acct_enabled = true;
    let spec = |nodes: &str, start: i64, end: i64| ReservationSpec {
        name: Some("r1".into()),
        start_time: Some(start),
        end_time: Some(end),
        nodes: Some(nodes.split(',').map(String::from).collect()),
        users: Some(vec!["alice".into()]),
        ..Default::default()
    };
    let created = |s: &mut Sim, r| {
        let r = s.req(ROOT, RequestBody::CreateReservation(r));
        assert!(matches!(r, Response::ReservationCreated { .. }), "{r:?}");
    };
    let t = s.now;
    created(&mut s, spec("n1", t + 100, t + 1000));
    let r = resv_records(&mut s);
    assert_eq!(r.len(), 1, "{r:?}");
    assert_eq!((r[0].time_start, r[0].time_end), (t + 100, t + 1000));
    assert_eq!(
        (r[0].nodes.as_str(), r[0].cpus, r[0].users.as_str()),
        ("n1", 2, "alice")
    );
    // Moved before it began: the same record, at its new start.
    s.ok(
        ROOT,
        RequestBody::UpdateReservation(spec("n1", t + 200, t + 1000)),
    );
    let r = resv_records(&mut s);
    assert_eq!(r.len(), 1, "{r:?}");
    assert_eq!((r[0].time_start, r[0].prev_start), (t + 200, Some(t + 100)));
    // Given other nodes after it began: that record ends, the next begins.
    s.tick(300);
    let now = s.now;
    s.ok(
        ROOT,
        RequestBody::UpdateReservation(spec("n1,n2", t + 200, t + 1000)),
    );
    let r = resv_records(&mut s);
    assert_eq!(r.len(), 2, "{r:?}");
    assert_eq!(
        (r[0].time_start, r[0].time_end, r[0].cpus),
        (t + 200, now, 2)
    );
    assert_eq!(
        (r[1].time_start, r[1].time_end, r[1].cpus),
        (now, t + 1000, 4)
    );
    assert_eq!(r[1].nodes, "n[1-2]");
    // A later change of its end only changes the record it is in.
    s.tick(10);
    s.ok(
        ROOT,
        RequestBody::UpdateReservation(spec("n1,n2", t + 200, t + 2000)),
    );
    let r = resv_records(&mut s);
    assert_eq!(r.len(), 1, "{r:?}");
    assert_eq!(
        (r[0].time_start, r[0].time_end, r[0].prev_start),
        (now, t + 2000, Some(now))
    );
    // Other users after it began: a record of its own too (as Slurm's).
    s.tick(10);
    let later = s.now;
    let mut others = spec("n1,n2", t + 200, t + 2000);
    others.users = Some(vec!["bob".into()]);
    s.ok(ROOT, RequestBody::UpdateReservation(others));
    let r = resv_records(&mut s);
    assert_eq!(r.len(), 2, "{r:?}");
    assert_eq!((r[0].time_start, r[0].time_end), (now, later));
    assert_eq!((r[1].time_start, r[1].users.as_str()), (later, "bob"));
    s.check_replay();
    // Removed once begun: its record ends now.
    s.tick(10);
    s.ok(ROOT, RequestBody::DeleteReservation { name: "r1".into() });
    let r = resv_records(&mut s);
    assert_eq!(r.len(), 1, "{r:?}");
    assert_eq!(
        (r[0].time_start, r[0].time_end, r[0].removed),
        (later, s.now, false)
    );
    // Removed before it began: its record goes.
    let t = s.now;
    created(&mut s, spec("n2", t + 100, t + 200));
    s.ok(ROOT, RequestBody::DeleteReservation { name: "r1".into() });
    let r = resv_records(&mut s);
    assert_eq!(r.len(), 2, "{r:?}");
    assert!(r[1].removed && r[1].time_start == t + 100, "{r:?}");
    // An ordinary user can make none (and nothing reaches accounting).
    let r = s.req(
        ALICE,
        RequestBody::CreateReservation(spec("n2", t + 100, t + 200)),
    );
    assert!(matches!(r, Response::Error(_)), "{r:?}");
    assert!(resv_records(&mut s).is_empty());
}

#[test]
fn a_job_ended_and_requeued_in_one_batch_keeps_its_completion_record() {
    let mut s = sim("JobCompType=jobcomp/filetxt\nJobCompLoc=/nonexistent/jobcomp\n");
    let id = s.submit(|_| {});
    let _ = s.ctl.take_jobcomp();
    // Its end and a requeue reach the writer in one batch (no records are
    // taken between them).
    s.finish(id, 0);
    assert_eq!(s.state(id), JobState::Completed);
    s.ok(
        ROOT,
        RequestBody::UpdateJob {
            job_id: id,
            update: JobUpdate::Requeue,
        },
    );
    // (Back in the queue: it may have started again already.)
    assert_eq!(s.job(id).restarts, 1);
    let Some(slurm_common::jobcomp::Records::Lines(_, lines)) = s.ctl.take_jobcomp() else {
        panic!("the run that ended has no completion line");
    };
    assert_eq!(lines.len(), 1, "{lines:?}");
    assert!(lines[0].contains(" JobState=COMPLETED "), "{}", lines[0]);
    assert!(s.ctl.take_jobcomp().is_none());
}

#[test]
fn a_requeued_job_runs_again_and_counts_its_restart() {
    use slurm_proto::acct::AcctRecord;
    let mut s = sim("JobCompType=jobcomp/filetxt\nJobCompLoc=/nonexistent/jobcomp\n");
    s.ctl.acct_enabled = true;
    let id = s.submit(|_| {});
    let first = s.job(id).alloc.nodes[0].clone();
    let submitted = s.job(id).submit_time;
    let first_start = s.job(id).start_time;
    let _ = s.ctl.take_jobcomp();
    s.tick(5);
    s.ok(
        ROOT,
        RequestBody::UpdateJob {
            job_id: id,
            update: JobUpdate::Requeue,
        },
    );
    // Its processes are told to go; it waits for them, then runs again.
    assert!(s.effects.iter().any(
        |e| matches!(e, Effect::Terminate { job_id, node, .. } if *job_id == id && *node == first)
    ));
    // Accounting, as Slurm's: the run ends REQUEUED (its completion line
    // too), and the job takes a new submit time, so the next run is a
    // record of its own.
    let records: Vec<AcctRecord> = s
        .journaled
        .iter()
        .filter_map(|e| match e {
            Entry::Acct(r) => Some(r.record.clone()),
            _ => None,
        })
        .collect();
    let ended: Vec<_> = records
        .iter()
        .filter_map(|r| match r {
            AcctRecord::JobEnd(j) if j.job_id == id => Some(j),
            _ => None,
        })
        .collect();
    assert_eq!(ended.len(), 1, "{records:?}");
    assert_eq!(ended[0].state.0, JobState::Requeued);
    assert_eq!(ended[0].submit_time, submitted);
    assert_eq!(ended[0].end_time, Some(s.now));
    assert!(ended[0].start_time.is_some());
    let resubmitted = s.job(id).submit_time;
    assert_eq!(resubmitted, s.now);
    assert!(records.iter().any(|r| matches!(r,
        AcctRecord::JobStart(j) if j.job_id == id && j.submit_time == resubmitted
            && j.state.0 == JobState::Pending)));
    let Some(slurm_common::jobcomp::Records::Lines(_, lines)) = s.ctl.take_jobcomp() else {
        panic!("no completion line");
    };
    assert_eq!(lines.len(), 1, "{lines:?}");
    assert!(lines[0].contains(" JobState=REQUEUED "), "{}", lines[0]);
    s.ok(
        ROOT,
        RequestBody::JobCleaned {
            job_id: id,
            node: first,
            job_start: None,
        },
    );
    s.tick(1);
    let j = s.job(id);
    assert_eq!(j.restarts, 1);
    assert_eq!(j.state, JobState::Running, "{:?}", j.reason);
    // The next run has only its own steps (one batch step), and no step
    // record of the first run is sent under the new submit time.
    let batch_steps = j.steps.iter().filter(|st| st.step_id == BATCH_STEP).count();
    assert_eq!(batch_steps, 1, "{:?}", j.steps);
    // A late report of the first run's step ends nothing of this run's
    // step of the same number.
    let stale = |s: &mut Sim, job_start| {
        s.req(
            ALICE,
            RequestBody::StepComplete {
                job_id: id,
                step_id: BATCH_STEP,
                status: 9,
                job_start,
            },
        )
    };
    let r = stale(&mut s, first_start);
    assert!(
        matches!(&r, Response::Error(e) if e.error == SlurmError::AlreadyDone),
        "{r:?}"
    );
    let r = s.req(
        ROOT,
        RequestBody::StepUsage {
            job_id: id,
            step_id: BATCH_STEP,
            node: s.job(id).alloc.nodes[0].clone(),
            usage: Some(TaskUsage {
                cpu_usec: 123,
                ..Default::default()
            }),
            job_start: first_start,
        },
    );
    assert!(matches!(r, Response::Ok), "{r:?}");
    let b = s
        .job(id)
        .steps
        .iter()
        .find(|st| st.step_id == BATCH_STEP)
        .cloned();
    let b = b.expect("the batch step");
    assert_eq!((b.state, b.usage), (JobState::Running, None));
    let now_start = s.job(id).start_time;
    assert!(matches!(stale(&mut s, now_start), Response::Ok));
    let requeued_at = resubmitted;
    for e in &s.journaled {
        if let Entry::Acct(r) = e {
            if let AcctRecord::StepStart(st) | AcctRecord::StepEnd(st) = &r.record {
                if st.job_id == id && st.job_submit == resubmitted {
                    assert!(st.start_time >= requeued_at, "an old step resent: {st:?}");
                }
            }
        }
    }
    s.check_replay();
}

#[test]
fn a_late_report_of_a_requeued_run_does_not_end_the_next_run_on_the_same_node() {
    let mut s = sim("");
    let id = s.submit(|d| d.req_nodes = vec!["n1".into()]);
    let first_start = s.job(id).start_time;
    assert_eq!(first_start, Some(T0));
    // Requeued in the second it started: it may not start again in that
    // second, so its next run has a start time of its own.
    s.ok(
        ROOT,
        RequestBody::UpdateJob {
            job_id: id,
            update: JobUpdate::Requeue,
        },
    );
    let cleaned = |s: &mut Sim, job_start| {
        s.ok(
            ROOT,
            RequestBody::JobCleaned {
                job_id: id,
                node: "n1".into(),
                job_start,
            },
        )
    };
    cleaned(&mut s, first_start);
    assert_eq!(s.state(id), JobState::Pending);
    assert_eq!(s.job(id).reason, JobReason::BeginTime);
    s.tick(1);
    assert_eq!(s.state(id), JobState::Running);
    let second = s.job(id).start_time;
    assert_eq!(second, Some(T0 + 1));
    assert_eq!(s.job(id).batch_host.as_deref(), Some("n1"));
    // The first run's end, sent again by n1 (its answer was lost), is not
    // this run's.
    let ended = |s: &mut Sim, job_start, status| {
        s.ok(
            ROOT,
            RequestBody::BatchComplete {
                job_id: id,
                node: "n1".into(),
                status,
                oom: false,
                usage: None,
                job_start,
            },
        )
    };
    ended(&mut s, first_start, libc::SIGTERM);
    cleaned(&mut s, first_start);
    assert_eq!(s.state(id), JobState::Running);
    assert!(!s.job(id).completing);
    // Its own end is; while it completes, the first run's cleanup report
    // does not end its cleanup.
    ended(&mut s, second, 0);
    assert_eq!(s.state(id), JobState::Completed);
    assert!(s.job(id).completing);
    cleaned(&mut s, first_start);
    assert!(s.job(id).completing);
    cleaned(&mut s, second);
    assert!(!s.job(id).completing);
    // A report that names no run (an older node daemon) is taken as before.
    let other = s.submit(|d| d.req_nodes = vec!["n1".into()]);
    s.ok(
        ROOT,
        RequestBody::BatchComplete {
            job_id: other,
            node: "n1".into(),
            status: 256,
            oom: false,
            usage: None,
            job_start: None,
        },
    );
    assert_eq!(s.state(other), JobState::Failed);
    s.check_replay();
}

#[test]
fn a_requeued_job_cancelled_while_its_run_is_cleaned_up_still_finishes_cleaning() {
    let mut s = sim("");
    let id = s.submit(|d| d.req_nodes = vec!["n1".into()]);
    let run = s.job(id).run();
    s.now += 5;
    s.ok(
        ROOT,
        RequestBody::UpdateJob {
            job_id: id,
            update: JobUpdate::Requeue,
        },
    );
    let r = s.req(
        ALICE,
        RequestBody::Cancel(CancelFilter {
            job_ids: vec![id],
            ..Default::default()
        }),
    );
    assert!(matches!(r, Response::Cancelled(_)), "{r:?}");
    assert_eq!(s.state(id), JobState::Cancelled);
    assert!(s.job(id).completing);
    assert_eq!(s.job(id).run(), None, "it ended without a run");
    s.ok(
        ROOT,
        RequestBody::JobCleaned {
            job_id: id,
            node: "n1".into(),
            job_start: run,
        },
    );
    assert!(!s.job(id).completing, "the first run's cleanup ends it");
    s.check_replay();
}

#[test]
fn scancel_admin_comment_is_a_super_users_and_marks_the_jobs_it_cancels() {
    let mut s = sim("");
    let id = s.submit(|_| {});
    let with_comment = |ids: Vec<JobId>| {
        RequestBody::Cancel(CancelFilter {
            job_ids: ids,
            admin_comment: Some("node fault".into()),
            ..Default::default()
        })
    };
    // Its owner may cancel it, but not with an AdminComment: nothing is
    // done at all (Slurm's "Invalid user id").
    let r = s.req(ALICE, with_comment(vec![id]));
    assert!(
        matches!(&r, Response::Error(e) if e.error == SlurmError::UserIdMissing),
        "{r:?}"
    );
    assert_eq!(s.state(id), JobState::Running);
    assert_eq!(s.job(id).desc.admin_comment, None);
    let r = s.req(ROOT, with_comment(vec![id]));
    assert!(matches!(r, Response::Cancelled(_)), "{r:?}");
    assert_eq!(s.state(id), JobState::Cancelled);
    assert_eq!(s.job(id).desc.admin_comment.as_deref(), Some("node fault"));
    s.check_replay();
}

#[test]
fn a_run_keeps_its_name_on_the_nodes_when_the_clock_steps() {
    let mut s = sim("");
    let id = s.submit(|d| d.req_nodes = vec!["n1".into()]);
    let launched = s.job(id).start_time;
    assert_eq!(s.job(id).run(), launched);
    // The clock steps an hour ahead: elapsed time is kept (the start
    // moves), the run's name on the nodes is not.
    s.ctl.clock_stepped(3600);
    s.now += 3600;
    assert_eq!(s.job(id).start_time, launched.map(|t| t + 3600));
    assert_eq!(s.job(id).run(), launched);
    s.ok(
        ROOT,
        RequestBody::BatchComplete {
            job_id: id,
            node: "n1".into(),
            status: 0,
            oom: false,
            usage: None,
            job_start: launched,
        },
    );
    assert_eq!(s.state(id), JobState::Completed);
    assert!(s.job(id).completing);
    s.ok(
        ROOT,
        RequestBody::JobCleaned {
            job_id: id,
            node: "n1".into(),
            job_start: launched,
        },
    );
    assert!(!s.job(id).completing);
    s.check_replay();
}

#[test]
fn a_node_that_falls_silent_requeues_its_job() {
    let mut s = sim("");
    let id = s.submit(|_| {});
    let node = s.job(id).alloc.nodes[0].clone();
    let other = if node == "n1" { "n2" } else { "n1" };
    // Only the other node keeps answering.
    for _ in 0..4 {
        s.tick(10);
        s.ok(
            ROOT,
            RequestBody::Heartbeat {
                node: other.into(),
                running_jobs: vec![],
            },
        );
    }
    let n = s.ctl.nodes.iter().find(|n| n.name == node).expect("node");
    assert!(n.flags.not_responding, "{node} declared not responding");
    let j = s.job(id);
    assert_eq!(j.restarts, 1, "requeued ({:?})", j.state);
    assert!(j.node_failed || j.state != JobState::Running || j.alloc.nodes[0] == other);
    s.tick(1);
    let j = s.job(id);
    assert_eq!(j.state, JobState::Running);
    assert_eq!(j.alloc.nodes, vec![other.to_string()]);
    s.check_replay();
}

#[test]
fn a_job_held_after_its_prolog_failed_shows_completing_on_its_node_until_cleaned() {
    let mut s = sim("");
    let id = s.submit(|_| {});
    let node = s.job(id).alloc.nodes[0].clone();
    s.ok(
        ROOT,
        RequestBody::PrologFailed {
            job_id: id,
            node: node.clone(),
        },
    );
    let j = s.job(id);
    assert_eq!(
        (j.state, j.held.is_some(), j.completing),
        (JobState::Pending, true, true)
    );
    // The queue is empty (its only job held): the node still shows the
    // job's cleanup, as a full refresh would.
    let shown = |s: &Sim| {
        let n = s.ctl.nodes.iter().find(|n| n.name == node).expect("node");
        (n.flags.completing, n.alloc_cpus > 0, n.flags.drain)
    };
    assert_eq!(shown(&s), (true, true, true));
    s.ok(
        ROOT,
        RequestBody::JobCleaned {
            job_id: id,
            node: node.clone(),
            job_start: None,
        },
    );
    assert_eq!(shown(&s), (false, false, true));
    s.check_replay();
}

/// sdiag's backfill figures come from the passes: jobs tried within
/// bf_max_job_test, the plan's instants, and why each pass ended.
#[test]
fn backfill_passes_count_tries_table_size_and_exits() {
    let mut s = sim("SchedulerType=sched/backfill\nSchedulerParameters=bf_max_job_test=1\n");
    let both = |d: &mut JobDesc| {
        d.min_nodes = Some(2);
        d.exclusive = true;
        d.time_limit = Some(Some(10));
    };
    let first = s.submit(both);
    assert_eq!(s.state(first), JobState::Running);
    let (a, b) = (s.submit(both), s.submit(both));
    assert_eq!(
        (s.state(a), s.state(b)),
        (JobState::Pending, JobState::Pending)
    );
    let d = s.ctl.diag();
    // The last pass tried one job (the limit) with one left: cut short.
    assert_eq!(d.bf_last_depth_try, 1, "{d:?}");
    assert!(d.bf_exit_max_job_test >= 1, "{d:?}");
    // A pass with nothing left untried ended at the queue's end.
    assert!(d.bf_exit_end >= 1, "{d:?}");
    assert_eq!(d.bf_exit_end + d.bf_exit_max_job_test, d.bf_cycles);
    // Now, and the running job's end (where the reservation starts).
    assert!(d.bf_table_size >= 2, "{d:?}");
    assert!(d.bf_total_depth_try >= d.bf_last_depth_try);
}

#[test]
fn array_tasks_run_within_their_throttle() {
    let mut s = sim("");
    let id = s.submit(|d| d.array = Some("0-3%2".into()));
    let tasks: Vec<JobId> = (id..id + 4).collect();
    // The tasks' script and environment are journaled once, for all four.
    let scripts: Vec<&Entry> = s
        .journaled
        .iter()
        .filter(|e| matches!(e, Entry::Payload(..) | Entry::Payloads(..)))
        .collect();
    assert!(
        matches!(scripts[..], [Entry::Payloads(ids, _)] if *ids == tasks),
        "{scripts:?}"
    );
    let running = |s: &Sim| {
        tasks
            .iter()
            .filter(|t| s.state(**t) == JobState::Running)
            .count()
    };
    assert_eq!(running(&s), 2, "two of four run (throttle 2, 4 cores free)");
    let waiting = tasks
        .iter()
        .find(|t| s.state(**t) == JobState::Pending)
        .copied()
        .expect("one waits");
    assert_eq!(s.job(waiting).reason, JobReason::JobArrayTaskLimit);
    assert_eq!(s.job(waiting).array.as_ref().map(|a| a.job_id), Some(id));
    s.finish(id, 0);
    assert_eq!(running(&s), 2, "the next task took its place");
    s.check_replay();
}

#[test]
fn dependencies_hold_jobs_until_met_or_never() {
    let mut s = sim("");
    let a = s.submit(|_| {});
    let ok = s.submit(|d| d.dependency = Some(format!("afterok:{a}")));
    let notok = s.submit(|d| d.dependency = Some(format!("afternotok:{a}")));
    assert_eq!(s.job(ok).reason, JobReason::Dependency);
    assert_eq!(s.state(notok), JobState::Pending);
    s.finish(a, 0);
    assert_eq!(s.state(ok), JobState::Running);
    // afternotok of a job that succeeded can never be met.
    assert_eq!(s.state(notok), JobState::Pending);
    assert_eq!(s.job(notok).reason, JobReason::DependencyNeverSatisfied);
    // A dependency on a job that does not exist is refused at submission.
    let e = s
        .submit_as(ALICE, |d| d.dependency = Some("afterok:999999".into()))
        .expect_err("refused");
    assert_eq!(e.error, SlurmError::Dependency);
    s.check_replay();
}

#[test]
fn licenses_and_partition_limits_hold_jobs_back() {
    let mut s = sim("Licenses=matlab:1");
    let a = s.submit(|d| d.licenses = Some("matlab".into()));
    let b = s.submit(|d| d.licenses = Some("matlab".into()));
    assert_eq!(s.state(a), JobState::Running);
    assert_eq!(s.state(b), JobState::Pending);
    assert_eq!(s.job(b).reason, JobReason::Other("Licenses".into()));
    s.finish(a, 0);
    assert_eq!(s.state(b), JobState::Running);
    // More licenses than exist can never run: refused.
    let e = s
        .submit_as(ALICE, |d| d.licenses = Some("matlab:2".into()))
        .expect_err("refused");
    assert_eq!(e.error, SlurmError::InvalidLicenses);
    // Beyond the partition's MaxTime: queued, never started (Slurm's
    // default EnforcePartLimits=NO).
    let long = s.submit(|d| d.time_limit = Some(Some(61)));
    s.tick(1);
    assert_eq!(s.state(long), JobState::Pending);
    assert_eq!(s.job(long).reason, JobReason::PartitionTimeLimit);
    s.check_replay();
}

#[test]
fn suspension_is_for_operators_and_stops_the_clock() {
    let mut s = sim("");
    let id = s.submit(|_| {});
    let suspend = |suspend| RequestBody::SuspendJob {
        job_id: id,
        suspend,
    };
    // The owner may not suspend (Slurm: operators only).
    let r = s.req(ALICE, suspend(true));
    assert!(
        matches!(&r, Response::Error(e) if e.error == SlurmError::AccessDenied),
        "{r:?}"
    );
    assert_eq!(s.state(id), JobState::Running);
    s.now += 10;
    s.ok(ROOT, suspend(true));
    assert_eq!(s.state(id), JobState::Suspended);
    assert!(s
        .effects
        .iter()
        .any(|e| matches!(e, Effect::Suspend { job_id, suspend: true, .. } if *job_id == id)));
    // Its cores are free for others while suspended, its memory is not.
    let other = s.submit(|d| d.min_nodes = Some(2));
    assert_eq!(s.state(other), JobState::Running);
    s.now += 100;
    s.finish(other, 0);
    s.ok(ROOT, suspend(false));
    let j = s.job(id);
    assert_eq!(j.state, JobState::Running);
    assert!(j.suspended_secs >= 100, "{j:?}");
    s.check_replay();
}

#[test]
fn node_reports_from_a_user_change_nothing() {
    let mut s = sim("");
    let id = s.submit(|_| {});
    let node = s.job(id).alloc.nodes[0].clone();
    let before = s.ctl.p.clone();
    for body in [
        RequestBody::BatchComplete {
            job_id: id,
            node: node.clone(),
            status: 0,
            oom: false,
            usage: None,
            job_start: None,
        },
        RequestBody::JobCleaned {
            job_id: id,
            node: node.clone(),
            job_start: None,
        },
        RequestBody::EpilogFailed {
            job_id: id,
            node: node.clone(),
        },
        RequestBody::Heartbeat {
            node,
            running_jobs: vec![],
        },
    ] {
        let r = s.req(BOB, body);
        assert!(
            matches!(&r, Response::Error(e) if e.error == SlurmError::AccessDenied),
            "{r:?}"
        );
    }
    // Nor may another user cancel or requeue it.
    let r = s.req(
        BOB,
        RequestBody::UpdateJob {
            job_id: id,
            update: JobUpdate::Requeue,
        },
    );
    assert!(matches!(r, Response::Error(_)), "{r:?}");
    assert_eq!(s.ctl.p, before);
    s.check_replay();
}

#[test]
fn a_reconfigure_that_fails_changes_nothing() {
    let mut s = sim("");
    let read = |s: &Sim| Reconf::read(&s.path);
    let dir = s.path.parent().expect("dir").to_path_buf();
    let before = (s.ctl.partitions.clone(), s.ctl.conf.clone());
    // A file that does not parse.
    std::fs::write(&s.path, "NodeName=\n=\n").expect("write");
    let e = read(&s).err().expect("refused");
    assert_eq!(e.error, SlurmError::InvalidRequest);
    let r = s.ctl.reconfigure(ROOT, Err(e), s.now);
    assert!(r.is_err());
    // A change that needs a restart (the node list), with another change
    // (MaxTime) that could apply: neither is applied.
    let text = conf_text(&dir, "")
        .replace("n[1-2] CPUs", "n[1-3] CPUs")
        .replace("MaxTime=60", "MaxTime=30");
    std::fs::write(&s.path, text).expect("write");
    let r = s.ctl.reconfigure(ROOT, read(&s), s.now);
    assert_eq!(r.expect_err("refused").error, SlurmError::NeedRestart);
    // A topology file that names a node slurm.conf does not have.
    std::fs::write(dir.join("topology.conf"), "SwitchName=s1 Nodes=n[1-9]\n").expect("write");
    let text = conf_text(&dir, "TopologyPlugin=topology/tree").replace("MaxTime=60", "MaxTime=30");
    std::fs::write(&s.path, text).expect("write");
    let e = read(&s).err().expect("refused");
    assert_eq!(e.error, SlurmError::InvalidRequest);
    assert!(e.detail.as_deref().unwrap_or("").contains("n3"), "{e:?}");
    assert_eq!((s.ctl.partitions.clone(), s.ctl.conf.clone()), before);
    // An ordinary user may not reconfigure, even with a good file.
    std::fs::write(
        &s.path,
        conf_text(&dir, "").replace("MaxTime=60", "MaxTime=30"),
    )
    .expect("write");
    let r = s.ctl.reconfigure(ALICE, read(&s), s.now);
    assert_eq!(r.expect_err("refused").error, SlurmError::AccessDenied);
    assert_eq!(s.ctl.partitions[0].max_time, Some(60));
    // Root may.
    s.ctl.reconfigure(ROOT, read(&s), s.now).expect("applied");
    s.settle();
    assert_eq!(s.ctl.partitions[0].max_time, Some(30));
    s.check_replay();
}

#[test]
fn the_state_machine_reads_names_only_from_its_requests() {
    let mut s = sim("PartitionName=staff Nodes=n[1-2] AllowGroups=wheel");
    // Alice's groups, as looked up for her request, do not include wheel.
    let e = s
        .submit_as(ALICE, |d| d.partition = Some("staff".into()))
        .expect_err("refused");
    assert_eq!(e.error, SlurmError::AccessDenied);
    s.ctl.identify(
        ALICE.uid,
        ALICE.gid,
        Identity {
            user: Some("alice".into()),
            group: "alice".into(),
            groups: vec!["alice".into(), "wheel".into()],
        },
    );
    let id = s
        .submit_as(ALICE, |d| d.partition = Some("staff".into()))
        .expect("allowed once in wheel");
    assert_eq!(s.job(id).partition, "staff");
    // A caller never looked up is known by numbers.
    let stranger = Caller {
        uid: 4242,
        gid: 4343,
        privileged: false,
        operator: false,
        admin: false,
    };
    let id = s.submit_as(stranger, |_| {}).expect("submitted");
    assert_eq!(
        (s.job(id).user_name.as_str(), s.job(id).group_name.as_str()),
        ("4242", "4343")
    );
    s.check_replay();
}

#[test]
fn job_change_stamps_follow_shared_records() {
    let (a, b, c) = (Arc::new(1u32), Arc::new(2u32), Arc::new(3u32));
    let id = |x: &u32| *x;
    let list = |v: &[Arc<u32>]| -> Chunked<Arc<u32>> { v.iter().cloned().collect() };
    let stamps = |v: &[u64]| -> Chunked<u64> { v.iter().copied().collect() };
    // No previous stamps: everything changed now.
    assert_eq!(
        stamp_changes(None, &list(&[a.clone(), b.clone()]), id, 5).to_vec(),
        vec![5, 5]
    );
    let prev = list(&[a.clone(), b.clone(), c.clone()]);
    // 2 was replaced, 3 removed, 4 added; 1 is the same record.
    let now = list(&[a.clone(), Arc::new(2u32), Arc::new(4u32)]);
    assert_eq!(
        stamp_changes(Some((&prev, &stamps(&[1, 2, 3]))), &now, id, 9).to_vec(),
        vec![1, 9, 9]
    );
    // Stamps that do not match the jobs are ignored.
    assert_eq!(
        stamp_changes(Some((&prev, &stamps(&[1]))), &list(&[a]), id, 7).to_vec(),
        vec![7]
    );
    // Many jobs: a chunk shared whole keeps its stamps (shared too); a
    // record changed in another, or removed before it, is stamped anew
    // and the rest keep theirs.
    let many: Vec<Arc<u32>> = (0..300).map(Arc::new).collect();
    let first = Chunked::sharing_by(many.iter(), None, Arc::ptr_eq);
    let s1 = stamp_changes(None, &first, id, 1);
    let mut next = many.clone();
    next[200] = Arc::new(200);
    let second = Chunked::sharing_by(next.iter(), Some(&first), Arc::ptr_eq);
    let s2 = stamp_changes(Some((&first, &s1)), &second, id, 2);
    let want: Vec<u64> = (0..300).map(|i| if i == 200 { 2 } else { 1 }).collect();
    assert_eq!(s2.to_vec(), want);
    // Job 10 leaves: every later record moves, none changed.
    next.remove(10);
    let third = Chunked::sharing_by(next.iter(), Some(&second), Arc::ptr_eq);
    let s3 = stamp_changes(Some((&second, &s2)), &third, id, 3);
    let want: Vec<u64> = (0..300)
        .filter(|&i| i != 10)
        .map(|i| if i == 200 { 2 } else { 1 })
        .collect();
    assert_eq!(s3.to_vec(), want);
}

#[test]
fn association_and_qos_limits_hold_jobs_and_refuse_strangers() {
    use crate::assoc::{sample_cache, Enforce};
    let mut s = sim("");
    s.ctl.enforce = Enforce::parse(&["associations".into(), "limits".into(), "qos".into()]);
    // alice: account phys, MaxSubmitJobs=3; QOS normal: MaxJobsPerUser=2.
    let c = sample_cache();
    s.ctl.set_assocs(c, s.now);
    s.settle();
    // Her default account is taken; two jobs run at a time (QOS
    // MaxJobsPerUser), the third waits with Slurm's reason.
    let a = s.submit(|_| {});
    let _b = s.submit(|_| {});
    let c = s.submit(|_| {});
    assert_eq!(s.job(a).account, "phys");
    assert_eq!(s.state(a), JobState::Running);
    assert_eq!(s.state(c), JobState::Pending);
    assert_eq!(
        s.job(c).reason,
        JobReason::Other("QOSMaxJobsPerUserLimit".into())
    );
    // MaxSubmitJobs=3: a fourth is refused, the queue unchanged.
    let before = s.ctl.p.jobs.len();
    let e = s.submit_as(ALICE, |_| {}).expect_err("refused");
    assert_eq!(e.error, SlurmError::AccountingPolicy);
    assert_eq!(s.ctl.p.jobs.len(), before);
    // Bob has no association at all.
    let e = s.submit_as(BOB, |_| {}).expect_err("refused");
    assert_eq!(e.error, SlurmError::InvalidAccount);
    s.finish(a, 0);
    assert_eq!(s.state(c), JobState::Running);
    s.check_replay();
}

/// sshare's ID, GrpTRESMins and TRESRunMins: the association's id and
/// own limit; the TRES-seconds left in its running jobs' limits, rolled
/// up to root; none counted unless limits are enforced (as Slurm's).
#[test]
fn shares_carry_association_ids_limits_and_tres_left_to_run() {
    use crate::assoc::{sample_cache, Enforce};
    let mut s = sim("PriorityType=priority/multifactor\nAccountingStorageTRES=gres/gpu\n");
    // (As the controller's start sets it up.)
    let params = slurm_plugins::priority::PriorityParams::from_config(&s.ctl.conf.entries).unwrap();
    s.ctl.multifactor = Some(slurm_plugins::priority::Multifactor::new(params, 0));
    let mut c = sample_cache();
    for (a, id) in c.assocs.iter_mut().zip([1, 3, 4]) {
        a.id = id;
    }
    c.assocs[2].limits.grp_tres_mins = Some("cpu=600,mem=2G".into());
    s.ctl.set_assocs(c, s.now);
    s.settle();
    let id = s.submit(|d| {
        d.time_limit = Some(Some(10));
        d.cpus_per_task = Some(2);
        d.mem_per_node = Some(500);
    });
    assert_eq!(s.state(id), JobState::Running);
    let start = s.job(id).start_time.expect("started");
    // Four minutes on, as of the last change published (no tick: its
    // silent nodes would be declared down).
    s.ctl.last_update = start + 240;
    let rows = s.ctl.shares();
    let names: Vec<&str> = rows[0].tres_names.iter().map(String::as_str).collect();
    assert_eq!(
        names,
        ["cpu", "mem", "energy", "node", "billing", "fs/disk", "vmem", "pages", "gres/gpu"]
    );
    let row = |user: Option<&str>, account: &str| {
        rows.iter()
            .find(|r| r.user.as_deref() == user && r.account == account)
            .unwrap_or_else(|| panic!("no row {user:?} {account}: {rows:?}"))
    };
    let (alice, phys, root) = (
        row(Some("alice"), "phys"),
        row(None, "phys"),
        row(None, "root"),
    );
    assert_eq!(
        (root.assoc_id, phys.assoc_id, alice.assoc_id),
        (Some(1), Some(3), Some(4))
    );
    let none = u64::MAX;
    assert_eq!(
        alice.tres_grp_mins,
        [600, 2048, none, none, none, none, none, none, none]
    );
    // Limits not enforced: nothing counted.
    assert!(alice.tres_run_secs.iter().all(|&v| v == 0));
    s.ctl.enforce = Enforce::parse(&["associations".into(), "limits".into()]);
    let rows = s.ctl.shares();
    let left = 600 - 240;
    let want = [2 * left, 500 * left, 0, left, 2 * left, 0, 0, 0, 0];
    for (user, account) in [(Some("alice"), "phys"), (None, "phys"), (None, "root")] {
        // Hers, her account's and root's: the same job, counted up the tree.
        let r = rows
            .iter()
            .find(|r| r.user.as_deref() == user && r.account == account)
            .expect("row");
        assert_eq!(r.tres_run_secs, want, "{r:?}");
    }
}

/// A client that is not sbatch gets sbatch's checks here: a NUL in the
/// script or the environment is refused and nothing is made; a user's
/// `--priority` is dropped (0 holds), an operator's stays.
#[test]
fn submissions_checked_whoever_sends_them() {
    let mut s = sim("");
    for f in [
        (|d: &mut JobDesc| d.script.push_str("echo \0\n")) as fn(&mut JobDesc),
        |d: &mut JobDesc| d.environment.push("A=\0".into()),
    ] {
        let e = s.submit_as(ALICE, f).expect_err("refused");
        assert_eq!(e.error, SlurmError::InvalidRequest);
    }
    assert!(s.ctl.p.jobs.is_empty(), "nothing made");
    let mine = s.submit(|d| {
        d.priority = Some(77);
        d.hold = true;
    });
    assert_eq!(
        s.job(mine).desc.priority,
        None,
        "a user's priority is dropped"
    );
    let held = s.submit(|d| d.priority = Some(0));
    assert_eq!(s.job(held).reason, JobReason::JobHeldUser);
    let fixed = s
        .submit_as(ROOT, |d| {
            d.priority = Some(77);
            d.begin_time = Some(T0 + 3600);
        })
        .expect("submitted");
    assert_eq!(s.job(fixed).priority, 77);
    s.check_replay();
}

#[test]
fn held_jobs_stay_out_of_the_pass_and_lose_their_planned_start() {
    let mut s = sim("SchedulerType=sched/backfill\n");
    // Both nodes taken for ten minutes: the next job waits with a planned
    // start.
    let big = s.submit(|d| {
        d.min_nodes = Some(2);
        d.exclusive = true;
        d.time_limit = Some(Some(10));
    });
    assert_eq!(s.state(big), JobState::Running);
    let waiting = s.submit(|d| d.time_limit = Some(Some(5)));
    assert_eq!(s.job(waiting).reason, JobReason::Resources);
    assert!(s.job(waiting).start_time.is_some(), "a planned start");
    let depth = s.ctl.stats.last_queue;
    assert_eq!(depth, 1);
    s.ok(
        ALICE,
        RequestBody::UpdateJob {
            job_id: waiting,
            update: JobUpdate::Hold,
        },
    );
    s.tick(1);
    s.ctl.sched_needed = true;
    s.settle();
    let j = s.job(waiting);
    assert_eq!(j.reason, JobReason::JobHeldUser);
    assert_eq!(j.start_time, None, "a held job has no planned start");
    // The pass considered nothing: the held job is not in its queue.
    assert_eq!(s.ctl.stats.last_queue, 0);
    // Released, it is planned again.
    s.ok(
        ALICE,
        RequestBody::UpdateJob {
            job_id: waiting,
            update: JobUpdate::Release,
        },
    );
    s.tick(1);
    assert_eq!(s.job(waiting).reason, JobReason::Resources);
    assert!(s.job(waiting).start_time.is_some());
    assert_eq!(s.ctl.stats.last_queue, 1);
    s.check_replay();
}

#[test]
fn every_pass_is_timed_and_only_a_planned_one_is_a_backfill_cycle() {
    let mut s = sim("SchedulerType=sched/backfill\n");
    let bf_cycles = s.ctl.stats.bf_cycles;
    // Nothing queued: a pass all the same, timed, but no backfill cycle.
    s.ctl.sched_needed = true;
    let planned = s.ctl.schedule(s.now);
    assert!(!planned);
    s.ctl.pass_took(7, planned);
    assert_eq!(s.ctl.stats.last_cycle_us, 7);
    assert_eq!(
        (s.ctl.stats.bf_cycles, s.ctl.stats.bf_last_us),
        (bf_cycles, 0)
    );
    // A job to place: a planned pass, counted for backfill too.
    s.ctl
        .handle(ALICE, RequestBody::SubmitBatchJob(script()), s.now);
    let planned = s.ctl.schedule(s.now);
    assert!(planned);
    s.ctl.pass_took(9, planned);
    assert_eq!(s.ctl.stats.last_cycle_us, 9);
    assert_eq!(s.ctl.stats.bf_cycles, bf_cycles + 1);
    assert_eq!(s.ctl.stats.bf_last_us, 9);
    s.settle();
    s.check_replay();
}

#[test]
fn a_job_that_cannot_end_by_its_deadline_ends_deadline() {
    // (No heartbeats are sent here: nodes are never timed out.)
    let mut s = sim("SchedulerType=sched/backfill\nSlurmdTimeout=0\n");
    // Both nodes taken for 30 minutes.
    let big = s.submit(|d| {
        d.min_nodes = Some(2);
        d.exclusive = true;
        d.time_limit = Some(Some(30));
    });
    assert_eq!(s.state(big), JobState::Running);
    // 20 minutes by a deadline 40 minutes away: it waits; once it could
    // not end by then, it ends DEADLINE without running.
    let late = s.submit(|d| {
        d.time_limit = Some(Some(20));
        d.deadline = Some(T0 + 40 * 60);
    });
    assert_eq!(s.state(late), JobState::Pending);
    s.tick(15 * 60);
    assert_eq!(s.state(late), JobState::Pending, "can still end in time");
    s.tick(6 * 60);
    assert_eq!(s.state(big), JobState::Running);
    assert_eq!(s.state(late), JobState::Deadline);
    assert_eq!(s.job(late).reason, JobReason::Other("DeadLine".into()));
    assert!(!s.launched(late));
    // With a --time-min it may start with its limit cut to the deadline.
    s.finish(big, 0);
    let now = s.now;
    let flexible = s.submit(|d| {
        d.time_limit = Some(Some(20));
        d.time_min = Some(5);
        d.deadline = Some(now + 15 * 60);
    });
    assert_eq!(s.state(flexible), JobState::Running);
    let j = s.job(flexible);
    assert_eq!(j.time_limit, Some(15));
    assert_eq!(j.end_time, j.desc.deadline);
    // Still running at the deadline: it ends DEADLINE, not TIMEOUT.
    s.tick(15 * 60);
    assert_eq!(s.state(flexible), JobState::Deadline);
    assert!(s.job(flexible).timed_out);
    // Bad deadlines are refused and change nothing.
    let jobs = s.ctl.p.jobs.len();
    for bad in [
        |d: &mut JobDesc| d.deadline = Some(T0 - 1),
        |d: &mut JobDesc| {
            d.begin_time = Some(T0 + 7200);
            d.deadline = Some(T0 + 3600);
        },
    ] {
        let e = s.submit_as(ALICE, |d| {
            d.time_limit = Some(Some(5));
            bad(d)
        });
        assert_eq!(e.expect_err("refused").error, SlurmError::InvalidTimeLimit);
    }
    // No limit at all: nothing tells when it would end.
    let e = s.submit_as(ALICE, |d| {
        d.partition = None;
        d.time_limit = Some(None);
        d.deadline = Some(now + 3600);
    });
    assert_eq!(e.expect_err("refused").error, SlurmError::InvalidTimeLimit);
    assert_eq!(s.ctl.p.jobs.len(), jobs);
    s.check_replay();
}

#[test]
fn backfill_starts_a_job_early_with_its_limit_lowered_to_fit() {
    let mut s = sim("SchedulerType=sched/backfill\n");
    // One core busy for ten minutes on each node; a job wanting all four
    // cores is planned after them.
    let a = s.submit(|d| {
        d.req_nodes = vec!["n1".into()];
        d.time_limit = Some(Some(10));
    });
    let b = s.submit(|d| {
        d.req_nodes = vec!["n2".into()];
        d.time_limit = Some(Some(10));
    });
    let _ = s.submit(|d| {
        d.hold = true;
    });
    assert_eq!(s.state(a), JobState::Running);
    assert_eq!(s.state(b), JobState::Running);
    let wide = s.submit(|d| {
        d.min_nodes = Some(2);
        d.ntasks = Some(4);
        d.time_limit = Some(Some(30));
    });
    assert_eq!(s.state(wide), JobState::Pending);
    // A one-core job of 60 minutes would delay it; with --time-min=5 it
    // runs now with what ends before the wide job's start.
    let fixed = s.submit(|d| d.time_limit = Some(Some(60)));
    assert_eq!(s.state(fixed), JobState::Pending);
    let shrink = s.submit(|d| {
        d.time_limit = Some(Some(60));
        d.time_min = Some(5);
    });
    assert_eq!(s.state(shrink), JobState::Running);
    let j = s.job(shrink);
    assert!(
        j.time_limit.is_some_and(|l| (5..=10).contains(&l)),
        "{:?}",
        j.time_limit
    );
    assert_eq!(j.desc.time_min, Some(5));
    // A time-min above the limit is refused.
    let e = s.submit_as(ALICE, |d| {
        d.time_limit = Some(Some(5));
        d.time_min = Some(6);
    });
    assert_eq!(e.expect_err("refused").error, SlurmError::InvalidTimeLimit);
    s.check_replay();
}

#[test]
fn a_dependency_never_satisfied_cancels_the_job_when_asked() {
    let mut s = sim("");
    let a = s.submit(|_| {});
    let kept = s.submit(|d| d.dependency = Some(format!("afternotok:{a}")));
    let killed = s.submit(|d| {
        d.dependency = Some(format!("afternotok:{a}"));
        d.kill_on_invalid_dep = Some(true);
    });
    s.finish(a, 0);
    assert_eq!(s.state(kept), JobState::Pending);
    assert_eq!(s.job(kept).reason, JobReason::DependencyNeverSatisfied);
    assert_eq!(s.state(killed), JobState::Cancelled);
    assert_eq!(s.job(killed).reason, JobReason::DependencyNeverSatisfied);
    s.check_replay();

    // SchedulerParameters=kill_invalid_depend makes it the default; a job
    // may still ask to stay.
    let mut s = sim("SchedulerParameters=kill_invalid_depend\n");
    let a = s.submit(|_| {});
    let killed = s.submit(|d| d.dependency = Some(format!("afternotok:{a}")));
    let kept = s.submit(|d| {
        d.dependency = Some(format!("afternotok:{a}"));
        d.kill_on_invalid_dep = Some(false);
    });
    s.finish(a, 0);
    assert_eq!(s.state(killed), JobState::Cancelled);
    assert_eq!(s.state(kept), JobState::Pending);
    s.check_replay();
}

#[test]
fn a_no_kill_job_keeps_running_without_its_failed_node() {
    let mut s = sim("");
    let both = |d: &mut JobDesc| {
        d.min_nodes = Some(2);
        d.ntasks = Some(2);
    };
    let kept = s.submit(|d| {
        both(d);
        d.no_kill = true;
    });
    let j = s.job(kept);
    assert_eq!(j.state, JobState::Running);
    let batch = j.batch_host.clone().expect("a batch host");
    let other = if batch == "n1" { "n2" } else { "n1" };
    // The node without the batch script falls silent.
    for _ in 0..4 {
        s.tick(10);
        s.ok(
            ROOT,
            RequestBody::Heartbeat {
                node: batch.clone(),
                running_jobs: vec![kept],
            },
        );
    }
    let j = s.job(kept);
    assert_eq!(j.state, JobState::Running, "{:?}", j.reason);
    assert_eq!(j.alloc.nodes, vec![batch.clone()]);
    assert_eq!((j.alloc.cpus.len(), j.alloc.tasks.len()), (1, 1));
    assert_eq!(j.restarts, 0);
    assert!(s
        .ctl
        .nodes
        .iter()
        .any(|n| n.name == other && n.flags.not_responding));
    s.finish(kept, 0);
    assert_eq!(s.state(kept), JobState::Completed);
    s.check_replay();

    // Losing the node its batch script runs on ends it all the same; so
    // does losing a node of a job that did not ask.
    let mut s = sim("JobRequeue=0\n");
    let a = s.submit(|d| {
        both(d);
        d.no_kill = true;
    });
    let batch = s.job(a).batch_host.clone().expect("a batch host");
    let other = if batch == "n1" { "n2" } else { "n1" };
    for _ in 0..4 {
        s.tick(10);
        s.ok(
            ROOT,
            RequestBody::Heartbeat {
                node: other.into(),
                running_jobs: vec![a],
            },
        );
    }
    assert_eq!(s.state(a), JobState::NodeFail);
    s.check_replay();
}

#[test]
fn a_wckey_counts_only_where_wckeys_are_tracked() {
    let mut s = sim("");
    let id = s.submit(|d| d.wckey = Some("proj".into()));
    assert_eq!(s.job(id).desc.wckey, None, "ignored without TrackWCKey");
    let mut s = sim("TrackWCKey=yes\n");
    let id = s.submit(|d| d.wckey = Some("proj".into()));
    assert_eq!(s.job(id).desc.wckey.as_deref(), Some("proj"));
    s.check_replay();
}

fn reboot_req(names: &[&str], asap: bool, next: Option<NodeStateRequest>) -> RequestBody {
    RequestBody::RebootNodes(slurm_proto::RebootNodes {
        names: names.iter().map(|n| n.to_string()).collect(),
        asap,
        next_state: next,
        ..Default::default()
    })
}

impl Sim {
    fn node(&self, name: &str) -> &NodeRecord {
        self.ctl
            .nodes
            .iter()
            .find(|n| n.name == name)
            .expect("node")
    }

    fn reboots_sent(&self, name: &str) -> usize {
        self.effects
            .iter()
            .filter(|e| matches!(e, Effect::Reboot { node, .. } if node == name))
            .count()
    }

    /// The node's daemon registers, its machine booted at `boot_time`.
    fn register_booted(&mut self, node: &str, boot_time: i64) {
        let r = self.req(
            ROOT,
            RequestBody::RegisterNode(NodeRegistration {
                name: node.into(),
                cpus: 2,
                boards: 1,
                sockets: 1,
                cores_per_socket: 2,
                threads_per_core: 1,
                real_memory: 1000,
                boot_time,
                slurmd_start_time: self.now,
                ..Default::default()
            }),
        );
        assert!(!matches!(r, Response::Error(_)), "register {node}: {r:?}");
    }
}

#[test]
fn a_reboot_waits_for_the_node_to_be_idle_and_ends_when_it_boots_again() {
    let mut s = sim("RebootProgram=/sbin/reboot\n");
    // Users may not ask; nothing changes.
    let r = s.req(ALICE, reboot_req(&["n1"], false, None));
    assert!(
        matches!(&r, Response::Error(e) if e.error == SlurmError::AccessDenied),
        "{r:?}"
    );
    assert!(!s.node("n1").flags.reboot_requested);
    // An unknown node or a bad next state: refused, nothing changes.
    let r = s.req(ROOT, reboot_req(&["n1", "n9"], false, None));
    assert!(matches!(&r, Response::Error(e) if e.error == SlurmError::InvalidNodeName));
    let r = s.req(
        ROOT,
        reboot_req(&["n1"], false, Some(NodeStateRequest::Drain)),
    );
    assert!(matches!(&r, Response::Error(e) if e.error == SlurmError::InvalidNodeState));
    assert!(!s.node("n1").flags.reboot_requested);

    // A job holds n1: ASAP drains it and the reboot waits for the job.
    let id = s.submit(|d| d.req_nodes = vec!["n1".into()]);
    assert_eq!(s.state(id), JobState::Running);
    s.ok(ROOT, reboot_req(&["n1"], true, None));
    let n = s.node("n1");
    assert!(n.flags.reboot_requested && n.flags.drain, "{:?}", n.flags);
    assert_eq!(n.reason.as_deref(), Some("Reboot ASAP"));
    assert_eq!(n.state_short(), "drng@");
    // Asked again meanwhile: skipped, as Slurm does.
    let r = s.req(ROOT, reboot_req(&["n1"], false, None));
    assert!(
        matches!(&r, Response::Error(e) if e.detail.as_deref().is_some_and(|d| d.starts_with("Skipping reboot of nodes n1"))),
        "{r:?}"
    );
    // Drained: no new job goes there.
    let other = s.submit(|d| d.req_nodes = vec!["n1".into()]);
    assert_eq!(s.state(other), JobState::Pending);
    s.tick(1);
    assert_eq!(s.reboots_sent("n1"), 0, "sent while a job runs there");
    s.finish(id, 0);
    s.tick(1);
    assert_eq!(s.reboots_sent("n1"), 1);
    let n = s.node("n1");
    assert!(n.flags.reboot_issued && !n.flags.reboot_requested);
    assert_eq!(n.base_state, NodeBaseState::Down);
    assert_eq!(n.state_long(), "DOWN+DRAIN+REBOOT_ISSUED");
    assert_eq!(n.reason.as_deref(), Some("Reboot ASAP : reboot issued"));
    // Silent while it reboots: no failure; its heartbeats are told to
    // register again (to tell its boot time).
    s.tick(40);
    assert!(!s.node("n1").flags.not_responding);
    let r = s.req(
        ROOT,
        RequestBody::Heartbeat {
            node: "n1".into(),
            running_jobs: vec![],
        },
    );
    assert!(matches!(&r, Response::Error(e) if e.error == SlurmError::InvalidNodeState));
    // Its daemon restarted without the machine rebooting: still waiting.
    let issued_at = s.now - 40;
    s.register_booted("n1", issued_at - 1000);
    assert!(s.node("n1").flags.reboot_issued);
    assert_eq!(s.state(other), JobState::Pending);
    // Booted again: back in service, undrained (ASAP drained it), the
    // waiting job starts.
    s.register_booted("n1", s.now - 5);
    let n = s.node("n1");
    assert!(!n.flags.reboot_issued && !n.flags.drain, "{:?}", n.flags);
    assert_eq!(n.reason, None);
    s.tick(1);
    assert_eq!(s.state(other), JobState::Running);
    s.check_replay();
}

#[test]
fn a_reboot_can_be_cancelled_forced_kept_down_or_time_out() {
    let mut s = sim("RebootProgram=/sbin/reboot\nResumeTimeout=30\n");
    // Cancelled before it is sent: the node is as before.
    let id = s.submit(|d| d.req_nodes = vec!["n1".into()]);
    s.ok(ROOT, reboot_req(&["n1"], true, None));
    let mut cancel = reboot_req(&["n1"], false, None);
    if let RequestBody::RebootNodes(r) = &mut cancel {
        r.cancel = true;
    }
    let r = s.req(BOB, cancel.clone());
    assert!(matches!(&r, Response::Error(e) if e.error == SlurmError::AccessDenied));
    assert!(s.node("n1").flags.reboot_requested);
    s.ok(ROOT, cancel.clone());
    let n = s.node("n1");
    assert!(!n.flags.reboot_requested && !n.flags.drain && n.reason.is_none());
    s.finish(id, 0);
    s.tick(1);
    assert_eq!(s.reboots_sent("n1"), 0);

    // FORCE: the running job is requeued and the reboot sent at once;
    // nextstate=DOWN keeps the node down once back.
    let id = s.submit(|d| d.req_nodes = vec!["n2".into()]);
    assert_eq!(s.state(id), JobState::Running);
    let mut force = reboot_req(&["n2"], false, Some(NodeStateRequest::Down));
    if let RequestBody::RebootNodes(r) = &mut force {
        r.force = true;
    }
    s.ok(ROOT, force);
    assert_eq!(s.reboots_sent("n2"), 1);
    assert_eq!(s.job(id).restarts, 1, "{:?}", s.state(id));
    // Sent: too late to cancel.
    let mut cancel2 = cancel.clone();
    if let RequestBody::RebootNodes(r) = &mut cancel2 {
        r.names = vec!["n2".into()];
    }
    let r = s.req(ROOT, cancel2);
    assert!(matches!(&r, Response::Error(e) if e.error == SlurmError::InvalidNodeState));
    s.tick(5);
    s.register_booted("n2", s.now - 1);
    let n = s.node("n2");
    assert_eq!(n.base_state, NodeBaseState::Down);
    assert!(!n.flags.reboot_issued);
    assert_eq!(
        n.reason.as_deref(),
        Some("reboot requested : reboot issued : reboot complete")
    );

    // Never back within ResumeTimeout: DOWN, "reboot timed out".
    s.ok(ROOT, reboot_req(&["n1"], false, None));
    s.tick(1);
    assert_eq!(s.reboots_sent("n1"), 1);
    s.tick(31);
    let n = s.node("n1");
    assert_eq!(n.base_state, NodeBaseState::Down);
    assert!(!n.flags.reboot_issued);
    assert_eq!(
        n.reason.as_deref(),
        Some("reboot requested : reboot issued : reboot timed out")
    );
    s.check_replay();

    // Without a RebootProgram there is nothing to run: refused.
    let mut s = sim("");
    let r = s.req(ROOT, reboot_req(&[], false, None));
    assert!(
        matches!(&r, Response::Error(e) if e.detail.as_deref() == Some("RebootProgram isn't defined in slurm.conf")),
        "{r:?}"
    );
    assert!(!s.node("n1").flags.reboot_requested);
}

#[test]
fn a_new_fair_share_dampening_factor_reprices_the_queue_at_once() {
    let mut s = sim(
        "PriorityType=priority/multifactor\nPriorityWeightFairshare=1000\nPriorityCalcPeriod=60\n",
    );
    // (As the controller's start sets it up.)
    let params = slurm_plugins::priority::PriorityParams::from_config(&s.ctl.conf.entries).unwrap();
    s.ctl.multifactor = Some(slurm_plugins::priority::Multifactor::new(params, 0));
    let hog = |d: &mut JobDesc| d.exclusive = true;
    s.submit(hog);
    s.submit(hog);
    let waiting: Vec<JobId> = (0..3).map(|_| s.submit(|_| {})).collect();
    s.tick(1);
    assert!(
        waiting.iter().all(|id| s.ctl.factors.contains_key(id)),
        "{:?} {:?} {}",
        waiting.iter().map(|id| s.state(*id)).collect::<Vec<_>>(),
        s.ctl.factors.keys().collect::<Vec<_>>(),
        s.ctl.multifactor.is_some()
    );
    // (Forgotten, to see them made again now, not at the next period.)
    s.ctl.factors.clear();
    s.ok(ROOT, RequestBody::SetFsDampeningFactor { factor: 5 });
    assert!(
        waiting.iter().all(|id| s.ctl.factors.contains_key(id)),
        "{:?}",
        s.ctl.factors.keys().collect::<Vec<_>>()
    );
}

#[test]
fn top_puts_jobs_first_among_their_owners_and_only_for_those_allowed() {
    for extra in [
        "",
        "PriorityType=priority/multifactor\nPriorityWeightAge=1000\n",
    ] {
        let mut s = sim(extra);
        // Both nodes busy: the rest wait.
        let hog = |d: &mut JobDesc| d.exclusive = true;
        s.submit(hog);
        s.submit(hog);
        let a: Vec<JobId> = (0..4).map(|_| s.submit(|_| {})).collect();
        let theirs = s.submit_as(BOB, |_| {}).unwrap();
        s.tick(1);
        let prio = |s: &Sim, id: JobId| s.job(id).priority;
        let before: Vec<u32> = a.iter().map(|&id| prio(&s, id)).collect();
        let bob_before = prio(&s, theirs);
        assert!(
            before.windows(2).all(|w| w[0] >= w[1]),
            "{extra}: {before:?}"
        );
        // Users may not without enable_user_top; nothing changes.
        let r = s.req(
            ALICE,
            RequestBody::TopJobs {
                job_ids: vec![a[3]],
            },
        );
        assert!(matches!(&r, Response::Error(e) if e.error == SlurmError::AccessDenied));
        assert_eq!(prio(&s, a[3]), before[3]);
        // An operator moves the last two to the top, in the order given.
        s.ok(
            ROOT,
            RequestBody::TopJobs {
                job_ids: vec![a[3], a[2]],
            },
        );
        let after: Vec<u32> = a.iter().map(|&id| prio(&s, id)).collect();
        assert!(
            after[3] > after[2] && after[2] > after[0].max(after[1]),
            "{extra}: {after:?}"
        );
        // Another user's jobs are untouched; the owner gained nothing
        // overall.
        assert_eq!(prio(&s, theirs), bob_before);
        let sum = |v: &[u32]| v.iter().map(|&p| i64::from(p)).sum::<i64>();
        assert!(
            sum(&after) <= sum(&before),
            "{extra}: {before:?} -> {after:?}"
        );
        // Under multifactor the order holds as priorities are computed
        // again (through the nice values).
        s.tick(5);
        let later: Vec<u32> = a.iter().map(|&id| prio(&s, id)).collect();
        assert!(
            later[3] > later[2] && later[2] > later[0] && later[2] > later[1],
            "{extra}: {later:?}"
        );
        // A running job or a stranger's request: refused.
        let r = s.req(ROOT, RequestBody::TopJobs { job_ids: vec![1] });
        assert!(
            matches!(&r, Response::Error(e) if e.error == SlurmError::JobNotPending),
            "{r:?}"
        );
        let r = s.req(
            ROOT,
            RequestBody::TopJobs {
                job_ids: vec![9999],
            },
        );
        assert!(matches!(&r, Response::Error(e) if e.error == SlurmError::InvalidJobId));
        s.check_replay();
    }
    // With enable_user_top, an owner may order their own jobs, not
    // another's.
    let mut s = sim("SchedulerParameters=enable_user_top\n");
    let hog = |d: &mut JobDesc| d.exclusive = true;
    s.submit(hog);
    s.submit(hog);
    let first = s.submit(|_| {});
    let second = s.submit(|_| {});
    let bobs = s.submit_as(BOB, |_| {}).unwrap();
    let r = s.req(
        BOB,
        RequestBody::TopJobs {
            job_ids: vec![second],
        },
    );
    assert!(matches!(&r, Response::Error(e) if e.error == SlurmError::AccessDenied));
    assert!(s.job(first).priority > s.job(second).priority);
    s.ok(
        ALICE,
        RequestBody::TopJobs {
            job_ids: vec![second],
        },
    );
    assert!(s.job(second).priority > s.job(first).priority);
    let _ = bobs;
    s.check_replay();
}

/// A step's own time limit (`srun -t` in an allocation) ends the step
/// TIMEOUT, its job going on; the job's suspensions do not count against
/// it. Only the job's owner (or root) changes it, and never the batch step.
#[test]
fn a_step_past_its_own_limit_ends_timeout_and_suspensions_do_not_count() {
    let mut s = sim("");
    s.ctl.key = Some(slurm_common::auth::Key::from_bytes(b"0123456789abcdef0123"));
    let id = s.submit(|_| {});
    assert_eq!(s.state(id), JobState::Running);
    let step = |limit| {
        RequestBody::CreateStep(StepRequest {
            job_id: id,
            name: "sleep".into(),
            ntasks: Some(1),
            time_limit: limit,
            ..Default::default()
        })
    };
    let r = s.req(ALICE, step(Some(1)));
    assert!(matches!(r, Response::StepCreated(_)), "{r:?}");
    // (The first holds the job's CPU: the second overlaps it.)
    let r = s.req(
        ALICE,
        RequestBody::CreateStep(StepRequest {
            job_id: id,
            name: "sleep".into(),
            ntasks: Some(1),
            overlap: true,
            ..Default::default()
        }),
    );
    assert!(matches!(r, Response::StepCreated(_)), "{r:?}");
    let own = |s: &Sim, n: u32| {
        s.job(id)
            .steps
            .iter()
            .find(|st| st.step_id == n)
            .cloned()
            .unwrap()
    };
    assert_eq!(own(&s, 0).time_limit, Some(1));
    assert_eq!(own(&s, 1).time_limit, None);
    // Time passes in 5 s ticks, the nodes answering.
    let node = s.job(id).alloc.nodes[0].clone();
    let pass = |s: &mut Sim, secs: i64| {
        for _ in 0..secs / 5 {
            s.tick(5);
            for n in ["n1", "n2"] {
                let running_jobs = if n == node { vec![id] } else { vec![] };
                s.ok(
                    ROOT,
                    RequestBody::Heartbeat {
                        node: n.into(),
                        running_jobs,
                    },
                );
            }
        }
    };
    // 30 s run, 100 s suspended, 20 s run: 50 s of its minute.
    pass(&mut s, 30);
    let suspend = |suspend| RequestBody::SuspendJob {
        job_id: id,
        suspend,
    };
    s.ok(ROOT, suspend(true));
    pass(&mut s, 100);
    s.ok(ROOT, suspend(false));
    pass(&mut s, 20);
    assert_eq!(own(&s, 0).state, JobState::Running);
    s.effects.clear();
    pass(&mut s, 15);
    assert_eq!(own(&s, 0).state, JobState::Timeout);
    assert_eq!(s.state(id), JobState::Running, "the job goes on");
    assert!(
        s.effects.iter().any(|e| matches!(e,
        Effect::SignalStep { job_id, step_id: 0, cause: slurm_proto::TermCause::TimeLimit, .. }
            if *job_id == id)),
        "{:?}",
        s.effects
    );
    assert_eq!(own(&s, 1).state, JobState::Running);
    // Another user may not change a step's limit; nothing changes.
    let update = |step_id, time_limit| RequestBody::UpdateStep {
        job_id: id,
        step_id,
        time_limit,
    };
    let r = s.req(BOB, update(Some(1), 5));
    assert!(
        matches!(&r, Response::Error(e) if e.error == SlurmError::UserIdMissing),
        "{r:?}"
    );
    assert_eq!(own(&s, 1).time_limit, None);
    // The owner, for every running step: not the batch step.
    s.ok(ALICE, update(None, 5));
    assert_eq!(own(&s, 1).time_limit, Some(5));
    assert_eq!(own(&s, slurm_proto::BATCH_STEP).time_limit, None);
    // 0 changes nothing; an unknown step is an invalid id.
    s.ok(ALICE, update(None, 0));
    assert_eq!(own(&s, 1).time_limit, Some(5));
    let r = s.req(ALICE, update(Some(9), 5));
    assert!(
        matches!(&r, Response::Error(e) if e.error == SlurmError::InvalidJobId),
        "{r:?}"
    );
    s.check_replay();
}

#[test]
fn task_counts_below_the_node_count_and_overcommit_per_node_limits() {
    let mut s = sim("");
    // Fewer tasks than nodes: refused, as Slurm's ESLURM_BAD_TASK_COUNT.
    let e = s
        .submit_as(ALICE, |d| {
            d.ntasks = Some(1);
            d.min_nodes = Some(2);
        })
        .expect_err("one task on two nodes");
    assert_eq!(e.error, SlurmError::BadTaskCount, "{e:?}");
    assert_eq!(e.error.message(), "Task count specification invalid");
    // Overcommitted, at most 4 tasks a node, on one node: cannot be.
    let e = s
        .submit_as(ALICE, |d| {
            d.overcommit = true;
            d.ntasks = Some(8);
            d.ntasks_per_node = Some(4);
            d.min_nodes = Some(1);
            d.max_nodes = Some(1);
        })
        .expect_err("8 tasks, 4 a node, 1 node");
    assert_eq!(e.error, SlurmError::BadTaskCount, "{e:?}");
    // 1-2 nodes, at most 4 a node: both nodes, 4 tasks each (on one CPU).
    let id = s.submit(|d| {
        d.overcommit = true;
        d.ntasks = Some(8);
        d.ntasks_per_node = Some(4);
        d.min_nodes = Some(1);
        d.max_nodes = Some(2);
    });
    assert_eq!(s.state(id), JobState::Running);
    assert_eq!(s.job(id).alloc.tasks, vec![4, 4]);
    assert_eq!(s.job(id).alloc.cpus, vec![1, 1]);
    s.finish(id, 0);
    // Three tasks on two nodes: 2 and 1.
    let id = s.submit(|d| {
        d.overcommit = true;
        d.ntasks = Some(3);
        d.min_nodes = Some(2);
    });
    assert_eq!(s.state(id), JobState::Running);
    assert_eq!(s.job(id).alloc.tasks, vec![2, 1]);
    s.check_replay();
}

#[test]
fn ntasks_per_core_gives_each_task_its_share_of_a_core() {
    let mut s = sim(
        "NodeName=h1 CPUs=4 Sockets=1 CoresPerSocket=2 ThreadsPerCore=2 RealMemory=1000\n\
         PartitionName=ht Nodes=h1 MaxTime=60 State=UP\n",
    );
    s.ctl.key = Some(slurm_common::auth::Key::from_bytes(b"0123456789abcdef0123"));
    let r = s.req(
        ROOT,
        RequestBody::RegisterNode(NodeRegistration {
            name: "h1".into(),
            cpus: 4,
            boards: 1,
            sockets: 1,
            cores_per_socket: 2,
            threads_per_core: 2,
            real_memory: 1000,
            boot_time: s.now - 100,
            slurmd_start_time: s.now,
            ..Default::default()
        }),
    );
    assert!(!matches!(r, Response::Error(_)), "{r:?}");
    let ht = |d: &mut JobDesc, tasks: u32, per_core: Option<u32>| {
        d.partition = Some("ht".into());
        d.ntasks = Some(tasks);
        d.ntasks_per_core = per_core;
    };
    // Two tasks on one core's two threads without the option.
    let a = s.submit(|d| ht(d, 2, None));
    assert_eq!(s.state(a), JobState::Running);
    assert_eq!(s.job(a).alloc.cpus, vec![2]);
    s.finish(a, 0);
    // One task a core: both cores.
    let b = s.submit(|d| ht(d, 2, Some(1)));
    assert_eq!(s.state(b), JobState::Running);
    assert_eq!(s.job(b).alloc.cpus, vec![4]);
    assert_eq!(s.job(b).alloc.tasks, vec![2]);
    // Its steps keep to it: two threads a task.
    let r = s.req(
        ALICE,
        RequestBody::CreateStep(StepRequest {
            job_id: b,
            name: "s".into(),
            ntasks: Some(2),
            ntasks_per_core: Some(1),
            ..Default::default()
        }),
    );
    let Response::StepCreated(layout) = r else {
        panic!("{r:?}")
    };
    assert_eq!(layout.cpus_per_task, 2);
    s.finish(b, 0);
    // Two a core: as without.
    let c = s.submit(|d| ht(d, 2, Some(2)));
    assert_eq!(s.job(c).alloc.cpus, vec![2]);
    s.finish(c, 0);
    // Three tasks one a core never fit the two cores: refused.
    let e = s
        .submit_as(ALICE, |d| ht(d, 3, Some(1)))
        .expect_err("3 tasks, 2 cores");
    assert_eq!(e.error, SlurmError::RequestedNodeConfigUnavailable, "{e:?}");
    // Zero is no count.
    let e = s.submit_as(ALICE, |d| ht(d, 1, Some(0))).expect_err("0");
    assert_eq!(e.error, SlurmError::InvalidRequest, "{e:?}");
    s.check_replay();
}

/// Accounting's operators and account coordinators, as Slurm's: an
/// operator manages anyone's jobs (admin holds, longer limits) but is no
/// node daemon and no administrator (nodes); a coordinator manages its
/// accounts' jobs as their owner would (user holds only, no longer
/// limits, no moving them out of its accounts) and nothing else.
#[test]
fn operators_and_coordinators_manage_jobs_and_nothing_more() {
    const ADA: Caller = Caller {
        uid: 1004,
        gid: 1004,
        privileged: false,
        operator: false,
        admin: false,
    };
    use slurm_proto::acct::{AdminLevel, UserRec};
    let mut s = sim("PartitionName=staff Nodes=n[1-2] AllowGroups=wheel MaxTime=60 State=UP\n");
    let (carol, opal) = (
        Caller {
            uid: 1002,
            gid: 1002,
            privileged: false,
            operator: false,
            admin: false,
        },
        Caller {
            uid: 1003,
            gid: 1003,
            privileged: false,
            operator: false,
            admin: false,
        },
    );
    for (who, name) in [(carol, "carol"), (opal, "Opal"), (ADA, "ada")] {
        s.ctl.identify(
            who.uid,
            who.gid,
            Identity {
                user: Some(name.into()),
                group: name.into(),
                groups: vec![name.into(), "wheel".into()],
            },
        );
    }
    let rec = |name: &str, level, coord: &[&str]| UserRec {
        name: name.into(),
        admin_level: level,
        coord_accounts: coord.iter().map(|a| a.to_string()).collect(),
        ..Default::default()
    };
    s.ctl.set_assocs(
        crate::assoc::AssocCache {
            users: [
                (
                    "carol".to_string(),
                    rec("carol", AdminLevel::None, &["phys"]),
                ),
                ("opal".to_string(), rec("opal", AdminLevel::Operator, &[])),
                (
                    "ada".to_string(),
                    rec("ada", AdminLevel::Administrator, &[]),
                ),
            ]
            .into_iter()
            .collect(),
            ..Default::default()
        },
        s.now,
    );
    let (carol, opal) = (s.ctl.caller(1002, 1002), s.ctl.caller(1003, 1003));
    assert!(
        opal.operator && !opal.privileged,
        "a mixed-case login is found"
    );
    assert!(!carol.operator);
    let held = |s: &mut Sim, account: &str| {
        s.submit(|d| {
            d.account = Some(account.into());
            d.hold = true;
        })
    };
    let update =
        |s: &mut Sim, who, id, update| s.req(who, RequestBody::UpdateJob { job_id: id, update });
    let denied =
        |r: &Response| matches!(r, Response::Error(e) if e.error == SlurmError::AccessDenied);
    let (phys, chem) = (held(&mut s, "phys"), held(&mut s, "chem"));
    // The coordinator: its account's jobs, as their owner.
    assert!(denied(&update(&mut s, carol, chem, JobUpdate::Release)));
    let r = update(&mut s, carol, phys, JobUpdate::TimeLimit(Some(600)));
    assert!(denied(&r), "{r:?}");
    let r = update(&mut s, carol, phys, JobUpdate::Account("chem".into()));
    assert!(denied(&r), "{r:?}");
    // Into a partition its own groups may use but the job's user may not.
    let r = update(&mut s, carol, phys, JobUpdate::Partition("staff".into()));
    assert!(denied(&r), "{r:?}");
    let r = s.req(
        carol,
        RequestBody::CompleteJob {
            job_id: phys,
            status: 0,
        },
    );
    assert!(denied(&r), "{r:?}");
    let r = s.req(carol, RequestBody::GetJobScript { job_id: phys });
    assert!(denied(&r), "{r:?}");
    let cancel = |s: &mut Sim, who, id| match s.req(
        who,
        RequestBody::Cancel(CancelFilter {
            job_ids: vec![id],
            ..Default::default()
        }),
    ) {
        Response::Cancelled(v) => v[0].1,
        r => panic!("{r:?}"),
    };
    assert_eq!(cancel(&mut s, carol, chem), Some(SlurmError::AccessDenied));
    assert_eq!(cancel(&mut s, carol, phys), None);
    assert_eq!(s.state(phys), JobState::Cancelled);
    // The operator: anyone's jobs, admin holds, longer limits, scripts.
    let r = update(&mut s, opal, chem, JobUpdate::TimeLimit(Some(6000)));
    assert!(matches!(r, Response::Ok), "{r:?}");
    let r = s.req(opal, RequestBody::GetJobScript { job_id: chem });
    assert!(matches!(r, Response::JobScript(_)), "{r:?}");
    assert!(matches!(
        update(&mut s, opal, chem, JobUpdate::Hold),
        Response::Ok
    ));
    assert_eq!(s.job(chem).held, Some(HoldKind::Admin));
    // The owner can neither release an admin hold nor make it its own
    // (holding it again changes nothing).
    assert!(denied(&update(&mut s, ALICE, chem, JobUpdate::Release)));
    let r = update(&mut s, ALICE, chem, JobUpdate::Hold);
    assert!(matches!(r, Response::Ok), "{r:?}");
    assert_eq!(s.job(chem).held, Some(HoldKind::Admin));
    // Operators are held to the job's user's partition rights; root not.
    let staff = || JobUpdate::Partition("staff".into());
    assert!(denied(&update(&mut s, opal, chem, staff())));
    let r = update(&mut s, ROOT, chem, staff());
    assert!(matches!(r, Response::Ok), "{r:?}");
    assert_eq!(s.job(chem).partition, "staff");
    // ... but no node daemon and no node administrator.
    let r = s.req(
        opal,
        RequestBody::Heartbeat {
            node: "n1".into(),
            running_jobs: vec![],
        },
    );
    assert!(matches!(r, Response::Error(_)), "{r:?}");
    assert!(s.ctl.caller(1003, 1003).operator && !s.ctl.caller(1003, 1003).admin);
    let r = s.req(
        opal,
        RequestBody::UpdateNode {
            names: vec!["n1".into()],
            state: Some(NodeStateRequest::Drain),
            reason: Some("x".into()),
            features: None,
        },
    );
    assert!(denied(&r), "{r:?}");
    // scontrol reconfigure: administrators (Slurm's super users), not
    // operators (the configuration read is what they would apply).
    let unread = || {
        Err(RpcError {
            error: SlurmError::InvalidRequest,
            detail: Some("unread".into()),
        })
    };
    let r = s.ctl.reconfigure(opal, unread(), s.now);
    assert!(
        matches!(&r, Err(e) if e.error == SlurmError::AccessDenied),
        "{r:?}"
    );
    let ada = s.ctl.caller(ADA.uid, ADA.gid);
    assert!(ada.admin && !ada.privileged);
    let r = s.ctl.reconfigure(ada, unread(), s.now);
    assert!(
        matches!(&r, Err(e) if e.detail.as_deref() == Some("unread")),
        "{r:?}"
    );
    // scontrol fsdampeningfactor: administrators too, not operators; shown
    // by show config.
    let damp = |s: &mut Sim, who, factor| s.req(who, RequestBody::SetFsDampeningFactor { factor });
    assert!(denied(&damp(&mut s, opal, 3)));
    assert!(denied(&damp(&mut s, carol, 3)));
    assert!(matches!(damp(&mut s, ada, 0), Response::Error(_)));
    assert!(matches!(damp(&mut s, ada, 5), Response::Ok));
    let shown = s.ctl.snapshot().config.entries;
    assert!(
        shown.contains(&("FairShareDampeningFactor".to_string(), "5".to_string())),
        "{shown:?}"
    );
    // PrivateData=jobs: a coordinator also sees its accounts' jobs (names
    // matched whatever their case), an operator every job, others their
    // own.
    let snap = s.ctl.snapshot();
    let named = |name: &'static str| move || name.to_string();
    let seen = |v: &crate::state::JobViewer| -> Vec<JobId> {
        let mut ids: Vec<JobId> = snap
            .jobs
            .iter()
            .filter(|j| v.sees(j))
            .map(|j| j.job_id)
            .collect();
        ids.sort_unstable();
        ids
    };
    let coord = snap.job_viewer(true, 1002, 999_999, named("Carol"));
    assert_eq!(coord.as_ref().map(seen), Some(vec![phys]));
    assert!(snap
        .job_viewer(true, 1003, 999_999, named("opal"))
        .is_none());
    assert!(snap
        .job_viewer(false, 1002, 999_999, named("carol"))
        .is_none());
    let other = snap.job_viewer(true, BOB.uid, 999_999, named("bob"));
    assert_eq!(other.as_ref().map(seen), Some(vec![]));
    let owner = snap.job_viewer(true, ALICE.uid, 999_999, named("alice"));
    assert_eq!(owner.as_ref().map(seen), Some(vec![phys, chem]));
    assert_eq!(cancel(&mut s, opal, chem), None);
    s.check_replay();
}

/// Steps hold CPUs as Slurm's: one without `--exact` takes every CPU of
/// the job on each node it uses (so `srun -N1` steps spread over the job's
/// nodes), one with `--exact` only its tasks', `--overlap` holds nothing and
/// waits for nothing; a step that fits once others end is told the nodes
/// are busy (srun asks again), one that never fits is refused, and another
/// user's step request changes nothing.
#[test]
fn steps_hold_cpus_whole_nodes_or_exactly_and_wait_for_each_other() {
    let mut s = sim("");
    s.ctl.key = Some(slurm_common::auth::Key::from_bytes(b"0123456789abcdef0123"));
    let id = s.submit(|d| {
        d.min_nodes = Some(2);
        d.ntasks = Some(4);
    });
    assert_eq!(s.state(id), JobState::Running);
    assert_eq!(s.job(id).alloc.cpus, vec![2, 2]);
    let ask = |f: &dyn Fn(&mut StepRequest)| {
        let mut r = StepRequest {
            job_id: id,
            name: "s".into(),
            min_nodes: Some(1),
            ntasks: Some(1),
            ..Default::default()
        };
        f(&mut r);
        RequestBody::CreateStep(r)
    };
    let made = |r: Response| match r {
        Response::StepCreated(l) => *l,
        other => panic!("{other:?}"),
    };
    let refused = |r: &Response| match r {
        Response::Error(e) => e.error,
        other => panic!("created: {other:?}"),
    };
    // Two `srun -N1 -n1` steps: one on each node, each all of its CPUs.
    let a = made(s.req(ALICE, ask(&|_| {})));
    assert_eq!(a.nodes, vec!["n1"]);
    assert!(a.cred.step_cpus.is_empty(), "the job's CPUs: no cut");
    let b = made(s.req(ALICE, ask(&|_| {})));
    assert_eq!(b.nodes, vec!["n2"]);
    let held = |s: &Sim, n: u32| {
        s.job(id)
            .steps
            .iter()
            .find(|st| st.step_id == n)
            .map(|st| st.cpus.clone())
            .unwrap()
    };
    assert_eq!((held(&s, 0), held(&s, 1)), (vec![2], vec![2]));
    // A third waits, with --exact too; another user is refused outright.
    let r = s.req(ALICE, ask(&|_| {}));
    assert_eq!(refused(&r), SlurmError::NodesBusy);
    let r = s.req(ALICE, ask(&|r| r.exact = true));
    assert_eq!(refused(&r), SlurmError::NodesBusy);
    let r = s.req(BOB, ask(&|r| r.overlap = true));
    assert_eq!(refused(&r), SlurmError::AccessDenied);
    // What never fits the job is refused, busy or not.
    let r = s.req(
        ALICE,
        ask(&|r| {
            r.min_nodes = None;
            r.ntasks = Some(5);
        }),
    );
    assert_eq!(refused(&r), SlurmError::TooManyRequestedCpus);
    // --overlap runs at once, holding nothing; -O lets it take 5 tasks.
    let o = made(s.req(
        ALICE,
        ask(&|r| {
            r.overlap = true;
            r.min_nodes = None;
            r.ntasks = Some(5);
            r.overcommit = true;
        }),
    ));
    assert_eq!(o.nodes, vec!["n1", "n2"]);
    assert!(s
        .job(id)
        .steps
        .iter()
        .any(|st| st.step_id == 2 && st.overlap));
    let r = s.req(ALICE, ask(&|_| {}));
    assert_eq!(refused(&r), SlurmError::NodesBusy, "overlap held nothing");
    // Misuse: the job's owner (not a node daemon) saying step 0 ended on
    // n1 is refused; a node the step does not run on saying so changes
    // nothing: still busy.
    let run = s.job(id).run();
    let ended = |node: &str| RequestBody::StepUsage {
        job_id: id,
        step_id: 0,
        node: node.into(),
        usage: None,
        job_start: run,
    };
    let r = s.req(ALICE, ended("n1"));
    assert_eq!(refused(&r), SlurmError::AccessDenied);
    s.ok(ROOT, ended("n2"));
    let r = s.req(ALICE, ask(&|_| {}));
    assert_eq!(refused(&r), SlurmError::NodesBusy);
    assert!(s.job(id).steps.iter().all(|st| st.ended_on.is_empty()));
    // Step 0 ends: two --exact steps share n1, a CPU each, each its own.
    let job_start = s.job(id).run();
    s.ok(
        ALICE,
        RequestBody::StepComplete {
            job_id: id,
            step_id: 0,
            status: 0,
            job_start,
        },
    );
    let e1 = made(s.req(ALICE, ask(&|r| r.exact = true)));
    let e2 = made(s.req(ALICE, ask(&|r| r.exact = true)));
    assert_eq!(
        (e1.nodes.clone(), e2.nodes.clone()),
        (vec!["n1".into()], vec!["n1".into()])
    );
    assert_eq!(e1.cred.step_cpus, vec![1], "its cpuset is cut to one CPU");
    assert_eq!((held(&s, 3), held(&s, 4)), (vec![1], vec![1]));
    let r = s.req(ALICE, ask(&|r| r.exact = true));
    assert_eq!(refused(&r), SlurmError::NodesBusy);
    // -w names the busy node: it waits (n2 being free changes nothing).
    let r = s.req(
        ALICE,
        ask(&|r| {
            r.nodelist = vec!["n1".into()];
            r.exact = true;
        }),
    );
    assert_eq!(refused(&r), SlurmError::NodesBusy);
    // A step asking no memory names its job's there.
    let st = s
        .job(id)
        .steps
        .iter()
        .find(|st| st.step_id == 1)
        .cloned()
        .unwrap();
    assert_eq!(s.job(id).alloc.mem, vec![0, 0], "no memory asked or kept");
    assert_eq!(st.tres(&s.job(id).alloc), "cpu=2,node=1");
    // Accounting and scontrol count a step's own CPUs.
    let st = s
        .job(id)
        .steps
        .iter()
        .find(|st| st.step_id == 1)
        .cloned()
        .unwrap();
    assert_eq!(st.alloc_cpus(), 2);
    let st = s
        .job(id)
        .steps
        .iter()
        .find(|st| st.step_id == 3)
        .cloned()
        .unwrap();
    assert_eq!(st.alloc_cpus(), 1);
    s.check_replay();
}

#[test]
fn step_placement_follows_what_other_steps_hold() {
    use super::steps::{place_step, GpuNeed, MemNeed, StepAsk, StepPlace};
    let cand = [0usize, 1, 2];
    let ask = StepAsk {
        cand: &cand,
        named: false,
        min_nodes: None,
        ntasks: Some(3),
        ntasks_per_node: None,
        job_tasks: 12,
        cpt: 2,
        exact: true,
        overcommit: false,
        gpus: GpuNeed::All,
        max_tasks_per_node: 512,
        mem: MemNeed::Whole,
    };
    let job = [4u32, 4, 4];
    // Exact: 3 tasks of 2 CPUs fill node 0, one more on node 1.
    assert_eq!(
        place_step(&ask, &job, &[0, 0, 0], &[0; 3], &[0; 3], &[0; 3], &[0; 3]),
        Ok(StepPlace {
            nodes: vec![0, 1],
            per_node: vec![2, 1],
            cpus: vec![4, 2],
            gpus: vec![0, 0],
            mem: vec![0, 0],
        })
    );
    // Node 0 half held: one task there, the rest on node 1.
    assert_eq!(
        place_step(&ask, &job, &[2, 0, 0], &[0; 3], &[0; 3], &[0; 3], &[0; 3]),
        Ok(StepPlace {
            nodes: vec![0, 1],
            per_node: vec![1, 2],
            cpus: vec![2, 4],
            gpus: vec![0, 0],
            mem: vec![0, 0],
        })
    );
    // Not exact: nodes with any CPU held are passed over; all CPUs taken.
    let whole = StepAsk {
        exact: false,
        ..ask.clone()
    };
    assert_eq!(
        place_step(&whole, &job, &[1, 0, 0], &[0; 3], &[0; 3], &[0; 3], &[0; 3]),
        Ok(StepPlace {
            nodes: vec![1, 2],
            per_node: vec![2, 1],
            cpus: vec![4, 4],
            gpus: vec![0, 0],
            mem: vec![0, 0],
        })
    );
    assert_eq!(
        place_step(&whole, &job, &[1, 1, 1], &[0; 3], &[0; 3], &[0; 3], &[0; 3]),
        Err(SlurmError::NodesBusy)
    );
    // Every node asked for (no -n, no -N): one busy node blocks.
    let all = StepAsk {
        ntasks: None,
        ..whole.clone()
    };
    assert_eq!(
        place_step(&all, &job, &[0, 0, 1], &[0; 3], &[0; 3], &[0; 3], &[0; 3]),
        Err(SlurmError::NodesBusy)
    );
    // More CPUs than the job has: refused; with -O the rest round-robin.
    let many = StepAsk {
        ntasks: Some(7),
        ..ask.clone()
    };
    assert_eq!(
        place_step(&many, &job, &[0, 0, 0], &[0; 3], &[0; 3], &[0; 3], &[0; 3]),
        Err(SlurmError::TooManyRequestedCpus)
    );
    let over = StepAsk {
        overcommit: true,
        ..many.clone()
    };
    let p = place_step(&over, &job, &[0, 0, 0], &[0; 3], &[0; 3], &[0; 3], &[0; 3]).unwrap();
    assert_eq!(p.per_node.iter().sum::<u32>(), 7);
    assert_eq!(p.cpus, vec![4, 4, 4]);
    // -w with -N fewer: the first named.
    let named = StepAsk {
        named: true,
        min_nodes: Some(1),
        ntasks: None,
        cand: &[2, 1],
        ..ask.clone()
    };
    assert_eq!(
        place_step(&named, &job, &[0, 0, 0], &[0; 3], &[0; 3], &[0; 3], &[0; 3])
            .unwrap()
            .nodes,
        vec![2]
    );
    // No -n: the job's task count as far as the nodes hold it (-r or -x
    // may leave some out).
    let rest = StepAsk {
        ntasks: None,
        cand: &[1, 2],
        job_tasks: 12,
        exact: false,
        ..ask.clone()
    };
    assert_eq!(
        place_step(&rest, &job, &[0; 3], &[0; 3], &[0; 3], &[0; 3], &[0; 3])
            .unwrap()
            .per_node,
        vec![2, 2]
    );
    // --ntasks-per-node caps each node, -n spread evenly under it.
    let pn = |t, p, n| StepAsk {
        ntasks: Some(t),
        ntasks_per_node: Some(p),
        min_nodes: n,
        cpt: 1,
        ..ask.clone()
    };
    let p = place_step(
        &pn(8, 2, None),
        &job,
        &[0; 3],
        &[0; 3],
        &[0; 3],
        &[0; 3],
        &[0; 3],
    );
    assert_eq!(
        p,
        Err(SlurmError::TooManyRequestedCpus),
        "3 nodes of 2 hold 6"
    );
    let p = place_step(
        &pn(6, 2, None),
        &job,
        &[0; 3],
        &[0; 3],
        &[0; 3],
        &[0; 3],
        &[0; 3],
    )
    .unwrap();
    assert_eq!(p.per_node, vec![2, 2, 2]);
    let p = place_step(
        &pn(3, 4, Some(2)),
        &job,
        &[0; 3],
        &[0; 3],
        &[0; 3],
        &[0; 3],
        &[0; 3],
    )
    .unwrap();
    assert_eq!(p.per_node, vec![2, 1]);
    // However overcommitted, no more than MaxTasksPerNode a node.
    let huge = StepAsk {
        ntasks: Some(u32::MAX),
        overcommit: true,
        cpt: 65536,
        ..ask.clone()
    };
    assert_eq!(
        place_step(&huge, &job, &[0; 3], &[0; 3], &[0; 3], &[0; 3], &[0; 3]),
        Err(SlurmError::BadTaskCount)
    );
    // GPUs: a node must have those asked free; --gpus-per-task caps the
    // tasks a node takes; --gpus=N spreads over the nodes in order.
    let gpus = |g| StepAsk {
        gpus: g,
        ntasks: Some(2),
        cpt: 1,
        ..ask.clone()
    };
    let p = place_step(
        &gpus(GpuNeed::PerTask(1)),
        &job,
        &[0; 3],
        &[2; 3],
        &[0, 2, 1],
        &[0; 3],
        &[0; 3],
    )
    .unwrap();
    assert_eq!((p.nodes, p.per_node, p.gpus), (vec![1], vec![2], vec![2]));
    let p = place_step(
        &gpus(GpuNeed::PerTask(1)),
        &job,
        &[0; 3],
        &[2; 3],
        &[1, 0, 1],
        &[0; 3],
        &[0; 3],
    )
    .unwrap();
    assert_eq!(
        (p.nodes, p.per_node, p.gpus),
        (vec![0, 2], vec![1, 1], vec![1, 1])
    );
    let one = |g| StepAsk {
        min_nodes: Some(1),
        ..gpus(g)
    };
    let p = place_step(
        &one(GpuNeed::All),
        &job,
        &[0; 3],
        &[2; 3],
        &[1, 2, 2],
        &[0; 3],
        &[0; 3],
    )
    .unwrap();
    assert_eq!((p.nodes, p.gpus), (vec![1], vec![2]));
    let p = place_step(
        &one(GpuNeed::Nothing),
        &job,
        &[0; 3],
        &[2; 3],
        &[0; 3],
        &[0; 3],
        &[0; 3],
    )
    .unwrap();
    assert_eq!((p.nodes, p.gpus), (vec![0], vec![0]));
    let two = |g| StepAsk {
        min_nodes: Some(2),
        ..gpus(g)
    };
    let p = place_step(
        &two(GpuNeed::Total(3)),
        &job,
        &[0; 3],
        &[2; 3],
        &[2; 3],
        &[0; 3],
        &[0; 3],
    )
    .unwrap();
    assert_eq!((p.nodes, p.gpus), (vec![0, 1], vec![2, 1]));
    let p = place_step(
        &two(GpuNeed::Total(2)),
        &job,
        &[0; 3],
        &[2; 3],
        &[2; 3],
        &[0; 3],
        &[0; 3],
    )
    .unwrap();
    assert_eq!(p.gpus, vec![1, 1], "one a node before more on any");
    // No -N: as many nodes as hold the GPUs asked in all.
    let three = StepAsk {
        ntasks: Some(3),
        ..gpus(GpuNeed::Total(3))
    };
    let p = place_step(&three, &job, &[0; 3], &[2; 3], &[1, 1, 2], &[0; 3], &[0; 3]).unwrap();
    assert_eq!((p.nodes, p.gpus), (vec![0, 1, 2], vec![1, 1, 1]));
    assert_eq!(
        place_step(
            &two(GpuNeed::Total(5)),
            &job,
            &[0; 3],
            &[2; 3],
            &[2; 3],
            &[0; 3],
            &[0; 3]
        ),
        Err(SlurmError::InvalidGres)
    );
    assert_eq!(
        place_step(
            &one(GpuNeed::PerNode(3)),
            &job,
            &[0; 3],
            &[2; 3],
            &[2; 3],
            &[0; 3],
            &[0; 3]
        ),
        Err(SlurmError::NodesBusy),
        "no node has three (the controller tells it never fits)"
    );
    // Memory: --mem holds that much a node, --mem-per-cpu so much a CPU
    // held; a node without enough free is passed over; none asked holds
    // none; untracked memory (0) holds back nothing.
    let mem = |m| StepAsk {
        mem: m,
        min_nodes: Some(1),
        ntasks: Some(1),
        cpt: 1,
        ..ask.clone()
    };
    let all = [1000u64; 3];
    let p = place_step(
        &mem(MemNeed::PerNode(600)),
        &job,
        &[0; 3],
        &[0; 3],
        &[0; 3],
        &all,
        &[500, 700, 1000],
    )
    .unwrap();
    assert_eq!((p.nodes, p.mem), (vec![1], vec![600]));
    let p = place_step(
        &mem(MemNeed::PerCpu(100)),
        &job,
        &[0; 3],
        &[0; 3],
        &[0; 3],
        &all,
        &all,
    )
    .unwrap();
    assert_eq!(p.mem, vec![100], "one CPU held (--exact)");
    let whole = StepAsk {
        exact: false,
        ..mem(MemNeed::PerCpu(100))
    };
    let p = place_step(&whole, &job, &[0; 3], &[0; 3], &[0; 3], &all, &all).unwrap();
    assert_eq!(
        p.mem,
        vec![100],
        "its task's CPU (Slurm: the CPUs it uses, not the node's)"
    );
    let p = place_step(
        &mem(MemNeed::Whole),
        &job,
        &[0; 3],
        &[0; 3],
        &[0; 3],
        &all,
        &[0; 3],
    )
    .unwrap();
    assert_eq!(p.mem, vec![0]);
    assert_eq!(
        place_step(
            &mem(MemNeed::PerNode(2000)),
            &job,
            &[0; 3],
            &[0; 3],
            &[0; 3],
            &all,
            &all
        ),
        Err(SlurmError::NodesBusy),
        "more than any node of the job has (the controller says never)"
    );
    let p = place_step(
        &mem(MemNeed::PerNode(2000)),
        &job,
        &[0; 3],
        &[0; 3],
        &[0; 3],
        &[0; 3],
        &[0; 3],
    )
    .unwrap();
    assert_eq!(
        p.mem,
        vec![0],
        "untracked: nothing held, no limit (as Slurm's)"
    );
    // A task wider than any node: no node even when idle (the controller
    // refuses it).
    let wide = StepAsk {
        cpt: 5,
        ntasks: Some(1),
        ..ask.clone()
    };
    assert_eq!(
        place_step(&wide, &job, &[0, 0, 0], &[0; 3], &[0; 3], &[0; 3], &[0; 3]),
        Err(SlurmError::NodesBusy)
    );
}

/// Steps that ask their own memory (`srun --mem`) hold it from the job's:
/// one that fits once another ends waits, one asking more than the job has
/// is refused; their credentials carry the limit.
#[test]
fn steps_hold_the_memory_they_ask_for() {
    let mut s = sim("");
    s.ctl.key = Some(slurm_common::auth::Key::from_bytes(b"0123456789abcdef0123"));
    let m = s.submit(|d| {
        d.mem_per_node = Some(1000);
        d.ntasks = Some(2);
    });
    assert_eq!(s.state(m), JobState::Running);
    assert_eq!(s.job(m).alloc.mem, vec![1000]);
    let mstep = |mib| {
        RequestBody::CreateStep(StepRequest {
            job_id: m,
            name: "m".into(),
            ntasks: Some(1),
            exact: true,
            mem_per_node: Some(mib),
            ..Default::default()
        })
    };
    let made = |r: Response| match r {
        Response::StepCreated(l) => *l,
        other => panic!("{other:?}"),
    };
    let refused = |r: &Response| match r {
        Response::Error(e) => e.error,
        other => panic!("created: {other:?}"),
    };
    let l = made(s.req(ALICE, mstep(600)));
    assert_eq!(l.cred.step_mem, vec![600]);
    // Its TRES (scontrol show step, sacct's AllocTRES) name its own memory.
    let st = s
        .job(m)
        .steps
        .iter()
        .find(|st| st.step_id == 0)
        .cloned()
        .unwrap();
    assert_eq!(st.tres(&s.job(m).alloc), "cpu=1,mem=600M,node=1");
    let r = s.req(ALICE, mstep(600));
    assert_eq!(refused(&r), SlurmError::NodesBusy);
    let r = s.req(ALICE, mstep(1500));
    assert_eq!(refused(&r), SlurmError::InvalidTaskMemory);
    let l = made(s.req(ALICE, mstep(400)));
    assert_eq!(l.cred.step_mem, vec![400]);
    // None asked: the job's, holding none, no limit of its own.
    let l = made(s.req(
        ALICE,
        RequestBody::CreateStep(StepRequest {
            job_id: m,
            name: "m".into(),
            ntasks: Some(1),
            overlap: true,
            ..Default::default()
        }),
    ));
    assert!(l.cred.step_mem.is_empty());
    s.check_replay();
}
