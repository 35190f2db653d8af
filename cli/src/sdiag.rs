//! `sdiag`: the controller's scheduling and job counters.

use crate::common::{self, call};
use chrono::{Local, TimeZone};
use slurm_proto::{DiagStats, RequestBody, Response};

/// `Sat Nov 28 07:01:02 2026 (1795849262)`, as Slurm's statistics print times.
pub(crate) fn when(t: i64) -> String {
    match Local.timestamp_opt(t, 0).single() {
        Some(d) => format!("{} ({t})", d.format("%a %b %e %H:%M:%S %Y")),
        None => format!("({t})"),
    }
}

fn mean(total: u64, n: u64) -> u64 {
    total.checked_div(n).unwrap_or(0)
}

/// How the RPC tables are ordered: by count (default), message type or
/// uid (`-i`), total time (`-t`) or average time (`-T`), largest first.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Sort {
    #[default]
    Count,
    Id,
    Time,
    AvgTime,
}

fn rpc_table(s: &mut String, title: &str, rows: &[slurm_proto::RpcStat], sort: Sort, user: bool) {
    let mut rows: Vec<&slurm_proto::RpcStat> = rows.iter().collect();
    let avg = |r: &slurm_proto::RpcStat| mean(r.total_us, r.count);
    match sort {
        Sort::Count => rows.sort_by(|a, b| b.count.cmp(&a.count).then(a.id.cmp(&b.id))),
        Sort::Id => rows.sort_by_key(|r| r.id),
        Sort::Time => rows.sort_by(|a, b| b.total_us.cmp(&a.total_us).then(a.id.cmp(&b.id))),
        Sort::AvgTime => rows.sort_by(|a, b| avg(b).cmp(&avg(a)).then(a.id.cmp(&b.id))),
    }
    s.push_str(&format!("\n{title}\n"));
    for r in rows {
        if user {
            s.push_str(&format!(
                "\t{:<16}({:>8}) count:{:<6} ave_time:{:<6} total_time:{}\n",
                r.name,
                r.id,
                r.count,
                avg(r),
                r.total_us
            ));
        } else {
            s.push_str(&format!(
                "\t{:<40}({:>5}) count:{:<6} ave_time:{:<6} total_time:{}\n",
                r.name,
                r.id,
                r.count,
                avg(r),
                r.total_us
            ));
        }
    }
}

/// The report, as Slurm's sdiag lays it out (sections we have data for).
pub fn render(d: &DiagStats) -> String {
    render_sorted(d, Sort::Count)
}

/// [`render`] with the RPC tables in `sort` order, hosts lists of pending
/// RPCs cut to 80 characters (Slurm's, unless `--no-trunc`).
pub fn render_sorted(d: &DiagStats, sort: Sort) -> String {
    render_with(d, sort, false)
}

/// Slurm's longest host list of a pending RPC before `--no-trunc`.
const MAX_HOSTLIST_LEN: usize = 80;

