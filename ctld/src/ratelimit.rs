//! Per-user RPC rate limiting, as Slurm's `SlurmctldParameters=rl_enable`:
//! a token bucket per user of `rl_bucket_size` tokens, refilled with
//! `rl_refill_rate` tokens every `rl_refill_period` seconds. A request
//! takes one token; a user without one is told to back off (the commands
//! wait a second and retry), so one user's loop cannot starve the others.
//! Root and SlurmUser are never limited. Time is passed in (pure logic).

use slurm_common::conf::SlurmConf;
use std::collections::HashMap;
use std::time::{Duration, Instant};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RateParams {
    pub bucket_size: u32,
    pub refill_rate: u32,
    pub refill_period: Duration,
    /// Most users tracked at once (`rl_table_size`).
    pub table_size: usize,
}

impl Default for RateParams {
    fn default() -> RateParams {
        // Slurm's defaults.
        RateParams {
            bucket_size: 30,
            refill_rate: 2,
            refill_period: Duration::from_secs(1),
            table_size: 8192,
        }
    }
}

impl RateParams {
    /// `None` unless `SlurmctldParameters` has `rl_enable`; an error names
    /// a bad value.
    pub fn from_conf(conf: &SlurmConf) -> Result<Option<RateParams>, String> {
        if conf.ctld_param("rl_enable").is_none() {
            return Ok(None);
        }
        let mut p = RateParams::default();
        let num = |k: &str, min: u64| -> Result<Option<u64>, String> {
            match conf.ctld_param(k) {
                None => Ok(None),
                Some(v) => match v.parse::<u64>() {
                    Ok(n) if n >= min && n <= u64::from(u32::MAX) => Ok(Some(n)),
                    _ => Err(format!(
                        "SlurmctldParameters={k}={v}: expected a number ≥ {min}"
                    )),
                },
            }
        };
        if let Some(n) = num("rl_bucket_size", 1)? {
            p.bucket_size = n as u32;
        }
        if let Some(n) = num("rl_refill_rate", 1)? {
            p.refill_rate = n as u32;
        }
        if let Some(n) = num("rl_refill_period", 1)? {
            p.refill_period = Duration::from_secs(n);
        }
        if let Some(n) = num("rl_table_size", 1)? {
            p.table_size = n as usize;
        }
        Ok(Some(p))
    }
}

#[derive(Debug, Clone, Copy)]
struct Bucket {
    tokens: u32,
    /// When tokens were last added.
    refilled: Instant,
}

#[derive(Debug)]
pub struct RateLimiter {
    params: RateParams,
    buckets: HashMap<u32, Bucket>,
}

impl RateLimiter {
    pub fn new(params: RateParams) -> RateLimiter {
        RateLimiter {
            params,
            buckets: HashMap::new(),
        }
    }

    /// Take a token for `uid` at `now`: `false` means back off.
    pub fn allow(&mut self, uid: u32, now: Instant) -> bool {
        let p = self.params;
        if self.buckets.len() >= p.table_size && !self.buckets.contains_key(&uid) {
            // Forget users whose buckets have refilled: they are idle.
            let full = |b: &Bucket| Self::refilled(&p, *b, now).tokens >= p.bucket_size;
            self.buckets.retain(|_, b| !full(b));
            if self.buckets.len() >= p.table_size {
                return false;
            }
        }
        let b = self.buckets.entry(uid).or_insert(Bucket {
            tokens: p.bucket_size,
            refilled: now,
        });
        *b = Self::refilled(&p, *b, now);
        if b.tokens == 0 {
            return false;
        }
        b.tokens -= 1;
        true
    }

    fn refilled(p: &RateParams, mut b: Bucket, now: Instant) -> Bucket {
        let periods = now.saturating_duration_since(b.refilled).as_nanos()
            / p.refill_period.as_nanos().max(1);
        if periods > 0 {
            let add = (periods as u64).saturating_mul(u64::from(p.refill_rate));
            b.tokens = (u64::from(b.tokens) + add).min(u64::from(p.bucket_size)) as u32;
            b.refilled += p.refill_period * periods.min(u32::MAX as u128) as u32;
        }
        b
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn params(size: u32, rate: u32) -> RateParams {
        RateParams {
            bucket_size: size,
            refill_rate: rate,
            refill_period: Duration::from_secs(1),
            table_size: 4,
        }
    }

    #[test]
    fn a_burst_then_the_refill_rate() {
        let mut r = RateLimiter::new(params(5, 2));
        let t0 = Instant::now();
        assert!((0..5).all(|_| r.allow(7, t0)));
        assert!(!r.allow(7, t0), "bucket empty");
        // Another user is not affected.
        assert!(r.allow(8, t0));
        let t1 = t0 + Duration::from_millis(999);
        assert!(!r.allow(7, t1));
        let t2 = t0 + Duration::from_secs(1);
        assert!(r.allow(7, t2) && r.allow(7, t2) && !r.allow(7, t2));
        // A long pause refills to the bucket size, no more.
        let t3 = t2 + Duration::from_secs(3600);
        assert_eq!((0..10).filter(|_| r.allow(7, t3)).count(), 5);
    }

    #[test]
    fn the_table_forgets_idle_users_and_never_grows_past_its_size() {
        let mut r = RateLimiter::new(params(2, 1));
        let t0 = Instant::now();
        for u in 0..4 {
            assert!(r.allow(u, t0));
        }
        // Full of active users: a fifth is told to back off.
        assert!(!r.allow(99, t0));
        // Once their buckets have refilled, they are forgotten.
        assert!(r.allow(99, t0 + Duration::from_secs(5)));
        assert!(r.buckets.len() <= 4);
    }
}
