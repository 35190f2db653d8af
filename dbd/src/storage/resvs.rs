//! Reservations in accounting (`sacctmgr show reservation`, `sreport
//! reservation utilization`): the controller sends a record each time a
//! reservation is made, changed, rolled over or removed; one row per time
//! it held the same resources, keyed `(cluster, name, time_start)`. What
//! jobs used of a row is counted when asked, from the jobs that ran in it.

use super::sql::{RowExt, Q};
use super::{Result, Storage};
use slurm_proto::acct::*;
use sqlx::AnyConnection;

const RESV_COLS: [&str; 10] = [
    "cluster",
    "resv_name",
    "time_start",
    "time_end",
    "nodelist",
    "node_count",
    "cpus",
    "flags",
    "users",
    "accounts",
];

impl Storage {
    /// Apply one reservation record: a row replaced (`prev_start`), removed
    /// (`removed`), or made or updated.
    pub(super) async fn resv_record(
        &self,
        c: &mut AnyConnection,
        cluster: &str,
        r: &AcctResv,
    ) -> Result<()> {
        let b = self.backend;
        let delete = |start: i64| {
            let mut q = Q::new("DELETE FROM resvs WHERE cluster=");
            q.bind(cluster)
                .push(" AND resv_name=")
                .bind(r.name.as_str())
                .push(" AND time_start=")
                .bind(start);
            q
        };
        if let Some(prev) = r.prev_start.filter(|p| *p != r.time_start) {
            delete(prev).execute(b, &mut *c).await?;
        }
        if r.removed {
            delete(r.time_start).execute(b, &mut *c).await?;
            return Ok(());
        }
        let mut q = Q::new(&format!(
            "INSERT INTO resvs ({}) VALUES ",
            RESV_COLS.join(",")
        ));
        q.bind_tuple(vec![
            cluster.into(),
            r.name.as_str().into(),
            r.time_start.into(),
            r.time_end.into(),
            r.nodes.as_str().into(),
            i64::from(r.node_count).into(),
            i64::from(r.cpus).into(),
            r.flags.as_str().into(),
            r.users.as_str().into(),
            r.accounts.as_str().into(),
        ]);
        q.push(&b.upsert(&RESV_COLS[..3], &RESV_COLS[3..]));
        q.execute(b, &mut *c).await?;
        Ok(())
    }

    /// The reservation records matching `f`, by cluster, start and name
    /// (Slurm's order), with what jobs used of each when asked.
    pub async fn resvs(&self, f: &ResvFilter, now: i64) -> Result<Vec<ResvRec>> {
        let mut q = Q::new(&format!(
            "SELECT {} FROM resvs WHERE 1=1",
            RESV_COLS.join(",")
        ));
        let lower: Vec<String> = f
            .clusters
            .iter()
            .map(|c| c.trim().to_ascii_lowercase())
            .collect();
        q.and_in("cluster", &lower);
        q.and_in("resv_name", &f.names);
        if let Some(end) = f.end {
            q.push(" AND time_start<").bind(end);
        }
        if let Some(start) = f.start {
            q.push(" AND time_end>=").bind(start);
        }
        q.push(" ORDER BY cluster, time_start, resv_name");
        let rows = q.fetch_all(self.backend, &self.pool).await?;
        let mut out = Vec::new();
        for r in &rows {
            let rec = ResvRec {
                cluster: r.s("cluster")?,
                name: r.s("resv_name")?,
                time_start: r.i("time_start")?,
                time_end: r.i("time_end")?,
                nodes: r.s("nodelist")?,
                node_count: r.u32("node_count")?,
                cpus: r.u32("cpus")?,
                flags: r.s("flags")?,
                users: r.s("users")?,
                accounts: r.s("accounts")?,
                alloc_secs: 0,
                unused_wall: 0,
            };
            if !f.nodes.is_empty() {
                let held = slurm_common::hostlist::expand(&rec.nodes).unwrap_or_default();
                if !f.nodes.iter().any(|n| held.contains(n)) {
                    continue;
                }
            }
            out.push(rec);
        }
        if f.with_usage {
            for rec in &mut out {
                self.resv_usage(rec, now).await?;
            }
        }
        Ok(out)
    }

    /// What the jobs that ran in `rec` used of it (see [`usage_of`]).
    async fn resv_usage(&self, rec: &mut ResvRec, now: i64) -> Result<()> {
        let mut q = Q::new("SELECT start_time, end_time, alloc_cpus FROM jobs WHERE cluster=");
        q.bind(rec.cluster.as_str())
            .push(" AND reservation=")
            .bind(rec.name.as_str())
            .push(" AND start_time IS NOT NULL AND start_time<")
            .bind(rec.time_end)
            .push(" AND (end_time IS NULL OR end_time>")
            .bind(rec.time_start)
            .push(")");
        let rows = q.fetch_all(self.backend, &self.pool).await?;
        let mut runs = Vec::with_capacity(rows.len());
        for r in &rows {
            runs.push((r.i("start_time")?, r.oi("end_time")?, r.u("alloc_cpus")?));
        }
        (rec.alloc_secs, rec.unused_wall) = usage_of(rec.time_start, rec.time_end, &runs, now);
        Ok(())
    }
}

/// What jobs used of a reservation's record `[start, end)`, from their runs
/// `(start, end (None: still running), CPUs)`: the CPU-seconds of their
/// runs within it, and the seconds of it until `now` in which none ran
/// (Slurm's `UnusedWall`).
pub fn usage_of(start: i64, end: i64, runs: &[(i64, Option<i64>, u64)], now: i64) -> (u64, u64) {
    let mut alloc = 0u64;
    let mut spans: Vec<(i64, i64)> = Vec::new();
    for &(s, e, cpus) in runs {
        let (s, e) = (s.max(start), e.unwrap_or(now).min(end).min(now));
        if e > s {
            alloc += cpus * (e - s) as u64;
            spans.push((s, e));
        }
    }
    spans.sort_unstable();
    let mut covered = 0i64;
    let mut cur: Option<(i64, i64)> = None;
    for (s, e) in spans {
        match cur {
            Some((cs, ce)) if s <= ce => cur = Some((cs, ce.max(e))),
            Some((cs, ce)) => {
                covered += ce - cs;
                cur = Some((s, e));
            }
            None => cur = Some((s, e)),
        }
    }
    if let Some((cs, ce)) = cur {
        covered += ce - cs;
    }
    let so_far = (end.min(now) - start).max(0);
    (alloc, (so_far - covered).max(0) as u64)
}

#[cfg(test)]
mod tests {
    use super::usage_of;

    #[test]
    fn usage_counts_cpu_time_inside_the_record_and_the_time_no_job_ran() {
        // A record of 100 s; a 4-CPU job from before it to 30 s in, a
        // 2-CPU job from 20 s to 50 s, one still running from 90 s.
        let runs = [(-10, Some(30), 4), (20, Some(50), 2), (90, None, 1)];
        let (alloc, unused) = usage_of(0, 100, &runs, 200);
        assert_eq!(alloc, 4 * 30 + 2 * 30 + 10);
        // Nothing ran from 50 to 90.
        assert_eq!(unused, 40);
        // Asked at 60 s: the running time so far only.
        let (alloc, unused) = usage_of(0, 100, &runs[..2], 60);
        assert_eq!(alloc, 4 * 30 + 2 * 30);
        assert_eq!(unused, 10);
        // A record that has not begun: nothing used, nothing unused.
        assert_eq!(usage_of(500, 600, &runs, 200), (0, 0));
    }
}
