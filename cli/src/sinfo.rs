//! `sinfo`: partitions and nodes.
//!
//! Partition-oriented by default (one line per partition and group of nodes
//! sharing the displayed node attributes, usually the state), node-oriented
//! with `-N`. `-o` takes Slurm's field letters, `-l` the long layouts, `-s`
//! the summary, `-R` the reasons list; `-t`, `-p`, `-n`, `-r`, `-d` filter.
//!
//! [`format_sinfo`] is pure so the layouts are checked against real Slurm
//! output in the tests below.

use crate::fmt::{self, Arg, Field, Item, Opt, Parsed, Tz};
use slurm_proto::{
    NodeBaseState, NodeRecord, PartitionRecord, PartitionState, RequestBody, Response,
};
use std::collections::HashMap;

/// Default partition-oriented layout.
pub const DEFAULT_FORMAT: &str = "%9P %.5a %.10l %.6D %.6t %N";
/// `-l`.
pub const LONG_FORMAT: &str = "%9P %.5a %.10l %.10s %.4r %.8h %.10g %.6D %.11T %N";
/// `-s`.
pub const SUMMARIZE_FORMAT: &str = "%9P %.5a %.10l %.16F  %N";
/// `-N`.
pub const NODE_FORMAT: &str = "%N %.6D %9P %6t";
/// `-N -l`.
pub const NODE_LONG_FORMAT: &str = "%N %.6D %.9P %.11T %4c %.8z %.6m %.8d %.6w %.8f %20E";
/// `-R`.
pub const REASON_FORMAT: &str = "%20E %9u %19H %N";
/// `-R -l`.
pub const REASON_LONG_FORMAT: &str = "%20E %12U %19H %6t %N";

const LETTERS: &str = "aAbBcCdDeEfFgGhHiIlLmMnNoOpPrRsStTuUvVwXYZz";

/// Column title for a field letter.
pub fn header(key: &str) -> &'static str {
    match key {
        "a" => "AVAIL",
        "A" => "NODES(A/I)",
        "b" => "ACTIVE_FEATURES",
        "B" => "MAX_CPUS_PER_NODE",
        "c" => "CPUS",
        "C" => "CPUS(A/I/O/T)",
        "d" => "TMP_DISK",
        "D" => "NODES",
        "e" => "FREE_MEM",
        "E" => "REASON",
        "f" => "AVAIL_FEATURES",
        "F" => "NODES(A/I/O/T)",
        "g" => "GROUPS",
        "G" => "GRES",
        "h" => "OVERSUBSCRIBE",
        "H" => "TIMESTAMP",
        "i" => "RESERVATION",
        "I" => "PRIO_JOB_FACTOR",
        "l" => "TIMELIMIT",
        "L" => "DEFAULTTIME",
        "m" => "MEMORY",
        "M" => "PREEMPT_MODE",
        "n" => "HOSTNAMES",
        "N" => "NODELIST",
        "o" => "NODE_ADDR",
        "O" => "CPU_LOAD",
        "p" => "PRIO_TIER",
        "P" | "R" => "PARTITION",
        "r" => "ROOT",
        "s" => "JOB_SIZE",
        "S" => "ALLOCNODES",
        "t" | "T" => "STATE",
        "u" | "U" => "USER",
        "v" => "VERSION",
        "V" => "CLUSTER",
        "w" => "WEIGHT",
        "X" => "SOCKETS",
        "Y" => "CORES",
        "Z" => "THREADS",
        // -O only (no letter).
        "allocmem" => "ALLOCMEM",
        "port" => "PORT",
        "statecomplete" => "STATECOMPLETE",
        "z" => "S:C:T",
        _ => "",
    }
}

/// Long node state as sinfo's `%T` prints it: `idle`, `allocated`, `mixed`,
/// `drained`, `draining`, `completing`, `down*`, ...
pub fn state_long_lower(n: &NodeRecord) -> String {
    let busy = matches!(
        n.base_state,
        NodeBaseState::Allocated | NodeBaseState::Mixed
    ) || n.flags.completing;
    let mut s = if n.flags.drain {
        if busy {
            "draining"
        } else {
            "drained"
        }
    } else if n.flags.completing {
        "completing"
    } else {
        match n.base_state {
            NodeBaseState::Unknown => "unknown",
            NodeBaseState::Idle => "idle",
            NodeBaseState::Allocated => "allocated",
            NodeBaseState::Mixed => "mixed",
            NodeBaseState::Down => "down",
            NodeBaseState::Future => "future",
        }
    }
    .to_string();
    if n.flags.not_responding {
        s.push('*');
    }
    s
}

/// Slurm's numeric order of node states (base state, then flags), for `-t` sorting.
fn state_rank(n: &NodeRecord) -> u32 {
    let base = match n.base_state {
        NodeBaseState::Unknown => 0,
        NodeBaseState::Down => 1,
        NodeBaseState::Idle => 2,
        NodeBaseState::Allocated => 3,
        NodeBaseState::Mixed => 5,
        NodeBaseState::Future => 6,
    };
    let mut r = base;
    if n.flags.drain {
        r |= 0x200;
    }
    if n.flags.completing {
        r |= 0x400;
    }
    if n.flags.not_responding {
        r |= 0x800;
    }
    r
}

/// `-t` state names in Slurm's order of matching: the canonical name and
/// its other spellings. A word selects the first state one of whose
/// spellings it begins (`dr` is `drain`, `al` is `allocated`).
const STATE_NAMES: &[(&str, &[&str])] = &[
    ("unknown", &["unk", "unknown"]),
    ("down", &["down"]),
    ("idle", &["idle"]),
    ("allocated", &["alloc", "allocated"]),
    ("error", &["err", "error"]),
    ("mixed", &["mix", "mixed"]),
    ("future", &["futr", "future"]),
    ("blocked", &["blocked", "block"]),
    ("planned", &["planned", "plnd"]),
    ("drain", &["drain"]),
    ("drained", &["drained"]),
    ("reserved", &["resv", "reserved"]),
    ("draining", &["draining", "drng"]),
    ("completing", &["comp", "completing"]),
    ("no_respond", &["no_respond"]),
    ("powering_down", &["pow_dn", "powering_down"]),
    ("powered_down", &["powered_down"]),
    ("power_down", &["power_down"]),
    ("powering_up", &["pow_up", "powering_up"]),
    ("fail", &["fail"]),
    ("maint", &["maint"]),
    ("reboot_requested", &["reboot_requested"]),
    ("reboot_issued", &["reboot_issued"]),
    ("cloud", &["cloud"]),
    // Ours: the opposite of no_respond.
    ("responding", &["responding"]),
];

