//! `MetricsType=metrics/openmetrics`: OpenMetrics text rendered from a
//! snapshot. Served by [`crate::http`] on the controller's port.
//!
//! The endpoints, metric names, label keys and HELP texts are those of
//! Slurm 25.11's `metrics/openmetrics` plugin (see the Metrics Guide,
//! `metrics.html`). Every family is a `gauge`, as in Slurm. Each endpoint
//! answers one family after another (all samples of a family together, HELP
//! and TYPE first) and ends with `# EOF`.
//!
//! Values come from the snapshot only:
//!
//! * families for states or features this implementation does not have
//!   (CONFIGURING, REQUEUED, power saving, cloud nodes, reboots, ...) are
//!   emitted with their true value, 0;
//! * quantities this controller does not measure (agent threads, RPC queue
//!   sizes, backfill table sizes, scheduler exit reasons, GPU counts, dynamic
//!   nodes) are left out rather than reported as a made-up number;
//! * memory: families whose name or HELP says "bytes" are in bytes; the
//!   partition `nodes_mem_*` families are in MiB, Slurm's unit for them;
//! * scheduler cycle times are in microseconds, as `sdiag` reports them.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::{Display, Write as _};

use slurm_proto::{JobReason, JobRecord, JobState, NodeBaseState, NodeRecord};

use crate::state::Snapshot;

/// The endpoints Slurm 25.11 documents.
pub const ENDPOINTS: &[&str] = &[
    "/metrics/jobs",
    "/metrics/jobs-users-accts",
    "/metrics/nodes",
    "/metrics/partitions",
    "/metrics/scheduler",
];

const MIB: u64 = 1024 * 1024;

/// Render `path`; `None` for an endpoint we do not serve.
pub fn render(path: &str, snap: &Snapshot) -> Option<String> {
    let mut out = Out::default();
    match path {
        "/metrics" | "/metrics/" => return Some(index()),
        "/metrics/jobs" => jobs(&mut out, snap),
        "/metrics/jobs-users-accts" => users_accts(&mut out, snap),
        "/metrics/nodes" => nodes(&mut out, snap),
        "/metrics/partitions" => partitions(&mut out, snap),
        "/metrics/scheduler" => scheduler(&mut out, snap),
        _ => return None,
    }
    Some(out.finish())
}

/// `GET /metrics`: the list of endpoints, worded (and ordered) as
/// slurmctld words it.
fn index() -> String {
    let mut s = String::from("slurmctld index of metrics endpoints:\n");
    for (path, what) in [
        ("/metrics/jobs", "get job metrics"),
        ("/metrics/nodes", "get node metrics"),
        ("/metrics/partitions", "get partition metrics"),
        (
            "/metrics/jobs-users-accts",
            "get user and account jobs metrics",
        ),
        ("/metrics/scheduler", "get scheduler metrics"),
    ] {
        let _ = writeln!(s, "  '{path}': {what}");
    }
    s
}

// ---------------------------------------------------------------------------
// OpenMetrics text writer
// ---------------------------------------------------------------------------

#[derive(Default)]
struct Out {
    s: String,
}

impl Out {
    fn header(&mut self, name: &str, help: &str) {
        let _ = writeln!(self.s, "# HELP {name} {}", escape_help(help));
        let _ = writeln!(self.s, "# TYPE {name} gauge");
    }

    /// One unlabelled gauge.
    fn gauge(&mut self, name: &str, help: &str, value: impl Display) {
        self.header(name, help);
        let _ = writeln!(self.s, "{name} {value}");
    }

    /// One gauge family with a single label; nothing at all when `samples`
    /// is empty (Slurm prints no HELP/TYPE for a family without samples).
    fn labelled<V: Display>(&mut self, name: &str, help: &str, key: &str, samples: &[(&str, V)]) {
        if samples.is_empty() {
            return;
        }
        self.header(name, help);
        for (val, v) in samples {
            let _ = writeln!(self.s, "{name}{{{key}=\"{}\"}} {v}", escape_label(val));
        }
    }

    fn finish(mut self) -> String {
        self.s.push_str("# EOF\n");
        self.s
    }
}

/// Label values: backslash, double quote and line feed are escaped.
fn escape_label(v: &str) -> String {
    let mut s = String::with_capacity(v.len());
    for c in v.chars() {
        match c {
            '\\' => s.push_str("\\\\"),
            '"' => s.push_str("\\\""),
            '\n' => s.push_str("\\n"),
            c => s.push(c),
        }
    }
    s
}

/// HELP text: backslash and line feed are escaped.
fn escape_help(v: &str) -> String {
    v.replace('\\', "\\\\").replace('\n', "\\n")
}

// ---------------------------------------------------------------------------
// Job counts (shared by /jobs, /jobs-users-accts and /partitions)
// ---------------------------------------------------------------------------

/// Job statistics over a set of jobs, as Slurm's `jobs_stats_t` counts them.
#[derive(Default)]
struct JobCounts {
    /// Every job record.
    total: u64,
    /// Jobs not yet completed (pending, running, suspended, or completing).
    active: u64,
    bootfail: u64,
    cancelled: u64,
    completed: u64,
    completing: u64,
    deadline: u64,
    failed: u64,
    finished: u64,
    hold: u64,
    node_failed: u64,
    oom: u64,
    pending: u64,
    preempted: u64,
    running: u64,
    started: u64,
    suspended: u64,
    timeout: u64,
    /// Of running and suspended jobs.
    cpus_alloc: u64,
    mem_alloc_mib: u64,
    nodes: BTreeSet<String>,
    /// Over pending jobs (`_nohold`: excluding held ones).
    max_job_nodes: u64,
    max_job_nodes_nohold: u64,
    min_job_nodes: u64,
    min_job_nodes_nohold: u64,
    wait_part_node_limit: u64,
}

fn is_held(j: &JobRecord) -> bool {
    j.held.is_some() || matches!(j.reason, JobReason::JobHeldUser | JobReason::JobHeldAdmin)
}

impl JobCounts {
    fn add(&mut self, j: &JobRecord) {
        self.total += 1;
        let finished = j.state.is_finished();
        if !finished || j.completing {
            self.active += 1;
        }
        if finished {
            self.finished += 1;
        }
        if j.state != JobState::Pending {
            self.started += 1;
        }
        if j.completing {
            self.completing += 1;
        }
        let held = is_held(j);
        match j.state {
            JobState::Pending => {
                self.pending += 1;
                let min = u64::from(j.min_nodes);
                let max = u64::from(j.max_nodes.max(j.min_nodes));
                self.max_job_nodes = self.max_job_nodes.max(max);
                self.min_job_nodes = self.min_job_nodes.max(min);
                if held {
                    self.hold += 1;
                } else {
                    self.max_job_nodes_nohold = self.max_job_nodes_nohold.max(max);
                    self.min_job_nodes_nohold = self.min_job_nodes_nohold.max(min);
                }
                if j.reason == JobReason::PartitionNodeLimit {
                    self.wait_part_node_limit += 1;
                }
            }
            JobState::Running => self.running += 1,
            JobState::Suspended => self.suspended += 1,
            JobState::Completed => self.completed += 1,
            JobState::Cancelled => self.cancelled += 1,
            JobState::Failed => self.failed += 1,
            JobState::Timeout => self.timeout += 1,
            JobState::NodeFail => self.node_failed += 1,
            JobState::Preempted => self.preempted += 1,
            JobState::BootFail => self.bootfail += 1,
            JobState::Deadline => self.deadline += 1,
            JobState::OutOfMemory => self.oom += 1,
            // Never a live job's state.
            JobState::Requeued => {}
        }
        if j.state.is_active() {
            self.cpus_alloc += u64::from(j.alloc.total_cpus());
            self.mem_alloc_mib = self
                .mem_alloc_mib
                .saturating_add(j.alloc.mem.iter().copied().fold(0u64, u64::saturating_add));
            self.nodes.extend(j.alloc.nodes.iter().cloned());
        }
    }

