//! What the writer pays to publish a snapshot for readers after each batch
//! of changes, at 1,000 and 10,000 nodes: with nothing of the nodes
//! changed, and with one node changed (a drain), as most batches change
//! at most a few nodes.
//!
//! `cargo bench -p slurmctld --bench snapshot` (add `-- --quick` for a
//! shorter run).

use criterion::{black_box, criterion_group, criterion_main, Criterion};
use slurm_common::conf::SlurmConf;
use slurm_proto::{NodeStateRequest, RequestBody};
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
            "ClusterName=bench\nSlurmctldHost=localhost\nStateSaveLocation={}\n\
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

criterion_group!(benches, publish);
criterion_main!(benches);
