//! Fair share for `priority/multifactor`: the association tree, usage
//! accrual, half-life decay, periodic usage resets, and the three ways
//! Slurm turns shares and usage into a fair-share factor:
//!
//! - **Fair Tree** (the default): every sibling set gets a *level fair
//!   share* `LF = S / U` (shares and usage normalised among the siblings);
//!   the tree is walked depth first, children in decreasing `LF`, and users
//!   are ranked in the order they are met. A user's factor is its rank over
//!   the number of user associations, so the first user gets 1.0. Ties share
//!   a rank: tied users get the same rank, a user tied with a sibling account
//!   gets the rank of that account's best user, and tied sibling accounts
//!   have their children merged before descending.
//! - **Classic** (`PriorityFlags=NO_FAIR_TREE`): `F = 2^(-UE/S/d)` with `S`
//!   the product of share fractions down the path, and the effective usage
//!   `UE = UA + (UE_parent - UA) * S_child / S_all_siblings` (equal to the
//!   normalised usage just under root).
//! - **Depth-oblivious** (`PriorityFlags=DEPTH_OBLIVIOUS`): `F = 2^(-R)`,
//!   `R = R_parent * r_l^k`, with the local usage ratio `r_l` and the
//!   damping exponent `k` of Slurm's depth-oblivious page.
//!
//! Usage is a plain number (CPU-seconds or TRES-billing-seconds) held on
//! every association *including* its descendants' usage, as `sshare`
//! prints it. Decay is exact and composable: `usage *= 0.5^(dt/half_life)`.
//!
//! Everything here is pure: time is a Unix timestamp passed in, resets use
//! an explicit UTC offset instead of the local zone.

use std::collections::BTreeMap;
use std::fmt;

/// Index of an association in its [`FairShareTree`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct AssocId(pub usize);

/// The root association (account `root`).
pub const ROOT: AssocId = AssocId(0);

/// `Fairshare=` of an association: a number of shares, or `parent` (use
/// the parent's standing instead of an own one).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Shares {
    Value(u32),
    Parent,
}

impl Shares {
    /// `"parent"` (any case) or an unsigned number of shares.
    pub fn parse(s: &str) -> Result<Shares, FairShareError> {
        let t = s.trim();
        if t.eq_ignore_ascii_case("parent") {
            return Ok(Shares::Parent);
        }
        t.parse::<u32>()
            .map(Shares::Value)
            .map_err(|_| FairShareError::BadShares(s.to_string()))
    }

    fn value(self) -> Option<f64> {
        match self {
            Shares::Value(v) => Some(f64::from(v)),
            Shares::Parent => None,
        }
    }
}

impl Default for Shares {
    /// Slurm's default: one share.
    fn default() -> Self {
        Shares::Value(1)
    }
}

impl fmt::Display for Shares {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Shares::Value(v) => write!(f, "{v}"),
            Shares::Parent => f.write_str("parent"),
        }
    }
}

/// Account or user association.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum AssocKind {
    Account,
    User,
}

/// One association: an account, or a user within an account.
#[derive(Debug, Clone, PartialEq)]
pub struct Assoc {
    /// Account name, or user name for a user association.
    pub name: String,
    pub kind: AssocKind,
    /// `None` only for root.
    pub parent: Option<AssocId>,
    pub shares: Shares,
    /// Decayed usage of this association and everything below it.
    pub raw_usage: f64,
}

#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum FairShareError {
    #[error("unknown account '{0}'")]
    UnknownAccount(String),
    #[error("account '{0}' already exists")]
    DuplicateAccount(String),
    #[error("user '{user}' already has an association in account '{account}'")]
    DuplicateUser { user: String, account: String },
    #[error("no association for user '{user}' in account '{account}'")]
    UnknownUser { user: String, account: String },
    #[error("no association {0:?}")]
    UnknownAssoc(AssocId),
    #[error("invalid Fairshare value '{0}': expected a number of shares or 'parent'")]
    BadShares(String),
    #[error("invalid usage {0}: expected a finite number of at least 0")]
    BadUsage(f64),
    #[error("invalid association name '{0}'")]
    BadName(String),
}

/// `PriorityUsageResetPeriod`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum UsageReset {
    #[default]
    None,
    /// Clear once, when the configuration is loaded.
    Now,
    /// Every day at 00:00.
    Daily,
    /// Every Sunday at 00:00.
    Weekly,
    /// The first of every month at 00:00.
    Monthly,
    /// The first of January, April, July and October at 00:00.
    Quarterly,
    /// The first of January at 00:00.
    Yearly,
}

impl UsageReset {
    pub fn parse(s: &str) -> Option<UsageReset> {
        Some(match s.trim().to_ascii_uppercase().as_str() {
            "NONE" => UsageReset::None,
            "NOW" => UsageReset::Now,
            "DAILY" => UsageReset::Daily,
            "WEEKLY" => UsageReset::Weekly,
            "MONTHLY" => UsageReset::Monthly,
            "QUARTERLY" => UsageReset::Quarterly,
            "YEARLY" => UsageReset::Yearly,
            _ => return None,
        })
    }

    /// The latest reset instant at or before `now` (local midnight per
    /// `utc_offset` seconds east of UTC); `None` for `None` and `Now`,
    /// which have no calendar.
    pub fn last_boundary(self, now: i64, utc_offset: i64) -> Option<i64> {
        let local = now.checked_add(utc_offset)?;
        let days = local.div_euclid(86_400);
        let (y, m, _) = civil_from_days(days);
        let day = match self {
            UsageReset::None | UsageReset::Now => return None,
            UsageReset::Daily => days,
            // 1970-01-01 was a Thursday: day 3 (Sunday-based) of its week.
            UsageReset::Weekly => days - (days + 4).rem_euclid(7),
            UsageReset::Monthly => days_from_civil(y, m, 1),
            UsageReset::Quarterly => days_from_civil(y, (m - 1) / 3 * 3 + 1, 1),
            UsageReset::Yearly => days_from_civil(y, 1, 1),
        };
        day.checked_mul(86_400)?.checked_sub(utc_offset)
    }
}

/// Days since 1970-01-01 of a proleptic Gregorian date.
fn days_from_civil(y: i64, m: i64, d: i64) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (m + 9) % 12;
    let doy = (153 * mp + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

/// Inverse of [`days_from_civil`]: (year, month 1-12, day 1-31).
fn civil_from_days(z: i64) -> (i64, i64, i64) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    (yoe + era * 400 + i64::from(m <= 2), m, d)
}

/// How usage ages: `PriorityDecayHalfLife` and `PriorityUsageResetPeriod`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct UsagePolicy {
    /// Seconds; 0 = no decay.
    pub half_life: u64,
    pub reset: UsageReset,
    /// Seconds east of UTC for calendar resets (the core has no time zone).
    pub utc_offset: i64,
}

impl Default for UsagePolicy {
    fn default() -> Self {
        UsagePolicy {
            half_life: 7 * 86_400,
            reset: UsageReset::None,
            utc_offset: 0,
        }
    }
}

/// Which fair-share factor to compute.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Algorithm {
    #[default]
    FairTree,
    Classic,
    DepthOblivious,
}

/// The association tree with its usage.
#[derive(Debug, Clone, PartialEq)]
pub struct FairShareTree {
    assocs: Vec<Assoc>,
    children: Vec<Vec<AssocId>>,
    accounts: BTreeMap<String, AssocId>,
    /// (account, user) → association.
    users: BTreeMap<(String, String), AssocId>,
    policy: UsagePolicy,
    /// Usage is as of this instant (`None`: never decayed yet).
    last_decay: Option<i64>,
    last_reset: Option<i64>,
}

impl Default for FairShareTree {
    fn default() -> Self {
        FairShareTree::new(UsagePolicy::default())
    }
}

fn valid_name(s: &str) -> bool {
    !s.is_empty() && !s.contains('/') && !s.chars().any(char::is_whitespace)
}

impl FairShareTree {
    /// A tree holding only `root`.
    pub fn new(policy: UsagePolicy) -> Self {
        let mut accounts = BTreeMap::new();
        accounts.insert("root".to_string(), ROOT);
        FairShareTree {
            assocs: vec![Assoc {
                name: "root".into(),
                kind: AssocKind::Account,
                parent: None,
                shares: Shares::Value(1),
                raw_usage: 0.0,
            }],
            children: vec![Vec::new()],
            accounts,
            users: BTreeMap::new(),
            policy,
            last_decay: None,
            last_reset: None,
        }
    }

    pub fn policy(&self) -> UsagePolicy {
        self.policy
    }

    /// Change decay or reset (a reconfiguration). A new `Now` reset fires on
    /// the next [`FairShareTree::apply_reset`].
    pub fn set_policy(&mut self, policy: UsagePolicy) {
        if policy.reset == UsageReset::Now && self.policy.reset != UsageReset::Now {
            self.last_reset = None;
        }
        self.policy = policy;
    }

