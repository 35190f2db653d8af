//! The simulator's integration tests, in one binary:
//! - every `tests/golden/*.case` is run and its timeline compared with the
//!   part after `--- expected`; `SLURMSIM_BLESS=1 cargo test -p slurmsim`
//!   rewrites those parts (review the diff before committing);
//! - the real traces of `shared/reference/workloads/` (beside the
//!   repository; skipped with a message when absent) are read whole and a
//!   prefix is replayed twice for the same decision log.

use slurmsim::case::{run_case, split, EXPECTED_MARK};
use slurmsim::cluster::Cluster;
use slurmsim::engine::{self, Options, Quiet};
use slurmsim::metrics::Metrics;
use slurmsim::swf::Trace;
use slurmsim::workload::{self, MapOptions};
use std::path::{Path, PathBuf};

fn golden_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/golden")
}

/// Where the reference traces are, if this checkout has them beside it.
fn workloads() -> Option<PathBuf> {
    let d = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../shared/reference/workloads");
    if d.is_dir() {
        Some(d)
    } else {
        eprintln!(
            "skipped: {} not found (the reference traces live beside the repository)",
            d.display()
        );
        None
    }
}

/// A minimal line diff: the first lines that differ, with context.
fn diff(expected: &str, actual: &str) -> String {
    let e: Vec<&str> = expected.lines().collect();
    let a: Vec<&str> = actual.lines().collect();
    let mut out = String::new();
    let first = (0..e.len().max(a.len()))
        .find(|&i| e.get(i) != a.get(i))
        .unwrap_or(0);
    let from = first.saturating_sub(2);
    for i in from..(first + 6).min(e.len().max(a.len())) {
        match (e.get(i), a.get(i)) {
            (Some(x), Some(y)) if x == y => out.push_str(&format!("    {x}\n")),
            (x, y) => {
                if let Some(x) = x {
                    out.push_str(&format!("  - {x}\n"));
                }
                if let Some(y) = y {
                    out.push_str(&format!("  + {y}\n"));
                }
            }
        }
    }
    out
}

#[test]
fn golden_cases() {
    let bless = std::env::var_os("SLURMSIM_BLESS").is_some_and(|v| v != "0" && !v.is_empty());
    let mut files: Vec<PathBuf> = std::fs::read_dir(golden_dir())
        .expect("tests/golden exists")
        .map(|e| e.expect("readable directory").path())
        .filter(|p| p.extension().is_some_and(|e| e == "case"))
        .collect();
    files.sort();
    assert!(!files.is_empty(), "no golden cases found");
    let mut failures = Vec::new();
    for path in &files {
        let name = path.file_name().unwrap().to_string_lossy().to_string();
        let text = std::fs::read_to_string(path).expect("readable case");
        let actual = match run_case(&text, &name) {
            Ok(o) => o,
            Err(e) => {
                failures.push(format!("{name}: {e}"));
                continue;
            }
        };
        let (input, expected) = split(&text);
        if expected == Some(actual.as_str()) {
            continue;
        }
        if bless {
            let mut input = input.to_string();
            if !input.ends_with('\n') {
                input.push('\n');
            }
            std::fs::write(path, format!("{input}{EXPECTED_MARK}\n{actual}")).expect("writable");
            eprintln!("blessed {name}");
            continue;
        }
        match expected {
            None => failures.push(format!(
                "{name}: no '{EXPECTED_MARK}' section (SLURMSIM_BLESS=1 cargo test -p slurmsim writes it)"
            )),
            Some(e) => failures.push(format!("{name}:\n{}", diff(e, &actual))),
        }
    }
    assert!(
        failures.is_empty(),
        "{} of {} golden cases differ (after review, SLURMSIM_BLESS=1 cargo test -p slurmsim \
         rewrites them):\n\n{}",
        failures.len(),
        files.len(),
        failures.join("\n")
    );
}

#[test]
fn reference_traces_read_whole() {
    let Some(dir) = workloads() else { return };
    let t = Trace::read_path(&dir.join("NASA-iPSC-1993-3.1-cln.swf.gz"), false).unwrap();
    assert_eq!(t.jobs.len(), 18_239);
    assert!(t
        .header
        .iter()
        .any(|h| h.contains("Acknowledge: Bill Nitzberg")));
    assert!(t.jobs.iter().all(|j| j.req_time == -1));
    let w = workload::from_trace(&t, &MapOptions::default()).unwrap();
    assert_eq!((w.jobs.len(), w.skipped_total()), (18_239, 0));
    assert!(w.jobs.iter().all(|j| j.req.num_tasks <= 128));

    let t = Trace::read_path(&dir.join("lublin_256.swf.gz"), false).unwrap();
    assert_eq!(t.jobs.len(), 10_000);
    assert!(t.header.iter().any(|h| h.contains("Uri Lublin")));
    assert!(t.jobs.iter().all(|j| (1..=256).contains(&j.procs)));
}

