//! Nothing lost, nobody crosses: the journal under kill -9 and compaction,
//! users' rights on every path, and bounds on what one submission costs.

use super::write_script;
use slurm_proto::{JobDesc, JobState, RequestBody, Response, SlurmError};
use slurm_tests::*;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// Submissions from four threads while the journal compacts every few
/// dozen jobs; the controller is killed with SIGKILL in the middle, twice.
/// Every job `sbatch` acknowledged is there after each restart.
#[test]
fn no_acknowledged_job_is_lost_to_kill_during_submissions_and_compactions() {
    let mut t = TestCluster::start(1, |s| {
        s.extra_conf = "SlurmctldParameters=journal_compact_bytes=40000\n".into();
    });
    // ~4 KB scripts: a compaction every ten jobs or so.
    let script = write_script(
        &t,
        "big.sh",
        &format!("#!/bin/sh\n# {}\ntrue\n", "x".repeat(4000)),
    );
    let mut acked: Vec<u32> = Vec::new();
    for round in 0..2 {
        let got = Mutex::new(Vec::new());
        let stop = AtomicBool::new(false);
        let sbatch = t.cmd_factory("sbatch", &["--parsable", "-H", &script]);
        let cmd = || sbatch.make();
        std::thread::scope(|sc| {
            for _ in 0..4 {
                let (got, stop, cmd) = (&got, &stop, &cmd);
                sc.spawn(move || {
                    let mut c = cmd();
                    for _ in 0..200 {
                        if stop.load(Ordering::Relaxed) {
                            break;
                        }
                        let out = c.output().unwrap();
                        if out.status.success() {
                            let id: u32 = stdout(&out).trim().parse().unwrap();
                            got.lock().unwrap().push(id);
                        }
                        c = cmd();
                    }
                });
            }
            // Kill once enough have been acknowledged that several
            // compactions have run, while the threads keep submitting.
            let deadline = Instant::now() + Duration::from_secs(60);
            while got.lock().unwrap().len() < 60 + round * 20 && Instant::now() < deadline {
                std::thread::sleep(Duration::from_millis(20));
            }
            t.c.kill_ctld(libc::SIGKILL);
            std::thread::sleep(Duration::from_millis(300));
            stop.store(true, Ordering::Relaxed);
        });
        acked.extend(got.into_inner().unwrap());
        t.c.start_ctld()
            .unwrap_or_else(|e| panic!("restart after kill {round}: {e}\n{}", t.logs()));
        let jobs = t.jobs();
        let lost: Vec<u32> = acked
            .iter()
            .copied()
            .filter(|id| !jobs.iter().any(|j| j.job_id == *id))
            .collect();
        assert!(lost.is_empty(), "round {round}: lost {lost:?}");
        assert!(
            acked.len() >= 60,
            "only {} submissions went through",
            acked.len()
        );
    }
    eprintln!(
        "FIGURE | kill -9 slurmctld twice during submissions, journal compacting every ~10 jobs | {} acknowledged, 0 lost",
        acked.len()
    );
    // Compaction really happened (the previous snapshot is kept).
    let state = t.c.spec.dir.join("state");
    assert!(state.join("state.json.prev").exists());
    // The state holds every user's scripts: nobody else may read it.
    assert_eq!(std::fs::metadata(&state).unwrap().mode() & 0o777, 0o700);
    for f in std::fs::read_dir(&state).unwrap() {
        let f = f.unwrap();
        let mode = f.metadata().unwrap().mode() & 0o777;
        assert_eq!(mode, 0o600, "{}", f.path().display());
    }
    let out = t.run_as_user("scontrol", &["show", "job"]);
    assert!(out.status.success());
    let r = std::fs::read(state.join("state.json"));
    assert!(r.is_ok(), "root reads it");
    let cat = std::process::Command::new("setpriv")
        .args([
            &format!("--reuid={TEST_UID}"),
            &format!("--regid={TEST_GID}"),
            "--clear-groups",
            "cat",
        ])
        .arg(state.join("state.json"))
        .output()
        .unwrap();
    assert!(!cat.status.success(), "a user read the controller's state");
}