    pub fn add_account(
        &mut self,
        name: &str,
        parent: &str,
        shares: Shares,
    ) -> Result<AssocId, FairShareError> {
        if !valid_name(name) {
            return Err(FairShareError::BadName(name.to_string()));
        }
        if self.accounts.contains_key(name) {
            return Err(FairShareError::DuplicateAccount(name.to_string()));
        }
        let p = self
            .find_account(parent)
            .ok_or_else(|| FairShareError::UnknownAccount(parent.to_string()))?;
        let id = self.push(name, AssocKind::Account, p, shares);
        self.accounts.insert(name.to_string(), id);
        Ok(id)
    }

    pub fn add_user(
        &mut self,
        user: &str,
        account: &str,
        shares: Shares,
    ) -> Result<AssocId, FairShareError> {
        if !valid_name(user) {
            return Err(FairShareError::BadName(user.to_string()));
        }
        let p = self
            .find_account(account)
            .ok_or_else(|| FairShareError::UnknownAccount(account.to_string()))?;
        let key = (account.to_string(), user.to_string());
        if self.users.contains_key(&key) {
            return Err(FairShareError::DuplicateUser {
                user: user.to_string(),
                account: account.to_string(),
            });
        }
        let id = self.push(user, AssocKind::User, p, shares);
        self.users.insert(key, id);
        Ok(id)
    }

    /// The user's association, created with one share (and its account
    /// under root with one share) when missing: how the controller tracks
    /// usage before accounting provides the real tree.
    pub fn ensure_user(&mut self, user: &str, account: &str) -> Result<AssocId, FairShareError> {
        if let Some(id) = self.find_user(user, account) {
            return Ok(id);
        }
        if self.find_account(account).is_none() {
            self.add_account(account, "root", Shares::default())?;
        }
        self.add_user(user, account, Shares::default())
    }

    fn push(&mut self, name: &str, kind: AssocKind, parent: AssocId, shares: Shares) -> AssocId {
        let id = AssocId(self.assocs.len());
        self.assocs.push(Assoc {
            name: name.to_string(),
            kind,
            parent: Some(parent),
            shares,
            raw_usage: 0.0,
        });
        self.children.push(Vec::new());
        self.children[parent.0].push(id);
        id
    }

    pub fn set_shares(&mut self, id: AssocId, shares: Shares) -> Result<(), FairShareError> {
        let a = self
            .assocs
            .get_mut(id.0)
            .ok_or(FairShareError::UnknownAssoc(id))?;
        a.shares = shares;
        Ok(())
    }

    pub fn get(&self, id: AssocId) -> Option<&Assoc> {
        self.assocs.get(id.0)
    }

    /// All associations; the index is the [`AssocId`].
    pub fn assocs(&self) -> &[Assoc] {
        &self.assocs
    }

    pub fn children(&self, id: AssocId) -> &[AssocId] {
        self.children.get(id.0).map_or(&[], Vec::as_slice)
    }

    pub fn find_account(&self, name: &str) -> Option<AssocId> {
        self.accounts.get(name).copied()
    }

    pub fn find_user(&self, user: &str, account: &str) -> Option<AssocId> {
        self.users
            .get(&(account.to_string(), user.to_string()))
            .copied()
    }

    /// By path from root: `root/acctA/subB/user` (the leading `root` may be
    /// left out). Each step names a child of the previous one.
    pub fn find_path(&self, path: &str) -> Option<AssocId> {
        let mut parts: Vec<&str> = path.split('/').filter(|s| !s.is_empty()).collect();
        if parts.first() == Some(&"root") {
            parts.remove(0);
        }
        let mut at = ROOT;
        for (i, part) in parts.iter().enumerate() {
            // An account and a user may share a name under one parent: the
            // steps before the last are accounts; the last is the user if
            // there is one.
            let last = i + 1 == parts.len();
            let named = |kind| {
                self.children(at)
                    .iter()
                    .copied()
                    .find(|c| self.assocs[c.0].name == *part && self.assocs[c.0].kind == kind)
            };
            at = if last {
                named(AssocKind::User).or_else(|| named(AssocKind::Account))?
            } else {
                named(AssocKind::Account)?
            };
        }
        Some(at)
    }

    /// `root/acct/.../name` of an association.
    pub fn path_of(&self, id: AssocId) -> Option<String> {
        let mut names = Vec::new();
        let mut at = Some(id);
        while let Some(a) = at {
            let assoc = self.assocs.get(a.0)?;
            names.push(assoc.name.as_str());
            at = assoc.parent;
        }
        names.reverse();
        Some(names.join("/"))
    }

    /// Depth below root (root is 0).
    pub fn depth(&self, id: AssocId) -> usize {
        let mut d = 0;
        let mut at = self.assocs.get(id.0).and_then(|a| a.parent);
        while let Some(p) = at {
            d += 1;
            at = self.assocs[p.0].parent;
        }
        d
    }

    /// The instant the usage is decayed to.
    pub fn last_decay(&self) -> Option<i64> {
        self.last_decay
    }

    /// Charge `amount` (CPU-seconds or billing-seconds) used at `at` to an
    /// association and all its ancestors. Usage later than the last decay
    /// first brings the tree up to `at`; earlier usage is decayed as if it
    /// had been charged in time.
    pub fn add_usage(&mut self, id: AssocId, amount: f64, at: i64) -> Result<(), FairShareError> {
        if !amount.is_finite() || amount < 0.0 {
            return Err(FairShareError::BadUsage(amount));
        }
        if id.0 >= self.assocs.len() {
            return Err(FairShareError::UnknownAssoc(id));
        }
        let amount = match self.last_decay {
            Some(t) if at < t => amount * self.decay_factor(t - at),
            _ => {
                self.decay(at);
                amount
            }
        };
        let mut cur = Some(id);
        while let Some(a) = cur {
            let assoc = &mut self.assocs[a.0];
            assoc.raw_usage += amount;
            cur = assoc.parent;
        }
        Ok(())
    }

    /// A job of `user` under `account` held `cpus` for `seconds`, ending at
    /// `now`: charges `cpus * seconds`, creating the association if needed
    /// (see [`FairShareTree::ensure_user`]).
    pub fn record_job_usage(
        &mut self,
        user: &str,
        account: &str,
        cpus: u32,
        seconds: u64,
        now: i64,
    ) -> Result<(), FairShareError> {
        self.record_job_billing(user, account, f64::from(cpus), seconds, now)
    }

    /// Like [`FairShareTree::record_job_usage`] with a TRES billing value
    /// (see [`billable_tres`]) in place of the CPU count.
    pub fn record_job_billing(
        &mut self,
        user: &str,
        account: &str,
        billing: f64,
        seconds: u64,
        now: i64,
    ) -> Result<(), FairShareError> {
        let id = self.ensure_user(user, account)?;
        self.add_usage(id, billing * seconds as f64, now)
    }

    fn decay_factor(&self, dt: i64) -> f64 {
        if self.policy.half_life == 0 || dt <= 0 {
            1.0
        } else {
            0.5f64.powf(dt as f64 / self.policy.half_life as f64)
        }
    }

    /// Decay every usage to `now`: `usage *= 0.5^(dt / half_life)`. Time
    /// never runs backwards: an earlier `now` changes nothing.
    pub fn decay(&mut self, now: i64) {
        match self.last_decay {
            Some(t) if now <= t => {}
            Some(t) => {
                let f = self.decay_factor(now - t);
                if f != 1.0 {
                    for a in &mut self.assocs {
                        a.raw_usage *= f;
                    }
                }
                self.last_decay = Some(now);
            }
            None => self.last_decay = Some(now),
        }
    }

    /// Clear all usage now.
    pub fn reset_usage(&mut self, now: i64) {
        for a in &mut self.assocs {
            a.raw_usage = 0.0;
        }
        self.last_reset = Some(now);
        self.last_decay = Some(self.last_decay.map_or(now, |t| t.max(now)));
    }

    /// Apply `PriorityUsageResetPeriod`: clears usage when a reset instant
    /// has passed since the last reset (for `Now`: once after it is
    /// configured). The first call only starts the clock for calendar
    /// periods. Returns whether usage was cleared.
    pub fn apply_reset(&mut self, now: i64) -> bool {
        let due = match self.policy.reset {
            UsageReset::None => false,
            UsageReset::Now => self.last_reset.is_none(),
            period => match (
                self.last_reset,
                period.last_boundary(now, self.policy.utc_offset),
            ) {
                (Some(last), Some(b)) => last < b,
                (None, _) => {
                    self.last_reset = Some(now);
                    false
                }
                (_, None) => false,
            },
        };
        if due {
            self.reset_usage(now);
        }
        due
    }

    /// Once per `PriorityCalcPeriod`: reset if due, then decay to `now`.
    pub fn tick(&mut self, now: i64) {
        self.apply_reset(now);
        self.decay(now);
    }

