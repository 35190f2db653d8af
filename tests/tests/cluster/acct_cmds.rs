//! sacctmgr against slurmdbd, and AccountingStorageEnforce in the controller:
//! associations, QOS and their limits.

use super::write_script;
use slurm_proto::JobState;
use slurm_tests::*;
use std::time::{Duration, Instant};

fn text(o: &std::process::Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

fn mgr(t: &TestCluster, args: &[&str]) -> String {
    let o = t.run("sacctmgr", args);
    assert!(
        o.status.success(),
        "sacctmgr {args:?} failed:\n{}",
        text(&o)
    );
    String::from_utf8_lossy(&o.stdout).into_owned()
}

#[test]
fn sacctmgr_manages_accounts_users_and_qos_and_limits_hold_jobs() {
    let t = TestCluster::start(1, |s| {
        s.accounting = true;
        s.extra_conf = "AccountingStorageEnforce=associations,limits,qos\n".into();
    });
    // A user without an association is refused, with Slurm's message.
    let script = write_script(&t, "sleep.sh", "#!/bin/sh\nsleep 300\n");
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let o = t
            .cmd_as(TEST_UID, TEST_GID, "sbatch")
            .arg(&script)
            .output()
            .unwrap();
        let s = text(&o);
        if s.contains("Invalid account or account/partition combination specified") {
            assert!(!o.status.success());
            break;
        }
        assert!(Instant::now() < deadline, "not refused: {s}");
        std::thread::sleep(Duration::from_millis(300));
    }

    let out = mgr(
        &t,
        &[
            "-i",
            "add",
            "account",
            "physics",
            "Description=Physics dept",
            "Fairshare=5",
        ],
    );
    assert!(
        out.contains("Adding Account(s)") && out.contains("physics"),
        "{out}"
    );
    let out = mgr(&t, &["-i", "add", "user", "nobody", "Account=physics"]);
    assert!(out.contains("nobody"), "{out}");
    mgr(
        &t,
        &["-i", "modify", "qos", "normal", "set", "MaxJobsPerUser=2"],
    );
    mgr(
        &t,
        &[
            "-i",
            "modify",
            "account",
            "physics",
            "set",
            "GrpJobs=10",
            "MaxWall=2:00:00",
        ],
    );
    // Bad input changes nothing and says what is wrong.
    let o = t.run("sacctmgr", &["-i", "add", "user", "nobody", "Bogus=1"]);
    assert!(
        !o.status.success() && text(&o).to_lowercase().contains("unknown option: bogus"),
        "{}",
        text(&o)
    );
    let o = t.run(
        "sacctmgr",
        &["-i", "add", "user", "alice", "Account=nosuch"],
    );
    assert!(!o.status.success(), "{}", text(&o));

    let out = mgr(
        &t,
        &[
            "-P",
            "-n",
            "show",
            "assoc",
            "format=Account,User,Share,GrpJobs,MaxWall",
        ],
    );
    assert!(out.contains("physics||5|10|02:00:00\n"), "{out}");
    assert!(out.contains("physics|nobody|1||\n"), "{out}");
    let out = mgr(&t, &["-P", "-n", "show", "qos", "format=Name,MaxJobsPU"]);
    assert!(out.contains("normal|2\n"), "{out}");
    let out = mgr(&t, &["show", "account", "physics"]);
    assert!(
        out.starts_with("   Account                Descr                  Org \n"),
        "{out}"
    );
    assert!(
        out.contains("   physics         Physics dept              physics \n"),
        "{out}"
    );
    let out = mgr(
        &t,
        &[
            "-P",
            "-n",
            "show",
            "user",
            "nobody",
            "withassoc",
            "format=User,DefaultAccount,Account",
        ],
    );
    assert_eq!(out, "nobody|physics|physics\n");
    // -s: the same as WithAssoc.
    let out = mgr(
        &t,
        &[
            "-s",
            "-P",
            "-n",
            "show",
            "user",
            "nobody",
            "format=User,DefaultAccount,Account",
        ],
    );
    assert_eq!(out, "nobody|physics|physics\n");
    mgr(&t, &["-i", "add", "qos", "high", "Priority=100"]);
    let out = mgr(&t, &["-i", "delete", "qos", "high"]);
    assert!(out.contains("high"), "{out}");
    let out = mgr(&t, &["-P", "-n", "show", "qos", "format=Name"]);
    assert_eq!(out, "normal\n");

    // The last change; once the controller holds a job by it, it has
    // everything before it too (it fetches all of slurmdbd's tables at once).
    mgr(
        &t,
        &[
            "-i",
            "modify",
            "account",
            "physics",
            "set",
            "MaxWall=1:00:00",
        ],
    );
    until_controller_knows(&t, &["-t", "1:30:00", "--wrap", "true"], |j| {
        j.reason.to_string() == "AssocMaxWallDurationPerJobLimit"
    });

    // The third job waits for the QOS limit, then runs when one ends.
    let ids: Vec<u32> = (0..3).map(|_| t.sbatch_as_user(&[&script])).collect();
    t.wait_job(ids[0], 30, "running", |j| j.state == JobState::Running);
    t.wait_job(ids[1], 30, "running", |j| j.state == JobState::Running);
    let j = t.wait_job(ids[2], 30, "held by QOS", |j| {
        j.reason.to_string() == "QOSMaxJobsPerUserLimit"
    });
    assert_eq!(j.state, JobState::Pending);
    assert_eq!(j.account, "physics");
    let sq = t.run("squeue", &["-j", &ids[2].to_string(), "-h", "-o", "%r"]);
    assert_eq!(
        String::from_utf8_lossy(&sq.stdout).trim(),
        "QOSMaxJobsPerUserLimit"
    );
    // A job over the account's MaxWall is held with the association's reason.
    let long = t.sbatch_as_user(&["-t", "2:00:00", &script]);
    t.wait_job(long, 30, "held by MaxWall", |j| {
        j.reason.to_string() == "AssocMaxWallDurationPerJobLimit"
    });
    t.run("scancel", &[&ids[0].to_string(), &long.to_string()]);
    t.wait_job(ids[2], 30, "running", |j| j.state == JobState::Running);
    // Raising the limit releases nothing more but is seen at once.
    mgr(
        &t,
        &["-i", "modify", "qos", "normal", "set", "MaxJobsPerUser=-1"],
    );
    let out = mgr(&t, &["-P", "-n", "show", "qos", "format=Name,MaxJobsPU"]);
    assert_eq!(out, "normal|\n");
    t.run("scancel", &[&ids[1].to_string(), &ids[2].to_string()]);
    let ids_s = format!("{},{},{}", ids[0], ids[1], ids[2]);
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let o = t.run(
            "sacct",
            &[
                "-P",
                "-n",
                "-X",
                "-j",
                &ids_s,
                "--format=JobID,User,Account,State",
            ],
        );
        let s = String::from_utf8_lossy(&o.stdout).into_owned();
        if s.lines()
            .filter(|l| l.contains("|nobody|physics|CANCELLED by 0"))
            .count()
            == 3
        {
            break;
        }
        assert!(Instant::now() < deadline, "sacct: {s}");
        std::thread::sleep(Duration::from_millis(300));
    }
    // -x: the jobs of an association, by its id (an account's own has none).
    let ids_of = |acct: &str, user: &str| {
        mgr(
            &t,
            &[
                "-P",
                "-n",
                "show",
                "assoc",
                &format!("account={acct}"),
                &format!("user={user}"),
                "format=ID,User",
            ],
        )
    };
    let user_assoc = ids_of("physics", "nobody");
    let user_assoc = user_assoc
        .lines()
        .next()
        .unwrap()
        .split('|')
        .next()
        .unwrap()
        .to_string();
    let acct_assoc = ids_of("physics", "")
        .lines()
        .find(|l| l.ends_with('|'))
        .map(|l| l.trim_end_matches('|').to_string())
        .unwrap();
    let by_assoc = |id: &str| {
        let o = t.run(
            "sacct",
            &[
                "-a", "-P", "-n", "-X", "-j", &ids_s, "-x", id, "-o", "JobID",
            ],
        );
        assert!(o.status.success(), "{}", text(&o));
        String::from_utf8_lossy(&o.stdout).lines().count()
    };
    assert_eq!(by_assoc(&user_assoc), 3);
    assert_eq!(by_assoc(&acct_assoc), 0);
    let o = t.run("sacct", &["-x", "many"]);
    assert!(!o.status.success() && text(&o).contains("Invalid association id 'many'"));

    // Usage: a 2-second job, rolled up now, shows in sreport.
    let two = write_script(&t, "two.sh", "#!/bin/sh\nsleep 2\n");
    let id = t.sbatch_as_user(&[&two]);
    t.wait_done(id, 60);
    let key = slurm_common::auth::Key::load(&t.c.spec.dir.join("slurm.key")).unwrap();
    let now = slurm_common::auth::now();
    let addr = format!("{}:{}", t.c.spec.ip, t.c.spec.dbd_port);
    let deadline = Instant::now() + Duration::from_secs(30);
    let (start, end) = ("start=now-7200", "end=now+7200");
    loop {
        let req = dbd_request(
            &key,
            0,
            slurm_proto::acct::AcctRequest::Rollup {
                now: Some(now + 3600),
            },
            slurm_common::auth::now(),
        );
        slurm_common::dbd::call_sync(&addr, &t.c.spec.ip, &req, Duration::from_secs(10)).unwrap();
        let o = t.run(
            "sreport",
            &["-P", "-n", "-t", "seconds", "user", "topusage", start, end],
        );
        let s = text(&o);
        let used: u64 = s
            .lines()
            .find(|l| l.contains("|nobody|"))
            .and_then(|l| l.split('|').nth(4))
            .and_then(|v| v.parse().ok())
            .unwrap_or(0);
        if used >= 2 {
            assert!(s.contains("|physics|"), "{s}");
            let o = t.run(
                "sreport",
                &[
                    "-P",
                    "-n",
                    "-t",
                    "seconds",
                    "cluster",
                    "AccountUtilizationByUser",
                    start,
                    end,
                ],
            );
            let s = text(&o);
            assert!(s.lines().any(|l| l.starts_with("local|root|||")), "{s}");
            assert!(
                s.lines().any(|l| l.starts_with("local|physics|nobody|")),
                "{s}"
            );
            let o = t.run(
                "sreport",
                &["-P", "-n", "cluster", "utilization", start, end],
            );
            assert!(text(&o).starts_with("local|"), "{}", text(&o));
            // The same reports in interactive mode, options changed between.
            let mut child = t
                .cmd("sreport")
                .stdin(std::process::Stdio::piped())
                .stdout(std::process::Stdio::piped())
                .stderr(std::process::Stdio::piped())
                .spawn()
                .unwrap();
            use std::io::Write;
            write!(
                child.stdin.take().unwrap(),
                "parsable2\ntime seconds\ncluster UserUtilizationByAccount {start} {end}\n\
                 nonparsable\ncluster UserUtilizationByAccount {start} {end}\n!!\n\
                 cluster nosuchreport\nquit\nuser topusage\n"
            )
            .unwrap();
            let o = child.wait_with_output().unwrap();
            let s = text(&o);
            assert_eq!(o.status.code(), Some(1), "a bad report makes it 1: {s}");
            let parsable = s
                .lines()
                .find(|l| l.starts_with("local|nobody|"))
                .unwrap_or_else(|| panic!("{s}"));
            assert!(parsable.contains("|physics|"), "{s}");
            assert_eq!(
                s.matches("Cluster/User/Account Utilization").count(),
                2,
                "{s}"
            );
            assert!(s.contains("Not valid report cluster nosuchreport"), "{s}");
            assert!(!s.contains("Top 10 Users"), "quit ends it: {s}");
            // Job sizes: the 1-CPU job's seconds in the first column.
            let sizes = |extra: &str| {
                let o = t.run(
                    "sreport",
                    &[
                        "-P",
                        "-n",
                        "-t",
                        "seconds",
                        "job",
                        "SizesByAccount",
                        extra,
                        start,
                        end,
                    ],
                );
                assert!(o.status.success(), "{}", text(&o));
                String::from_utf8_lossy(&o.stdout).into_owned()
            };
            let root = sizes("accounts=root");
            let f: Vec<&str> = root.trim().split('|').collect();
            assert_eq!((f[0], f[1], f[3]), ("local", "root", "0"), "{root}");
            assert!(f[2].parse::<u64>().unwrap() >= 2, "{root}");
            assert!(sizes("FlatView").starts_with("local|physics|"));
            // The same job by QOS and by (empty) wckey, from its record.
            let report = |name: &str| {
                let o = t.run(
                    "sreport",
                    &["-P", "-n", "-t", "seconds", "cluster", name, start, end],
                );
                assert!(o.status.success(), "{}", text(&o));
                String::from_utf8_lossy(&o.stdout).into_owned()
            };
            let qos = report("AccountUtilizationByQOS");
            assert!(
                qos.lines().any(|l| l.starts_with("local|physics|normal|")),
                "{qos}"
            );
            let w = report("WCKeyUtilizationByUser");
            assert!(w.lines().any(|l| l.starts_with("local||nobody|")), "{w}");
            let w = report("UserUtilizationByWckey");
            assert!(w.lines().any(|l| l.starts_with("local|nobody|")), "{w}");
            break;
        }
        assert!(
            Instant::now() < deadline,
            "sreport never showed nobody's usage: {s}"
        );
        std::thread::sleep(Duration::from_millis(500));
    }

    // A QOS the user's association does not list: refused at submission,
    // and a pending job cannot be moved into it either.
    mgr(&t, &["-i", "add", "qos", "gold", "Priority=100"]);
    mgr(&t, &["-i", "modify", "user", "nobody", "set", "QOS=normal"]);
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let o = t.run_as_user("sbatch", &["-v", "--qos=gold", "-H", "--wrap", "true"]);
        assert!(!o.status.success(), "{}", text(&o));
        // Once the controller knows gold exists, the refusal is the
        // association's.
        if text(&o).contains("QOS 'gold' is not allowed for user 'nobody'") {
            break;
        }
        assert!(Instant::now() < deadline, "{}", text(&o));
        std::thread::sleep(Duration::from_millis(300));
    }
    let held = t.sbatch_as_user(&["-H", "--wrap", "true"]);
    let o = t.run_as_user(
        "scontrol",
        &["update", &format!("JobId={held}"), "QOS=gold"],
    );
    assert!(!o.status.success(), "moved into a QOS it may not use");
    assert_ne!(t.job(held).unwrap().qos, "gold");
}

