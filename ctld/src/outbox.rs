//! The durable half of the accounting outbox: records numbered
//! `(cluster, epoch, seq)` and kept in the controller's saved state until
//! slurmdbd acknowledges them. The sender that ships them is in
//! [`crate::acct`].

use serde::{Deserialize, Serialize};
use slurm_proto::acct::{AcctRecord, SeqRecord};
use std::collections::VecDeque;

/// The durable part of the outbox (saved with the controller's state).
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
#[serde(default)]
pub struct AcctQueue {
    /// Identifies this outbox to slurmdbd; 0 until the first record.
    pub epoch: u64,
    /// The seq the next record gets.
    pub next_seq: u64,
    /// Records not yet acknowledged, oldest first.
    pub pending: VecDeque<SeqRecord>,
}

impl AcctQueue {
    /// Apply a journaled record.
    pub fn push(&mut self, r: SeqRecord) {
        self.epoch = r.epoch;
        self.next_seq = r.seq + 1;
        self.pending.push_back(r);
    }

    /// Apply a journaled acknowledgement of every seq up to `through`.
    pub fn acked(&mut self, through: u64) {
        while self.pending.front().is_some_and(|r| r.seq <= through) {
            self.pending.pop_front();
        }
    }

    /// The next record of this outbox (the caller journals and pushes it).
    pub fn make(&mut self, cluster: &str, record: AcctRecord) -> SeqRecord {
        if self.epoch == 0 {
            self.epoch = new_epoch();
            self.next_seq = 1;
        }
        SeqRecord {
            cluster: cluster.to_string(),
            epoch: self.epoch,
            seq: self.next_seq.max(1),
            record,
        }
    }
}

/// A number that tells this outbox from any earlier one of the cluster.
fn new_epoch() -> u64 {
    let t = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos() as u64)
        .unwrap_or(1);
    (t ^ (u64::from(std::process::id()) << 40)).max(1)
}

#[cfg(test)]
mod tests {
    use super::*;
    use slurm_proto::acct::ClusterInfo;

    #[test]
    fn seqs_follow_on_and_acks_drop_records() {
        let mut q = AcctQueue::default();
        for _ in 0..3 {
            let r = q.make("c", AcctRecord::ClusterInfo(ClusterInfo::default()));
            q.push(r);
        }
        let seqs: Vec<u64> = q.pending.iter().map(|r| r.seq).collect();
        assert_eq!(seqs, vec![1, 2, 3]);
        assert!(q.epoch != 0);
        q.acked(2);
        assert_eq!(q.pending.len(), 1);
        assert_eq!(
            q.make("c", AcctRecord::ClusterInfo(ClusterInfo::default()))
                .seq,
            4
        );
    }
}