    /// The fair-share factors and `sshare` figures of every association.
    /// `dampening` is `FairShareDampeningFactor` (classic only; 1 = none).
    pub fn compute(&self, algorithm: Algorithm, dampening: f64) -> FairShareReport {
        let n = self.assocs.len();
        let mut rows: Vec<ShareRow> = Vec::with_capacity(n);
        let order = self.display_order();
        let norm_shares = self.norm_shares();
        let root_usage = self.assocs[0].raw_usage;
        let norm_usage: Vec<f64> = self
            .assocs
            .iter()
            .map(|a| {
                if root_usage > 0.0 {
                    a.raw_usage / root_usage
                } else {
                    0.0
                }
            })
            .collect();
        let mut effective = vec![0.0; n];
        let mut fairshare: Vec<Option<f64>> = vec![None; n];
        let mut level_fs: Vec<Option<f64>> = vec![None; n];
        match algorithm {
            Algorithm::FairTree => {
                let ft = self.fair_tree();
                effective = ft.level_usage;
                level_fs = ft.level_fs;
                fairshare = ft.factor;
            }
            Algorithm::Classic => {
                effective = self.classic_effective(&norm_usage);
                let d = if dampening.is_finite() && dampening >= 1.0 {
                    dampening
                } else {
                    1.0
                };
                for i in 1..n {
                    fairshare[i] = Some(classic_factor(effective[i], norm_shares[i], d));
                }
            }
            Algorithm::DepthOblivious => {
                effective.clone_from(&norm_usage);
                let r = self.depth_oblivious_ratio(&norm_shares, &norm_usage);
                for i in 1..n {
                    fairshare[i] = Some(clamp01(0.5f64.powf(r[i])));
                }
            }
        }
        for &id in &order {
            let a = &self.assocs[id.0];
            let (account, user) = match a.kind {
                AssocKind::Account => (a.name.clone(), None),
                AssocKind::User => {
                    let acct = a
                        .parent
                        .map_or_else(String::new, |p| self.assocs[p.0].name.clone());
                    (acct, Some(a.name.clone()))
                }
            };
            rows.push(ShareRow {
                id,
                path: self.path_of(id).unwrap_or_default(),
                depth: self.depth(id),
                account,
                user,
                raw_shares: a.shares,
                norm_shares: norm_shares[id.0],
                raw_usage: a.raw_usage,
                norm_usage: norm_usage[id.0],
                effective_usage: effective[id.0],
                fairshare: fairshare[id.0],
                level_fs: level_fs[id.0],
            });
        }
        FairShareReport::new(algorithm, rows)
    }

    /// Depth first from root: under each account its users (by name), then
    /// its sub-accounts (by name).
    fn display_order(&self) -> Vec<AssocId> {
        let mut out = Vec::with_capacity(self.assocs.len());
        let mut stack = vec![ROOT];
        while let Some(id) = stack.pop() {
            out.push(id);
            let mut kids: Vec<AssocId> = self.children(id).to_vec();
            // Reverse of display order, as the stack pops the last first.
            kids.sort_by(|a, b| {
                let (x, y) = (&self.assocs[a.0], &self.assocs[b.0]);
                (y.kind == AssocKind::Account, &y.name, b.0).cmp(&(
                    x.kind == AssocKind::Account,
                    &x.name,
                    a.0,
                ))
            });
            stack.extend(kids);
        }
        out
    }

    /// Sum of the numeric shares of every association's children.
    fn level_shares(&self) -> Vec<f64> {
        let mut sums = vec![0.0; self.assocs.len()];
        for a in &self.assocs {
            if let (Some(p), Some(v)) = (a.parent, a.shares.value()) {
                sums[p.0] += v;
            }
        }
        sums
    }

    /// Parents before children (breadth first).
    fn top_down(&self) -> Vec<AssocId> {
        let mut out = vec![ROOT];
        let mut i = 0;
        while i < out.len() {
            out.extend_from_slice(self.children(out[i]));
            i += 1;
        }
        out
    }

    /// Normalised shares: the product of `shares / sibling shares` down the
    /// path; `parent` takes the parent's value.
    fn norm_shares(&self) -> Vec<f64> {
        let levels = self.level_shares();
        let mut s = vec![0.0; self.assocs.len()];
        s[0] = 1.0;
        for id in self.top_down().into_iter().skip(1) {
            let a = &self.assocs[id.0];
            let Some(p) = a.parent else { continue };
            s[id.0] = match a.shares.value() {
                None => s[p.0],
                Some(v) => {
                    let level = levels[p.0];
                    if level > 0.0 {
                        s[p.0] * v / level
                    } else {
                        0.0
                    }
                }
            };
        }
        s
    }

    fn classic_effective(&self, norm_usage: &[f64]) -> Vec<f64> {
        let levels = self.level_shares();
        let mut ue = vec![0.0; self.assocs.len()];
        ue[0] = norm_usage[0];
        for id in self.top_down().into_iter().skip(1) {
            let a = &self.assocs[id.0];
            let Some(p) = a.parent else { continue };
            let ua = norm_usage[id.0];
            ue[id.0] = match a.shares.value() {
                None => ue[p.0],
                Some(_) if p == ROOT => ua,
                Some(v) => {
                    let level = levels[p.0];
                    let frac = if level > 0.0 { v / level } else { 0.0 };
                    ua + (ue[p.0] - ua) * frac
                }
            };
        }
        ue
    }

    fn depth_oblivious_ratio(&self, s: &[f64], u: &[f64]) -> Vec<f64> {
        let mut r_eff = vec![1.0; self.assocs.len()];
        for id in self.top_down() {
            let kids = self.children(id);
            let (mut su, mut ss) = (0.0, 0.0);
            for c in kids {
                if self.assocs[c.0].shares.value().is_some() {
                    su += u[c.0];
                    ss += s[c.0];
                }
            }
            let rp = r_eff[id.0];
            for &c in kids {
                r_eff[c.0] = match self.assocs[c.0].shares.value() {
                    None => rp,
                    Some(_) => depth_oblivious_step(rp, u[c.0], s[c.0], su, ss),
                };
            }
        }
        r_eff
    }

    /// The members of `id`'s level for Fair Tree: its children, with
    /// `parent`-share accounts replaced by their own members and `parent`
    /// share users left out (they rank with their account).
    fn level_members(&self, id: AssocId) -> Vec<AssocId> {
        let mut out = Vec::new();
        let mut stack: Vec<AssocId> = self.children(id).iter().rev().copied().collect();
        while let Some(c) = stack.pop() {
            let a = &self.assocs[c.0];
            match (a.shares, a.kind) {
                (Shares::Parent, AssocKind::Account) => {
                    stack.extend(self.children(c).iter().rev().copied());
                }
                (Shares::Parent, AssocKind::User) => {}
                _ => out.push(c),
            }
        }
        out
    }

    /// `parent`-share users directly under `id` or under its `parent`-share
    /// sub-accounts: they take the rank of the account's best user.
    fn parent_share_users(&self, id: AssocId) -> Vec<AssocId> {
        let mut out = Vec::new();
        let mut stack: Vec<AssocId> = self.children(id).iter().rev().copied().collect();
        while let Some(c) = stack.pop() {
            let a = &self.assocs[c.0];
            match (a.shares, a.kind) {
                (Shares::Parent, AssocKind::Account) => {
                    stack.extend(self.children(c).iter().rev().copied());
                }
                (Shares::Parent, AssocKind::User) => out.push(c),
                _ => {}
            }
        }
        out
    }

    fn fair_tree(&self) -> FairTreeOut {
        let n = self.assocs.len();
        let mut level_usage = vec![0.0; n];
        let mut level_fs: Vec<Option<f64>> = vec![None; n];
        let mut factor: Vec<Option<f64>> = vec![None; n];

        // Level fair share of every member, relative to its level.
        for id in self.top_down() {
            let a = &self.assocs[id.0];
            if a.kind == AssocKind::User || (id != ROOT && a.shares == Shares::Parent) {
                continue;
            }
            let members = self.level_members(id);
            let ss: f64 = members
                .iter()
                .filter_map(|m| self.assocs[m.0].shares.value())
                .sum();
            let su: f64 = members.iter().map(|m| self.assocs[m.0].raw_usage).sum();
            for m in members {
                let am = &self.assocs[m.0];
                let s = match am.shares.value() {
                    Some(v) if ss > 0.0 => v / ss,
                    _ => 0.0,
                };
                let u = if su > 0.0 { am.raw_usage / su } else { 0.0 };
                level_usage[m.0] = u;
                level_fs[m.0] = Some(level_fair_share(s, u));
            }
        }
        // `parent` share associations show their parent's standing.
        for id in self.top_down().into_iter().skip(1) {
            let a = &self.assocs[id.0];
            if a.shares == Shares::Parent {
                if let Some(p) = a.parent {
                    level_fs[id.0] = level_fs[p.0];
                    level_usage[id.0] = level_usage[p.0];
                }
            }
        }

        let user_count = self
            .assocs
            .iter()
            .filter(|a| a.kind == AssocKind::User)
            .count();
        if user_count == 0 {
            return FairTreeOut {
                level_usage,
                level_fs,
                factor,
            };
        }
        let total = user_count as f64;
        let mut rank = user_count;
        let lf = |m: AssocId| level_fs[m.0].unwrap_or(0.0);

        enum Work {
            /// Rank a (merged) list of level members.
            List(Vec<AssocId>),
            /// Users that all take the rank current when this runs.
            Assign(Vec<AssocId>),
            /// Use up rank numbers of users assigned earlier.
            Consume(usize),
        }
        // A tie group runs as: its users take the current rank; the tied
        // accounts' members are ranked from that same rank (so their best
        // user ties with those users); then the users' numbers are used up.
        fn push_group(stack: &mut Vec<Work>, members: Vec<AssocId>, users: Vec<AssocId>) {
            stack.push(Work::Consume(users.len()));
            stack.push(Work::List(members));
            stack.push(Work::Assign(users));
        }
        let mut stack = Vec::new();
        push_group(
            &mut stack,
            self.level_members(ROOT),
            self.parent_share_users(ROOT),
        );
        while let Some(w) = stack.pop() {
            match w {
                Work::Assign(users) => {
                    for u in users {
                        factor[u.0] = Some(rank as f64 / total);
                    }
                }
                Work::Consume(k) => rank = rank.saturating_sub(k),
                Work::List(mut list) => {
                    list.sort_by(|&a, &b| {
                        lf(b)
                            .total_cmp(&lf(a))
                            .then_with(|| self.assocs[a.0].kind.cmp(&self.assocs[b.0].kind))
                            .then_with(|| self.assocs[a.0].name.cmp(&self.assocs[b.0].name))
                            .then_with(|| a.cmp(&b))
                    });
                    let mut groups: Vec<Vec<AssocId>> = Vec::new();
                    for m in list {
                        match groups.last_mut() {
                            Some(g) if lf(g[0]) == lf(m) => g.push(m),
                            _ => groups.push(vec![m]),
                        }
                    }
                    // Best group first: pushed last.
                    for g in groups.into_iter().rev() {
                        let mut members = Vec::new();
                        let mut users = Vec::new();
                        for m in g {
                            match self.assocs[m.0].kind {
                                AssocKind::Account => {
                                    members.extend(self.level_members(m));
                                    users.extend(self.parent_share_users(m));
                                }
                                AssocKind::User => users.push(m),
                            }
                        }
                        push_group(&mut stack, members, users);
                    }
                }
            }
        }
        FairTreeOut {
            level_usage,
            level_fs,
            factor,
        }
    }
}