    fn of<'a>(jobs: impl IntoIterator<Item = &'a JobRecord>) -> JobCounts {
        let mut c = JobCounts::default();
        for j in jobs {
            c.add(j);
        }
        c
    }
}

/// Which endpoint a job family is printed for: the HELP texts differ a
/// little between them in Slurm.
#[derive(Clone, Copy, PartialEq)]
enum Ctx {
    /// `/metrics/jobs`: `slurm_jobs*`.
    Jobs,
    /// `/metrics/jobs-users-accts`: `slurm_user_jobs*`, `slurm_account_jobs*`.
    UserAcct,
    /// `/metrics/partitions`: `slurm_partition_jobs*`.
    Partition,
}

/// A job family: name suffix after `..._jobs`, HELP text, value.
struct JobFam {
    suffix: &'static str,
    help: &'static str,
    get: fn(&JobCounts) -> u64,
}

/// The job families, in output order, for one endpoint.
fn job_families(ctx: Ctx) -> Vec<JobFam> {
    fn f(suffix: &'static str, help: &'static str, get: fn(&JobCounts) -> u64) -> JobFam {
        JobFam { suffix, help, get }
    }
    let part = ctx == Ctx::Partition;
    let mut v = vec![
        if part {
            f("", "Number of jobs in this partition", |c| c.active)
        } else {
            f("", "Total number of jobs", |c| c.total)
        },
        f("_bootfail", "Number of jobs in BootFail state", |c| {
            c.bootfail
        }),
        f("_cancelled", "Number of jobs in Cancelled state", |c| {
            c.cancelled
        }),
        f("_completed", "Number of jobs in Completed state", |c| {
            c.completed
        }),
        f("_completing", "Number of jobs in Completing state", |c| {
            c.completing
        }),
        f("_configuring", "Number of jobs in Configuring state", |_| 0),
        f(
            "_cpus_alloc",
            "Total number of Cpus allocated by jobs",
            |c| c.cpus_alloc,
        ),
        f("_deadline", "Number of jobs in Deadline state", |c| {
            c.deadline
        }),
        f("_expediting", "Number of jobs in Expediting state", |_| 0),
        f("_failed", "Number of jobs in Failed state", |c| c.failed),
        f(
            "_fed_requeued",
            "Number of jobs requeued in a federation",
            |_| 0,
        ),
        f(
            "_finished",
            if part {
                "Number of jobs in Finished"
            } else {
                "Number of finished jobs"
            },
            |c| c.finished,
        ),
        f("_hold", "Number of jobs in Hold state", |c| c.hold),
    ];
    if part {
        v.extend([
            f(
                "_max_job_nodes",
                "Max of the max_nodes required of all pending jobs in that partition",
                |c| c.max_job_nodes,
            ),
            f(
                "_max_job_nodes_nohold",
                "Max of the max_nodes required of all pending jobs in that partition excluding Held jobs",
                |c| c.max_job_nodes_nohold,
            ),
        ]);
    }
    v.push(f(
        "_memory_alloc",
        "Total memory bytes allocated by jobs",
        |c| c.mem_alloc_mib.saturating_mul(MIB),
    ));
    if part {
        v.extend([
            f(
                "_min_job_nodes",
                "Max of the min_nodes required of all pending jobs in that partition",
                |c| c.min_job_nodes,
            ),
            f(
                "_min_job_nodes_nohold",
                "Max of the min_nodes required of all pending jobs in that partition excluding Held jobs",
                |c| c.min_job_nodes_nohold,
            ),
        ]);
    }
    v.push(f(
        "_node_failed",
        "Number of jobs in Node Failed state",
        |c| c.node_failed,
    ));
    if !part {
        v.push(f(
            "_nodes_alloc",
            "Total number of nodes allocated by jobs",
            |c| c.nodes.len() as u64,
        ));
    }
    v.extend([
        f(
            "_outofmemory",
            "Number of jobs in Out of Memory state",
            |c| c.oom,
        ),
        f("_pending", "Number of jobs in Pending state", |c| c.pending),
        f(
            "_powerup_node",
            "Number of jobs in PowerUp Node state",
            |_| 0,
        ),
        f("_preempted", "Number of jobs in Preempted state", |c| {
            c.preempted
        }),
        f("_requeued", "Number of jobs in Requeued state", |_| 0),
        f("_resizing", "Number of jobs in Resizing state", |_| 0),
        f(
            "_revoked",
            match ctx {
                // Slurm's own spelling.
                Ctx::Jobs => "Number of jobs in Rvoked state",
                Ctx::UserAcct => "Number of jobs revoked",
                Ctx::Partition => "Number of revoked jobs",
            },
            |_| 0,
        ),
        f("_running", "Number of jobs in Running state", |c| c.running),
        f(
            "_signaling",
            if part {
                "Number of jobs in Signaling state"
            } else {
                "Number of jobs being signaled"
            },
            |_| 0,
        ),
        f("_stageout", "Number of jobs in StageOut state", |_| 0),
        f(
            "_started",
            if part {
                "Number of jobs started"
            } else {
                "Number of started jobs"
            },
            |c| c.started,
        ),
        f("_suspended", "Number of jobs in Suspended state", |c| {
            c.suspended
        }),
        f("_timeout", "Number of jobs in Timeout state", |c| c.timeout),
    ]);
    if part {
        v.push(f(
            "_wait_part_node_limit",
            "Jobs wait partition node limit",
            |c| c.wait_part_node_limit,
        ));
    }
    v
}

/// The partition a job counts under: the one it runs in, or the first it
/// asked for.
fn job_partition(j: &JobRecord) -> &str {
    j.partition.split(',').next().unwrap_or("").trim()
}

// ---------------------------------------------------------------------------
// Endpoints
// ---------------------------------------------------------------------------

/// `/metrics/jobs`.
fn jobs(out: &mut Out, snap: &Snapshot) {
    let c = JobCounts::of(snap.jobs.iter().map(|j| j.as_ref()));
    for fam in job_families(Ctx::Jobs) {
        out.gauge(
            &format!("slurm_jobs{}", fam.suffix),
            fam.help,
            (fam.get)(&c),
        );
    }
}

