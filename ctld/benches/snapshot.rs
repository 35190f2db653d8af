//! What the writer pays to publish a snapshot for readers after each batch
//! of changes, at 1,000 and 10,000 nodes: with nothing of the nodes
//! changed, and with one node changed (a drain), as most batches change
//! at most a few nodes; and with 100,000 held jobs (1,000 nodes), with no
//! job changed and with one job's comment changed, the job list and its
//! change stamps made as the writer makes them.
//!
//! `cargo bench -p slurmctld --bench snapshot` (add `-- --quick` for a
//! shorter run).

use criterion::{black_box, criterion_group, criterion_main, Criterion};
use slurm_common::conf::SlurmConf;
use slurm_proto::{JobDesc, JobUpdate, NodeStateRequest, RequestBody, Response};
use slurmctld::journal::Saved;
use slurmctld::state::{Caller, Controller};
use std::sync::Arc;
use std::time::Duration;

const ROOT: Caller = Caller {
    uid: 0,
    gid: 0,
    privileged: true,
    operator: true,
    admin: true,
};
const NOW: i64 = 1_800_000_000;

fn controller(nodes: usize, dir: &std::path::Path) -> Controller {
    let path = dir.join("slurm.conf");
    std::fs::write(
        &path,
        format!(
            "ClusterName=bench\nSlurmctldHost=localhost\nStateSaveLocation={}\nMaxJobCount=200000\n\
             NodeName=n[1-{nodes}] CPUs=8 RealMemory=16000 Feature=a,b\n\
             PartitionName=debug Nodes=ALL Default=YES State=UP\n",
            dir.display()
        ),
    )
    .expect("slurm.conf");
    let conf = SlurmConf::load(&path).expect("slurm.conf");
    let sched = slurm_plugins::registry::scheduler_with_params(&conf.scheduler_type, "")
        .expect("scheduler")
        .plugin;
    Controller::new(Arc::new(conf), Saved::default(), sched, NOW)
}

fn publish(c: &mut Criterion) {
    let mut g = c.benchmark_group("snapshot_publish");
    g.sample_size(20);
    g.warm_up_time(Duration::from_secs(1));
    g.measurement_time(Duration::from_secs(4));
    for nodes in [1_000usize, 10_000] {
        let dir = tempfile::tempdir().expect("tempdir");
        let mut ctl = controller(nodes, dir.path());
        let mut prev = Arc::new(ctl.snapshot_after(None));
        g.bench_function(format!("{nodes}_nodes/no_node_changed"), |b| {
            b.iter(|| {
                let s = ctl.snapshot_after(Some(&prev));
                black_box(&s);
            })
        });
        let mut k = 0usize;
        g.bench_function(format!("{nodes}_nodes/one_node_changed"), |b| {
            b.iter(|| {
                k += 1;
                let name = format!("n{}", 1 + k % nodes);
                let _ = ctl.handle(
                    ROOT,
                    RequestBody::UpdateNode {
                        names: vec![name],
                        state: Some(if k.is_multiple_of(2) {
                            NodeStateRequest::Drain
                        } else {
                            NodeStateRequest::Resume
                        }),
                        reason: Some("bench".into()),
                        features: None,
                    },
                    NOW,
                );
                let _ = ctl.take_effects();
                let _ = ctl.take_entries();
                let s = Arc::new(ctl.snapshot_after(Some(&prev)));
                prev = s.clone();
                black_box(&s);
            })
        });
    }
    g.finish();
}

/// The writer's publish: the snapshot, then its jobs' change stamps.
fn publish_jobs(
    ctl: &Controller,
    prev: &slurmctld::state::Snapshot,
    version: u64,
) -> slurmctld::state::Snapshot {
    let mut s = ctl.snapshot_after(Some(prev));
    s.job_changed = slurmctld::state::stamp_changes(
        Some((&prev.jobs, &prev.job_changed)),
        &s.jobs,
        |j| j.job_id,
        version,
    );
    s
}

fn publish_with_jobs(c: &mut Criterion) {
    let mut g = c.benchmark_group("snapshot_publish_jobs");
    g.sample_size(20);
    g.warm_up_time(Duration::from_secs(1));
    g.measurement_time(Duration::from_secs(4));
    let dir = tempfile::tempdir().expect("tempdir");
    let mut ctl = controller(1_000, dir.path());
    let mut first = None;
    for _ in 0..100 {
        let d = JobDesc {
            name: Some("held".into()),
            script: "#!/bin/sh\ntrue\n".into(),
            work_dir: "/tmp".into(),
            environment: vec!["PATH=/bin".into()],
            array: Some("0-999".into()),
            hold: true,
            ..Default::default()
        };
        match ctl.handle(ROOT, RequestBody::SubmitBatchJob(d), NOW) {
            Response::Submitted { job_id, .. } => {
                first.get_or_insert(job_id);
            }
            r => panic!("submit answered {r:?}"),
        }
        let _ = ctl.take_entries();
        let _ = ctl.take_effects();
    }
    let first = first.expect("submitted");
    let mut version = 1;
    let mut prev = Arc::new(publish_jobs(&ctl, &ctl.snapshot_after(None), version));
    assert_eq!(prev.jobs.len(), 100_000);
    g.bench_function("100000_held_jobs/no_job_changed", |b| {
        b.iter(|| {
            version += 1;
            let s = publish_jobs(&ctl, &prev, version);
            black_box(&s);
        })
    });
    let mut k = 0u32;
    g.bench_function("100000_held_jobs/one_job_changed", |b| {
        b.iter(|| {
            k += 1;
            let _ = ctl.handle(
                ROOT,
                RequestBody::UpdateJob {
                    job_id: first + (k * 7919) % 100_000,
                    update: JobUpdate::Comment(format!("c{k}")),
                },
                NOW,
            );
            let _ = ctl.take_entries();
            version += 1;
            let s = Arc::new(publish_jobs(&ctl, &prev, version));
            prev = s.clone();
            black_box(&s);
        })
    });
    // The job list and stamps alone, as made before chunks were shared (a
    // new vector of every job's record and of every stamp per publish)
    // and now.
    let jobs: Vec<Arc<slurm_proto::JobRecord>> = prev.jobs.iter().cloned().collect();
    let stamps: Vec<u64> = prev.job_changed.to_vec();
    g.bench_function("100000_held_jobs/job_list_as_vectors", |b| {
        b.iter(|| {
            let now: Vec<Arc<slurm_proto::JobRecord>> = jobs.to_vec();
            let mut k = 0;
            let changed: Vec<u64> = now
                .iter()
                .map(|j| {
                    while k < jobs.len() && jobs[k].job_id < j.job_id {
                        k += 1;
                    }
                    match jobs.get(k) {
                        Some(p) if p.job_id == j.job_id && Arc::ptr_eq(p, j) => stamps[k],
                        _ => version,
                    }
                })
                .collect();
            black_box((&now, &changed));
        })
    });
    g.bench_function("100000_held_jobs/job_list_as_shared_chunks", |b| {
        b.iter(|| {
            let now =
                slurmctld::state::Chunked::sharing_by(jobs.iter(), Some(&prev.jobs), Arc::ptr_eq);
            let changed = slurmctld::state::stamp_changes(
                Some((&prev.jobs, &prev.job_changed)),
                &now,
                |j| j.job_id,
                version,
            );
            black_box((&now, &changed));
        })
    });
    g.finish();
}

criterion_group!(benches, publish, publish_with_jobs);
criterion_main!(benches);