/// Submit `args` as the test user until the job shows that the controller
/// has slurmdbd's latest changes (`known`); the probe jobs are cancelled.
fn until_controller_knows(
    t: &TestCluster,
    args: &[&str],
    known: impl Fn(&slurm_proto::JobRecord) -> bool,
) {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let o = t
            .cmd_as(TEST_UID, TEST_GID, "sbatch")
            .arg("--parsable")
            .args(args)
            .output()
            .unwrap();
        let id: Option<u32> = String::from_utf8_lossy(&o.stdout).trim().parse().ok();
        if let Some(id) = id {
            let deadline_job = Instant::now() + Duration::from_secs(5);
            let mut ok = false;
            while Instant::now() < deadline_job {
                if let Some(j) = t.job(id) {
                    if known(&j) {
                        ok = true;
                        break;
                    }
                    if j.state != JobState::Pending || j.reason != slurm_proto::JobReason::None {
                        break;
                    }
                }
                std::thread::sleep(Duration::from_millis(50));
            }
            t.run("scancel", &[&id.to_string()]);
            if ok {
                return;
            }
        }
        assert!(
            Instant::now() < deadline,
            "the controller never saw slurmdbd's changes"
        );
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// Roll slurmdbd's usage up to the end of the current hour.
fn rollup_now(t: &TestCluster) {
    let key = slurm_common::auth::Key::load(&t.c.spec.dir.join("slurm.key")).unwrap();
    let now = slurm_common::auth::now();
    let req = dbd_request(
        &key,
        0,
        slurm_proto::acct::AcctRequest::Rollup {
            now: Some(now + 3600),
        },
        now,
    );
    let addr = format!("{}:{}", t.c.spec.ip, t.c.spec.dbd_port);
    slurm_common::dbd::call_sync(&addr, &t.c.spec.ip, &req, Duration::from_secs(10)).unwrap();
}

#[test]
fn fair_share_tree_and_usage_come_from_slurmdbd() {
    let mut t = TestCluster::start(1, |s| {
        s.accounting = true;
        s.min_job_age = 2;
        s.extra_conf = "PriorityType=priority/multifactor\nPriorityWeightFairshare=10000\n\
PriorityCalcPeriod=1\nPriorityDecayHalfLife=7-0\n"
            .into();
    });
    mgr(&t, &["-i", "add", "account", "physics"]);
    mgr(
        &t,
        &[
            "-i",
            "add",
            "user",
            "nobody",
            "Account=physics",
            "Fairshare=3",
        ],
    );
    // An association for one partition only (`sshare -m` names it).
    mgr(
        &t,
        &[
            "-i",
            "add",
            "user",
            "daemon",
            "Account=physics",
            "Partition=debug",
        ],
    );
    let two = write_script(&t, "two.sh", "#!/bin/sh\nsleep 2\n");
    until_controller_knows(&t, &["-H", "--wrap", "true"], |j| j.account == "physics");
    // Accounting gives the job the user's default account.
    let id = t.sbatch_as_user(&[&two]);
    let j = t.wait_done(id, 60);
    assert_eq!(j.account, "physics");
    // Purged from the controller, rolled up in slurmdbd, controller restarted:
    // only slurmdbd still knows the usage.
    let deadline = Instant::now() + Duration::from_secs(30);
    while t.job(id).is_some() {
        assert!(Instant::now() < deadline, "job {id} never purged");
        std::thread::sleep(Duration::from_millis(200));
    }
    // Its end record must be in before the rollup counts it.
    loop {
        let o = t.run(
            "sacct",
            &["-P", "-n", "-X", "-j", &id.to_string(), "--format=State"],
        );
        if String::from_utf8_lossy(&o.stdout).trim() == "COMPLETED" {
            break;
        }
        assert!(Instant::now() < deadline, "job {id} not recorded");
        std::thread::sleep(Duration::from_millis(200));
    }
    rollup_now(&t);
    t.c.kill_ctld(libc::SIGKILL);
    t.c.start_ctld().expect("controller restarts");
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let out = String::from_utf8_lossy(&t.run("sshare", &[]).stdout).into_owned();
        let row: Vec<String> = out
            .lines()
            .find(|l| l.contains(" nobody "))
            .map(|l| l.split_whitespace().map(str::to_string).collect())
            .unwrap_or_default();
        // Account User RawShares NormShares RawUsage ...
        if row.len() >= 5 && row[2] == "3" && row[4].parse::<f64>().unwrap_or(0.0) >= 2.0 {
            assert_eq!(row[0], "physics", "{out}");
            break;
        }
        assert!(
            Instant::now() < deadline,
            "sshare never showed nobody's recorded usage:\n{out}"
        );
        std::thread::sleep(Duration::from_millis(300));
    }
    // -m: each user association's partition after User (none for nobody's).
    let out = String::from_utf8_lossy(&t.run("sshare", &["-m", "-P", "-n"]).stdout).into_owned();
    let row = |user: &str| {
        out.lines()
            .map(|l| l.split('|').collect::<Vec<_>>())
            .find(|c| c.get(1) == Some(&user))
            .unwrap_or_else(|| panic!("no row for {user}:\n{out}"))
            .iter()
            .map(|c| c.trim().to_string())
            .collect::<Vec<_>>()
    };
    assert_eq!(row("daemon")[..3], ["physics", "daemon", "debug"], "{out}");
    assert_eq!(row("nobody")[..3], ["physics", "nobody", ""], "{out}");
    // -o ID,GrpTRESMins: the association's id and its own limit, once
    // slurmdbd has told the controller (memory in MB-minutes).
    mgr(
        &t,
        &[
            "-i",
            "modify",
            "user",
            "nobody",
            "set",
            "GrpTRESMins=cpu=600,mem=2G",
        ],
    );
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let out = String::from_utf8_lossy(
            &t.run("sshare", &["-P", "-n", "-o", "User,ID,GrpTRESMins"])
                .stdout,
        )
        .into_owned();
        let nobody: Vec<String> = out
            .lines()
            .find(|l| l.starts_with("nobody|"))
            .map(|l| l.split('|').map(str::to_string).collect())
            .unwrap_or_default();
        if nobody.get(2).map(String::as_str) == Some("cpu=600,mem=2048") {
            assert!(nobody[1].parse::<u64>().is_ok_and(|id| id > 1), "{out}");
            break;
        }
        assert!(
            Instant::now() < deadline,
            "sshare never showed nobody's GrpTRESMins:\n{out}"
        );
        std::thread::sleep(Duration::from_millis(300));
    }
}

