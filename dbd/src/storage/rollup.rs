//! Usage rollups and purging.
//!
//! Hourly rows are computed from the jobs and node events themselves
//! (allocated CPU-seconds per cluster and per account/user, down and idle
//! time per cluster); daily rows are sums of hourly rows, monthly of daily.
//! `rollup_state.hour_done` is the first hour not rolled up yet; ingesting a
//! record about an earlier hour moves it back, and the next rollup recomputes
//! from there (rows are replaced, never added to), so late records count once.
//! Periods are UTC.

use super::sql::{RowExt, Val, Q};
use super::time::{floor_day, floor_hour, floor_month, next_month};
use super::{Result, Storage};
use crate::conf::PurgeSettings;
use slurm_proto::acct::*;
use sqlx::AnyConnection;
use std::collections::{BTreeMap, HashMap};

/// The most hours one pass computes (a first rollup over years of history
/// proceeds in passes of about a year).
const MAX_HOURS: i64 = 24 * 366;

fn span_code(s: Span) -> i64 {
    match s {
        Span::Hour => 1,
        Span::Day => 2,
        Span::Month => 3,
    }
}

/// What a purge removed.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PurgeStats {
    pub jobs: u64,
    pub steps: u64,
    pub events: u64,
    pub usage: u64,
}

#[derive(Default, Clone)]
struct ClusterRow {
    cpu_count: u64,
    total: u64,
    alloc: u64,
    down: u64,
    idle: u64,
}

/// Add `cpus × overlap` of `[s, e)` to each hour of `[h0, h0 + n·3600)` via `f`.
fn spread(h0: i64, n: usize, s: i64, e: i64, mut f: impl FnMut(usize, u64)) {
    let hend = h0 + n as i64 * 3600;
    let (s, e) = (s.max(h0), e.min(hend));
    if e <= s {
        return;
    }
    let mut h = floor_hour(s);
    while h < e {
        let ov = e.min(h + 3600) - s.max(h);
        if ov > 0 {
            f(((h - h0) / 3600) as usize, ov as u64);
        }
        h += 3600;
    }
}

impl Storage {
    /// Roll every cluster's usage up to the last complete hour before `now`.
    pub async fn rollup(&self, now: i64) -> Result<RollupStats> {
        let mut total = RollupStats::default();
        let clusters: Vec<String> = self
            .list_clusters(&ClusterFilter::default())
            .await?
            .into_iter()
            .map(|c| c.name)
            .collect();
        for c in clusters {
            loop {
                let (st, more) = self.rollup_cluster(&c, now).await?;
                total.hours += st.hours;
                total.days += st.days;
                total.months += st.months;
                if !more {
                    break;
                }
            }
        }
        Ok(total)
    }

    async fn rollup_cluster(&self, cluster: &str, now: i64) -> Result<(RollupStats, bool)> {
        let b = self.backend;
        let _w = self.write_lock.lock().await;
        let mut tx = self.write_tx().await?;
        let mut q = Q::new("SELECT hour_done FROM rollup_state WHERE cluster=");
        q.bind(cluster).push(b.for_update());
        let h0 = match q.fetch_optional(b, &mut *tx).await? {
            Some(r) => r.i("hour_done")?,
            None => {
                let first = self.first_activity(&mut tx, cluster).await?;
                let h = floor_hour(first.unwrap_or(now).min(now));
                let mut q = Q::new("INSERT INTO rollup_state (cluster, hour_done) VALUES ");
                q.bind_tuple(vec![cluster.into(), h.into()]);
                q.execute(b, &mut *tx).await?;
                h
            }
        };
        let last = floor_hour(now);
        if h0 >= last {
            tx.commit().await?;
            return Ok((RollupStats::default(), false));
        }
        let hend = last.min(h0 + MAX_HOURS * 3600);
        let hours = self.roll_hours(&mut tx, cluster, h0, hend).await?;
        let days = self
            .roll_up(&mut tx, cluster, Span::Hour, Span::Day, h0, hend)
            .await?;
        let months = self
            .roll_up(&mut tx, cluster, Span::Day, Span::Month, h0, hend)
            .await?;
        let mut q = Q::new("UPDATE rollup_state SET hour_done=");
        q.bind(hend).push(" WHERE cluster=").bind(cluster);
        q.execute(b, &mut *tx).await?;
        tx.commit().await?;
        Ok((
            RollupStats {
                hours,
                days,
                months,
            },
            hend < last,
        ))
    }