/// What Slurm lists after "valid states:".
const VALID_STATES: &str = "unknown,down,idle,allocated,error,mixed,future,drain,drained,draining,no_respond,reserved,planned,blocked,cloud,completing,powering_down,powered_down,power_down,powering_up,fail,maint,reboot_requested,reboot_issued";

/// The state a `-t` word names (case-insensitive, a prefix will do).
fn state_name(word: &str) -> Option<&'static str> {
    let w = word.to_ascii_lowercase();
    if w.is_empty() {
        return None;
    }
    STATE_NAMES
        .iter()
        .find(|(_, spellings)| spellings.iter().any(|s| s.starts_with(w.as_str())))
        .map(|(name, _)| *name)
}

/// Whether node `n` is in state `s` (a canonical name from [`STATE_NAMES`],
/// `~` before it for "not in").
fn state_matches(n: &NodeRecord, s: &str) -> bool {
    if let Some(rest) = s.strip_prefix('~') {
        return !state_matches(n, rest);
    }
    let busy = matches!(
        n.base_state,
        NodeBaseState::Allocated | NodeBaseState::Mixed
    ) || n.flags.completing;
    match s {
        "allocated" => n.base_state == NodeBaseState::Allocated,
        "completing" => n.flags.completing,
        "down" => n.base_state == NodeBaseState::Down,
        "drain" => n.flags.drain,
        "drained" => n.flags.drain && !busy,
        "draining" => n.flags.drain && busy,
        "idle" => n.base_state == NodeBaseState::Idle,
        "mixed" => n.base_state == NodeBaseState::Mixed,
        "future" => n.base_state == NodeBaseState::Future,
        "unknown" => n.base_state == NodeBaseState::Unknown,
        "no_respond" => n.flags.not_responding,
        "responding" => !n.flags.not_responding,
        "reserved" => n.flags.reserved,
        "maint" => n.flags.maint,
        "reboot_requested" => n.flags.reboot_requested,
        "reboot_issued" => n.flags.reboot_issued,
        // States no node here is ever in (power saving, cloud...).
        _ => false,
    }
}

/// `-t`'s list: `,` between states any of which will do, `+` (or `&`)
/// between states all of which must hold, `~` before one to negate it;
/// `all` selects everything. Returns (states, all-must-hold).
fn parse_state_list(v: &str) -> Result<(Vec<String>, bool), String> {
    if v.trim().eq_ignore_ascii_case("all") {
        return Ok((Vec::new(), false));
    }
    let and = v.contains(['&', '+']);
    let mut out = Vec::new();
    for w in v
        .split([',', '&', '+'])
        .map(str::trim)
        .filter(|w| !w.is_empty())
    {
        let (neg, name) = match w.strip_prefix('~') {
            Some(rest) => ("~", rest),
            None => ("", w),
        };
        match state_name(name) {
            Some(s) => out.push(format!("{neg}{s}")),
            None => {
                return Err(format!(
                    "sinfo: error: Bad state string: \"{w}\"\nsinfo: error: valid states: {VALID_STATES}"
                ))
            }
        }
    }
    Ok((out, and))
}

/// What `sinfo` prints.
#[derive(Debug, Clone)]
pub struct Options {
    pub items: Vec<Item>,
    /// One line per node and partition (`-N`).
    pub node_mode: bool,
    /// List reasons (`-R`).
    pub reasons: bool,
    /// Date line first (`-l`, `-i`).
    pub time_header: bool,
    pub noheader: bool,
    /// Do not merge nodes whose cpus/memory/disk differ (`-e`).
    pub exact: bool,
    /// Show hidden partitions (`-a`).
    pub all: bool,
    /// `-t`: lower-case state names; a node passes when any matches.
    pub states: Vec<String>,
    /// `-t a&b`: every state must match.
    pub states_and: bool,
    pub partitions: Vec<String>,
    /// `-n`: expanded node names.
    pub nodes: Vec<String>,
    pub responding: bool,
    pub dead: bool,
    /// Widths of the default layouts' `%P`/`%N` grow to the longest value.
    pub auto_widths: bool,
    /// `--json`: slurmrestd's node list instead of the table.
    pub json: bool,
    /// `-S`: sort keys (format letters; `-` descending; `#P` partitions in
    /// slurm.conf's order).
    pub sort: Vec<(bool, String)>,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            items: fmt::parse_short(DEFAULT_FORMAT, &|_| true).0,
            node_mode: false,
            reasons: false,
            time_header: false,
            noheader: false,
            exact: false,
            all: false,
            states: vec![],
            states_and: false,
            partitions: vec![],
            nodes: vec![],
            json: false,
            responding: false,
            dead: false,
            auto_widths: true,
            sort: vec![],
        }
    }
}

/// `-S` as keys (descending?, letter); the error names a bad one.
pub fn parse_sort(spec: &str) -> Result<Vec<(bool, String)>, String> {
    let mut keys = Vec::new();
    for w in spec.split(',').map(str::trim).filter(|w| !w.is_empty()) {
        let (desc, k) = match w.strip_prefix('-') {
            Some(k) => (true, k),
            None => (false, w.strip_prefix('+').unwrap_or(w)),
        };
        let ok = k == "#P" || (k.chars().count() == 1 && LETTERS.contains(k));
        if !ok {
            return Err(format!("sinfo: error: Invalid sort specification: {w}"));
        }
        keys.push((desc, k.to_string()));
    }
    Ok(keys)
}

impl Options {
    fn node_passes(&self, n: &NodeRecord) -> bool {
        if !self.nodes.is_empty() && !self.nodes.contains(&n.name) {
            return false;
        }
        if self.responding && n.flags.not_responding {
            return false;
        }
        if self.dead && !n.flags.not_responding {
            return false;
        }
        if !self.states.is_empty() {
            let ok = if self.states_and {
                self.states.iter().all(|s| state_matches(n, s))
            } else {
                self.states.iter().any(|s| state_matches(n, s))
            };
            if !ok {
                return false;
            }
        }
        true
    }

    fn filtering_nodes(&self) -> bool {
        !self.nodes.is_empty() || self.responding || self.dead || !self.states.is_empty()
    }
}

/// One output line: a partition (if any) and its nodes.
struct Rec<'a> {
    part: Option<&'a PartitionRecord>,
    nodes: Vec<&'a NodeRecord>,
}

