//! Job records ingested per second, per backend and batch size.
//!
//! `cargo bench -p slurmdbd --bench ingest` (SLURMDBD_BENCH_JOBS=N to change
//! the job count; SLURMDBD_TEST_MYSQL / SLURMDBD_TEST_PGSQL as for the tests).
//! Each job is two records (start, end) plus its batch step's end, the way a
//! controller's outbox sends them; every batch is one transaction, fsynced.
//! Prints a table; exits non-zero when a backend could not be measured.

use slurm_proto::acct::*;
use slurm_proto::{JobState, BATCH_STEP};
use slurmdbd::storage::{Backend, Storage, StorageTarget};
use std::time::Instant;

fn target(b: Backend, dir: &std::path::Path) -> StorageTarget {
    let name = format!(
        "slurm_bench_{}_{:06x}",
        std::process::id(),
        rand::random::<u32>() >> 8
    );
    let env = |var: &str, default: &str| {
        std::env::var(var)
            .ok()
            .filter(|v| !v.is_empty())
            .unwrap_or_else(|| default.to_string())
    };
    match b {
        Backend::Sqlite => StorageTarget::sqlite(dir.join(format!("{name}.db"))),
        Backend::Mysql => StorageTarget::from_url(&env(
            "SLURMDBD_TEST_MYSQL",
            "mysql://root@127.0.0.1:3306/test",
        ))
        .expect("mysql url")
        .with_database(&name),
        Backend::Postgres => StorageTarget::from_url(&env(
            "SLURMDBD_TEST_PGSQL",
            "postgres://root@127.0.0.1:5432/test",
        ))
        .expect("postgres url")
        .with_database(&name),
    }
}

/// The records of jobs `ids`, starting at `seq`.
fn records(cluster: &str, seq: &mut u64, ids: std::ops::Range<u32>) -> Vec<SeqRecord> {
    let t0 = 1_700_000_000;
    let mut out = Vec::with_capacity(ids.len() * 3);
    let mut push = |r: AcctRecord| {
        *seq += 1;
        out.push(SeqRecord {
            cluster: cluster.into(),
            epoch: 1,
            seq: *seq,
            record: r,
        });
    };
    for id in ids {
        let submit = t0 + i64::from(id);
        let mut j = AcctJob {
            job_id: id,
            name: format!("sim_{id}"),
            user: format!("user{}", id % 50),
            uid: 1000 + id % 50,
            group: "users".into(),
            gid: 100,
            account: format!("acct{}", id % 10),
            partition: "batch".into(),
            qos: "normal".into(),
            state: JobState::Running.into(),
            submit_time: submit,
            eligible_time: Some(submit),
            start_time: Some(submit + 5),
            time_limit: Some(60),
            priority: 4294,
            nodelist: format!("n{},n{}", id % 100, (id + 1) % 100),
            node_count: 2,
            alloc_cpus: 8,
            req_cpus: 8,
            req_mem: 4096,
            alloc_tres: "cpu=8,mem=4096M,node=2,billing=8".into(),
            req_tres: "cpu=8,mem=4096M,node=2,billing=8".into(),
            work_dir: "/home/user/run".into(),
            submit_line: "sbatch -N2 job.sh".into(),
            ..Default::default()
        };
        push(AcctRecord::JobStart(j.clone()));
        push(AcctRecord::StepEnd(AcctStep {
            job_id: id,
            job_submit: submit,
            step_id: BATCH_STEP,
            name: "batch".into(),
            state: JobState::Completed.into(),
            nodelist: format!("n{}", id % 100),
            node_count: 1,
            ntasks: 1,
            alloc_cpus: 4,
            start_time: submit + 5,
            end_time: Some(submit + 65),
            total_cpu_usec: 59_000_000,
            max_rss_kib: 123_456,
            max_rss_node: format!("n{}", id % 100),
            alloc_tres: "cpu=4,mem=2048M,node=1".into(),
            ..Default::default()
        }));
        j.state = JobState::Completed.into();
        j.end_time = Some(submit + 66);
        push(AcctRecord::JobEnd(j));
    }
    out
}

async fn measure(b: Backend, jobs: u32) -> Result<Vec<(usize, usize, f64)>, String> {
    let dir = tempfile::tempdir().map_err(|e| e.to_string())?;
    let t = target(b, dir.path());
    let s = Storage::open(&t).await.map_err(|e| e.to_string())?;
    let mut rows = Vec::new();
    let mut seq = 0;
    let mut next_id = 1;
    let mut last: Vec<SeqRecord> = Vec::new();
    // Batch size 1 is slow (one commit per record): fewer jobs.
    for (batch, n) in [(1usize, jobs.min(300)), (100, jobs), (1000, jobs)] {
        let recs = records("bench", &mut seq, next_id..next_id + n);
        next_id += n;
        let total = recs.len();
        last = recs[total.saturating_sub(batch)..].to_vec();
        let start = Instant::now();
        let mut it = recs.into_iter().peekable();
        while it.peek().is_some() {
            let chunk: Vec<SeqRecord> = it.by_ref().take(batch).collect();
            let o = s.ingest(chunk).await.map_err(|e| e.to_string())?;
            assert_eq!(o.duplicates, 0);
        }
        rows.push((batch, total, start.elapsed().as_secs_f64()));
    }
    // Resending the last batch (as after a controller crash) costs only the look-ups.
    let n = last.len();
    let start = Instant::now();
    let o = s.ingest(last).await.map_err(|e| e.to_string())?;
    assert_eq!(o.applied, 0);
    rows.push((0, n, start.elapsed().as_secs_f64()));
    s.close().await;
    Storage::drop_database(&t)
        .await
        .map_err(|e| e.to_string())?;
    Ok(rows)
}

fn main() {
    let jobs: u32 = std::env::var("SLURMDBD_BENCH_JOBS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(10_000);
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime");
    println!(
        "slurmdbd ingest: {jobs} jobs x 3 records (start, batch step end, end) per batch size"
    );
    println!(
        "{:<8} {:>6} {:>8} {:>9} {:>12} {:>10}",
        "backend", "batch", "records", "seconds", "records/s", "jobs/s"
    );
    let mut failed = false;
    for b in [Backend::Sqlite, Backend::Mysql, Backend::Postgres] {
        match rt.block_on(measure(b, jobs)) {
            Ok(rows) => {
                for (batch, n, secs) in rows {
                    let label = if batch == 0 {
                        "resend".to_string()
                    } else {
                        batch.to_string()
                    };
                    println!(
                        "{:<8} {:>6} {:>8} {:>9.3} {:>12.0} {:>10.0}",
                        b.name(),
                        label,
                        n,
                        secs,
                        n as f64 / secs,
                        n as f64 / 3.0 / secs
                    );
                }
            }
            Err(e) => {
                failed = true;
                println!("{:<8} not measured: {e}", b.name());
            }
        }
    }
    if failed {
        std::process::exit(1);
    }
}