#[test]
fn users_keep_to_their_rights_on_submit_update_and_srun() {
    let t = TestCluster::start(1, |s| {
        s.extra_conf = "PartitionName=staff Nodes=n1 AllowGroups=root\n".into();
    });
    // Negative nice: operators only, on submission as on update.
    let out = t.run_as_user("sbatch", &["--nice=-1000000", "--wrap", "true"]);
    assert!(!out.status.success(), "{}", stdout(&out));
    assert!(
        stderr(&out).contains("Access/permission denied"),
        "{}",
        stderr(&out)
    );
    let id = t.sbatch(&["--nice=-10", "-H", "--wrap", "true"]);
    assert_eq!(t.job(id).unwrap().desc.nice, Some(-10), "root may");

    // A partition the user may not use: refused on submission, and now on
    // update too.
    let out = t.run_as_user("sbatch", &["-p", "staff", "--wrap", "true"]);
    assert!(!out.status.success());
    let mine = t.sbatch_as_user(&["-H", "--wrap", "true"]);
    let out = t.run_as_user(
        "scontrol",
        &["update", &format!("JobId={mine}"), "Partition=staff"],
    );
    assert!(
        !out.status.success(),
        "moved into a partition it may not use"
    );
    assert!(
        stderr(&out).contains("Access/permission denied"),
        "{}",
        stderr(&out)
    );
    assert_eq!(t.job(mine).unwrap().partition, "debug", "nothing changed");
    // Root may move it.
    let out = t.run(
        "scontrol",
        &["update", &format!("JobId={mine}"), "Partition=staff"],
    );
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(t.job(mine).unwrap().partition, "staff");

    // srun --chdir into a directory the user cannot enter: the task does
    // not start there (it would if root entered it on the user's behalf).
    let private = t.work.join("private");
    std::fs::create_dir(&private).unwrap();
    std::fs::set_permissions(&private, std::fs::Permissions::from_mode(0o700)).unwrap();
    let out = t.run_as_user("srun", &["-D", private.to_str().unwrap(), "pwd"]);
    assert_eq!(stdout(&out).trim(), "/tmp", "{}", stderr(&out));
    assert!(
        stderr(&out).contains(&format!(
            "couldn't chdir to `{}': Permission denied: going to /tmp instead",
            private.display()
        )),
        "{}",
        stderr(&out)
    );
    // One it may enter works as before.
    let out = t.run_as_user("srun", &["-D", t.work.to_str().unwrap(), "pwd"]);
    assert_eq!(
        stdout(&out).trim(),
        t.work.to_str().unwrap(),
        "{}",
        stderr(&out)
    );
}

fn submit(t: &TestCluster, desc: JobDesc) -> Result<u32, (SlurmError, String)> {
    match t.c.call(RequestBody::SubmitBatchJob(desc)) {
        Ok(Response::Submitted { job_id }) => Ok(job_id),
        Ok(Response::Error(e)) => Err((e.error, e.detail.unwrap_or_default())),
        other => panic!("{other:?}"),
    }
}

#[test]
fn one_submission_cannot_make_the_controller_do_unbounded_work() {
    let t = TestCluster::start(1, |_| {});
    let desc = |script: String| JobDesc {
        script,
        work_dir: "/tmp".into(),
        hold: true,
        ..Default::default()
    };
    // 100,000 ranges of 1000 tasks: refused before any is expanded.
    let mut d = desc("#!/bin/sh\ntrue\n".into());
    d.array = Some(vec!["0-999"; 100_000].join(","));
    let started = Instant::now();
    let e = submit(&t, d).unwrap_err();
    assert_eq!(e.0, SlurmError::InvalidArray, "{e:?}");
    assert!(e.1.contains("MaxArraySize"), "{e:?}");
    // A script over max_script_size (4 MiB).
    let big = format!("#!/bin/sh\n#{}\n", "x".repeat(4 << 20));
    let e = submit(&t, desc(big)).unwrap_err();
    assert!(e.1.contains("max_script_size"), "{e:?}");
    // An environment over its limit.
    let mut d = desc("#!/bin/sh\ntrue\n".into());
    d.environment = vec![format!("BIG={}", "y".repeat(5 << 20))];
    let e = submit(&t, d).unwrap_err();
    assert!(e.1.contains("max_env_size"), "{e:?}");
    // A dependency on 200,000 jobs.
    let first = submit(&t, desc("#!/bin/sh\ntrue\n".into())).unwrap();
    let mut d = desc("#!/bin/sh\ntrue\n".into());
    d.dependency = Some(format!(
        "afterok:{}",
        vec![first.to_string(); 200_000].join(":")
    ));
    let e = submit(&t, d).unwrap_err();
    assert_eq!(e.0, SlurmError::Dependency, "{e:?}");
    assert!(e.1.contains("more than 1000 dependencies"), "{e:?}");
    eprintln!(
        "four oversized submissions refused in {:?}",
        started.elapsed()
    );
    // Nothing of them was kept, and the controller serves on.
    let jobs = t.jobs();
    assert_eq!(
        jobs.len(),
        1,
        "{:?}",
        jobs.iter().map(|j| j.job_id).collect::<Vec<_>>()
    );
    // A dependency on every task of an array, evaluated from the index.
    let arr = t.sbatch(&["--array=0-3", "--wrap", "true"]);
    let after = t.sbatch(&["-d", &format!("afterok:{arr}"), "--wrap", "true"]);
    let j = t.wait_done(after, 60);
    assert_eq!(j.state, JobState::Completed, "{:?}", j.reason);
    for task in t
        .jobs()
        .iter()
        .filter(|j| j.array.as_ref().is_some_and(|a| a.job_id == arr))
    {
        assert!(task.end_time.unwrap() <= j.start_time.unwrap());
    }
}

