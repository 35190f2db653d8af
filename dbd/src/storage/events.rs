//! `sacctmgr show event`: the node events the controllers recorded (a node
//! down, drained or failing, from when to when, why and set by whom).

use super::sql::{RowExt, Q};
use super::{Result, Storage};
use slurm_proto::acct::*;

impl Storage {
    /// Node events matching `f`, oldest first.
    pub async fn events(&self, f: &EventFilter) -> Result<Vec<EventRec>> {
        let mut q = Q::new(
            "SELECT cluster, node, time_start, time_end, state, reason, reason_uid, cpus \
             FROM node_events WHERE 1=1",
        );
        q.and_clusters(&f.clusters);
        q.and_in("node", &f.nodes);
        if let Some(end) = f.end {
            q.push(" AND time_start<=").bind(end);
        }
        if let Some(start) = f.start {
            q.push(" AND (time_end IS NULL OR time_end>=").bind(start);
            q.push(")");
        }
        if f.open_only {
            q.push(" AND time_end IS NULL");
        }
        q.push(" ORDER BY time_start, cluster, node");
        let rows = q.fetch_all(self.backend, &self.pool).await?;
        let mut out = Vec::new();
        for r in &rows {
            let e = EventRec {
                cluster: r.s("cluster")?,
                node: r.s("node")?,
                time_start: r.i("time_start")?,
                time_end: r.oi("time_end")?,
                state: r.s("state")?,
                reason: r.os("reason")?,
                reason_uid: r.oi("reason_uid")?.map(|u| u as u32),
                cpus: r.i("cpus")? as u32,
            };
            if e.matches(f) {
                out.push(e);
            }
        }
        Ok(out)
    }
}