/// Misuse: under `PrivateData=usage` an ordinary user's sshare shows only
/// their own rows, none of another user's or an account's (whose running
/// jobs' TRES and limits they would carry); root sees them all.
#[test]
fn sshare_under_private_usage_shows_a_user_only_their_own_rows() {
    let t = TestCluster::start(1, |s| {
        s.accounting = true;
        s.extra_conf = "PriorityType=priority/multifactor\nPrivateData=usage\n".into();
    });
    mgr(&t, &["-i", "add", "account", "physics"]);
    mgr(
        &t,
        &[
            "-i",
            "add",
            "user",
            "nobody",
            "Account=physics",
            "GrpTRESMins=cpu=60",
        ],
    );
    mgr(
        &t,
        &[
            "-i",
            "modify",
            "account",
            "physics",
            "set",
            "GrpTRESMins=cpu=90",
        ],
    );
    // (The fair-share tree takes a user in once they have a job.)
    until_controller_knows(&t, &["-H", "-A", "physics", "--wrap", "true"], |j| {
        j.account == "physics"
    });
    let fields = ["-P", "-n", "-o", "Account,User,ID,GrpTRESMins"];
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let out = String::from_utf8_lossy(&t.run("sshare", &fields).stdout).into_owned();
        if out.contains("|nobody|") && out.contains("cpu=60") && out.contains("cpu=90") {
            break;
        }
        assert!(Instant::now() < deadline, "root never saw the rows:\n{out}");
        std::thread::sleep(Duration::from_millis(300));
    }
    let o = t
        .cmd_as(TEST_UID, TEST_GID, "sshare")
        .args(fields)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", text(&o));
    let out = String::from_utf8_lossy(&o.stdout).into_owned();
    let rows: Vec<&str> = out.lines().collect();
    assert!(!rows.is_empty(), "{out}");
    for r in rows {
        let c: Vec<&str> = r.split('|').collect();
        assert_eq!(c.get(1).copied(), Some("nobody"), "{out}");
    }
    // Their own limit; not their account's.
    assert!(out.contains("cpu=60") && !out.contains("cpu=90"), "{out}");
}