struct FairTreeOut {
    level_usage: Vec<f64>,
    level_fs: Vec<Option<f64>>,
    factor: Vec<Option<f64>>,
}

/// `LF = S / U`; no shares → 0; shares without usage → infinity.
fn level_fair_share(s: f64, u: f64) -> f64 {
    if s <= 0.0 {
        0.0
    } else if u <= 0.0 {
        f64::INFINITY
    } else {
        s / u
    }
}

fn clamp01(x: f64) -> f64 {
    if x.is_nan() {
        0.0
    } else {
        x.clamp(0.0, 1.0)
    }
}

/// `2^(-UE/S/d)`; no shares → 0.
fn classic_factor(ue: f64, s: f64, d: f64) -> f64 {
    if s <= 0.0 {
        0.0
    } else {
        clamp01(0.5f64.powf(ue / s / d))
    }
}

/// One step of the depth-oblivious ratio: `R = R_parent * r_l^k`.
fn depth_oblivious_step(rp: f64, u: f64, s: f64, sib_u: f64, sib_s: f64) -> f64 {
    if s <= 0.0 {
        return f64::INFINITY;
    }
    let r = u / s;
    let sib = if sib_s > 0.0 { sib_u / sib_s } else { 0.0 };
    let rl = if sib > 0.0 { r / sib } else { 0.0 };
    if rl <= 0.0 {
        // No own usage: the best standing, whatever the ancestors did.
        return 0.0;
    }
    let (lp, ll) = (rp.ln(), rl.ln());
    let k = if lp * ll >= 0.0 || !lp.is_finite() {
        1.0
    } else {
        1.0 / (1.0 + (5.0 * lp).powi(2))
    };
    let out = rp * rl.powf(k);
    if out.is_nan() {
        0.0
    } else {
        out
    }
}

/// One association as `sshare` shows it.
#[derive(Debug, Clone, PartialEq)]
pub struct ShareRow {
    pub id: AssocId,
    /// `root/acct/.../name`.
    pub path: String,
    /// Below root (root 0): `sshare` indents the account by one space per level.
    pub depth: usize,
    /// The account (for a user row: its account).
    pub account: String,
    /// Set on user rows.
    pub user: Option<String>,
    /// `RawShares`.
    pub raw_shares: Shares,
    /// `NormShares`: the association's fraction of the machine.
    pub norm_shares: f64,
    /// `RawUsage`: decayed usage including descendants.
    pub raw_usage: f64,
    /// `NormUsage`: raw usage over the whole tree's usage.
    pub norm_usage: f64,
    /// `EffectvUsage`: Fair Tree: usage over its level's usage; classic:
    /// `UE`; depth-oblivious: the normalised usage.
    pub effective_usage: f64,
    /// `FairShare`: set on user rows under Fair Tree, on every row but
    /// root otherwise.
    pub fairshare: Option<f64>,
    /// `LevelFS` (Fair Tree; infinity without usage).
    pub level_fs: Option<f64>,
}

/// Result of [`FairShareTree::compute`], in `sshare` order (depth first;
/// users before sub-accounts).
#[derive(Debug, Clone, PartialEq, Default)]
pub struct FairShareReport {
    pub algorithm: Algorithm,
    pub rows: Vec<ShareRow>,
    by_id: BTreeMap<AssocId, usize>,
    by_path: BTreeMap<String, usize>,
    by_user: BTreeMap<(String, String), usize>,
}

impl FairShareReport {
    fn new(algorithm: Algorithm, rows: Vec<ShareRow>) -> Self {
        let mut r = FairShareReport {
            algorithm,
            rows,
            ..Default::default()
        };
        for (i, row) in r.rows.iter().enumerate() {
            r.by_id.insert(row.id, i);
            match &row.user {
                // A user and an account of one name under one parent share
                // a path: it names the user.
                Some(u) => {
                    r.by_path.insert(row.path.clone(), i);
                    r.by_user.insert((row.account.clone(), u.clone()), i);
                }
                None => {
                    r.by_path.entry(row.path.clone()).or_insert(i);
                }
            }
        }
        r
    }

    pub fn row(&self, id: AssocId) -> Option<&ShareRow> {
        self.by_id.get(&id).map(|&i| &self.rows[i])
    }

    /// By path (`root/acctA/subB/user`, leading `root/` optional).
    pub fn row_by_path(&self, path: &str) -> Option<&ShareRow> {
        let p = path.trim_matches('/');
        let full;
        let key = if p == "root" || p.starts_with("root/") {
            p
        } else {
            full = format!("root/{p}");
            &full
        };
        self.by_path.get(key).map(|&i| &self.rows[i])
    }

    pub fn user_row(&self, user: &str, account: &str) -> Option<&ShareRow> {
        self.by_user
            .get(&(account.to_string(), user.to_string()))
            .map(|&i| &self.rows[i])
    }

    /// The fair-share factor of an association given by path.
    pub fn factor_for_path(&self, path: &str) -> Option<f64> {
        self.row_by_path(path).and_then(|r| r.fairshare)
    }

    pub fn factor_for_user(&self, user: &str, account: &str) -> Option<f64> {
        self.user_row(user, account).and_then(|r| r.fairshare)
    }
}

/// Which TRES a billing weight applies to, for `MAX_TRES`.
fn is_global_tres(name: &str) -> bool {
    name.starts_with("license/") || name.starts_with("bb/")
}

/// Parse `TRESBillingWeights` (`CPU=1.0,Mem=0.25G,GRES/gpu=2`). Memory
/// weights are per MiB, or per KiB/GiB/TiB/PiB with a `K`/`G`/`T`/`P`
/// suffix (returned per MiB). Names come back lower case.
pub fn parse_billing_weights(s: &str) -> Option<Vec<(String, f64)>> {
    let mut out = Vec::new();
    for item in s.split(',').map(str::trim).filter(|i| !i.is_empty()) {
        let (k, v) = item.split_once('=')?;
        let name = k.trim().to_ascii_lowercase();
        if name.is_empty() {
            return None;
        }
        let v = v.trim();
        let (num, scale) = match v.chars().last() {
            Some(c) if c.is_ascii_alphabetic() => {
                let per_mib = match c.to_ascii_uppercase() {
                    'K' => 1024.0,
                    'M' => 1.0,
                    'G' => 1.0 / 1024.0,
                    'T' => 1.0 / (1024.0 * 1024.0),
                    'P' => 1.0 / (1024.0 * 1024.0 * 1024.0),
                    _ => return None,
                };
                (&v[..v.len() - 1], per_mib)
            }
            _ => (v, 1.0),
        };
        let w: f64 = num.trim().parse().ok()?;
        if !w.is_finite() || w < 0.0 {
            return None;
        }
        out.push((name, w * scale));
    }
    Some(out)
}

/// How [`billable_tres`] combines weighted TRES.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum BillingMode {
    /// The sum of all weighted TRES.
    #[default]
    Sum,
    /// `MAX_TRES`: the largest weighted node TRES plus the sum of global
    /// ones (licenses, burst buffers).
    MaxTres,
    /// `MAX_TRES_GRES`: like `MaxTres`, with GRES added to the sum instead
    /// of taking part in the maximum.
    MaxTresGres,
}