    async fn first_activity(&self, c: &mut AnyConnection, cluster: &str) -> Result<Option<i64>> {
        let mut first: Option<i64> = None;
        for sql in [
            "SELECT MIN(start_time) AS t FROM jobs WHERE cluster=",
            "SELECT MIN(time_start) AS t FROM node_events WHERE cluster=",
        ] {
            let mut q = Q::new(sql);
            q.bind(cluster);
            if let Some(r) = q.fetch_optional(self.backend, &mut *c).await? {
                if let Some(t) = r.oi("t")? {
                    first = Some(first.map_or(t, |f| f.min(t)));
                }
            }
        }
        Ok(first)
    }

    /// Hourly rows for `[h0, hend)`.
    async fn roll_hours(
        &self,
        c: &mut AnyConnection,
        cluster: &str,
        h0: i64,
        hend: i64,
    ) -> Result<u32> {
        let b = self.backend;
        let n = ((hend - h0) / 3600) as usize;
        let mut assoc: Vec<HashMap<(String, String), u64>> = vec![HashMap::new(); n];
        let mut rows = vec![ClusterRow::default(); n];

        let mut q = Q::new(
            "SELECT account, user_name, alloc_cpus, start_time, end_time FROM jobs \
             WHERE start_time IS NOT NULL AND alloc_cpus>0 AND cluster=",
        );
        q.bind(cluster)
            .push(" AND start_time<")
            .bind(hend)
            .push(" AND (end_time IS NULL OR end_time>")
            .bind(h0)
            .push(")");
        for r in q.fetch_all(b, &mut *c).await? {
            let cpus = r.u("alloc_cpus")?;
            let key = (r.s("account")?, r.s("user_name")?);
            let s = r.i("start_time")?;
            let e = r.oi("end_time")?.unwrap_or(hend);
            spread(h0, n, s, e, |i, ov| {
                *assoc[i].entry(key.clone()).or_default() += cpus * ov;
                rows[i].alloc += cpus * ov;
            });
        }

        let mut q = Q::new("SELECT cpus FROM clusters WHERE name=");
        q.bind(cluster);
        let base = match q.fetch_optional(b, &mut *c).await? {
            Some(r) => r.u("cpus")?,
            None => 0,
        };
        let mut sized = vec![false; n];
        let mut q =
            Q::new("SELECT node, cpus, time_start, time_end FROM node_events WHERE cluster=");
        q.bind(cluster)
            .push(" AND time_start<")
            .bind(hend)
            .push(" AND (time_end IS NULL OR time_end>")
            .bind(h0)
            .push(")");
        for r in q.fetch_all(b, &mut *c).await? {
            let cpus = r.u("cpus")?;
            let s = r.i("time_start")?;
            let e = r.oi("time_end")?.unwrap_or(hend);
            if r.s("node")?.is_empty() {
                spread(h0, n, s, e, |i, _| {
                    if !sized[i] || cpus > rows[i].cpu_count {
                        rows[i].cpu_count = cpus;
                    }
                    sized[i] = true;
                });
            } else {
                spread(h0, n, s, e, |i, ov| rows[i].down += cpus * ov);
            }
        }
        for (i, r) in rows.iter_mut().enumerate() {
            if !sized[i] {
                r.cpu_count = base;
            }
            r.total = r.cpu_count * 3600;
            r.down = r.down.min(r.total);
            r.idle = r.total.saturating_sub(r.alloc + r.down);
        }

        let hour_rows: BTreeMap<i64, ClusterRow> = rows
            .into_iter()
            .enumerate()
            .map(|(i, r)| (h0 + i as i64 * 3600, r))
            .collect();
        let mut assoc_rows: BTreeMap<(i64, String, String), u64> = BTreeMap::new();
        for (i, m) in assoc.into_iter().enumerate() {
            for ((a, u), v) in m {
                assoc_rows.insert((h0 + i as i64 * 3600, a, u), v);
            }
        }
        self.replace_usage(c, cluster, Span::Hour, h0, hend, &hour_rows, &assoc_rows)
            .await?;
        Ok(n as u32)
    }

