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
    /// (Slurm's order), with what jobs used of each when asked (of the
    /// jobs of `f.jobs_of_uid` only, when set).
    pub async fn resvs(&self, f: &ResvFilter, now: i64) -> Result<Vec<ResvRec>> {
        let mut q = Q::new(&format!(
            "SELECT {} FROM resvs WHERE 1=1",
            RESV_COLS.join(",")
        ));
        q.and_clusters(&f.clusters);
        q.and_in("resv_name", &f.names);
        if let Some(end) = f.end {
            q.push(" AND time_start<").bind(end);
        }
        if let Some(start) = f.start {
            q.push(" AND time_end>=").bind(start);
        }
        q.push(" ORDER BY cluster, time_start, resv_name");
        let rows = q.fetch_all(self.backend, &self.pool).await?;
        let wanted: std::collections::HashSet<&str> = f.nodes.iter().map(String::as_str).collect();
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
                unused_wall: 0.0,
            };
            if !wanted.is_empty() {
                let held = slurm_common::hostlist::expand(&rec.nodes).unwrap_or_default();
                if !held.iter().any(|n| wanted.contains(n.as_str())) {
                    continue;
                }
            }
            out.push(rec);
        }
        if f.with_usage && !out.is_empty() {
            self.resv_usage(&mut out, f.jobs_of_uid, now).await?;
        }
        Ok(out)
    }

    /// What the jobs that ran in each of `recs` used of it (see
    /// [`usage_of`]): the runs of every job of those reservations that
    /// overlaps their times, in one query.
    async fn resv_usage(&self, recs: &mut [ResvRec], uid: Option<u32>, now: i64) -> Result<()> {
        let mut clusters: Vec<&str> = recs.iter().map(|r| r.cluster.as_str()).collect();
        let mut names: Vec<&str> = recs.iter().map(|r| r.name.as_str()).collect();
        clusters.sort_unstable();
        clusters.dedup();
        names.sort_unstable();
        names.dedup();
        let first = recs.iter().map(|r| r.time_start).min().unwrap_or(0);
        let last = recs.iter().map(|r| r.time_end).max().unwrap_or(0);
        let mut q = Q::new(
            "SELECT cluster, reservation, start_time, end_time, alloc_cpus FROM jobs \
             WHERE start_time IS NOT NULL",
        );
        q.and_in("cluster", &clusters);
        q.and_in("reservation", &names);
        q.push(" AND start_time<")
            .bind(last)
            .push(" AND (end_time IS NULL OR end_time>")
            .bind(first)
            .push(")");
        if let Some(uid) = uid {
            q.push(" AND uid=").bind(uid);
        }
        let rows = q.fetch_all(self.backend, &self.pool).await?;
        let mut runs: std::collections::HashMap<(String, String), Vec<Run>> =
            std::collections::HashMap::new();
        for r in &rows {
            runs.entry((r.s("cluster")?, r.s("reservation")?))
                .or_default()
                .push((r.i("start_time")?, r.oi("end_time")?, r.u("alloc_cpus")?));
        }
        for rec in recs {
            let mine = runs
                .get(&(rec.cluster.clone(), rec.name.clone()))
                .map_or(&[][..], Vec::as_slice);
            (rec.alloc_secs, rec.unused_wall) =
                usage_of(rec.time_start, rec.time_end, rec.cpus, mine, now);
        }
        Ok(())
    }
}

/// A job's run: start, end (`None`: still running), CPUs.
pub type Run = (i64, Option<i64>, u64);

/// What jobs used of a reservation's record `[start, end)` of `cpus` CPUs,
/// from their runs, as Slurm counts it: the CPU-seconds of their runs
/// within it (one still running counted to its end, as Slurm's report
/// does), and its wall time until `now` less each run's time until `now`
/// weighted by its share of the CPUs (Slurm's `UnusedWall`, never below 0).
pub fn usage_of(start: i64, end: i64, cpus: u32, runs: &[Run], now: i64) -> (u64, f64) {
    let mut alloc = 0u64;
    let so_far = (end.min(now) - start).max(0) as f64;
    let mut unused = so_far;
    for &(s, e, job_cpus) in runs {
        let s = s.max(start);
        let to_end = e.unwrap_or(end).min(end);
        if to_end > s {
            alloc += job_cpus * (to_end - s) as u64;
        }
        let to_now = e.unwrap_or(now).min(end).min(now);
        if to_now > s && cpus > 0 {
            unused -= (to_now - s) as f64 * job_cpus as f64 / f64::from(cpus);
        }
    }
    (alloc, unused.max(0.0))
}

#[cfg(test)]
mod tests {
    use super::usage_of;

    #[test]
    fn usage_counts_cpu_time_inside_the_record_and_the_wall_time_left_unused() {
        // A record of 100 s on 4 CPUs; a 4-CPU job from before it to 30 s
        // in, a 2-CPU job from 20 s to 50 s, a 1-CPU one still running
        // from 90 s.
        let runs = [(-10, Some(30), 4), (20, Some(50), 2), (90, None, 1)];
        let (alloc, unused) = usage_of(0, 100, 4, &runs, 200);
        assert_eq!(alloc, 4 * 30 + 2 * 30 + 10);
        // 100 s less 30 s (all CPUs), 15 s (half) and 2.5 s (a quarter).
        assert_eq!(unused, 52.5);
        // Asked at 95 s: a job still running counts to the record's end
        // in what was allocated, to now in what was left unused.
        let (alloc, unused) = usage_of(0, 100, 4, &runs, 95);
        assert_eq!(alloc, 4 * 30 + 2 * 30 + 10);
        assert_eq!(unused, 95.0 - 30.0 - 15.0 - 1.25);
        // A record that has not begun: nothing unused yet.
        assert_eq!(usage_of(500, 600, 4, &[], 200), (0, 0.0));
        // More used than it holds (jobs over its CPUs): never below 0.
        assert_eq!(usage_of(0, 10, 1, &[(0, Some(10), 8)], 20).1, 0.0);
    }
}
