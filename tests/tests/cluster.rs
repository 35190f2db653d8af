//! Whole-cluster tests: the real controller and node daemons on loopback,
//! driven by the real commands.

use slurm_proto::{JobReason, JobState, NodeBaseState, RequestBody, Response, SlurmError};
use slurm_tests::*;
use std::os::unix::fs::MetadataExt;
use std::time::{Duration, Instant};

#[path = "cluster/accounting.rs"]
mod accounting;
#[path = "cluster/acct_cmds.rs"]
mod acct_cmds;
#[path = "cluster/compat.rs"]
mod compat;
#[path = "cluster/failover.rs"]
mod failover;
#[path = "cluster/faults.rs"]
mod faults;
#[path = "cluster/fuzz.rs"]
mod fuzz;
#[path = "cluster/gpus.rs"]
mod gpus;
#[path = "cluster/hardening.rs"]
mod hardening;
#[path = "cluster/kube.rs"]
mod kube;
#[path = "cluster/node_scripts.rs"]
mod node_scripts;
#[path = "cluster/preemption.rs"]
mod preemption;
#[path = "cluster/tls.rs"]
mod tls;
#[path = "cluster/topology.rs"]
mod topology;

fn write_script(t: &TestCluster, name: &str, body: &str) -> String {
    let p = t.work.join(name);
    std::fs::write(&p, body).unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o755)).unwrap();
    p.display().to_string()
}

#[test]
fn three_node_job_runs_as_the_user_with_slurm_environment() {
    let t = TestCluster::start(3, |_| {});
    let script = write_script(
        &t,
        "env.sh",
        "#!/bin/sh\n#SBATCH --nodes=3\n#SBATCH --ntasks-per-node=1\n#SBATCH -J envjob -o env-%j.out\nenv | grep ^SLURM | sort\necho uid=$(id -u)\npwd\n",
    );
    let id = t.sbatch_as_user(&[&script]);
    let j = t.wait_done(id, 30);
    assert_eq!(j.state, JobState::Completed, "{:?}", j.reason);
    assert_eq!(j.exit_code_pair(), (0, 0));
    assert_eq!(j.user_id, TEST_UID);
    assert_eq!(j.alloc.nodes, vec!["n1", "n2", "n3"]);
    let out_path = t.work.join(format!("env-{id}.out"));
    let out = std::fs::read_to_string(&out_path).unwrap_or_else(|e| panic!("{e}\n{}", t.logs()));
    for want in [
        "SLURM_JOB_NUM_NODES=3\n",
        "SLURM_JOB_NODELIST=n[1-3]\n",
        "SLURM_NNODES=3\n",
        "SLURM_TASKS_PER_NODE=1(x3)\n",
        "SLURM_JOB_CPUS_PER_NODE=1(x3)\n",
        "SLURM_JOB_NAME=envjob\n",
        "SLURM_JOB_PARTITION=debug\n",
        "SLURMD_NODENAME=n1\n",
        "SLURM_CLUSTER_NAME=local\n",
        &format!("SLURM_JOB_ID={id}\n"),
        &format!("SLURM_JOB_UID={TEST_UID}\n"),
        &format!("uid={TEST_UID}\n"),
        &format!("SLURM_SUBMIT_DIR={}\n", t.work.display()),
    ] {
        assert!(out.contains(want), "missing {want:?} in:\n{out}");
    }
    assert!(
        out.contains(&format!("{}\n", t.work.display())),
        "ran in the submit dir:\n{out}"
    );
    assert_eq!(
        std::fs::metadata(&out_path).unwrap().uid(),
        TEST_UID,
        "output written as the user"
    );
}

#[test]
fn full_cluster_keeps_jobs_pending_and_cancel_frees_it() {
    let t = TestCluster::start(2, |_| {});
    let big = t.sbatch(&["-N", "2", "-n", "8", "-J", "big", "--wrap", "sleep 60"]);
    t.wait_job(big, 20, "running", |j| j.state == JobState::Running);
    let waiting = t.sbatch(&["-J", "waitres", "--wrap", "true"]);
    let behind = t.sbatch(&["-J", "waitprio", "--wrap", "true"]);
    t.wait_job(waiting, 10, "pending on Resources", |j| {
        j.reason == JobReason::Resources
    });
    t.wait_job(behind, 10, "pending on Priority", |j| {
        j.reason == JobReason::Priority
    });

    // srun --immediate gives up (and leaves no job behind) when the
    // allocation cannot start at once.
    let out = t.run("srun", &["--immediate", "true"]);
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(
        stderr(&out),
        "srun: error: Unable to allocate resources: Requested nodes are busy\n"
    );
    let gave_up = t
        .jobs()
        .into_iter()
        .filter(|j| j.name == "true")
        .map(|j| j.state)
        .collect::<Vec<_>>();
    assert_eq!(gave_up, vec![JobState::Cancelled]);
    // SLURM_IMMEDIATE is --immediate; SLURM_EXIT_IMMEDIATE its exit code,
    // SLURM_EXIT_ERROR that of other errors (srun, salloc, sbatch).
    for prog in ["srun", "salloc"] {
        let out = t
            .cmd(prog)
            .args(["true"])
            .env("SLURM_IMMEDIATE", "1")
            .env("SALLOC_IMMEDIATE", "1")
            .env("SLURM_EXIT_IMMEDIATE", "42")
            .env("SLURM_EXIT_ERROR", "7")
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(42), "{prog}: {}", stderr(&out));
        assert!(
            stderr(&out).contains("Requested nodes are busy"),
            "{}",
            stderr(&out)
        );
    }
    for (prog, args) in [
        ("srun", &["--bogus", "true"][..]),
        ("salloc", &["-p", "nosuch", "true"][..]),
        ("sbatch", &["-p", "nosuch", "--wrap", "true"][..]),
    ] {
        let out = t
            .cmd(prog)
            .args(args)
            .env("SLURM_EXIT_ERROR", "7")
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(7), "{prog}: {}", stderr(&out));
    }

    let sq = stdout(&t.run("squeue", &[]));
    let lines: Vec<&str> = sq.lines().collect();
    assert_eq!(
        lines[0],
        "             JOBID PARTITION     NAME     USER ST       TIME  NODES NODELIST(REASON)"
    );
    assert!(
        sq.contains(&format!(
            "{waiting:>18}     debug  waitres     root PD       0:00      1 (Resources)"
        )),
        "{sq}"
    );
    assert!(
        sq.contains(&format!(
            "{behind:>18}     debug waitprio     root PD       0:00      1 (Priority)"
        )),
        "{sq}"
    );
    assert!(
        sq.contains("     root  R ") && sq.contains("      2 n[1-2]"),
        "{sq}"
    );
    let si = stdout(&t.run("sinfo", &[]));
    assert_eq!(si, "PARTITION AVAIL  TIMELIMIT  NODES  STATE NODELIST\ndebug*       up   infinite      2  alloc n[1-2]\n");

    let out = t.run("scancel", &[&big.to_string()]);
    assert!(out.status.success(), "{}", stderr(&out));
    let j = t.wait_done(big, 30);
    assert_eq!(j.state, JobState::Cancelled);
    assert_eq!(j.exit_code_pair().1, libc::SIGTERM, "killed by SIGTERM");
    assert_eq!(t.wait_done(waiting, 30).state, JobState::Completed);
    assert_eq!(t.wait_done(behind, 30).state, JobState::Completed);
    let si = stdout(&t.run("sinfo", &[]));
    assert!(
        si.ends_with("debug*       up   infinite      2   idle n[1-2]\n"),
        "{si}"
    );
    // Unknown ids are silent and succeed, as in Slurm.
    let out = t.run("scancel", &["999999"]);
    assert!(out.status.success() && out.stdout.is_empty() && out.stderr.is_empty());
}

/// A job's time limit ends it TIMEOUT; a step's own (`srun -t` in an
/// allocation, or `scontrol update StepId=`) ends that step TIMEOUT and the
/// job goes on. Only the job's owner (or root) changes a step's limit.
#[test]
fn time_limit_ends_the_job_with_timeout() {
    let t = TestCluster::start(1, |s| s.kill_wait = 2);
    let id = t.sbatch(&[
        "-t",
        "1",
        "-o",
        "limit.out",
        "--wrap",
        "trap '' TERM; sleep 300",
    ]);
    // The user's step asks for 3 minutes, then its owner cuts it to one.
    let b = t.sbatch_as_user(&[
        "-t",
        "5",
        "-o",
        "step.out",
        "--wrap",
        "srun -t 3 sh -c 'trap \"\" TERM; echo started; sleep 300'; echo srun=$?",
    ]);
    // Root's step: the user may not touch it; root raises it.
    let c = t.sbatch(&[
        "-t",
        "5",
        "-o",
        "raised.out",
        "--wrap",
        "srun -t 1 sleep 300",
    ]);
    let step_of = |job: u32| {
        t.wait_job(job, 20, "its step running", |j| {
            j.steps
                .iter()
                .any(|s| s.step_id == 0 && s.state == JobState::Running)
        })
        .steps
        .into_iter()
        .find(|s| s.step_id == 0)
        .unwrap()
    };
    assert_eq!(step_of(b).time_limit, Some(3));
    assert_eq!(step_of(c).time_limit, Some(1));
    let show = t.run_as_user("scontrol", &["show", "step", &format!("{b}.0")]);
    assert!(
        String::from_utf8_lossy(&show.stdout).contains(" TimeLimit=00:03:00\n"),
        "{}",
        String::from_utf8_lossy(&show.stdout)
    );
    let out = t.run_as_user(
        "scontrol",
        &["update", &format!("StepId={b}.0"), "TimeLimit=-2"],
    );
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(step_of(b).time_limit, Some(1));
    let out = t.run_as_user(
        "scontrol",
        &["update", &format!("StepId={c}.0"), "TimeLimit=100"],
    );
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(stderr(&out), "slurm_update error: Invalid user id\n");
    assert_eq!(
        step_of(c).time_limit,
        Some(1),
        "a refused update changed nothing"
    );
    let out = t.run(
        "scontrol",
        &["update", &format!("StepId={c}.0"), "TimeLimit=+10"],
    );
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(step_of(c).time_limit, Some(11));
    let r = t.wait_job(id, 20, "running", |j| j.state == JobState::Running);
    assert_eq!(r.time_limit, Some(1));
    let j = t.wait_done(id, 100);
    assert_eq!(j.state, JobState::Timeout);
    assert_eq!(j.reason, JobReason::TimeLimit);
    let elapsed = j.end_time.unwrap() - j.start_time.unwrap();
    assert!((60..=63).contains(&elapsed), "ended after {elapsed}s");
    // TERM was ignored, so KILL ended it after KillWait.
    assert_eq!(j.exit_code_pair().1, libc::SIGKILL);
    // The job's output says why, as Slurm's slurmstepd does.
    let out = std::fs::read_to_string(t.work.join("limit.out")).unwrap();
    assert!(
        out.starts_with(&format!(
            "slurmstepd: error: *** JOB {id} ON n1 CANCELLED AT 20"
        )) && out.ends_with(" DUE TO TIME LIMIT ***\n"),
        "{out}"
    );

    // The user's step ended TIMEOUT after its minute; its job went on.
    let j = t.wait_done(b, 40);
    assert_eq!(j.state, JobState::Completed);
    let st = j.steps.iter().find(|s| s.step_id == 0).unwrap();
    assert_eq!(st.state, JobState::Timeout);
    let ran = st.end_time.unwrap() - st.start_time;
    assert!((60..=63).contains(&ran), "step ended after {ran}s");
    let out = std::fs::read_to_string(t.work.join("step.out")).unwrap();
    assert!(
        out.contains(&format!(
            "slurmstepd: error: *** STEP {b}.0 ON n1 CANCELLED AT 20"
        )) && out.contains(" DUE TO TIME LIMIT ***\n")
            && out
                .lines()
                .last()
                .is_some_and(|l| l.starts_with("srun=") && l != "srun=0"),
        "{out}"
    );
    // Root's raised step runs on.
    let j = t.job(c).unwrap();
    assert_eq!(j.state, JobState::Running);
    let st = j.steps.iter().find(|s| s.step_id == 0).unwrap();
    assert_eq!(st.state, JobState::Running, "{st:?}");
    assert!(t.run("scancel", &[&c.to_string()]).status.success());
}

#[test]
fn controller_crash_loses_no_acknowledged_submission_and_readopts_running_jobs() {
    let mut t = TestCluster::start(2, |_| {});
    let marker = t.work.join("marker");
    let running = t.sbatch(&[
        "-o",
        "run.out",
        "--wrap",
        &format!("sleep 6; echo finished > {}", marker.display()),
    ]);
    t.wait_job(running, 20, "running", |j| j.state == JobState::Running);
    let mut held = Vec::new();
    for i in 0..40 {
        held.push(t.sbatch(&["-H", "-J", &format!("h{i}"), "--wrap", "true"]));
    }
    // Crash right after the last acknowledgement.
    t.c.kill_ctld(libc::SIGKILL);
    t.c.start_ctld().expect("restart");
    let jobs = t.jobs();
    for id in &held {
        let j = jobs
            .iter()
            .find(|j| j.job_id == *id)
            .unwrap_or_else(|| panic!("job {id} lost"));
        assert_eq!(j.state, JobState::Pending);
        assert_eq!(j.reason, JobReason::JobHeldAdmin);
    }
    let r = jobs
        .iter()
        .find(|j| j.job_id == running)
        .expect("running job kept");
    assert_eq!(r.state, JobState::Running);
    // The node daemons re-register and the job finishes normally.
    let j = t.wait_done(running, 40);
    assert_eq!(j.state, JobState::Completed, "{:?}", j.reason);
    assert_eq!(std::fs::read_to_string(&marker).unwrap(), "finished\n");
    // New ids continue after the recovered ones.
    let next = t.sbatch(&["--wrap", "true"]);
    assert!(next > *held.last().unwrap());
    assert_eq!(t.wait_done(next, 30).state, JobState::Completed);
}

