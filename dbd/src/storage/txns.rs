//! `sacctmgr show transaction`: the changes made through slurmdbd, as
//! [`crate::txn`] describes them, stored once made.

use super::sql::{RowExt, Q};
use super::{Result, Storage};
use crate::txn::Txn;
use slurm_proto::acct::{TxnFilter, TxnRec};

impl Storage {
    /// Record that `actor` made the change `t` at `now`, to `names` (what
    /// the change answered it changed).
    pub async fn add_txn(&self, now: i64, actor: &str, t: &Txn, names: &[String]) -> Result<()> {
        let _w = self.write_lock.lock().await;
        let mut tx = self.write_tx().await?;
        let mut q = Q::new(
            "INSERT INTO txns (time_stamp, action, actor, cluster, name_where, info) VALUES (",
        );
        q.bind(now)
            .push(", ")
            .bind(t.action)
            .push(", ")
            .bind(actor)
            .push(", ")
            .bind(t.cluster.as_str())
            .push(", ")
            .bind(names.join(", "))
            .push(", ")
            .bind(t.info.as_str())
            .push(")");
        q.execute(self.backend, &mut *tx).await?;
        tx.commit().await?;
        Ok(())
    }

    /// The changes `f` selects, oldest first.
    pub async fn txns(&self, f: &TxnFilter) -> Result<Vec<TxnRec>> {
        let mut q = Q::new(
            "SELECT id, time_stamp, action, actor, cluster, name_where, info FROM txns WHERE 1=1",
        );
        if let Some(start) = f.start {
            q.push(" AND time_stamp>=").bind(start);
        }
        if let Some(end) = f.end {
            q.push(" AND time_stamp<=").bind(end);
        }
        q.push(" ORDER BY time_stamp, id");
        let rows = q.fetch_all(self.backend, &self.pool).await?;
        let mut out = Vec::new();
        for r in &rows {
            let t = TxnRec {
                id: r.i("id")?.max(0) as u64,
                time: r.i("time_stamp")?,
                action: r.s("action")?,
                actor: r.s("actor")?,
                cluster: r.s("cluster")?,
                name: r.s("name_where")?,
                info: r.s("info")?,
            };
            if t.matches(f) {
                out.push(t);
            }
        }
        Ok(out)
    }
}
