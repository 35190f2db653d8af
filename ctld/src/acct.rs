//! The accounting outbox: job, step, node and cluster records on their way to
//! slurmdbd (`AccountingStorageType=accounting_storage/slurmdbd`).
//!
//! The writer appends each record to the journal in the same batch as the
//! state change that caused it, so a record exists exactly when its change
//! is durable. Records carry `(cluster, epoch, seq)`; the [`sender`] task ships
//! them in order and slurmdbd applies each seq once, so resends after a crash
//! or an outage never double a record. An acknowledgement is itself journaled
//! (`Entry::AcctAcked`), after which the records are dropped.
//!
//! Invariants: seqs are 1, 2, 3, ... without gaps within an epoch; a record
//! leaves the queue only once slurmdbd said it is durable there.

use crate::inbox::Command;
use slurm_common::auth::{now, Key};
use slurm_proto::acct::{AcctRequest, AcctResponse, SeqRecord};
use std::collections::VecDeque;
use std::sync::mpsc::Sender;
use std::time::Duration;
use tokio::sync::mpsc::UnboundedReceiver;

/// Most records sent in one request.
const BATCH: usize = 1000;

/// Most bytes of scripts and environments in one request (slurmdbd takes
/// 16 MiB at most; a single record is kept under 12).
const BATCH_TEXT: usize = 8 << 20;

/// The records of the next request: up to [`BATCH`], and past the first
/// no more scripts and environments than [`BATCH_TEXT`].
fn next_batch(queue: &VecDeque<SeqRecord>) -> Vec<SeqRecord> {
    use slurm_proto::acct::AcctRecord;
    let mut text = 0usize;
    let mut out = Vec::new();
    for r in queue.iter().take(BATCH) {
        let size = match &r.record {
            AcctRecord::JobStart(j) | AcctRecord::JobEnd(j) => {
                j.script.as_ref().map_or(0, String::len) + j.env.as_ref().map_or(0, String::len)
            }
            _ => 0,
        };
        if !out.is_empty() && text + size > BATCH_TEXT {
            break;
        }
        text += size;
        out.push(r.clone());
    }
    out
}

/// Ships records to slurmdbd at `addr` until the channel closes. `pending`
/// is what the saved state still holds; `rx` brings each record once it is
/// durable here; acknowledgements go back to the writer as commands.
pub async fn sender(
    link: DbdLink,
    pending: VecDeque<SeqRecord>,
    mut rx: UnboundedReceiver<SeqRecord>,
    cmds: Sender<Command>,
) {
    let addr = &link.addr;
    let mut queue = pending;
    let mut backoff = Duration::from_millis(250);
    let mut down_logged = false;
    loop {
        if queue.is_empty() {
            match rx.recv().await {
                Some(r) => queue.push_back(r),
                None => return,
            }
        }
        while let Ok(r) = rx.try_recv() {
            queue.push_back(r);
        }
        let batch = next_batch(&queue);
        let req = link.request(AcctRequest::Records(batch.clone()));
        let last = batch.last().map(|r| (r.cluster.clone(), r.epoch));
        match link.call(&req, Duration::from_secs(30)).await {
            Ok(AcctResponse::Ack { clusters, .. }) => {
                let through = clusters
                    .iter()
                    .filter(|c| Some((c.cluster.clone(), c.epoch)) == last)
                    .map(|c| c.through)
                    .max()
                    .unwrap_or(0);
                while queue.front().is_some_and(|r| r.seq <= through) {
                    queue.pop_front();
                }
                if through > 0 && cmds.send(Command::AcctAcked(through)).is_err() {
                    return;
                }
                if down_logged {
                    tracing::info!("slurmdbd at {addr} is back; accounting records flowing");
                    down_logged = false;
                }
                backoff = Duration::from_millis(250);
                continue;
            }
            Ok(AcctResponse::Error(e)) => {
                tracing::error!("slurmdbd at {addr} refused accounting records: {e}");
            }
            Ok(other) => {
                tracing::error!("slurmdbd at {addr} answered records with {other:?}");
            }
            Err(e) => {
                if !down_logged {
                    tracing::warn!(
                        "slurmdbd at {addr} unreachable ({e}); {} records queued",
                        queue.len()
                    );
                    down_logged = true;
                }
            }
        }
        // Wait before trying again, still taking in new records.
        let sleep = tokio::time::sleep(backoff);
        tokio::pin!(sleep);
        loop {
            tokio::select! {
                _ = &mut sleep => break,
                r = rx.recv() => match r {
                    Some(r) => queue.push_back(r),
                    None => return,
                },
            }
        }
        backoff = (backoff * 2).min(Duration::from_secs(5));
    }
}

/// How to reach slurmdbd and sign requests to it.
#[derive(Clone)]
pub struct DbdLink {
    pub addr: String,
    /// The name its TLS certificate carries.
    pub name: String,
    pub key: Key,
    /// This host's name (in credentials).
    pub host: String,
}