/// `sacctmgr dump` writes Slurm's flat file; `sacctmgr load` of it makes
/// the same tree on another cluster, adds and modifies only what differs,
/// and refuses what is wrong (or who may not) without changing anything.
#[test]
fn sacctmgr_dump_and_load_carry_a_cluster_tree_over() {
    let t = TestCluster::start(1, |s| s.accounting = true);
    let out = mgr(&t, &["ping"]);
    assert!(
        out.starts_with("slurmdbd(primary) at ") && out.ends_with(" is UP\n"),
        "{out}"
    );
    assert!(mgr(&t, &["version"]).starts_with("slurm "));
    mgr(
        &t,
        &["-i", "add", "qos", "high", "Priority=10", "GraceTime=120"],
    );
    mgr(
        &t,
        &[
            "-i",
            "modify",
            "qos",
            "high",
            "set",
            "Preempt=normal",
            "MaxJobsPU=4",
        ],
    );
    mgr(
        &t,
        &[
            "-i",
            "add",
            "account",
            "physics",
            "Description=Physics dept",
            "Organization=Science",
            "Fairshare=5",
            "MaxJobs=3",
            "GrpTRES=cpu=64",
        ],
    );
    mgr(&t, &["-i", "add", "account", "theory", "Parent=physics"]);
    mgr(
        &t,
        &[
            "-i",
            "add",
            "user",
            "nobody",
            "Account=theory",
            "MaxWall=1:00:00",
            "QOS=normal,high",
        ],
    );
    mgr(&t, &["-i", "add", "user", "nobody", "Account=physics"]);
    mgr(
        &t,
        &[
            "-i",
            "modify",
            "user",
            "nobody",
            "set",
            "DefaultAccount=physics",
        ],
    );

    let file = t.work.join("local.cfg");
    let f = file.to_str().unwrap();
    mgr(&t, &["dump", "local", &format!("file={f}")]);
    let dumped = std::fs::read_to_string(&file).unwrap();
    let body: Vec<&str> = dumped.lines().filter(|l| !l.starts_with('#')).collect();
    for want in [
        "QOS - 'high':Description='high':GraceTime=120:MaxJobsPU=4:Preempt='normal':Priority=10",
        "Cluster - 'local':Fairshare=1:QOS='normal'",
        "Parent - 'root'",
        "Account - 'physics':Description='Physics dept':Organization='Science':Fairshare=5:GrpTRES=cpu=64:MaxJobs=3:QOS='normal'",
        "Parent - 'physics'",
        "User - 'nobody':DefaultAccount='physics':Fairshare=1:QOS='normal'",
        "Account - 'theory':Description='theory':Organization='Science':Fairshare=1:QOS='normal'",
        "Parent - 'theory'",
        "User - 'nobody':DefaultAccount='physics':Fairshare=1:MaxWallDurationPerJob=60:QOS='high,normal'",
    ] {
        assert!(body.contains(&want), "no {want:?} in:\n{dumped}");
    }
    // Users before sub-accounts, each parent's block after its own line.
    let at = |l: &str| body.iter().position(|x| x.starts_with(l)).unwrap();
    assert!(at("Parent - 'physics'") < at("User - 'nobody'"));
    assert!(at("User - 'nobody'") < at("Account - 'theory'"));
    assert!(at("Account - 'theory'") < at("Parent - 'theory'"));

    // Interactive mode: one command per line, `!!` repeats, exit ends.
    let mut child = t
        .cmd("sacctmgr")
        .args(["-P", "-n"])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    {
        use std::io::Write;
        write!(
            child.stdin.take().unwrap(),
            "show qos format=Name\n!!\nbogus\nexit\nshow user format=User\n"
        )
        .unwrap();
    }
    let o = child.wait_with_output().unwrap();
    let out = String::from_utf8_lossy(&o.stdout);
    assert_eq!(
        o.status.code(),
        Some(1),
        "a bad command makes it 1: {}",
        text(&o)
    );
    assert_eq!(
        out.lines().filter(|l| *l == "high").count(),
        2,
        "{}",
        text(&o)
    );
    assert!(!out.contains("root"), "exit ends it: {out}");
    assert!(text(&o).contains("Unknown command: bogus"), "{}", text(&o));

    // SLURM_JSON / SLURM_YAML as --json / --yaml; the command line wins.
    let o = t
        .cmd("sacctmgr")
        .args(["show", "qos"])
        .env("SLURM_JSON", "")
        .output()
        .unwrap();
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).expect("JSON");
    assert!(v["qos"].as_array().is_some_and(|q| q.len() == 2), "{v}");
    let o = t.cmd("sinfo").env("SLURM_YAML", "").output().unwrap();
    let y = String::from_utf8_lossy(&o.stdout);
    assert!(!y.starts_with('{') && y.contains("nodes:"), "{y}");
    let o = t
        .cmd("sinfo")
        .arg("--json")
        .env("SLURM_YAML", "")
        .output()
        .unwrap();
    assert!(String::from_utf8_lossy(&o.stdout).starts_with('{'));
    let o = t
        .cmd("squeue")
        .env("SLURM_JSON", "v0.0.1")
        .output()
        .unwrap();
    assert!(
        !o.status.success() && text(&o).contains("SLURM_JSON: unknown data_parser"),
        "{}",
        text(&o)
    );

    // slurmdbd's own tables: TRES and what it has served.
    assert_eq!(
        mgr(&t, &["-P", "-n", "show", "tres", "type=cpu,node"]),
        "cpu||1\nnode||4\n"
    );
    let stats = mgr(&t, &["show", "stats"]);
    assert!(
        stats.contains("Remote Procedure Call statistics by message type\n")
            && stats.contains("\tDBD_GET_QOS              ( 1448) count:"),
        "{stats}"
    );
    // slurm.conf's accounting settings, then slurmdbd.conf's (never the
    // storage password); any user may look, as in Slurm.
    let o = t.run_as_user("sacctmgr", &["show", "configuration"]);
    let cfg = text(&o);
    assert!(o.status.success(), "{cfg}");
    assert!(
        cfg.starts_with("Configuration data as of ")
            && cfg.contains("\nAccountingStorageType  = accounting_storage/slurmdbd\n")
            && cfg.contains("\nSlurmDBD configuration:\n")
            && cfg.contains("\nStorageType            = accounting_storage/sqlite\n")
            && !cfg.contains("\nStoragePass"),
        "{cfg}"
    );
    // Only super users see what slurmdbd served, and to whom.
    let o = t.run_as_user("sacctmgr", &["show", "stats"]);
    assert!(
        !o.status.success() && text(&o).contains("may not see slurmdbd's statistics"),
        "{}",
        text(&o)
    );
    // ... and only they may clear them (`clear stats`, Slurm's only
    // thing to clear): after, the counts start again.
    let o = t.run_as_user("sacctmgr", &["clear", "stats"]);
    assert!(
        !o.status.success() && text(&o).contains("may not clear slurmdbd's statistics"),
        "{}",
        text(&o)
    );
    assert!(mgr(&t, &["show", "stats"]).contains("\tDBD_GET_QOS "));
    let o = t.run("sacctmgr", &["clear", "st"]);
    assert!(o.status.success(), "{}", text(&o));
    let stats = mgr(&t, &["show", "stats"]);
    assert!(
        !stats.contains("\tDBD_GET_QOS ")
            && stats.contains("\tDBD_CLEAR_STATS          ( 1491) count:1 "),
        "{stats}"
    );
    let o = t.run("sacctmgr", &["clear", "users"]);
    assert_eq!(o.status.code(), Some(1));
    assert!(
        text(&o).contains("No valid entity in list command\nInput line must include \"Stats\""),
        "{}",
        text(&o)
    );

    // Loaded into the same cluster: nothing to do.
    let out = mgr(&t, &["-i", "load", f]);
    assert_eq!(out, " Nothing new added.\n");

    // Into a new cluster: the same associations there.
    let out = mgr(&t, &["-i", "load", &format!("file={f}"), "cluster=copy"]);
    assert!(
        out.contains("Adding copy") && out.contains("Adding theory (parent physics)"),
        "{out}"
    );
    let tree = |cluster: &str| {
        let out = mgr(
            &t,
            &[
                "-P",
                "-n",
                "show",
                "assoc",
                &format!("cluster={cluster}"),
                "format=Account,User,Partition,Share,GrpTRES,MaxJobs,MaxWall,QOS,ParentName",
            ],
        );
        let mut rows: Vec<String> = out.lines().map(str::to_string).collect();
        rows.sort();
        rows
    };
    assert_eq!(tree("copy"), tree("local"));
    let copy = t.work.join("copy.cfg");
    mgr(
        &t,
        &["dump", "cluster=copy", &format!("file={}", copy.display())],
    );
    assert_eq!(
        std::fs::read_to_string(&copy).unwrap(),
        dumped.replace("Cluster - 'local'", "Cluster - 'copy'")
    );

    // An edited file: only the difference is sent.
    let edited = dumped.replace("Fairshare=5:", "Fairshare=7:").replace(
        "Parent - 'physics'\n",
        "Parent - 'physics'\nAccount - 'chem':Description='Chemistry'\n",
    );
    std::fs::write(
        &copy,
        edited.replace("Cluster - 'local'", "Cluster - 'copy'"),
    )
    .unwrap();
    let out = mgr(&t, &["-i", "load", copy.to_str().unwrap()]);
    assert!(
        out.contains("Modifying physics (parent root)")
            && out.contains("Adding chem (parent physics)"),
        "{out}"
    );
    assert!(!out.contains("theory"), "{out}");
    let rows = mgr(
        &t,
        &[
            "-P",
            "-n",
            "show",
            "assoc",
            "cluster=copy",
            "account=physics,chem",
            "format=Account,Share,ParentName",
        ],
    );
    assert!(
        rows.contains("physics|7|root\n") && rows.contains("chem|1|physics\n"),
        "{rows}"
    );

    // A bad line: refused with its number, nothing changed.
    std::fs::write(
        &copy,
        "Cluster - 'copy'\nParent - 'root'\nAccount - 'bio'\nAccount - 'x':MaxJobs=lots\n",
    )
    .unwrap();
    let o = t.run("sacctmgr", &["-i", "load", copy.to_str().unwrap()]);
    assert!(
        !o.status.success() && text(&o).contains("Line 4: Invalid value 'lots'"),
        "{}",
        text(&o)
    );
    let accts = mgr(&t, &["-P", "-n", "show", "account", "format=Account"]);
    assert!(!accts.contains("bio"), "{accts}");

    // An ordinary user may neither dump nor load.
    let o = t.run_as_user(
        "sacctmgr",
        &[
            "dump",
            "local",
            &format!("file={}/mine.cfg", t.work.display()),
        ],
    );
    assert!(
        !o.status.success() && text(&o).contains("sufficient privileges to dump"),
        "{}",
        text(&o)
    );
    assert!(!t.work.join("mine.cfg").exists());
    std::fs::write(
        &copy,
        edited.replace("Cluster - 'local'", "Cluster - 'stolen'"),
    )
    .unwrap();
    let o = t.run_as_user("sacctmgr", &["-i", "load", copy.to_str().unwrap()]);
    assert!(!o.status.success(), "{}", text(&o));
    let clusters = mgr(&t, &["-P", "-n", "show", "cluster", "format=Cluster"]);
    assert!(!clusters.contains("stolen"), "{clusters}");
}