/// `/metrics/jobs-users-accts`: per user (`username`), then per account.
fn users_accts(out: &mut Out, snap: &Snapshot) {
    let mut users: BTreeMap<&str, JobCounts> = BTreeMap::new();
    let mut accts: BTreeMap<&str, JobCounts> = BTreeMap::new();
    for j in &snap.jobs {
        if !j.user_name.is_empty() {
            users.entry(j.user_name.as_str()).or_default().add(j);
        }
        if !j.account.is_empty() {
            accts.entry(j.account.as_str()).or_default().add(j);
        }
    }
    for (prefix, key, set) in [("user", "username", &users), ("account", "account", &accts)] {
        for fam in job_families(Ctx::UserAcct) {
            let samples: Vec<(&str, u64)> = set.iter().map(|(n, c)| (*n, (fam.get)(c))).collect();
            out.labelled(
                &format!("slurm_{prefix}_jobs{}", fam.suffix),
                fam.help,
                key,
                &samples,
            );
        }
    }
}

/// One node as Slurm's `node_stats_t` sees it.
struct NodeFacts<'a> {
    name: &'a str,
    cpus: u64,
    cpus_alloc: u64,
    /// No CoreSpec here: every CPU is usable by jobs.
    cpus_efctv: u64,
    cpus_idle: u64,
    mem_mib: u64,
    mem_alloc_mib: u64,
    /// No MemSpecLimit here: all of RealMemory.
    mem_avail_mib: u64,
    mem_free_mib: u64,
}

impl<'a> NodeFacts<'a> {
    fn of(n: &'a NodeRecord) -> Self {
        let cpus = u64::from(n.cpus);
        let alloc = u64::from(n.alloc_cpus);
        NodeFacts {
            name: &n.name,
            cpus,
            cpus_alloc: alloc,
            cpus_efctv: cpus,
            cpus_idle: cpus.saturating_sub(alloc),
            mem_mib: n.real_memory,
            mem_alloc_mib: n.alloc_mem,
            mem_avail_mib: n.real_memory,
            mem_free_mib: n.free_mem.unwrap_or(0),
        }
    }
}

/// Node counts by state, as Slurm's `nodes_stats_t` (and the node part of
/// `partition_stats_t`) counts them: one base state per node, flags apart.
#[derive(Default)]
struct NodeCounts {
    total: u64,
    alloc: u64,
    completing: u64,
    down: u64,
    /// Nodes with the DRAIN flag (drained and draining).
    drain: u64,
    drained: u64,
    draining: u64,
    external: u64,
    future: u64,
    idle: u64,
    maint: u64,
    mixed: u64,
    no_resp: u64,
    resv: u64,
    unknown: u64,
    cpus_alloc: u64,
    cpus_efctv: u64,
    cpus_idle: u64,
    mem_alloc_mib: u64,
    mem_avail_mib: u64,
    mem_free_mib: u64,
    mem_total_mib: u64,
}

impl NodeCounts {
    fn add(&mut self, n: &NodeRecord) {
        self.total += 1;
        match n.base_state {
            NodeBaseState::Future => self.future += 1,
            NodeBaseState::Down => self.down += 1,
            NodeBaseState::Mixed => self.mixed += 1,
            NodeBaseState::Allocated => self.alloc += 1,
            NodeBaseState::Idle => self.idle += 1,
            NodeBaseState::Unknown => self.unknown += 1,
        }
        let busy = matches!(
            n.base_state,
            NodeBaseState::Allocated | NodeBaseState::Mixed
        ) || n.flags.completing;
        if n.flags.completing {
            self.completing += 1;
        }
        if n.flags.drain {
            self.drain += 1;
            if busy {
                self.draining += 1;
            } else {
                self.drained += 1;
            }
        }
        if n.external {
            self.external += 1;
        }
        if n.flags.maint {
            self.maint += 1;
        }
        if n.flags.not_responding {
            self.no_resp += 1;
        }
        if n.flags.reserved {
            self.resv += 1;
        }
        let f = NodeFacts::of(n);
        self.cpus_alloc += f.cpus_alloc;
        self.cpus_efctv += f.cpus_efctv;
        self.cpus_idle += f.cpus_idle;
        self.mem_alloc_mib = self.mem_alloc_mib.saturating_add(f.mem_alloc_mib);
        self.mem_avail_mib = self.mem_avail_mib.saturating_add(f.mem_avail_mib);
        self.mem_free_mib = self.mem_free_mib.saturating_add(f.mem_free_mib);
        self.mem_total_mib = self.mem_total_mib.saturating_add(f.mem_mib);
    }
}

/// `/metrics/nodes`: cluster node counts by state, then per-node resources.
fn nodes(out: &mut Out, snap: &Snapshot) {
    let mut c = NodeCounts::default();
    for n in &snap.nodes {
        c.add(n);
    }
    let counts: [(&str, &str, u64); 27] = [
        ("slurm_nodes", "Total number of nodes", c.total),
        (
            "slurm_nodes_alloc",
            "Number of nodes in Allocated state",
            c.alloc,
        ),
        ("slurm_nodes_blocked", "Number of nodes in Blocked state", 0),
        (
            "slurm_nodes_completing",
            "Number of nodes with Completing flag",
            c.completing,
        ),
        ("slurm_nodes_cloud", "Number of Cloud nodes", 0),
        ("slurm_nodes_down", "Number of nodes in Down state", c.down),
        (
            "slurm_nodes_drain",
            "Number of nodes with Drain flag",
            c.drain,
        ),
        ("slurm_nodes_drained", "Number of drained nodes", c.drained),
        (
            "slurm_nodes_draining",
            "Number of nodes in draining condition (Drain state with active jobs)",
            c.draining,
        ),
        (
            "slurm_nodes_dyn_future",
            "Number of future dynamic nodes",
            0,
        ),
        (
            "slurm_nodes_external",
            "Number of external nodes",
            c.external,
        ),
        ("slurm_nodes_fail", "Number of nodes with Fail flag", 0),
        (
            "slurm_nodes_future",
            "Number of nodes in Future state",
            c.future,
        ),
        ("slurm_nodes_idle", "Number of nodes in Idle state", c.idle),
        (
            "slurm_nodes_invalid_reg",
            "Number of nodes with Invalid Registration flag",
            0,
        ),
        (
            "slurm_nodes_maint",
            "Number of nodes with Maintenance flag",
            c.maint,
        ),
        (
            "slurm_nodes_mixed",
            "Number of nodes in Mixed state",
            c.mixed,
        ),
        (
            "slurm_nodes_noresp",
            "Number of nodes with Not Responding flag",
            c.no_resp,
        ),
        (
            "slurm_nodes_planned",
            "Number of nodes with Planned flag",
            0,
        ),
        (
            "slurm_nodes_power_down",
            "Number of nodes marked to be powered down",
            0,
        ),
        (
            "slurm_nodes_power_up",
            "Number of nodes marked to be powered up",
            0,
        ),
        (
            "slurm_nodes_powered_down",
            "Number of nodes powered down",
            0,
        ),
        ("slurm_nodes_powering_up", "Number of nodes powering up", 0),
        (
            "slurm_nodes_reboot_issued",
            "Number of nodes with Reboot Issued flag",
            0,
        ),
        (
            "slurm_nodes_reboot_req",
            "Number of nodes with Reboot Requested flag",
            0,
        ),
        (
            "slurm_nodes_resv",
            "Number of nodes with Reserved flag",
            c.resv,
        ),
        (
            "slurm_nodes_unknown",
            "Number of nodes in Unknown state",
            c.unknown,
        ),
    ];
    for (name, help, v) in counts {
        out.gauge(name, help, v);
    }

    let facts: Vec<NodeFacts> = snap.nodes.iter().map(NodeFacts::of).collect();
    type Get = fn(&NodeFacts) -> u64;
    let per_node: [(&str, &str, Get); 8] = [
        ("slurm_node_cpus", "Total number of cpus in the node", |f| {
            f.cpus
        }),
        ("slurm_node_cpus_alloc", "Allocated cpus in the node", |f| {
            f.cpus_alloc
        }),
        (
            "slurm_node_cpus_effective",
            "CPUs allocatable to jobs not reserved for system usage",
            |f| f.cpus_efctv,
        ),
        ("slurm_node_cpus_idle", "Idle cpus in the node", |f| {
            f.cpus_idle
        }),
        (
            "slurm_node_memory_alloc_bytes",
            "Bytes allocated to jobs in the node",
            |f| f.mem_alloc_mib.saturating_mul(MIB),
        ),
        (
            "slurm_node_memory_bytes",
            "Total memory in bytes of the node",
            |f| f.mem_mib.saturating_mul(MIB),
        ),
        (
            "slurm_node_memory_effective_bytes",
            "Memory allocatable to jobs not reserved for system usage",
            |f| f.mem_avail_mib.saturating_mul(MIB),
        ),
        (
            "slurm_node_memory_free_bytes",
            "Free memory in bytes of the node",
            |f| f.mem_free_mib.saturating_mul(MIB),
        ),
    ];
    for (name, help, get) in per_node {
        let samples: Vec<(&str, u64)> = facts.iter().map(|f| (f.name, get(f))).collect();
        out.labelled(name, help, "node", &samples);
    }
}