/// The report, with the RPC tables in `sort` order; `no_trunc`: pending
/// RPCs' host lists whole.
pub fn render_with(d: &DiagStats, sort: Sort, no_trunc: bool) -> String {
    let elapsed = d.now - d.since;
    let mut s = String::new();
    s.push_str("*******************************************************\n");
    s.push_str(&format!("sdiag output at {}\n", when(d.now)));
    s.push_str(&format!("Data since      {}\n", when(d.since)));
    s.push_str("*******************************************************\n");
    s.push_str(&format!("Server thread count:  {}\n", d.server_threads));
    s.push_str("RPC queue enabled:    0\n");
    s.push_str(&format!("Agent queue size:     {}\n", d.agent_retrying));
    s.push_str(&format!("Agent count:          {}\n", d.agent_count));
    s.push_str(&format!("Agent thread count:   {}\n", d.agent_count));
    s.push_str(&format!("DBD Agent queue size: {}\n\n", d.dbd_queue));
    s.push_str(&format!("Jobs submitted: {}\n", d.jobs_submitted));
    s.push_str(&format!("Jobs started:   {}\n", d.jobs_started));
    s.push_str(&format!("Jobs completed: {}\n", d.jobs_completed));
    s.push_str(&format!("Jobs canceled:  {}\n", d.jobs_canceled));
    s.push_str(&format!("Jobs failed:    {}\n\n", d.jobs_failed));
    s.push_str(&format!("Job states ts:  {}\n", when(d.job_states_ts)));
    s.push_str(&format!("Jobs pending:   {}\n", d.jobs_pending));
    s.push_str(&format!("Jobs running:   {}\n\n", d.jobs_running));
    s.push_str("Main schedule statistics (microseconds):\n");
    s.push_str(&format!("\tLast cycle:   {}\n", d.main_last_us));
    s.push_str(&format!("\tMax cycle:    {}\n", d.main_max_us));
    s.push_str(&format!("\tTotal cycles: {}\n", d.main_cycles));
    if d.main_cycles > 0 {
        s.push_str(&format!(
            "\tMean cycle:   {}\n",
            mean(d.main_total_us, d.main_cycles)
        ));
        s.push_str(&format!(
            "\tMean depth cycle:  {}\n",
            mean(d.main_total_depth, d.main_cycles)
        ));
    }
    if elapsed > 60 {
        s.push_str(&format!(
            "\tCycles per minute: {}\n",
            d.main_cycles / (elapsed as u64 / 60)
        ));
    }
    s.push_str(&format!("\tLast queue length: {}\n", d.main_last_queue));
    // Every pass here goes through the whole queue: Slurm's other reasons
    // (depth, start and time limits, licenses, RPC load) never end one.
    s.push_str("\nMain scheduler exit:\n");
    for (why, n) in [
        ("End of job queue", d.main_cycles),
        ("Hit default_queue_depth", 0),
        ("Hit sched_max_job_start", 0),
        ("Blocked on licenses", 0),
        ("Hit max_rpc_cnt", 0),
        ("Timeout (max_sched_time)", 0),
    ] {
        s.push_str(&format!("\t{why}:{n:>2}\n"));
    }
    s.push_str("\nBackfilling stats\n");
    s.push_str(&format!(
        "\tTotal backfilled jobs (since last slurm start): {}\n",
        d.bf_backfilled_jobs
    ));
    // (The statistics start again only when reset: both count the same.)
    s.push_str(&format!(
        "\tTotal backfilled jobs (since last stats cycle start): {}\n",
        d.bf_backfilled_jobs
    ));
    s.push_str("\tTotal backfilled heterogeneous job components: 0\n");
    s.push_str(&format!("\tTotal cycles: {}\n", d.bf_cycles));
    s.push_str(&format!(
        "\tLast cycle when: {}\n",
        d.bf_last_when.map_or("N/A".to_string(), when)
    ));
    s.push_str(&format!("\tLast cycle: {}\n", d.bf_last_us));
    s.push_str(&format!("\tMax cycle:  {}\n", d.bf_max_us));
    if d.bf_cycles > 0 {
        s.push_str(&format!(
            "\tMean cycle: {}\n",
            mean(d.bf_total_us, d.bf_cycles)
        ));
    }
    s.push_str(&format!("\tLast depth cycle: {}\n", d.bf_last_depth));
    s.push_str(&format!(
        "\tLast depth cycle (try sched): {}\n",
        d.bf_last_depth_try
    ));
    if d.bf_cycles > 0 {
        s.push_str(&format!(
            "\tDepth Mean: {}\n",
            mean(d.bf_total_depth, d.bf_cycles)
        ));
        s.push_str(&format!(
            "\tDepth Mean (try depth): {}\n",
            mean(d.bf_total_depth_try, d.bf_cycles)
        ));
    }
    s.push_str(&format!("\tLast queue length: {}\n", d.bf_last_queue));
    if d.bf_cycles > 0 {
        s.push_str(&format!(
            "\tQueue length mean: {}\n",
            mean(d.bf_total_queue, d.bf_cycles)
        ));
    }
    s.push_str(&format!("\tLast table size: {}\n", d.bf_table_size));
    if d.bf_cycles > 0 {
        s.push_str(&format!(
            "\tMean table size: {}\n",
            mean(d.bf_total_table_size, d.bf_cycles)
        ));
    }
    // bf_max_job_start, bf_max_time and bf_node_space_size are not taken
    // here, and a pass is never cut short by a change: those stay 0.
    s.push_str("\nBackfill exit\n");
    for (why, n) in [
        ("End of job queue", d.bf_exit_end),
        ("Hit bf_max_job_start", 0),
        ("Hit bf_max_job_test", d.bf_exit_max_job_test),
        ("System state changed", 0),
        ("Hit table size limit (bf_node_space_size)", 0),
        ("Timeout (bf_max_time)", 0),
    ] {
        s.push_str(&format!("\t{why}:{n:>2}\n"));
    }
    s.push_str(&format!(
        "\nLatency for 1000 calls to gettimeofday(): {} microseconds\n",
        d.gettimeofday_latency
    ));
    rpc_table(
        &mut s,
        "Remote Procedure Call statistics by message type",
        &d.rpc_types,
        sort,
        false,
    );
    rpc_table(
        &mut s,
        "Remote Procedure Call statistics by user",
        &d.rpc_users,
        sort,
        true,
    );
    s.push_str("\nPending RPC statistics\n");
    if d.pending_rpcs.is_empty() {
        s.push_str("\tNo pending RPCs\n");
    }
    for p in &d.pending_rpcs {
        s.push_str(&format!(
            "\t{:<40}({:>5}) count:{:<6}\n",
            p.name, p.id, p.count
        ));
    }
    if !d.pending_rpcs.is_empty() {
        s.push_str("\nPending RPCs\n");
    }
    for (i, p) in d.pending_rpcs.iter().enumerate() {
        let hosts = if no_trunc {
            p.hosts.as_str()
        } else {
            // (At a character's boundary: node names come from slurm.conf.)
            let mut end = p.hosts.len().min(MAX_HOSTLIST_LEN);
            while !p.hosts.is_char_boundary(end) {
                end -= 1;
            }
            &p.hosts[..end]
        };
        s.push_str(&format!("\t{:>2}: {:<36} {hosts}\n", i + 1, p.name));
    }
    s
}