/// PrivateData in slurm.conf (controller) and slurmdbd.conf (accounting):
/// an ordinary user sees only their own jobs, usage and reservations, no
/// node list and no metrics; root sees everything.
#[test]
fn private_data_hides_other_users_from_the_commands_and_accounting() {
    use std::io::{Read, Write};
    let t = TestCluster::start(1, |s| {
        s.accounting = true;
        s.extra_conf = "PrivateData=jobs,usage,nodes,reservations\n".into();
        s.extra_dbd_conf = "PrivateData=jobs,users\n".into();
    });
    let user = |prog: &str, args: &[&str]| {
        t.cmd_as(TEST_UID, TEST_GID, prog)
            .args(args)
            .output()
            .unwrap()
    };
    let ran_root = t.sbatch(&["-J", "rootjob", "--wrap", "true"]);
    let ran_mine = t.sbatch_as_user(&["-J", "userjob", "--wrap", "true"]);
    t.wait_done(ran_root, 30);
    t.wait_done(ran_mine, 30);
    let held_root = t.sbatch(&["-H", "--wrap", "true"]);
    let held_mine = t.sbatch_as_user(&["-H", "--wrap", "true"]);

    let out = user("squeue", &["-h", "-o", "%i"]);
    assert_eq!(stdout(&out), format!("{held_mine}\n"), "{}", stderr(&out));
    let out = t.run("squeue", &["-h", "-o", "%i"]);
    assert_eq!(stdout(&out), format!("{held_root}\n{held_mine}\n"));
    let out = user("scontrol", &["show", "job", &held_root.to_string()]);
    assert!(!out.status.success(), "{}", stdout(&out));
    assert!(!stdout(&out).contains("Command="), "{}", stdout(&out));
    // Cancelling tells nothing of others' jobs either.
    let out = user("scancel", &[&held_root.to_string()]);
    assert!(
        !stderr(&out).contains("Access/permission denied"),
        "told the job exists: {}",
        stderr(&out)
    );
    let out = user("scancel", &["-u", "root"]);
    assert!(
        !stderr(&out).contains(&held_root.to_string()),
        "{}",
        stderr(&out)
    );
    assert_eq!(t.job(held_root).unwrap().state, JobState::Pending);
    let out = user("sprio", &["-h"]);
    assert!(
        !stdout(&out).contains(&held_root.to_string()),
        "{}",
        stdout(&out)
    );

    // Nodes: refused to users, as Slurm refuses them.
    let out = user("sinfo", &[]);
    assert!(!out.status.success());
    assert!(
        stderr(&out).contains("Access/permission denied"),
        "{}",
        stderr(&out)
    );
    assert!(t.run("sinfo", &[]).status.success());

    // Reservations: only those the user may use.
    let out = t.run(
        "scontrol",
        &[
            "create",
            "reservation",
            "ReservationName=rootonly",
            "StartTime=now+600",
            "Duration=60",
            "Nodes=n1",
            "Users=root",
        ],
    );
    assert!(out.status.success(), "{}", stderr(&out));
    let out = user("scontrol", &["show", "reservation"]);
    assert!(!stdout(&out).contains("rootonly"), "{}", stdout(&out));
    assert!(stdout(&t.run("scontrol", &["show", "reservation"])).contains("rootonly"));

    // Metrics name users and jobs: off while PrivateData is set.
    let mut s = std::net::TcpStream::connect(("127.0.0.1", t.c.spec.ctld_port)).unwrap();
    write!(
        s,
        "GET /metrics/jobs-users-accts HTTP/1.1\r\nHost: x\r\n\r\n"
    )
    .unwrap();
    let mut r = String::new();
    s.read_to_string(&mut r).unwrap();
    assert!(r.starts_with("HTTP/1.1 403 "), "{r}");

    // Accounting: sacct --allusers gives a user their own records only.
    let ids = format!("{ran_root},{ran_mine}");
    let args = ["-a", "-X", "-n", "-P", "--format=JobID", "-j", &ids];
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let all = stdout(&t.run("sacct", &args));
        if all.lines().count() == 2 {
            break;
        }
        assert!(Instant::now() < deadline, "root's sacct: {all}");
        std::thread::sleep(Duration::from_millis(300));
    }
    let out = user("sacct", &args);
    assert_eq!(stdout(&out), format!("{ran_mine}\n"), "{}", stderr(&out));
}