    /// Recompute `to` rows covering `[h0, hend)` (complete periods only) from `from` rows.
    async fn roll_up(
        &self,
        c: &mut AnyConnection,
        cluster: &str,
        from: Span,
        to: Span,
        h0: i64,
        hend: i64,
    ) -> Result<u32> {
        let b = self.backend;
        let (p0, pend) = match to {
            Span::Day => (floor_day(h0), floor_day(hend)),
            _ => (floor_month(h0), floor_month(hend)),
        };
        if p0 >= pend {
            return Ok(0);
        }
        let period = |t: i64| match to {
            Span::Day => floor_day(t),
            _ => floor_month(t),
        };
        let mut crows: BTreeMap<i64, ClusterRow> = BTreeMap::new();
        let mut q = Q::new(
            "SELECT time_start, cpu_count, total_secs, alloc_secs, down_secs, idle_secs \
             FROM usage_cluster WHERE cluster=",
        );
        q.bind(cluster)
            .push(" AND span=")
            .bind(span_code(from))
            .push(" AND time_start>=")
            .bind(p0)
            .push(" AND time_start<")
            .bind(pend);
        for r in q.fetch_all(b, &mut *c).await? {
            let e = crows.entry(period(r.i("time_start")?)).or_default();
            e.cpu_count = e.cpu_count.max(r.u("cpu_count")?);
            e.total += r.u("total_secs")?;
            e.alloc += r.u("alloc_secs")?;
            e.down += r.u("down_secs")?;
            e.idle += r.u("idle_secs")?;
        }
        let mut arows: BTreeMap<(i64, String, String), u64> = BTreeMap::new();
        let mut q = Q::new(
            "SELECT time_start, account, user_name, alloc_secs FROM usage_assoc WHERE cluster=",
        );
        q.bind(cluster)
            .push(" AND span=")
            .bind(span_code(from))
            .push(" AND time_start>=")
            .bind(p0)
            .push(" AND time_start<")
            .bind(pend);
        for r in q.fetch_all(b, &mut *c).await? {
            let k = (
                period(r.i("time_start")?),
                r.s("account")?,
                r.s("user_name")?,
            );
            *arows.entry(k).or_default() += r.u("alloc_secs")?;
        }
        self.replace_usage(c, cluster, to, p0, pend, &crows, &arows)
            .await?;
        let mut count = 0;
        let mut t = p0;
        while t < pend {
            count += 1;
            t = match to {
                Span::Day => t + 86_400,
                _ => next_month(t),
            };
        }
        Ok(count)
    }