/// sdiag's options (the parser's table, also read by [`crate::compat`]).
pub(crate) const OPTS: &[crate::fmt::Opt] = {
    use crate::fmt::{Arg::*, Opt};
    &[
        Opt::new(Some('a'), "all", No),
        Opt::new(Some('h'), "help", No),
        Opt::new(Some('i'), "sort-by-id", No),
        Opt::new(None, "json", Optional),
        Opt::new(Some('M'), "cluster", Required),
        Opt::new(None, "no-trunc", No),
        Opt::new(Some('r'), "reset", No),
        Opt::new(Some('t'), "sort-by-time", No),
        Opt::new(Some('T'), "sort-by-time2", No),
        Opt::new(Some('V'), "version", No),
        Opt::new(None, "usage", No),
        Opt::new(None, "yaml", Optional),
    ]
};

pub(crate) const COMPAT_NOTES: &[(&str, crate::compat::Support)] = &[(
    "cluster",
    crate::compat::Support::Differs("one cluster per controller: another name is refused"),
)];

/// What sdiag was asked for.
#[derive(Debug, Default, PartialEq)]
pub struct Opts {
    pub sort: Sort,
    pub json: bool,
    /// `-M` (else `SLURM_CLUSTERS`): must name this cluster.
    pub cluster: Option<String>,
    pub reset: bool,
    pub no_trunc: bool,
}

/// What to do: the options, or (having printed help, usage or the
/// version, or found an error, said on stderr) the exit code.
pub fn parse_args_env(args: &[String], env: &dyn Fn(&str) -> Option<String>) -> Result<Opts, i32> {
    let mut o = Opts {
        json: match crate::jsonout::env_wants(env) {
            Ok(j) => j,
            Err(e) => {
                eprintln!("sdiag: error: {e}");
                return Err(1);
            }
        },
        cluster: env("SLURM_CLUSTERS"),
        ..Default::default()
    };
    let parsed = match crate::fmt::getopt("sdiag", args, OPTS) {
        Ok(p) => p,
        Err(e) => {
            eprintln!("{e}");
            eprintln!("Try \"sdiag --help\" for more information");
            return Err(1);
        }
    };
    for p in parsed {
        match p {
            crate::fmt::Parsed::Opt(name, v) => match name {
                "json" | "yaml" => {
                    if let Err(e) = crate::jsonout::check_parser(v.as_deref()) {
                        eprintln!("sdiag: error: {e}");
                        return Err(1);
                    }
                    o.json = true;
                }
                "cluster" => o.cluster = v,
                "version" => {
                    println!("slurm {}", slurm_proto::SLURM_VERSION);
                    return Err(0);
                }
                "help" => {
                    print!("{}", crate::help::help("sdiag"));
                    return Err(0);
                }
                "usage" => {
                    print!("{}", crate::help::usage("sdiag"));
                    return Err(0);
                }
                "sort-by-id" => o.sort = Sort::Id,
                "sort-by-time" => o.sort = Sort::Time,
                "sort-by-time2" => o.sort = Sort::AvgTime,
                "reset" => o.reset = true,
                "no-trunc" => o.no_trunc = true,
                // Every section is always shown.
                _ => {}
            },
            crate::fmt::Parsed::Word(w) => {
                eprintln!("sdiag: error: unexpected argument '{w}'");
                eprintln!("Try \"sdiag --help\" for more information");
                return Err(1);
            }
        }
    }
    Ok(o)
}

