//! What slurmdbd has served since it started: requests per type and per
//! user (count and time), and rollups per level.

use slurm_proto::acct::{DbdStats, RollupLevel, RollupStats, RpcCount};
use std::collections::HashMap;
use std::sync::Mutex;
use std::time::Duration;

#[derive(Default)]
struct Inner {
    rpcs: HashMap<&'static str, (u64, u64)>,
    users: HashMap<u32, (u64, u64)>,
    hourly: RollupLevel,
    daily: RollupLevel,
    monthly: RollupLevel,
}

pub struct Stats {
    time_start: std::sync::atomic::AtomicI64,
    inner: Mutex<Inner>,
}

fn micros(d: Duration) -> u64 {
    u64::try_from(d.as_micros()).unwrap_or(u64::MAX)
}

fn note(level: &mut RollupLevel, periods: u32, at: i64, us: u64) {
    if periods == 0 {
        return;
    }
    level.count += u64::from(periods);
    level.last_run = at;
    level.last_us = us;
    level.max_us = level.max_us.max(us);
    level.total_us = level.total_us.saturating_add(us);
}

fn sorted(m: &HashMap<String, (u64, u64)>) -> Vec<RpcCount> {
    let mut v: Vec<RpcCount> = m
        .iter()
        .map(|(n, (c, t))| RpcCount {
            name: n.clone(),
            count: *c,
            total_us: *t,
        })
        .collect();
    v.sort_by(|a, b| b.count.cmp(&a.count).then(a.name.cmp(&b.name)));
    v
}

impl Stats {
    pub fn new(time_start: i64) -> Stats {
        Stats {
            time_start: std::sync::atomic::AtomicI64::new(time_start),
            inner: Mutex::new(Inner::default()),
        }
    }

    /// `sacctmgr clear stats`: everything counted so far is forgotten;
    /// counting starts again at `now`.
    pub fn clear(&self, now: i64) {
        let mut g = self.lock();
        *g = Inner::default();
        self.time_start
            .store(now, std::sync::atomic::Ordering::Relaxed);
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// One request of type `rpc` from `uid`, answered in `took`.
    pub fn request(&self, rpc: &'static str, uid: u32, took: Duration) {
        let us = micros(took);
        let mut g = self.lock();
        let r = g.rpcs.entry(rpc).or_default();
        r.0 += 1;
        r.1 = r.1.saturating_add(us);
        let u = g.users.entry(uid).or_default();
        u.0 += 1;
        u.1 = u.1.saturating_add(us);
    }

    /// A rollup at `at` that did `st`, in `took`.
    pub fn rollup(&self, st: &RollupStats, at: i64, took: Duration) {
        let us = micros(took);
        let mut g = self.lock();
        note(&mut g.hourly, st.hours, at, us);
        note(&mut g.daily, st.days, at, us);
        note(&mut g.monthly, st.months, at, us);
    }

    pub fn snapshot(&self) -> DbdStats {
        let g = self.lock();
        let rpcs: HashMap<String, (u64, u64)> =
            g.rpcs.iter().map(|(k, v)| (k.to_string(), *v)).collect();
        let users: HashMap<String, (u64, u64)> = g
            .users
            .iter()
            .map(|(uid, v)| (slurm_common::users::user_name_or_id(*uid), *v))
            .collect();
        DbdStats {
            time_start: self.time_start.load(std::sync::atomic::Ordering::Relaxed),
            hourly: g.hourly.clone(),
            daily: g.daily.clone(),
            monthly: g.monthly.clone(),
            rpcs: sorted(&rpcs),
            users: sorted(&users),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_requests_and_rollups() {
        let s = Stats::new(100);
        s.request("DBD_PING", 0, Duration::from_micros(10));
        s.request("DBD_PING", 0, Duration::from_micros(30));
        s.request("DBD_GET_JOBS_COND", 65534, Duration::from_micros(5));
        s.rollup(
            &RollupStats {
                hours: 3,
                days: 1,
                months: 0,
            },
            200,
            Duration::from_micros(50),
        );
        let d = s.snapshot();
        assert_eq!(d.time_start, 100);
        assert_eq!(
            (d.rpcs[0].name.as_str(), d.rpcs[0].count, d.rpcs[0].total_us),
            ("DBD_PING", 2, 40)
        );
        assert_eq!(d.users.len(), 2);
        assert_eq!(
            (d.hourly.count, d.hourly.last_run, d.hourly.max_us),
            (3, 200, 50)
        );
        assert_eq!(d.daily.count, 1);
        assert_eq!(d.monthly, RollupLevel::default());
    }
}