/// Unmounts a test's file system when dropped.
struct Mount(std::path::PathBuf);

impl Drop for Mount {
    fn drop(&mut self) {
        let _ = std::process::Command::new("umount")
            .arg("-l")
            .arg(&self.0)
            .status();
    }
}

/// StateSaveLocation on a small file system that fills up: new work is
/// refused with a clear error, work already taken goes on and is saved,
/// and when space returns the controller takes work again; a restart
/// shows nothing acknowledged was lost.
#[test]
fn a_full_state_disk_refuses_new_work_loses_nothing_and_recovers() {
    let tmp = tempfile::tempdir().unwrap();
    let fs = tmp.path().join("statefs");
    std::fs::create_dir(&fs).unwrap();
    let st = std::process::Command::new("mount")
        .args(["-t", "tmpfs", "-o", "size=16m", "tmpfs"])
        .arg(&fs)
        .status()
        .unwrap();
    assert!(st.success(), "mount tmpfs");
    let _mount = Mount(fs.clone());
    let mut t = TestCluster::start(1, |s| {
        s.extra_conf = format!(
            "StateSaveLocation={}\nSlurmctldParameters=journal_reserve_bytes=1048576\n",
            fs.display()
        );
    });
    let running = t.sbatch(&["--wrap", "sleep 2"]);
    t.wait_job(running, 20, "running", |j| j.state == JobState::Running);
    let held = t.sbatch(&["-H", "--wrap", "true"]);

    // Fill the file system.
    {
        use std::io::Write;
        let mut f = std::fs::File::create(fs.join("ballast")).unwrap();
        let chunk = vec![0u8; 1 << 20];
        while f.write_all(&chunk).is_ok() {}
        let _ = f.sync_all();
    }
    let out = t.run("sbatch", &["-v", "--wrap", "true"]);
    assert!(!out.status.success(), "{}", stdout(&out));
    assert!(
        stderr(&out).contains("Requested operation is presently disabled")
            && stderr(&out).contains("takes no new work")
            && stderr(&out).contains("journal_reserve_bytes"),
        "{}",
        stderr(&out)
    );
    // Nor are jobs changed, by their owners or anyone.
    let out = t.run(
        "scontrol",
        &["update", &format!("JobId={held}"), "TimeLimit=5"],
    );
    assert!(
        !out.status.success() && stderr(&out).contains("presently disabled"),
        "{}",
        stderr(&out)
    );
    // Work already taken goes on, and is saved.
    let j = t.wait_done(running, 30);
    assert_eq!(j.state, JobState::Completed, "{:?}", j.reason);
    let out = t.run("scancel", &[&held.to_string()]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(t.wait_done(held, 10).state, JobState::Cancelled);

    // Space returns: new work is taken again.
    std::fs::remove_file(fs.join("ballast")).unwrap();
    let again = t.sbatch(&["-H", "--wrap", "true"]);

    // Nothing acknowledged was lost.
    t.c.kill_ctld(libc::SIGKILL);
    t.c.start_ctld()
        .unwrap_or_else(|e| panic!("{e}\n{}", t.logs()));
    let jobs = t.jobs();
    let state = |id: u32| jobs.iter().find(|j| j.job_id == id).map(|j| j.state);
    assert_eq!(state(running), Some(JobState::Completed));
    assert_eq!(state(held), Some(JobState::Cancelled));
    assert_eq!(state(again), Some(JobState::Pending));
    eprintln!(
        "FIGURE | StateSaveLocation full (16 MiB tmpfs) | submission refused with a clear error; \
         running job completed and cancel saved meanwhile; work taken again once space returned; 0 lost"
    );
}

/// `SlurmctldParameters=rl_enable`: a user's burst beyond the bucket is
/// told to back off (others, and root, are served), and the commands wait
/// and retry instead of failing.
#[test]
fn one_users_request_loop_is_rate_limited_without_failing_commands() {
    let t = TestCluster::start(1, |s| {
        s.extra_conf =
            "SlurmctldParameters=rl_enable,rl_bucket_size=5,rl_refill_rate=1,rl_refill_period=5\n"
                .into();
    });
    let key = slurm_common::auth::Key::load(&t.c.spec.dir.join("slurm.key")).unwrap();
    let ask = |uid: u32| {
        let r = grpc_call(&t, RequestBody::Ping, |b| {
            key.sign(uid, uid, "test", slurm_common::auth::now(), b)
        });
        matches!(r, Response::Error(ref e) if e.error == SlurmError::Backoff)
    };
    let backed_off = (0..12).filter(|_| ask(TEST_UID)).count();
    assert!(backed_off >= 5, "{backed_off} of 12 backed off");
    // Another user and root are not held up by it.
    assert!(!ask(4321));
    assert!((0..20).all(|_| !ask(0)), "root is never limited");
    // The command waits for a token rather than fail.
    let out = t.run_as_user("squeue", &["-h"]);
    assert!(out.status.success(), "{}", stderr(&out));
}

/// Large requests sent slowly cannot make the controller hold more than
/// its budget (16 of the largest request) however many connections carry
/// them: past it, callers are told to back off; the budget comes back when
/// they go, and small requests never wait for it.
#[test]
fn large_requests_together_stay_within_the_memory_budget() {
    // 1 MiB requests at most: a 16 MiB budget.
    let t = TestCluster::start(1, |s| {
        s.extra_conf = "CommunicationParameters=max_message_size=1048576\n".into()
    });
    let addr = format!("127.0.0.1:{}", t.c.spec.ctld_port);
    let (tls, _) = t.command_tls();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .unwrap();
    let submit = slurm_proto::grpc::commands::command_method::SUBMIT_JOB;
    // Announce a 1,000,000-byte message, send 960,000 bytes and stop, each
    // on a connection of its own.
    let calls = rt.block_on(async {
        let mut calls = Vec::new();
        for _ in 0..24 {
            let mut send = raw_grpc(&addr, &tls.client).await;
            let mut head = vec![0u8];
            head.extend_from_slice(&1_000_000u32.to_be_bytes());
            head.resize(5 + 960_000, b'x');
            let call = raw_grpc_call(&mut send, submit, head.into()).await;
            calls.push((send, call));
        }
        calls
    });
    // Meanwhile a small request is answered at once.
    let out = t.run("squeue", &["-h"]);
    assert!(out.status.success(), "{}", stderr(&out));
    std::thread::sleep(Duration::from_millis(500));
    // Each call is either still being read (within the budget: no answer
    // yet) or was refused (told to back off).
    let (mut open, mut refused) = (0, 0);
    let mut keep = Vec::new();
    for (send, (resp, body)) in calls {
        let answer = rt.block_on(async {
            tokio::time::timeout(Duration::from_millis(100), grpc_status(resp)).await
        });
        match answer {
            Err(_) => open += 1,
            Ok(Some((code, msg))) => {
                assert_eq!(code, tonic::Code::ResourceExhausted as i32, "{msg}");
                refused += 1;
            }
            Ok(None) => refused += 1,
        }
        keep.push((send, body));
    }
    // ~0.9 MiB held each: at most 18 fit in 16 MiB.
    assert!(open <= 18, "{open} requests of ~0.9 MiB held at once");
    assert!(open >= 12 && refused >= 6, "{open} held, {refused} refused");
    drop(keep);
    drop(rt);
    // Their bytes are given back: a large request goes through again.
    let big = format!("#!/bin/sh\n#{}\ntrue\n", "x".repeat(600_000));
    let script = write_script(&t, "big.sh", &big);
    let out = t.run("sbatch", &["-H", &script]);
    assert!(out.status.success(), "{}", stderr(&out));
    eprintln!(
        "FIGURE | 24 requests of ~1 MB sent and held, max_message_size=1 MiB | {open} held, {refused} refused (budget 16 MiB); a small request answered meanwhile"
    );
}

/// What a connection can cost the controller: a length prefix over the
/// limit is refused before anything is allocated, prefixes under it with
/// no bytes behind them cost no memory, and hundreds of idle connections
/// neither hold squeue off nor stay past MessageTimeout.
#[test]
fn oversized_frames_and_idle_connections_cost_the_controller_nothing() {
    use std::io::Read;
    // Room for a thousand sockets here and in the controller (inherited).
    let lim = libc::rlimit {
        rlim_cur: 8192,
        rlim_max: 8192,
    };
    // SAFETY: setrlimit with a valid struct; raising as root.
    assert_eq!(unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &lim) }, 0);
    let t = TestCluster::start(1, |s| s.extra_conf = "MessageTimeout=3\n".into());
    let pid = t.c.ctld.as_ref().unwrap().id();
    // Address space, not resident memory: a zeroed buffer is reserved
    // whole at once but its pages are touched only as bytes arrive.
    let rss_kb = || -> u64 {
        std::fs::read_to_string(format!("/proc/{pid}/status"))
            .unwrap()
            .lines()
            .find_map(|l| l.strip_prefix("VmSize:"))
            .and_then(|v| v.split_whitespace().next()?.parse().ok())
            .unwrap()
    };
    let addr = format!("127.0.0.1:{}", t.c.spec.ctld_port);
    let connect = || std::net::TcpStream::connect(&addr).unwrap();
    // gRPC inside TLS (the cluster runs with it), from a peer without the
    // key: the message is read before any credential is looked at.
    let (tls, _) = t.command_tls();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .unwrap();
    let submit = slurm_proto::grpc::commands::command_method::SUBMIT_JOB;
    let announce = |len: u32, then: &[u8]| {
        let mut head = vec![0u8];
        head.extend_from_slice(&len.to_be_bytes());
        head.extend_from_slice(then);
        bytes::Bytes::from(head)
    };
    // 1 GiB announced: refused at once.
    let (code, msg) = rt
        .block_on(async {
            let mut send = raw_grpc(&addr, &tls.client).await;
            let (resp, _body) = raw_grpc_call(&mut send, submit, announce(1 << 30, b"")).await;
            tokio::time::timeout(Duration::from_secs(5), grpc_status(resp)).await
        })
        .expect("no answer within 5 s")
        .expect("no gRPC status");
    // (More than the whole memory budget: refused as its header arrives,
    // before the decoder would reserve it.)
    assert_eq!(code, tonic::Code::OutOfRange as i32, "{msg}");
    assert!(
        msg.contains("larger%20than") || msg.contains("larger than"),
        "{msg}"
    );
    // 40 × 15 MiB announced, a few bytes sent: no 600 MiB allocated.
    let before = rss_kb();
    let held = rt.block_on(async {
        let mut held = Vec::new();
        for _ in 0..40 {
            let mut send = raw_grpc(&addr, &tls.client).await;
            let call = raw_grpc_call(&mut send, submit, announce(15 << 20, b"\x0a\x01x")).await;
            held.push((send, call));
        }
        held
    });
    std::thread::sleep(Duration::from_millis(500));
    // The decoder reserves what a header announces (address space, not
    // resident memory), but only within the memory budget (16 of the
    // largest request: 256 MiB here): past it, the rest are refused.
    let grew_mb = rss_kb().saturating_sub(before) / 1024;
    assert!(grew_mb <= 256 + 32, "the controller grew by {grew_mb} MiB");
    let refused = rt.block_on(async {
        let mut refused = 0;
        for (_send, (resp, _body)) in held {
            let answer = tokio::time::timeout(Duration::from_millis(100), grpc_status(resp)).await;
            if let Ok(Some((code, _))) = answer {
                assert_eq!(code, tonic::Code::ResourceExhausted as i32);
                refused += 1;
            }
        }
        refused
    });
    assert!(refused >= 40 - 17, "only {refused} of 40 refused");
    drop(rt);
    // 1000 idle connections (more than the old connection limit).
    let idle: Vec<std::net::TcpStream> = (0..1000).map(|_| connect()).collect();
    std::thread::sleep(Duration::from_millis(200));
    let t0 = Instant::now();
    let out = t.run("squeue", &[]);
    let took = t0.elapsed();
    assert!(out.status.success(), "{}", stderr(&out));
    // (Before, 512 idle connections held squeue off for a minute.)
    assert!(
        took < Duration::from_secs(5),
        "squeue took {took:?} beside idle connections"
    );
    // They are closed after MessageTimeout.
    std::thread::sleep(Duration::from_secs(4));
    let mut first = idle.into_iter().next().unwrap();
    first
        .set_read_timeout(Some(Duration::from_secs(2)))
        .unwrap();
    let mut buf = [0u8; 1];
    assert_eq!(
        first.read(&mut buf).unwrap_or(1),
        0,
        "an idle connection was kept"
    );
    eprintln!(
        "FIGURE | 1 GiB prefix; 40 × 15 MiB prefixes; 1000 idle connections | refused at once; controller grew {grew_mb} MiB; squeue answered in {} ms; idle ones closed after MessageTimeout",
        took.as_millis()
    );
}