/// Letters whose value splits nodes into separate lines when shown.
fn splits(key: &str, exact: bool) -> bool {
    match key {
        "t" | "T" | "E" | "H" | "u" | "U" | "f" | "b" | "G" | "w" | "v" | "statecomplete" => true,
        "allocmem" | "port" => exact,
        "c" | "m" | "d" | "z" | "X" | "Y" | "Z" => exact,
        _ => false,
    }
}

fn min_plus<T: Ord + Copy + ToString>(vals: impl Iterator<Item = T>) -> String {
    let v: Vec<T> = vals.collect();
    match (v.iter().min(), v.iter().max()) {
        (Some(lo), Some(hi)) if lo == hi => lo.to_string(),
        (Some(lo), Some(_)) => format!("{}+", lo.to_string()),
        _ => "0".to_string(),
    }
}

fn feature_str(f: &[String]) -> String {
    if f.is_empty() {
        "(null)".to_string()
    } else {
        f.join(",")
    }
}

fn node_other(n: &NodeRecord) -> bool {
    n.flags.drain
        || n.flags.not_responding
        || matches!(
            n.base_state,
            NodeBaseState::Down | NodeBaseState::Unknown | NodeBaseState::Future
        )
}

fn part_value(key: &str, p: &PartitionRecord) -> String {
    use slurm_common::timefmt::format_limit_sinfo;
    match key {
        "P" => {
            if p.default {
                format!("{}*", p.name)
            } else {
                p.name.clone()
            }
        }
        "R" => p.name.clone(),
        "a" => match p.state {
            PartitionState::Up => "up",
            PartitionState::Down => "down",
            PartitionState::Drain => "drain",
            PartitionState::Inactive => "inact",
        }
        .to_string(),
        "l" => format_limit_sinfo(p.max_time),
        "L" => match p.default_time {
            None => "n/a".to_string(),
            Some(_) => format_limit_sinfo(p.default_time),
        },
        "s" => {
            let max = match p.max_nodes {
                None => "infinite".to_string(),
                Some(m) => m.to_string(),
            };
            if max == p.min_nodes.to_string() {
                max
            } else {
                format!("{}-{}", p.min_nodes, max)
            }
        }
        "r" => "no".to_string(),
        "h" => p.oversubscribe.clone(),
        "g" => match &p.allow_groups {
            None => "all".to_string(),
            Some(g) if g.eq_ignore_ascii_case("ALL") => "all".to_string(),
            Some(g) => g.clone(),
        },
        "p" => p.priority_tier.to_string(),
        "I" => p.priority_job_factor.to_string(),
        "B" => "UNLIMITED".to_string(),
        "M" => "OFF".to_string(),
        "S" => "all".to_string(),
        _ => String::new(),
    }
}

fn rec_value(key: &str, r: &Rec<'_>, tz: Tz) -> String {
    use slurm_common::hostlist::compress;
    let nodes = &r.nodes;
    let first = nodes.first();
    match key {
        "P" | "R" | "a" | "l" | "L" | "s" | "r" | "h" | "g" | "p" | "I" | "B" | "M" | "S" => {
            match r.part {
                Some(p) => part_value(key, p),
                None => "n/a".to_string(),
            }
        }
        "V" => "N/A".to_string(),
        "i" => String::new(),
        "D" => nodes.len().to_string(),
        "N" => compress(&nodes.iter().map(|n| n.name.as_str()).collect::<Vec<_>>()),
        "n" => compress(
            &nodes
                .iter()
                .map(|n| n.hostname.as_str())
                .collect::<Vec<_>>(),
        ),
        "o" => compress(&nodes.iter().map(|n| n.addr.as_str()).collect::<Vec<_>>()),
        "t" => first
            .map(|n| n.state_short())
            .unwrap_or_else(|| "n/a".into()),
        "T" => first
            .map(|n| state_long_lower(n))
            .unwrap_or_else(|| "n/a".into()),
        "c" => min_plus(nodes.iter().map(|n| n.cpus)),
        "m" => min_plus(nodes.iter().map(|n| n.real_memory)),
        "allocmem" => min_plus(nodes.iter().map(|n| n.alloc_mem)),
        "port" => min_plus(nodes.iter().map(|n| n.port)),
        "statecomplete" => first
            .map(|n| n.state_long().to_lowercase())
            .unwrap_or_else(|| "n/a".into()),
        "d" => min_plus(nodes.iter().map(|n| n.tmp_disk)),
        "w" => min_plus(nodes.iter().map(|n| n.weight)),
        "X" => min_plus(nodes.iter().map(|n| n.sockets)),
        "Y" => min_plus(nodes.iter().map(|n| n.cores_per_socket)),
        "Z" => min_plus(nodes.iter().map(|n| n.threads_per_core)),
        "z" => format!(
            "{}:{}:{}",
            min_plus(nodes.iter().map(|n| n.sockets)),
            min_plus(nodes.iter().map(|n| n.cores_per_socket)),
            min_plus(nodes.iter().map(|n| n.threads_per_core))
        ),
        "C" => {
            let (mut a, mut i, mut o, mut t) = (0u64, 0u64, 0u64, 0u64);
            for n in nodes {
                let c = u64::from(n.cpus);
                t += c;
                if node_other(n) {
                    o += c;
                } else {
                    let al = u64::from(n.alloc_cpus).min(c);
                    a += al;
                    i += c - al;
                }
            }
            format!("{a}/{i}/{o}/{t}")
        }
        "A" | "F" => {
            let (mut a, mut i, mut o) = (0, 0, 0);
            for n in nodes {
                if node_other(n) {
                    o += 1;
                } else if n.alloc_cpus > 0
                    || matches!(
                        n.base_state,
                        NodeBaseState::Allocated | NodeBaseState::Mixed
                    )
                {
                    a += 1;
                } else {
                    i += 1;
                }
            }
            if key == "A" {
                format!("{a}/{i}")
            } else {
                format!("{a}/{i}/{o}/{}", nodes.len())
            }
        }
        "e" => {
            let v: Vec<u64> = nodes.iter().filter_map(|n| n.free_mem).collect();
            match (v.iter().min(), v.iter().max()) {
                (Some(lo), Some(hi)) if lo == hi => lo.to_string(),
                (Some(lo), Some(hi)) => format!("{lo}-{hi}"),
                _ => "N/A".to_string(),
            }
        }
        "O" => {
            let v: Vec<f64> = nodes.iter().filter_map(|n| n.cpu_load).collect();
            let lo = v.iter().cloned().fold(f64::INFINITY, f64::min);
            let hi = v.iter().cloned().fold(f64::NEG_INFINITY, f64::max);
            if v.is_empty() {
                "N/A".to_string()
            } else if lo == hi {
                format!("{lo:.2}")
            } else {
                format!("{lo:.2}-{hi:.2}")
            }
        }
        "E" => first
            .and_then(|n| n.reason.clone())
            .filter(|r| !r.is_empty())
            .unwrap_or_else(|| "none".to_string()),
        "H" => tz.opt_timestamp(first.and_then(|n| n.reason_time), "Unknown"),
        "u" => first
            .and_then(|n| n.reason_uid)
            .map(slurm_common::users::user_name_or_id)
            .unwrap_or_else(|| "Unknown".to_string()),
        "U" => first
            .and_then(|n| n.reason_uid)
            .map(|u| format!("{}({u})", slurm_common::users::user_name_or_id(u)))
            .unwrap_or_else(|| "Unknown".to_string()),
        "f" | "b" => feature_str(first.map(|n| n.features.as_slice()).unwrap_or(&[])),
        "G" => feature_str(first.map(|n| n.gres.as_slice()).unwrap_or(&[])),
        "v" => first
            .and_then(|n| n.version.clone())
            .unwrap_or_else(|| "N/A".to_string()),
        _ => String::new(),
    }
}