/// `/metrics/partitions`: the partition count, then per-partition job and
/// node families.
fn partitions(out: &mut Out, snap: &Snapshot) {
    out.gauge(
        "slurm_partitions",
        "Total number of partitions",
        snap.partitions.len(),
    );
    struct Part<'a> {
        name: &'a str,
        jobs: JobCounts,
        nodes: NodeCounts,
        cpus: u64,
        node_cnt: u64,
    }
    let by_name: BTreeMap<&str, &NodeRecord> =
        snap.nodes.iter().map(|n| (n.name.as_str(), n)).collect();
    let parts: Vec<Part> = snap
        .partitions
        .iter()
        .map(|p| {
            let mut nodes = NodeCounts::default();
            let mut seen = BTreeSet::new();
            for n in p.nodes.iter().filter(|n| seen.insert(n.as_str())) {
                if let Some(rec) = by_name.get(n.as_str()) {
                    nodes.add(rec);
                }
            }
            Part {
                name: &p.name,
                jobs: JobCounts::of(
                    snap.jobs
                        .iter()
                        .map(|j| j.as_ref())
                        .filter(|j| job_partition(j) == p.name),
                ),
                nodes,
                cpus: u64::from(p.total_cpus),
                node_cnt: seen.len() as u64,
            }
        })
        .collect();

    for fam in job_families(Ctx::Partition) {
        let samples: Vec<(&str, u64)> =
            parts.iter().map(|p| (p.name, (fam.get)(&p.jobs))).collect();
        out.labelled(
            &format!("slurm_partition_jobs{}", fam.suffix),
            fam.help,
            "partition",
            &samples,
        );
    }

    type Get = fn(&NodeCounts) -> u64;
    let node_fams: [(&str, &str, Get); 34] = [
        ("alloc", "Nodes allocated", |c| c.alloc),
        ("blocked", "Nodes blocked", |_| 0),
        ("cg", "Nodes in completing state", |c| c.completing),
        ("cloud", "Cloud nodes", |_| 0),
        (
            "cpus_efctv",
            "Number of effective CPUs on all nodes, excludes CoreSpec",
            |c| c.cpus_efctv,
        ),
        ("cpus_idle", "Number of idle CPUs on all nodes", |c| {
            c.cpus_idle
        }),
        ("cpus_alloc", "Number of allocated cpus", |c| c.cpus_alloc),
        ("down", "Nodes in Down state", |c| c.down),
        ("drain", "Nodes in Drain state", |c| c.drain),
        ("drained", "Nodes in Drained state", |c| c.drained),
        (
            "draining",
            "Number of nodes in draining condition (Drain state with active jobs)",
            |c| c.draining,
        ),
        ("dyn_future", "Dynamic nodes in Future state", |_| 0),
        ("external", "External nodes", |c| c.external),
        ("fail", "Nodes in Fail state", |_| 0),
        ("future", "Nodes in Future state", |c| c.future),
        ("idle", "Nodes in Idle state", |c| c.idle),
        (
            "invalid_reg",
            "Number of nodes with Invalid Registration flag",
            |_| 0,
        ),
        ("maint", "Nodes in maintenance state", |c| c.maint),
        (
            "mem_alloc",
            "Amount of allocated memory of all nodes",
            |c| c.mem_alloc_mib,
        ),
        (
            "mem_avail",
            "Amount of available memory of all nodes",
            |c| c.mem_avail_mib,
        ),
        ("mem_free", "Amount of free memory in all nodes", |c| {
            c.mem_free_mib
        }),
        ("mem_tot", "Total amount of memory of all nodes", |c| {
            c.mem_total_mib
        }),
        ("mixed", "Nodes in Mixed state", |c| c.mixed),
        ("no_resp", "Nodes in Not Responding state", |c| c.no_resp),
        ("planned", "Nodes in Planned state", |_| 0),
        ("power_down", "Nodes marked to Power Down", |_| 0),
        ("power_up", "Nodes marked to Power Up", |_| 0),
        ("powered_down", "Powered down nodes", |_| 0),
        ("powering_down", "Powering down nodes", |_| 0),
        ("powering_up", "Powering up nodes", |_| 0),
        ("reboot_issued", "Nodes which initiated reboot", |_| 0),
        (
            "reboot_requested",
            "Nodes with Reboot Requested flag",
            |_| 0,
        ),
        ("resv", "Nodes with Reserved flag", |c| c.resv),
        ("unknown", "Nodes in Unknown state", |c| c.unknown),
    ];
    for (suffix, help, get) in node_fams {
        let samples: Vec<(&str, u64)> = parts.iter().map(|p| (p.name, get(&p.nodes))).collect();
        out.labelled(
            &format!("slurm_partition_nodes_{suffix}"),
            help,
            "partition",
            &samples,
        );
    }

    let cpus: Vec<(&str, u64)> = parts.iter().map(|p| (p.name, p.cpus)).collect();
    out.labelled(
        "slurm_partition_cpus",
        "Partition total cpus",
        "partition",
        &cpus,
    );
    let nodes: Vec<(&str, u64)> = parts.iter().map(|p| (p.name, p.node_cnt)).collect();
    out.labelled(
        "slurm_partition_nodes",
        "Partition total nodes",
        "partition",
        &nodes,
    );
}