fn replay(
    trace: &Trace,
    cluster: &Cluster,
    opts: &MapOptions,
    interval: Option<i64>,
) -> (Metrics, String, u64) {
    let w = workload::from_trace(trace, opts).unwrap();
    let mut choice = cluster.scheduler().unwrap();
    let mut log = Vec::new();
    let o = engine::run(
        cluster,
        w.jobs,
        choice.scheduler.as_mut(),
        Options { interval },
        &mut Quiet,
        Some(&mut log),
    )
    .unwrap();
    let log = String::from_utf8(log).unwrap();
    (Metrics::of(&o), format!("{}\n{log}", o.hash), o.passes)
}

#[test]
fn nasa_prefix_replays_identically() {
    let Some(dir) = workloads() else { return };
    let trace = Trace::read_path(&dir.join("NASA-iPSC-1993-3.1-cln.swf.gz"), false).unwrap();
    let opts = MapOptions {
        procs_per_node: Some(1),
        max_jobs: Some(2000),
        ..MapOptions::default()
    };
    let mut cluster = Cluster::flat(128, 1, 0).unwrap();
    for sched in ["sched/backfill", "sched/builtin"] {
        cluster.scheduler_type = sched.into();
        let (m1, h1, p1) = replay(&trace, &cluster, &opts, None);
        let (m2, h2, p2) = replay(&trace, &cluster, &opts, None);
        assert_eq!(h1, h2, "{sched}: same input, same decision log");
        assert_eq!((m1.clone(), p1), (m2, p2));
        assert_eq!(
            (m1.submitted, m1.started, m1.rejected),
            (2000, 2000, 0),
            "{sched}"
        );
        assert!(
            m1.utilisation > 0.0 && m1.utilisation <= 1.0,
            "{sched}: {m1:?}"
        );
        assert!(
            m1.mean_wait >= 0.0 && m1.mean_bsld >= 1.0,
            "{sched}: {m1:?}"
        );
        assert!(m1.makespan > 0);
        let log_lines = h1.lines().count() - 1;
        assert_eq!(log_lines, 2000, "one decision-log line per start");
    }
    // The same machine described by a slurm.conf decides the same.
    let conf = Path::new(env!("CARGO_MANIFEST_DIR")).join("etc/nasa-ipsc.conf");
    let conf = slurm_common::conf::SlurmConf::load(&conf).unwrap();
    assert!(conf.warnings.is_empty(), "{:?}", conf.warnings);
    let from_conf = Cluster::from_conf(&conf).unwrap();
    cluster.scheduler_type = "sched/backfill".into();
    assert_eq!(
        replay(&trace, &from_conf, &opts, None).1,
        replay(&trace, &cluster, &opts, None).1
    );
}

#[test]
fn lublin_prefix_under_load() {
    let Some(dir) = workloads() else { return };
    let trace = Trace::read_path(&dir.join("lublin_256.swf.gz"), false).unwrap();
    let opts = MapOptions {
        max_jobs: Some(500),
        ..MapOptions::default()
    };
    let cluster = Cluster::flat(256, 1, 0).unwrap();
    let (m, h, passes) = replay(&trace, &cluster, &opts, None);
    assert_eq!(m.started, 500);
    assert!(m.utilisation > 0.0 && m.utilisation <= 1.0, "{m:?}");
    // Periodic passes: jobs start only on the ticks.
    let (mi, hi, _) = replay(&trace, &cluster, &opts, Some(300));
    assert_eq!(mi.started, 500);
    assert!(mi.utilisation > 0.0 && mi.utilisation <= 1.0, "{mi:?}");
    assert_ne!(h, hi);
    for line in hi.lines().skip(1) {
        let t: i64 = line.split(' ').next().unwrap().parse().unwrap();
        assert_eq!(t % 300, 0, "{line}");
    }
    assert!(passes > 0);
}