    #[allow(clippy::too_many_arguments)]
    async fn replace_usage(
        &self,
        c: &mut AnyConnection,
        cluster: &str,
        span: Span,
        t0: i64,
        tend: i64,
        crows: &BTreeMap<i64, ClusterRow>,
        arows: &BTreeMap<(i64, String, String), u64>,
    ) -> Result<()> {
        let b = self.backend;
        for table in ["usage_cluster", "usage_assoc"] {
            let mut q = Q::new(&format!("DELETE FROM {table} WHERE cluster="));
            q.bind(cluster)
                .push(" AND span=")
                .bind(span_code(span))
                .push(" AND time_start>=")
                .bind(t0)
                .push(" AND time_start<")
                .bind(tend);
            q.execute(b, &mut *c).await?;
        }
        let rows: Vec<(&i64, &ClusterRow)> = crows.iter().collect();
        for chunk in rows.chunks(500) {
            let mut q = Q::new(
                "INSERT INTO usage_cluster (cluster, span, time_start, cpu_count, total_secs, \
                 alloc_secs, down_secs, idle_secs) VALUES ",
            );
            for (i, (t, r)) in chunk.iter().enumerate() {
                if i > 0 {
                    q.push(",");
                }
                q.bind_tuple(vec![
                    cluster.into(),
                    span_code(span).into(),
                    (**t).into(),
                    r.cpu_count.into(),
                    r.total.into(),
                    r.alloc.into(),
                    r.down.into(),
                    r.idle.into(),
                ]);
            }
            q.execute(b, &mut *c).await?;
        }
        let rows: Vec<(&(i64, String, String), &u64)> = arows.iter().collect();
        for chunk in rows.chunks(500) {
            let mut q = Q::new(
                "INSERT INTO usage_assoc (cluster, span, time_start, account, user_name, alloc_secs) VALUES ",
            );
            for (i, ((t, a, u), v)) in chunk.iter().enumerate() {
                if i > 0 {
                    q.push(",");
                }
                let vals: Vec<Val> = vec![
                    cluster.into(),
                    span_code(span).into(),
                    (*t).into(),
                    a.as_str().into(),
                    u.as_str().into(),
                    (**v).into(),
                ];
                q.bind_tuple(vals);
            }
            q.execute(b, &mut *c).await?;
        }
        Ok(())
    }

    /// Usage in `[start, end)` from the rollup tables.
    pub async fn usage(&self, f: &UsageQuery) -> Result<UsageReport> {
        let b = self.backend;
        let span = f.span.unwrap_or_else(|| {
            if floor_month(f.start) == f.start && floor_month(f.end) == f.end {
                Span::Month
            } else if floor_day(f.start) == f.start && floor_day(f.end) == f.end {
                Span::Day
            } else {
                Span::Hour
            }
        });
        let lower = |v: &[String]| -> Vec<String> {
            v.iter().map(|s| s.trim().to_ascii_lowercase()).collect()
        };
        let mut out = UsageReport::default();
        let mut q = Q::new(
            "SELECT cluster, time_start, cpu_count, total_secs, alloc_secs, down_secs, idle_secs \
             FROM usage_cluster WHERE span=",
        );
        q.bind(span_code(span))
            .push(" AND time_start>=")
            .bind(f.start)
            .push(" AND time_start<")
            .bind(f.end);
        q.and_in("cluster", &lower(&f.clusters));
        q.push(" ORDER BY cluster, time_start");
        for r in q.fetch_all(b, &self.pool).await? {
            out.clusters.push(ClusterUsage {
                cluster: r.s("cluster")?,
                time_start: r.i("time_start")?,
                cpu_count: r.u32("cpu_count")?,
                total_secs: r.u("total_secs")?,
                alloc_secs: r.u("alloc_secs")?,
                down_secs: r.u("down_secs")?,
                idle_secs: r.u("idle_secs")?,
            });
        }
        let mut q = Q::new(
            "SELECT cluster, time_start, account, user_name, alloc_secs FROM usage_assoc WHERE span=",
        );
        q.bind(span_code(span))
            .push(" AND time_start>=")
            .bind(f.start)
            .push(" AND time_start<")
            .bind(f.end);
        q.and_in("cluster", &lower(&f.clusters));
        q.and_in("account", &lower(&f.accounts));
        q.and_in("user_name", &f.users);
        q.push(" ORDER BY cluster, time_start, account, user_name");
        for r in q.fetch_all(b, &self.pool).await? {
            out.assocs.push(AssocUsage {
                cluster: r.s("cluster")?,
                account: r.s("account")?,
                user: r.s("user_name")?,
                time_start: r.i("time_start")?,
                alloc_secs: r.u("alloc_secs")?,
            });
        }
        if f.total {
            let mut cl: BTreeMap<String, ClusterUsage> = BTreeMap::new();
            for u in out.clusters {
                let e = cl.entry(u.cluster.clone()).or_insert_with(|| ClusterUsage {
                    cluster: u.cluster.clone(),
                    time_start: f.start,
                    ..Default::default()
                });
                e.cpu_count = e.cpu_count.max(u.cpu_count);
                e.total_secs += u.total_secs;
                e.alloc_secs += u.alloc_secs;
                e.down_secs += u.down_secs;
                e.idle_secs += u.idle_secs;
            }
            let mut asc: BTreeMap<(String, String, String), AssocUsage> = BTreeMap::new();
            for u in out.assocs {
                let e = asc
                    .entry((u.cluster.clone(), u.account.clone(), u.user.clone()))
                    .or_insert_with(|| AssocUsage {
                        time_start: f.start,
                        alloc_secs: 0,
                        ..u.clone()
                    });
                e.alloc_secs += u.alloc_secs;
            }
            out.clusters = cl.into_values().collect();
            out.assocs = asc.into_values().collect();
        }
        Ok(out)
    }

