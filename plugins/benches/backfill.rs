//! The cost of one full `sched/backfill` pass over a deep queue on a busy
//! cluster (see `workload.rs`): EASY (`bf_reserve_depth=1`) and
//! conservative (every blocked job reserves), with the whole queue examined
//! and a one-day window.
//!
//! `cargo bench -p slurm-plugins --bench backfill` (add `-- --quick` for a
//! shorter run). Targets: EASY 10k jobs on 5k nodes under 50 ms,
//! conservative under 500 ms.

use criterion::{black_box, criterion_group, criterion_main, Criterion};
use slurm_plugins::{Backfill, BackfillParams, Scheduler};
use std::time::Duration;

mod workload;

const EASY: &str = "bf_max_job_test=1000000,bf_window=1440,bf_resolution=60,bf_reserve_depth=1";
const CONSERVATIVE: &str =
    "bf_max_job_test=1000000,bf_window=1440,bf_resolution=60,bf_reserve_depth=unlimited";

fn pass(c: &mut Criterion) {
    let mut g = c.benchmark_group("backfill_pass");
    g.sample_size(10);
    g.warm_up_time(Duration::from_secs(1));
    g.measurement_time(Duration::from_secs(5));
    for (name, nodes, jobs, params) in [
        ("easy/10k_jobs/5k_nodes", 5_000, 10_000, EASY),
        (
            "conservative/10k_jobs/5k_nodes",
            5_000,
            10_000,
            CONSERVATIVE,
        ),
        ("easy/100k_jobs/10k_nodes", 10_000, 100_000, EASY),
    ] {
        let (view, queue) = workload::workload(nodes, jobs, 42);
        let params = match BackfillParams::parse(params) {
            Ok((p, _)) => p,
            Err(e) => panic!("{e}"),
        };
        let mut once = Backfill::new(params.clone());
        once.plan(&view, &queue, workload::NOW);
        let s = once.last;
        println!(
            "{name}: {} running jobs, {} examined, {} started now, {} reservations",
            view.running.len(),
            s.examined,
            s.started,
            s.reserved
        );
        g.bench_function(name, |b| {
            b.iter(|| {
                let mut bf = Backfill::new(params.clone());
                black_box(bf.plan(black_box(&view), black_box(&queue), workload::NOW))
            })
        });
    }
    g.finish();
}

criterion_group!(benches, pass);
criterion_main!(benches);
