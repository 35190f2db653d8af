//! `DebugFlags` (slurm.conf, `scontrol setdebugflags`): Slurm's names for
//! the subsystems whose detail the controller logs. Parsed case-blind from
//! a comma list, printed in Slurm's spelling; the flags in force are kept
//! here for the whole process ([`set`], [`on`]).

use std::sync::atomic::{AtomicU64, Ordering};

/// Slurm's flag names, in the order Slurm prints them; a flag's bit is
/// its place here.
const NAMES: &[&str] = &[
    "Accrue",
    "JobAccountGather",
    "Agent",
    "AuditRPCs",
    "AuditTLS",
    "Backfill",
    "BackfillMap",
    "BurstBuffer",
    "Cgroup",
    "CpuFrequency",
    "CPU_Bind",
    "Data",
    "DBD_Agent",
    "DB_Archive",
    "DB_Assoc",
    "DB_TRES",
    "DB_Event",
    "DB_Job",
    "DB_QOS",
    "DB_Query",
    "DB_Reservation",
    "DB_Resource",
    "DB_Step",
    "DB_Usage",
    "DB_WCKey",
    "Dependency",
    "Energy",
    "Federation",
    "Gang",
    "GLOB_SILENCE",
    "Gres",
    "Hetjob",
    "Interconnect",
    "JobComp",
    "Namespace",
    "NodeFeatures",
    "License",
    "Metrics",
    "MPI",
    "Network",
    "NetworkRaw",
    "NO_CONF_HASH",
    "Power",
    "Priority",
    "Profile",
    "Protocol",
    "Reservation",
    "Route",
    "Sack",
    "Script",
    "SelectType",
    "Steps",
    "Switch",
    "TLS",
    "TraceJobs",
    "Triggers",
    "ConMgr",
];

/// Other names Slurm reads for a flag.
const ALIASES: &[(&str, &str)] = &[
    ("JAG", "JobAccountGather"),
    ("Elasticsearch", "JobComp"),
    ("JobContainer", "Namespace"),
    ("Net", "Network"),
    ("NetRaw", "NetworkRaw"),
    ("Trigger", "Triggers"),
    ("PowerSave", "Power"),
    ("WorkQueue", "ConMgr"),
    ("WorkQ", "ConMgr"),
];

/// A flag Slurm has removed: read with this error logged, setting nothing.
const REMOVED: &[(&str, &str)] = &[(
    "Task",
    "DebugFlag Task has been removed, please use CPU_Bind",
)];

fn bit(name: &str) -> Option<u64> {
    NAMES.iter().position(|n| *n == name).map(|i| 1 << i)
}

/// A set of flags.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct DebugFlags(pub u64);

/// The flags the controller acts on (the others are taken, as Slurm's
/// are without their plugins, and log nothing more here).
pub const BACKFILL: DebugFlags = DebugFlags(1 << 5);
pub const RESERVATION: DebugFlags = DebugFlags(1 << 46);
pub const STEPS: DebugFlags = DebugFlags(1 << 51);
pub const TRACE_JOBS: DebugFlags = DebugFlags(1 << 54);

impl DebugFlags {
    /// A comma list of names (any case); the first unknown name is the
    /// error. `TLS` brings `AuditTLS` with it, as Slurm's; a removed flag
    /// (`Task`) is logged and sets nothing.
    pub fn parse(list: &str) -> Result<DebugFlags, String> {
        let mut bits = 0u64;
        for name in list.split(',').map(str::trim).filter(|n| !n.is_empty()) {
            if let Some((_, why)) = REMOVED.iter().find(|(n, _)| n.eq_ignore_ascii_case(name)) {
                tracing::error!("{why}");
                continue;
            }
            let known = NAMES
                .iter()
                .copied()
                .find(|n| n.eq_ignore_ascii_case(name))
                .or_else(|| {
                    ALIASES
                        .iter()
                        .find(|(a, _)| a.eq_ignore_ascii_case(name))
                        .map(|(_, n)| *n)
                });
            match known.and_then(bit) {
                Some(b) => bits |= b,
                None => return Err(name.to_string()),
            }
            if known == Some("TLS") {
                bits |= bit("AuditTLS").unwrap_or(0);
            }
        }
        Ok(DebugFlags(bits))
    }

    /// Slurm's spelling in Slurm's order, comma separated; empty for none.
    pub fn names(self) -> String {
        NAMES
            .iter()
            .enumerate()
            .filter(|(i, _)| self.0 & (1 << i) != 0)
            .map(|(_, n)| *n)
            .collect::<Vec<_>>()
            .join(",")
    }

    pub fn contains(self, other: DebugFlags) -> bool {
        self.0 & other.0 == other.0
    }
}

static CURRENT: AtomicU64 = AtomicU64::new(0);

/// The flags in force from now on.
pub fn set(f: DebugFlags) {
    CURRENT.store(f.0, Ordering::Relaxed);
}

/// The flags in force.
pub fn current() -> DebugFlags {
    DebugFlags(CURRENT.load(Ordering::Relaxed))
}

/// Whether `flag` is in force.
pub fn on(flag: DebugFlags) -> bool {
    current().contains(flag)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_read_case_blind_and_print_as_slurm_spells_them() {
        let f = DebugFlags::parse("tracejobs, backfill,JAG,steps").unwrap();
        assert!(f.contains(TRACE_JOBS) && f.contains(BACKFILL) && f.contains(STEPS));
        // Slurm's order: Accrue and JobAccountGather first.
        assert_eq!(f.names(), "JobAccountGather,Backfill,Steps,TraceJobs");
        assert_eq!(
            DebugFlags::parse("License,NodeFeatures,Accrue")
                .unwrap()
                .names(),
            "Accrue,NodeFeatures,License"
        );
        assert_eq!(DebugFlags::parse("").unwrap().names(), "");
        assert_eq!(DebugFlags::parse("Backfill,Loud"), Err("Loud".to_string()));
        // Gone from Slurm: refused.
        assert_eq!(DebugFlags::parse("Threads"), Err("Threads".to_string()));
        // Aliases are one flag.
        assert_eq!(
            DebugFlags::parse("Net,Network").unwrap(),
            DebugFlags::parse("network").unwrap()
        );
        for (alias, name) in [
            ("WorkQ", "ConMgr"),
            ("workqueue", "ConMgr"),
            ("JobContainer", "Namespace"),
            ("PowerSave", "Power"),
            ("Trigger", "Triggers"),
            ("Elasticsearch", "JobComp"),
            ("NetRaw", "NetworkRaw"),
        ] {
            assert_eq!(DebugFlags::parse(alias).unwrap().names(), name, "{alias}");
        }
        // TLS audits too; Task (removed) sets nothing.
        assert_eq!(DebugFlags::parse("TLS").unwrap().names(), "AuditTLS,TLS");
        assert_eq!(DebugFlags::parse("Task").unwrap(), DebugFlags::default());
        assert_eq!(
            DebugFlags::parse("CpuFrequency,Triggers,ConMgr")
                .unwrap()
                .names(),
            "CpuFrequency,Triggers,ConMgr"
        );
    }

    #[test]
    fn the_acted_on_flags_are_their_names() {
        for (f, name) in [
            (BACKFILL, "Backfill"),
            (RESERVATION, "Reservation"),
            (STEPS, "Steps"),
            (TRACE_JOBS, "TraceJobs"),
        ] {
            assert_eq!(DebugFlags::parse(name).unwrap(), f);
        }
    }
}
