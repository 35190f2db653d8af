//! `slurmsim`: replay a workload trace through the scheduler in virtual time.

use anyhow::{anyhow, bail, Context, Result};
use slurm_common::conf::SlurmConf;
use slurmsim::cluster::Cluster;
use slurmsim::engine::{self, Options, Quiet};
use slurmsim::metrics::{hms, Metrics};
use slurmsim::swf::Trace;
use slurmsim::workload::{self, LimitRule, MapOptions};
use std::io::Write;
use std::path::PathBuf;
use std::time::Instant;

const HELP: &str = "\
slurmsim: replay a workload trace through the scheduler in virtual time

Usage: slurmsim [OPTIONS] TRACE
       slurmsim --case FILE

TRACE is a Standard Workload Format file (Parallel Workloads Archive),
plain or gzip-compressed. Each job is submitted at its submit time, runs
for its run time (or until its time limit, if shorter) and is scheduled by
the same scheduling core as slurmctld. Recorded wait times are ignored.

Cluster (one of --conf or --nodes):
  -f, --conf FILE         slurm.conf: nodes, partitions, SchedulerType,
                          SchedulerParameters (nodes configured DOWN, DRAIN
                          or FUTURE never run jobs; all others are up)
  -N, --nodes N           a flat cluster of N nodes n1..nN in one partition
                          'sim', scheduled by sched/backfill
  -c, --cpus C            CPUs per node of the flat cluster (default 1)
      --mem MIB           memory per node of the flat cluster (default 0;
                          trace jobs ask for no memory)
      --scheduler NAME    override SchedulerType (sched/builtin, sched/backfill)
      --params STRING     override SchedulerParameters (e.g.
                          bf_window=2880,bf_reserve_depth=1)

Jobs:
      --procs-per-node P  the trace counts processors P to a node: a job of k
                          processors gets ceil(k/P) whole nodes (--exclusive,
                          one task per node). Without it, each processor is
                          one task of one CPU, placed anywhere. (NASA iPSC:
                          --nodes 128 --cpus 1 --procs-per-node 1)
      --limit-factor F    time limit = run time x F, rounded up to whole
                          minutes, at least 1 minute (default F = 1.0: every
                          job finishes just within its limit)
      --limit MINUTES     every job gets this time limit; jobs that run
                          longer are killed at it
      --ignore-requested-time
                          derive limits even for jobs whose trace records a
                          requested time (field 9; by default that is the
                          limit, rounded up to minutes)
      --partition NAME    partition for the jobs (default: the default one)
      --queue-map Q=NAME[,Q=NAME...]
                          jobs of SWF queue number Q go to partition NAME
      --jobs N            replay only the first N usable jobs
      --lenient           skip malformed trace lines (counted) instead of
                          stopping at the first