/// `AuthAltParameters` limits on `scontrol token`, and a token cannot be
/// used to get another one.
#[test]
fn token_creation_limits() {
    let tmp = tempfile::tempdir().unwrap();
    let jwt = tmp.path().join("jwt.key");
    let key: Vec<u8> = (0..32u8).map(|i| b'a' + i % 26).collect();
    std::fs::write(&jwt, &key).unwrap();
    for (params, user_ok) in [
        ("disable_token_creation", false),
        ("max_token_lifespan=600", true),
    ] {
        let t = TestCluster::start(1, |s| {
            s.extra_conf = format!(
                "AuthAltTypes=auth/jwt\nAuthAltParameters=jwt_key={},{params}\n",
                jwt.display()
            );
        });
        let user = |args: &[&str]| {
            t.cmd_as(TEST_UID, TEST_GID, "scontrol")
                .args(args)
                .output()
                .unwrap()
        };
        let o = user(&["token"]);
        assert_eq!(o.status.success(), user_ok, "{params}: {}", stderr(&o));
        assert!(t
            .run("scontrol", &["token", "username=nobody"])
            .status
            .success());
        if user_ok {
            let tok = stdout(&o)
                .trim()
                .strip_prefix("SLURM_JWT=")
                .unwrap()
                .to_string();
            let c = slurm_common::jwt::verify_token(&key, &tok, slurm_common::auth::now()).unwrap();
            assert!(c.exp - c.iat.unwrap() <= 600, "{c:?}");
            let o = user(&["token", "lifespan=3600"]);
            assert!(!o.status.success(), "{params}: longer than the maximum");
            // A request made with a token gets no token.
            let body = RequestBody::GetToken {
                username: None,
                lifespan: None,
            };
            let r = grpc_call(&t, body, |b| slurm_proto::Credential {
                uid: 0,
                gid: 0,
                host: "x".into(),
                issued: 0,
                expires: 0,
                nonce: 0,
                method: b.method.clone(),
                body_hash: b.body_hash.clone(),
                to: b.to.clone(),
                sig: String::new(),
                token: tok.clone(),
            });
            assert!(
                matches!(&r, Response::Error(e) if e.error == SlurmError::AccessDenied),
                "{r:?}"
            );
        }
    }
}