/// Renders sinfo's report.
pub fn format_sinfo(
    parts: &[PartitionRecord],
    nodes: &[NodeRecord],
    opts: &Options,
    now: i64,
    tz: Tz,
) -> String {
    let by_name: HashMap<&str, &NodeRecord> = nodes.iter().map(|n| (n.name.as_str(), n)).collect();
    let visible: Vec<&PartitionRecord> = parts
        .iter()
        .filter(|p| {
            if !opts.partitions.is_empty() {
                opts.partitions.contains(&p.name)
            } else {
                opts.all || !p.hidden
            }
        })
        .collect();
    let split_keys: Vec<&str> = opts
        .items
        .iter()
        .filter_map(|i| match i {
            Item::Field(f) if splits(&f.key, opts.exact) => Some(f.key.as_str()),
            _ => None,
        })
        .collect();
    let group_key = |n: &NodeRecord| -> Vec<String> {
        let r = Rec {
            part: None,
            nodes: vec![n],
        };
        split_keys.iter().map(|k| rec_value(k, &r, tz)).collect()
    };

    let mut recs: Vec<Rec<'_>> = Vec::new();
    if opts.reasons {
        let mut groups: Vec<(Vec<String>, Vec<&NodeRecord>)> = Vec::new();
        let mut sorted: Vec<&NodeRecord> = nodes
            .iter()
            .filter(|n| {
                (n.flags.drain || n.base_state == NodeBaseState::Down || n.flags.not_responding)
                    && opts.node_passes(n)
                    && (opts.partitions.is_empty()
                        || visible.iter().any(|p| p.nodes.contains(&n.name)))
            })
            .collect();
        sorted.sort_by(|a, b| fmt::host_cmp(&a.name, &b.name));
        for n in sorted {
            let k = group_key(n);
            match groups.iter_mut().find(|(gk, _)| *gk == k) {
                Some((_, v)) => v.push(n),
                None => groups.push((k, vec![n])),
            }
        }
        recs.extend(groups.into_iter().map(|(_, v)| Rec {
            part: None,
            nodes: v,
        }));
    } else if opts.node_mode {
        for p in &visible {
            for name in &p.nodes {
                if let Some(n) = by_name.get(name.as_str()) {
                    if opts.node_passes(n) {
                        recs.push(Rec {
                            part: Some(p),
                            nodes: vec![n],
                        });
                    }
                }
            }
        }
        // By node name; a node in several partitions keeps partition order.
        recs.sort_by(|a, b| fmt::host_cmp(&a.nodes[0].name, &b.nodes[0].name));
    } else {
        for p in &visible {
            let members: Vec<&NodeRecord> = p
                .nodes
                .iter()
                .filter_map(|name| by_name.get(name.as_str()).copied())
                .filter(|n| opts.node_passes(n))
                .collect();
            if members.is_empty() {
                if !opts.filtering_nodes() {
                    recs.push(Rec {
                        part: Some(p),
                        nodes: vec![],
                    });
                }
                continue;
            }
            let mut groups: Vec<(Vec<String>, Vec<&NodeRecord>)> = Vec::new();
            for n in members {
                let k = group_key(n);
                match groups.iter_mut().find(|(gk, _)| *gk == k) {
                    Some((_, v)) => v.push(n),
                    None => groups.push((k, vec![n])),
                }
            }
            let mut part_recs: Vec<Rec<'_>> = groups
                .into_iter()
                .map(|(_, v)| Rec {
                    part: Some(p),
                    nodes: v,
                })
                .collect();
            // Within a partition: decreasing node state.
            part_recs.sort_by(|a, b| state_rank(b.nodes[0]).cmp(&state_rank(a.nodes[0])));
            recs.extend(part_recs);
        }
    }

    // -S: a stable sort over the default order, by each key in turn.
    if !opts.sort.is_empty() {
        let part_pos = |r: &Rec<'_>| {
            r.part
                .and_then(|p| visible.iter().position(|v| v.name == p.name))
                .unwrap_or(usize::MAX)
        };
        recs.sort_by(|a, b| {
            for (desc, k) in &opts.sort {
                let o = if k == "#P" {
                    part_pos(a).cmp(&part_pos(b))
                } else {
                    let (x, y) = (rec_value(k, a, tz), rec_value(k, b, tz));
                    match (x.trim().parse::<f64>(), y.trim().parse::<f64>()) {
                        (Ok(p), Ok(q)) => p.partial_cmp(&q).unwrap_or(std::cmp::Ordering::Equal),
                        _ if k == "N" || k == "n" => fmt::host_cmp(&x, &y),
                        _ => x.cmp(&y),
                    }
                };
                let o = if *desc { o.reverse() } else { o };
                if o != std::cmp::Ordering::Equal {
                    return o;
                }
            }
            std::cmp::Ordering::Equal
        });
    }

    // Default layouts widen %P and (node-oriented) %N to the longest value.
    let mut items = opts.items.clone();
    if opts.auto_widths {
        for it in items.iter_mut() {
            if let Item::Field(f) = it {
                if f.key == "P" && f.width == 9 {
                    let longest = recs
                        .iter()
                        .map(|r| rec_value("P", r, tz).chars().count())
                        .max()
                        .unwrap_or(0);
                    f.width = f.width.max(longest);
                } else if f.key == "N" && f.width == 0 && opts.node_mode {
                    let longest = recs
                        .iter()
                        .map(|r| rec_value("N", r, tz).chars().count())
                        .max()
                        .unwrap_or(0);
                    f.width = longest.max(9);
                }
            }
        }
    }

    let mut out = String::new();
    if opts.time_header {
        out.push_str(&tz.header_time(now));
        out.push('\n');
    }
    if !opts.noheader {
        out.push_str(&fmt::render(&items, &mut |f: &Field| {
            header(&f.key).to_string()
        }));
        out.push('\n');
    }
    for r in &recs {
        out.push_str(&fmt::render(&items, &mut |f: &Field| {
            rec_value(&f.key, r, tz)
        }));
        out.push('\n');
    }
    out
}