#[test]
fn dead_node_daemon_goes_down_and_its_job_fails_then_returns() {
    let mut t = TestCluster::start(2, |s| s.slurmd_timeout = 3);
    let id = t.sbatch(&["-N", "2", "--no-requeue", "--wrap", "sleep 120"]);
    t.wait_job(id, 20, "running", |j| j.state == JobState::Running);
    t.c.kill_slurmd(1, libc::SIGKILL);
    let n = t.wait_node("n2", 20, "down", |n| n.base_state == NodeBaseState::Down);
    assert!(n.flags.not_responding);
    assert_eq!(n.state_long(), "DOWN+NOT_RESPONDING");
    assert_eq!(n.reason.as_deref(), Some("Not responding"));
    let j = t.wait_done(id, 30);
    assert_eq!(j.state, JobState::NodeFail);
    let si = stdout(&t.run("sinfo", &[]));
    assert!(si.contains("down* n2"), "{si}");
    // ReturnToService=2: the node comes back when its daemon registers.
    t.c.start_slurmd(1).unwrap();
    let n = t.wait_node("n2", 20, "idle", |n| n.base_state == NodeBaseState::Idle);
    assert!(!n.flags.not_responding && n.reason.is_none());
}

/// A command's gRPC call seen on the wire, tried again as an attacker
/// would: sent twice, with another message, to another method; and calls
/// whose messages do not make a request.
#[test]
fn command_calls_over_grpc_are_bound_to_their_method_and_message() {
    use slurm_common::auth::{Binding, Key, TO_CTLD};
    use slurm_common::grpc;
    use slurm_proto::grpc::commands::CommandCall;
    use slurm_proto::grpc::pb;
    let t = TestCluster::start(1, |_| {});
    let dir = &t.c.spec.dir;
    let key = Key::load(&dir.join("slurm.key")).unwrap();
    let (tls, ctld) = t.command_tls();
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let ch = {
        let _in = rt.enter();
        grpc::channel(Some(tls.client.clone()), &ctld, "localhost").unwrap()
    };
    // Send `call` with the credential `cred`, whatever it was made for.
    let send = |call: CommandCall, cred: &slurm_proto::Credential| -> Response {
        let c = cred.clone();
        rt.block_on(grpc::call_command(
            &ch,
            "localhost",
            call,
            move |_: &Binding| Ok(c),
            Duration::from_secs(10),
        ))
        .unwrap()
    };
    let sign = |uid: u32, call: &CommandCall| {
        let b = Binding::for_message(call.method(), &call.encode(), TO_CTLD);
        key.sign(uid, uid, "test", slurm_common::auth::now(), &b)
    };
    let refused = |r: Response, want: SlurmError| {
        assert!(
            matches!(r, Response::Error(ref e) if e.error == want),
            "{r:?}"
        );
    };
    let call = |body: RequestBody| CommandCall::from_body(body).unwrap();

    // Seen once, answered once.
    let ping = call(RequestBody::Ping);
    let cred = sign(TEST_UID, &ping);
    assert!(matches!(send(ping.clone(), &cred), Response::Pong { .. }));
    refused(send(ping, &cred), SlurmError::InvalidCredential);

    // Root's job, and a user's credential for listing jobs.
    let id = t.sbatch(&["-J", "roots", "--begin", "now+3600", "--wrap", "true"]);
    let list = call(RequestBody::GetJobs);
    let cred = sign(TEST_UID, &list);
    // Sent to another method with the same bytes: the method is signed.
    let cancel = CommandCall::CancelJobs(pb::CancelFilter::default());
    assert_eq!(cancel.encode(), list.encode(), "both messages are empty");
    refused(send(cancel, &cred), SlurmError::InvalidCredential);
    // Or with another message to the same method: its hash is signed.
    let root_cancel = call(RequestBody::Cancel(slurm_proto::CancelFilter {
        job_ids: vec![id],
        ..Default::default()
    }));
    let cred = sign(
        0,
        &call(RequestBody::Cancel(slurm_proto::CancelFilter {
            job_ids: vec![id + 1000],
            ..Default::default()
        })),
    );
    refused(
        send(root_cancel.clone(), &cred),
        SlurmError::InvalidCredential,
    );
    // A user's own credential for the cancel: the job is root's.
    match send(root_cancel.clone(), &sign(TEST_UID, &root_cancel)) {
        Response::Cancelled(o) => assert_eq!(o, vec![(id, Some(SlurmError::AccessDenied))]),
        other => panic!("{other:?}"),
    }
    // A submission signed for one script cannot carry another.
    let mut desc = slurm_proto::JobDesc {
        script: "#!/bin/sh\ntrue\n".into(),
        work_dir: "/tmp".into(),
        environment: vec!["PATH=/bin".into()],
        ..Default::default()
    };
    let cred = sign(TEST_UID, &call(RequestBody::SubmitBatchJob(desc.clone())));
    desc.script = "#!/bin/sh\nid > /tmp/pwned\n".into();
    refused(
        send(call(RequestBody::SubmitBatchJob(desc)), &cred),
        SlurmError::InvalidCredential,
    );
    // A message that names an unknown state is refused, naming the field.
    let bad = CommandCall::GetJobs(pb::JobQuery {
        filter: Some(pb::JobFilter {
            states: Some(pb::StateList {
                states: vec!["ZOMBIE".into()],
            }),
            ..Default::default()
        }),
        brief: false,
    });
    match send(bad.clone(), &sign(TEST_UID, &bad)) {
        Response::Error(e) => {
            assert_eq!(e.error, SlurmError::ProtocolError);
            assert!(e.detail.unwrap_or_default().contains("filter.states"));
        }
        other => panic!("{other:?}"),
    }
    // Nothing of the above touched the job, and no other job came.
    let jobs = t.jobs();
    assert_eq!(jobs.len(), 1, "{jobs:?}");
    assert_eq!(jobs[0].state, JobState::Pending);
}

/// The controller keeps each job's listing encoding until the job
/// changes: every change shows in the next listing, filtered or not.
#[test]
fn listings_follow_each_change_of_a_job() {
    let t = TestCluster::start(1, |_| {});
    let id = t.sbatch(&["-H", "-J", "first", "--wrap", "true"]);
    let listed = |id: u32| t.job(id).expect("listed");
    let squeue = |args: &[&str]| stdout(&t.run("squeue", args));
    // Held by root: an administrator's hold.
    assert_eq!(listed(id).reason, JobReason::JobHeldAdmin);
    assert_eq!(squeue(&["-h", "-o", "%j %r"]).trim(), "first JobHeldAdmin");
    assert!(t
        .run(
            "scontrol",
            &["update", &format!("jobid={id}"), "name=second"]
        )
        .status
        .success());
    assert_eq!(listed(id).name, "second");
    assert_eq!(squeue(&["-h", "-n", "second", "-o", "%j"]).trim(), "second");
    assert_eq!(squeue(&["-h", "-n", "first", "-o", "%j"]).trim(), "");
    assert!(t.run("scancel", &[&id.to_string()]).status.success());
    assert_eq!(listed(id).state, JobState::Cancelled);
    assert_eq!(
        squeue(&["-h", "-t", "CA", "-o", "%i %T"]).trim(),
        format!("{id} CANCELLED")
    );
}