/// `sacctmgr show event`: the node events the controller recorded, with
/// Slurm's filters; PrivateData=events keeps them from ordinary users.
#[test]
fn sacctmgr_show_event_lists_node_outages() {
    let t = TestCluster::start(2, |s| {
        s.accounting = true;
        s.extra_dbd_conf = "PrivateData=events\n".into();
    });
    let scontrol = |args: &[&str]| {
        let o = t.run("scontrol", args);
        assert!(o.status.success(), "{}", text(&o));
    };
    scontrol(&["update", "NodeName=n1", "State=DRAIN", "Reason=bad disk"]);
    scontrol(&["update", "NodeName=n1", "State=RESUME"]);
    scontrol(&["update", "NodeName=n2", "State=DOWN", "Reason=no power"]);
    let deadline = Instant::now() + Duration::from_secs(30);
    let all = loop {
        let out = mgr(
            &t,
            &[
                "-P",
                "-n",
                "show",
                "event",
                "format=NodeName,State,Reason,End,User",
            ],
        );
        let n1_closed = out
            .lines()
            .any(|l| l.starts_with("n1|DRAIN|bad disk|") && !l.contains("|Unknown|"));
        if n1_closed && out.contains("n2|DOWN|no power|Unknown|root(0)") {
            break out;
        }
        assert!(Instant::now() < deadline, "events never recorded: {out}");
        std::thread::sleep(Duration::from_millis(300));
    };
    let n1 = all.lines().find(|l| l.starts_with("n1|")).unwrap();
    assert!(!n1.contains("|Unknown|"), "n1's event ended: {all}");
    assert!(n1.ends_with("|root(0)"), "{all}");
    // Filters: open events, states, nodes, reasons; all in Slurm's layout.
    let open = mgr(
        &t,
        &[
            "-P",
            "-n",
            "show",
            "event",
            "Event=Node",
            "CondFlags=Open",
            "format=NodeName",
        ],
    );
    assert_eq!(open, "n2\n");
    // The cluster's size is a cluster event, still open.
    let cluster = mgr(&t, &["-P", "-n", "show", "event", "Event=Cluster"]);
    assert!(
        cluster.lines().count() == 1
            && cluster.starts_with("local|cpu=")
            && cluster.ends_with("|Unknown|\n"),
        "{cluster}"
    );
    let down = mgr(
        &t,
        &[
            "-P",
            "-n",
            "show",
            "event",
            "States=DOWN",
            "format=NodeName",
        ],
    );
    assert_eq!(down, "n2\n");
    let n1 = mgr(
        &t,
        &[
            "-P",
            "-n",
            "show",
            "event",
            "Nodes=n[1]",
            "format=NodeName,Reason",
        ],
    );
    assert_eq!(n1, "n1|bad disk\n");
    let disk = mgr(
        &t,
        &[
            "-P",
            "-n",
            "show",
            "events",
            "where",
            "reason=disk",
            "format=NodeName",
        ],
    );
    assert_eq!(disk, "n1\n");
    let none = mgr(
        &t,
        &["-n", "show", "event", "End=now-3600", "format=NodeName"],
    );
    assert_eq!(none, "");
    let table = mgr(&t, &["show", "event", "Nodes=n2"]);
    let mut lines = table.lines();
    assert_eq!(
        lines.next().unwrap(),
"   Cluster NodeName                  TimeStart             TimeEnd  State                         Reason       User "
    );
    assert!(
        lines.nth(1).unwrap().contains(" n2              "),
        "{table}"
    );
    // Bad conditions are named.
    let o = t.run("sacctmgr", &["show", "event", "Bogus=1"]);
    assert!(
        !o.status.success() && text(&o).contains("Unknown condition: bogus"),
        "{}",
        text(&o)
    );
    let o = t.run("sacctmgr", &["show", "event", "Event=Switch"]);
    assert!(
        !o.status.success() && text(&o).contains("Unknown event type: 'Switch'"),
        "{}",
        text(&o)
    );
    // An ordinary user is refused the events under PrivateData=events.
    let o = t.run_as_user("sacctmgr", &["-P", "-n", "show", "event"]);
    assert!(
        !o.status.success()
            && text(&o).contains("may not see node events")
            && !text(&o).contains("n2"),
        "{}",
        text(&o)
    );

    // A node drained with a job on it is recorded draining (Slurm's DRNG).
    let job = t.sbatch(&["-w", "n1", "--wrap", "sleep 30"]);
    t.wait_job(job, 20, "running", |j| j.state == JobState::Running);
    scontrol(&["update", "NodeName=n1", "State=DRAIN", "Reason=busy drain"]);
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let out = mgr(
            &t,
            &[
                "-P",
                "-n",
                "show",
                "event",
                "States=drng",
                "format=NodeName,State,Reason",
            ],
        );
        if out == "n1|DRNG|busy drain\n" {
            break;
        }
        assert!(Instant::now() < deadline, "no draining event: {out}");
        std::thread::sleep(Duration::from_millis(300));
    }
    t.run("scancel", &[&job.to_string()]);

    // `show problem`: an account nobody is in, and a user this host does
    // not know.
    mgr(&t, &["-i", "add", "account", "lonely"]);
    mgr(&t, &["-i", "add", "account", "other"]);
    mgr(&t, &["-i", "add", "user", "nosuchuser42", "Account=other"]);
    let out = mgr(&t, &["-P", "show", "problem"]);
    assert!(out.starts_with("Cluster|Account|User|Problem\n"), "{out}");
    assert!(
        out.contains("local|lonely||Account has no users\n"),
        "{out}"
    );
    assert!(
        out.contains("||nosuchuser42|User does not have a uid\n"),
        "{out}"
    );
    assert!(!out.contains("|other|"), "{out}");
    let out = mgr(&t, &["show", "problem", "format=Acct,Problem%25"]);
    assert!(
        out.contains("    lonely      Account has no users"),
        "{out}"
    );
}