/// Options of [`OPTS`] that differ from Slurm's (for [`crate::compat`]).
pub(crate) const COMPAT_NOTES: &[(&str, crate::compat::Support)] = &[
    (
        "federation",
        crate::compat::Support::Differs("no federations: nothing to add"),
    ),
    (
        "local",
        crate::compat::Support::Differs("no federations: nothing to add"),
    ),
    (
        "clusters",
        crate::compat::Support::Differs("one cluster per controller: the name is not checked"),
    ),
    (
        "noconvert",
        crate::compat::Support::Differs("sizes are always shown in MB"),
    ),
    (
        "verbose",
        crate::compat::Support::Differs("prints nothing more"),
    ),
];

/// `SINFO_*` variables that stand for options (the others are read where
/// they apply).
const ENV_OPTIONS: &fmt::EnvOptions = &[
    ("SINFO_ALL", "all", false),
    ("SINFO_FEDERATION", "federation", false),
    ("SINFO_LOCAL", "local", false),
    ("SINFO_SORT", "sort", true),
    ("SLURM_CLUSTERS", "clusters", true),
];

pub(crate) const OPTS: &[Opt] = &[
    Opt {
        short: Some('a'),
        long: "all",
        arg: Arg::No,
    },
    Opt {
        short: Some('d'),
        long: "dead",
        arg: Arg::No,
    },
    Opt {
        short: Some('e'),
        long: "exact",
        arg: Arg::No,
    },
    Opt {
        short: None,
        long: "federation",
        arg: Arg::No,
    },
    Opt {
        short: Some('F'),
        long: "future",
        arg: Arg::No,
    },
    Opt {
        short: Some('h'),
        long: "noheader",
        arg: Arg::No,
    },
    Opt {
        short: None,
        long: "json",
        arg: Arg::Optional,
    },
    Opt {
        short: None,
        long: "yaml",
        arg: Arg::Optional,
    },
    Opt {
        short: None,
        long: "help",
        arg: Arg::No,
    },
    Opt {
        short: None,
        long: "hide",
        arg: Arg::No,
    },
    Opt {
        short: Some('i'),
        long: "iterate",
        arg: Arg::Required,
    },
    Opt {
        short: Some('l'),
        long: "long",
        arg: Arg::No,
    },
    Opt {
        short: None,
        long: "local",
        arg: Arg::No,
    },
    Opt {
        short: Some('M'),
        long: "clusters",
        arg: Arg::Required,
    },
    Opt {
        short: Some('n'),
        long: "nodes",
        arg: Arg::Required,
    },
    Opt {
        short: None,
        long: "noconvert",
        arg: Arg::No,
    },
    Opt {
        short: Some('N'),
        long: "Node",
        arg: Arg::No,
    },
    Opt {
        short: Some('o'),
        long: "format",
        arg: Arg::Required,
    },
    Opt {
        short: Some('O'),
        long: "Format",
        arg: Arg::Required,
    },
    Opt {
        short: Some('p'),
        long: "partition",
        arg: Arg::Required,
    },
    Opt {
        short: Some('r'),
        long: "responding",
        arg: Arg::No,
    },
    Opt {
        short: Some('R'),
        long: "list-reasons",
        arg: Arg::No,
    },
    Opt {
        short: Some('s'),
        long: "summarize",
        arg: Arg::No,
    },
    Opt {
        short: Some('S'),
        long: "sort",
        arg: Arg::Required,
    },
    Opt {
        short: Some('t'),
        long: "states",
        arg: Arg::Required,
    },
    Opt {
        short: Some('T'),
        long: "reservation",
        arg: Arg::No,
    },
    Opt {
        short: None,
        long: "usage",
        arg: Arg::No,
    },
    Opt {
        short: Some('v'),
        long: "verbose",
        arg: Arg::No,
    },
    Opt {
        short: Some('V'),
        long: "version",
        arg: Arg::No,
    },
];

/// `-O` names → field letters.
const LONG_NAMES: &[(&str, &str)] = &[
    ("allocmem", "allocmem"),
    ("allocnodes", "S"),
    ("available", "a"),
    ("cluster", "V"),
    ("cores", "Y"),
    ("cpus", "c"),
    ("cpusload", "O"),
    ("cpusstate", "C"),
    ("defaulttime", "L"),
    ("disk", "d"),
    ("features", "f"),
    ("features_act", "b"),
    ("freemem", "e"),
    ("gres", "G"),
    ("groups", "g"),
    ("maxcpuspernode", "B"),
    ("memory", "m"),
    ("nodeaddr", "o"),
    ("nodeai", "A"),
    ("nodeaiot", "F"),
    ("nodehost", "n"),
    ("nodelist", "N"),
    ("nodes", "D"),
    ("oversubscribe", "h"),
    ("partition", "P"),
    ("partitionname", "R"),
    ("port", "port"),
    ("preemptmode", "M"),
    ("priorityjobfactor", "I"),
    ("prioritytier", "p"),
    ("priority", "p"),
    ("reason", "E"),
    ("root", "r"),
    ("size", "s"),
    ("socketcorethread", "z"),
    ("sockets", "X"),
    ("statecompact", "t"),
    ("statecomplete", "statecomplete"),
    ("statelong", "T"),
    ("threads", "Z"),
    ("time", "l"),
    ("timestamp", "H"),
    ("user", "u"),
    ("userlong", "U"),
    ("version", "v"),
    ("weight", "w"),
];

/// What the command line asks for.
#[derive(Debug)]
pub enum Action {
    Print(String),
    Run {
        opts: Box<Options>,
        iterate: Option<u64>,
    },
    /// `-T`: list reservations.
    Reservations,
}