#[test]
fn forged_or_expired_credentials_are_refused_and_users_only_touch_their_jobs() {
    let t = TestCluster::start(1, |s| {
        s.extra_conf = "PartitionName=physics Nodes=n1 AllowAccounts=phys AllowQos=normal\n".into();
    });
    let now = slurm_common::auth::now();
    let refused = |r: Response, want: SlurmError| {
        assert!(
            matches!(r, Response::Error(ref e) if e.error == want),
            "{r:?}"
        )
    };
    // Signed with another key, or long expired.
    let forged = slurm_common::auth::Key::from_bytes(b"not the cluster key at all");
    let r = grpc_call(&t, RequestBody::GetJobs, |b| forged.sign(0, 0, "x", now, b));
    refused(r, SlurmError::InvalidCredential);
    let key = slurm_common::auth::Key::load(&t.c.spec.dir.join("slurm.key")).unwrap();
    let r = grpc_call(&t, RequestBody::GetJobs, |b| {
        key.sign(0, 0, "x", now - 3600, b)
    });
    refused(r, SlurmError::ExpiredCredential);
    // Made for another daemon (a node daemon), or without a credential's
    // binding at all. (Replays and other bodies:
    // `command_calls_over_grpc_are_bound_to_their_method_and_message`.)
    let r = grpc_call(&t, RequestBody::Ping, |b| {
        let mut to_node = b.clone();
        to_node.to = "slurmd:n1".into();
        key.sign(0, 0, "x", now, &to_node)
    });
    refused(r, SlurmError::InvalidCredential);
    let r = grpc_call(&t, RequestBody::Ping, |b| {
        let mut c = key.sign(0, 0, "x", now, b);
        c.uid = 1000;
        c
    });
    refused(r, SlurmError::InvalidCredential);
    assert!(matches!(
        grpc_call(&t, RequestBody::Ping, |b| key.sign(0, 0, "x", now, b)),
        Response::Pong { .. }
    ));

    // A user's job: another user may not cancel, hold or change it.
    let id = t.sbatch_as_user(&["-J", "mine", "--begin", "now+3600", "--wrap", "true"]);
    let j = t.job(id).unwrap();
    assert_eq!(j.user_id, TEST_UID);
    let out = t
        .cmd_as(12345, 12345, "scancel")
        .arg(id.to_string())
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(
        stderr(&out).contains("Access/permission denied"),
        "{}",
        stderr(&out)
    );
    let out = t
        .cmd_as(12345, 12345, "scontrol")
        .args(["hold", &id.to_string()])
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert_eq!(t.job(id).unwrap().state, JobState::Pending);
    // Nor may a user drain a node.
    let out = t.run_as_user(
        "scontrol",
        &["update", "nodename=n1", "state=drain", "reason=x"],
    );
    assert!(!out.status.success());
    assert!(!t.nodes()[0].flags.drain);
    // The owner may; so may root.
    let out = t.run_as_user("scontrol", &["hold", &id.to_string()]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(t.job(id).unwrap().reason, JobReason::JobHeldUser);
    let out = t.run("scancel", &[&id.to_string()]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(t.job(id).unwrap().state, JobState::Cancelled);

    // Partition access lists hold for users (root may use any partition).
    let out = t.run_as_user("sbatch", &["-p", "physics", "-A", "chem", "--wrap", "true"]);
    assert!(!out.status.success());
    assert_eq!(
        stderr(&out),
        "sbatch: error: Batch job submission failed: Invalid account or account/partition combination specified\n"
    );
    let ok = t.sbatch_as_user(&["-p", "physics", "-A", "phys", "--wrap", "true"]);
    assert_eq!(t.wait_done(ok, 20).state, JobState::Completed);
}

#[test]
fn hold_release_begin_requeue_and_drain() {
    let t = TestCluster::start(2, |_| {});
    // Hold and release.
    let h = t.sbatch(&["-H", "-J", "held", "--wrap", "true"]);
    let j = t.wait_job(h, 10, "held", |j| j.reason == JobReason::JobHeldAdmin);
    assert_eq!(j.priority, 0);
    let sq = stdout(&t.run("squeue", &["-j", &h.to_string(), "-h", "-o", "%i %t %r"]));
    assert_eq!(sq, format!("{h} PD JobHeldAdmin\n"));
    assert!(t
        .run("scontrol", &["release", &h.to_string()])
        .status
        .success());
    assert_eq!(t.wait_done(h, 20).state, JobState::Completed);

    // Array tasks by their ids: N_T is task T (not the array's first
    // job), N_[a-b] a range, N the whole array.
    let a = t.sbatch(&["-H", "--array=0-3", "--wrap", "true"]);
    let task = |k: u32| {
        t.jobs()
            .into_iter()
            .find(|j| {
                j.array
                    .as_ref()
                    .is_some_and(|x| x.job_id == a && x.task_id == k)
            })
            .unwrap()
    };
    let run = |args: &[&str]| {
        let out = t.run("scontrol", args);
        assert!(out.status.success(), "{args:?}: {}", stderr(&out));
    };
    run(&["release", &format!("{a}_2")]);
    assert_eq!(t.wait_done(task(2).job_id, 20).state, JobState::Completed);
    for k in [0, 1, 3] {
        assert_eq!(task(k).reason, JobReason::JobHeldAdmin, "task {k}");
    }
    run(&["release", &format!("{a}_[0-1]")]);
    t.wait_done(task(1).job_id, 20);
    assert_eq!(t.wait_done(task(0).job_id, 20).state, JobState::Completed);
    assert_eq!(task(3).reason, JobReason::JobHeldAdmin);
    let out = t.run("scontrol", &["release", &format!("{a}_7")]);
    assert!(!out.status.success());
    assert!(
        stderr(&out).contains(&format!("Invalid job id specified for job {a}_7")),
        "{}",
        stderr(&out)
    );
    run(&["release", &a.to_string()]);
    assert_eq!(t.wait_done(task(3).job_id, 20).state, JobState::Completed);

    // A begin time in the future.
    let b = t.sbatch(&["--begin", "now+3600", "--wrap", "true"]);
    t.wait_job(b, 10, "waiting for its begin time", |j| {
        j.reason == JobReason::BeginTime
    });

    // Drain keeps new work off a node; resume brings it back.
    let out = t.run(
        "scontrol",
        &["update", "NodeName=n1", "State=DRAIN", "Reason=maint"],
    );
    assert!(out.status.success(), "{}", stderr(&out));
    let n = t.wait_node("n1", 5, "drained", |n| n.flags.drain);
    assert_eq!(n.reason.as_deref(), Some("maint"));
    let r = t.sbatch(&["--wrap", "sleep 30"]);
    let j = t.wait_job(r, 20, "running", |j| j.state == JobState::Running);
    assert_eq!(j.alloc.nodes, vec!["n2"]);
    assert!(stdout(&t.run("sinfo", &[])).contains("drain n1"));
    assert!(t
        .run("scontrol", &["update", "nodename=n1", "state=resume"])
        .status
        .success());
    t.wait_node("n1", 5, "resumed", |n| {
        !n.flags.drain && n.base_state == NodeBaseState::Idle
    });

    // Requeue a running job: it goes back to the queue and runs again.
    assert!(t
        .run("scontrol", &["requeue", &r.to_string()])
        .status
        .success());
    let j = t.wait_job(r, 30, "running again", |j| {
        j.state == JobState::Running && j.restarts == 1
    });
    assert_eq!(j.restarts, 1);
    assert!(t
        .run("scancel", &[&r.to_string(), &b.to_string()])
        .status
        .success());
    assert_eq!(t.wait_done(r, 30).state, JobState::Cancelled);
}

#[test]
fn failures_exit_codes_and_purge_after_min_job_age() {
    let t = TestCluster::start(1, |s| s.min_job_age = 3);
    let f = t.sbatch(&["--wrap", "exit 3"]);
    let j = t.wait_done(f, 20);
    assert_eq!(j.state, JobState::Failed);
    assert_eq!(j.reason, JobReason::NonZeroExitCode);
    assert_eq!(j.exit_code_pair(), (3, 0));
    let diag = stdout(&t.run("sdiag", &[]));
    assert!(diag.contains("Jobs submitted: 1\nJobs started:   1\nJobs completed: 0\nJobs canceled:  0\nJobs failed:    1\n"), "{diag}");
    assert!(
        diag.contains("Main schedule statistics (microseconds):\n\tLast cycle:   "),
        "{diag}"
    );
    // The RPCs served so far, as Slurm's sdiag counts them.
    assert!(
        diag.contains("\tREQUEST_SUBMIT_BATCH_JOB                ( 4003) count:1      ave_time:"),
        "{diag}"
    );
    assert!(
        diag.contains("\nRemote Procedure Call statistics by user\n"),
        "{diag}"
    );
    assert!(
        diag.contains("\troot            (       0) count:"),
        "{diag}"
    );
    // `sdiag -r`: an ordinary user may not; root starts the counters again.
    let o = t
        .cmd_as(TEST_UID, TEST_GID, "sdiag")
        .arg("-r")
        .output()
        .unwrap();
    assert!(
        !o.status.success()
            && stderr(&o).starts_with("slurm_reset_statistics: ")
            && stderr(&o).contains("only operators may reset the statistics"),
        "{}",
        stderr(&o)
    );
    let o = t.run("sdiag", &["--reset"]);
    assert_eq!(
        stdout(&o),
        "Reset scheduling statistics\n",
        "{}",
        stderr(&o)
    );
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    let diag = loop {
        let diag = stdout(&t.run("sdiag", &[]));
        if diag.contains("Jobs submitted: 0\nJobs started:   0\n") {
            break diag;
        }
        assert!(std::time::Instant::now() < deadline, "never reset: {diag}");
        std::thread::sleep(Duration::from_millis(200));
    };
    assert!(
        !diag.contains("REQUEST_SUBMIT_BATCH_JOB") && !diag.contains(&format!("({TEST_UID:>8})")),
        "{diag}"
    );
    let show = stdout(&t.run("scontrol", &["show", "job", &f.to_string()]));
    assert!(
        show.contains("JobState=FAILED Reason=NonZeroExitCode"),
        "{show}"
    );
    assert!(show.contains("ExitCode=3:0"), "{show}");
    // Gone from the controller MinJobAge seconds after it ended.
    let deadline = std::time::Instant::now() + Duration::from_secs(15);
    while t.job(f).is_some() {
        assert!(std::time::Instant::now() < deadline, "job {f} not purged");
        std::thread::sleep(Duration::from_millis(200));
    }
    let out = t.run("scontrol", &["show", "job", &f.to_string()]);
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(
        stderr(&out),
        "slurm_load_jobs error: Invalid job id specified\n"
    );
}

#[test]
fn daemons_report_versions_and_reject_bad_configs() {
    let bin = bin_dir();
    for d in ["slurmctld", "slurmd", "sbatch", "squeue", "scontrol"] {
        let out = std::process::Command::new(bin.join(d))
            .arg("-V")
            .output()
            .unwrap();
        assert_eq!(
            stdout(&out),
            format!("slurm {}\n", slurm_proto::SLURM_VERSION),
            "{d}"
        );
    }
    let dir = tempfile::tempdir().unwrap();
    let conf = dir.path().join("slurm.conf");
    std::fs::write(
        &conf,
        "ClusterName=x\nSlurmctldHost=h(127.0.0.1)\nNodeName=n1 CPUs=abc\n",
    )
    .unwrap();
    let out = std::process::Command::new(bin.join("slurmctld"))
        .args(["-D", "-f"])
        .arg(&conf)
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(stderr(&out).contains("slurm.conf:3"), "{}", stderr(&out));
    std::fs::write(&conf, "ClusterName=x\nSlurmctldHost=h(127.0.0.1)\nSchedulerType=sched/nope\nNodeName=n1 CPUs=1\nPartitionName=p Nodes=n1\n").unwrap();
    std::fs::write(dir.path().join("slurm.key"), "0123456789abcdef0123456789").unwrap();
    let out = std::process::Command::new(bin.join("slurmctld"))
        .args(["-D", "-f"])
        .arg(&conf)
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(
        stderr(&out).contains("unknown SchedulerType plugin 'sched/nope'"),
        "{}",
        stderr(&out)
    );
}

#[test]
fn job_arrays_and_dependencies() {
    let t = TestCluster::start(1, |_| {});
    let a = t.sbatch(&[
        "--array=0-5%2",
        "-o",
        "arr-%A_%a.out",
        "--wrap",
        "echo task $SLURM_ARRAY_TASK_ID of $SLURM_ARRAY_JOB_ID count $SLURM_ARRAY_TASK_COUNT; sleep 1",
    ]);
    let dep = t.sbatch(&[
        "--dependency",
        &format!("afterok:{a}"),
        "-o",
        "dep.out",
        "--wrap",
        "echo after",
    ]);
    let never = t.sbatch(&["--dependency", &format!("afternotok:{a}"), "--wrap", "true"]);
    t.wait_job(dep, 10, "waiting on its dependency", |j| {
        j.reason == JobReason::Dependency
    });
    // At most two tasks run at once; the rest wait on the array limit.
    let deadline = std::time::Instant::now() + Duration::from_secs(40);
    let mut saw_limit = false;
    loop {
        let jobs = t.jobs();
        let tasks: Vec<_> = jobs
            .iter()
            .filter(|j| j.array.as_ref().is_some_and(|x| x.job_id == a))
            .collect();
        assert_eq!(tasks.len(), 6);
        let running = tasks
            .iter()
            .filter(|j| j.state == JobState::Running)
            .count();
        assert!(running <= 2, "{running} tasks running");
        saw_limit |= tasks
            .iter()
            .any(|j| j.reason == JobReason::JobArrayTaskLimit);
        if tasks.iter().all(|j| j.state.is_finished() && !j.completing) {
            break;
        }
        assert!(std::time::Instant::now() < deadline, "array did not finish");
        std::thread::sleep(Duration::from_millis(100));
    }
    assert!(saw_limit, "no task ever waited on JobArrayTaskLimit");
    for i in 0..6 {
        let out = std::fs::read_to_string(t.work.join(format!("arr-{a}_{i}.out"))).unwrap();
        assert_eq!(out, format!("task {i} of {a} count 6\n"));
    }
    let d = t.wait_done(dep, 30);
    assert_eq!(d.state, JobState::Completed);
    assert_eq!(
        std::fs::read_to_string(t.work.join("dep.out")).unwrap(),
        "after\n"
    );
    let last_end = t
        .jobs()
        .iter()
        .filter(|j| j.array.as_ref().is_some_and(|x| x.job_id == a))
        .filter_map(|j| j.end_time)
        .max()
        .unwrap();
    assert!(d.start_time.unwrap() >= last_end);
    t.wait_job(never, 10, "never satisfiable", |j| {
        j.reason == JobReason::DependencyNeverSatisfied
    });

    // squeue names tasks ARRAY_TASK, scancel takes the array id or one task.
    let b = t.sbatch(&["--array=1-3", "-H", "--wrap", "true"]);
    let sq = stdout(&t.run(
        "squeue",
        &[
            "-h",
            "-o",
            "%i %F %K",
            "-t",
            "PD",
            "-j",
            &(b + 1).to_string(),
        ],
    ));
    assert_eq!(sq, format!("{b}_2 {b} 2\n"));
    assert!(t.run("scancel", &[&format!("{b}_3")]).status.success());
    assert_eq!(t.job(b + 2).unwrap().state, JobState::Cancelled);
    assert_eq!(t.job(b).unwrap().state, JobState::Pending);
    assert!(t.run("scancel", &[&b.to_string()]).status.success());
    assert!(t
        .jobs()
        .iter()
        .filter(|j| j.array.as_ref().is_some_and(|x| x.job_id == b))
        .all(|j| j.state == JobState::Cancelled));
    // A dependency on an unknown job is refused at submission.
    let out = t.run("sbatch", &["--dependency=afterok:999999", "--wrap", "true"]);
    assert!(!out.status.success());
    assert!(
        stderr(&out).contains("Job dependency problem"),
        "{}",
        stderr(&out)
    );
}

/// srun's calls at a step's start and end are minutes apart on a long
/// step, and its channel to the controller is not driven meanwhile (the
/// controller pings a silent connection after 30 s and drops it 10 s
/// later): the step's end and the allocation's release must still arrive
/// (the command connects again after 20 s without a call).
#[test]
fn a_long_step_still_ends_its_allocation() {
    let t = TestCluster::start(1, |_| {});
    let out = t.run("srun", &["-J", "long", "-t", "10", "sleep", "45"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let j = t
        .jobs()
        .into_iter()
        .find(|j| j.name == "long")
        .expect("the allocation");
    assert_eq!(j.state, JobState::Completed, "{j:?}");
    assert_eq!(j.steps.len(), 1);
    assert_eq!(j.steps[0].state, JobState::Completed, "{:?}", j.steps);
}

#[test]
fn srun_steps_inside_and_outside_allocations_and_salloc() {
    let t = TestCluster::start(3, |_| {});
    // Steps inside a batch job, as the user, over all three nodes.
    let script = write_script(
        &t,
        "steps.sh",
        "#!/bin/sh\n#SBATCH -N 3 --ntasks-per-node=2 -o steps-%j.out\n\
srun -l sh -c 'echo $SLURM_PROCID $SLURMD_NODENAME $SLURM_LOCALID $SLURM_STEP_ID $(id -u)' | sort\n\
srun -N 2 -n 2 -l printenv SLURM_STEP_NODELIST | sort\n\
echo hello | srun -n 1 cat\n\
srun -N 3 sh -c 'exit 2'; echo rc=$?\n",
    );
    let id = t.sbatch_as_user(&[&script]);
    let j = t.wait_done(id, 60);
    assert_eq!(j.state, JobState::Completed, "{:?}", j.reason);
    let out = std::fs::read_to_string(t.work.join(format!("steps-{id}.out"))).unwrap();
    let want = format!(
        "0: 0 n1 0 0 {u}\n1: 1 n1 1 0 {u}\n2: 2 n2 0 0 {u}\n3: 3 n2 1 0 {u}\n4: 4 n3 0 0 {u}\n5: 5 n3 1 0 {u}\n\
0: n[1-2]\n1: n[1-2]\nhello\n",
        u = TEST_UID
    );
    assert!(
        out.starts_with(&want),
        "got:\n{out}\nwanted to start with:\n{want}\n{}",
        t.logs()
    );
    assert!(
        out.contains("srun: error: n1: task 0: Exited with exit code 2\n"),
        "{out}"
    );
    assert!(out.ends_with("rc=2\n"), "{out}");
    assert_eq!(j.steps[0].step_id, slurm_proto::BATCH_STEP);
    assert_eq!(j.steps[0].state, JobState::Completed);
    let steps: Vec<_> = j
        .steps
        .iter()
        .filter(|s| s.step_id != slurm_proto::BATCH_STEP)
        .collect();
    assert_eq!(steps.len(), 4);
    assert_eq!((steps[0].step_id, steps[0].ntasks), (0, 6));
    assert_eq!(steps[3].state, JobState::Failed);

    // srun outside an allocation allocates, runs and releases.
    let out = t.run("srun", &["-N", "2", "-l", "hostname"]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(stdout(&out).lines().count(), 2);
    // Its input environment: SLURM_NTASKS and SLURM_LABELIO act as -n and
    // -l; the command line wins.
    let env_srun = |args: &[&str]| {
        let out = t
            .cmd("srun")
            .env("SLURM_NTASKS", "2")
            .env("SLURM_LABELIO", "1")
            .args(args)
            .args(["sh", "-c", "echo $SLURM_PROCID"])
            .output()
            .unwrap();
        assert!(out.status.success(), "{}", stderr(&out));
        let mut lines: Vec<String> = stdout(&out).lines().map(str::to_string).collect();
        lines.sort();
        lines
    };
    assert_eq!(env_srun(&[]), ["0: 0", "1: 1"]);
    assert_eq!(env_srun(&["-n", "1"]), ["0: 0"]);
    let out = t.run(
        "srun",
        &[
            "-N",
            "2",
            "-o",
            "task-%t-%N.txt",
            "sh",
            "-c",
            "echo $SLURM_PROCID",
        ],
    );
    assert!(
        out.status.success() && out.stdout.is_empty(),
        "{}",
        stderr(&out)
    );
    for (task, node) in [(0, "n1"), (1, "n2")] {
        let f = std::fs::read_to_string(t.work.join(format!("task-{task}-{node}.txt"))).unwrap();
        assert_eq!(f, format!("{task}\n"));
    }
    let out = t.run("srun", &["-n", "1", "sh", "-c", "kill -9 $$"]);
    assert_eq!(out.status.code(), Some(137), "{}", stderr(&out));
    assert!(stderr(&out).contains("task 0: Killed"), "{}", stderr(&out));

    // salloc runs a command in an allocation; srun inside it makes steps.
    let srun = t.c.spec.bin_dir.join("srun");
    let out = t
        .cmd("salloc")
        .args(["-N", "3", "sh", "-c"])
        .arg(format!(
            "echo $SLURM_JOB_NODELIST $SLURM_JOB_NUM_NODES; {} -l true && {} hostname | wc -l",
            srun.display(),
            srun.display()
        ))
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(stdout(&out), "n[1-3] 3\n3\n");
    let err = stderr(&out);
    assert!(
        err.starts_with("salloc: Granted job allocation ")
            && err.contains("salloc: Relinquishing job allocation"),
        "{err}"
    );
    let alloc_id: u32 = err
        .lines()
        .next()
        .unwrap()
        .rsplit(' ')
        .next()
        .unwrap()
        .parse()
        .unwrap();
    let j = t.wait_done(alloc_id, 20);
    assert_eq!(j.state, JobState::Completed);
    assert!(!j.batch);
    // A user may not run steps in someone else's allocation.
    let out = t.run_as_user("srun", &["--jobid", &id.to_string(), "true"]);
    assert!(!out.status.success());
}

/// The issue's MPI job: OpenMPI's mpirun finds the allocation in the
/// environment and starts its daemons through `srun`, one per node.
#[test]
fn mpi_ring_across_three_nodes() {
    let t = TestCluster::start(3, |_| {});
    std::fs::copy(
        concat!(env!("CARGO_MANIFEST_DIR"), "/mpi/mpi-ping-pong.py"),
        t.work.join("mpi-ping-pong.py"),
    )
    .unwrap();
    let script = write_script(
        &t,
        "mpi.sh",
        "#!/bin/sh\n#SBATCH -J mpi-ping-pong\n#SBATCH -o mpi-ping-pong-%j.out\n#SBATCH -e mpi-ping-pong-%j.err\n\
#SBATCH -t 0-2:00:00\n#SBATCH --nodes=3\n#SBATCH --ntasks-per-node=1\n\
echo \"Number of Nodes Allocated = ${SLURM_JOB_NUM_NODES}\"\n\
echo \"Number of Tasks Allocated = ${SLURM_NTASKS}\"\n\
mpirun python3 mpi-ping-pong.py\n",
    );
    // OpenMPI stays on loopback.
    let out = t
        .cmd_as(TEST_UID, TEST_GID, "sbatch")
        .arg("--parsable")
        .arg(&script)
        .env("OMPI_MCA_oob_tcp_if_include", "lo")
        .env("OMPI_MCA_btl_tcp_if_include", "lo")
        .env("OMPI_MCA_btl", "self,tcp")
        .env("HOME", t.work.display().to_string())
        .output()
        .unwrap();
    let id: u32 = stdout(&out)
        .trim()
        .parse()
        .unwrap_or_else(|_| panic!("{}", stderr(&out)));
    let j = t.wait_done(id, 120);
    let read = |ext: &str| {
        std::fs::read_to_string(t.work.join(format!("mpi-ping-pong-{id}.{ext}")))
            .unwrap_or_default()
    };
    let (o, e) = (read("out"), read("err"));
    assert_eq!(
        j.state,
        JobState::Completed,
        "stdout:\n{o}\nstderr:\n{e}\n{}",
        t.logs()
    );
    assert!(
        o.starts_with("Number of Nodes Allocated = 3\nNumber of Tasks Allocated = 3\n"),
        "{o}"
    );
    for (rank, node) in [(0, "n1"), (1, "n2"), (2, "n3")] {
        assert!(
            o.contains(&format!("rank {rank}: host="))
                && o.contains(&format!("slurm_node={node}\n")),
            "{o}"
        );
    }
    assert!(o.contains("final ball=15 expected=15 OK"), "{o}");
    // mpirun started its daemons as one step on all three nodes.
    let steps: Vec<_> = j
        .steps
        .iter()
        .filter(|s| s.step_id != slurm_proto::BATCH_STEP)
        .collect();
    assert_eq!(steps.len(), 1, "{:?}", j.steps);
    assert_eq!(steps[0].nodes, vec!["n1", "n2", "n3"]);
    assert_eq!(steps[0].state, JobState::Completed);
}

#[test]
fn steps_are_listed_shown_and_cancelled() {
    let t = TestCluster::start(2, |_| {});
    let id = t.sbatch(&[
        "-N",
        "2",
        "-o",
        "long.out",
        "--wrap",
        "srun -N 2 sleep 60; echo step-ended rc=$?; sleep 60",
    ]);
    t.wait_job(id, 20, "running its step", |j| {
        j.steps
            .iter()
            .any(|s| s.step_id == 0 && s.state == JobState::Running)
    });
    let sq = stdout(&t.run("squeue", &["-s"]));
    let lines: Vec<&str> = sq.lines().collect();
    assert_eq!(
        lines[0], "         STEPID     NAME PARTITION     USER      TIME NODELIST",
        "{sq}"
    );
    // Numbered steps first, then the batch step; TIME varies.
    assert_eq!(
        &lines[1][..44],
        &format!("{:>15}    sleep     debug     root ", format!("{id}.0"))[..],
        "{sq}"
    );
    assert!(lines[1].ends_with(" n[1-2]"), "{sq}");
    assert_eq!(
        &lines[2][..44],
        &format!("{:>15}    batch     debug     root ", format!("{id}.batch"))[..],
        "{sq}"
    );
    assert!(lines[2].ends_with(" n1"), "{sq}");
    assert_eq!(lines.len(), 3, "{sq}");
    let show = stdout(&t.run("scontrol", &["show", "step", &format!("{id}.0")]));
    assert!(
        show.starts_with(&format!("StepId={id}.0 UserId=0 StartTime=")),
        "{show}"
    );
    assert!(show.contains("   State=RUNNING Partition=debug NodeList=n[1-2]\n   Nodes=2 CPUs=2 Tasks=2 Name=sleep"), "{show}");
    // Cancelling the step leaves the job running.
    let out = t.run("scancel", &[&format!("{id}.0")]);
    assert!(out.status.success(), "{}", stderr(&out));
    let j = t.wait_job(id, 20, "step cancelled", |j| {
        j.steps
            .iter()
            .any(|s| s.step_id == 0 && s.state == JobState::Cancelled)
    });
    assert_eq!(j.state, JobState::Running);
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    loop {
        let o = std::fs::read_to_string(t.work.join("long.out")).unwrap_or_default();
        if o.contains("step-ended rc=137") {
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "step not reported ended: {o:?}"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    assert!(t.run("scancel", &[&id.to_string()]).status.success());
    assert_eq!(t.wait_done(id, 30).state, JobState::Cancelled);
}

/// One `slurmd --mock` process stands in for 400 nodes; 2000 jobs run through
/// the controller without forking a process each.
#[test]
fn mock_slurmd_drives_the_controller_at_scale() {
    let t = TestCluster::start(400, |s| {
        s.mock = Some(Some(1));
        s.cpus = 8;
    });
    let nodes = t.nodes();
    assert_eq!(nodes.len(), 400);
    assert!(
        nodes.iter().all(|n| n.base_state == NodeBaseState::Idle),
        "nodes not all idle"
    );
    let mut first = 0;
    for i in 0..40 {
        // 50 jobs per array keeps the submission loop short.
        let id = t.sbatch(&[
            "--array=0-49",
            "-n",
            "4",
            "-t",
            "5",
            "-o",
            "/dev/null",
            "--wrap",
            "true",
        ]);
        if i == 0 {
            first = id;
        }
    }
    let deadline = std::time::Instant::now() + Duration::from_secs(90);
    loop {
        let jobs = t.jobs();
        let done = jobs
            .iter()
            .filter(|j| j.job_id >= first && j.state == JobState::Completed && !j.completing)
            .count();
        if done == 2000 {
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "only {done} of 2000 mock jobs completed"
        );
        std::thread::sleep(Duration::from_millis(500));
    }
    // Mock jobs really were placed: 2000 jobs of 4 cpus on 400 × 8 cpus
    // need at least three waves of one second.
    let jobs = t.jobs();
    let start = jobs.iter().filter_map(|j| j.start_time).min().unwrap();
    let end = jobs.iter().filter_map(|j| j.end_time).max().unwrap();
    assert!(end - start >= 2, "finished in {}s", end - start);
}

#[test]
fn controller_port_answers_http_probes_beside_rpc() {
    use std::io::{Read, Write};
    let t = TestCluster::start(1, |_| {});
    let get = |path: &str| {
        let mut s = std::net::TcpStream::connect(("127.0.0.1", t.c.spec.ctld_port)).unwrap();
        write!(s, "GET {path} HTTP/1.1\r\nHost: x\r\n\r\n").unwrap();
        let mut r = String::new();
        s.read_to_string(&mut r).unwrap();
        r
    };
    for p in ["/livez", "/readyz", "/healthz"] {
        let r = get(p);
        assert!(
            r.starts_with("HTTP/1.1 200 OK\r\n") && r.ends_with("\r\n\r\nok\n"),
            "{p}: {r}"
        );
    }
    assert!(get("/nope").starts_with("HTTP/1.1 404 "));
    assert!(get("/metrics").contains("/metrics/jobs"));
    let jobs = get("/metrics/jobs");
    assert!(
        jobs.contains("# TYPE slurm_jobs gauge") && jobs.ends_with("# EOF\n"),
        "{jobs}"
    );
    // RPC on the same port still works.
    assert!(t.run("scontrol", &["ping"]).status.success());
}

#[test]
fn reservations_keep_other_jobs_off_their_nodes() {
    let t = TestCluster::start(2, |_| {});
    let out = t.run(
        "scontrol",
        &[
            "create",
            "reservation",
            "ReservationName=maint1",
            "StartTime=now",
            "Duration=60",
            "Nodes=n1",
            "Users=root",
            "Flags=MAINT",
        ],
    );
    assert_eq!(
        stdout(&out),
        "Reservation created: maint1\n",
        "{}",
        stderr(&out)
    );
    let show = stdout(&t.run("scontrol", &["show", "reservation", "maint1"]));
    assert!(
        show.starts_with("ReservationName=maint1 StartTime="),
        "{show}"
    );
    assert!(
        show.contains(
            "   Nodes=n1 NodeCnt=1 CoreCnt=4 Features=(null) PartitionName=(null) Flags=MAINT\n"
        ),
        "{show}"
    );
    assert!(
        show.contains("Users=root Groups=(null) Accounts=(null) Licenses=(null) State=ACTIVE"),
        "{show}"
    );
    let si = stdout(&t.run("sinfo", &["-T"]));
    assert!(
        si.starts_with("RESV_NAME")
            && si.contains("maint1")
            && si.contains("ACTIVE")
            && si.trim_end().ends_with("n1"),
        "{si}"
    );
    assert!(stdout(&t.run("sinfo", &[])).contains("maint n1"));

    // Jobs outside the reservation stay off n1, even when n2 is full.
    let a = t.sbatch(&["-n", "4", "--wrap", "sleep 30"]);
    assert_eq!(
        t.wait_job(a, 20, "running", |j| j.state == JobState::Running)
            .alloc
            .nodes,
        vec!["n2"]
    );
    // A job in the reservation runs on n1.
    let c = t.sbatch(&["--reservation=maint1", "--wrap", "true"]);
    let j = t.wait_done(c, 20);
    assert_eq!(
        (j.state, j.alloc.nodes.clone()),
        (JobState::Completed, vec!["n1".to_string()])
    );
    let b = t.sbatch(&["-n", "1", "--wrap", "true"]);
    t.wait_job(b, 10, "pending on Resources", |j| {
        j.reason == JobReason::Resources
    });
    // Users outside it may not use it; a future reservation makes jobs wait.
    let out = t.run_as_user("sbatch", &["--reservation=maint1", "--wrap", "true"]);
    assert!(
        stderr(&out).contains("Access denied to requested reservation"),
        "{}",
        stderr(&out)
    );
    let out = t.run(
        "scontrol",
        &[
            "create",
            "reservation",
            "ReservationName=later",
            "StartTime=now+3600",
            "Duration=10",
            "Nodes=n2",
            "Users=root",
            "Flags=IGNORE_JOBS",
        ],
    );
    assert!(out.status.success(), "{}", stderr(&out));
    let w = t.sbatch(&["--reservation=later", "--wrap", "true"]);
    t.wait_job(w, 10, "waiting for its reservation", |j| {
        j.reason == JobReason::Reservation
    });
    // Busy nodes refuse a reservation; deleting frees n1 for everyone.
    let out = t.run(
        "scontrol",
        &[
            "create",
            "reservation",
            "StartTime=now",
            "Duration=10",
            "Nodes=n2",
            "Users=root",
        ],
    );
    assert!(
        stderr(&out).contains("Requested nodes are busy"),
        "{}",
        stderr(&out)
    );
    // A job that needs the reserved node queues until the reservation is
    // over (as Slurm, it is not refused); one no node set can ever take is.
    let both = t.sbatch(&["-N", "2", "-t", "5", "--wrap", "true"]);
    let why = "ReqNodeNotAvail, May be reserved for other job";
    t.wait_job(both, 10, "waiting on the reserved node", |j| {
        j.reason == JobReason::Other(why.into())
    });
    let sq = stdout(&t.run("squeue", &["-h", "-j", &both.to_string(), "-o", "%r"]));
    assert_eq!(sq, format!("{why}\n"));
    let out = t.run("sbatch", &["-N", "3", "--wrap", "true"]);
    assert!(
        stderr(&out).contains("Requested node configuration is not available"),
        "{}",
        stderr(&out)
    );
    assert!(t
        .run("scontrol", &["delete", "ReservationName=maint1"])
        .status
        .success());
    assert_eq!(t.wait_done(b, 20).state, JobState::Completed);
    assert!(t
        .run("scancel", &[&a.to_string(), &w.to_string()])
        .status
        .success());
    assert_eq!(t.wait_done(both, 30).state, JobState::Completed);
    // `Nodes=ALL` reserves every node.
    let out = t.run(
        "scontrol",
        &[
            "create",
            "reservation",
            "ReservationName=everything",
            "StartTime=now+7200",
            "Duration=10",
            "Nodes=ALL",
            "Users=root",
        ],
    );
    assert!(out.status.success(), "{}", stderr(&out));
    let show = stdout(&t.run("scontrol", &["show", "reservation", "everything"]));
    assert!(show.contains("   Nodes=n[1-2] NodeCnt=2 "), "{show}");
}

/// Kubernetes-style external nodes and jobs (Slurm 25.05 semantics).
#[test]
fn external_nodes_take_only_external_jobs() {
    let mut t = TestCluster::start(1, |s| {
        s.extra_conf = "PartitionName=kube Nodes=ALL\n".into();
    });
    let out = t.run(
        "scontrol",
        &[
            "create",
            "NodeName=k[1-2]",
            "State=External",
            "CPUs=8",
            "RealMemory=16000",
            "Partitions=kube",
        ],
    );
    assert!(out.status.success(), "{}", stderr(&out));
    let nodes = t.nodes();
    let k1 = nodes.iter().find(|n| n.name == "k1").expect("k1 created");
    assert!(
        k1.external && k1.base_state == NodeBaseState::Idle,
        "{:?}",
        k1.state_long()
    );
    assert_eq!(k1.state_long(), "IDLE+EXTERNAL");
    // A job with a script never lands on an external node...
    let b = t.sbatch(&["-p", "kube", "-n", "1", "--wrap", "true"]);
    assert_eq!(t.wait_done(b, 20).alloc.nodes, vec!["n1"]);
    // ...and an external job never on a daemon's node; it launches nothing
    // and holds its allocation until cancelled, then frees it at once.
    let e = t.sbatch(&["--external", "-p", "kube", "-N", "2", "-J", "pod-abc"]);
    let j = t.wait_job(e, 20, "running", |j| j.state == JobState::Running);
    assert_eq!(j.alloc.nodes, vec!["k1", "k2"]);
    assert!(!j.batch && j.batch_host.is_none());
    let out = t.run("sbatch", &["--external", "--wrap", "true"]);
    assert!(
        !out.status.success(),
        "an external job with a script must be refused"
    );
    // External nodes are never pinged, so a controller restart keeps them up.
    t.c.kill_ctld(libc::SIGKILL);
    t.c.start_ctld().unwrap();
    assert!(t.nodes().iter().any(|n| n.name == "k2" && n.external));
    assert!(t.run("scancel", &[&e.to_string()]).status.success());
    let j = t.wait_done(e, 10);
    assert_eq!(j.state, JobState::Cancelled);
    let nodes = t.nodes();
    assert!(nodes
        .iter()
        .filter(|n| n.external)
        .all(|n| n.alloc_cpus == 0 && n.base_state == NodeBaseState::Idle));
    assert!(t
        .run("scontrol", &["delete", "NodeName=k2"])
        .status
        .success());
    assert!(!t.nodes().iter().any(|n| n.name == "k2"));
}

/// sched/backfill: a short job starts ahead of a blocked big one without
/// delaying it; a long one that would delay it waits.
#[test]
fn backfill_starts_short_jobs_without_delaying_the_blocked_one() {
    let t = TestCluster::start(2, |s| {
        s.extra_conf = "SchedulerType=sched/backfill\n".into()
    });
    let a = t.sbatch(&["-n", "4", "-t", "2", "--wrap", "sleep 300"]);
    let ja = t.wait_job(a, 20, "running", |j| j.state == JobState::Running);
    let big = t.sbatch(&["-N", "2", "-n", "8", "-t", "5", "--wrap", "true"]);
    let jb = t.wait_job(big, 10, "planned", |j| {
        j.reason == JobReason::Resources && j.start_time.is_some()
    });
    // Its planned start is when A's time limit ends (rounded up to bf_resolution, 60 s).
    let (planned, a_end) = (jb.start_time.unwrap(), ja.end_time.unwrap());
    assert!(
        (a_end..=a_end + 60).contains(&planned),
        "planned {planned}, A ends {a_end}"
    );
    let short = t.sbatch(&["-n", "2", "-t", "1", "--wrap", "sleep 1"]);
    let long = t.sbatch(&["-n", "2", "-t", "10", "--wrap", "sleep 1"]);
    let js = t.wait_done(short, 20);
    assert_eq!(js.state, JobState::Completed);
    let jl = t.job(long).unwrap();
    assert_eq!(
        jl.state,
        JobState::Pending,
        "the long job would delay the big one"
    );
    let sq = stdout(&t.run("squeue", &["--start", "-h", "-o", "%i %S"]));
    assert!(
        sq.lines()
            .any(|l| l.starts_with(&format!("{big} ")) && !l.ends_with("N/A")),
        "{sq}"
    );
    let diag = stdout(&t.run("sdiag", &[]));
    assert!(
        diag.contains("\tTotal backfilled jobs (since last slurm start): "),
        "{diag}"
    );
    assert!(
        !diag.contains("\tTotal backfilled jobs (since last slurm start): 0\n"),
        "{diag}"
    );
    // The same counters as slurmrestd's `diag` body.
    let v: serde_json::Value =
        serde_json::from_str(&stdout(&t.run("sdiag", &["--json"]))).expect("sdiag --json");
    assert!(
        v["statistics"]["bf_backfilled_jobs"].as_i64().unwrap() > 0,
        "{v}"
    );
    assert_eq!(v["meta"]["command"][0], "sdiag", "{v}");
    let o = t.run("sdiag", &["-M", "elsewhere"]);
    assert!(!o.status.success(), "another cluster is refused");
    // When A ends early the big job goes first, then the long one.
    assert!(t.run("scancel", &[&a.to_string()]).status.success());
    let jb = t.wait_done(big, 30);
    let jl = t.wait_done(long, 30);
    assert!(jb.start_time.unwrap() <= jl.start_time.unwrap());
}

/// priority/multifactor: fair share from the usage the controller has
/// seen; a user who used the cluster ranks below one who did not.
#[test]
fn multifactor_priority_favours_users_with_less_usage() {
    let t = TestCluster::start(1, |s| {
        s.extra_conf = "PriorityType=priority/multifactor\nPriorityWeightFairshare=10000\nPriorityWeightAge=1000\nPriorityCalcPeriod=1\nPriorityDecayHalfLife=0\n".into();
    });
    // root burns CPU time; then the node is filled so both users' jobs wait.
    let burn = t.sbatch(&["-n", "4", "--wrap", "sleep 3"]);
    t.wait_done(burn, 20);
    let fill = t.sbatch(&["-n", "4", "--wrap", "sleep 30"]);
    t.wait_job(fill, 10, "running", |j| j.state == JobState::Running);
    let mine = t.sbatch(&["-n", "1", "--wrap", "true"]);
    let theirs = t.sbatch_as_user(&["-n", "1", "--wrap", "true"]);
    // A user without usage ranks higher.
    let pt = t
        .wait_job(theirs, 10, "ranked above root's", |j| {
            j.priority > t.job(mine).unwrap().priority
        })
        .priority;
    let sprio = stdout(&t.run("sprio", &[]));
    assert!(
        sprio
            .starts_with("          JOBID PARTITION   PRIORITY       SITE        AGE  FAIRSHARE\n"),
        "{sprio}"
    );
    assert!(sprio.contains(&format!("{theirs:>15} debug")), "{sprio}");
    // --sibling: with Slurm's CLUSTER column (this cluster, the only one).
    let sib = stdout(&t.run("sprio", &["--sibling", "-j", &theirs.to_string()]));
    assert!(
        sib.starts_with("          JOBID PARTITION  CLUSTER   PRIORITY")
            && sib.contains(&format!("{theirs:>15} debug        local ")),
        "{sib}"
    );
    // Filters: by job, by user (name or number), by partition.
    let rows = |args: &[&str]| -> Vec<String> {
        let o = t.run("sprio", args);
        assert!(o.status.success(), "{}", stderr(&o));
        stdout(&o)
            .lines()
            .filter_map(|l| l.split_whitespace().next().map(str::to_string))
            .collect()
    };
    assert_eq!(rows(&["-h", &format!("-j{mine}")]), vec![mine.to_string()]);
    assert_eq!(rows(&["-h", "-u", "nobody"]), vec![theirs.to_string()]);
    assert_eq!(
        rows(&["-h", "--user=0", "-p", "debug"]),
        vec![mine.to_string()]
    );
    assert!(rows(&["-h", "-p", "other"]).is_empty());
    let o = t.run("sprio", &["-u", "no-such-user-xyz"]);
    assert_eq!(o.status.code(), Some(1));
    assert_eq!(stderr(&o), "sprio: error: Invalid user: no-such-user-xyz\n");
    // -o and -S: the layout and order asked for; -w: the weights.
    let o = t.run("sprio", &["-h", "-S", "-Y", "-o", "%i|%Y|%u"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let lines: Vec<String> = stdout(&o).lines().map(str::to_string).collect();
    assert_eq!(lines.len(), 2, "{lines:?}");
    // (Priorities grow with age meanwhile: the order is what holds.)
    assert!(
        lines[0].starts_with(&format!("{theirs}|")) && lines[0].ends_with("|nobody"),
        "{lines:?}"
    );
    assert!(lines[1].starts_with(&format!("{mine}|")), "{lines:?}");
    let o = t.run("sprio", &["-w", "-h", "-o", "%i %F"]);
    assert_eq!(stdout(&o), "Weights 10000\n");
    let o = t.run("sprio", &["-o", "%i %z"]);
    assert_eq!(o.status.code(), Some(1));
    assert_eq!(
        stderr(&o),
        "sprio: error: Invalid job format specification: z\n"
    );
    for fmt in ["--json", "--yaml"] {
        let out = stdout(&t.run("sprio", &[fmt]));
        let v: serde_json::Value = if fmt == "--json" {
            serde_json::from_str(&out).unwrap_or_else(|e| panic!("{e}: {out}"))
        } else {
            serde_yaml::from_str(&out).unwrap_or_else(|e| panic!("{e}: {out}"))
        };
        let j = v["jobs"]
            .as_array()
            .unwrap()
            .iter()
            .find(|j| j["job_id"] == theirs)
            .cloned()
            .unwrap_or_else(|| panic!("{out}"));
        assert_eq!(j["priority"], pt, "{out}");
        assert!(j["factors"]["fairshare"].as_f64().is_some(), "{out}");
        assert_eq!(v["weights"]["fairshare"], 10000, "{out}");
        assert_eq!(v["meta"]["command"][0], "sprio");
    }
    let sshare = stdout(&t.run("sshare", &[]));
    assert!(
        sshare.starts_with("Account                    User  RawShares"),
        "{sshare}"
    );
    assert!(
        sshare.contains("root ") && sshare.contains("nobody"),
        "{sshare}"
    );
    // Users' rows of one user, parsable.
    let o = t.run("sshare", &["-U", "-u", "nobody", "-P", "-n"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let rows: Vec<Vec<String>> = stdout(&o)
        .lines()
        .map(|l| l.split('|').map(str::to_string).collect())
        .collect();
    assert!(!rows.is_empty(), "{}", stdout(&o));
    for r in &rows {
        assert_eq!(r.len(), 7, "{r:?}");
        assert_eq!(r[1], "nobody", "{r:?}");
    }
    // -o: the fields asked for, in that order.
    let o = t.run(
        "sshare",
        &["-U", "-u", "nobody", "-P", "-n", "-o", "user,cluster"],
    );
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(
        stdout(&o).lines().all(|l| l == "nobody|local"),
        "{}",
        stdout(&o)
    );
    // The higher-priority job runs first when the node frees up.
    assert!(t.run("scancel", &[&fill.to_string()]).status.success());
    let (jm, jt) = (t.wait_done(mine, 20), t.wait_done(theirs, 20));
    assert!(jt.start_time.unwrap() <= jm.start_time.unwrap());
}

/// `scontrol update PartitionName=`: DRAIN refuses new jobs, DOWN queues
/// without starting them, UP starts them; operators only; the change
/// outlives a controller restart.
#[test]
fn operators_change_partitions_and_the_change_survives_a_restart() {
    let mut t = TestCluster::start(1, |_| {});
    let scontrol = |t: &TestCluster, args: &[&str]| {
        let out = t.run("scontrol", args);
        assert!(out.status.success(), "{args:?}: {}", stderr(&out));
    };
    scontrol(
        &t,
        &["update", "PartitionName=debug", "State=DRAIN", "MaxTime=30"],
    );
    let out = t.run("sbatch", &["--wrap", "true"]);
    assert_eq!(
        stderr(&out),
        "sbatch: error: Batch job submission failed: Required partition not available (inactive or drain)\n"
    );
    let si = stdout(&t.run("sinfo", &["-h", "-o", "%a %l"]));
    assert_eq!(si, "drain 30:00\n");
    // Users may not change partitions.
    let out = t.run_as_user("scontrol", &["update", "PartitionName=debug", "State=UP"]);
    assert!(!out.status.success());
    assert!(
        stderr(&out).contains("Access/permission denied"),
        "{}",
        stderr(&out)
    );
    let out = t.run(
        "scontrol",
        &["update", "PartitionName=debug", "State=bogus"],
    );
    assert!(!out.status.success());
    assert!(
        stderr(&out).contains("Invalid input: State=bogus"),
        "{}",
        stderr(&out)
    );
    scontrol(&t, &["update", "PartitionName=debug", "State=DOWN"]);
    let j = t.sbatch(&["--wrap", "true"]);
    t.wait_job(j, 10, "pending on PartitionDown", |j| {
        j.reason == JobReason::PartitionDown
    });
    // Kept across a restart.
    t.c.kill_ctld(libc::SIGKILL);
    t.c.start_ctld().unwrap();
    let si = stdout(&t.run("sinfo", &["-h", "-o", "%a %l"]));
    assert_eq!(si, "down 30:00\n");
    scontrol(&t, &["update", "partitionname=debug", "state=up"]);
    assert_eq!(t.wait_done(j, 20).state, JobState::Completed);
}

/// `scontrol create|delete PartitionName=`: a partition made while jobs
/// run takes jobs on its nodes, outlives a restart and a reconfigure, is
/// deleted only once no job is left in it; operators only.
#[test]
fn operators_create_and_delete_partitions_while_jobs_run() {
    let mut t = TestCluster::start(2, |_| {});
    let running = t.sbatch(&["-w", "n1", "--wrap", "sleep 30"]);
    t.wait_job(running, 20, "running", |j| j.state == JobState::Running);
    // Users may not; bad names and nodes are refused, changing nothing.
    let out = t.run_as_user("scontrol", &["create", "PartitionName=mine", "Nodes=n2"]);
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(
        stderr(&out),
        "Error creating the partition: Access/permission denied\n"
    );
    for (args, want) in [
        (
            vec!["PartitionName=p2", "Nodes=n9"],
            "Error creating the partition: Invalid node name specified (n9)\n",
        ),
        (
            vec!["PartitionName=debug", "Nodes=n2"],
            "Error creating the partition: Invalid partition name specified (partition debug already exists)\n",
        ),
        (
            vec!["PartitionName=p2", "Default=maybe"],
            "Invalid input: Default=maybe\nRequest aborted\nAcceptable Default values are YES and NO\n",
        ),
    ] {
        let out = t.run("scontrol", &[&["create"][..], &args].concat());
        assert_eq!(out.status.code(), Some(1), "{args:?}");
        assert_eq!(stderr(&out), want, "{args:?}");
    }
    let parts = |t: &TestCluster| stdout(&t.run("sinfo", &["-h", "-o", "%R %N %a %l"]));
    assert_eq!(parts(&t), "debug n[1-2] up infinite\n");

    let out = t.run(
        "scontrol",
        &["create", "PartitionName=p2", "Nodes=n2", "MaxTime=10"],
    );
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(parts(&t), "debug n[1-2] up infinite\np2 n2 up 10:00\n");
    let j = t.sbatch(&["-p", "p2", "--wrap", "sleep 3"]);
    let done = t.wait_done(j, 30);
    assert_eq!(done.state, JobState::Completed);
    assert_eq!(done.alloc.nodes, vec!["n2".to_string()]);
    // A job waiting in it holds it; a restart and a reconfigure keep it.
    let waiting = t.sbatch(&["-p", "p2", "-H", "--wrap", "true"]);
    t.c.kill_ctld(libc::SIGKILL);
    t.c.start_ctld().unwrap();
    assert!(t.run("scontrol", &["reconfigure"]).status.success());
    assert_eq!(parts(&t), "debug n[1-2] up infinite\np2 n2 up 10:00\n");
    // A user may not delete it.
    let out = t.run_as_user("scontrol", &["delete", "PartitionName=p2"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        stderr(&out).contains("Access/permission denied"),
        "{}",
        stderr(&out)
    );
    let out = t.run("scontrol", &["delete", "PartitionName=p2"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        stderr(&out).contains("jobs are pending or running in partition p2"),
        "{}",
        stderr(&out)
    );
    // A configured partition is slurm.conf's to remove.
    let out = t.run("scontrol", &["delete", "PartitionName=debug"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        stderr(&out).contains("defined in slurm.conf"),
        "{}",
        stderr(&out)
    );
    assert!(t.run("scancel", &[&waiting.to_string()]).status.success());
    t.wait_done(waiting, 20);
    let out = t.run("scontrol", &["delete", "PartitionName=p2"]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(parts(&t), "debug n[1-2] up infinite\n");
    let out = t.run("sbatch", &["-p", "p2", "--wrap", "true"]);
    assert!(
        stderr(&out).contains("Invalid partition name specified"),
        "{}",
        stderr(&out)
    );
    // Gone for good: not back after a restart.
    t.c.kill_ctld(libc::SIGKILL);
    t.c.start_ctld().unwrap();
    assert_eq!(parts(&t), "debug n[1-2] up infinite\n");
    assert_eq!(t.job(running).map(|j| j.state), Some(JobState::Running));
}

/// A Torque script runs unchanged: its `#PBS` lines name the job, size it
/// and place its output.
#[test]
fn a_torque_script_with_pbs_directives_runs() {
    let t = TestCluster::start(2, |_| {});
    let script = write_script(
        &t,
        "torque.sh",
        "#!/bin/sh\n#PBS -N torque_job\n#PBS -l nodes=2:ppn=1,walltime=00:05:00\n#PBS -o torque.out\n#PBS -j oe\necho \"$SLURM_JOB_NAME on $SLURM_JOB_NUM_NODES nodes\"\n",
    );
    let id = t.sbatch(&[&script]);
    let j = t.wait_done(id, 30);
    assert_eq!(j.state, JobState::Completed);
    assert_eq!(j.name, "torque_job");
    assert_eq!(j.alloc.nodes.len(), 2);
    assert_eq!(j.time_limit, Some(5));
    let out = std::fs::read_to_string(t.work.join("torque.out")).unwrap();
    assert_eq!(out, "torque_job on 2 nodes\n");
}

/// systemd's readiness protocol (`Type=notify`): every daemon says
/// `READY=1` on `NOTIFY_SOCKET` once it serves, the controller says
/// `RELOADING=1` then `READY=1` around a reconfigure, and `STOPPING=1` when
/// told to stop.
#[test]
fn daemons_speak_systemds_readiness_protocol() {
    let sockdir = tempfile::tempdir().unwrap();
    let path = sockdir.path().join("notify");
    let sock = std::os::unix::net::UnixDatagram::bind(&path).unwrap();
    sock.set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    let mut t = TestCluster::start(2, |s| {
        s.accounting = true;
        s.env
            .push(("NOTIFY_SOCKET".into(), path.display().to_string()));
    });
    let mut got = Vec::new();
    let mut recv = |want: &str, n: usize| {
        let deadline = std::time::Instant::now() + Duration::from_secs(20);
        while got.iter().filter(|m: &&String| m.starts_with(want)).count() < n {
            assert!(
                std::time::Instant::now() < deadline,
                "waiting for {n} × {want}: {got:?}"
            );
            let mut b = [0u8; 256];
            if let Ok(k) = sock.recv(&mut b) {
                got.push(String::from_utf8_lossy(&b[..k]).into_owned());
            }
        }
    };
    // slurmdbd, the controller and both node daemons.
    recv("READY=1", 4);
    let out = t.run("scontrol", &["reconfigure"]);
    assert!(out.status.success(), "{}", stderr(&out));
    recv("RELOADING=1", 1);
    recv("READY=1", 5);
    t.c.kill_ctld(libc::SIGTERM);
    recv("STOPPING=1", 1);
    // Log lines as Slurm's: `[2026-11-26T14:55:58.123] message`.
    let log = std::fs::read_to_string(t.c.spec.dir.join("log/slurmctld.log")).unwrap();
    let first = log.lines().next().unwrap_or_default();
    let b = first.as_bytes();
    assert!(
        b.len() > 26 && b[0] == b'[' && b[11] == b'T' && b[20] == b'.' && &first[24..26] == "] ",
        "{first}"
    );
    assert!(first[26..].starts_with("slurmctld version "), "{first}");
}

/// `scripts/install` lays out binaries, systemd units and /etc/slurm under
/// a prefix, and systemd finds the units sound (Type=notify, the commands
/// they start exist).
#[test]
fn install_script_lays_out_binaries_and_sound_units() {
    let d = tempfile::tempdir().unwrap();
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let out = std::process::Command::new("bash")
        .arg(root.join("scripts/install"))
        .env("BIN", slurm_tests::bin_dir())
        .env("PREFIX", d.path().join("usr"))
        .env("UNITDIR", d.path().join("units"))
        .env("SYSCONFDIR", d.path().join("etc/slurm"))
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    for p in ["sbin/slurmctld", "sbin/slurmd", "bin/sbatch", "bin/squeue"] {
        assert!(d.path().join("usr").join(p).exists(), "{p} not installed");
    }
    assert!(d.path().join("etc/slurm/slurm.conf").exists());
    let units = ["slurmctld", "slurmd", "slurmdbd", "slurmrestd", "sackd"];
    for u in units {
        let text = std::fs::read_to_string(d.path().join(format!("units/{u}.service"))).unwrap();
        assert!(text.contains("Type=notify"), "{u}");
        let sbin = d.path().join("usr/sbin").display().to_string();
        assert!(
            text.contains(&format!("ExecStart={sbin}/{u} ")),
            "{u}: {text}"
        );
    }
    let slurmd = std::fs::read_to_string(d.path().join("units/slurmd.service")).unwrap();
    assert!(slurmd.contains("KillMode=process") && slurmd.contains("Delegate=yes"));
    // systemd's own check, where it is installed.
    if std::path::Path::new("/usr/bin/systemd-analyze").exists() {
        for u in units {
            let out = std::process::Command::new("systemd-analyze")
                .args(["verify", "--man=no"])
                .arg(d.path().join(format!("units/{u}.service")))
                .output()
                .unwrap();
            assert!(
                out.status.success() && out.stderr.is_empty(),
                "{u}: {}",
                stderr(&out)
            );
        }
    }
}

/// A step of `job` (its owner's) running `sleep 302` on one task.
fn sleep_step(t: &TestCluster, job: slurm_proto::JobId) -> std::process::Child {
    t.cmd_as(TEST_UID, TEST_GID, "srun")
        .args(["--jobid", &job.to_string(), "-n1", "sleep", "302"])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap()
}

#[test]
fn scontrol_listpids_shows_a_jobs_processes_to_its_owner_and_root_only() {
    let t = TestCluster::start(1, |_| {});
    let job = t.sbatch_as_user(&["-n", "2", "--wrap", "sleep 300 & sleep 301 & wait"]);
    t.wait_job(job, 30, "running", |j| j.state == JobState::Running);
    // A step of the job, its task running `sleep`.
    let mut step = sleep_step(&t, job);
    let listpids = |uid: u32, args: &[&str]| {
        t.cmd_as(uid, uid, "scontrol")
            .arg("listpids")
            .args(args)
            .output()
            .unwrap()
    };
    let j = job.to_string();
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    let out = loop {
        let o = listpids(0, &[&j, "n1"]);
        let text = stdout(&o);
        // The script, its two sleeps and the step's task.
        if text.lines().count() >= 5 && text.contains(&format!(" {j:<8} 0 ")) {
            break text;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "never listed the step: {text}{}\n{}",
            stderr(&o),
            t.logs()
        );
        std::thread::sleep(Duration::from_millis(200));
    };
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(lines[0], "PID      JOBID    STEPID   LOCALID GLOBALID");
    let rows: Vec<Vec<&str>> = lines[1..]
        .iter()
        .map(|l| l.split_whitespace().collect())
        .collect();
    let cmdline = |pid: &str| {
        std::fs::read(format!("/proc/{pid}/cmdline"))
            .map(|b| String::from_utf8_lossy(&b).replace('\0', " "))
            .unwrap_or_default()
    };
    // The batch script first, with task ids 0 0; its children after.
    assert_eq!(&rows[0][1..], &[j.as_str(), "batch", "0", "0"], "{out}");
    assert!(cmdline(rows[0][0]).contains("slurm_script"), "{out}");
    let children: Vec<&Vec<&str>> = rows
        .iter()
        .filter(|r| r[2] == "batch" && r[3] == "-")
        .collect();
    assert!(children.len() >= 2, "{out}");
    for c in &children {
        assert!(cmdline(c[0]).starts_with("sleep 30"), "{out}");
    }
    let task: Vec<&Vec<&str>> = rows.iter().filter(|r| r[2] == "0").collect();
    assert_eq!(&task[0][1..], &[j.as_str(), "0", "0", "0"], "{out}");
    assert_eq!(cmdline(task[0][0]).trim(), "sleep 302", "{out}");
    // One step only.
    let o = listpids(0, &[&format!("{j}.0"), "n1"]);
    assert!(stdout(&o)
        .lines()
        .skip(1)
        .all(|l| l.split_whitespace().nth(2) == Some("0")));
    // Its owner sees it too; another user is refused it, and sees none of
    // it when asking for everything.
    let o = listpids(TEST_UID, &[&j, "n1"]);
    assert_eq!(stdout(&o), out, "{}", stderr(&o));
    let o = listpids(1000, &[&j, "n1"]);
    assert!(!o.status.success());
    assert!(
        stderr(&o).contains("Access/permission denied"),
        "{}",
        stderr(&o)
    );
    let o = listpids(1000, &["*", "n1"]);
    assert!(!o.status.success());
    assert_eq!(stderr(&o).trim(), "No job steps exist on this node.");
    // Bad input is named.
    let o = listpids(0, &["12x", "n1"]);
    assert!(
        stderr(&o).contains("Invalid job id specified: 12x"),
        "{}",
        stderr(&o)
    );
    let o = listpids(0, &[&j, "nosuch"]);
    assert!(
        stderr(&o).contains("Invalid node name specified: nosuch"),
        "{}",
        stderr(&o)
    );
    // Once it is over, nothing is left to list.
    assert!(t.run("scancel", &[&j]).status.success());
    let _ = step.wait();
    t.wait_done(job, 30);
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    loop {
        let o = listpids(0, &[&j, "n1"]);
        if stderr(&o).trim() == "No job steps exist on this node." {
            break;
        }
        assert!(std::time::Instant::now() < deadline, "{}", stdout(&o));
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// `scontrol setdebug` changes the controller's and the node daemons' log
/// levels at once (root and SlurmUser only); `scontrol shutdown` stops the
/// controller alone, or with the node daemons, and the running job lives
/// through both and completes once they are back.
#[test]
fn scontrol_setdebug_and_shutdown() {
    let mut t = TestCluster::start(2, |_| {});
    let dir = t.c.spec.dir.clone();
    let log = |name: &str| std::fs::read_to_string(dir.join("log").join(name)).unwrap_or_default();
    let said =
        |name: &str, level: &str| log(name).contains(&format!("setdebug: logging at {level} now"));
    fn sc(t: &TestCluster, uid: u32, args: &[&str]) -> std::process::Output {
        t.cmd_as(uid, uid, "scontrol").args(args).output().unwrap()
    }
    // The controller: at error its own info line is not written; at info
    // and debug it is.
    for (level, shown) in [("error", false), ("debug", true), ("3", true)] {
        let o = sc(&t, 0, &["setdebug", level]);
        assert!(o.status.success(), "{level}: {}", stderr(&o));
        let name = level;
        assert_eq!(
            said("slurmctld.log", name),
            shown,
            "{level}\n{}",
            log("slurmctld.log")
        );
    }
    // The node daemons of n[1-2] (n2's left as it was).
    let o = sc(&t, 0, &["setdebug", "error", "nodes=n1"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let o = sc(&t, 0, &["setdebug", "debug", "nodes=n[1-2]"]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(!said("slurmd.n1.log", "error"));
    assert!(said("slurmd.n1.log", "debug") && said("slurmd.n2.log", "debug"));
    // Bad input, and users, change nothing.
    let o = sc(&t, 0, &["setdebug", "loud"]);
    assert_eq!(
        (o.status.code(), stderr(&o).trim()),
        (Some(1), "invalid debug level: loud")
    );
    let o = sc(&t, 0, &["setdebug", "info", "here=n1"]);
    assert_eq!(stderr(&o).trim(), "Invalid option: here=n1");
    let o = sc(&t, TEST_UID, &["setdebug", "error"]);
    assert_eq!(
        (o.status.code(), stderr(&o).trim()),
        (
            Some(1),
            "slurm_set_debug_level error:Access/permission denied"
        )
    );
    let o = sc(&t, TEST_UID, &["setdebug", "error", "nodes=n1"]);
    assert!(!o.status.success());
    assert!(
        stderr(&o).contains("n1: Access/permission denied"),
        "{}",
        stderr(&o)
    );
    // A job runs through what follows.
    let job = t.sbatch(&["-w", "n1", "--wrap", "sleep 8"]);
    t.wait_job(job, 20, "running", |j| j.state == JobState::Running);
    // Users may not stop anything; `shut` is not `shutdown`.
    let o = sc(&t, TEST_UID, &["shutdown"]);
    assert_eq!(
        (o.status.code(), stderr(&o).trim()),
        (Some(1), "slurm_shutdown error:Access/permission denied")
    );
    let o = sc(&t, 0, &["shut"]);
    assert_eq!(stderr(&o).trim(), "invalid keyword: shut");
    let o = sc(&t, 0, &["shutdown", "everything"]);
    assert_eq!(stderr(&o).trim(), "invalid shutdown argument:everything");
    assert!(
        t.c.wait_ctld_exit(Duration::from_millis(500)).is_none(),
        "stopped for a user"
    );
    // The controller alone.
    let o = sc(&t, 0, &["shutdown", "controller"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let status =
        t.c.wait_ctld_exit(Duration::from_secs(10))
            .expect("the controller stops");
    assert!(status.success(), "{status:?}");
    assert!(
        t.c.wait_slurmd_exit(0, Duration::from_millis(500))
            .is_none(),
        "n1 stopped too"
    );
    t.c.start_ctld().expect("controller restarts");
    t.wait_job(job, 20, "still running", |j| j.state == JobState::Running);
    // Everything.
    let o = sc(&t, 0, &["shutdown"]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(
        t.c.wait_ctld_exit(Duration::from_secs(10)).is_some(),
        "the controller stops"
    );
    for i in 0..2 {
        let status =
            t.c.wait_slurmd_exit(i, Duration::from_secs(10))
                .expect("node daemons stop");
        assert!(status.success(), "n{}: {status:?}", i + 1);
    }
    for i in 0..2 {
        t.c.start_slurmd(i).expect("slurmd restarts");
    }
    t.c.start_ctld().expect("controller restarts");
    let j = t.wait_done(job, 60);
    assert_eq!(j.state, JobState::Completed, "{}", t.logs());
}

/// `scontrol listjobs`, `liststeps`, `pidinfo`, `completing`, `show
/// daemons`, `show aliases`: what runs on a node, as its daemon knows it,
/// to the job's owner and root only; what is still completing.
#[test]
fn scontrol_lists_a_nodes_jobs_steps_and_what_is_completing() {
    let dir = tempfile::tempdir().unwrap();
    let epilog = dir.path().join("epilog.sh");
    std::fs::write(&epilog, "#!/bin/sh\nsleep 4\n").unwrap();
    std::fs::set_permissions(&epilog, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    let ep = epilog.display().to_string();
    let t = TestCluster::start(1, move |s| {
        s.extra_conf = format!("Epilog={ep}\nPrologEpilogTimeout=30\n");
    });
    let job = t.sbatch_as_user(&["-t", "10", "--wrap", "sleep 300"]);
    t.wait_job(job, 30, "running", |j| j.state == JobState::Running);
    let mut step = sleep_step(&t, job);
    let sc = |uid: u32, args: &[&str]| t.cmd_as(uid, uid, "scontrol").args(args).output().unwrap();
    let j = job.to_string();
    let deadline = Instant::now() + Duration::from_secs(20);
    let steps = loop {
        let o = sc(0, &["liststeps", "n1"]);
        if stdout(&o).lines().count() >= 3 {
            break stdout(&o);
        }
        assert!(Instant::now() < deadline, "{}{}", stdout(&o), stderr(&o));
        std::thread::sleep(Duration::from_millis(200));
    };
    assert_eq!(
        steps,
        format!("JOBID    STEPID  \n{j:<8} batch   \n{j:<8} 0       \n"),
        "batch step first, then step 0"
    );
    assert_eq!(
        stdout(&sc(0, &["listjobs", "n1"])),
        format!("JOBID\n{j:<8}\n")
    );
    // The owner sees the same; another user sees nothing of it.
    assert_eq!(stdout(&sc(TEST_UID, &["liststeps", "n1"])), steps);
    let o = sc(1000, &["listjobs", "n1"]);
    assert!(!o.status.success());
    assert_eq!(stderr(&o).trim(), "No slurmstepd's found on this node");
    // `show slurmd`: anyone may ask a node daemon about itself, as Slurm's.
    let o = sc(1000, &["show", "slurmd", "n1"]);
    let text = stdout(&o);
    assert!(o.status.success(), "{text}{}", stderr(&o));
    let field = |k: &str| {
        text.lines()
            .find_map(|l| l.strip_prefix(&format!("{k:<24} = ")))
            .unwrap_or_else(|| panic!("no {k} in {text}"))
            .to_string()
    };
    assert_eq!(field("Active Steps"), format!("{j}, {j}.0"));
    assert_eq!(field("Hostname"), "n1");
    assert_eq!(field("Version"), slurm_proto::SLURM_VERSION);
    assert!(field("Actual CPUs").parse::<u32>().unwrap() >= 1, "{text}");
    assert!(field("Actual real memory").ends_with(" MB"), "{text}");
    assert!(field("Slurmd PID").parse::<u32>().unwrap() > 1, "{text}");
    assert_ne!(field("Last slurmctld msg time"), "NONE", "{text}");
    assert_eq!(text.lines().count(), 15, "{text}");
    // pidinfo of the step's task: its job and step, and when the job ends.
    let pids = stdout(&sc(0, &["listpids", &format!("{j}.0"), "n1"]));
    let pid = pids
        .lines()
        .nth(1)
        .and_then(|l| l.split_whitespace().next())
        .expect("the task's pid")
        .to_string();
    let o = sc(TEST_UID, &["pidinfo", &pid, "n1"]);
    let text = stdout(&o);
    assert!(
        text.starts_with(&format!("Slurm JobId={j}.0 ends at ")),
        "{text}{}",
        stderr(&o)
    );
    let left: i64 = text
        .lines()
        .nth(1)
        .and_then(|l| l.strip_prefix("Job remaining time is "))
        .and_then(|l| l.strip_suffix(" seconds"))
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("{text}"));
    assert!((500..=600).contains(&left), "{text}");
    let o = sc(1000, &["pidinfo", &pid, "n1"]);
    assert!(!o.status.success());
    assert_eq!(stderr(&o).trim(), "Failed to locate job for requested pid");
    let o = sc(0, &["pidinfo", "x1"]);
    assert_eq!(stderr(&o).trim(), "Invalid pidinfo value");
    // What this host runs by slurm.conf: the controller (localhost), no
    // node daemon (the nodes are named n1.., not this host).
    assert_eq!(stdout(&sc(1000, &["show", "daemons"])).trim(), "slurmctld");
    assert_eq!(stdout(&sc(1000, &["show", "aliases", "n1"])), "n1\n");
    let port = t.nodes()[0].port;
    assert_eq!(
        stdout(&sc(1000, &["getaddrs", "n1"])),
        format!("n1: {}:{port}\n", t.c.spec.ip)
    );
    let o = sc(1000, &["getaddrs", "n[1-2]"]);
    assert_eq!(
        stderr(&o).trim(),
        "scontrol: error: Invalid node name specified: n2"
    );
    // Cancelled, it completes while its epilog runs.
    assert!(t.run("scancel", &[&j]).status.success());
    let _ = step.wait();
    let deadline = Instant::now() + Duration::from_secs(20);
    let line = loop {
        let o = sc(1000, &["completing"]);
        if let Some(l) = stdout(&o)
            .lines()
            .find(|l| l.starts_with(&format!("JobId={j} ")))
        {
            break l.to_string();
        }
        assert!(Instant::now() < deadline, "never completing: {}", t.logs());
        std::thread::sleep(Duration::from_millis(100));
    };
    let w: Vec<&str> = line.split(' ').collect();
    assert!(w[1].starts_with("EndTime=20"), "{line}");
    assert!(w[2].starts_with("CompletingTime=00:00:0"), "{line}");
    assert_eq!(w[3], "Nodes(COMPLETING)=n1", "{line}");
    t.wait_done(job, 30);
    let deadline = Instant::now() + Duration::from_secs(20);
    while !stdout(&sc(0, &["completing"])).is_empty() {
        assert!(Instant::now() < deadline, "still completing");
        std::thread::sleep(Duration::from_millis(200));
    }
    let o = sc(0, &["listjobs", "n1"]);
    assert_eq!(stderr(&o).trim(), "No slurmstepd's found on this node");
}

#[test]
fn watch_stream_follows_jobs_and_nodes_and_shows_users_only_their_own() {
    use slurm_common::grpc;
    use slurm_proto::grpc::pb::{self, watch_event::Event};
    let t = TestCluster::start(1, |s| {
        s.min_job_age = 3;
        s.extra_conf = "PrivateData=jobs\n".into();
    });
    let dir = &t.c.spec.dir;
    let key = slurm_common::auth::Key::load(&dir.join("slurm.key")).unwrap();
    let (tls, ctld) = t.command_tls();
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let open = |uid: u32, k: &slurm_common::auth::Key, req: pb::WatchRequest| {
        rt.block_on(async {
            let ch = grpc::channel(Some(tls.client.clone()), &ctld, "localhost")?;
            let sign = |b: &_| Ok(k.sign(uid, uid, "test", slurm_common::auth::now(), b));
            grpc::watch(&ch, "localhost", req, sign).await
        })
    };
    let next = |s: &mut tonic::Streaming<pb::WatchEvent>| -> Event {
        rt.block_on(async { tokio::time::timeout(Duration::from_secs(30), s.message()).await })
            .expect("no event within 30 s")
            .expect("stream failed")
            .expect("stream ended")
            .event
            .unwrap()
    };
    let everything = pb::WatchRequest {
        jobs: true,
        nodes: true,
        job_ids: vec![],
        config: false,
    };
    // A peer without the key is refused.
    let forged = slurm_common::auth::Key::from_bytes(&[9u8; 32]);
    let e = open(0, &forged, everything.clone())
        .unwrap_err()
        .to_string();
    assert!(e.contains("Unauthenticated"), "{e}");

    let mut root = open(0, &key, everything.clone()).unwrap();
    let mut user = open(TEST_UID, &key, everything).unwrap();
    // The listing: the idle node, then synced.
    match next(&mut root) {
        Event::Node(n) => assert_eq!((n.name.as_str(), n.state.as_str()), ("n1", "IDLE")),
        other => panic!("{other:?}"),
    }
    assert!(matches!(next(&mut root), Event::Synced(_)));
    assert!(matches!(next(&mut user), Event::Node(_)));
    assert!(matches!(next(&mut user), Event::Synced(_)));

    let theirs = t.sbatch(&["--wrap", "sleep 1"]);
    let mut one = open(
        0,
        &key,
        pb::WatchRequest {
            jobs: true,
            nodes: false,
            job_ids: vec![theirs],
            config: false,
        },
    )
    .unwrap();
    let mine = t.sbatch_as_user(&["--wrap", "sleep 1"]);
    // Root follows both through to the end, and sees the node busy and
    // idle again; each job runs on n1.
    let (mut states, mut node_states) = (Vec::new(), Vec::new());
    let mut gone = Vec::new();
    while gone.len() < 2 {
        match next(&mut root) {
            Event::Job(j) => {
                if j.state == "RUNNING" {
                    assert_eq!(j.nodes, vec!["n1".to_string()]);
                }
                states.push((j.job_id, j.state));
            }
            Event::Node(n) => node_states.push(n.state),
            Event::JobGone(id) => gone.push(id),
            Event::Synced(_) => panic!("synced twice"),
            Event::ConfigChanged(_) => panic!("the configuration was not asked for"),
        }
    }
    for id in [theirs, mine] {
        let seen: Vec<&str> = states
            .iter()
            .filter(|(j, _)| *j == id)
            .map(|(_, s)| s.as_str())
            .collect();
        assert!(seen.contains(&"RUNNING"), "{id}: {seen:?}");
        assert_eq!(seen.last(), Some(&"COMPLETED"), "{id}: {seen:?}");
    }
    gone.sort_unstable();
    let mut both = vec![theirs, mine];
    both.sort_unstable();
    assert_eq!(gone, both);
    assert!(
        node_states
            .iter()
            .any(|s| s.starts_with("ALLOCATED") || s.starts_with("MIXED")),
        "{node_states:?}"
    );
    assert_eq!(node_states.last().map(String::as_str), Some("IDLE"));
    // The stream for one job showed that job only, through to its purge.
    loop {
        match next(&mut one) {
            Event::Job(j) => assert_eq!(j.job_id, theirs),
            Event::JobGone(id) => {
                assert_eq!(id, theirs);
                break;
            }
            Event::Node(_) => panic!("nodes were not asked for"),
            Event::ConfigChanged(_) => panic!("the configuration was not asked for"),
            Event::Synced(_) => {}
        }
    }
    // The user (PrivateData=jobs) saw only their own job.
    loop {
        match next(&mut user) {
            Event::Job(j) => assert_eq!(j.job_id, mine, "another user's job was shown"),
            Event::JobGone(id) => {
                assert_eq!(id, mine);
                break;
            }
            _ => {}
        }
    }
}

/// A process killed when the test ends, however it ends.
struct Killed(std::process::Child);

impl Drop for Killed {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[test]
fn a_configless_node_daemon_runs_with_the_controllers_configuration() {
    use std::os::unix::fs::PermissionsExt;
    let mut t = TestCluster::start(2, |s| {
        s.tls = false;
        s.extra_conf = "SlurmctldParameters=enable_configless\n".into();
    });
    let server = format!("{}:{}", t.c.spec.ip, t.c.spec.ctld_port);
    // n2's daemon comes back configless: its directory holds only the key.
    let before = t.wait_node("n2", 20, "up", |n| n.slurmd_start_time.is_some());
    t.c.kill_slurmd(1, libc::SIGTERM);
    // (Start times are in seconds: the new one must differ.)
    std::thread::sleep(Duration::from_millis(1100));
    let node_dir = tempfile::tempdir().unwrap();
    let key = node_dir.path().join("slurm.key");
    std::fs::copy(t.c.spec.dir.join("slurm.key"), &key).unwrap();
    std::fs::set_permissions(&key, std::fs::Permissions::from_mode(0o600)).unwrap();
    let slurmd = |dir: &std::path::Path| {
        let log = std::fs::File::create(dir.join("slurmd.log")).unwrap();
        // Controllers in turn: the first listed answers nothing.
        std::process::Command::new(t.c.spec.bin_dir.join("slurmd"))
            .args(["-D", "-N", "n2", "-f"])
            .arg(dir.join("slurm.conf"))
            .args(["--conf-server", &format!("127.0.0.1:1,{server}")])
            .stdout(log.try_clone().unwrap())
            .stderr(log)
            .spawn()
            .unwrap()
    };
    // Beside slurm.conf on the controller: a secret no node may fetch.
    std::fs::write(
        t.c.spec.dir.join("slurmdbd.conf"),
        "StoragePass=not-for-nodes\n",
    )
    .unwrap();
    let _n2 = Killed(slurmd(node_dir.path()));
    t.wait_node("n2", 30, "registered again", |n| {
        n.slurmd_start_time != before.slurmd_start_time
            && n.base_state == NodeBaseState::Idle
            && !n.flags.not_responding
    });
    // The cache holds the controller's slurm.conf, readable by jobs.
    let cached = node_dir.path().join("conf-cache/slurm.conf");
    assert_eq!(
        std::fs::read_to_string(&cached).unwrap(),
        std::fs::read_to_string(t.c.spec.conf_path()).unwrap()
    );
    assert_eq!(
        std::fs::metadata(&cached).unwrap().permissions().mode() & 0o777,
        0o644
    );
    // Only the files nodes read came: no key, no slurmdbd.conf.
    for e in std::fs::read_dir(node_dir.path().join("conf-cache")).unwrap() {
        let e = e.unwrap();
        let name = e.file_name().to_string_lossy().into_owned();
        assert!(
            slurm_proto::grpc::CONFIG_FILES.contains(&name.as_str()),
            "{name} was fetched"
        );
        let text = std::fs::read_to_string(e.path()).unwrap_or_default();
        assert!(!text.contains("not-for-nodes"), "{name}");
    }
    // A job on n2 runs, and sees the cached slurm.conf as SLURM_CONF.
    let out = t.work.join("conf_seen");
    let job = t.sbatch(&[
        "-w",
        "n2",
        "--wrap",
        &format!("echo $SLURM_CONF > {}", out.display()),
    ]);
    assert_eq!(t.wait_done(job, 30).state, JobState::Completed);
    assert_eq!(
        std::fs::read_to_string(&out).unwrap().trim(),
        cached.display().to_string()
    );

    // `scontrol reconfigure` reaches the node's cache.
    let mut changed = std::fs::read_to_string(t.c.spec.conf_path()).unwrap();
    changed.push_str("MinJobAge=299\n");
    std::fs::write(t.c.spec.conf_path(), &changed).unwrap();
    let out = t.run("scontrol", &["reconfigure"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let deadline = Instant::now() + Duration::from_secs(20);
    while std::fs::read_to_string(&cached).unwrap_or_default() != changed {
        assert!(
            Instant::now() < deadline,
            "the cache was not refreshed\n{}",
            std::fs::read_to_string(node_dir.path().join("slurmd.log")).unwrap_or_default()
        );
        std::thread::sleep(Duration::from_millis(100));
    }

    // A peer without the key gets nothing.
    let stranger = tempfile::tempdir().unwrap();
    std::fs::write(stranger.path().join("slurm.key"), [7u8; 32]).unwrap();
    let o = std::process::Command::new(t.c.spec.bin_dir.join("slurmd"))
        .args(["-D", "-N", "n2", "-f"])
        .arg(stranger.path().join("slurm.conf"))
        .args(["--conf-server", &server])
        .output()
        .unwrap();
    assert!(!o.status.success());
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("cannot fetch the configuration"), "{err}");
    assert!(!stranger.path().join("conf-cache/slurm.conf").exists());

    // Without SlurmctldParameters=enable_configless, the controller says so.
    let plain = TestCluster::start(1, |s| s.tls = false);
    let plain_dir = tempfile::tempdir().unwrap();
    std::fs::copy(
        plain.c.spec.dir.join("slurm.key"),
        plain_dir.path().join("slurm.key"),
    )
    .unwrap();
    let o = std::process::Command::new(plain.c.spec.bin_dir.join("slurmd"))
        .args(["-D", "-N", "n1", "-f"])
        .arg(plain_dir.path().join("slurm.conf"))
        .args([
            "--conf-server",
            &format!("{}:{}", plain.c.spec.ip, plain.c.spec.ctld_port),
        ])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(!o.status.success());
    assert!(err.contains("configless mode is off"), "{err}");
}

#[test]
fn sackd_gives_users_credentials_on_a_host_without_slurmd() {
    use std::os::unix::fs::PermissionsExt;
    let t = TestCluster::start(1, |s| {
        s.tls = false;
        s.extra_conf = "SlurmctldParameters=enable_configless\n".into();
    });
    // A login host: the cluster's slurm.conf with a credential socket of
    // its own, and the key (readable by root only).
    let login = tempfile::tempdir().unwrap();
    std::fs::set_permissions(login.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    let key = login.path().join("slurm.key");
    std::fs::copy(t.c.spec.dir.join("slurm.key"), &key).unwrap();
    std::fs::set_permissions(&key, std::fs::Permissions::from_mode(0o600)).unwrap();
    let socket = login.path().join("sack.socket");
    let conf: String = std::fs::read_to_string(t.c.spec.conf_path())
        .unwrap()
        .lines()
        .map(|l| {
            if l.starts_with("AuthInfo=") {
                format!("AuthInfo=socket={}\n", socket.display())
            } else {
                format!("{l}\n")
            }
        })
        .collect();
    let login_conf = login.path().join("slurm.conf");
    std::fs::write(&login_conf, conf).unwrap();
    std::fs::set_permissions(&login_conf, std::fs::Permissions::from_mode(0o644)).unwrap();
    let user_squeue = || {
        t.cmd_as(TEST_UID, TEST_GID, "squeue")
            .env("SLURM_CONF", &login_conf)
            .arg("-h")
            .output()
            .unwrap()
    };
    // No daemon serves its socket: a user's command has no credential.
    let o = user_squeue();
    assert!(!o.status.success(), "{}", stdout(&o));
    let log = std::fs::File::create(login.path().join("sackd.log")).unwrap();
    let sackd = Killed(
        std::process::Command::new(t.c.spec.bin_dir.join("sackd"))
            .args(["-D", "-f"])
            .arg(&login_conf)
            .stdout(log.try_clone().unwrap())
            .stderr(log)
            .spawn()
            .unwrap(),
    );
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let o = user_squeue();
        if o.status.success() {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "no credential from sackd: {}\n{}",
            stderr(&o),
            std::fs::read_to_string(login.path().join("sackd.log")).unwrap_or_default()
        );
        std::thread::sleep(Duration::from_millis(200));
    }
    // Configless, on a host whose socket is served already (here, by the
    // controller): it fetches the configuration, then says so and stops.
    let bare = tempfile::tempdir().unwrap();
    std::fs::copy(&key, bare.path().join("slurm.key")).unwrap();
    let o = std::process::Command::new(t.c.spec.bin_dir.join("sackd"))
        .arg("-f")
        .arg(bare.path().join("slurm.conf"))
        .args([
            "--conf-server",
            &format!("{}:{}", t.c.spec.ip, t.c.spec.ctld_port),
        ])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(!o.status.success());
    assert!(err.contains("serves the credential socket"), "{err}");
    assert!(bare.path().join("conf-cache/slurm.conf").exists());
    // Once sackd stops, the login host's users have no credential again.
    drop(sackd);
    assert!(!user_squeue().status.success());
}