/// The billing value of an allocation (`alloc`: TRES name → count, memory
/// in MiB) under partition `weights` (from [`parse_billing_weights`]).
/// Without weights a job is billed its CPUs.
pub fn billable_tres(alloc: &[(String, f64)], weights: &[(String, f64)], mode: BillingMode) -> f64 {
    let count = |name: &str| -> f64 {
        alloc
            .iter()
            .filter(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| *v)
            .sum()
    };
    if weights.is_empty() {
        return count("cpu");
    }
    let (mut sum, mut max) = (0.0f64, 0.0f64);
    for (name, w) in weights {
        let v = w * count(name);
        let summed = match mode {
            BillingMode::Sum => true,
            BillingMode::MaxTres => is_global_tres(name),
            BillingMode::MaxTresGres => is_global_tres(name) || name.starts_with("gres/"),
        };
        if summed {
            sum += v;
        } else {
            max = max.max(v);
        }
    }
    sum + max
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    const DAY: i64 = 86_400;

    fn close(a: f64, b: f64, eps: f64) -> bool {
        (a - b).abs() <= eps
    }

    fn no_decay() -> UsagePolicy {
        UsagePolicy {
            half_life: 0,
            ..UsagePolicy::default()
        }
    }

    fn user(t: &FairShareTree, u: &str, a: &str) -> AssocId {
        t.find_user(u, a).unwrap()
    }

    /// The classic page's Figure 3: A (40) over B (30, user1) and C (10,
    /// users 2 and 3 with one share each); D (60) over E (25, user4) and F
    /// (35, user5). The page measures usage as a fraction of the machine
    /// (user1 0.2, user2 0.25, user4 0.25); we normalise by all usage, so
    /// the idle 30% is charged to a zero-share association under root.
    fn classic_example() -> FairShareTree {
        let mut t = FairShareTree::new(no_decay());
        t.add_account("A", "root", Shares::Value(40)).unwrap();
        t.add_account("D", "root", Shares::Value(60)).unwrap();
        t.add_account("B", "A", Shares::Value(30)).unwrap();
        t.add_account("C", "A", Shares::Value(10)).unwrap();
        t.add_account("E", "D", Shares::Value(25)).unwrap();
        t.add_account("F", "D", Shares::Value(35)).unwrap();
        t.add_account("idle", "root", Shares::Value(0)).unwrap();
        for (u, a) in [
            ("user1", "B"),
            ("user2", "C"),
            ("user3", "C"),
            ("user4", "E"),
            ("user5", "F"),
            ("nobody", "idle"),
        ] {
            t.add_user(u, a, Shares::Value(1)).unwrap();
        }
        for (u, a, usage) in [
            ("user1", "B", 2000.0),
            ("user2", "C", 2500.0),
            ("user4", "E", 2500.0),
            ("nobody", "idle", 3000.0),
        ] {
            let id = user(&t, u, a);
            t.add_usage(id, usage, 0).unwrap();
        }
        t
    }

    #[test]
    fn classic_doc_example() {
        let t = classic_example();
        let r = t.compute(Algorithm::Classic, 1.0);
        let acct = |a: &str| r.row(t.find_account(a).unwrap()).unwrap().clone();
        assert!(close(acct("A").norm_shares, 0.4, 1e-12));
        assert!(close(acct("B").norm_shares, 0.3, 1e-12));
        assert!(close(acct("A").effective_usage, 0.45, 1e-12));
        assert!(close(acct("D").effective_usage, 0.25, 1e-12));
        assert!(close(acct("B").effective_usage, 0.3875, 1e-12));
        assert!(close(acct("C").effective_usage, 0.3, 1e-12));
        assert!(close(acct("E").effective_usage, 0.25, 1e-12));
        assert!(close(acct("F").effective_usage, 0.1458, 1e-4));
        let expect = [
            ("user1", "B", 0.3, 0.3875, 0.408479),
            ("user2", "C", 0.05, 0.275, 0.022097),
            ("user3", "C", 0.05, 0.15, 0.125000),
            ("user4", "E", 0.25, 0.25, 0.500000),
            ("user5", "F", 0.35, 0.1458, 0.749154),
        ];
        for (u, a, s, ue, f) in expect {
            let row = r.user_row(u, a).unwrap();
            assert!(
                close(row.norm_shares, s, 1e-12),
                "{u} S {}",
                row.norm_shares
            );
            assert!(
                close(row.effective_usage, ue, 1e-4),
                "{u} UE {}",
                row.effective_usage
            );
            assert!(
                close(row.fairshare.unwrap(), f, 5e-7),
                "{u} F {:?}",
                row.fairshare
            );
        }
        // "user 5's job would be granted the highest scheduling priority".
        let best = r
            .rows
            .iter()
            .filter(|x| x.user.is_some() && x.user.as_deref() != Some("nobody"))
            .max_by(|a, b| a.fairshare.unwrap().total_cmp(&b.fairshare.unwrap()))
            .unwrap();
        assert_eq!(best.user.as_deref(), Some("user5"));
        // Classic has no level fair share.
        assert!(r.rows.iter().all(|x| x.level_fs.is_none()));
    }

    #[test]
    fn classic_share_normalisation_and_dampening() {
        // "if user 2 had been allocated 4 shares instead of 1, user 2 would
        // have had .08 normalized shares".
        let mut t = classic_example();
        t.set_shares(user(&t, "user2", "C"), Shares::Value(4))
            .unwrap();
        let r = t.compute(Algorithm::Classic, 1.0);
        assert!(close(
            r.user_row("user2", "C").unwrap().norm_shares,
            0.08,
            1e-12
        ));
        // F = 2^(-U/S/d): a dampening of 2 halves the exponent.
        let t = classic_example();
        let r = t.compute(Algorithm::Classic, 2.0);
        let f = r.factor_for_user("user4", "E").unwrap();
        assert!(close(f, 0.5f64.powf(0.5), 1e-12));
    }

    #[test]
    fn classic_fairshare_parent() {
        // Users with Fairshare=parent get the account's standing.
        let mut t = FairShareTree::new(no_decay());
        t.add_account("A", "root", Shares::Value(1)).unwrap();
        t.add_account("B", "root", Shares::Value(1)).unwrap();
        let u1 = t.add_user("u1", "A", Shares::Parent).unwrap();
        let u2 = t.add_user("u2", "A", Shares::Parent).unwrap();
        let v = t.add_user("v", "B", Shares::Value(1)).unwrap();
        t.add_usage(u1, 300.0, 0).unwrap();
        t.add_usage(v, 100.0, 0).unwrap();
        let r = t.compute(Algorithm::Classic, 1.0);
        let a = r.row(t.find_account("A").unwrap()).unwrap();
        for u in [u1, u2] {
            let row = r.row(u).unwrap();
            assert_eq!(row.norm_shares, a.norm_shares);
            assert_eq!(row.effective_usage, a.effective_usage);
            assert_eq!(row.fairshare, a.fairshare);
            assert_eq!(row.raw_shares.to_string(), "parent");
        }
        assert!(close(a.fairshare.unwrap(), 0.5f64.powf(0.75 / 0.5), 1e-12));
    }

    /// Two accounts of one share, two users of one share in each.
    fn two_by_two(usage: [f64; 4]) -> FairShareTree {
        let mut t = FairShareTree::new(no_decay());
        t.add_account("A", "root", Shares::Value(1)).unwrap();
        t.add_account("B", "root", Shares::Value(1)).unwrap();
        for (i, (u, a)) in [("a1", "A"), ("a2", "A"), ("b1", "B"), ("b2", "B")]
            .into_iter()
            .enumerate()
        {
            let id = t.add_user(u, a, Shares::Value(1)).unwrap();
            if usage[i] > 0.0 {
                t.add_usage(id, usage[i], 0).unwrap();
            }
        }
        t
    }

    #[test]
    fn fair_tree_ranks_depth_first_by_level_fs() {
        // Level root: A has S .5 U .75 (LF 2/3), B has S .5 U .25 (LF 2).
        // B's users first: b2 (no usage, LF inf) then b1 (LF .5); then A's:
        // a2 (S .5, U 1/3, LF 1.5) then a1 (U 2/3, LF .75).
        let t = two_by_two([20.0, 10.0, 10.0, 0.0]);
        let r = t.compute(Algorithm::FairTree, 1.0);
        let f = |u: &str, a: &str| r.factor_for_user(u, a).unwrap();
        assert_eq!(f("b2", "B"), 1.0);
        assert_eq!(f("b1", "B"), 0.75);
        assert_eq!(f("a2", "A"), 0.5);
        assert_eq!(f("a1", "A"), 0.25);
        let lf = |id: AssocId| r.row(id).unwrap().level_fs.unwrap();
        assert!(close(lf(t.find_account("A").unwrap()), 2.0 / 3.0, 1e-12));
        assert!(close(lf(t.find_account("B").unwrap()), 2.0, 1e-12));
        assert_eq!(lf(user(&t, "b2", "B")), f64::INFINITY);
        assert!(close(lf(user(&t, "a1", "A")), 0.75, 1e-12));
        // sshare's EffectvUsage under Fair Tree is the level usage.
        let a1 = r.user_row("a1", "A").unwrap();
        assert!(close(a1.effective_usage, 2.0 / 3.0, 1e-12));
        assert!(close(a1.norm_shares, 0.25, 1e-12));
        assert!(close(a1.norm_usage, 0.5, 1e-12));
        // Accounts show a level fair share but no factor.
        assert!(r
            .row(t.find_account("A").unwrap())
            .unwrap()
            .fairshare
            .is_none());
    }

    #[test]
    fn fair_tree_common_ancestor_rule() {
        // root => Acct1 => Acct12 => UserA; root => Acct1 => Acct16 =>
        // UserB: UserB ranks higher exactly when Acct16's LF is higher.
        for (ua, ub) in [(10.0, 30.0), (30.0, 10.0)] {
            let mut t = FairShareTree::new(no_decay());
            t.add_account("Acct1", "root", Shares::Value(1)).unwrap();
            t.add_account("Acct12", "Acct1", Shares::Value(1)).unwrap();
            t.add_account("Acct16", "Acct1", Shares::Value(1)).unwrap();
            let a = t.add_user("UserA", "Acct12", Shares::Value(1)).unwrap();
            let b = t.add_user("UserB", "Acct16", Shares::Value(1)).unwrap();
            t.add_usage(a, ua, 0).unwrap();
            t.add_usage(b, ub, 0).unwrap();
            let r = t.compute(Algorithm::FairTree, 1.0);
            let lf12 = r.row(t.find_account("Acct12").unwrap()).unwrap().level_fs;
            let lf16 = r.row(t.find_account("Acct16").unwrap()).unwrap().level_fs;
            let fa = r.row(a).unwrap().fairshare.unwrap();
            let fb = r.row(b).unwrap().fairshare.unwrap();
            assert_eq!(lf16 > lf12, fb > fa);
            assert_eq!(fa.max(fb), 1.0);
            assert_eq!(fa.min(fb), 0.5);
        }
    }

    #[test]
    fn fair_tree_ties() {
        // Sibling users with the same LF share a rank; ranks still count
        // every user (3, 3, 1 of 3).
        let mut t = FairShareTree::new(no_decay());
        let u1 = t.add_user("u1", "root", Shares::Value(1)).unwrap();
        let u2 = t.add_user("u2", "root", Shares::Value(1)).unwrap();
        let u3 = t.add_user("u3", "root", Shares::Value(1)).unwrap();
        t.add_usage(u3, 5.0, 0).unwrap();
        let r = t.compute(Algorithm::FairTree, 1.0);
        assert_eq!(r.row(u1).unwrap().fairshare, Some(1.0));
        assert_eq!(r.row(u2).unwrap().fairshare, Some(1.0));
        assert_eq!(r.row(u3).unwrap().fairshare, Some(1.0 / 3.0));

        // A user tied with a sibling account gets the rank of the account's
        // best user: y and x2 rank 3, x1 rank 2.
        let mut t = FairShareTree::new(no_decay());
        t.add_account("X", "root", Shares::Value(1)).unwrap();
        let y = t.add_user("y", "root", Shares::Value(1)).unwrap();
        let x1 = t.add_user("x1", "X", Shares::Value(1)).unwrap();
        let x2 = t.add_user("x2", "X", Shares::Value(1)).unwrap();
        t.add_usage(y, 10.0, 0).unwrap();
        t.add_usage(x1, 10.0, 0).unwrap();
        let r = t.compute(Algorithm::FairTree, 1.0);
        assert_eq!(r.row(y).unwrap().fairshare, Some(1.0));
        assert_eq!(r.row(x2).unwrap().fairshare, Some(1.0));
        assert_eq!(r.row(x1).unwrap().fairshare, Some(2.0 / 3.0));

        // Tied sibling accounts have their children merged: P and Q tie
        // at the root; merged, q1 (LF 1.5) > p1 (1.0) > q2 (0.5).
        let mut t = FairShareTree::new(no_decay());
        t.add_account("P", "root", Shares::Value(1)).unwrap();
        t.add_account("Q", "root", Shares::Value(1)).unwrap();
        let p1 = t.add_user("p1", "P", Shares::Value(1)).unwrap();
        let q1 = t.add_user("q1", "Q", Shares::Value(3)).unwrap();
        let q2 = t.add_user("q2", "Q", Shares::Value(1)).unwrap();
        t.add_usage(p1, 10.0, 0).unwrap();
        t.add_usage(q1, 5.0, 0).unwrap();
        t.add_usage(q2, 5.0, 0).unwrap();
        let r = t.compute(Algorithm::FairTree, 1.0);
        assert_eq!(r.row(q1).unwrap().fairshare, Some(1.0));
        assert_eq!(r.row(p1).unwrap().fairshare, Some(2.0 / 3.0));
        assert_eq!(r.row(q2).unwrap().fairshare, Some(1.0 / 3.0));
    }

    #[test]
    fn fair_tree_without_usage_everyone_ties_at_the_top() {
        let t = two_by_two([0.0; 4]);
        let r = t.compute(Algorithm::FairTree, 1.0);
        for row in r.rows.iter().filter(|r| r.user.is_some()) {
            assert_eq!(row.fairshare, Some(1.0));
            assert_eq!(row.level_fs, Some(f64::INFINITY));
        }
        // No users at all: nothing to rank, nothing panics.
        let mut t = FairShareTree::new(no_decay());
        t.add_account("A", "root", Shares::Value(0)).unwrap();
        let r = t.compute(Algorithm::FairTree, 1.0);
        assert_eq!(r.rows.len(), 2);
        assert!(r.rows.iter().all(|x| x.fairshare.is_none()));
    }

    #[test]
    fn fair_tree_zero_shares_rank_last() {
        let mut t = FairShareTree::new(no_decay());
        let z = t.add_user("zero", "root", Shares::Value(0)).unwrap();
        let o = t.add_user("one", "root", Shares::Value(1)).unwrap();
        t.add_usage(o, 100.0, 0).unwrap();
        let r = t.compute(Algorithm::FairTree, 1.0);
        assert_eq!(r.row(z).unwrap().level_fs, Some(0.0));
        assert_eq!(r.row(o).unwrap().fairshare, Some(1.0));
        assert_eq!(r.row(z).unwrap().fairshare, Some(0.5));
    }

    #[test]
    fn fair_tree_fairshare_parent() {
        // Account M has Fairshare=parent: its users compete in root's level
        // as if they were root's own; user w with Fairshare=parent under A
        // ranks with A's best user.
        let mut t = FairShareTree::new(no_decay());
        t.add_account("A", "root", Shares::Value(1)).unwrap();
        t.add_account("M", "root", Shares::Parent).unwrap();
        let m1 = t.add_user("m1", "M", Shares::Value(1)).unwrap();
        let a1 = t.add_user("a1", "A", Shares::Value(1)).unwrap();
        let a2 = t.add_user("a2", "A", Shares::Value(1)).unwrap();
        let w = t.add_user("w", "A", Shares::Parent).unwrap();
        t.add_usage(m1, 10.0, 0).unwrap();
        t.add_usage(a1, 30.0, 0).unwrap();
        t.add_usage(a2, 10.0, 0).unwrap();
        let r = t.compute(Algorithm::FairTree, 1.0);
        // Root level: A (S .5, U .8, LF .625) vs m1 (S .5, U .2, LF 2.5).
        assert!(close(r.row(m1).unwrap().level_fs.unwrap(), 2.5, 1e-12));
        assert_eq!(r.row(m1).unwrap().fairshare, Some(1.0));
        // Then A: w ties with A's best user a2 (rank 3 of 4), a1 follows
        // a2 (rank 2); w's rank number is used up after A's users.
        assert_eq!(r.row(w).unwrap().fairshare, Some(0.75));
        assert_eq!(r.row(a2).unwrap().fairshare, Some(0.75));
        assert_eq!(r.row(a1).unwrap().fairshare, Some(0.5));
        let m = r.row(t.find_account("M").unwrap()).unwrap();
        assert_eq!(m.raw_shares, Shares::Parent);
    }

    #[test]
    fn depth_oblivious_matches_classic_under_root() {
        let mut t = FairShareTree::new(no_decay());
        let a = t.add_user("a", "root", Shares::Value(1)).unwrap();
        let b = t.add_user("b", "root", Shares::Value(3)).unwrap();
        t.add_usage(a, 50.0, 0).unwrap();
        t.add_usage(b, 50.0, 0).unwrap();
        let d = t.compute(Algorithm::DepthOblivious, 1.0);
        let c = t.compute(Algorithm::Classic, 1.0);
        for id in [a, b] {
            let (x, y) = (d.row(id).unwrap().fairshare, c.row(id).unwrap().fairshare);
            assert!(close(x.unwrap(), y.unwrap(), 1e-12), "{x:?} {y:?}");
        }
        // a: U .5 over S .25 → 2^-2.
        assert!(close(d.row(a).unwrap().fairshare.unwrap(), 0.25, 1e-12));
        // Deep: a second-level user is judged by its own ratio when its
        // parent is on target (k = 1, R = r).
        let mut t = FairShareTree::new(no_decay());
        t.add_account("P", "root", Shares::Value(1)).unwrap();
        t.add_account("Q", "root", Shares::Value(1)).unwrap();
        let p1 = t.add_user("p1", "P", Shares::Value(1)).unwrap();
        let p2 = t.add_user("p2", "P", Shares::Value(1)).unwrap();
        let q1 = t.add_user("q1", "Q", Shares::Value(1)).unwrap();
        t.add_usage(p1, 40.0, 0).unwrap();
        t.add_usage(p2, 10.0, 0).unwrap();
        t.add_usage(q1, 50.0, 0).unwrap();
        let d = t.compute(Algorithm::DepthOblivious, 1.0);
        // p1: U .4, S .25 → r 1.6; siblings U .5 / S .5 → rl 1.6; R = 1.6.
        assert!(close(
            d.row(p1).unwrap().fairshare.unwrap(),
            0.5f64.powf(1.6),
            1e-12
        ));
        assert!(close(
            d.row(p2).unwrap().fairshare.unwrap(),
            0.5f64.powf(0.4),
            1e-12
        ));
        // Nothing used: everyone at 1.
        let t = two_by_two([0.0; 4]);
        let d = t.compute(Algorithm::DepthOblivious, 1.0);
        assert!(d.rows.iter().skip(1).all(|r| r.fairshare == Some(1.0)));
    }

    #[test]
    fn usage_halves_after_one_half_life() {
        let hl = 7 * DAY;
        let mut t = FairShareTree::new(UsagePolicy {
            half_life: hl as u64,
            ..UsagePolicy::default()
        });
        let u = t.add_user("u", "root", Shares::Value(1)).unwrap();
        t.add_usage(u, 1000.0, 0).unwrap();
        t.decay(hl);
        assert!(close(t.get(u).unwrap().raw_usage, 500.0, 1e-9));
        assert!(close(t.get(ROOT).unwrap().raw_usage, 500.0, 1e-9));
        // Two half-lives in steps = a quarter.
        t.decay(hl + hl / 2);
        t.decay(2 * hl);
        assert!(close(t.get(u).unwrap().raw_usage, 250.0, 1e-9));
        // Time running backwards changes nothing.
        t.decay(hl);
        assert!(close(t.get(u).unwrap().raw_usage, 250.0, 1e-9));
        // Usage reported late is decayed as if charged in time.
        t.add_usage(u, 1000.0, hl).unwrap();
        assert!(close(t.get(u).unwrap().raw_usage, 750.0, 1e-9));
        // Usage at a later time first decays the tree to that time.
        t.add_usage(u, 100.0, 3 * hl).unwrap();
        assert!(close(t.get(u).unwrap().raw_usage, 475.0, 1e-9));
        assert_eq!(t.last_decay(), Some(3 * hl));
    }

    #[test]
    fn no_decay_with_zero_half_life() {
        let mut t = FairShareTree::new(no_decay());
        let u = t.add_user("u", "root", Shares::Value(1)).unwrap();
        t.add_usage(u, 10.0, 0).unwrap();
        t.decay(1000 * DAY);
        assert_eq!(t.get(u).unwrap().raw_usage, 10.0);
    }

    #[test]
    fn reset_boundaries() {
        // Friday 2024-03-15 12:00 UTC.
        let now = 1_710_504_000;
        let b = |r: UsageReset| r.last_boundary(now, 0);
        assert_eq!(b(UsageReset::Daily), Some(1_710_460_800));
        assert_eq!(b(UsageReset::Weekly), Some(1_710_028_800)); // Sun 10th
        assert_eq!(b(UsageReset::Monthly), Some(1_709_251_200)); // 1 Mar
        assert_eq!(b(UsageReset::Quarterly), Some(1_704_067_200)); // 1 Jan
        assert_eq!(b(UsageReset::Yearly), Some(1_704_067_200));
        assert_eq!(
            UsageReset::Quarterly.last_boundary(1_719_792_000 + 5, 0),
            Some(1_719_792_000)
        );
        assert_eq!(b(UsageReset::None), None);
        // One hour east of UTC: local midnight is 23:00 UTC the day before.
        assert_eq!(
            UsageReset::Daily.last_boundary(now, 3600),
            Some(1_710_460_800 - 3600)
        );
        // Weekly at a Sunday midnight is that midnight; just before it is
        // the previous Sunday.
        assert_eq!(
            UsageReset::Weekly.last_boundary(1_710_028_800, 0),
            Some(1_710_028_800)
        );
        assert_eq!(
            UsageReset::Weekly.last_boundary(1_710_028_799, 0),
            Some(1_710_028_800 - 7 * DAY)
        );
        // Before the epoch, and at the extremes, without panicking.
        assert_eq!(UsageReset::Yearly.last_boundary(-1, 0), Some(-365 * DAY));
        let _ = UsageReset::Monthly.last_boundary(i64::MAX, 0);
        let _ = UsageReset::Monthly.last_boundary(i64::MIN, i64::MIN);
        for s in [
            "none",
            "NOW",
            "Daily",
            "weekly",
            "MONTHLY",
            "quarterly",
            "yearly",
        ] {
            assert!(UsageReset::parse(s).is_some(), "{s}");
        }
        assert_eq!(UsageReset::parse("hourly"), None);
    }

    #[test]
    fn resets_clear_usage() {
        let mut t = FairShareTree::new(UsagePolicy {
            half_life: 0,
            reset: UsageReset::Daily,
            utc_offset: 0,
        });
        let u = t.add_user("u", "root", Shares::Value(1)).unwrap();
        let day0 = 1_710_460_800;
        assert!(!t.apply_reset(day0 + 3600)); // starts the clock
        t.add_usage(u, 10.0, day0 + 3600).unwrap();
        assert!(!t.apply_reset(day0 + 7200));
        assert_eq!(t.get(u).unwrap().raw_usage, 10.0);
        assert!(t.apply_reset(day0 + DAY + 1));
        assert_eq!(t.get(u).unwrap().raw_usage, 0.0);
        assert_eq!(t.get(ROOT).unwrap().raw_usage, 0.0);
        assert!(!t.apply_reset(day0 + DAY + 2));

        // NOW clears once, and again after being configured anew.
        let mut t = FairShareTree::new(UsagePolicy {
            half_life: 0,
            reset: UsageReset::Now,
            utc_offset: 0,
        });
        let u = t.add_user("u", "root", Shares::Value(1)).unwrap();
        t.add_usage(u, 10.0, 5).unwrap();
        assert!(t.apply_reset(10));
        t.add_usage(u, 10.0, 11).unwrap();
        assert!(!t.apply_reset(12));
        t.set_policy(no_decay());
        t.set_policy(UsagePolicy {
            reset: UsageReset::Now,
            ..no_decay()
        });
        assert!(t.apply_reset(13));
        assert_eq!(t.get(u).unwrap().raw_usage, 0.0);
    }

    #[test]
    fn record_job_usage_creates_associations() {
        let mut t = FairShareTree::default();
        t.record_job_usage("alice", "physics", 4, 3600, 100)
            .unwrap();
        t.record_job_usage("bob", "physics", 2, 60, 100).unwrap();
        let a = t.find_user("alice", "physics").unwrap();
        assert_eq!(t.get(a).unwrap().raw_usage, 14_400.0);
        let acct = t.find_account("physics").unwrap();
        assert_eq!(t.get(acct).unwrap().raw_usage, 14_520.0);
        assert_eq!(t.path_of(a).as_deref(), Some("root/physics/alice"));
        assert_eq!(t.find_path("root/physics/alice"), Some(a));
        assert_eq!(t.find_path("physics/alice"), Some(a));
        assert_eq!(t.find_path("root/physics/carol"), None);
        let r = t.compute(Algorithm::FairTree, 1.0);
        assert_eq!(r.factor_for_path("root/physics/bob"), Some(1.0));
        assert_eq!(r.factor_for_path("physics/alice"), Some(0.5));
        assert_eq!(r.factor_for_path("root/physics"), None);
    }

    #[test]
    fn bad_input_is_an_error() {
        let mut t = FairShareTree::default();
        t.add_account("a", "root", Shares::Value(1)).unwrap();
        assert_eq!(
            t.add_account("a", "root", Shares::Value(1)),
            Err(FairShareError::DuplicateAccount("a".into()))
        );
        assert_eq!(
            t.add_account("b", "nope", Shares::Value(1)),
            Err(FairShareError::UnknownAccount("nope".into()))
        );
        assert!(t.add_account("x/y", "root", Shares::Value(1)).is_err());
        assert!(t.add_account("", "root", Shares::Value(1)).is_err());
        let u = t.add_user("u", "a", Shares::Value(1)).unwrap();
        assert!(t.add_user("u", "a", Shares::Value(1)).is_err());
        assert!(t.add_user("u", "zz", Shares::Value(1)).is_err());
        assert!(t.add_usage(u, -1.0, 0).is_err());
        assert!(t.add_usage(u, f64::NAN, 0).is_err());
        assert!(t.add_usage(u, f64::INFINITY, 0).is_err());
        assert!(t.add_usage(AssocId(99), 1.0, 0).is_err());
        assert!(t.set_shares(AssocId(99), Shares::Parent).is_err());
        assert_eq!(Shares::parse("Parent"), Ok(Shares::Parent));
        assert_eq!(Shares::parse(" 40 "), Ok(Shares::Value(40)));
        let e = Shares::parse("lots").unwrap_err();
        assert!(e.to_string().contains("'lots'"), "{e}");
        assert_eq!(t.get(u).unwrap().raw_usage, 0.0);
    }

    #[test]
    fn sshare_order_and_columns() {
        let mut t = FairShareTree::new(no_decay());
        t.add_account("zeta", "root", Shares::Value(1)).unwrap();
        t.add_account("alpha", "root", Shares::Value(1)).unwrap();
        t.add_account("sub", "alpha", Shares::Value(2)).unwrap();
        t.add_user("bob", "alpha", Shares::Value(1)).unwrap();
        t.add_user("amy", "alpha", Shares::Value(1)).unwrap();
        t.add_user("cat", "sub", Shares::Value(1)).unwrap();
        t.add_user("root", "root", Shares::Value(1)).unwrap();
        let r = t.compute(Algorithm::FairTree, 1.0);
        let order: Vec<(String, Option<String>, usize)> = r
            .rows
            .iter()
            .map(|x| (x.account.clone(), x.user.clone(), x.depth))
            .collect();
        let s = |x: &str| x.to_string();
        assert_eq!(
            order,
            vec![
                (s("root"), None, 0),
                (s("root"), Some(s("root")), 1),
                (s("alpha"), None, 1),
                (s("alpha"), Some(s("amy")), 2),
                (s("alpha"), Some(s("bob")), 2),
                (s("sub"), None, 2),
                (s("sub"), Some(s("cat")), 3),
                (s("zeta"), None, 1),
            ]
        );
        // An account and a user named alike under one parent: paths pick
        // the account in the middle and the user at the end.
        assert_eq!(t.find_path("root/root"), t.find_user("root", "root"));
        t.add_user("sub", "alpha", Shares::Value(1)).unwrap();
        let r = t.compute(Algorithm::FairTree, 1.0);
        let sub_user = t.find_user("sub", "alpha");
        assert_eq!(t.find_path("root/alpha/sub"), sub_user);
        assert_eq!(t.find_path("alpha/sub/cat"), t.find_user("cat", "sub"));
        assert_eq!(r.row_by_path("alpha/sub").map(|x| x.id), sub_user);
        assert_eq!(t.find_path("root/alpha/amy/x"), None);
        assert_eq!(t.find_path("root"), Some(ROOT));
        assert_eq!(t.find_path(""), Some(ROOT));
    }

    #[test]
    fn billing_doc_examples() {
        let w = parse_billing_weights("CPU=1.0,Mem=0.25G").unwrap();
        let gb = 1024.0;
        let job = |cpus: f64, mem_gb: f64| {
            vec![("cpu".to_string(), cpus), ("mem".to_string(), mem_gb * gb)]
        };
        assert!(close(
            billable_tres(&job(1.0, 60.0), &w, BillingMode::Sum),
            16.0,
            1e-9
        ));
        assert!(close(
            billable_tres(&job(16.0, 1.0), &w, BillingMode::Sum),
            16.25,
            1e-9
        ));
        assert!(close(
            billable_tres(&job(16.0, 60.0), &w, BillingMode::Sum),
            31.0,
            1e-9
        ));
        assert!(close(
            billable_tres(&job(1.0, 60.0), &w, BillingMode::MaxTres),
            15.0,
            1e-9
        ));
        assert!(close(
            billable_tres(&job(15.0, 1.0), &w, BillingMode::MaxTres),
            15.0,
            1e-9
        ));
        assert!(close(
            billable_tres(&job(16.0, 64.0), &w, BillingMode::MaxTres),
            16.0,
            1e-9
        ));
        // Global TRES are added to the maximum; MAX_TRES_GRES adds GRES too.
        let w = parse_billing_weights("cpu=1,license/matlab=5,gres/gpu=10").unwrap();
        let alloc = vec![
            ("cpu".to_string(), 4.0),
            ("license/matlab".to_string(), 1.0),
            ("gres/gpu".to_string(), 1.0),
        ];
        assert_eq!(billable_tres(&alloc, &w, BillingMode::MaxTres), 15.0);
        assert_eq!(billable_tres(&alloc, &w, BillingMode::MaxTresGres), 19.0);
        assert_eq!(billable_tres(&alloc, &[], BillingMode::Sum), 4.0);
        assert!(parse_billing_weights("cpu").is_none());
        assert!(parse_billing_weights("cpu=-1").is_none());
        assert!(parse_billing_weights("mem=1X").is_none());
    }

    fn arb_tree() -> impl Strategy<Value = FairShareTree> {
        // Up to 12 associations; each picks an earlier account as parent.
        prop::collection::vec(
            (
                any::<bool>(),
                0usize..100,
                prop_oneof![9 => (0u32..5).prop_map(Shares::Value), 1 => Just(Shares::Parent)],
                0u32..1000,
            ),
            1..12,
        )
        .prop_map(|spec| {
            let mut t = FairShareTree::new(no_decay());
            let mut accounts = vec!["root".to_string()];
            for (i, (is_user, parent, shares, usage)) in spec.into_iter().enumerate() {
                let parent = accounts[parent % accounts.len()].clone();
                let name = format!("n{i}");
                let id = if is_user {
                    t.add_user(&name, &parent, shares).unwrap()
                } else {
                    accounts.push(name.clone());
                    t.add_account(&name, &parent, shares).unwrap()
                };
                if usage > 0 {
                    t.add_usage(id, f64::from(usage), 0).unwrap();
                }
            }
            t
        })
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(300))]

        #[test]
        fn factors_in_unit_interval_and_deterministic(t in arb_tree()) {
            for algo in [Algorithm::FairTree, Algorithm::Classic, Algorithm::DepthOblivious] {
                let r = t.compute(algo, 1.0);
                prop_assert_eq!(&r, &t.compute(algo, 1.0));
                prop_assert_eq!(r.rows.len(), t.assocs().len());
                for row in &r.rows {
                    if let Some(f) = row.fairshare {
                        prop_assert!((0.0..=1.0).contains(&f), "{:?} {}", algo, f);
                    }
                    prop_assert!((0.0..=1.0 + 1e-12).contains(&row.norm_shares));
                    prop_assert!(row.effective_usage >= 0.0);
                    if row.user.is_some() {
                        prop_assert!(row.fairshare.is_some());
                    }
                }
            }
        }

        #[test]
        fn fair_tree_ranks_every_user_once(t in arb_tree()) {
            let r = t.compute(Algorithm::FairTree, 1.0);
            let users: Vec<f64> = r.rows.iter().filter_map(|x| x.user.as_ref().and(x.fairshare)).collect();
            let n = users.len() as f64;
            if !users.is_empty() {
                // Some user is on top; all factors are multiples of 1/n.
                prop_assert_eq!(users.iter().cloned().fold(0.0, f64::max), 1.0);
                for f in &users {
                    let k = f * n;
                    prop_assert!((k - k.round()).abs() < 1e-9 && k >= 1.0 - 1e-9);
                }
            }
        }

        #[test]
        fn fair_tree_sibling_accounts_order_their_users(
            ua in prop::collection::vec(0u32..100, 1..4),
            ub in prop::collection::vec(0u32..100, 1..4),
            sa in 1u32..5, sb in 1u32..5,
        ) {
            // If A's LF beats B's, every user of A beats every user of B.
            let mut t = FairShareTree::new(no_decay());
            t.add_account("A", "root", Shares::Value(sa)).unwrap();
            t.add_account("B", "root", Shares::Value(sb)).unwrap();
            let mut a_users = Vec::new();
            let mut b_users = Vec::new();
            for (i, u) in ua.iter().enumerate() {
                let id = t.add_user(&format!("a{i}"), "A", Shares::Value(1)).unwrap();
                t.add_usage(id, f64::from(*u), 0).unwrap();
                a_users.push(id);
            }
            for (i, u) in ub.iter().enumerate() {
                let id = t.add_user(&format!("b{i}"), "B", Shares::Value(1)).unwrap();
                t.add_usage(id, f64::from(*u), 0).unwrap();
                b_users.push(id);
            }
            let r = t.compute(Algorithm::FairTree, 1.0);
            let lf = |a: &str| r.row(t.find_account(a).unwrap()).unwrap().level_fs.unwrap();
            let f = |id: AssocId| r.row(id).unwrap().fairshare.unwrap();
            if lf("A") > lf("B") {
                for &a in &a_users { for &b in &b_users { prop_assert!(f(a) > f(b)); } }
            } else if lf("B") > lf("A") {
                for &a in &a_users { for &b in &b_users { prop_assert!(f(b) > f(a)); } }
            }
        }

        #[test]
        fn decay_composes(dts in prop::collection::vec(0i64..(30 * DAY), 1..6), hl in 1u64..(30 * 86_400)) {
            let mut t = FairShareTree::new(UsagePolicy { half_life: hl, ..UsagePolicy::default() });
            let u = t.add_user("u", "root", Shares::Value(1)).unwrap();
            t.add_usage(u, 1e6, 0).unwrap();
            let mut now = 0;
            for dt in &dts { now += dt; t.decay(now); }
            let expect = 1e6 * 0.5f64.powf(now as f64 / hl as f64);
            let got = t.get(u).unwrap().raw_usage;
            prop_assert!((got - expect).abs() <= 1e-6 * expect.max(1.0));
        }
    }
}