Simulation:
      --interval S        run the scheduler every S seconds of virtual time
                          (as the controller's periodic pass) instead of
                          after every batch of events
      --log FILE          write the decision log (one line per start:
                          'time job nodes'; '-' for stdout)
      --header            print the trace's header lines (';' lines: they
                          carry the trace's acknowledgements) first
      --case FILE         run a scheduler case (see sim/tests/golden/) and
                          print its timeline

  -h, --help              this help
  -V, --version           the version

Output: jobs, utilisation (CPU-seconds used / (usable CPUs x makespan)),
mean wait, mean bounded slowdown (Feitelson, bound 10 s), makespan,
scheduler passes, the wall time of the replay and decision-hash, the
SHA-256 of the decision log: the same input always gives the same hash.
";

#[derive(Default)]
struct Args {
    trace: Option<PathBuf>,
    conf: Option<PathBuf>,
    nodes: Option<usize>,
    cpus: Option<u32>,
    mem: Option<u64>,
    scheduler: Option<String>,
    params: Option<String>,
    procs_per_node: Option<u32>,
    limit_factor: Option<f64>,
    limit: Option<u32>,
    ignore_requested: bool,
    partition: Option<String>,
    queue_map: Vec<(i64, String)>,
    jobs: Option<usize>,
    lenient: bool,
    interval: Option<i64>,
    log: Option<String>,
    header: bool,
    case: Option<PathBuf>,
}

fn parse_num<T: std::str::FromStr>(opt: &str, v: &str) -> Result<T> {
    v.parse()
        .map_err(|_| anyhow!("invalid value '{v}' for {opt}: expected a number"))
}

enum Parsed {
    Run(Box<Args>),
    Help,
    Version,
}

fn parse_args(argv: Vec<String>) -> Result<Parsed> {
    let mut a = Args::default();
    let mut it = argv.into_iter();
    while let Some(arg) = it.next() {
        let (opt, inline) = match arg.split_once('=') {
            Some((o, v)) if o.starts_with("--") => (o.to_string(), Some(v.to_string())),
            _ => (arg.clone(), None),
        };
        let mut value = || -> Result<String> {
            match &inline {
                Some(v) => Ok(v.clone()),
                None => it.next().ok_or_else(|| anyhow!("{opt} needs a value")),
            }
        };
        match opt.as_str() {
            "-h" | "--help" => return Ok(Parsed::Help),
            "-V" | "--version" => return Ok(Parsed::Version),
            "-f" | "--conf" => a.conf = Some(value()?.into()),
            "-N" | "--nodes" => a.nodes = Some(parse_num(&opt, &value()?)?),
            "-c" | "--cpus" => a.cpus = Some(parse_num(&opt, &value()?)?),
            "--mem" => a.mem = Some(parse_num(&opt, &value()?)?),
            "--scheduler" => a.scheduler = Some(value()?),
            "--params" => a.params = Some(value()?),
            "--procs-per-node" => a.procs_per_node = Some(parse_num(&opt, &value()?)?),
            "--limit-factor" => a.limit_factor = Some(parse_num(&opt, &value()?)?),
            "--limit" => a.limit = Some(parse_num(&opt, &value()?)?),
            "--ignore-requested-time" => a.ignore_requested = true,
            "--partition" => a.partition = Some(value()?),
            "--queue-map" => {
                for item in value()?.split(',').filter(|s| !s.is_empty()) {
                    let (q, name) = item
                        .split_once('=')
                        .ok_or_else(|| anyhow!("--queue-map wants Q=NAME, not '{item}'"))?;
                    a.queue_map
                        .push((parse_num("--queue-map", q)?, name.to_string()));
                }
            }
            "--jobs" => a.jobs = Some(parse_num(&opt, &value()?)?),
            "--lenient" => a.lenient = true,
            "--interval" => a.interval = Some(parse_num(&opt, &value()?)?),
            "--log" => a.log = Some(value()?),
            "--header" => a.header = true,
            "--case" => a.case = Some(value()?.into()),
            s if s.starts_with('-') && s != "-" => bail!("unknown option {s} (see --help)"),
            _ if a.trace.is_none() => a.trace = Some(arg.into()),
            _ => bail!("only one trace can be replayed at a time (see --help)"),
        }
    }
    Ok(Parsed::Run(Box::new(a)))
}

fn main() {
    let argv: Vec<String> = std::env::args().skip(1).collect();
    match real_main(argv) {
        Ok(()) => {}
        Err(e) => {
            eprintln!("slurmsim: error: {e:#}");
            std::process::exit(1);
        }
    }
}

fn warn(msg: impl std::fmt::Display) {
    eprintln!("slurmsim: warning: {msg}");
}

fn real_main(argv: Vec<String>) -> Result<()> {
    let a = match parse_args(argv)? {
        Parsed::Help => {
            print!("{HELP}");
            return Ok(());
        }
        Parsed::Version => {
            println!("slurmsim {}", env!("CARGO_PKG_VERSION"));
            return Ok(());
        }
        Parsed::Run(a) => a,
    };
    if let Some(case) = &a.case {
        let text = std::fs::read_to_string(case)
            .with_context(|| format!("cannot read {}", case.display()))?;
        print!(
            "{}",
            slurmsim::case::run_case(&text, &case.display().to_string())?
        );
        return Ok(());
    }
    let Some(trace_path) = &a.trace else {
        bail!("no trace given (see --help)");
    };
    if a.limit.is_some() && a.limit_factor.is_some() {
        bail!("--limit and --limit-factor exclude each other");
    }

    let mut cluster = match (&a.conf, a.nodes) {
        (Some(_), Some(_)) => bail!("--conf and --nodes exclude each other"),
        (None, None) => bail!("give the cluster: --conf FILE or --nodes N [--cpus C]"),
        (Some(path), None) => {
            if a.cpus.is_some() || a.mem.is_some() {
                bail!("--cpus and --mem describe a flat cluster (--nodes), not --conf");
            }
            let conf = SlurmConf::load(path)?;
            for w in &conf.warnings {
                warn(w);
            }
            for w in slurmsim::cluster::unsimulated(&conf) {
                warn(w);
            }
            Cluster::from_conf(&conf).with_context(|| path.display().to_string())?
        }
        (None, Some(n)) => Cluster::flat(n, a.cpus.unwrap_or(1), a.mem.unwrap_or(0))?,
    };
    if let Some(s) = &a.scheduler {
        cluster.scheduler_type = s.clone();
    }
    if let Some(p) = &a.params {
        cluster.scheduler_params = p.clone();
    }
    let mut choice = cluster.scheduler()?;
    if let Some(w) = &choice.warning {
        warn(w);
    }

    let trace = Trace::read_path(trace_path, a.lenient)?;
    if a.header {
        for h in &trace.header {
            println!("{h}");
        }
    }
    for (line, why) in trace.bad_lines.iter().take(5) {
        warn(format_args!(
            "{}:{line}: skipped: {why}",
            trace_path.display()
        ));
    }
    if trace.bad_lines.len() > 5 {
        warn(format_args!(
            "{} more malformed lines skipped",
            trace.bad_lines.len() - 5
        ));
    }
    let mut opts = MapOptions {
        limit: match a.limit {
            Some(m) => LimitRule::Fixed(m),
            None => LimitRule::Factor(a.limit_factor.unwrap_or(1.0)),
        },
        use_requested_time: !a.ignore_requested,
        procs_per_node: a.procs_per_node,
        max_jobs: a.jobs,
        ..MapOptions::default()
    };
    opts.partition = match &a.partition {
        Some(p) => cluster.partition(p)?,
        None => cluster.default_partition,
    };
    for (q, name) in &a.queue_map {
        opts.queue_map.insert(*q, cluster.partition(name)?);
    }
    let w = workload::from_trace(&trace, &opts)?;
    for (why, n) in &w.skipped {
        warn(format_args!("{n} trace records skipped: {why}"));
    }
    if a.interval.is_some_and(|s| s <= 0) {
        bail!("--interval must be a positive number of seconds");
    }

    let mut log_file: Option<Box<dyn Write>> = match a.log.as_deref() {
        None => None,
        Some("-") => Some(Box::new(std::io::BufWriter::new(std::io::stdout()))),
        Some(p) => Some(Box::new(std::io::BufWriter::new(
            std::fs::File::create(p).with_context(|| format!("cannot create {p}"))?,
        ))),
    };
    let jobs_in = w.jobs.len();
    let skipped = w.skipped_total();
    let clock = Instant::now();
    let outcome = engine::run(
        &cluster,
        w.jobs,
        choice.scheduler.as_mut(),
        Options {
            interval: a.interval,
        },
        &mut Quiet,
        log_file.as_mut().map(|l| l.as_mut() as &mut dyn Write),
    )?;
    let wall = clock.elapsed();
    drop(log_file);
    let m = Metrics::of(&outcome);

    let name = trace_path.file_name().map_or_else(
        || trace_path.display().to_string(),
        |n| n.to_string_lossy().into(),
    );
    let per_pass = if outcome.passes > 0 {
        outcome.sched_time.as_secs_f64() * 1e6 / outcome.passes as f64
    } else {
        0.0
    };
    let mut o = String::new();
    let mut row = |k: &str, v: String| o.push_str(&format!("{k:<22} {v}\n"));
    row(
        "trace:",
        format!(
            "{name}: {jobs_in} jobs ({} records skipped, {} malformed lines)",
            skipped,
            trace.bad_lines.len()
        ),
    );
    row("cluster:", cluster.describe());
    row(
        "scheduler:",
        if cluster.scheduler_params.is_empty() {
            choice.scheduler.name().to_string()
        } else {
            format!("{} ({})", choice.scheduler.name(), cluster.scheduler_params)
        },
    );
    row(
        "jobs:",
        format!(
            "{} submitted, {} started, {} rejected, {} never started, {} killed at limit",
            m.submitted, m.started, m.rejected, m.never_started, m.killed
        ),
    );
    row("utilisation:", format!("{:.4}", m.utilisation));
    row(
        "mean wait:",
        format!("{:.1} s (max {} s)", m.mean_wait, m.max_wait),
    );
    row("mean bounded slowdown:", format!("{:.3}", m.mean_bsld));
    row(
        "makespan:",
        format!("{} s ({})", m.makespan, hms(m.makespan)),
    );
    row(
        "scheduler passes:",
        format!(
            "{} ({} started jobs; {:.2} s in the scheduler, {per_pass:.0} us per pass; \
             at most {} pending)",
            outcome.passes,
            outcome.productive_passes,
            outcome.sched_time.as_secs_f64(),
            outcome.max_pending
        ),
    );
    row("wall time:", format!("{:.2} s", wall.as_secs_f64()));
    row("decision-hash:", outcome.hash.clone());
    print!("{o}");
    Ok(())
}
