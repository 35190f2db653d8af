//! The accounting storage suite, run the same against SQLite, MariaDB and
//! PostgreSQL over real connections, plus the daemon over TCP.
//!
//! MariaDB and PostgreSQL are the machine's local servers (override with
//! `SLURMDBD_TEST_MYSQL` / `SLURMDBD_TEST_PGSQL`, e.g.
//! `mysql://root@127.0.0.1:3306/test`, `postgres://root@127.0.0.1:5432/test`).
//! Each run creates its own `slurm_test_<pid>_<random>` databases and drops
//! them at the end, so parallel runs do not collide. An unreachable server
//! fails the test with a message naming it; nothing is skipped.

use slurm_common::auth::Key;
use slurm_proto::acct::*;
use slurm_proto::{JobState, BATCH_STEP};
use slurmdbd::conf::{PurgeAfter, PurgeSettings};
use slurmdbd::server::Server;
use slurmdbd::storage::time::{floor_day, floor_month, next_month};
use slurmdbd::storage::{schema, Backend, Migrate, Storage, StorageError, StorageTarget};
use std::sync::Arc;
use std::time::Duration;

// ------------------------------------------------------------------ setup

fn server_url(b: Backend) -> String {
    let (var, default) = match b {
        Backend::Mysql => ("SLURMDBD_TEST_MYSQL", "mysql://root@127.0.0.1:3306/test"),
        _ => ("SLURMDBD_TEST_PGSQL", "postgres://root@127.0.0.1:5432/test"),
    };
    std::env::var(var)
        .ok()
        .filter(|v| !v.is_empty())
        .unwrap_or_else(|| default.to_string())
}

/// A fresh database, dropped when this goes out of scope (even on panic).
struct TestDb {
    target: StorageTarget,
    _dir: Option<tempfile::TempDir>,
    /// Set once the database exists (nothing to drop before).
    created: std::sync::atomic::AtomicBool,
}

impl TestDb {
    fn new(b: Backend) -> TestDb {
        let name = format!(
            "slurm_test_{}_{:08x}",
            std::process::id(),
            rand::random::<u32>()
        );
        match b {
            Backend::Sqlite => {
                let dir = tempfile::tempdir().unwrap();
                let target = StorageTarget::sqlite(dir.path().join(format!("{name}.db")));
                TestDb {
                    target,
                    _dir: Some(dir),
                    created: Default::default(),
                }
            }
            _ => {
                let url = server_url(b);
                let base = StorageTarget::from_url(&url).unwrap();
                TestDb {
                    target: base.with_database(&name),
                    _dir: None,
                    created: Default::default(),
                }
            }
        }
    }

    async fn open(&self, m: Migrate) -> Storage {
        match Storage::open_with(&self.target, m).await {
            Ok(s) => {
                self.created
                    .store(true, std::sync::atomic::Ordering::SeqCst);
                s
            }
            Err(e) => panic!(
                "cannot open the {} test database {}: {e}\n(the accounting tests need this \
                 server; point SLURMDBD_TEST_MYSQL / SLURMDBD_TEST_PGSQL at a reachable one)",
                self.target.backend.name(),
                self.target.display()
            ),
        }
    }
}

impl Drop for TestDb {
    fn drop(&mut self) {
        if self.target.backend == Backend::Sqlite
            || !self.created.load(std::sync::atomic::Ordering::SeqCst)
        {
            return;
        }
        let t = self.target.clone();
        let _ = std::thread::spawn(move || {
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .unwrap();
            if let Err(e) = rt.block_on(Storage::drop_database(&t)) {
                eprintln!("cannot drop {}: {e}", t.display());
            }
        })
        .join();
    }
}

// T: an hour boundary (2023-11-14 22:00 UTC); D: that day's midnight.
const T: i64 = 1_699_999_200;
const D: i64 = 1_699_920_000;

fn job(id: u32, user: &str, account: &str, state: JobState) -> AcctJob {
    AcctJob {
        job_id: id,
        name: format!("job{id}"),
        user: user.into(),
        uid: 1000 + id,
        group: "users".into(),
        gid: 100,
        account: account.into(),
        partition: "batch".into(),
        qos: "normal".into(),
        state: state.into(),
        submit_time: T,
        time_limit: Some(60),
        priority: 1,
        alloc_cpus: 1,
        req_cpus: 1,
        work_dir: "/tmp".into(),
        ..Default::default()
    }
}

fn rec(cluster: &str, seq: u64, record: AcctRecord) -> SeqRecord {
    SeqRecord {
        cluster: cluster.into(),
        epoch: 0,
        seq,
        record,
    }
}

fn names(v: &[AssocRec]) -> Vec<String> {
    v.iter()
        .map(|a| {
            if a.user.is_empty() {
                format!("{}:{}", a.cluster, a.account)
            } else if a.partition.is_empty() {
                format!("{}:{}/{}", a.cluster, a.account, a.user)
            } else {
                format!("{}:{}/{}@{}", a.cluster, a.account, a.user, a.partition)
            }
        })
        .collect()
}

async fn assocs(s: &Storage, f: AssocFilter) -> Vec<AssocRec> {
    s.list_assocs(&f).await.unwrap()
}

// ----------------------------------------------------------------- the suite