    /// Delete what the purge settings say is too old.
    pub async fn purge(&self, p: &PurgeSettings, now: i64) -> Result<PurgeStats> {
        let b = self.backend;
        let _w = self.write_lock.lock().await;
        let mut tx = self.write_tx().await?;
        let mut st = PurgeStats::default();
        let del = |sql: &str, cutoff: i64| {
            let mut q = Q::new(sql);
            q.bind(cutoff);
            q
        };
        if let Some(j) = p.jobs {
            let cut = j.cutoff(now);
            st.steps += del(
                "DELETE FROM steps WHERE end_time IS NOT NULL AND end_time<",
                cut,
            )
            .execute(b, &mut *tx)
            .await?;
            st.jobs += del(
                "DELETE FROM jobs WHERE end_time IS NOT NULL AND end_time<",
                cut,
            )
            .execute(b, &mut *tx)
            .await?;
            // Scripts and environments no job points at any more go with
            // them (they often hold what should not outlive the job).
            Q::new(
                "DELETE FROM job_texts WHERE hash NOT IN \
                 (SELECT script_hash FROM jobs WHERE script_hash IS NOT NULL) \
                 AND hash NOT IN (SELECT env_hash FROM jobs WHERE env_hash IS NOT NULL)",
            )
            .execute(b, &mut *tx)
            .await?;
        }
        if let Some(s) = p.steps {
            st.steps += del(
                "DELETE FROM steps WHERE end_time IS NOT NULL AND end_time<",
                s.cutoff(now),
            )
            .execute(b, &mut *tx)
            .await?;
        }
        if let Some(e) = p.events {
            st.events += del(
                "DELETE FROM node_events WHERE time_end IS NOT NULL AND time_end<",
                e.cutoff(now),
            )
            .execute(b, &mut *tx)
            .await?;
        }
        if let Some(u) = p.usage {
            let cut = u.cutoff(now);
            st.usage += del("DELETE FROM usage_cluster WHERE time_start<", cut)
                .execute(b, &mut *tx)
                .await?;
            st.usage += del("DELETE FROM usage_assoc WHERE time_start<", cut)
                .execute(b, &mut *tx)
                .await?;
        }
        tx.commit().await?;
        Ok(st)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spreading_over_hours() {
        let mut got = vec![0u64; 3];
        spread(3600, 3, 3600 + 1800, 3 * 3600 + 600, |i, ov| got[i] += ov);
        assert_eq!(got, vec![1800, 3600, 600]);
        let mut got = vec![0u64; 2];
        spread(3600, 2, 0, 100_000, |i, ov| got[i] += ov);
        assert_eq!(got, vec![3600, 3600]);
        spread(3600, 2, 0, 10, |_, _| panic!("outside"));
    }
}