/// `sacctmgr show runawayjobs`: a job the database holds as running that
/// the controller does not know is listed (a running one is not), ended on
/// a yes, and only operators may look or fix.
#[test]
fn sacctmgr_runawayjobs_finds_and_ends_jobs_the_controller_lost() {
    use slurm_proto::acct::*;
    // Without TLS, so the test may send a record as the controller would.
    let t = TestCluster::start(1, |s| {
        s.accounting = true;
        s.tls = false;
    });
    let script = write_script(&t, "sleep.sh", "#!/bin/sh\nsleep 300\n");
    let live = t.sbatch(&[&script]);
    t.wait_job(live, 30, "running", |j| j.state == JobState::Running);
    let key = slurm_common::auth::Key::load(&t.c.spec.dir.join("slurm.key")).unwrap();
    let addr = format!("{}:{}", t.c.spec.ip, t.c.spec.dbd_port);
    let send = |uid: u32, body: AcctRequest| {
        let req = dbd_request(&key, uid, body, slurm_common::auth::now());
        slurm_common::dbd::call_sync(&addr, &t.c.spec.ip, &req, Duration::from_secs(10)).unwrap()
    };
    // A job the controller never had, recorded as running an hour ago.
    let now = slurm_common::auth::now();
    let lost = AcctJob {
        job_id: 777_777,
        name: "lost".into(),
        user: "root".into(),
        account: "root".into(),
        partition: "debug".into(),
        state: JobState::Running.into(),
        submit_time: now - 3700,
        eligible_time: Some(now - 3700),
        start_time: Some(now - 3600),
        ..Default::default()
    };
    let rec = SeqRecord {
        cluster: "local".into(),
        epoch: 424_242,
        seq: 1,
        record: AcctRecord::JobStart(lost),
    };
    let ack = send(0, AcctRequest::Record(Box::new(rec)));
    assert!(matches!(ack, AcctResponse::Ack { .. }), "{ack:?}");
    // The live job reaches accounting too before we look.
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let o = t.run(
            "sacct",
            &["-n", "-P", "-X", "-j", &live.to_string(), "-o", "State"],
        );
        if text(&o).contains("RUNNING") {
            break;
        }
        assert!(Instant::now() < deadline, "{}", text(&o));
        std::thread::sleep(Duration::from_millis(300));
    }

    // Listed, not fixed without a yes.
    let out = mgr(&t, &["show", "runawayjobs"]);
    assert!(out.starts_with("NOTE: Runaway jobs are jobs"), "{out}");
    assert!(
        out.contains("      777777       lost      debug      local    RUNNING "),
        "{out}"
    );
    assert!(
        !out.contains(&format!(" {live} ")),
        "a running job is no runaway: {out}"
    );
    assert!(out.ends_with(" Changes Discarded\n"), "{out}");
    let out = mgr(&t, &["-r", "-i", "show", "runawayjobs"]);
    assert!(out.contains("Not fixed: sacctmgr runs read-only"), "{out}");

    // An ordinary user may neither look nor fix (slurmdbd refuses the fix
    // itself), and nothing changes.
    let o = t.run_as_user("sacctmgr", &["-i", "show", "runawayjobs"]);
    assert!(
        !o.status.success() && text(&o).contains("may not look for runaway jobs"),
        "{}",
        text(&o)
    );
    let fix = FixRunaway {
        cluster: "local".into(),
        jobs: vec![RunawayJob {
            job_id: 777_777,
            submit_time: now - 3700,
        }],
    };
    match send(TEST_UID, AcctRequest::FixRunaway(fix.clone())) {
        AcctResponse::Error(e) => assert_eq!(e.kind, AcctErrorKind::AccessDenied, "{e}"),
        other => panic!("an ordinary user fixed runaways: {other:?}"),
    }
    let state = |id: &str| {
        let o = t.run(
            "sacct",
            &["-n", "-P", "-X", "-j", id, "-o", "State,Start,End"],
        );
        String::from_utf8_lossy(&o.stdout).trim().to_string()
    };
    assert!(
        state("777777").starts_with("RUNNING|"),
        "{}",
        state("777777")
    );

    // Fixed: ended at its start, COMPLETED; the live job untouched.
    mgr(&t, &["-i", "show", "runawayjobs"]);
    let fixed = state("777777");
    let f: Vec<&str> = fixed.split('|').collect();
    assert_eq!((f[0], f[1]), ("COMPLETED", f[2]), "{fixed}");
    assert!(state(&live.to_string()).starts_with("RUNNING|"));
    let out = mgr(&t, &["show", "runawayjobs"]);
    assert_eq!(
        out,
        "Runaway Jobs: No runaway jobs found on cluster local\n"
    );
    // Another cluster's controller cannot be asked from here.
    let o = t.run("sacctmgr", &["show", "runawayjobs", "cluster=other"]);
    assert!(
        !o.status.success() && text(&o).contains("this cluster only"),
        "{}",
        text(&o)
    );
    t.run("scancel", &[&live.to_string()]);

    // `sacctmgr shutdown`: refused to an ordinary user (slurmdbd keeps
    // serving), done for root.
    let o = t.run_as_user("sacctmgr", &["shutdown"]);
    assert!(
        !o.status.success()
            && text(&o).contains(" Problem shutting down server: ")
            && text(&o).contains("may not shut slurmdbd down"),
        "{}",
        text(&o)
    );
    assert!(mgr(&t, &["ping"]).ends_with(" is UP\n"));
    assert_eq!(mgr(&t, &["shutdown"]), "");
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    loop {
        let o = t.run("sacctmgr", &["ping"]);
        if !o.status.success() {
            assert!(text(&o).contains(" is DOWN"), "{}", text(&o));
            break;
        }
        assert!(std::time::Instant::now() < deadline, "slurmdbd still up");
        std::thread::sleep(std::time::Duration::from_millis(200));
    }
}

/// Every change made through slurmdbd is a transaction `sacctmgr show
/// transaction` lists (Time, Action, Actor, Where, Info), selected by
/// Action=, Actor=, Accounts=, Users=, Start=/End=. A change refused to an
/// ordinary user leaves none.
#[test]
fn sacctmgr_show_transaction_lists_who_changed_what() {
    let t = TestCluster::start(1, |s| s.accounting = true);
    mgr(
        &t,
        &[
            "-i",
            "add",
            "account",
            "chem",
            "Description=Chemistry",
            "Fairshare=3",
        ],
    );
    mgr(&t, &["-i", "add", "user", "nobody", "Account=chem"]);
    mgr(&t, &["-i", "modify", "qos", "normal", "set", "Priority=7"]);
    // Refused: no transaction.
    let o = t.run_as_user("sacctmgr", &["-i", "add", "account", "sneaky"]);
    assert!(!o.status.success());
    let out = mgr(
        &t,
        &[
            "-P",
            "-n",
            "show",
            "transaction",
            "format=Action,Actor,Where,Info",
        ],
    );
    let lines: Vec<&str> = out.lines().collect();
    assert!(
        lines.iter().any(
            |l| l.starts_with("Add Accounts|root|chem|") && l.contains("description=Chemistry")
        ),
        "{out}"
    );
    assert!(
        lines
            .iter()
            .any(|l| l.starts_with("Add Users|root|nobody|")),
        "{out}"
    );
    assert!(
        lines
            .iter()
            .any(|l| l.starts_with("Modify QOS|root|normal|") && l.contains("priority=7")),
        "{out}"
    );
    assert!(!out.contains("sneaky"), "{out}");
    // Selections.
    let sel = |cond: &[&str]| {
        let mut args = vec!["-P", "-n", "show", "transaction", "format=Action"];
        args.extend_from_slice(cond);
        mgr(&t, &args)
    };
    assert_eq!(sel(&["Action=Modify QOS"]), "Modify QOS\n");
    // (The user's association is added beside the user, and named.)
    assert_eq!(sel(&["Users=nobody"]), "Add Users\nAdd Associations\n");
    assert_eq!(
        sel(&["Accounts=chem", "Action=add accounts"]),
        "Add Accounts\n"
    );
    assert_eq!(sel(&["Actor=someone-else"]), "");
    assert_eq!(sel(&["Start=now+1hour"]), "");
    // The default columns, with Slurm's titles.
    let head = mgr(&t, &["show", "transaction"]);
    let first = head.lines().next().unwrap_or_default();
    for title in ["Time", "Action", "Actor", "Where", "Info"] {
        assert!(first.contains(title), "{head}");
    }
    let o = t.run("sacctmgr", &["show", "transaction", "Bogus=1"]);
    assert!(!o.status.success());
    assert!(
        text(&o).contains("Unknown condition: bogus"),
        "{}",
        text(&o)
    );
}

/// Accounts physics, lab (under physics) and chem; users nobody (in
/// `nobody_in`), daemon (physics) and bin (chem). Gives daemon's and bin's
/// records.
fn physics_lab_chem(
    t: &TestCluster,
    nobody_in: &str,
) -> (slurm_common::users::User, slurm_common::users::User) {
    for a in [vec!["physics"], vec!["lab", "Parent=physics"], vec!["chem"]] {
        let mut args = vec!["-i", "add", "account"];
        args.extend(a);
        mgr(t, &args);
    }
    let nobody = format!("Account={nobody_in}");
    mgr(t, &["-i", "add", "user", "nobody", &nobody]);
    mgr(t, &["-i", "add", "user", "daemon", "Account=physics"]);
    mgr(t, &["-i", "add", "user", "bin", "Account=chem"]);
    (
        slurm_common::users::user_by_name("daemon").expect("user daemon"),
        slurm_common::users::user_by_name("bin").expect("user bin"),
    )
}

/// `DisableCoordDBD=yes` in slurmdbd.conf: a coordinator may change
/// nothing through slurmdbd (an operator still may), as Slurm's.
#[test]
fn disable_coord_dbd_takes_coordinators_rights_away() {
    let t = TestCluster::start(1, |s| {
        s.accounting = true;
        s.extra_dbd_conf = "DisableCoordDBD=yes\n".into();
    });
    let (daemon, _bin) = physics_lab_chem(&t, "lab");
    mgr(
        &t,
        &[
            "-i",
            "add",
            "coordinator",
            "account=physics",
            "names=daemon",
        ],
    );
    let mgr_as = |args: &[&str]| {
        t.cmd_as(daemon.uid, daemon.gid, "sacctmgr")
            .args(args)
            .output()
            .unwrap()
    };
    for args in [
        vec!["-i", "add", "user", "sys", "Account=lab"],
        vec!["-i", "add", "account", "optics", "Parent=lab"],
        vec!["-i", "add", "coordinator", "account=lab", "names=bin"],
    ] {
        let o = mgr_as(&args);
        assert!(
            !o.status.success() && text(&o).contains("is not an administrator"),
            "{args:?}: {}",
            text(&o)
        );
    }
    let out = mgr(
        &t,
        &["-P", "-n", "show", "assoc", "user=sys", "format=account"],
    );
    assert_eq!(out, "");
    let out = mgr(&t, &["show", "configuration"]);
    assert!(
        out.lines()
            .any(|l| l.starts_with("DisableCoordDBD ") && l.ends_with("= Yes")),
        "{out}"
    );
}