async fn suite(b: Backend) {
    migrations(b).await;
    let db = TestDb::new(b);
    let s = db.open(Migrate::Latest).await;
    account_tree(&s).await;
    qos_crud(&s).await;
    assoc_limits(&s).await;
    coordinators(&s).await;
    idempotent_ingest(&s).await;
    job_queries(&s).await;
    job_texts(&s).await;
    rollups(&s).await;
    reservations(&s).await;
    s.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sqlite_suite() {
    suite(Backend::Sqlite).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mariadb_suite() {
    suite(Backend::Mysql).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_suite() {
    suite(Backend::Postgres).await;
}

/// Reservations' records: made, split when changed after they began,
/// moved, removed; listed by time, name and node, with what jobs used.
async fn reservations(s: &Storage) {
    let resv = |name: &str, start: i64, end: i64, nodes: &str, cpus: u32| AcctResv {
        name: name.into(),
        time_start: start,
        time_end: end,
        nodes: nodes.into(),
        node_count: 1 + nodes.matches('-').count() as u32,
        cpus,
        flags: "MAINT".into(),
        users: "ann".into(),
        ..Default::default()
    };
    let in_resv = |id: u32, start: i64, end: i64, cpus: u32, resv: &str| {
        let mut j = job(id, "ann", "root", JobState::Completed);
        j.start_time = Some(start);
        j.end_time = Some(end);
        j.alloc_cpus = cpus;
        j.reservation = resv.into();
        AcctRecord::JobEnd(j)
    };
    let records = vec![
        AcctRecord::Resv(resv("r1", T, T + 3600, "n[1-2]", 4)),
        in_resv(1, T + 600, T + 1800, 2, "r1"),
        in_resv(2, T + 1200, T + 2400, 1, "r1"),
        // Not in it; and one in it but after the first record's time.
        in_resv(3, T + 600, T + 1800, 8, ""),
        in_resv(4, T + 3100, T + 3200, 1, "r1"),
        // Changed after it began: the first record ends, the next begins.
        AcctRecord::Resv(resv("r1", T, T + 3000, "n[1-2]", 4)),
        AcctRecord::Resv(resv("r1", T + 3000, T + 7200, "n1", 2)),
        // Made and removed before it began: gone.
        AcctRecord::Resv(resv("r2", T + 100_000, T + 200_000, "n2", 2)),
        AcctRecord::Resv(AcctResv {
            removed: true,
            ..resv("r2", T + 100_000, T + 200_000, "n2", 2)
        }),
        // Moved before it began: one record, at its new start.
        AcctRecord::Resv(resv("r3", T + 5000, T + 9000, "n2", 2)),
        AcctRecord::Resv(AcctResv {
            prev_start: Some(T + 5000),
            ..resv("r3", T + 6000, T + 9000, "n2", 2)
        }),
    ];
    let seqd: Vec<SeqRecord> = records
        .into_iter()
        .enumerate()
        .map(|(i, r)| rec("resvc", i as u64 + 1, r))
        .collect();
    s.ingest(seqd).await.unwrap();
    let list = |f: ResvFilter| async move {
        let f = ResvFilter {
            clusters: vec!["resvc".into()],
            with_usage: true,
            ..f
        };
        s.resvs(&f, T + 10_000).await.unwrap()
    };
    let all = list(ResvFilter::default()).await;
    let keys: Vec<(String, i64, i64)> = all
        .iter()
        .map(|r| (r.name.clone(), r.time_start, r.time_end))
        .collect();
    assert_eq!(
        keys,
        vec![
            ("r1".into(), T, T + 3000),
            ("r1".into(), T + 3000, T + 7200),
            ("r3".into(), T + 6000, T + 9000),
        ]
    );
    // Jobs 1 and 2 in the first record: 2 CPUs for 1200 s, 1 for 1200 s;
    // of its 3000 s of wall time on 4 CPUs, they used 1200 x 2/4 and
    // 1200 x 1/4 (Slurm's UnusedWall).
    assert_eq!(
        (all[0].alloc_secs, all[0].unused_wall),
        (2 * 1200 + 1200, 3000.0 - 600.0 - 300.0)
    );
    assert_eq!((all[0].cpus, all[0].nodes.as_str()), (4, "n[1-2]"));
    assert_eq!(
        (all[0].flags.as_str(), all[0].users.as_str()),
        ("MAINT", "ann")
    );
    // Job 4 in the second: 100 s on 1 of its 2 CPUs.
    assert_eq!(
        (all[1].alloc_secs, all[1].unused_wall),
        (100, 4200.0 - 50.0)
    );
    // Over (at "now") with no job: all its 3000 s unused.
    assert_eq!((all[2].alloc_secs, all[2].unused_wall), (0, 3000.0));
    // Only one user's jobs (slurmdbd's PrivateData=jobs): job 1's.
    let own = list(ResvFilter {
        jobs_of_uid: Some(1001),
        ..Default::default()
    })
    .await;
    assert_eq!((own[0].alloc_secs, own[0].unused_wall), (2400, 2400.0));
    // In effect at some time of [start, end].
    let between = list(ResvFilter {
        start: Some(T + 3500),
        end: Some(T + 4000),
        ..Default::default()
    })
    .await;
    assert_eq!(between.len(), 1, "{between:?}");
    assert_eq!(between[0].time_start, T + 3000);
    let named = list(ResvFilter {
        names: vec!["r3".into()],
        ..Default::default()
    })
    .await;
    assert!(named.len() == 1 && named[0].name == "r3", "{named:?}");
    let on_n2 = list(ResvFilter {
        nodes: vec!["n2".into()],
        ..Default::default()
    })
    .await;
    let on_n2: Vec<i64> = on_n2.iter().map(|r| r.time_start).collect();
    assert_eq!(on_n2, vec![T, T + 6000]);
    // Another cluster's are not listed.
    let other = s
        .resvs(
            &ResvFilter {
                clusters: vec!["elsewhere".into()],
                ..Default::default()
            },
            T,
        )
        .await
        .unwrap();
    assert!(other.is_empty());
    // A record without a name is refused, and nothing of its batch is kept.
    let bad = vec![
        rec(
            "resvc",
            50,
            AcctRecord::Resv(resv("r9", T, T + 10, "n1", 1)),
        ),
        rec("resvc", 51, AcctRecord::Resv(resv("", T, T + 10, "n1", 1))),
    ];
    assert!(s.ingest(bad).await.is_err());
    assert!(list(ResvFilter {
        names: vec!["r9".into()],
        ..Default::default()
    })
    .await
    .is_empty());
}

/// An older schema is upgraded in place, keeping its data; a newer one is refused.
async fn migrations(b: Backend) {
    let db = TestDb::new(b);
    let s = db.open(Migrate::UpTo(1)).await;
    assert_eq!(s.schema_version().await.unwrap(), 1);
    s.execute_raw("INSERT INTO clusters (name, created) VALUES ('old', 5)")
        .await
        .unwrap();
    s.execute_raw(
        "INSERT INTO jobs (cluster, job_id, submit_time, name, user_name, uid, group_name, gid, \
         account, part, qos, state, exit_status, start_time, end_time, priority, nodelist, \
         node_count, alloc_cpus, req_cpus, req_mem, alloc_tres, req_tres, work_dir, modified) \
         VALUES ('old', 42, 1000, 'legacy', 'ann', 1001, 'users', 100, 'root', 'batch', \
         'normal', 'COMPLETED', 0, 1010, 1020, 1, 'n1', 1, 2, 2, 0, 'cpu=2', 'cpu=2', '/', 0)",
    )
    .await
    .unwrap();
    s.close().await;

    let s = db.open(Migrate::Latest).await;
    assert_eq!(s.schema_version().await.unwrap(), schema::LATEST);
    let old = s.list_clusters(&ClusterFilter::default()).await.unwrap();
    assert_eq!(old.len(), 1);
    assert_eq!((old[0].name.as_str(), old[0].created), ("old", 5));
    let jobs = s
        .jobs(&JobQuery {
            clusters: vec!["old".into()],
            ..Default::default()
        })
        .await
        .unwrap();
    assert_eq!(jobs.len(), 1);
    assert_eq!(jobs[0].job.name, "legacy");
    assert_eq!(jobs[0].job.submit_line, "", "new column reads as empty");
    assert_eq!(jobs[0].job.requid, None, "requid of old rows is unset");
    assert_eq!(
        jobs[0].job.suspended_secs, 0,
        "old rows were never suspended"
    );
    // The upgraded schema takes new records (with the new columns).
    let mut j = job(43, "ann", "root", JobState::Completed);
    j.submit_line = "sbatch x.sh".into();
    j.suspended_secs = 17;
    j.suspend_start = Some(1_000);
    s.ingest(vec![rec("old", 1, AcctRecord::JobEnd(j))])
        .await
        .unwrap();
    let back = s
        .jobs(&JobQuery {
            clusters: vec!["old".into()],
            ..Default::default()
        })
        .await
        .unwrap();
    let new = back.iter().find(|r| r.job.job_id == 43).unwrap();
    assert_eq!(new.job.suspended_secs, 17);
    assert_eq!(new.job.suspend_start, Some(1_000));
    assert_eq!(jobs[0].job.suspend_start, None);
    s.close().await;

    // Opening at the latest version again changes nothing.
    let s = db.open(Migrate::Latest).await;
    assert_eq!(s.schema_version().await.unwrap(), schema::LATEST);
    // A newer daemon ran here: refuse, clearly.
    s.force_schema_version(99).await.unwrap();
    s.close().await;
    let e = Storage::open(&db.target).await.unwrap_err();
    assert!(
        matches!(
            e,
            StorageError::NewerSchema {
                found: 99,
                supported: schema::LATEST
            }
        ),
        "{e}"
    );
    assert!(
        e.to_string().contains("newer than this slurmdbd supports"),
        "{e}"
    );
}

/// Coordinators: made of accounts that exist, for users that exist; they
/// coordinate the sub-accounts too; listed on users and accounts; removed
/// by user, by account, or with the user or account.
async fn coordinators(s: &Storage) {
    s.add_clusters(vec![ClusterRec {
        name: "cc".into(),
        ..Default::default()
    }])
    .await
    .unwrap();
    for (name, parent) in [("qphys", None), ("qlab", Some("qphys")), ("qchem", None)] {
        s.add_accounts(&AddAccounts {
            names: vec![name.into()],
            parent: parent.map(String::from),
            clusters: vec!["cc".into()],
            ..Default::default()
        })
        .await
        .unwrap();
    }
    for (name, acct) in [("qann", "qphys"), ("qbob", "qchem"), ("qcid", "qlab")] {
        s.add_users(&AddUsers {
            names: vec![name.into()],
            default_account: Some(acct.into()),
            accounts: vec![acct.into()],
            clusters: vec!["cc".into()],
            ..Default::default()
        })
        .await
        .unwrap();
    }
    let change = |users: &[&str], accounts: &[&str]| CoordChange {
        users: users.iter().map(|u| u.to_string()).collect(),
        accounts: accounts.iter().map(|a| a.to_string()).collect(),
    };
    let user = |name: &'static str| async move {
        s.list_users(&UserFilter {
            names: vec![name.into()],
            ..Default::default()
        })
        .await
        .unwrap()
        .remove(0)
    };
    // Nothing that does not exist, nothing without both lists.
    let r = s.add_coords(&change(&["qann"], &["nosuch"])).await;
    assert!(
        matches!(&r, Err(StorageError::NotFound(m)) if m.contains("'nosuch'")),
        "{r:?}"
    );
    let r = s.add_coords(&change(&["nosuch"], &["qphys"])).await;
    assert!(
        matches!(&r, Err(StorageError::NotFound(m)) if m.contains("'nosuch'")),
        "{r:?}"
    );
    assert!(s.add_coords(&change(&[], &["qphys"])).await.is_err());
    assert!(user("qann").await.coord_accounts.is_empty());
    // Ann coordinates phys, and so lab below it; Bob chem.
    assert_eq!(
        s.add_coords(&change(&["QAnn"], &["QPHYS"])).await.unwrap(),
        ["qann"]
    );
    assert_eq!(
        s.add_coords(&change(&["qbob"], &["qchem"])).await.unwrap(),
        ["qbob"]
    );
    // A coordinator's account (only new names): an existing one is refused.
    let r = s
        .add_accounts(&AddAccounts {
            names: vec!["qchem".into()],
            parent: Some("qphys".into()),
            clusters: vec!["cc".into()],
            only_new: true,
            ..Default::default()
        })
        .await;
    assert!(
        matches!(&r, Err(StorageError::Exists(m)) if m.contains("'qchem'")),
        "{r:?}"
    );
    // Again: nothing new, no error.
    assert!(s
        .add_coords(&change(&["qann"], &["qphys"]))
        .await
        .unwrap()
        .is_empty());
    let ann = user("qann").await;
    assert_eq!(ann.coord_accounts, ["qlab", "qphys"]);
    assert_eq!(ann.coord_direct, ["qphys"]);
    assert!(ann.coordinates("qlab") && !ann.coordinates("qchem"));
    let accounts = s.list_accounts(&AccountFilter::default()).await.unwrap();
    let coords_of = |a: &str| {
        accounts
            .iter()
            .find(|x| x.name == a)
            .map(|x| x.coordinators.clone())
            .unwrap()
    };
    assert_eq!(coords_of("qphys"), ["qann"]);
    assert!(
        coords_of("qlab").is_empty(),
        "only those made so are listed"
    );
    // Removed by account: every coordinator of it.
    let r = s.remove_coords(&change(&[], &["qchem"])).await.unwrap();
    assert_eq!(r, [format!("U = {:<9} A = {:<10}", "qbob", "qchem")]);
    assert!(user("qbob").await.coord_accounts.is_empty());
    let r = s.remove_coords(&change(&["qbob"], &[])).await;
    assert!(matches!(r, Err(StorageError::NotFound(_))), "{r:?}");
    // Deleting the user takes its coordinatorships with it.
    s.add_coords(&change(&["qcid"], &["qchem"])).await.unwrap();
    s.delete_users(&UserFilter {
        names: vec!["qcid".into()],
        ..Default::default()
    })
    .await
    .unwrap();
    let r = s.remove_coords(&change(&["qcid"], &[])).await;
    assert!(matches!(r, Err(StorageError::NotFound(_))), "{r:?}");
    s.remove_coords(&change(&["qann"], &["qphys"]))
        .await
        .unwrap();
    assert!(user("qann").await.coord_accounts.is_empty());
}

async fn account_tree(s: &Storage) {
    let added = s
        .add_clusters(vec![
            ClusterRec {
                name: "C1".into(),
                ..Default::default()
            },
            ClusterRec {
                name: "c2".into(),
                ..Default::default()
            },
        ])
        .await
        .unwrap();
    assert_eq!(added, vec!["c1", "c2"]);
    let again = s
        .add_clusters(vec![ClusterRec {
            name: "c1".into(),
            ..Default::default()
        }])
        .await;
    assert!(matches!(again, Err(StorageError::Exists(_))), "{again:?}");
    let c1 = || AssocFilter {
        clusters: vec!["c1".into()],
        ..Default::default()
    };
    assert_eq!(
        names(&assocs(s, c1()).await),
        vec!["c1:root", "c1:root/root"]
    );

    s.add_accounts(&AddAccounts {
        names: vec!["physics".into()],
        description: Some("Physics dept".into()),
        ..Default::default()
    })
    .await
    .unwrap();
    s.add_accounts(&AddAccounts {
        names: vec!["theory".into(), "Lab".into()],
        parent: Some("physics".into()),
        clusters: vec!["c1".into()],
        ..Default::default()
    })
    .await
    .unwrap();
    let e = s
        .add_accounts(&AddAccounts {
            names: vec!["x".into()],
            parent: Some("theory".into()),
            clusters: vec!["c2".into()],
            ..Default::default()
        })
        .await
        .unwrap_err();
    assert!(
        e.to_string()
            .contains("parent account 'theory' does not exist on cluster 'c2'"),
        "{e}"
    );
    assert!(
        s.list_accounts(&AccountFilter {
            names: vec!["x".into()],
            ..Default::default()
        })
        .await
        .unwrap()
        .is_empty(),
        "a refused request changes nothing"
    );
    let e = s
        .add_accounts(&AddAccounts {
            names: vec!["a b".into()],
            ..Default::default()
        })
        .await
        .unwrap_err();
    assert!(matches!(e, StorageError::Invalid(_)), "{e}");

    let accts = s.list_accounts(&AccountFilter::default()).await.unwrap();
    let physics = accts.iter().find(|a| a.name == "physics").unwrap();
    assert_eq!(physics.description, "Physics dept");
    assert_eq!(physics.organization, "physics");
    let lab = accts.iter().find(|a| a.name == "lab").unwrap();
    assert_eq!(
        (lab.description.as_str(), lab.organization.as_str()),
        ("lab", "physics")
    );
    let kids = s
        .list_accounts(&AccountFilter {
            parents: vec!["physics".into()],
            ..Default::default()
        })
        .await
        .unwrap();
    assert_eq!(
        kids.iter().map(|a| a.name.as_str()).collect::<Vec<_>>(),
        vec!["lab", "theory"]
    );

    s.add_users(&AddUsers {
        names: vec!["alice".into()],
        default_account: Some("theory".into()),
        accounts: vec!["theory".into(), "lab".into()],
        ..Default::default()
    })
    .await
    .unwrap();
    // Tree order: each account, its users, then its sub-accounts.
    assert_eq!(
        names(&assocs(s, c1()).await),
        vec![
            "c1:root",
            "c1:root/root",
            "c1:physics",
            "c1:lab",
            "c1:lab/alice",
            "c1:theory",
            "c1:theory/alice"
        ]
    );
    let tree = s.account_children("c1").await.unwrap();
    assert_eq!(tree["physics"], vec!["lab", "theory"]);

    // Move lab under root; a loop is refused.
    s.modify_accounts(
        &AccountFilter {
            names: vec!["lab".into()],
            ..Default::default()
        },
        &AccountPatch::default(),
        &AssocPatch {
            parent: Set::To("root".into()),
            ..Default::default()
        },
    )
    .await
    .unwrap();
    let e = s
        .modify_accounts(
            &AccountFilter {
                names: vec!["physics".into()],
                clusters: vec!["c1".into()],
                ..Default::default()
            },
            &AccountPatch::default(),
            &AssocPatch {
                parent: Set::To("theory".into()),
                ..Default::default()
            },
        )
        .await
        .unwrap_err();
    assert!(e.to_string().contains("own descendant"), "{e}");
    s.modify_accounts(
        &AccountFilter {
            names: vec!["theory".into()],
            ..Default::default()
        },
        &AccountPatch {
            description: Set::To("Theory group".into()),
            ..Default::default()
        },
        &AssocPatch::default(),
    )
    .await
    .unwrap();
    let t = s
        .list_accounts(&AccountFilter {
            names: vec!["theory".into()],
            ..Default::default()
        })
        .await
        .unwrap();
    assert_eq!(t[0].description, "Theory group");

    // Deletes that would orphan something are refused.
    let e = s
        .delete_accounts(&AccountFilter {
            names: vec!["physics".into()],
            ..Default::default()
        })
        .await
        .unwrap_err();
    assert!(matches!(e, StorageError::InUse(_)), "{e}");
    assert!(e.to_string().contains("sub-account 'theory'"), "{e}");
    let e = s
        .delete_accounts(&AccountFilter {
            names: vec!["theory".into()],
            ..Default::default()
        })
        .await
        .unwrap_err();
    assert!(
        e.to_string().contains("default account of user 'alice'"),
        "{e}"
    );
    // lab goes, with alice's association in it.
    let gone = s
        .delete_accounts(&AccountFilter {
            names: vec!["lab".into()],
            ..Default::default()
        })
        .await
        .unwrap();
    assert!(gone.contains(&"lab".to_string()), "{gone:?}");
    assert!(
        gone.contains(&"C = c1 A = lab U = alice".to_string()),
        "{gone:?}"
    );
    assert_eq!(
        names(&assocs(s, c1()).await),
        vec![
            "c1:root",
            "c1:root/root",
            "c1:physics",
            "c1:theory",
            "c1:theory/alice"
        ]
    );
    let e = s
        .delete_accounts(&AccountFilter {
            names: vec!["root".into()],
            ..Default::default()
        })
        .await
        .unwrap_err();
    assert!(matches!(e, StorageError::Invalid(_)));
    // Clusters can go; their associations with them.
    s.add_clusters(vec![ClusterRec {
        name: "c3".into(),
        ..Default::default()
    }])
    .await
    .unwrap();
    s.delete_clusters(&ClusterFilter {
        names: vec!["c3".into()],
    })
    .await
    .unwrap();
    assert!(assocs(
        s,
        AssocFilter {
            clusters: vec!["c3".into()],
            ..Default::default()
        }
    )
    .await
    .is_empty());
}

async fn qos_crud(s: &Storage) {
    let high = QosRec {
        name: "High".into(),
        description: "high priority".into(),
        priority: 100,
        flags: vec!["DenyOnLimit".into()],
        preempt: vec!["normal".into()],
        preempt_mode: "requeue".into(),
        limits: QosLimits {
            max_jobs_per_user: Some(2),
            max_tres_per_job: Some("cpu=16,mem=4G".into()),
            max_tres_per_user: Some("cpu=32".into()),
            max_wall: Some(120),
            grp_jobs: Some(20),
            grp_tres: Some("cpu=64".into()),
            ..Default::default()
        },
        ..Default::default()
    };
    assert_eq!(s.add_qos(vec![high.clone()]).await.unwrap(), vec!["high"]);
    let e = s.add_qos(vec![high.clone()]).await.unwrap_err();
    assert!(matches!(e, StorageError::Exists(_)), "{e}");
    let bad = |q: QosRec| async move { s.add_qos(vec![q]).await.unwrap_err() };
    let e = bad(QosRec {
        name: "x".into(),
        flags: vec!["Sparkly".into()],
        ..Default::default()
    })
    .await;
    assert!(e.to_string().contains("unknown flag 'SPARKLY'"), "{e}");
    let e = bad(QosRec {
        name: "x".into(),
        preempt: vec!["nope".into()],
        ..Default::default()
    })
    .await;
    assert!(matches!(e, StorageError::NotFound(_)), "{e}");
    let e = bad(QosRec {
        name: "x".into(),
        preempt_mode: "explode".into(),
        ..Default::default()
    })
    .await;
    assert!(e.to_string().contains("PreemptMode"), "{e}");
    let e = bad(QosRec {
        name: "x".into(),
        limits: QosLimits {
            grp_tres: Some("cpu=lots".into()),
            ..Default::default()
        },
        ..Default::default()
    })
    .await;
    assert!(e.to_string().contains("GrpTRES"), "{e}");

    let got = s
        .list_qos(&QosFilter {
            names: vec!["high".into()],
            ..Default::default()
        })
        .await
        .unwrap();
    assert_eq!(got.len(), 1);
    let h = &got[0];
    assert_eq!(h.priority, 100);
    assert_eq!(h.flags, vec!["DENYONLIMIT"]);
    assert_eq!(h.preempt, vec!["normal"]);
    assert_eq!(h.preempt_mode, "requeue");
    assert_eq!(h.usage_factor, 1.0);
    assert_eq!(h.limits.max_jobs_per_user, Some(2));
    assert_eq!(
        h.limits.max_tres_per_job.as_deref(),
        Some("cpu=16,mem=4096M")
    );
    assert_eq!(h.limits.max_wall, Some(120));
    let all = s.list_qos(&QosFilter::default()).await.unwrap();
    assert_eq!(
        all.iter().map(|q| q.name.as_str()).collect::<Vec<_>>(),
        vec!["normal", "high"]
    );

    s.modify_qos(
        &QosFilter {
            names: vec!["high".into()],
            ..Default::default()
        },
        &QosPatch {
            priority: Set::To(200),
            flags: ListChange::Add(vec!["NoDecay".into()]),
            usage_factor: Set::To(2.5),
            limits: QosLimitsPatch {
                max_jobs_per_user: Set::Clear,
                max_submit_jobs_per_user: Set::To(5),
                max_tres_per_job: Set::To("mem=-1,node=2".into()),
                ..Default::default()
            },
            ..Default::default()
        },
    )
    .await
    .unwrap();
    let h = &s
        .list_qos(&QosFilter {
            names: vec!["high".into()],
            ..Default::default()
        })
        .await
        .unwrap()[0];
    assert_eq!(h.priority, 200);
    assert_eq!(h.flags, vec!["DENYONLIMIT", "NODECAY"]);
    assert_eq!(h.usage_factor, 2.5);
    assert_eq!(h.limits.max_jobs_per_user, None);
    assert_eq!(h.limits.max_submit_jobs_per_user, Some(5));
    assert_eq!(h.limits.max_tres_per_job.as_deref(), Some("cpu=16,node=2"));
    assert_eq!(h.limits.grp_jobs, Some(20), "untouched");

    // A deleted QOS leaves association lists and preempt lists.
    s.add_qos(vec![QosRec {
        name: "low".into(),
        ..Default::default()
    }])
    .await
    .unwrap();
    s.modify_qos(
        &QosFilter {
            names: vec!["high".into()],
            ..Default::default()
        },
        &QosPatch {
            preempt: ListChange::Add(vec!["low".into()]),
            ..Default::default()
        },
    )
    .await
    .unwrap();
    s.modify_assocs(
        &AssocFilter {
            clusters: vec!["c2".into()],
            accounts: vec!["root".into()],
            only_accounts: true,
            ..Default::default()
        },
        &AssocPatch {
            qos: ListChange::Add(vec!["low".into()]),
            default_qos: Set::To("low".into()),
            ..Default::default()
        },
    )
    .await
    .unwrap();
    s.delete_qos(&QosFilter {
        names: vec!["low".into()],
        ..Default::default()
    })
    .await
    .unwrap();
    let h = &s
        .list_qos(&QosFilter {
            names: vec!["high".into()],
            ..Default::default()
        })
        .await
        .unwrap()[0];
    assert_eq!(h.preempt, vec!["normal"]);
    let root2 = &assocs(
        s,
        AssocFilter {
            clusters: vec!["c2".into()],
            accounts: vec!["root".into()],
            only_accounts: true,
            ..Default::default()
        },
    )
    .await[0];
    assert_eq!(
        (root2.qos.clone(), root2.default_qos.clone()),
        (vec!["normal".to_string()], None)
    );
}

async fn assoc_limits(s: &Storage) {
    s.add_users(&AddUsers {
        names: vec!["Bob".into()],
        default_account: Some("physics".into()),
        assoc: AssocSettings {
            shares: Some(5),
            limits: AssocLimits {
                max_jobs: Some(10),
                max_wall: Some(60),
                grp_tres: Some("mem=2G,cpu=100".into()),
                ..Default::default()
            },
            ..Default::default()
        },
        ..Default::default()
    })
    .await
    .unwrap();
    let bob = || AssocFilter {
        users: vec!["bob".into()],
        ..Default::default()
    };
    let got = assocs(s, bob()).await;
    assert_eq!(names(&got), vec!["c1:physics/bob", "c2:physics/bob"]);
    let a = &got[0];
    assert_eq!(a.shares, 5);
    assert_eq!(a.parent.as_deref(), Some("physics"));
    assert_eq!(a.limits.max_jobs, Some(10));
    assert_eq!(a.limits.max_wall, Some(60));
    assert_eq!(a.limits.grp_tres.as_deref(), Some("cpu=100,mem=2048M"));
    assert_eq!(a.qos, vec!["normal"], "inherited from the parent");
    let users = s.list_users(&UserFilter::default()).await.unwrap();
    let b = users.iter().find(|u| u.name == "bob").unwrap();
    assert_eq!(
        (b.default_account.as_str(), b.admin_level),
        ("physics", AdminLevel::None)
    );

    s.modify_assocs(
        &AssocFilter {
            clusters: vec!["c1".into()],
            ..bob()
        },
        &AssocPatch {
            limits: AssocLimitsPatch {
                max_jobs: Set::Clear,
                max_submit_jobs: Set::To(20),
                grp_jobs: Set::To(5),
                grp_tres: Set::To("cpu=-1,node=4".into()),
                grp_tres_mins: Set::To("cpu=6000".into()),
                max_tres_per_user: Set::To("cpu=8".into()),
                max_tres: Set::To("gres/gpu=2".into()),
                ..Default::default()
            },
            qos: ListChange::Add(vec!["high".into()]),
            default_qos: Set::To("high".into()),
            shares: Set::To(FAIRSHARE_PARENT),
            ..Default::default()
        },
    )
    .await
    .unwrap();
    let got = assocs(s, bob()).await;
    let (a, other) = (&got[0], &got[1]);
    assert_eq!(a.limits.max_jobs, None);
    assert_eq!(a.limits.max_submit_jobs, Some(20));
    assert_eq!(a.limits.grp_jobs, Some(5));
    assert_eq!(a.limits.grp_tres.as_deref(), Some("mem=2048M,node=4"));
    assert_eq!(a.limits.grp_tres_mins.as_deref(), Some("cpu=6000"));
    assert_eq!(a.limits.max_tres_per_user.as_deref(), Some("cpu=8"));
    assert_eq!(a.limits.max_tres.as_deref(), Some("gres/gpu=2"));
    assert_eq!(a.qos, vec!["normal", "high"]);
    assert_eq!(a.default_qos.as_deref(), Some("high"));
    assert_eq!(a.shares, FAIRSHARE_PARENT);
    assert_eq!(other.limits.max_jobs, Some(10), "c2 untouched");

    // Refused changes leave everything as it was.
    for (patch, msg) in [
        (
            AssocPatch {
                limits: AssocLimitsPatch {
                    max_tres: Set::To("gpu=2".into()),
                    max_jobs: Set::To(1),
                    ..Default::default()
                },
                ..Default::default()
            },
            "unknown TRES 'gpu'",
        ),
        (
            AssocPatch {
                default_qos: Set::To("nonexistent".into()),
                ..Default::default()
            },
            "QOS 'nonexistent' does not exist",
        ),
        (
            AssocPatch {
                qos: ListChange::Remove(vec!["high".into()]),
                ..Default::default()
            },
            "default QOS 'high' is not in its QOS list",
        ),
        (
            AssocPatch {
                parent: Set::To("root".into()),
                ..Default::default()
            },
            "only account associations have a parent",
        ),
    ] {
        let e = s.modify_assocs(&bob(), &patch).await.unwrap_err();
        assert!(e.to_string().contains(msg), "{e}");
    }
    assert_eq!(assocs(s, bob()).await, got);

    // Account associations take limits too (all clusters).
    s.modify_accounts(
        &AccountFilter {
            names: vec!["physics".into()],
            ..Default::default()
        },
        &AccountPatch::default(),
        &AssocPatch {
            shares: Set::To(10),
            limits: AssocLimitsPatch {
                grp_jobs: Set::To(50),
                grp_wall: Set::To(600),
                ..Default::default()
            },
            ..Default::default()
        },
    )
    .await
    .unwrap();
    for a in assocs(
        s,
        AssocFilter {
            accounts: vec!["physics".into()],
            only_accounts: true,
            ..Default::default()
        },
    )
    .await
    {
        assert_eq!(
            (a.shares, a.limits.grp_jobs, a.limits.grp_wall),
            (10, Some(50), Some(600))
        );
    }

    // Per-partition associations.
    s.add_users(&AddUsers {
        names: vec!["bob".into()],
        accounts: vec!["physics".into()],
        clusters: vec!["c1".into()],
        partitions: vec!["debug".into()],
        ..Default::default()
    })
    .await
    .unwrap();
    assert_eq!(
        names(&assocs(s, bob()).await),
        vec!["c1:physics/bob", "c1:physics/bob@debug", "c2:physics/bob"]
    );
    let e = s
        .add_users(&AddUsers {
            names: vec!["bob".into()],
            accounts: vec!["physics".into()],
            clusters: vec!["c1".into()],
            partitions: vec!["debug".into()],
            ..Default::default()
        })
        .await
        .unwrap_err();
    assert!(matches!(e, StorageError::Exists(_)), "{e}");
    s.delete_users(&UserFilter {
        names: vec!["bob".into()],
        partitions: vec!["debug".into()],
        ..Default::default()
    })
    .await
    .unwrap();
    assert_eq!(
        names(&assocs(s, bob()).await),
        vec!["c1:physics/bob", "c2:physics/bob"]
    );

    // Users: admin levels and default accounts.
    s.add_users(&AddUsers {
        names: vec!["carol".into()],
        default_account: Some("theory".into()),
        admin_level: Some(AdminLevel::Operator),
        ..Default::default()
    })
    .await
    .unwrap();
    assert_eq!(
        s.admin_level("carol").await.unwrap(),
        Some(AdminLevel::Operator)
    );
    assert_eq!(s.admin_level("nobody-here").await.unwrap(), None);
    assert_eq!(
        s.admin_level("root").await.unwrap(),
        Some(AdminLevel::Administrator)
    );
    let e = s
        .add_users(&AddUsers {
            names: vec!["dave".into()],
            ..Default::default()
        })
        .await
        .unwrap_err();
    assert!(e.to_string().contains("needs a default account"), "{e}");
    let e = s
        .modify_users(
            &UserFilter {
                names: vec!["carol".into()],
                ..Default::default()
            },
            &UserPatch {
                default_account: Set::To("physics".into()),
                ..Default::default()
            },
            &AssocPatch::default(),
        )
        .await
        .unwrap_err();
    assert!(
        e.to_string()
            .contains("no association with account 'physics'"),
        "{e}"
    );
    s.modify_users(
        &UserFilter {
            names: vec!["carol".into()],
            ..Default::default()
        },
        &UserPatch {
            admin_level: Set::To(AdminLevel::Administrator),
            ..Default::default()
        },
        &AssocPatch::default(),
    )
    .await
    .unwrap();
    let admins = s
        .list_users(&UserFilter {
            admin_levels: vec![AdminLevel::Administrator],
            ..Default::default()
        })
        .await
        .unwrap();
    assert_eq!(
        admins.iter().map(|u| u.name.as_str()).collect::<Vec<_>>(),
        vec!["carol", "root"]
    );
    let in_theory = s
        .list_users(&UserFilter {
            accounts: vec!["theory".into()],
            ..Default::default()
        })
        .await
        .unwrap();
    assert_eq!(
        in_theory
            .iter()
            .map(|u| u.name.as_str())
            .collect::<Vec<_>>(),
        vec!["alice", "carol"]
    );
    s.delete_users(&UserFilter {
        names: vec!["carol".into()],
        ..Default::default()
    })
    .await
    .unwrap();
    assert!(assocs(
        s,
        AssocFilter {
            users: vec!["carol".into()],
            ..Default::default()
        }
    )
    .await
    .is_empty());
    // Deleting an account association with users under it is refused.
    let e = s
        .delete_assocs(&AssocFilter {
            accounts: vec!["theory".into()],
            only_accounts: true,
            ..Default::default()
        })
        .await
        .unwrap_err();
    assert!(e.to_string().contains("still has user 'alice'"), "{e}");
}

fn many(cluster: &str, first_seq: u64, jobs: std::ops::Range<u32>) -> Vec<SeqRecord> {
    let mut v = Vec::new();
    let mut seq = first_seq;
    for id in jobs {
        let mut j = job(id, "u1", "physics", JobState::Running);
        j.start_time = Some(T + 10);
        v.push(rec(cluster, seq, AcctRecord::JobStart(j.clone())));
        let step = AcctStep {
            job_id: id,
            job_submit: T,
            step_id: BATCH_STEP,
            name: "batch".into(),
            state: JobState::Completed.into(),
            start_time: T + 10,
            end_time: Some(T + 20),
            ..Default::default()
        };
        v.push(rec(cluster, seq + 1, AcctRecord::StepEnd(step)));
        j.state = JobState::Completed.into();
        j.end_time = Some(T + 20);
        v.push(rec(cluster, seq + 2, AcctRecord::JobEnd(j)));
        seq += 3;
    }
    v
}

async fn count_jobs(s: &Storage, cluster: &str) -> (usize, usize) {
    let rows = s
        .jobs(&JobQuery {
            clusters: vec![cluster.into()],
            with_steps: true,
            ..Default::default()
        })
        .await
        .unwrap();
    (rows.len(), rows.iter().map(|r| r.steps.len()).sum())
}

async fn idempotent_ingest(s: &Storage) {
    let batch = many("ing", 1, 1..101);
    let o = s.ingest(batch.clone()).await.unwrap();
    assert_eq!((o.applied, o.duplicates), (300, 0));
    assert_eq!(
        o.clusters,
        vec![ClusterAck {
            cluster: "ing".into(),
            epoch: 0,
            through: 300
        }]
    );
    // The same batch again: nothing changes.
    let o = s.ingest(batch.clone()).await.unwrap();
    assert_eq!((o.applied, o.duplicates), (0, 300));
    assert_eq!(count_jobs(s, "ing").await, (100, 100));
    let rows = s
        .jobs(&JobQuery {
            clusters: vec!["ing".into()],
            job_ids: vec![7],
            ..Default::default()
        })
        .await
        .unwrap();
    assert_eq!(
        rows[0].job.state.0,
        JobState::Completed,
        "the last record wins"
    );
    // The cluster registered itself, with its root associations.
    assert_eq!(
        names(
            &assocs(
                s,
                AssocFilter {
                    clusters: vec!["ing".into()],
                    ..Default::default()
                }
            )
            .await
        ),
        vec!["ing:root", "ing:root/root"]
    );

    // A resend overlapping new records applies only the new ones.
    let mut mixed: Vec<SeqRecord> = batch[290..].to_vec();
    mixed.extend(many("ing", 301, 101..103));
    let o = s.ingest(mixed).await.unwrap();
    assert_eq!(
        (o.applied, o.duplicates, o.clusters[0].through),
        (6, 10, 306)
    );

    // After a gap: applied and remembered, the mark waits for the gap.
    let late = many("ing", 310, 110..111);
    let o = s.ingest(late.clone()).await.unwrap();
    assert_eq!((o.applied, o.clusters[0].through), (3, 306));
    let o = s.ingest(many("ing", 307, 107..108)).await.unwrap();
    assert_eq!((o.applied, o.clusters[0].through), (3, 312));
    let o = s.ingest(late).await.unwrap();
    assert_eq!((o.applied, o.duplicates), (0, 3));
    assert_eq!(count_jobs(s, "ing").await, (104, 104));

    // The same batch sent twice at once still lands once.
    let b2 = many("ing", 313, 200..250);
    let (r1, r2) = tokio::join!(s.ingest(b2.clone()), s.ingest(b2.clone()));
    let (r1, r2) = (r1.unwrap(), r2.unwrap());
    assert_eq!(r1.applied + r2.applied, 150);
    assert_eq!(r1.duplicates + r2.duplicates, 150);
    assert_eq!(count_jobs(s, "ing").await, (154, 154));

    // A bad record refuses the whole batch.
    let mut bad = many("ing", 500, 300..301);
    bad.push(rec(
        "ing",
        0,
        AcctRecord::JobStart(job(301, "u", "a", JobState::Pending)),
    ));
    let e = s.ingest(bad).await.unwrap_err();
    assert!(e.to_string().contains("start at 1"), "{e}");
    let mut odd = job(302, "u", "a", JobState::Running);
    odd.start_time = Some(i64::MIN);
    let e = s
        .ingest(vec![rec("ing", 500, AcctRecord::JobStart(odd))])
        .await
        .unwrap_err();
    assert!(e.to_string().contains("not a plausible Unix time"), "{e}");
    assert_eq!(count_jobs(s, "ing").await, (154, 154));

    // A controller whose state was wiped starts a new epoch: its seq 1 is new.
    let mut fresh = many("ing", 1, 400..401);
    for r in &mut fresh {
        r.epoch = u64::MAX;
    }
    let o = s.ingest(fresh.clone()).await.unwrap();
    assert_eq!(
        (o.applied, o.clusters[0].epoch, o.clusters[0].through),
        (3, u64::MAX, 3)
    );
    assert_eq!(s.ingest(fresh).await.unwrap().duplicates, 3);
    assert_eq!(count_jobs(s, "ing").await, (155, 155));

    // Cluster size and node events.
    s.ingest(vec![
        rec(
            "ing",
            463,
            AcctRecord::ClusterInfo(ClusterInfo {
                control_host: "head".into(),
                control_port: 6817,
                cpus: 64,
                nodes: 4,
                tres: "cpu=64,mem=1000M,node=4".into(),
                time: T,
            }),
        ),
        rec(
            "ing",
            464,
            AcctRecord::NodeState(NodeEvent {
                node: "n1".into(),
                state: "DOWN".into(),
                reason: Some("disk".into()),
                cpus: 16,
                time: T + 5,
                ..Default::default()
            }),
        ),
    ])
    .await
    .unwrap();
    let c = &s
        .list_clusters(&ClusterFilter {
            names: vec!["ing".into()],
        })
        .await
        .unwrap()[0];
    assert_eq!((c.cpus, c.nodes, c.control_port), (64, 4, 6817));
    assert_eq!(c.control_host, "head");
}

/// Scripts and environments (AccountingStoreFlags): kept once per content,
/// not cleared by a job's later records, answered only when asked for;
/// one of 100 KiB fits every backend.
async fn job_texts(s: &Storage) {
    let same = "#!/bin/sh\necho same\n".to_string();
    let big = format!("#!/bin/sh\n{}\n", "# padding\n".repeat(10_240));
    let mut first = job(50, "alice", "physics", JobState::Running);
    first.script = Some(same.clone());
    first.env = Some("MARK=42\nPATH=/bin\n".into());
    let mut twin = job(51, "bob", "physics", JobState::Running);
    twin.script = Some(same.clone());
    let mut large = job(52, "bob", "physics", JobState::Running);
    large.script = Some(big.clone());
    let mut later = job(50, "alice", "physics", JobState::Completed);
    later.start_time = Some(T + 10);
    later.end_time = Some(T + 20);
    let recs = vec![
        rec("texts", 1, AcctRecord::JobStart(first)),
        rec("texts", 2, AcctRecord::JobStart(twin)),
        rec("texts", 3, AcctRecord::JobStart(large)),
        rec("texts", 4, AcctRecord::JobEnd(later)),
    ];
    s.ingest(recs).await.unwrap();
    let q = |with_script, with_env| JobQuery {
        clusters: vec!["texts".into()],
        job_ids: vec![50, 51, 52],
        with_script,
        with_env,
        ..Default::default()
    };
    let rows = s.jobs(&q(true, false)).await.unwrap();
    let scripts: Vec<(u32, Option<&str>)> = rows
        .iter()
        .map(|r| (r.job.job_id, r.job.script.as_deref()))
        .collect();
    assert_eq!(
        scripts,
        vec![
            (50, Some(same.as_str())),
            (51, Some(same.as_str())),
            (52, Some(big.as_str()))
        ]
    );
    assert!(rows.iter().all(|r| r.job.env.is_none()), "not asked for");
    assert_eq!(rows[0].job.state.0, JobState::Completed);
    let rows = s.jobs(&q(false, true)).await.unwrap();
    assert_eq!(rows[0].job.env.as_deref(), Some("MARK=42\nPATH=/bin\n"));
    assert_eq!(
        (rows[1].job.env.as_deref(), rows[0].job.script.as_deref()),
        (None, None)
    );
    let rows = s.jobs(&q(false, false)).await.unwrap();
    assert!(rows
        .iter()
        .all(|r| r.job.script.is_none() && r.job.env.is_none()));
    // (The purge in `rollups` takes job 50 and its environment; see there.)
}

async fn job_queries(s: &Storage) {
    let mut recs = Vec::new();
    let mut seq = 0;
    let mut push = |r: AcctRecord| {
        seq += 1;
        recs.push(rec("q", seq, r));
    };
    let mut j1 = job(1, "alice", "physics", JobState::Completed);
    j1.partition = "debug".into();
    j1.start_time = Some(T + 10);
    j1.end_time = Some(T + 3610);
    j1.alloc_cpus = 4;
    j1.nodelist = "n1,n2,n3".into();
    j1.node_count = 3;
    j1.time_limit = None;
    push(AcctRecord::JobEnd(j1));
    for (id, name) in [(BATCH_STEP, "batch"), (0, "hostname"), (1, "a.out")] {
        push(AcctRecord::StepEnd(AcctStep {
            job_id: 1,
            job_submit: T,
            step_id: id,
            name: name.into(),
            state: JobState::Completed.into(),
            nodelist: "n1".into(),
            start_time: T + 20,
            end_time: Some(T + 30),
            total_cpu_usec: 1_500_000,
            max_rss_kib: 2048,
            max_rss_node: "n1".into(),
            ..Default::default()
        }));
    }
    let mut j2 = job(2, "bob", "chem", JobState::Failed);
    j2.submit_time = T + 100;
    j2.start_time = Some(T + 200);
    j2.end_time = Some(T + 300);
    j2.exit_status = 1 << 8;
    push(AcctRecord::JobEnd(j2));
    let mut j3 = job(3, "alice", "physics", JobState::Running);
    j3.submit_time = T + 1000;
    j3.start_time = Some(T + 1100);
    push(AcctRecord::JobStart(j3));
    let mut j4 = job(4, "carol", "physics", JobState::Pending);
    j4.submit_time = T + 2000;
    push(AcctRecord::JobStart(j4));
    let mut j6 = job(6, "dan", "physics", JobState::Completed);
    j6.array_job_id = Some(5);
    j6.array_task_id = Some(1);
    j6.submit_time = T + 4500;
    j6.start_time = Some(T + 4600);
    j6.end_time = Some(T + 5000);
    push(AcctRecord::JobEnd(j6));
    let mut j7 = job(7, "dan", "physics", JobState::Cancelled);
    j7.submit_time = T + 50;
    j7.end_time = Some(T + 60);
    push(AcctRecord::JobEnd(j7));
    s.ingest(recs).await.unwrap();

    let ids = |q: JobQuery| async move {
        let q = JobQuery {
            clusters: vec!["q".into()],
            ..q
        };
        s.jobs(&q)
            .await
            .unwrap()
            .iter()
            .map(|r| r.job.job_id)
            .collect::<Vec<_>>()
    };
    assert_eq!(ids(JobQuery::default()).await, vec![1, 7, 2, 3, 4, 6]);
    let one = s
        .jobs(&JobQuery {
            clusters: vec!["q".into()],
            job_ids: vec![1],
            with_steps: true,
            ..Default::default()
        })
        .await
        .unwrap();
    assert_eq!(one.len(), 1);
    let j = &one[0].job;
    assert_eq!(j.nodelist, "n[1-3]");
    assert_eq!(
        (j.alloc_cpus, j.time_limit, j.end_time),
        (4, None, Some(T + 3610))
    );
    let steps: Vec<u32> = one[0].steps.iter().map(|s| s.step_id).collect();
    assert_eq!(steps, vec![BATCH_STEP, 0, 1]);
    assert_eq!(one[0].steps[0].total_cpu_usec, 1_500_000);
    assert_eq!(one[0].steps[0].max_rss_kib, 2048);
    assert_eq!(
        ids(JobQuery {
            job_ids: vec![5],
            ..Default::default()
        })
        .await,
        vec![6]
    );
    assert_eq!(
        ids(JobQuery {
            users: vec!["alice".into()],
            ..Default::default()
        })
        .await,
        vec![1, 3]
    );
    assert_eq!(
        ids(JobQuery {
            accounts: vec!["Chem".into()],
            ..Default::default()
        })
        .await,
        vec![2]
    );
    assert_eq!(
        ids(JobQuery {
            partitions: vec!["debug".into()],
            ..Default::default()
        })
        .await,
        vec![1]
    );
    let failed = s
        .jobs(&JobQuery {
            clusters: vec!["q".into()],
            states: vec![JobState::Failed],
            ..Default::default()
        })
        .await
        .unwrap();
    assert_eq!(failed.len(), 1);
    assert_eq!(failed[0].job.exit_status, 256);
    // Window without states: in the system at some point of it.
    assert_eq!(
        ids(JobQuery {
            start: Some(T + 3000),
            end: Some(T + 4000),
            ..Default::default()
        })
        .await,
        vec![1, 3, 4]
    );
    // Ran during the window.
    assert_eq!(
        ids(JobQuery {
            states: vec![JobState::Running],
            start: Some(T + 150),
            end: Some(T + 250),
            ..Default::default()
        })
        .await,
        vec![1, 2]
    );
    // Ended in the window.
    assert_eq!(
        ids(JobQuery {
            states: vec![JobState::Completed, JobState::Failed],
            start: Some(T + 250),
            end: Some(T + 4000),
            ..Default::default()
        })
        .await,
        vec![1, 2]
    );
    // Waited during the window.
    assert_eq!(
        ids(JobQuery {
            states: vec![JobState::Pending],
            start: Some(T + 1500),
            end: Some(T + 2500),
            ..Default::default()
        })
        .await,
        vec![4]
    );
    assert_eq!(
        ids(JobQuery {
            names: vec!["job3".into()],
            uids: vec![1003],
            ..Default::default()
        })
        .await,
        vec![3]
    );
    assert_eq!(
        ids(JobQuery {
            limit: Some(2),
            ..Default::default()
        })
        .await,
        vec![1, 7]
    );
    // A requeued job: its first run ended REQUEUED and its next run is a
    // record of its own (a later submit time). Without `duplicates` only
    // the last record of each job id; each run keeps its own steps.
    let mut first = job(8, "erin", "physics", JobState::Requeued);
    first.submit_time = T + 6000;
    first.start_time = Some(T + 6010);
    first.end_time = Some(T + 6100);
    let mut again = job(8, "erin", "physics", JobState::Running);
    again.submit_time = T + 6101;
    again.start_time = Some(T + 6200);
    let step = |submit: i64, state: JobState| {
        AcctRecord::StepEnd(AcctStep {
            job_id: 8,
            job_submit: submit,
            step_id: 0,
            name: "a.out".into(),
            state: state.into(),
            nodelist: "n1".into(),
            start_time: submit + 20,
            end_time: Some(submit + 30),
            ..Default::default()
        })
    };
    s.ingest(vec![
        rec("q", 10, AcctRecord::JobEnd(first)),
        rec("q", 11, step(T + 6000, JobState::Cancelled)),
        rec("q", 12, AcctRecord::JobStart(again)),
        rec("q", 13, step(T + 6101, JobState::Completed)),
    ])
    .await
    .unwrap();
    let runs = |duplicates: bool, states: Vec<JobState>| async move {
        s.jobs(&JobQuery {
            clusters: vec!["q".into()],
            job_ids: vec![8],
            with_steps: true,
            duplicates,
            states,
            ..Default::default()
        })
        .await
        .unwrap()
        .into_iter()
        .map(|r| {
            let steps: Vec<JobState> = r.steps.iter().map(|s| s.state.0).collect();
            (r.job.submit_time - T, r.job.state.0, steps)
        })
        .collect::<Vec<_>>()
    };
    assert_eq!(
        runs(false, vec![]).await,
        vec![(6101, JobState::Running, vec![JobState::Completed])]
    );
    assert_eq!(
        runs(true, vec![]).await,
        vec![
            (6000, JobState::Requeued, vec![JobState::Cancelled]),
            (6101, JobState::Running, vec![JobState::Completed])
        ]
    );
    assert_eq!(
        runs(false, vec![JobState::Requeued]).await,
        vec![(6000, JobState::Requeued, vec![JobState::Cancelled])]
    );
    assert_eq!(ids(JobQuery::default()).await, vec![1, 7, 2, 3, 4, 6, 8]);
}

async fn rollups(s: &Storage) {
    let mut j_a = job(1, "alice", "physics", JobState::Completed);
    j_a.alloc_cpus = 2;
    j_a.submit_time = D;
    j_a.start_time = Some(D + 1800);
    j_a.end_time = Some(D + 5400);
    let mut j_b = job(2, "bob", "chem", JobState::Completed);
    j_b.alloc_cpus = 4;
    j_b.submit_time = D;
    j_b.start_time = Some(D + 3600);
    j_b.end_time = Some(D + 3 * 3600);
    s.ingest(vec![
        rec(
            "r",
            1,
            AcctRecord::ClusterInfo(ClusterInfo {
                cpus: 10,
                time: D,
                ..Default::default()
            }),
        ),
        rec("r", 2, AcctRecord::JobEnd(j_a)),
        rec("r", 3, AcctRecord::JobEnd(j_b)),
        rec(
            "r",
            4,
            AcctRecord::NodeState(NodeEvent {
                node: "n1".into(),
                state: "DOWN".into(),
                reason: Some("dead".into()),
                cpus: 1,
                time: D + 7200,
                ..Default::default()
            }),
        ),
        rec(
            "r",
            5,
            AcctRecord::NodeState(NodeEvent {
                node: "n1".into(),
                state: "IDLE".into(),
                cpus: 1,
                time: D + 9000,
                ..Default::default()
            }),
        ),
    ])
    .await
    .unwrap();
    let now = D + 86_400 + 7200;
    let st = s.rollup(now).await.unwrap();
    // Other clusters have their own hours; this one rolled its 26.
    assert!(st.hours >= 26 && st.days >= 1, "{st:?}");
    let hourly = |t0: i64, t1: i64| async move {
        s.usage(&UsageQuery {
            clusters: vec!["r".into()],
            start: t0,
            end: t1,
            span: Some(Span::Hour),
            ..Default::default()
        })
        .await
        .unwrap()
    };
    let u = hourly(D, D + 3 * 3600).await;
    let rows: Vec<(u64, u64, u64, u64)> = u
        .clusters
        .iter()
        .map(|c| (c.total_secs, c.alloc_secs, c.down_secs, c.idle_secs))
        .collect();
    assert_eq!(
        rows,
        vec![
            (36_000, 3600, 0, 32_400),
            (36_000, 18_000, 0, 18_000),
            (36_000, 14_400, 1800, 19_800)
        ]
    );
    let day = |t0: i64, t1: i64| async move {
        s.usage(&UsageQuery {
            clusters: vec!["r".into()],
            start: t0,
            end: t1,
            total: true,
            ..Default::default()
        })
        .await
        .unwrap()
    };
    let u = day(D, D + 86_400).await;
    let by: Vec<(String, String, u64)> = u
        .assocs
        .iter()
        .map(|a| (a.account.clone(), a.user.clone(), a.alloc_secs))
        .collect();
    assert_eq!(
        by,
        vec![
            ("chem".into(), "bob".into(), 28_800),
            ("physics".into(), "alice".into(), 7200)
        ]
    );
    assert_eq!(u.clusters[0].total_secs, 864_000);
    assert_eq!(u.clusters[0].alloc_secs, 36_000);
    assert_eq!(u.clusters[0].down_secs, 1800);

    // Nothing new: nothing to do.
    let again = s.rollup(now).await.unwrap();
    assert_eq!(again.hours, 0, "{again:?}");

    // A late record about a rolled-up hour is counted once the next rollup runs.
    let mut j_c = job(3, "carol", "physics", JobState::Completed);
    j_c.submit_time = D;
    j_c.start_time = Some(D + 600);
    j_c.end_time = Some(D + 1200);
    s.ingest(vec![rec("r", 6, AcctRecord::JobEnd(j_c))])
        .await
        .unwrap();
    let st = s.rollup(now).await.unwrap();
    assert_eq!(st.hours, 26, "recomputed from the late record's hour");
    assert_eq!(hourly(D, D + 3600).await.clusters[0].alloc_secs, 4200);
    let u = day(D, D + 86_400).await;
    assert_eq!(u.clusters[0].alloc_secs, 36_600);
    assert!(u
        .assocs
        .iter()
        .any(|a| a.user == "carol" && a.alloc_secs == 600));
    // And once only, however often it is rolled.
    s.ingest(vec![rec(
        "r",
        6,
        AcctRecord::JobEnd(job(3, "carol", "physics", JobState::Completed)),
    )])
    .await
    .unwrap();
    s.rollup(now).await.unwrap();
    assert_eq!(day(D, D + 86_400).await.clusters[0].alloc_secs, 36_600);

    // Months roll up once complete.
    let m0 = floor_month(D);
    let m1 = next_month(D);
    let st = s.rollup(m1 + 3600).await.unwrap();
    assert!(st.months >= 1, "{st:?}");
    let u = s
        .usage(&UsageQuery {
            clusters: vec!["r".into()],
            start: m0,
            end: m1,
            total: true,
            ..Default::default()
        })
        .await
        .unwrap();
    assert_eq!(u.clusters[0].alloc_secs, 36_600);
    assert_eq!(
        u.clusters[0].total_secs,
        ((m1 - floor_day(D)) / 3600) as u64 * 36_000,
        "reported from the first activity to the month's end"
    );

    // Purge: jobs ended more than a day ago go, with their steps.
    let p = s
        .purge(
            &PurgeSettings {
                jobs: Some(PurgeAfter::Days(1)),
                events: Some(PurgeAfter::Days(1)),
                ..Default::default()
            },
            m1,
        )
        .await
        .unwrap();
    assert!(p.jobs >= 3 && p.steps >= 1 && p.events >= 1, "{p:?}");
    // `job_texts`' ended job 50 went, with the environment only it had;
    // the script it shared with running job 51 stays, kept once.
    let gone = s
        .execute_raw("DELETE FROM job_texts WHERE body LIKE '%MARK=42%'")
        .await
        .unwrap();
    assert_eq!(gone, 0, "purged with its job");
    let shared = s
        .execute_raw("DELETE FROM job_texts WHERE body LIKE '%echo same%'")
        .await
        .unwrap();
    assert_eq!(shared, 1);
    assert_eq!(count_jobs(s, "r").await, (0, 0));
    assert_eq!(
        count_jobs(s, "q").await.0,
        3,
        "running and pending jobs stay (3, 4 and job 8's second run)"
    );
}

// ------------------------------------------------------------- the daemon

fn key() -> Key {
    Key::from_bytes(b"0123456789abcdef0123456789abcdef")
}

/// `body` signed as `uid` at `now`, its credential bound to it.
fn signed(uid: u32, body: AcctRequest, now: i64) -> DbdRequest {
    let b = slurm_common::dbd::bound(&body);
    DbdRequest {
        cred: key().sign(uid, uid, "test", now, &b),
        body,
    }
}

async fn call(addr: &str, uid: u32, body: AcctRequest) -> AcctResponse {
    let req = signed(uid, body, slurm_common::auth::now());
    slurmdbd::client::call(addr, "localhost", &req, Duration::from_secs(10))
        .await
        .unwrap()
}

fn kind(r: &AcctResponse) -> Option<AcctErrorKind> {
    match r {
        AcctResponse::Error(e) => Some(e.kind),
        _ => None,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn daemon_checks_credentials_and_rights() {
    let db = TestDb::new(Backend::Sqlite);
    let storage = Arc::new(db.open(Migrate::Latest).await);
    let server = Arc::new(Server {
        tls: None,
        budget: slurm_common::net::Budget::new(1 << 28),
        controller_cert: None,
        storage: storage.clone(),
        key: key(),
        slurm_user_uid: Some(4242),
        stats: Arc::new(slurmdbd::stats::Stats::new(0)),
        private: Default::default(),
        disable_coord: false,
        seen: Default::default(),
        jwt_key: None,
        stop: Default::default(),
        config: Vec::new(),
    });
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap().to_string();
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let task = tokio::spawn(server.clone().serve(listener, async {
        let _ = stopped.await;
    }));
    let stranger = 3_999_999; // no passwd entry, no AdminLevel

    assert!(matches!(
        call(&addr, stranger, AcctRequest::Ping).await,
        AcctResponse::Pong { .. }
    ));
    let records = AcctRequest::Records(many("d", 1, 1..3));
    let r = call(&addr, stranger, records.clone()).await;
    assert_eq!(kind(&r), Some(AcctErrorKind::AccessDenied), "{r:?}");
    let r = call(&addr, 4242, records.clone()).await;
    assert!(
        matches!(
            r,
            AcctResponse::Ack {
                applied: 6,
                duplicates: 0,
                ..
            }
        ),
        "SlurmUser may send records: {r:?}"
    );
    let r = call(&addr, 0, records).await;
    assert!(
        matches!(
            r,
            AcctResponse::Ack {
                applied: 0,
                duplicates: 6,
                ..
            }
        ),
        "{r:?}"
    );
    let add = AcctRequest::AddAccounts(AddAccounts {
        names: vec!["eng".into()],
        ..Default::default()
    });
    let r = call(&addr, stranger, add.clone()).await;
    assert_eq!(kind(&r), Some(AcctErrorKind::AccessDenied), "{r:?}");
    assert!(matches!(
        call(&addr, 0, add.clone()).await,
        AcctResponse::Changed(_)
    ));
    let r = call(&addr, 0, add).await;
    assert_eq!(kind(&r), Some(AcctErrorKind::AlreadyExists), "{r:?}");
    // Anyone may query.
    let r = call(
        &addr,
        stranger,
        AcctRequest::GetJobs(JobQuery {
            clusters: vec!["d".into()],
            ..Default::default()
        }),
    )
    .await;
    assert!(matches!(&r, AcctResponse::Jobs(v) if v.len() == 2), "{r:?}");
    // Operators may change the database but not make Administrators.
    if let Some(nobody) = slurm_common::users::user_by_name("nobody") {
        let r = call(
            &addr,
            0,
            AcctRequest::AddUsers(AddUsers {
                names: vec!["nobody".into()],
                default_account: Some("eng".into()),
                admin_level: Some(AdminLevel::Operator),
                ..Default::default()
            }),
        )
        .await;
        assert!(matches!(r, AcctResponse::Changed(_)), "{r:?}");
        let r = call(
            &addr,
            nobody.uid,
            AcctRequest::AddQos(vec![QosRec {
                name: "ops".into(),
                ..Default::default()
            }]),
        )
        .await;
        assert!(matches!(r, AcctResponse::Changed(_)), "{r:?}");
        let r = call(
            &addr,
            nobody.uid,
            AcctRequest::ModifyUsers {
                filter: UserFilter {
                    names: vec!["nobody".into()],
                    ..Default::default()
                },
                set: UserPatch {
                    admin_level: Set::To(AdminLevel::Administrator),
                    ..Default::default()
                },
                assoc: AssocPatch::default(),
            },
        )
        .await;
        assert_eq!(kind(&r), Some(AcctErrorKind::AccessDenied), "{r:?}");
    }
    // Bad input is an error naming it.
    let r = call(
        &addr,
        0,
        AcctRequest::ModifyQos {
            filter: QosFilter {
                names: vec!["normal".into()],
                ..Default::default()
            },
            set: QosPatch {
                flags: ListChange::Add(vec!["Bogus".into()]),
                ..Default::default()
            },
        },
    )
    .await;
    assert_eq!(kind(&r), Some(AcctErrorKind::InvalidRequest), "{r:?}");
    // Forged and expired credentials.
    let send = |req: DbdRequest| {
        let addr = addr.clone();
        async move {
            slurmdbd::client::call(&addr, "localhost", &req, Duration::from_secs(5))
                .await
                .unwrap()
        }
    };
    let mut forged = signed(0, AcctRequest::Ping, slurm_common::auth::now());
    forged.cred.uid = 1;
    let r = send(forged).await;
    assert_eq!(kind(&r), Some(AcctErrorKind::InvalidCredential), "{r:?}");
    let r = send(signed(
        0,
        AcctRequest::Ping,
        slurm_common::auth::now() - 10_000,
    ))
    .await;
    assert_eq!(kind(&r), Some(AcctErrorKind::ExpiredCredential), "{r:?}");
    // A root request seen on the wire: not twice, not with another body.
    let seen = signed(0, AcctRequest::Ping, slurm_common::auth::now());
    assert!(matches!(
        send(seen.clone()).await,
        AcctResponse::Pong { .. }
    ));
    let r = send(seen).await;
    assert_eq!(
        kind(&r),
        Some(AcctErrorKind::InvalidCredential),
        "replayed: {r:?}"
    );
    let fresh = signed(0, AcctRequest::Ping, slurm_common::auth::now());
    let swapped = DbdRequest {
        cred: fresh.cred,
        body: AcctRequest::Rollup { now: None },
    };
    let r = send(swapped).await;
    assert_eq!(
        kind(&r),
        Some(AcctErrorKind::InvalidCredential),
        "other body: {r:?}"
    );
    // A credential is good for its own method only: one made for listing
    // users (whose empty filter encodes as the same bytes as a rollup with
    // no time) does not roll usage up.
    {
        use slurm_proto::grpc::dbd::DbdCall;
        let ch = slurm_common::grpc::channel(None, &addr, "localhost").unwrap();
        let list = DbdCall::from_body(AcctRequest::ListUsers(UserFilter::default()));
        let rollup = DbdCall::from_body(AcctRequest::Rollup { now: None });
        assert_eq!(list.encode(), rollup.encode());
        let b = slurm_common::dbd::bound(&AcctRequest::ListUsers(UserFilter::default()));
        let cred = key().sign(0, 0, "test", slurm_common::auth::now(), &b);
        let r =
            slurm_common::grpc::call_dbd(&ch, "localhost", rollup, cred, Duration::from_secs(5))
                .await
                .unwrap();
        assert_eq!(
            kind(&r),
            Some(AcctErrorKind::InvalidCredential),
            "other method: {r:?}"
        );
        // No credential at all.
        let mut client = slurm_proto::grpc::pb::slurm_dbd_client::SlurmDbdClient::new(ch.clone());
        let r = client
            .ping(slurm_proto::grpc::pb::Empty {})
            .await
            .unwrap()
            .into_inner();
        let r = slurm_proto::grpc::dbd::acct_response(r).unwrap();
        assert_eq!(
            kind(&r),
            Some(AcctErrorKind::InvalidCredential),
            "unsigned: {r:?}"
        );
    }
    // A message past max_message_size (16 MiB) is refused as it is read,
    // and the daemon goes on serving.
    {
        let mut big = many("d", 100, 50..51);
        if let AcctRecord::JobStart(j) = &mut big[0].record {
            j.comment = "x".repeat(17 << 20);
        }
        let req = signed(0, AcctRequest::Records(big), slurm_common::auth::now());
        let r = slurmdbd::client::call(&addr, "localhost", &req, Duration::from_secs(10)).await;
        assert!(
            matches!(&r, Err(slurm_common::net::NetError::Rpc { why, .. }) if why.contains("too large") || why.contains("message length")),
            "{r:?}"
        );
        let r = call(
            &addr,
            0,
            AcctRequest::GetJobs(JobQuery {
                clusters: vec!["d".into()],
                job_ids: vec![50],
                ..Default::default()
            }),
        )
        .await;
        assert!(
            matches!(&r, AcctResponse::Jobs(v) if v.is_empty()),
            "nothing applied: {r:?}"
        );
    }
    // A framed request of earlier versions (length + JSON) is not served:
    // the connection closes unanswered, and calls go on being served.
    {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let mut sock = tokio::net::TcpStream::connect(&addr).await.unwrap();
        let body =
            serde_json::to_vec(&signed(0, AcctRequest::Ping, slurm_common::auth::now())).unwrap();
        sock.write_all(&(body.len() as u32).to_be_bytes())
            .await
            .unwrap();
        sock.write_all(&body).await.unwrap();
        let mut buf = Vec::new();
        let read = tokio::time::timeout(Duration::from_secs(15), sock.read_to_end(&mut buf)).await;
        assert!(read.is_ok(), "the connection is closed");
        assert!(
            !String::from_utf8_lossy(&buf).contains("Pong"),
            "not answered: {buf:?}"
        );
        assert!(matches!(
            call(&addr, stranger, AcctRequest::Ping).await,
            AcctResponse::Pong { .. }
        ));
    }
    // On-demand rollup (admin only).
    let r = call(&addr, stranger, AcctRequest::Rollup { now: None }).await;
    assert_eq!(kind(&r), Some(AcctErrorKind::AccessDenied));
    let r = call(
        &addr,
        0,
        AcctRequest::Rollup {
            now: Some(T + 7200),
        },
    )
    .await;
    assert!(matches!(r, AcctResponse::RolledUp(_)), "{r:?}");
    let _ = stop.send(());
    task.await.unwrap();
    storage.close().await;
}

/// The binary: reads slurmdbd.conf and slurm.key, opens SQLite, serves.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn binary_serves_from_its_config() {
    let dir = tempfile::tempdir().unwrap();
    let port = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap().port()
    };
    std::fs::write(
        dir.path().join("slurm.key"),
        b"0123456789abcdef0123456789abcdef",
    )
    .unwrap();
    let conf = dir.path().join("slurmdbd.conf");
    std::fs::write(
        &conf,
        format!(
            "# test\nDbdAddr=127.0.0.1\nDbdPort={port}\nStorageType=accounting_storage/sqlite\n\
             StorageLoc=acct.db\nPidFile={}\nPurgeJobAfter=12months\nNoSuchKey=1\n",
            dir.path().join("dbd.pid").display()
        ),
    )
    .unwrap();
    let exe = env!("CARGO_BIN_EXE_slurmdbd");
    let out = std::process::Command::new(exe).arg("-V").output().unwrap();
    assert_eq!(
        String::from_utf8_lossy(&out.stdout).trim(),
        format!("slurm {}", slurm_proto::SLURM_VERSION)
    );
    let child = std::process::Command::new(exe)
        .arg("-D")
        .arg("-f")
        .arg(&conf)
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let addr = format!("127.0.0.1:{port}");
    let mut up = false;
    for _ in 0..200 {
        if tokio::net::TcpStream::connect(&addr).await.is_ok() {
            up = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let pong = if up {
        Some(call(&addr, 0, AcctRequest::Ping).await)
    } else {
        None
    };
    // SAFETY: kill with a valid pid of our own child.
    unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
    let out = child.wait_with_output().unwrap();
    let log = String::from_utf8_lossy(&out.stderr);
    assert!(up, "slurmdbd never listened on {addr}:\n{log}");
    assert!(matches!(pong, Some(AcctResponse::Pong { .. })), "{pong:?}");
    assert!(log.contains("unknown key 'NoSuchKey'"), "{log}");
    assert!(dir.path().join("acct.db").exists());
    assert!(
        !dir.path().join("dbd.pid").exists(),
        "pid file removed on exit"
    );
    // A bad config is refused with file:line.
    std::fs::write(&conf, "DbdPort=70000\n").unwrap();
    let out = std::process::Command::new(exe)
        .arg("-f")
        .arg(&conf)
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("slurmdbd.conf:1: invalid value '70000' for DbdPort"),
        "{err}"
    );
}