impl DbdLink {
    /// A request signed as this host (root), bound to it.
    fn request(&self, body: AcctRequest) -> slurm_proto::acct::DbdRequest {
        slurm_common::dbd::request(&self.key, &self.host, body)
    }

    /// Send `req` and wait at most `within` for the answer.
    async fn call(
        &self,
        req: &slurm_proto::acct::DbdRequest,
        within: Duration,
    ) -> Result<AcctResponse, slurm_common::net::NetError> {
        slurm_common::dbd::call(&self.addr, &self.name, req, within).await
    }
}

/// Fetch this cluster's associations, users and QOS from slurmdbd now, on
/// each `kick`, and every `every` — whichever comes first — and hand them to
/// the writer.
pub async fn assoc_fetcher(
    link: DbdLink,
    cluster: String,
    cmds: Sender<Command>,
    kick: std::sync::Arc<tokio::sync::Notify>,
    every: Duration,
    usage_window: Option<Duration>,
) {
    use slurm_proto::acct::{AssocFilter, QosFilter, UserFilter};
    let addr = &link.addr;
    let mut warned = false;
    loop {
        let ask = |body: AcctRequest| link.request(body);
        let t = Duration::from_secs(10);
        let ra = ask(AcctRequest::ListAssocs(AssocFilter {
            clusters: vec![cluster.clone()],
            ..Default::default()
        }));
        let ru = ask(AcctRequest::ListUsers(UserFilter::default()));
        let rq = ask(AcctRequest::ListQos(QosFilter::default()));
        let assocs = link.call(&ra, t);
        let users = link.call(&ru, t);
        let qos = link.call(&rq, t);
        let t_now = now();
        let ru = ask(AcctRequest::GetUsage(slurm_proto::acct::UsageQuery {
            clusters: vec![cluster.clone()],
            start: t_now - usage_window.map_or(0, |w| w.as_secs() as i64),
            end: t_now + 3600,
            span: Some(slurm_proto::acct::Span::Hour),
            ..Default::default()
        }));
        let usage = async {
            match usage_window {
                Some(_) => Some(link.call(&ru, t).await),
                None => None,
            }
        };
        let (a, u, q, us) = tokio::join!(assocs, users, qos, usage);
        let usage = match us {
            Some(Ok(AcctResponse::Usage(r))) => Some(r),
            _ => None,
        };
        match (a, u, q) {
            (
                Ok(AcctResponse::Assocs(assocs)),
                Ok(AcctResponse::Users(users)),
                Ok(AcctResponse::Qos(qos)),
            ) => {
                warned = false;
                let rolled_until = usage
                    .as_ref()
                    .and_then(|r| r.clusters.iter().map(|c| c.time_start + 3600).max());
                let cache = crate::assoc::AssocCache {
                    assocs,
                    users: users.into_iter().map(|u| (u.name.clone(), u)).collect(),
                    qos: qos.into_iter().map(|q| (q.name.clone(), q)).collect(),
                    usage: usage.map(|r| r.assocs).unwrap_or_default(),
                    rolled_until,
                };
                if cmds.send(Command::AcctAssocs(Box::new(cache))).is_err() {
                    return;
                }
            }
            other => {
                if !warned {
                    tracing::warn!("cannot fetch associations from slurmdbd at {addr}: {other:?}");
                    warned = true;
                }
            }
        }
        tokio::select! {
            _ = kick.notified() => {}
            _ = tokio::time::sleep(every) => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use slurm_proto::acct::{AcctJob, AcctRecord};

    fn rec(seq: u64, text: usize) -> SeqRecord {
        SeqRecord {
            cluster: "c".into(),
            epoch: 1,
            seq,
            record: AcctRecord::JobStart(AcctJob {
                job_id: seq as u32,
                script: (text > 0).then(|| "x".repeat(text)),
                ..Default::default()
            }),
        }
    }

    /// Scripts and environments bound a request's size; plain records only
    /// the count does; a request always carries at least one record.
    #[test]
    fn batches_are_bounded_by_their_texts() {
        let q: VecDeque<SeqRecord> = (1..=3).map(|s| rec(s, 5 << 20)).collect();
        assert_eq!(next_batch(&q).len(), 1);
        let q: VecDeque<SeqRecord> = [rec(1, 3 << 20), rec(2, 3 << 20), rec(3, 3 << 20)].into();
        assert_eq!(next_batch(&q).len(), 2);
        let q: VecDeque<SeqRecord> = (1..=1500).map(|s| rec(s, 0)).collect();
        assert_eq!(next_batch(&q).len(), BATCH);
        let q: VecDeque<SeqRecord> = [rec(1, 11 << 20)].into();
        assert_eq!(next_batch(&q).len(), 1);
    }
}
