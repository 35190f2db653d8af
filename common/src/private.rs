//! `PrivateData` (slurm.conf and slurmdbd.conf): what ordinary users may
//! not see of one another. Root, SlurmUser and users with AdminLevel
//! Operator or Administrator see everything.

/// Which kinds of data are private.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct PrivateData {
    /// Other users' jobs and steps (squeue, scontrol, sprio, sacct, REST).
    pub jobs: bool,
    /// Other users' usage (sshare, sreport).
    pub usage: bool,
    /// Other users' records (sacctmgr show user/association).
    pub users: bool,
    /// Accounts the user has no association in.
    pub accounts: bool,
    /// Reservations the user may not use.
    pub reservations: bool,
    /// Node and cluster events.
    pub events: bool,
    /// Node information (refused to ordinary users).
    pub nodes: bool,
    /// Partition information (refused to ordinary users).
    pub partitions: bool,
}

impl PrivateData {
    /// Parse `jobs,usage,...` (case-insensitive; `all` is everything).
    /// Returns the flags and the words not understood.
    pub fn parse(s: &str) -> (PrivateData, Vec<String>) {
        let mut p = PrivateData::default();
        let mut unknown = Vec::new();
        for w in s.split(',').map(str::trim).filter(|w| !w.is_empty()) {
            // Slurm matches these as prefixes of the plural ("job", "jobs").
            match w.to_ascii_lowercase().trim_end_matches('s') {
                "all" => {
                    p = PrivateData {
                        jobs: true,
                        usage: true,
                        users: true,
                        accounts: true,
                        reservations: true,
                        events: true,
                        nodes: true,
                        partitions: true,
                    }
                }
                "job" => p.jobs = true,
                "usage" | "usag" => p.usage = true,
                "user" => p.users = true,
                "account" => p.accounts = true,
                "reservation" => p.reservations = true,
                "event" => p.events = true,
                "node" => p.nodes = true,
                "partition" => p.partitions = true,
                _ => unknown.push(w.to_string()),
            }
        }
        (p, unknown)
    }

    pub fn any(&self) -> bool {
        *self != PrivateData::default()
    }

    /// As `scontrol show config` and `sacctmgr show configuration` print
    /// it: the private kinds, comma-separated, or `none`.
    pub fn names(&self) -> String {
        let all = [
            (self.accounts, "accounts"),
            (self.events, "events"),
            (self.jobs, "jobs"),
            (self.nodes, "nodes"),
            (self.partitions, "partitions"),
            (self.reservations, "reservations"),
            (self.usage, "usage"),
            (self.users, "users"),
        ];
        let on: Vec<&str> = all.iter().filter(|(b, _)| *b).map(|(_, n)| *n).collect();
        if on.is_empty() {
            "none".into()
        } else {
            on.join(",")
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_slurm_words() {
        let (p, bad) = PrivateData::parse("jobs,Usage, reservation,cloud");
        assert!(p.jobs && p.usage && p.reservations && !p.users && !p.nodes);
        assert_eq!(bad, vec!["cloud"]);
        let (p, _) = PrivateData::parse("all");
        assert!(p.jobs && p.nodes && p.events && p.accounts);
        assert!(!PrivateData::parse("").0.any());
    }
}