pub fn main() -> i32 {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let Opts {
        sort,
        json,
        cluster,
        reset,
        no_trunc,
    } = match parse_args_env(&args, &|k| std::env::var(k).ok()) {
        Ok(o) => o,
        Err(code) => return code,
    };
    let conf = match common::load_conf("sdiag") {
        Ok(c) => c,
        Err(code) => return code,
    };
    if let Some(c) = cluster.filter(|c| *c != conf.cluster_name) {
        eprintln!(
            "sdiag: error: Invalid cluster name: {c} (this is {})",
            conf.cluster_name
        );
        return 1;
    }
    if reset {
        return match call(&common::client(&conf), RequestBody::ResetDiag) {
            Ok(Response::Ok) => {
                println!("Reset scheduling statistics");
                0
            }
            Ok(Response::Error(e)) => {
                eprintln!("slurm_reset_statistics: {e}");
                1
            }
            Ok(_) => {
                eprintln!("slurm_reset_statistics: Unexpected message received");
                1
            }
            Err(e) => {
                eprintln!("slurm_reset_statistics: {e}");
                1
            }
        };
    }
    match call(&common::client(&conf), RequestBody::GetDiag) {
        Ok(Response::Diag(d)) if json => {
            let mut fields = serde_json::Map::new();
            fields.insert(
                "statistics".into(),
                slurm_openapi::openapi::diag_statistics(&d),
            );
            print!(
                "{}",
                crate::jsonout::fields_text("sdiag", &args, &conf.cluster_name, fields)
            );
            0
        }
        Ok(Response::Diag(d)) => {
            print!("{}", render_with(&d, sort, no_trunc));
            0
        }
        Ok(_) => {
            eprintln!("slurm_get_statistics: Unexpected message received");
            1
        }
        Err(e) => {
            eprintln!("slurm_get_statistics: {e}");
            1
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn means_and_sections() {
        let d = DiagStats {
            since: 0,
            now: 600,
            jobs_submitted: 10,
            main_cycles: 20,
            main_total_us: 2000,
            main_total_depth: 40,
            bf_cycles: 0,
            ..Default::default()
        };
        let r = render(&d);
        assert!(r.contains("Jobs submitted: 10\n"));
        assert!(r.contains("\tMean cycle:   100\n"));
        assert!(r.contains("\tMean depth cycle:  2\n"));
        assert!(r.contains("\tCycles per minute: 2\n"));
        assert!(r.contains("\tLast cycle when: N/A\n"));
        // As Slurm's: no backfill means before a backfill cycle.
        assert!(!r.contains("\tMean cycle: 0\n"), "{r}");
        assert!(!r.contains("Depth Mean"), "{r}");
        // No cycle yet, and under a minute: no main means, no rate.
        let r = render(&DiagStats {
            since: 0,
            now: 30,
            ..Default::default()
        });
        assert!(
            !r.contains("Mean cycle") && !r.contains("Cycles per minute"),
            "{r}"
        );
    }

    #[test]
    fn scheduler_exits_backfill_tries_and_clock_latency_as_slurms() {
        let d = DiagStats {
            since: 0,
            now: 600,
            main_cycles: 5,
            main_last_queue: 3,
            bf_cycles: 2,
            bf_last_depth: 6,
            bf_total_depth: 12,
            bf_last_depth_try: 4,
            bf_total_depth_try: 10,
            bf_last_queue: 6,
            bf_total_queue: 20,
            bf_table_size: 3,
            bf_total_table_size: 8,
            bf_exit_end: 1,
            bf_exit_max_job_test: 1,
            gettimeofday_latency: 17,
            ..Default::default()
        };
        let r = render(&d);
        assert!(
            r.contains(
                "\tLast queue length: 3\n\nMain scheduler exit:\n\
                 \tEnd of job queue: 5\n\tHit default_queue_depth: 0\n\
                 \tHit sched_max_job_start: 0\n\tBlocked on licenses: 0\n\
                 \tHit max_rpc_cnt: 0\n\tTimeout (max_sched_time): 0\n\nBackfilling stats\n"
            ),
            "{r}"
        );
        assert!(
            r.contains(
                "\tLast depth cycle: 6\n\tLast depth cycle (try sched): 4\n\
                 \tDepth Mean: 6\n\tDepth Mean (try depth): 5\n\
                 \tLast queue length: 6\n\tQueue length mean: 10\n\
                 \tLast table size: 3\n\tMean table size: 4\n\nBackfill exit\n\
                 \tEnd of job queue: 1\n\tHit bf_max_job_start: 0\n\
                 \tHit bf_max_job_test: 1\n\tSystem state changed: 0\n\
                 \tHit table size limit (bf_node_space_size): 0\n\
                 \tTimeout (bf_max_time): 0\n\n\
                 Latency for 1000 calls to gettimeofday(): 17 microseconds\n\n\
                 Remote Procedure Call statistics by message type\n"
            ),
            "{r}"
        );
    }

    #[test]
    fn the_agents_and_pending_rpcs_as_slurms() {
        let hosts = format!(
            "n[{}]",
            (1..40).map(|i| i.to_string()).collect::<Vec<_>>().join(",")
        );
        let d = DiagStats {
            since: 0,
            now: 600,
            server_threads: 2,
            agent_count: 5,
            agent_retrying: 1,
            dbd_queue: 7,
            pending_rpcs: vec![
                slurm_proto::PendingRpc {
                    name: "REQUEST_BATCH_JOB_LAUNCH".into(),
                    id: 4005,
                    count: 4,
                    hosts: hosts.clone(),
                },
                slurm_proto::PendingRpc {
                    name: "REQUEST_TERMINATE_JOB".into(),
                    id: 6011,
                    count: 1,
                    hosts: "n2".into(),
                },
            ],
            ..Default::default()
        };
        let r = render(&d);
        assert!(
            r.contains(
                "*******************************************************\n\
                 Server thread count:  2\n\
                 RPC queue enabled:    0\n\
                 Agent queue size:     1\n\
                 Agent count:          5\n\
                 Agent thread count:   5\n\
                 DBD Agent queue size: 7\n\n\
                 Jobs submitted: 0\n"
            ),
            "{r}"
        );
        let tail = r.split("\nPending RPC statistics\n").nth(1).unwrap();
        let want_first = format!(
            "\t 1: {:<36} {}\n",
            "REQUEST_BATCH_JOB_LAUNCH",
            &hosts[..80]
        );
        assert!(
            tail.starts_with(&format!(
                "\t{:<40}({:>5}) count:{:<6}\n\t{:<40}({:>5}) count:{:<6}\n\nPending RPCs\n{want_first}\t 2: {:<36} n2\n",
                "REQUEST_BATCH_JOB_LAUNCH", 4005, 4, "REQUEST_TERMINATE_JOB", 6011, 1,
                "REQUEST_TERMINATE_JOB"
            )),
            "{tail}"
        );
        // --no-trunc: the whole host list.
        assert!(render_with(&d, Sort::Count, true).contains(&format!(" {hosts}\n")));
        let none = render(&DiagStats::default());
        assert!(
            none.ends_with("\nPending RPC statistics\n\tNo pending RPCs\n"),
            "{none}"
        );
    }

    #[test]
    fn options_and_the_environment() {
        let env = |k: &str| (k == "SLURM_CLUSTERS").then(|| "c2".to_string());
        let o = parse_args_env(&["--no-trunc".to_string(), "-t".to_string()], &env).unwrap();
        assert_eq!(
            o,
            Opts {
                sort: Sort::Time,
                cluster: Some("c2".into()),
                no_trunc: true,
                ..Default::default()
            }
        );
        // -M wins over SLURM_CLUSTERS.
        let o = parse_args_env(&["-M".to_string(), "c1".to_string()], &env).unwrap();
        assert_eq!(o.cluster.as_deref(), Some("c1"));
    }

    #[test]
    fn rpc_tables_as_slurms() {
        let stat = |name: &str, id, count, total_us| slurm_proto::RpcStat {
            name: name.into(),
            id,
            count,
            total_us,
        };
        let d = DiagStats {
            rpc_types: vec![
                stat("REQUEST_SUBMIT_BATCH_JOB", 4003, 2, 900),
                stat("REQUEST_JOB_INFO", 2003, 5, 500),
            ],
            rpc_users: vec![stat("root", 0, 7, 1400)],
            ..Default::default()
        };
        let r = render(&d);
        assert!(r.ends_with(
            "\nRemote Procedure Call statistics by message type\n\
             \tREQUEST_JOB_INFO                        ( 2003) count:5      ave_time:100    total_time:500\n\
             \tREQUEST_SUBMIT_BATCH_JOB                ( 4003) count:2      ave_time:450    total_time:900\n\
             \nRemote Procedure Call statistics by user\n\
             \troot            (       0) count:7      ave_time:200    total_time:1400\n\
             \nPending RPC statistics\n\tNo pending RPCs\n"
        ), "{r}");
        let t = render_sorted(&d, Sort::Time);
        assert!(t.find("REQUEST_SUBMIT_BATCH_JOB").unwrap() < t.find("REQUEST_JOB_INFO").unwrap());
    }
}