/// `/metrics/scheduler`: the `sdiag` counters.
fn scheduler(out: &mut Out, snap: &Snapshot) {
    let d = &snap.diag_counted();
    let mean = |sum: u64, n: u64| sum.checked_div(n).unwrap_or(0);
    let u: [(&str, &str, u64); 25] = [
        (
            "slurm_backfilled_jobs",
            "Total backfilled jobs since reset",
            d.bf_backfilled_jobs,
        ),
        ("slurm_bf_cycle_cnt", "Backfill cycle count", d.bf_cycles),
        (
            "slurm_bf_cycle_last",
            "Last backfill cycle time",
            d.bf_last_us,
        ),
        ("slurm_bf_cycle_max", "Max backfill cycle time", d.bf_max_us),
        (
            "slurm_bf_cycle_tot",
            "Sum of backfill cycle times",
            d.bf_total_us,
        ),
        (
            "slurm_bf_depth_mean",
            "Mean backfill cycle depth",
            mean(d.bf_total_depth, d.bf_cycles),
        ),
        (
            "slurm_bf_depth_tot",
            "Sum of backfill job depths",
            d.bf_total_depth,
        ),
        (
            "slurm_bf_last_depth",
            "Last backfill depth",
            d.bf_last_depth,
        ),
        (
            "slurm_bf_mean_cycle",
            "Mean backfill cycle time",
            mean(d.bf_total_us, d.bf_cycles),
        ),
        (
            "slurm_bf_queue_len",
            "Backfill queue length",
            d.bf_last_queue,
        ),
        (
            "slurm_sched_mean_cycle",
            "Mean scheduling cycle time",
            mean(d.main_total_us, d.main_cycles),
        ),
        (
            "slurm_sched_mean_depth_cycle",
            "Mean depth of scheduling cycles",
            mean(d.main_total_depth, d.main_cycles),
        ),
        (
            "slurm_schedule_cycle_cnt",
            "Scheduling cycle count",
            d.main_cycles,
        ),
        (
            "slurm_schedule_cycle_depth",
            "Processed jobs depth total",
            d.main_total_depth,
        ),
        (
            "slurm_schedule_cycle_last",
            "Last scheduling cycle time",
            d.main_last_us,
        ),
        (
            "slurm_schedule_cycle_max",
            "Max scheduling cycle time",
            d.main_max_us,
        ),
        (
            "slurm_schedule_cycle_tot",
            "Sum of scheduling cycle times",
            d.main_total_us,
        ),
        (
            "slurm_schedule_queue_len",
            "Jobs pending queue length",
            d.main_last_queue,
        ),
        (
            "slurm_sdiag_jobs_canceled",
            "Jobs canceled since reset",
            d.jobs_canceled,
        ),
        (
            "slurm_sdiag_jobs_completed",
            "Jobs completed since reset",
            d.jobs_completed,
        ),
        (
            "slurm_sdiag_jobs_failed",
            "Jobs failed since reset",
            d.jobs_failed,
        ),
        (
            "slurm_sdiag_jobs_pending",
            "Jobs pending at timestamp",
            d.jobs_pending,
        ),
        (
            "slurm_sdiag_jobs_running",
            "Jobs running at timestamp",
            d.jobs_running,
        ),
        (
            "slurm_sdiag_jobs_started",
            "Jobs started since reset",
            d.jobs_started,
        ),
        (
            "slurm_sdiag_jobs_submitted",
            "Jobs submitted since reset",
            d.jobs_submitted,
        ),
    ];
    for (name, help, v) in u {
        out.gauge(name, help, v);
    }
    out.gauge(
        "slurm_bf_when_last_cycle",
        "Timestamp of last backfill cycle",
        d.bf_last_when.unwrap_or(0),
    );
    out.gauge("slurm_sdiag_job_states_ts", "Job states timestamp", d.now);
    out.gauge(
        "slurm_sched_stats_timestamp",
        "Statistics snapshot timestamp",
        d.now,
    );
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;
    use slurm_proto::{DiagStats, JobDesc, NodeFlags, PartitionRecord};
    use std::collections::HashSet;
    use std::sync::Arc;

    /// Build a record from JSON. Nested structs come from their `Default`;
    /// a top-level field this JSON does not know (the records grow) is
    /// filled with the first empty value that deserialises.
    fn from_json<T: serde::de::DeserializeOwned>(mut v: serde_json::Value) -> T {
        for _ in 0..64 {
            let err = match serde_json::from_value::<T>(v.clone()) {
                Ok(t) => return t,
                Err(e) => e.to_string(),
            };
            let field = err
                .strip_prefix("missing field `")
                .and_then(|r| r.split('`').next())
                .unwrap_or_else(|| panic!("{err}"))
                .to_string();
            let filled = [
                json!(null),
                json!([]),
                json!(0),
                json!(false),
                json!(""),
                json!({}),
            ]
            .into_iter()
            .find(|cand| {
                let mut t = v.clone();
                t[field.as_str()] = cand.clone();
                match serde_json::from_value::<T>(t) {
                    Ok(_) => true,
                    Err(e) => {
                        !e.to_string().contains(&format!("`{field}`"))
                            && e.to_string().starts_with("missing field")
                    }
                }
            })
            .unwrap_or_else(|| panic!("cannot fill {field}: {err}"));
            v[field.as_str()] = filled;
        }
        panic!("too many missing fields")
    }

    fn job(id: u32, user: &str, acct: &str, part: &str, state: &str) -> serde_json::Value {
        json!({
            "job_id": id, "name": format!("j{id}"), "user_id": 1000, "user_name": user,
            "group_id": 1000, "group_name": "g", "account": acct, "qos": "normal",
            "partition": part, "priority": 1, "state": state, "completing": false,
            "reason": "None", "submit_time": 1, "exit_status": 0, "restarts": 0,
            "alloc": {"nodes": [], "cpus": [], "mem": [], "tasks": []},
            "completing_nodes": [], "desc": serde_json::to_value(JobDesc::default()).expect("desc"), "num_tasks": 1, "req_cpus": 1,
            "min_nodes": 1, "max_nodes": 1, "cancelled": false, "timed_out": false,
            "node_failed": false,
        })
    }

    fn rec(v: serde_json::Value) -> Arc<JobRecord> {
        Arc::new(from_json(v))
    }

    fn node(
        name: &str,
        state: &str,
        cpus: u32,
        alloc: u32,
        mem: u64,
        alloc_mem: u64,
    ) -> NodeRecord {
        from_json(json!({
            "name": name, "addr": name, "hostname": name, "port": 6818, "cpus": cpus,
            "boards": 1, "sockets": 1, "cores_per_socket": cpus, "threads_per_core": 1,
            "real_memory": mem, "tmp_disk": 0, "weight": 1, "features": [], "gres": [],
            "base_state": state, "flags": serde_json::to_value(NodeFlags::default()).expect("flags"),
            "alloc_cpus": alloc, "alloc_mem": alloc_mem, "partitions": [],
        }))
    }

    fn part(name: &str, nodes: &[&str], cpus: u32) -> PartitionRecord {
        from_json(json!({
            "name": name, "nodes_expr": nodes.join(","), "nodes": nodes, "default": false,
            "state": "Up", "priority_job_factor": 1, "priority_tier": 1, "oversubscribe": "NO",
            "min_nodes": 0, "hidden": false, "total_cpus": cpus, "total_mem": 0,
        }))
    }

    fn snapshot() -> Snapshot {
        let mut jobs = Vec::new();
        let mut j = job(1, "alice", "phys", "debug", "Running");
        j["alloc"] = json!({"nodes": ["n1"], "cpus": [8], "mem": [8000], "tasks": [8]});
        jobs.push(rec(j));
        let mut j = job(2, "bob", "chem", "debug", "Running");
        j["alloc"] = json!({"nodes": ["n2"], "cpus": [4], "mem": [2000], "tasks": [4]});
        jobs.push(rec(j));
        let mut j = job(3, "alice", "phys", "debug", "Pending");
        j["min_nodes"] = json!(2);
        j["max_nodes"] = json!(3);
        j["reason"] = json!("Resources");
        jobs.push(rec(j));
        let mut j = job(4, "bob", "chem", "batch", "Pending");
        j["min_nodes"] = json!(4);
        j["max_nodes"] = json!(4);
        j["held"] = json!("User");
        j["reason"] = json!("JobHeldUser");
        jobs.push(rec(j));
        let mut j = job(5, "alice", "phys", "debug", "Completed");
        j["completing"] = json!(true);
        jobs.push(rec(j));
        jobs.push(rec(job(6, "we\"ird\\", "phys", "batch", "Failed")));
        let mut j = job(7, "alice", "phys", "batch", "Pending");
        j["reason"] = json!("PartitionNodeLimit");
        jobs.push(rec(j));

        let n1 = node("n1", "Allocated", 8, 8, 16000, 8000);
        let mut n2 = node("n2", "Mixed", 8, 4, 16000, 2000);
        n2.flags.drain = true;
        n2.free_mem = Some(1000);
        let mut n3 = node("n3", "Idle", 8, 0, 16000, 0);
        n3.flags.drain = true;
        n3.flags.not_responding = true;
        let n4 = node("n4", "Down", 8, 0, 16000, 0);

        Snapshot {
            jobs: jobs.into_iter().collect(),
            nodes: vec![n1, n2, n3, n4].into_iter().collect(),
            partitions: vec![
                part("debug", &["n1", "n2", "n3"], 24),
                part("batch", &["n3", "n4"], 16),
            ],
            diag: DiagStats {
                since: 1000,
                now: 2000,
                jobs_submitted: 7,
                jobs_started: 3,
                jobs_completed: 1,
                jobs_canceled: 0,
                jobs_failed: 1,
                // (Counted from the jobs when read: 3 and 2.)
                main_cycles: 4,
                main_last_us: 200,
                main_max_us: 400,
                main_total_us: 1000,
                main_total_depth: 10,
                main_last_queue: 3,
                bf_cycles: 2,
                bf_last_us: 300,
                bf_max_us: 350,
                bf_total_us: 500,
                bf_last_depth: 2,
                bf_total_depth: 5,
                bf_backfilled_jobs: 1,
                bf_last_when: Some(1900),
                bf_last_queue: 2,
                ..Default::default()
            },
            last_update: 2000,
            ..Default::default()
        }
    }

    /// A small OpenMetrics text checker: metric and label names well formed,
    /// HELP and TYPE before a family's samples, families contiguous and not
    /// repeated, label values properly escaped, no duplicate label sets,
    /// numeric values, and `# EOF` as the last line.
    fn check(text: &str) -> Result<(), String> {
        fn metric_name_ok(n: &str) -> bool {
            let mut cs = n.chars();
            matches!(cs.next(), Some(c) if c.is_ascii_alphabetic() || c == '_' || c == ':')
                && cs.all(|c| c.is_ascii_alphanumeric() || c == '_' || c == ':')
        }
        fn label_name_ok(n: &str) -> bool {
            let mut cs = n.chars();
            matches!(cs.next(), Some(c) if c.is_ascii_alphabetic() || c == '_')
                && cs.all(|c| c.is_ascii_alphanumeric() || c == '_')
        }
        type Labels = Vec<(String, String)>;
        /// Parse `{k="v",...}`; returns the label pairs and the rest.
        fn labels(s: &str) -> Result<(Labels, &str), String> {
            let mut out = Vec::new();
            let mut rest = &s[1..];
            loop {
                if let Some(r) = rest.strip_prefix('}') {
                    return Ok((out, r));
                }
                let eq = rest.find('=').ok_or("label without =")?;
                let key = &rest[..eq];
                if !label_name_ok(key) {
                    return Err(format!("bad label name {key:?}"));
                }
                let mut chars = rest[eq + 1..].char_indices();
                if chars.next().map(|(_, c)| c) != Some('"') {
                    return Err("label value not quoted".into());
                }
                let mut val = String::new();
                let mut end = None;
                while let Some((i, c)) = chars.next() {
                    match c {
                        '\\' => match chars.next().map(|(_, c)| c) {
                            Some('\\') => val.push('\\'),
                            Some('"') => val.push('"'),
                            Some('n') => val.push('\n'),
                            other => return Err(format!("bad escape {other:?}")),
                        },
                        '"' => {
                            end = Some(i);
                            break;
                        }
                        '\n' => return Err("raw newline in label value".into()),
                        c => val.push(c),
                    }
                }
                let end = end.ok_or("unterminated label value")?;
                out.push((key.to_string(), val));
                rest = &rest[eq + 1 + end + 1..];
                if let Some(r) = rest.strip_prefix(',') {
                    rest = r;
                }
            }
        }

        if !text.ends_with("# EOF\n") {
            return Err("does not end with # EOF".into());
        }
        let lines: Vec<&str> = text.lines().collect();
        let mut help: HashSet<String> = HashSet::new();
        let mut typed: HashSet<String> = HashSet::new();
        let mut done: HashSet<String> = HashSet::new();
        let mut current: Option<String> = None;
        let mut series: HashSet<String> = HashSet::new();
        for (i, line) in lines.iter().enumerate() {
            let at = |m: String| format!("line {}: {m}: {line:?}", i + 1);
            if *line == "# EOF" {
                if i + 1 != lines.len() {
                    return Err(at("# EOF is not the last line".into()));
                }
                continue;
            }
            if line.is_empty() {
                return Err(at("empty line".into()));
            }
            let mut enter = |name: &str, current: &mut Option<String>| -> Result<(), String> {
                if current.as_deref() != Some(name) {
                    if done.contains(name) {
                        return Err(at(format!("family {name} not contiguous")));
                    }
                    if let Some(prev) = current.take() {
                        done.insert(prev);
                    }
                    *current = Some(name.to_string());
                }
                Ok(())
            };
            if let Some(rest) = line.strip_prefix("# HELP ") {
                let name = rest.split(' ').next().unwrap_or("");
                if !metric_name_ok(name) || !help.insert(name.to_string()) {
                    return Err(at("bad or repeated HELP".into()));
                }
                enter(name, &mut current)?;
            } else if let Some(rest) = line.strip_prefix("# TYPE ") {
                let mut it = rest.split(' ');
                let name = it.next().unwrap_or("");
                if it.next() != Some("gauge") || it.next().is_some() {
                    return Err(at("TYPE is not gauge".into()));
                }
                if !metric_name_ok(name) || !typed.insert(name.to_string()) {
                    return Err(at("bad or repeated TYPE".into()));
                }
                enter(name, &mut current)?;
            } else if line.starts_with('#') {
                return Err(at("unknown comment".into()));
            } else {
                let name_end = line.find(['{', ' ']).ok_or_else(|| at("no value".into()))?;
                let name = &line[..name_end];
                if !metric_name_ok(name) {
                    return Err(at("bad metric name".into()));
                }
                if !help.contains(name) || !typed.contains(name) {
                    return Err(at("sample before HELP/TYPE".into()));
                }
                if current.as_deref() != Some(name) {
                    return Err(at("sample outside its family".into()));
                }
                let (lbls, rest) = if line[name_end..].starts_with('{') {
                    labels(&line[name_end..]).map_err(at)?
                } else {
                    (Vec::new(), &line[name_end..])
                };
                let value = rest
                    .strip_prefix(' ')
                    .ok_or_else(|| at("no space before value".into()))?;
                value
                    .parse::<f64>()
                    .map_err(|_| at("value is not a number".into()))?;
                if !series.insert(format!("{name}{lbls:?}")) {
                    return Err(at("duplicate series".into()));
                }
            }
        }
        Ok(())
    }

    fn has(text: &str, lines: &[&str]) {
        for l in lines {
            assert!(
                text.lines().any(|x| x == *l),
                "missing line {l:?} in:\n{text}"
            );
        }
    }

    #[test]
    fn every_endpoint_is_valid_openmetrics() {
        for snap in [snapshot(), Snapshot::default()] {
            for e in ENDPOINTS {
                let text = render(e, &snap).expect("served");
                if let Err(e) = check(&text) {
                    panic!("{e}\n{text}");
                }
            }
        }
    }

    #[test]
    fn checker_rejects_bad_text() {
        assert!(check("a 1\n# EOF\n").is_err());
        assert!(check("# HELP a x\n# TYPE a gauge\na 1\n").is_err());
        assert!(check("# HELP a x\n# TYPE a gauge\na{k=\"v\"} x\n# EOF\n").is_err());
        assert!(check("# HELP a x\n# TYPE a gauge\na{k=\"v\\q\"} 1\n# EOF\n").is_err());
        assert!(check(
            "# HELP a x\n# TYPE a gauge\na 1\n# HELP b x\n# TYPE b gauge\nb 1\na 2\n# EOF\n"
        )
        .is_err());
        assert!(check("# HELP a x\n# TYPE a gauge\na{k=\"v\"} 1\n# EOF\n").is_ok());
    }

    #[test]
    fn index_and_unknown() {
        let snap = Snapshot::default();
        let idx = render("/metrics", &snap).expect("index");
        assert!(idx.starts_with("slurmctld index of metrics endpoints:\n"));
        for e in ENDPOINTS {
            assert!(idx.contains(&format!("'{e}'")), "{idx}");
        }
        assert_eq!(render("/metrics/", &snap), Some(idx));
        assert_eq!(render("/metrics/bogus", &snap), None);
        assert_eq!(render("/metrics/jobs/x", &snap), None);
    }

    #[test]
    fn jobs_endpoint() {
        let text = render("/metrics/jobs", &snapshot()).expect("jobs");
        assert!(text.starts_with(
            "# HELP slurm_jobs Total number of jobs\n# TYPE slurm_jobs gauge\nslurm_jobs 7\n"
        ));
        has(
            &text,
            &[
                "# HELP slurm_jobs_running Number of jobs in Running state",
                "# TYPE slurm_jobs_running gauge",
                "slurm_jobs_running 2",
                "slurm_jobs_pending 3",
                "slurm_jobs_hold 1",
                "slurm_jobs_completed 1",
                "slurm_jobs_completing 1",
                "slurm_jobs_failed 1",
                "slurm_jobs_finished 2",
                "slurm_jobs_started 4",
                "slurm_jobs_cancelled 0",
                "slurm_jobs_configuring 0",
                "slurm_jobs_cpus_alloc 12",
                "# HELP slurm_jobs_memory_alloc Total memory bytes allocated by jobs",
                "slurm_jobs_memory_alloc 10485760000",
                "slurm_jobs_nodes_alloc 2",
                "slurm_jobs_outofmemory 0",
            ],
        );
        assert!(text.ends_with("slurm_jobs_timeout 0\n# EOF\n"), "{text}");
    }

    #[test]
    fn users_accounts_endpoint() {
        let text = render("/metrics/jobs-users-accts", &snapshot()).expect("ua");
        has(
            &text,
            &[
                "# HELP slurm_user_jobs Total number of jobs",
                "# TYPE slurm_user_jobs gauge",
                "slurm_user_jobs{username=\"alice\"} 4",
                "slurm_user_jobs{username=\"bob\"} 2",
                "slurm_user_jobs{username=\"we\\\"ird\\\\\"} 1",
                "slurm_user_jobs_pending{username=\"alice\"} 2",
                "slurm_user_jobs_hold{username=\"bob\"} 1",
                "slurm_user_jobs_cpus_alloc{username=\"bob\"} 4",
                "slurm_user_jobs_memory_alloc{username=\"alice\"} 8388608000",
                "slurm_user_jobs_nodes_alloc{username=\"alice\"} 1",
                "# HELP slurm_account_jobs_running Number of jobs in Running state",
                "slurm_account_jobs{account=\"chem\"} 2",
                "slurm_account_jobs{account=\"phys\"} 5",
                "slurm_account_jobs_failed{account=\"phys\"} 1",
                "slurm_account_jobs_running{account=\"phys\"} 1",
            ],
        );
        // Users sorted, all of one family together.
        let users: Vec<&str> = text
            .lines()
            .filter(|l| l.starts_with("slurm_user_jobs{"))
            .collect();
        assert_eq!(users.len(), 3);
        assert!(users[0].contains("alice") && users[1].contains("bob"));
    }

    #[test]
    fn nodes_endpoint() {
        let text = render("/metrics/nodes", &snapshot()).expect("nodes");
        assert!(text.starts_with(
            "# HELP slurm_nodes Total number of nodes\n# TYPE slurm_nodes gauge\nslurm_nodes 4\n"
        ));
        has(
            &text,
            &[
                "# HELP slurm_nodes_alloc Number of nodes in Allocated state",
                "slurm_nodes_alloc 1",
                "slurm_nodes_mixed 1",
                "slurm_nodes_idle 1",
                "slurm_nodes_down 1",
                "slurm_nodes_drain 2",
                "slurm_nodes_drained 1",
                "slurm_nodes_draining 1",
                "slurm_nodes_noresp 1",
                "slurm_nodes_future 0",
                "slurm_nodes_external 0",
                "# HELP slurm_node_cpus Total number of cpus in the node",
                "# TYPE slurm_node_cpus gauge",
                "slurm_node_cpus{node=\"n1\"} 8",
                "slurm_node_cpus_alloc{node=\"n2\"} 4",
                "slurm_node_cpus_idle{node=\"n2\"} 4",
                "slurm_node_cpus_effective{node=\"n4\"} 8",
                "# HELP slurm_node_memory_bytes Total memory in bytes of the node",
                "slurm_node_memory_bytes{node=\"n1\"} 16777216000",
                "slurm_node_memory_alloc_bytes{node=\"n2\"} 2097152000",
                "slurm_node_memory_free_bytes{node=\"n2\"} 1048576000",
                "slurm_node_memory_free_bytes{node=\"n1\"} 0",
            ],
        );
    }

    #[test]
    fn partitions_endpoint() {
        let text = render("/metrics/partitions", &snapshot()).expect("partitions");
        assert!(text.starts_with(
            "# HELP slurm_partitions Total number of partitions\n\
             # TYPE slurm_partitions gauge\nslurm_partitions 2\n"
        ));
        has(
            &text,
            &[
                "# HELP slurm_partition_jobs Number of jobs in this partition",
                "slurm_partition_jobs{partition=\"debug\"} 4",
                "slurm_partition_jobs{partition=\"batch\"} 2",
                "slurm_partition_jobs_running{partition=\"debug\"} 2",
                "slurm_partition_jobs_pending{partition=\"batch\"} 2",
                "slurm_partition_jobs_hold{partition=\"batch\"} 1",
                "slurm_partition_jobs_failed{partition=\"batch\"} 1",
                "slurm_partition_jobs_cpus_alloc{partition=\"debug\"} 12",
                "slurm_partition_jobs_memory_alloc{partition=\"debug\"} 10485760000",
                "slurm_partition_jobs_max_job_nodes{partition=\"debug\"} 3",
                "slurm_partition_jobs_min_job_nodes{partition=\"debug\"} 2",
                "slurm_partition_jobs_max_job_nodes{partition=\"batch\"} 4",
                "slurm_partition_jobs_max_job_nodes_nohold{partition=\"batch\"} 1",
                "slurm_partition_jobs_min_job_nodes_nohold{partition=\"batch\"} 1",
                "slurm_partition_jobs_wait_part_node_limit{partition=\"batch\"} 1",
                "slurm_partition_nodes_alloc{partition=\"debug\"} 1",
                "slurm_partition_nodes_mixed{partition=\"debug\"} 1",
                "slurm_partition_nodes_idle{partition=\"batch\"} 1",
                "slurm_partition_nodes_down{partition=\"batch\"} 1",
                "slurm_partition_nodes_draining{partition=\"debug\"} 1",
                "slurm_partition_nodes_drained{partition=\"batch\"} 1",
                "slurm_partition_nodes_no_resp{partition=\"debug\"} 1",
                "slurm_partition_nodes_cpus_alloc{partition=\"debug\"} 12",
                "slurm_partition_nodes_cpus_idle{partition=\"debug\"} 12",
                "slurm_partition_nodes_cpus_efctv{partition=\"batch\"} 16",
                "slurm_partition_nodes_mem_tot{partition=\"debug\"} 48000",
                "slurm_partition_nodes_mem_alloc{partition=\"debug\"} 10000",
                "# HELP slurm_partition_cpus Partition total cpus",
                "slurm_partition_cpus{partition=\"debug\"} 24",
                "# HELP slurm_partition_nodes Partition total nodes",
                "slurm_partition_nodes{partition=\"batch\"} 2",
            ],
        );
        assert!(!text.contains("slurm_partition_jobs_nodes_alloc"));
    }

    #[test]
    fn scheduler_endpoint() {
        let text = render("/metrics/scheduler", &snapshot()).expect("scheduler");
        has(
            &text,
            &[
                "# HELP slurm_schedule_cycle_cnt Scheduling cycle count",
                "# TYPE slurm_schedule_cycle_cnt gauge",
                "slurm_schedule_cycle_cnt 4",
                "slurm_schedule_cycle_last 200",
                "slurm_schedule_cycle_max 400",
                "slurm_schedule_cycle_tot 1000",
                "slurm_schedule_cycle_depth 10",
                "slurm_schedule_queue_len 3",
                "slurm_sched_mean_cycle 250",
                "slurm_sched_mean_depth_cycle 2",
                "# HELP slurm_bf_cycle_cnt Backfill cycle count",
                "slurm_bf_cycle_cnt 2",
                "slurm_bf_cycle_last 300",
                "slurm_bf_cycle_max 350",
                "slurm_bf_cycle_tot 500",
                "slurm_bf_mean_cycle 250",
                "slurm_bf_depth_tot 5",
                "slurm_bf_depth_mean 2",
                "slurm_bf_last_depth 2",
                "slurm_bf_queue_len 2",
                "slurm_backfilled_jobs 1",
                "slurm_bf_when_last_cycle 1900",
                "slurm_sdiag_jobs_submitted 7",
                "slurm_sdiag_jobs_started 3",
                "slurm_sdiag_jobs_pending 3",
                "slurm_sdiag_jobs_running 2",
                "slurm_sdiag_job_states_ts 2000",
                "slurm_sched_stats_timestamp 2000",
            ],
        );
        // No cycles yet: means are 0, not a division by zero.
        let empty = render("/metrics/scheduler", &Snapshot::default()).expect("scheduler");
        has(
            &empty,
            &["slurm_sched_mean_cycle 0", "slurm_bf_mean_cycle 0"],
        );
    }

    #[test]
    fn empty_snapshot_omits_labelled_families() {
        let snap = Snapshot::default();
        let nodes = render("/metrics/nodes", &snap).expect("nodes");
        assert!(nodes.contains("slurm_nodes 0\n"));
        assert!(!nodes.contains("slurm_node_cpus"));
        let parts = render("/metrics/partitions", &snap).expect("parts");
        assert_eq!(
            parts,
            "# HELP slurm_partitions Total number of partitions\n\
             # TYPE slurm_partitions gauge\nslurm_partitions 0\n# EOF\n"
        );
        assert_eq!(
            render("/metrics/jobs-users-accts", &snap).as_deref(),
            Some("# EOF\n")
        );
    }

    #[test]
    fn escaping() {
        assert_eq!(escape_label("a\"b\\c\nd"), "a\\\"b\\\\c\\nd");
        assert_eq!(escape_help("x\\y\nz"), "x\\\\y\\nz");
    }
}