/// Parses sinfo's arguments (without the program name); `env` reads
/// `SINFO_FORMAT`, `SINFO_PARTITION`, `SINFO_SORT`.
pub fn parse_args(args: &[String], env: &dyn Fn(&str) -> Option<String>) -> Result<Action, String> {
    let try_help = "Try \"sinfo --help\" for more information";
    let mut words = fmt::env_words(ENV_OPTIONS, env);
    words.extend(args.iter().cloned());
    let parsed = fmt::getopt("sinfo", &words, OPTS).map_err(|e| format!("{e}\n{try_help}"))?;
    let mut o = Options {
        json: crate::jsonout::env_wants(env).map_err(|e| format!("sinfo: error: {e}"))?,
        ..Options::default()
    };
    let mut format: Option<String> = env("SINFO_FORMAT");
    let mut format_long: Option<String> = None;
    if let Some(p) = env("SINFO_PARTITION") {
        o.partitions = fmt::split_list(&p);
    }
    let mut long = false;
    let mut summarize = false;
    let mut iterate = None;
    for p in parsed {
        match p {
            Parsed::Word(w) => {
                return Err(format!(
                    "sinfo: error: Unrecognized option: {w}\n{try_help}"
                ))
            }
            Parsed::Opt(name, val) => {
                let v = val.unwrap_or_default();
                match name {
                    "all" => o.all = true,
                    "dead" => o.dead = true,
                    "exact" => o.exact = true,
                    "noheader" => o.noheader = true,
                    "json" | "yaml" => {
                        crate::jsonout::check_parser(Some(v.as_str()))
                            .map_err(|e| format!("sinfo: error: {e}"))?;
                        o.json = true;
                    }
                    "help" => return Ok(Action::Print(crate::help::help("sinfo"))),
                    "usage" => return Ok(Action::Print(crate::help::usage("sinfo"))),
                    "version" => {
                        return Ok(Action::Print(format!(
                            "slurm {}\n",
                            slurm_proto::SLURM_VERSION
                        )))
                    }
                    "iterate" => match v.parse::<u64>() {
                        Ok(n) if n > 0 => iterate = Some(n),
                        _ => return Err(format!("sinfo: error: invalid --iterate argument: {v}")),
                    },
                    "long" => long = true,
                    "nodes" => {
                        let mut nodes = Vec::new();
                        for part in fmt::split_list(&v) {
                            match slurm_common::hostlist::expand(&part) {
                                Ok(n) => nodes.extend(n),
                                Err(e) => {
                                    return Err(format!(
                                        "sinfo: error: Invalid node list {part}: {e}"
                                    ))
                                }
                            }
                        }
                        o.nodes = nodes;
                    }
                    "Node" => o.node_mode = true,
                    "format" => {
                        format = Some(v);
                        format_long = None;
                    }
                    "Format" => {
                        format_long = Some(v);
                        format = None;
                    }
                    "partition" => o.partitions = fmt::split_list(&v),
                    "sort" => o.sort = parse_sort(&v)?,
                    "responding" => o.responding = true,
                    "list-reasons" => o.reasons = true,
                    "summarize" => summarize = true,
                    "states" => {
                        let (list, and) = parse_state_list(&v)?;
                        o.states = list;
                        o.states_and = and;
                    }
                    "reservation" => return Ok(Action::Reservations),
                    _ => {}
                }
            }
        }
    }
    let f = if let Some(fl) = &format_long {
        let canon = |s: &str| {
            LONG_NAMES
                .iter()
                .find(|(n, _)| *n == s)
                .map(|(_, k)| k.to_string())
        };
        let (items, errs) = fmt::parse_long(fl, 20, &canon);
        if let Some(e) = errs.first() {
            return Err(format!(
                "sinfo: error: Invalid node format specification: {e}"
            ));
        }
        o.items = items;
        o.auto_widths = false;
        None
    } else if let Some(f) = format {
        o.auto_widths = false;
        Some(f)
    } else if o.reasons {
        Some(
            if long {
                REASON_LONG_FORMAT
            } else {
                REASON_FORMAT
            }
            .to_string(),
        )
    } else if summarize {
        Some(SUMMARIZE_FORMAT.to_string())
    } else if o.node_mode {
        Some(if long { NODE_LONG_FORMAT } else { NODE_FORMAT }.to_string())
    } else if long {
        Some(LONG_FORMAT.to_string())
    } else {
        Some(DEFAULT_FORMAT.to_string())
    };
    if let Some(f) = f {
        let (items, errs) = fmt::parse_short(&f, &|c| LETTERS.contains(c));
        if let Some(e) = errs.first() {
            return Err(format!(
                "sinfo: error: Invalid node format specification: {e}"
            ));
        }
        o.items = items;
    }
    o.time_header = long || iterate.is_some();
    Ok(Action::Run {
        opts: Box::new(o),
        iterate,
    })
}

/// `sinfo -T`: one line per reservation.
pub fn format_reservations(list: &[slurm_proto::ReservationRecord], now: i64, tz: Tz) -> String {
    let mut out = format!(
        "{:<14} {:>8} {:>19} {:>19} {:>12} NODELIST\n",
        "RESV_NAME", "STATE", "START_TIME", "END_TIME", "DURATION"
    );
    for r in list {
        out.push_str(&format!(
            "{:<14} {:>8} {:>19} {:>19} {:>12} {}\n",
            r.name,
            if r.is_active(now) {
                "ACTIVE"
            } else {
                "INACTIVE"
            },
            tz.timestamp(r.start_time),
            tz.timestamp(r.end_time),
            slurm_common::timefmt::format_elapsed(r.end_time - r.start_time),
            slurm_common::hostlist::compress(&r.nodes)
        ));
    }
    out
}