fn slurmsim(args: &[&str]) -> (i32, String, String) {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_slurmsim"))
        .args(args)
        .output()
        .expect("slurmsim runs");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn command_line() {
    let (code, out, _) = slurmsim(&["--help"]);
    assert_eq!(code, 0);
    for opt in [
        "--limit-factor",
        "--limit MINUTES",
        "--procs-per-node",
        "--interval",
        "--log",
    ] {
        assert!(out.contains(opt), "--help names {opt}");
    }
    let (code, out, _) = slurmsim(&["-V"]);
    assert_eq!(
        (code, out.as_str()),
        (0, concat!("slurmsim ", env!("CARGO_PKG_VERSION"), "\n"))
    );

    let dir = tempfile::tempdir().unwrap();
    let trace = dir.path().join("t.swf");
    std::fs::write(
        &trace,
        "; Acknowledge: the authors\n\
         1 0 -1 100 2 -1 -1 -1 -1 -1 1 1 1 -1 -1 -1 -1 -1\n\
         2 10 -1 50 2 -1 -1 -1 -1 -1 1 2 1 -1 -1 -1 -1 -1\n\
         3 20 -1 10 1 -1 -1 -1 -1 -1 1 2 1 -1 -1 -1 -1 -1\n",
    )
    .unwrap();
    let t = trace.to_str().unwrap();
    let log = dir.path().join("log");
    let (code, out, err) = slurmsim(&[
        "--nodes",
        "2",
        "--cpus",
        "1",
        "--header",
        "--log",
        log.to_str().unwrap(),
        t,
    ]);
    assert_eq!(code, 0, "{err}");
    assert!(out.starts_with("; Acknowledge: the authors\n"), "{out}");
    assert!(
        out.contains("jobs:                  3 submitted, 3 started"),
        "{out}"
    );
    assert!(out.contains("utilisation:           0.9688"), "{out}");
    let log = std::fs::read_to_string(&log).unwrap();
    assert_eq!(log, "0 1 n[1-2]\n100 2 n[1-2]\n150 3 n1\n");
    let hash = out
        .lines()
        .find(|l| l.starts_with("decision-hash:"))
        .unwrap();
    let (_, again, _) = slurmsim(&["--nodes", "2", t]);
    assert!(again.contains(hash), "same input, same hash");

    let bad = dir.path().join("bad.swf");
    std::fs::write(&bad, "1 0 -1 100 2 -1 -1 -1 -1 -1 1 1 1 -1 -1 -1 -1\n").unwrap();
    let b = bad.to_str().unwrap();
    let (code, _, err) = slurmsim(&["--nodes", "2", b]);
    assert_eq!(code, 1);
    assert!(
        err.contains("bad.swf:1: expected 18 fields, found 17"),
        "{err}"
    );
    let (code, out, err) = slurmsim(&["--nodes", "2", "--lenient", b]);
    assert_eq!(code, 0, "{err}");
    assert!(err.contains("skipped: expected 18 fields"), "{err}");
    assert!(out.contains("0 submitted"), "{out}");

    for (args, msg) in [
        (vec![], "no trace given"),
        (vec!["--nodes", "2"], "no trace given"),
        (vec![t], "give the cluster"),
        (vec!["--nodes", "0", t], "no nodes"),
        (vec!["--nodes", "two", t], "invalid value 'two' for --nodes"),
        (
            vec!["--nodes", "2", "--limit-factor", "-1", t],
            "limit factor must be a positive",
        ),
        (vec!["--nodes", "2", "--limit", "0", t], "at least 1 minute"),
        (
            vec!["--nodes", "2", "--interval", "0", t],
            "--interval must be",
        ),
        (
            vec!["--nodes", "2", "--scheduler", "sched/wiki", t],
            "unknown SchedulerType",
        ),
        (
            vec!["--nodes", "2", "--partition", "nope", t],
            "no partition named 'nope'",
        ),
        (
            vec!["--nodes", "2", "--frobnicate", t],
            "unknown option --frobnicate",
        ),
        (
            vec!["--conf", "/nonexistent/slurm.conf", t],
            "cannot read configuration file",
        ),
        (vec!["--nodes", "2", "/nonexistent.swf"], "/nonexistent.swf"),
        (
            vec!["--case", "/nonexistent.case"],
            "cannot read /nonexistent.case",
        ),
    ] {
        let (code, _, err) = slurmsim(&args);
        assert_eq!(code, 1, "{args:?}");
        assert!(
            err.starts_with("slurmsim: error: ") && err.contains(msg),
            "{args:?}: {err}"
        );
    }

    let case = golden_dir().join("backfill-easy.case");
    let (code, out, _) = slurmsim(&["--case", case.to_str().unwrap()]);
    assert_eq!(code, 0);
    let text = std::fs::read_to_string(&case).unwrap();
    assert_eq!(Some(out.as_str()), split(&text).1);
}