/// Account coordinators (`sacctmgr add|remove coordinator`): made by an
/// administrator (never by an ordinary user for itself), they coordinate
/// the sub-accounts too, may act on those accounts' jobs (cancel, hold)
/// and make coordinators there, and nowhere else.
#[test]
fn coordinators_act_on_their_accounts_jobs_only() {
    let t = TestCluster::start(1, |s| s.accounting = true);
    let (daemon, bin) = physics_lab_chem(&t, "lab");
    let as_user = |uid: u32, gid: u32, prog: &str, args: &[&str]| {
        t.cmd_as(uid, gid, prog).args(args).output().unwrap()
    };
    // An ordinary user may not make itself one.
    let o = as_user(
        TEST_UID,
        TEST_GID,
        "sacctmgr",
        &["-i", "add", "coordinator", "account=lab", "names=nobody"],
    );
    assert!(
        !o.status.success() && text(&o).contains("coordinator of every account"),
        "{}",
        text(&o)
    );
    let out = mgr(
        &t,
        &[
            "-i",
            "add",
            "coordinator",
            "account=physics",
            "names=daemon",
        ],
    );
    assert_eq!(
        out,
        " Adding Coordinator User(s)\n  daemon\n To Account(s) and all sub-accounts\n  physics\n"
    );
    let out = mgr(&t, &["-P", "-n", "show", "user", "daemon", "withcoord"]);
    assert_eq!(out, "daemon|physics|None|lab,physics\n");
    let out = mgr(
        &t,
        &[
            "-P",
            "-n",
            "show",
            "account",
            "physics",
            "format=account,coord",
        ],
    );
    assert_eq!(out, "physics|daemon\n");
    // nobody's held job in lab: daemon (physics' coordinator) may cancel
    // it, bin (chem's user) may not.
    let id = t.sbatch_as_user(&["-A", "lab", "--hold", "--wrap", "true"]);
    let o = as_user(bin.uid, bin.gid, "scancel", &[&id.to_string()]);
    assert!(
        text(&o).contains("Access/permission denied"),
        "{}",
        text(&o)
    );
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let o = as_user(daemon.uid, daemon.gid, "scancel", &[&id.to_string()]);
        if o.status.success() && text(&o).is_empty() {
            break;
        }
        assert!(Instant::now() < deadline, "never allowed: {}", text(&o));
        std::thread::sleep(Duration::from_millis(300));
    }
    let j = t.wait_done(id, 30);
    assert_eq!(j.state, JobState::Cancelled);
    // A coordinator makes coordinators below it, not elsewhere.
    let o = as_user(
        daemon.uid,
        daemon.gid,
        "sacctmgr",
        &["-i", "add", "coordinator", "account=chem", "names=daemon"],
    );
    assert!(!o.status.success(), "{}", text(&o));
    let o = as_user(
        daemon.uid,
        daemon.gid,
        "sacctmgr",
        &["-i", "add", "coordinator", "account=lab", "names=bin"],
    );
    assert!(o.status.success(), "{}", text(&o));
    // A coordinator adds users to its accounts and sets their limits
    // there; no AdminLevel, no other account, not its account's own share.
    let mgr_as = |args: &[&str]| as_user(daemon.uid, daemon.gid, "sacctmgr", args);
    for (args, ok) in [
        (vec!["-i", "add", "user", "sys", "Account=lab"], true),
        (vec!["-i", "add", "user", "sys", "Account=chem"], false),
        (
            vec![
                "-i",
                "add",
                "user",
                "games",
                "Account=lab",
                "AdminLevel=Operator",
            ],
            false,
        ),
        (
            vec!["-i", "modify", "user", "sys", "set", "AdminLevel=Operator"],
            false,
        ),
        (
            vec![
                "-i",
                "modify",
                "user",
                "sys",
                "where",
                "Account=lab",
                "set",
                "MaxJobs=2",
            ],
            true,
        ),
        (
            vec!["-i", "modify", "user", "sys", "set", "MaxJobs=3"],
            false,
        ),
        (
            vec!["-i", "modify", "account", "lab", "set", "Fairshare=50"],
            false,
        ),
        (
            vec!["-i", "modify", "account", "lab", "set", "Description=x"],
            false,
        ),
        // An account that exists elsewhere is not linked under its own.
        (vec!["-i", "add", "account", "chem", "Parent=lab"], false),
        (vec!["-i", "add", "account", "optics", "Parent=lab"], true),
        (vec!["-i", "delete", "user", "sys"], false),
        // A sub-account's association on a cluster, as Slurm's; not the
        // account's record, nor another's.
        (vec!["-i", "delete", "account", "optics"], false),
        (
            vec!["-i", "delete", "account", "chem", "cluster=local"],
            false,
        ),
        (
            vec!["-i", "delete", "account", "optics", "cluster=local"],
            true,
        ),
    ] {
        let o = mgr_as(&args);
        assert_eq!(o.status.success(), ok, "{args:?}: {}", text(&o));
        assert!(
            ok || text(&o).contains("user 'daemon' is not an administrator"),
            "{args:?}: {}",
            text(&o)
        );
    }
    let out = mgr(
        &t,
        &[
            "-P",
            "-n",
            "show",
            "assoc",
            "user=sys",
            "format=account,maxjobs",
        ],
    );
    assert_eq!(out, "lab|2\n");
    let out = mgr(
        &t,
        &["-P", "-n", "show", "user", "sys", "format=user,admin"],
    );
    assert_eq!(out, "sys|None\n");
    let out = mgr(&t, &["-i", "remove", "coordinator", "names=daemon"]);
    assert_eq!(
        out,
        " Removing Coordinators with user name\n  daemon\n From all accounts\n \
         Removed Coordinators (sub accounts not listed)...\n  U = daemon    A = physics   \n"
    );
    let out = mgr(
        &t,
        &["-P", "-n", "show", "user", "withcoord", "format=user,coord"],
    );
    // (optics is no longer under lab: daemon removed its association on
    // the cluster; its record stays, as Slurm's.)
    assert!(
        out.contains("bin|lab\n") && out.contains("daemon|\n"),
        "{out}"
    );
    let out = mgr(
        &t,
        &["-P", "-n", "show", "account", "optics", "format=account"],
    );
    assert_eq!(out, "optics\n");
    // An operator acts on anyone's job (Slurm's validate_operator);
    // daemon, no longer a coordinator, on nobody's no more.
    mgr(
        &t,
        &["-i", "modify", "user", "bin", "set", "AdminLevel=Operator"],
    );
    let id = t.sbatch_as_user(&["-A", "lab", "--hold", "--wrap", "true"]);
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let o = as_user(bin.uid, bin.gid, "scontrol", &["release", &id.to_string()]);
        if o.status.success() {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "operator never allowed: {}",
            text(&o)
        );
        std::thread::sleep(Duration::from_millis(300));
    }
    let o = as_user(daemon.uid, daemon.gid, "scancel", &[&id.to_string()]);
    assert!(
        text(&o).contains("Access/permission denied"),
        "{}",
        text(&o)
    );
    assert_eq!(t.wait_done(id, 30).state, JobState::Completed);
}

