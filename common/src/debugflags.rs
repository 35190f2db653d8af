//! `DebugFlags` (slurm.conf, `scontrol setdebugflags`): Slurm's names for
//! the subsystems whose detail the controller logs. Parsed case-blind from
//! a comma list, printed in Slurm's spelling; the flags in force are kept
//! here for the whole process ([`set`], [`on`]).

use std::sync::atomic::{AtomicU64, Ordering};

/// Slurm's flag names, each with its bit (aliases share one).
const NAMES: &[(&str, u32)] = &[
    ("Accrue", 0),
    ("Agent", 1),
    ("AuditRPCs", 2),
    ("AuditTLS", 3),
    ("Backfill", 4),
    ("BackfillMap", 5),
    ("BurstBuffer", 6),
    ("Cgroup", 7),
    ("CPU_Bind", 8),
    ("Data", 9),
    ("DBD_Agent", 10),
    ("DB_Archive", 11),
    ("DB_Assoc", 12),
    ("DB_TRES", 13),
    ("DB_Event", 14),
    ("DB_Job", 15),
    ("DB_QOS", 16),
    ("DB_Query", 17),
    ("DB_Reservation", 18),
    ("DB_Resource", 19),
    ("DB_Step", 20),
    ("DB_Usage", 21),
    ("DB_WCKey", 22),
    ("Dependency", 23),
    ("Energy", 24),
    ("Federation", 25),
    ("Gang", 26),
    ("GLOB_SILENCE", 27),
    ("Gres", 28),
    ("Hetjob", 29),
    ("Interconnect", 30),
    ("JobAccountGather", 31),
    ("JAG", 31),
    ("JobComp", 32),
    ("Elasticsearch", 32),
    ("JobContainer", 33),
    ("License", 34),
    ("Metrics", 35),
    ("MPI", 36),
    ("Namespace", 37),
    ("Network", 38),
    ("Net", 38),
    ("NetworkRaw", 39),
    ("NetRaw", 39),
    ("NO_CONF_HASH", 40),
    ("NodeFeatures", 41),
    ("Priority", 42),
    ("Profile", 43),
    ("Protocol", 44),
    ("Reservation", 45),
    ("Route", 46),
    ("Sack", 47),
    ("Script", 48),
    ("SelectType", 49),
    ("Steps", 50),
    ("Switch", 51),
    ("Task", 52),
    ("Thread", 53),
    ("Threads", 53),
    ("WorkQueue", 54),
    ("Workq", 54),
    ("TLS", 55),
    ("TraceJobs", 56),
    ("Trigger", 57),
];

/// A set of flags.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct DebugFlags(pub u64);

/// The flags the controller acts on (the others are taken, as Slurm's
/// are without their plugins, and log nothing more here).
pub const BACKFILL: DebugFlags = DebugFlags(1 << 4);
pub const RESERVATION: DebugFlags = DebugFlags(1 << 45);
pub const STEPS: DebugFlags = DebugFlags(1 << 50);
pub const TRACE_JOBS: DebugFlags = DebugFlags(1 << 56);

impl DebugFlags {
    /// A comma list of names (any case); the first unknown name is the
    /// error.
    pub fn parse(list: &str) -> Result<DebugFlags, String> {
        let mut bits = 0u64;
        for name in list.split(',').map(str::trim).filter(|n| !n.is_empty()) {
            match NAMES.iter().find(|(n, _)| n.eq_ignore_ascii_case(name)) {
                Some((_, bit)) => bits |= 1 << bit,
                None => return Err(name.to_string()),
            }
        }
        Ok(DebugFlags(bits))
    }

    /// Slurm's spelling, comma separated (each flag once); empty for none.
    pub fn names(self) -> String {
        let mut seen = 0u64;
        let mut out: Vec<&str> = Vec::new();
        for (name, bit) in NAMES {
            let b = 1u64 << bit;
            if self.0 & b != 0 && seen & b == 0 {
                seen |= b;
                out.push(name);
            }
        }
        out.join(",")
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
        assert_eq!(f.names(), "Backfill,JobAccountGather,Steps,TraceJobs");
        assert_eq!(DebugFlags::parse("").unwrap().names(), "");
        assert_eq!(DebugFlags::parse("Backfill,Loud"), Err("Loud".to_string()));
        // Aliases are one flag.
        assert_eq!(
            DebugFlags::parse("Net,Network").unwrap(),
            DebugFlags::parse("network").unwrap()
        );
    }
}