#[test]
fn grpc_connections_that_make_no_authenticated_call_are_dropped() {
    use std::io::{Read, Write};
    let t = TestCluster::start(1, |s| {
        s.tls = false;
        s.extra_conf = "MessageTimeout=2\n".into();
    });
    let addr = format!("{}:{}", t.c.spec.ip, t.c.spec.ctld_port);
    // Peers without the key open HTTP/2 connections (the preface and an
    // empty SETTINGS frame) and send nothing more.
    let idle: Vec<std::net::TcpStream> = (0..20)
        .map(|_| {
            let mut s = std::net::TcpStream::connect(&addr).unwrap();
            s.write_all(b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n\0\0\0\x04\0\0\0\0\0")
                .unwrap();
            s.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
            s
        })
        .collect();
    let t0 = Instant::now();
    for mut s in idle {
        let mut buf = [0u8; 4096];
        loop {
            match s.read(&mut buf) {
                Ok(0) => break,
                Ok(_) => continue,
                Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => break,
                Err(e) => panic!("an idle connection was kept: {e}"),
            }
        }
    }
    // Dropped about MessageTimeout (2 s) after they came.
    assert!(t0.elapsed() < Duration::from_secs(10), "{:?}", t0.elapsed());
    // The node daemon's kept channel makes authenticated calls: it stays,
    // and jobs run as before.
    let job = t.sbatch(&["--wrap", "true"]);
    assert_eq!(t.wait_done(job, 30).state, JobState::Completed);
    std::thread::sleep(Duration::from_secs(3));
    let job = t.sbatch(&["--wrap", "true"]);
    assert_eq!(t.wait_done(job, 30).state, JobState::Completed);
    assert!(t
        .nodes()
        .iter()
        .all(|n| n.base_state != slurm_proto::NodeBaseState::Down));
}

#[test]
fn one_user_cannot_hold_all_of_the_controllers_grpc_connections() {
    use slurm_common::grpc;
    use slurm_proto::grpc::pb;
    let t = TestCluster::start(1, |s| s.tls = false);
    let key = slurm_common::auth::Key::load(&t.c.spec.dir.join("slurm.key")).unwrap();
    let ctld = format!("{}:{}", t.c.spec.ip, t.c.spec.ctld_port);
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let watch = |uid: u32| {
        rt.block_on(async {
            // A channel of its own: a connection of its own.
            let ch = grpc::channel(None, &ctld, "localhost")?;
            let req = pb::WatchRequest {
                jobs: true,
                nodes: false,
                job_ids: vec![],
                config: false,
            };
            let sign = |b: &_| Ok(key.sign(uid, uid, "test", slurm_common::auth::now(), b));
            grpc::watch(&ch, "localhost", req, sign).await
        })
    };
    // A user's watches each hold a connection open, up to the cap.
    let mut held = Vec::new();
    for _ in 0..grpc::MAX_USER_CONNECTIONS {
        held.push(watch(TEST_UID).unwrap());
    }
    let e = watch(TEST_UID).unwrap_err().to_string();
    assert!(e.contains("connections to this server already"), "{e}");
    // Others are not held off: another user, root, and the commands.
    let other = watch(1000).unwrap();
    assert!(t.run("squeue", &[]).status.success());
    drop(other);
    // Once the user lets go, a connection is theirs again.
    drop(held);
    let deadline = Instant::now() + Duration::from_secs(20);
    while watch(TEST_UID).is_err() {
        assert!(Instant::now() < deadline, "the slots never came back");
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// A job ended by the controller has its error file told why, as Slurm's
/// slurmstepd does (`*** JOB 5 ON n1 CANCELLED AT ... ***`), and its
/// steps' sruns too (`*** STEP 5.0 ...`): cancelled or requeued. The notice is written only into the user's own regular file:
/// an error file the user swapped for a symbolic link to a file of root's
/// is left alone (the node daemon runs as root).
#[test]
fn ended_jobs_are_told_why_in_their_own_error_file_only() {
    let t = TestCluster::start(1, |_| {});
    let wait_text = |name: &str, what: &str| -> String {
        let path = t.work.join(name);
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            let text = std::fs::read_to_string(&path).unwrap_or_default();
            if text.contains(what) || Instant::now() > deadline {
                return text;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    };
    let c = t.sbatch_as_user(&["-o", "c.out", "--wrap", "echo started; sleep 60"]);
    t.wait_job(c, 20, "running", |j| j.state == JobState::Running);
    wait_text("c.out", "started");
    let out = t.run_as_user("scancel", &[&c.to_string()]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(t.wait_done(c, 30).state, JobState::Cancelled);
    let text = wait_text("c.out", "***");
    let line = text.lines().nth(1).unwrap_or_default();
    assert!(
        line.starts_with(&format!(
            "slurmstepd: error: *** JOB {c} ON n1 CANCELLED AT 20"
        )) && line.ends_with(" DUE to SIGNAL Terminated ***"),
        "{text}"
    );

    // A step's srun is told too.
    let d = t.sbatch_as_user(&[
        "-o",
        "d.out",
        "--wrap",
        "srun sh -c 'echo started; sleep 60'",
    ]);
    t.wait_job(d, 20, "running", |j| j.state == JobState::Running);
    wait_text("d.out", "started");
    let out = t.run_as_user("scancel", &[&d.to_string()]);
    assert!(out.status.success(), "{}", stderr(&out));
    wait_text("d.out", &format!("*** JOB {d}"));
    let text = wait_text("d.out", &format!("*** STEP {d}.0"));
    assert!(
        text.contains(&format!(
            "slurmstepd: error: *** STEP {d}.0 ON n1 CANCELLED AT "
        )) && text.contains(&format!(
            "slurmstepd: error: *** JOB {d} ON n1 CANCELLED AT "
        )),
        "{text}"
    );

    let r = t.sbatch(&[
        "--open-mode=append",
        "-o",
        "r.out",
        "--wrap",
        "echo run $SLURM_RESTART_COUNT; sleep 60",
    ]);
    t.wait_job(r, 20, "running", |j| j.state == JobState::Running);
    wait_text("r.out", "run");
    let out = t.run("scontrol", &["requeue", &r.to_string()]);
    assert!(out.status.success(), "{}", stderr(&out));
    let text = wait_text("r.out", "REQUEUE");
    assert!(
        text.contains(&format!("*** JOB {r} ON n1 CANCELLED AT "))
            && text.contains(" DUE TO JOB REQUEUE ***\n"),
        "{text}"
    );
    let _ = t.run("scancel", &[&r.to_string()]);

    // The user swaps the error file for a link to root's file.
    let victim = t.work.join("root-owned");
    std::fs::write(&victim, "root's\n").unwrap();
    std::fs::set_permissions(&victim, std::fs::Permissions::from_mode(0o644)).unwrap();
    let s = t.sbatch_as_user(&["-o", "s.out", "--wrap", "echo started; sleep 60"]);
    t.wait_job(s, 20, "running", |j| j.state == JobState::Running);
    wait_text("s.out", "started");
    std::fs::remove_file(t.work.join("s.out")).unwrap();
    std::os::unix::fs::symlink(&victim, t.work.join("s.out")).unwrap();
    let out = t.run_as_user("scancel", &[&s.to_string()]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(t.wait_done(s, 30).state, JobState::Cancelled);
    // Once the node has cleaned the job up, its notice was tried.
    t.wait_job(s, 30, "cleaned up", |j| !j.completing);
    assert_eq!(std::fs::read_to_string(&victim).unwrap(), "root's\n");
    assert_eq!(std::fs::metadata(&victim).unwrap().uid(), 0);
}