/// Under `PrivateData=jobs` (controller and slurmdbd) an account's
/// coordinator sees its accounts' jobs (sub-accounts too) beside its own,
/// in `squeue` and in `sacct`, and no other user's; an ordinary user only
/// its own.
#[test]
fn coordinators_see_their_accounts_jobs_under_private_data() {
    let t = TestCluster::start(1, |s| {
        s.accounting = true;
        s.extra_conf = "PrivateData=jobs\n".into();
        s.extra_dbd_conf = "PrivateData=jobs\n".into();
    });
    let (daemon, bin) = physics_lab_chem(&t, "lab,chem");
    // (The first account named is a new user's default, as Slurm's.)
    let out = mgr(
        &t,
        &[
            "-P",
            "-n",
            "show",
            "user",
            "nobody",
            "format=user,defaultaccount",
        ],
    );
    assert_eq!(out, "nobody|lab\n");
    mgr(
        &t,
        &[
            "-i",
            "add",
            "coordinator",
            "account=physics",
            "names=daemon",
        ],
    );
    let as_user = |uid: u32, gid: u32, prog: &str, args: &[&str]| {
        t.cmd_as(uid, gid, prog).args(args).output().unwrap()
    };
    // nobody's jobs in lab (under physics) and in chem, done and held.
    let ran_lab = t.sbatch_as_user(&["-A", "lab", "--wrap", "true"]);
    let ran_chem = t.sbatch_as_user(&["-A", "chem", "--wrap", "true"]);
    t.wait_done(ran_lab, 30);
    t.wait_done(ran_chem, 30);
    let held_lab = t.sbatch_as_user(&["-A", "lab", "-H", "--wrap", "true"]);
    let held_chem = t.sbatch_as_user(&["-A", "chem", "-H", "--wrap", "true"]);
    let squeue = |uid, gid| stdout(&as_user(uid, gid, "squeue", &["-h", "-o", "%i"]));
    // The controller learns of the coordinator when it next fetches the
    // associations.
    let deadline = Instant::now() + Duration::from_secs(30);
    while squeue(daemon.uid, daemon.gid) != format!("{held_lab}\n") {
        assert!(
            Instant::now() < deadline,
            "coordinator's squeue: {}",
            squeue(daemon.uid, daemon.gid)
        );
        std::thread::sleep(Duration::from_millis(300));
    }
    assert_eq!(squeue(bin.uid, bin.gid), "");
    assert_eq!(
        squeue(TEST_UID, TEST_GID),
        format!("{held_lab}\n{held_chem}\n")
    );
    let o = as_user(
        daemon.uid,
        daemon.gid,
        "scontrol",
        &["show", "job", &held_chem.to_string()],
    );
    assert!(!o.status.success(), "{}", text(&o));
    // Accounting the same: the coordinator's sacct -a has lab's records.
    let ids = format!("{ran_lab},{ran_chem}");
    let args = ["-a", "-X", "-n", "-P", "--format=JobID", "-j", &ids];
    let deadline = Instant::now() + Duration::from_secs(30);
    while stdout(&t.run("sacct", &args)).lines().count() != 2 {
        assert!(Instant::now() < deadline, "records never arrived");
        std::thread::sleep(Duration::from_millis(300));
    }
    let o = as_user(daemon.uid, daemon.gid, "sacct", &args);
    assert_eq!(stdout(&o), format!("{ran_lab}\n"), "{}", text(&o));
    let o = as_user(bin.uid, bin.gid, "sacct", &args);
    assert_eq!(stdout(&o), "", "{}", text(&o));
}

/// Reservations in accounting: `sacctmgr show reservation` lists each
/// record (its CPUs as TRES, its time, the time no job ran in it) and
/// `sreport reservation utilization` what jobs used of it; a change of its
/// nodes after it began starts a record of its own. PrivateData=
/// reservations keeps them from ordinary users.
#[test]
fn reservations_are_kept_in_accounting_with_what_jobs_used_of_them() {
    let t = TestCluster::start(2, |s| {
        s.accounting = true;
        s.extra_dbd_conf = "PrivateData=reservations\n".into();
    });
    let scontrol = |args: &[&str]| {
        let o = t.run("scontrol", args);
        assert!(o.status.success(), "{}", text(&o));
    };
    scontrol(&[
        "create",
        "reservation",
        "ReservationName=r1",
        "StartTime=now",
        "Duration=10",
        "Nodes=n1",
        "Users=root",
        "Flags=MAINT",
    ]);
    let node_cpus = |name: &str| {
        t.nodes()
            .into_iter()
            .find(|n| n.name == name)
            .map(|n| n.cpus)
            .expect("node")
    };
    let cpus = node_cpus("n1");
    let job = t.sbatch(&["--reservation=r1", "--exclusive", "--wrap", "sleep 2"]);
    t.wait_done(job, 30);
    // Listed once its record and the job's end reach slurmdbd.
    let fmt = "format=Cluster,Name,TRES,Flags,NodeName,UnusedWall";
    let deadline = Instant::now() + Duration::from_secs(30);
    let line = loop {
        let out = mgr(&t, &["-P", "-n", "show", "reservation", "Names=r1", fmt]);
        let sacct = t.run(
            "sacct",
            &["-n", "-X", "-j", &job.to_string(), "-o", "state"],
        );
        if out.starts_with("local|r1|") && text(&sacct).contains("COMPLETED") {
            break out;
        }
        assert!(
            Instant::now() < deadline,
            "reservation never recorded: {out}"
        );
        std::thread::sleep(Duration::from_millis(300));
    };
    let f: Vec<&str> = line.trim_end().split('|').collect();
    assert_eq!(
        &f[..5],
        &["local", "r1", &format!("cpu={cpus}"), "MAINT", "n1"],
        "{line}"
    );
    // Slurm's double: seconds with six decimals.
    assert!(f[5].ends_with(".000000"), "{line}");
    // Without conditions: those in effect since midnight yesterday.
    let table = mgr(&t, &["show", "reservation"]);
    let mut lines = table.lines();
    assert_eq!(
        lines.next().unwrap(),
        format!(
            "{:>10} {:>15} {:>30} {:>19} {:>19} {:>10} ",
            "Cluster", "Name", "TRES", "TimeStart", "TimeEnd", "UnusedWall"
        )
    );
    assert!(
        table.contains(&format!("{:>30}", format!("cpu={cpus}"))),
        "{table}"
    );

    // What the job used: its CPUs for its run; the rest of the record's
    // CPU time idle (as Slurm's report, the record's whole time).
    let report = |args: &[&str]| {
        let mut a = vec!["-P", "-n", "-t", "seconds", "reservation", "utilization"];
        a.extend_from_slice(args);
        let o = t.run("sreport", &a);
        assert!(o.status.success(), "{}", text(&o));
        String::from_utf8_lossy(&o.stdout).into_owned()
    };
    let window = ["start=now-3600", "end=now+60"];
    let out = report(
        &[
            &window[..],
            &[
                "Names=r1",
                "format=Name,TresName,TresCount,Allocated,Idle,TotalTime",
            ],
        ]
        .concat(),
    );
    let f: Vec<&str> = out.trim_end().split('|').collect();
    assert_eq!(&f[..3], &["r1", "cpu", &cpus.to_string()], "{out}");
    let alloc: u64 = f[3].parse().unwrap();
    let idle: u64 = f[4].parse().unwrap();
    assert!(
        (u64::from(cpus) * 2..=u64::from(cpus) * 4).contains(&alloc),
        "the job's {cpus} CPUs for about 2 s: {out}"
    );
    assert_eq!(f[5], "00:10:00", "{out}");
    assert_eq!(alloc + idle, 600 * u64::from(cpus), "{out}");
    // The default layout, with Slurm's banner.
    let o = t.run(
        "sreport",
        &[
            "-t",
            "percent",
            "reservation",
            "utilization",
            "start=now-3600",
            "end=now+60",
        ],
    );
    let shown = text(&o);
    assert!(o.status.success(), "{shown}");
    assert!(shown.contains("Reservation Utilization "), "{shown}");
    assert!(
        shown.contains("Usage reported in Percentage of Total"),
        "{shown}"
    );
    assert!(
        shown
            .contains("  Cluster      Name               Start                 End      TRES Name"),
        "{shown}"
    );

    // Given another node after it began: a record of its own from now.
    scontrol(&["update", "ReservationName=r1", "Nodes=n[1-2]"]);
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let out = mgr(
            &t,
            &[
                "-P",
                "-n",
                "show",
                "reservation",
                "Names=r1",
                "format=NodeName,TRES",
            ],
        );
        if out == format!("n1|cpu={cpus}\nn[1-2]|cpu={}\n", cpus + node_cpus("n2")) {
            break;
        }
        assert!(Instant::now() < deadline, "no second record: {out}");
        std::thread::sleep(Duration::from_millis(300));
    }
    // Bad conditions and fields are named.
    let o = t.run("sacctmgr", &["show", "reservation", "Bogus=1"]);
    assert!(
        !o.status.success() && text(&o).contains("Unknown condition: bogus"),
        "{}",
        text(&o)
    );
    let o = t.run(
        "sreport",
        &["reservation", "utilization", "format=Name,Bogus"],
    );
    assert!(
        !o.status.success() && text(&o).contains("Unknown field 'Bogus'"),
        "{}",
        text(&o)
    );
    // An ordinary user sees none of them under PrivateData=reservations.
    for (prog, args) in [
        ("sacctmgr", vec!["-P", "-n", "show", "reservation"]),
        (
            "sreport",
            vec!["reservation", "utilization", "start=now-3600", "end=now+60"],
        ),
    ] {
        let o = t.run_as_user(prog, &args);
        assert!(
            !o.status.success()
                && text(&o).contains("may not see reservations")
                && !text(&o).contains("r1"),
            "{prog}: {}",
            text(&o)
        );
    }
}