/// `sinfo`'s entry point; returns the exit code.
pub fn main() -> i32 {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let (opts, iterate) = match parse_args(&args, &|k| std::env::var(k).ok()) {
        Ok(Action::Print(s)) => {
            print!("{s}");
            return 0;
        }
        Ok(Action::Run { opts, iterate }) => (opts, iterate),
        Ok(Action::Reservations) => {
            let conf = match crate::common::load_conf("sinfo") {
                Ok(c) => c,
                Err(code) => return code,
            };
            let client = crate::common::client(&conf);
            return match crate::common::call(&client, RequestBody::GetReservations) {
                Ok(Response::Reservations { reservations, .. }) => {
                    print!(
                        "{}",
                        format_reservations(&reservations, crate::common::now(), Tz::Local)
                    );
                    0
                }
                Ok(_) => {
                    eprintln!("slurm_load_reservations: Unexpected message received");
                    1
                }
                Err(e) => {
                    eprintln!(
                        "slurm_load_reservations: {}",
                        crate::squeue::call_error_text(&e)
                    );
                    1
                }
            };
        }
        Err(e) => {
            eprintln!("{e}");
            return 1;
        }
    };
    let conf = match crate::common::load_conf("sinfo") {
        Ok(c) => c,
        Err(code) => return code,
    };
    let client = crate::common::client(&conf);
    loop {
        let parts = match crate::common::call(&client, RequestBody::GetPartitions) {
            Ok(Response::Partitions { partitions, .. }) => partitions,
            Ok(_) => {
                eprintln!("slurm_load_partitions: Unexpected message received");
                return 1;
            }
            Err(e) => {
                eprintln!(
                    "slurm_load_partitions: {}",
                    crate::squeue::call_error_text(&e)
                );
                return 1;
            }
        };
        let nodes = match crate::common::call(&client, RequestBody::GetNodes) {
            Ok(Response::Nodes { nodes, .. }) => nodes,
            Ok(_) => {
                eprintln!("slurm_load_node: Unexpected message received");
                return 1;
            }
            Err(e) => {
                eprintln!("slurm_load_node: {}", crate::squeue::call_error_text(&e));
                return 1;
            }
        };
        let text = if opts.json {
            // The nodes of the partitions and states asked for, as REST lists them.
            let sel: Vec<&NodeRecord> = nodes
                .iter()
                .filter(|n| {
                    opts.partitions.is_empty()
                        || n.partitions.iter().any(|p| opts.partitions.contains(p))
                })
                .filter(|n| opts.nodes.is_empty() || opts.nodes.contains(&n.name))
                .collect();
            let argv: Vec<String> = std::iter::once("sinfo".to_string())
                .chain(args.iter().cloned())
                .collect();
            crate::jsonout::render(
                crate::jsonout::Body::Nodes(&sel, crate::common::now()),
                &conf.cluster_name,
                &argv,
            )
        } else {
            format_sinfo(&parts, &nodes, &opts, crate::common::now(), Tz::Local)
        };
        use std::io::Write;
        let mut out = std::io::stdout().lock();
        if out
            .write_all(text.as_bytes())
            .and_then(|_| out.flush())
            .is_err()
        {
            return 1;
        }
        match iterate {
            Some(n) => {
                if out.write_all(b"\n").is_err() {
                    return 1;
                }
                drop(out);
                std::thread::sleep(std::time::Duration::from_secs(n));
            }
            None => return 0,
        }
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use slurm_proto::NodeFlags;

    pub const T_BOOT: i64 = 1_795_322_351; // 2026-11-22T04:39:11Z
    pub const T_SLURMD: i64 = 1_795_325_847; // 05:37:27
    pub const T_NOW: i64 = 1_795_325_850; // 05:37:30

    /// A node of the reference cluster (4 CPUs, 4000 MiB, partition debug).
    pub fn node(name: &str) -> NodeRecord {
        NodeRecord {
            name: name.to_string(),
            addr: "127.0.0.1".into(),
            hostname: name.to_string(),
            port: 6831,
            cpus: 4,
            boards: 1,
            sockets: 4,
            cores_per_socket: 1,
            threads_per_core: 1,
            real_memory: 4000,
            tmp_disk: 0,
            weight: 1,
            features: vec![],
            gres: vec![],
            base_state: NodeBaseState::Idle,
            flags: NodeFlags::default(),
            reason: None,
            reason_time: None,
            reason_uid: None,
            alloc_cpus: 0,
            alloc_mem: 0,
            partitions: vec!["debug".into()],
            boot_time: Some(T_BOOT),
            slurmd_start_time: Some(T_SLURMD),
            last_busy: Some(T_SLURMD),
            last_heard: Some(T_SLURMD),
            version: Some("22.05.8".into()),
            os: Some("Linux 6.18.44-fc-v657 #1 SMP PREEMPT_DYNAMIC @0".into()),
            arch: Some("x86_64".into()),
            cpu_load: Some(0.74),
            free_mem: Some(23653),
            external: false,
            kubelet: false,
        }
    }

    /// `-t` as Slurm reads it: prefixes, `,` (any), `+`/`&` (all), `~` (not).
    #[test]
    fn state_lists_select_as_slurms() {
        let mut idle_drain = node("n1");
        idle_drain.flags.drain = true;
        let idle = node("n2");
        let mut busy_drain = node("n3");
        busy_drain.base_state = NodeBaseState::Allocated;
        busy_drain.flags.drain = true;
        let mut down = node("n4");
        down.base_state = NodeBaseState::Down;
        let all = [&idle_drain, &idle, &busy_drain, &down];
        let pick = |v: &str| -> Vec<String> {
            let (states, and) = parse_state_list(v).unwrap();
            all.iter()
                .filter(|n| {
                    if and {
                        states.iter().all(|s| state_matches(n, s))
                    } else {
                        states.iter().any(|s| state_matches(n, s))
                    }
                })
                .map(|n| n.name.clone())
                .collect()
        };
        assert_eq!(pick("idle+drain"), ["n1"]);
        assert_eq!(pick("idle&drain"), ["n1"]);
        assert_eq!(pick("IDLE,down"), ["n1", "n2", "n4"]);
        assert_eq!(pick("drain+~idle"), ["n3"]);
        assert_eq!(pick("~drain"), ["n2", "n4"]);
        assert_eq!(pick("draining"), ["n3"]);
        assert_eq!(pick("drained"), ["n1"]);
        // Prefixes, in Slurm's order: "dr" is drain, "al" allocated.
        assert_eq!(pick("dr"), ["n1", "n3"]);
        assert_eq!(pick("al"), ["n3"]);
        assert_eq!(parse_state_list("all").unwrap().0, Vec::<String>::new());
        assert!(parse_state_list("idle,~").is_err());
    }

    pub fn nodes() -> Vec<NodeRecord> {
        vec![node("n1"), node("n2"), node("n3")]
    }

    pub fn debug_partition() -> PartitionRecord {
        PartitionRecord {
            name: "debug".into(),
            nodes_expr: "n[1-3]".into(),
            nodes: vec!["n1".into(), "n2".into(), "n3".into()],
            default: true,
            max_time: None,
            default_time: None,
            state: PartitionState::Up,
            priority_job_factor: 1,
            priority_tier: 1,
            oversubscribe: "NO".into(),
            max_nodes: None,
            min_nodes: 0,
            hidden: false,
            allow_groups: None,
            allow_accounts: None,
            allow_qos: None,
            def_mem_per_cpu: None,
            max_mem_per_node: None,
            total_cpus: 12,
            total_mem: 12000,
        }
    }

    fn run_with(args: &[&str], nodes: &[NodeRecord], parts: &[PartitionRecord]) -> String {
        let args: Vec<String> = args.iter().map(|s| s.to_string()).collect();
        match parse_args(&args, &|_| None).unwrap() {
            Action::Run { opts, .. } => format_sinfo(parts, nodes, &opts, T_NOW, Tz::Utc),
            Action::Print(s) => s,
            Action::Reservations => String::new(),
        }
    }

    fn run(args: &[&str], nodes: &[NodeRecord]) -> String {
        run_with(args, nodes, &[debug_partition()])
    }

    fn busy() -> Vec<NodeRecord> {
        nodes()
            .into_iter()
            .map(|mut n| {
                n.base_state = NodeBaseState::Allocated;
                n.alloc_cpus = 4;
                n
            })
            .collect()
    }

    #[test]
    fn default_layout_matches_slurm() {
        assert_eq!(
            run(&[], &nodes()),
            include_str!("../tests/golden/sinfo.out")
        );
        assert_eq!(
            run(&[], &busy()),
            include_str!("../tests/golden/sinfo-busy.out")
        );
    }

    #[test]
    fn node_long_layout_matches_slurm() {
        assert_eq!(
            run(&["-N", "-l"], &nodes()),
            include_str!("../tests/golden/sinfo-N-l.out")
        );
        assert_eq!(
            run(&["-Nl"], &nodes()),
            include_str!("../tests/golden/sinfo-N-l.out")
        );
    }

    #[test]
    fn groups_by_state_in_decreasing_order() {
        let mut ns = nodes();
        ns[0].base_state = NodeBaseState::Mixed;
        ns[0].alloc_cpus = 2;
        ns[2].flags.drain = true;
        ns[2].reason = Some("maint".into());
        let out = run(&[], &ns);
        assert_eq!(
            out,
            "PARTITION AVAIL  TIMELIMIT  NODES  STATE NODELIST\n\
             debug*       up   infinite      1  drain n3\n\
             debug*       up   infinite      1    mix n1\n\
             debug*       up   infinite      1   idle n2\n"
        );
        // Like Slurm, `-t idle` matches the base state, so a drained idle node shows.
        assert_eq!(
            run(&["-h", "-t", "idle,mix", "-o", "%N %t"], &ns),
            "n3 drain\nn1 mix\nn2 idle\n"
        );
        assert_eq!(run(&["-h", "-t", "mix", "-o", "%N %t"], &ns), "n1 mix\n");
        assert_eq!(
            run(&["-h", "-o", "%P %C %A %F %D"], &ns),
            "debug* 2/6/4/12 1/1 1/1/1/3 3\n"
        );
        assert_eq!(
            run(&["-h", "-R"], &ns).trim_end(),
            "maint                Unknown   Unknown             n3"
        );
        assert_eq!(run(&["-h", "-N"], &ns), "n1             1 debug*    mix   \nn2             1 debug*    idle  \nn3             1 debug*    drain \n");
        // -S: by state name, then descending; node names in host order.
        assert_eq!(
            run(&["-h", "-S", "t", "-o", "%N %t"], &ns),
            "n3 drain\nn2 idle\nn1 mix\n"
        );
        assert_eq!(
            run(&["-h", "--sort=-N", "-o", "%N %t"], &ns),
            "n3 drain\nn2 idle\nn1 mix\n"
        );
        assert_eq!(
            run(&["-h", "-N", "-S", "-N", "-o", "%N"], &ns),
            "n3\nn2\nn1\n"
        );
        assert_eq!(run(&["-h", "-S", "#P,N", "-o", "%N"], &ns), "n[1-3]\n");
        let bad = parse_args(&["-S".into(), "Q".into()], &|_| None);
        assert!(matches!(bad, Err(e) if e.contains("Invalid sort specification: Q")));
    }

    #[test]
    fn format_long_names_allocmem_port_and_statecomplete() {
        let mut ns = nodes();
        ns[0].alloc_mem = 512;
        ns[0].base_state = NodeBaseState::Mixed;
        ns[2].flags.drain = true;
        let out = run(
            &["-N", "-O", "NodeList:6,AllocMem:9,Port:6,StateComplete:15"],
            &ns,
        );
        let port = ns[0].port;
        assert_eq!(
            out,
            format!(
                "NODELIALLOCMEM PORT  STATECOMPLETE  \n\
                 n1    512      {port:<6}mixed          \n\
                 n2    0        {port:<6}idle           \n\
                 n3    0        {port:<6}idle+drain     \n"
            )
        );
        // Names are taken case-insensitively; an unknown one is named.
        assert!(run(&["-O", "allocmem"], &ns).starts_with("ALLOCMEM"));
    }

    #[test]
    fn partitions_filter_and_long() {
        let mut p2 = debug_partition();
        p2.name = "verylongpartition".into();
        p2.default = false;
        p2.max_time = Some(90);
        p2.nodes = vec!["n3".into()];
        let parts = [debug_partition(), p2];
        assert_eq!(
            run_with(&[], &nodes(), &parts),
            "PARTITION         AVAIL  TIMELIMIT  NODES  STATE NODELIST\n\
             debug*               up   infinite      3   idle n[1-3]\n\
             verylongpartition    up    1:30:00      1   idle n3\n"
        );
        assert_eq!(
            run_with(
                &["-h", "-p", "verylongpartition", "-o", "%R %l %s"],
                &nodes(),
                &parts
            ),
            "verylongpartition 1:30:00 0-infinite\n"
        );
        let out = run(&["-l"], &nodes());
        assert_eq!(
            out,
            "Sun Nov 22 05:37:30 2026\n\
             PARTITION AVAIL  TIMELIMIT   JOB_SIZE ROOT OVERSUBS     GROUPS  NODES       STATE NODELIST\n\
             debug*       up   infinite 0-infinite   no       NO        all      3        idle n[1-3]\n"
        );
    }

    #[test]
    fn bad_options_are_reported() {
        let p = |a: &[&str]| {
            parse_args(
                &a.iter().map(|s| s.to_string()).collect::<Vec<_>>(),
                &|_| None,
            )
        };
        assert_eq!(
            p(&["-x"]).unwrap_err(),
            "sinfo: invalid option -- 'x'\nTry \"sinfo --help\" for more information"
        );
        assert_eq!(
            p(&["-t", "idle,bogus"]).unwrap_err(),
            format!(
                "sinfo: error: Bad state string: \"bogus\"\nsinfo: error: valid states: {VALID_STATES}"
            )
        );
        assert!(matches!(p(&["--version"]).unwrap(), Action::Print(s) if s == "slurm 25.11.0\n"));
    }
}
