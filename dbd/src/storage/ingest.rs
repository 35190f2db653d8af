//! The controller's accounting records, applied exactly once.
//!
//! Each record carries `(cluster, epoch, seq)`. Per outbox `(cluster, epoch)`,
//! `acct_seq.applied_through` says every seq up to it is applied;
//! `records_seen` holds applied seqs above it (a batch that arrives after a gap). A batch is filtered against both,
//! the new records are applied (jobs and steps as multi-row upserts, the last
//! record of a job in the batch winning), the seqs are recorded, and the
//! mark advances over every contiguous seq, all in one transaction: resending
//! any batch, whole or in part, changes nothing.
//!
//! Records that describe the past (a job that started before the last rollup)
//! move the cluster's rollup mark back so the next rollup recomputes those hours.

use super::admin::check_name;
use super::sql::{RowExt, Val, Q};
use super::time::floor_hour;
use super::{Result, Storage, StorageError};
use slurm_proto::acct::*;
use sqlx::AnyConnection;
use std::collections::{BTreeMap, HashMap, HashSet};

/// What a batch did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct IngestOutcome {
    pub applied: u32,
    pub duplicates: u32,
    pub clusters: Vec<ClusterAck>,
}

const JOB_KEY: [&str; 3] = ["cluster", "job_id", "submit_time"];
const JOB_COLS: [&str; 44] = [
    "cluster",
    "job_id",
    "submit_time",
    "array_job_id",
    "array_task_id",
    "name",
    "user_name",
    "uid",
    "group_name",
    "gid",
    "account",
    "part",
    "qos",
    "state",
    "exit_status",
    "eligible_time",
    "start_time",
    "end_time",
    "time_limit",
    "priority",
    "nodelist",
    "node_count",
    "alloc_cpus",
    "req_cpus",
    "req_mem",
    "alloc_tres",
    "req_tres",
    "work_dir",
    "submit_line",
    "job_comment",
    "wckey",
    "constraints",
    "sched_flag",
    "state_reason",
    "reservation",
    "restarts",
    "std_out",
    "std_err",
    "std_in",
    "failed_node",
    "requid",
    "time_suspended",
    "suspend_start",
    "modified",
];

const STEP_KEY: [&str; 4] = ["cluster", "job_id", "job_submit", "step_id"];
const STEP_COLS: [&str; 20] = [
    "cluster",
    "job_id",
    "job_submit",
    "step_id",
    "name",
    "state",
    "nodelist",
    "node_count",
    "ntasks",
    "alloc_cpus",
    "start_time",
    "end_time",
    "exit_status",
    "total_cpu_usec",
    "user_cpu_usec",
    "sys_cpu_usec",
    "max_rss_kib",
    "max_rss_node",
    "max_vmsize_kib",
    "alloc_tres",
];

/// Rows per multi-row statement (31 columns × 500 stays under every
/// backend's bind limit).
const CHUNK: usize = 500;

/// `a,b,c` → `a,b,c` compressed to a hostlist (`n[1-3]`); expressions pass.
pub fn normalize_nodelist(s: &str) -> String {
    let s = s.trim();
    if s.contains(',') && !s.contains('[') {
        let names: Vec<&str> = s.split(',').filter(|x| !x.is_empty()).collect();
        slurm_common::hostlist::compress(&names)
    } else {
        s.to_string()
    }
}

fn too_long(what: &str, s: &str, max: usize) -> Result<()> {
    if s.len() > max {
        return Err(StorageError::Invalid(format!(
            "{what} '{s}' is longer than {max} characters"
        )));
    }
    Ok(())
}

/// Times must be Unix seconds between 1970 and the year 5000.
fn check_time(what: &str, t: Option<i64>) -> Result<()> {
    match t {
        Some(t) if !(0..=95_617_584_000).contains(&t) => Err(StorageError::Invalid(format!(
            "{what} {t} is not a plausible Unix time"
        ))),
        _ => Ok(()),
    }
}

fn check_record(r: &SeqRecord) -> Result<()> {
    if r.seq == 0 || r.seq > i64::MAX as u64 {
        return Err(StorageError::Invalid(format!(
            "record of cluster '{}': sequence numbers start at 1 (got {})",
            r.cluster, r.seq
        )));
    }
    match &r.record {
        AcctRecord::JobStart(j) | AcctRecord::JobEnd(j) => {
            check_time("submit time", Some(j.submit_time))?;
            check_time("eligible time", j.eligible_time)?;
            check_time("start time", j.start_time)?;
            check_time("end time", j.end_time)?;
            too_long("user", &j.user, 128)?;
            too_long("group", &j.group, 128)?;
            too_long("account", &j.account, 128)?;
            too_long("partition", &j.partition, 64)?;
            too_long("reservation", &j.reservation, 128)?;
            too_long("failed node", &j.failed_node, 128)?;
            too_long("scheduler flag", &j.sched_flag, 32)?;
            too_long("QOS", &j.qos, 64)
        }
        AcctRecord::StepStart(s) | AcctRecord::StepEnd(s) => {
            check_time("job submit time", Some(s.job_submit))?;
            check_time("step start time", Some(s.start_time))?;
            check_time("step end time", s.end_time)?;
            too_long("node", &s.max_rss_node, 128)
        }
        AcctRecord::NodeState(e) => {
            if e.node.is_empty() {
                return Err(StorageError::Invalid(
                    "node event without a node name".into(),
                ));
            }
            check_time("event time", Some(e.time))?;
            too_long("node", &e.node, 128)?;
            too_long("node state", &e.state, 64)
        }
        AcctRecord::ClusterInfo(c) => {
            check_time("cluster time", Some(c.time))?;
            too_long("host", &c.control_host, 255)
        }
        AcctRecord::Resv(r) => {
            if r.name.is_empty() {
                return Err(StorageError::Invalid(
                    "reservation record without a name".into(),
                ));
            }
            check_time("reservation start time", Some(r.time_start))?;
            check_time("reservation end time", Some(r.time_end))?;
            check_time("reservation's earlier start time", r.prev_start)?;
            too_long("reservation", &r.name, 128)
        }
    }
}

/// One controller outbox: `(cluster, epoch)`.
struct Outbox<'a> {
    cluster: &'a str,
    epoch: u64,
}

impl Outbox<'_> {
    /// Epochs are any u64: stored bit for bit in a BIGINT.
    fn epoch_val(&self) -> Val {
        Val::I(Some(self.epoch as i64))
    }

    /// Append `cluster=? AND epoch=?`.
    fn key<'q>(&self, q: &'q mut Q) -> &'q mut Q {
        q.push("cluster=")
            .bind(self.cluster)
            .push(" AND epoch=")
            .bind(self.epoch_val())
    }
}

fn job_vals(cluster: &str, j: &AcctJob, now: i64) -> Vec<Val> {
    vec![
        cluster.into(),
        j.job_id.into(),
        j.submit_time.into(),
        j.array_job_id.into(),
        j.array_task_id.into(),
        j.name.as_str().into(),
        j.user.as_str().into(),
        j.uid.into(),
        j.group.as_str().into(),
        j.gid.into(),
        j.account.to_ascii_lowercase().into(),
        j.partition.as_str().into(),
        j.qos.to_ascii_lowercase().into(),
        j.state.0.name().into(),
        j.exit_status.into(),
        j.eligible_time.into(),
        j.start_time.into(),
        j.end_time.into(),
        j.time_limit.into(),
        j.priority.into(),
        normalize_nodelist(&j.nodelist).into(),
        j.node_count.into(),
        j.alloc_cpus.into(),
        j.req_cpus.into(),
        j.req_mem.into(),
        j.alloc_tres.as_str().into(),
        j.req_tres.as_str().into(),
        j.work_dir.as_str().into(),
        j.submit_line.as_str().into(),
        j.comment.as_str().into(),
        j.wckey.as_str().into(),
        j.constraints.as_str().into(),
        j.sched_flag.as_str().into(),
        j.reason.as_str().into(),
        j.reservation.as_str().into(),
        j.restarts.into(),
        j.std_out.as_str().into(),
        j.std_err.as_str().into(),
        j.std_in.as_str().into(),
        j.failed_node.as_str().into(),
        j.requid.into(),
        j.suspended_secs.into(),
        j.suspend_start.into(),
        now.into(),
    ]
}

/// The scripts and environments records carry: each content by its
/// SHA-256, and which job points at which.
#[derive(Default)]
struct JobTexts<'a> {
    bodies: BTreeMap<String, &'a str>,
    #[allow(clippy::type_complexity)]
    jobs: Vec<((u32, i64), Option<String>, Option<String>)>,
}

fn job_texts<'a>(recs: &'a [SeqRecord]) -> JobTexts<'a> {
    use sha2::{Digest, Sha256};
    let mut t = JobTexts::default();
    for r in recs {
        let (AcctRecord::JobStart(j) | AcctRecord::JobEnd(j)) = &r.record else {
            continue;
        };
        if j.script.is_none() && j.env.is_none() {
            continue;
        }
        let mut keep = |text: &'a Option<String>| {
            text.as_deref().map(|body| {
                let h = hex::encode(Sha256::digest(body.as_bytes()));
                t.bodies.insert(h.clone(), body);
                h
            })
        };
        let (script, env) = (keep(&j.script), keep(&j.env));
        t.jobs.push(((j.job_id, j.submit_time), script, env));
    }
    t
}

fn step_vals(cluster: &str, s: &AcctStep) -> Vec<Val> {
    vec![
        cluster.into(),
        s.job_id.into(),
        s.job_submit.into(),
        s.step_id.into(),
        s.name.as_str().into(),
        s.state.0.name().into(),
        normalize_nodelist(&s.nodelist).into(),
        s.node_count.into(),
        s.ntasks.into(),
        s.alloc_cpus.into(),
        s.start_time.into(),
        s.end_time.into(),
        s.exit_status.into(),
        s.total_cpu_usec.into(),
        s.user_cpu_usec.into(),
        s.sys_cpu_usec.into(),
        s.max_rss_kib.into(),
        s.max_rss_node.as_str().into(),
        s.max_vmsize_kib.into(),
        s.alloc_tres.as_str().into(),
    ]
}

impl Storage {
    /// Apply a batch of records (any clusters, any order) exactly once.
    pub async fn ingest(&self, records: Vec<SeqRecord>) -> Result<IngestOutcome> {
        let mut by_outbox: BTreeMap<(String, u64), Vec<SeqRecord>> = BTreeMap::new();
        for mut r in records {
            r.cluster = check_name("cluster", &r.cluster, 64)?;
            check_record(&r)?;
            by_outbox
                .entry((r.cluster.clone(), r.epoch))
                .or_default()
                .push(r);
        }
        let _w = self.write_lock.lock().await;
        let mut tx = self.write_tx().await?;
        let now = slurm_common::auth::now();
        let mut out = IngestOutcome::default();
        for ((cluster, epoch), mut recs) in by_outbox {
            let total = recs.len();
            recs.sort_by_key(|r| r.seq);
            recs.dedup_by_key(|r| r.seq);
            let ob = Outbox {
                cluster: &cluster,
                epoch,
            };
            let through = self.lock_seq(&mut tx, &ob, now).await?;
            recs.retain(|r| r.seq > through);
            let seqs: Vec<u64> = recs.iter().map(|r| r.seq).collect();
            let seen = self.seen(&mut tx, &ob, &seqs).await?;
            recs.retain(|r| !seen.contains(&r.seq));
            self.apply(&mut tx, &cluster, &recs, now).await?;
            let new_through = self
                .advance(&mut tx, &ob, through, recs.iter().map(|r| r.seq))
                .await?;
            out.applied += recs.len() as u32;
            out.duplicates += (total - recs.len()) as u32;
            out.clusters.push(ClusterAck {
                cluster,
                epoch,
                through: new_through,
            });
        }
        tx.commit().await?;
        Ok(out)
    }

    /// The outbox's applied-through mark, its row locked for this
    /// transaction (created, with the cluster, on first contact).
    async fn lock_seq(&self, c: &mut AnyConnection, ob: &Outbox<'_>, now: i64) -> Result<u64> {
        let b = self.backend;
        let cluster = ob.cluster;
        let mut q = Q::new("INSERT INTO acct_seq (cluster, epoch, applied_through) VALUES (");
        q.bind(cluster)
            .push(",")
            .bind(ob.epoch_val())
            .push(", 0)")
            .push(&b.if_absent(&["cluster", "epoch"]));
        if q.execute(b, &mut *c).await? > 0 {
            let mut q = Q::new("SELECT name FROM clusters WHERE name=");
            q.bind(cluster);
            if q.fetch_optional(b, &mut *c).await?.is_none() {
                tracing::info!("cluster '{cluster}' registered by its first accounting record");
                let cl = ClusterRec {
                    name: cluster.to_string(),
                    ..Default::default()
                };
                self.create_cluster(c, &cl, now).await?;
            }
        }
        let mut q = Q::new("SELECT applied_through FROM acct_seq WHERE ");
        ob.key(&mut q).push(b.for_update());
        let row = q.fetch_optional(b, &mut *c).await?.ok_or_else(|| {
            StorageError::NotFound(format!("no sequence row for cluster {cluster}"))
        })?;
        Ok(row.u("applied_through")?)
    }

    async fn seen(
        &self,
        c: &mut AnyConnection,
        ob: &Outbox<'_>,
        seqs: &[u64],
    ) -> Result<HashSet<u64>> {
        let mut out = HashSet::new();
        for chunk in seqs.chunks(1000) {
            let mut q = Q::new("SELECT seq FROM records_seen WHERE ");
            ob.key(&mut q).and_in("seq", chunk);
            for r in q.fetch_all(self.backend, &mut *c).await? {
                out.insert(r.u("seq")?);
            }
        }
        Ok(out)
    }

    /// Record `applied` (ascending) and move the mark over every contiguous seq.
    async fn advance(
        &self,
        c: &mut AnyConnection,
        ob: &Outbox<'_>,
        through: u64,
        applied: impl Iterator<Item = u64>,
    ) -> Result<u64> {
        let b = self.backend;
        let mut mark = through;
        let mut rest = Vec::new();
        for s in applied {
            if rest.is_empty() && s == mark + 1 {
                mark = s;
            } else {
                rest.push(s);
            }
        }
        for chunk in rest.chunks(CHUNK) {
            let mut q = Q::new("INSERT INTO records_seen (cluster, epoch, seq) VALUES ");
            for (i, s) in chunk.iter().enumerate() {
                if i > 0 {
                    q.push(",");
                }
                q.bind_tuple(vec![ob.cluster.into(), ob.epoch_val(), (*s).into()]);
            }
            q.push(&b.if_absent(&["cluster", "epoch", "seq"]));
            q.execute(b, &mut *c).await?;
        }
        // Earlier out-of-order seqs may now be contiguous with the mark.
        let mut q = Q::new("SELECT seq FROM records_seen WHERE ");
        ob.key(&mut q)
            .push(" AND seq>")
            .bind(mark)
            .push(" ORDER BY seq");
        let mut absorbed = false;
        for r in q.fetch_all(b, &mut *c).await? {
            let s = r.u("seq")?;
            if s != mark + 1 {
                break;
            }
            mark = s;
            absorbed = true;
        }
        if absorbed {
            let mut q = Q::new("DELETE FROM records_seen WHERE ");
            ob.key(&mut q).push(" AND seq<=").bind(mark);
            q.execute(b, &mut *c).await?;
        }
        if mark != through {
            let mut q = Q::new("UPDATE acct_seq SET applied_through=");
            q.bind(mark).push(" WHERE ");
            ob.key(&mut q);
            q.execute(b, &mut *c).await?;
        }
        Ok(mark)
    }

    async fn apply(
        &self,
        c: &mut AnyConnection,
        cluster: &str,
        recs: &[SeqRecord],
        now: i64,
    ) -> Result<()> {
        let b = self.backend;
        // Last record per job / step wins (they carry the whole record).
        let mut jobs: Vec<&AcctJob> = Vec::new();
        let mut job_at: HashMap<(u32, i64), usize> = HashMap::new();
        let mut steps: Vec<&AcctStep> = Vec::new();
        let mut step_at: HashMap<(u32, i64, u32), usize> = HashMap::new();
        let mut dirty: Option<i64> = None;
        let mut touch = |t: i64| dirty = Some(dirty.map_or(t, |d: i64| d.min(t)));
        for r in recs {
            match &r.record {
                AcctRecord::JobStart(j) | AcctRecord::JobEnd(j) => {
                    if let Some(s) = j.start_time {
                        touch(s);
                    }
                    match job_at.get(&(j.job_id, j.submit_time)) {
                        Some(&i) => jobs[i] = j,
                        None => {
                            job_at.insert((j.job_id, j.submit_time), jobs.len());
                            jobs.push(j);
                        }
                    }
                }
                AcctRecord::StepStart(s) | AcctRecord::StepEnd(s) => {
                    match step_at.get(&(s.job_id, s.job_submit, s.step_id)) {
                        Some(&i) => steps[i] = s,
                        None => {
                            step_at.insert((s.job_id, s.job_submit, s.step_id), steps.len());
                            steps.push(s);
                        }
                    }
                }
                AcctRecord::NodeState(e) => touch(e.time),
                AcctRecord::ClusterInfo(ci) => touch(ci.time),
                AcctRecord::Resv(_) => {}
            }
        }
        let texts = job_texts(recs);
        let job_update: Vec<&str> = JOB_COLS[3..].to_vec();
        for chunk in jobs.chunks(CHUNK) {
            let mut q = Q::new(&format!(
                "INSERT INTO jobs ({}) VALUES ",
                JOB_COLS.join(",")
            ));
            for (i, j) in chunk.iter().enumerate() {
                if i > 0 {
                    q.push(",");
                }
                q.bind_tuple(job_vals(cluster, j, now));
            }
            q.push(&b.upsert(&JOB_KEY, &job_update));
            q.execute(b, &mut *c).await?;
        }
        self.store_texts(c, cluster, &texts).await?;
        let step_update: Vec<&str> = STEP_COLS[4..].to_vec();
        for chunk in steps.chunks(CHUNK) {
            let mut q = Q::new(&format!(
                "INSERT INTO steps ({}) VALUES ",
                STEP_COLS.join(",")
            ));
            for (i, s) in chunk.iter().enumerate() {
                if i > 0 {
                    q.push(",");
                }
                q.bind_tuple(step_vals(cluster, s));
            }
            q.push(&b.upsert(&STEP_KEY, &step_update));
            q.execute(b, &mut *c).await?;
        }
        // Events change state row by row, in seq order.
        for r in recs {
            match &r.record {
                AcctRecord::NodeState(e) => self.node_event(c, cluster, e).await?,
                AcctRecord::ClusterInfo(ci) => self.cluster_info(c, cluster, ci).await?,
                AcctRecord::Resv(r) => self.resv_record(c, cluster, r).await?,
                _ => {}
            }
        }
        if let Some(t) = dirty {
            let h = floor_hour(t);
            let mut q = Q::new("UPDATE rollup_state SET hour_done=");
            q.bind(h)
                .push(" WHERE cluster=")
                .bind(cluster)
                .push(" AND hour_done>")
                .bind(h);
            q.execute(b, &mut *c).await?;
        }
        Ok(())
    }

    /// Keep each script and environment once (by content) and point their
    /// jobs at them (the job rows exist: they were upserted first).
    async fn store_texts(
        &self,
        c: &mut AnyConnection,
        cluster: &str,
        t: &JobTexts<'_>,
    ) -> Result<()> {
        let b = self.backend;
        // Statements of at most about 1 MiB of text (MySQL's packet limit),
        // a larger text alone.
        const STATEMENT_TEXT: usize = 1 << 20;
        let mut chunks: Vec<Vec<(&String, &str)>> = vec![Vec::new()];
        let mut size = 0;
        for (h, body) in &t.bodies {
            let last = chunks.last_mut().expect("one chunk");
            if !last.is_empty() && (size + body.len() > STATEMENT_TEXT || last.len() == CHUNK) {
                chunks.push(Vec::new());
                size = 0;
            }
            size += body.len();
            chunks.last_mut().expect("one chunk").push((h, body));
        }
        for chunk in chunks.iter().filter(|c| !c.is_empty()) {
            let mut q = Q::new("INSERT INTO job_texts (hash, body) VALUES ");
            for (i, (h, body)) in chunk.iter().enumerate() {
                if i > 0 {
                    q.push(",");
                }
                q.bind_tuple(vec![h.as_str().into(), (*body).into()]);
            }
            q.push(&b.if_absent(&["hash"]));
            q.execute(b, &mut *c).await?;
        }
        for ((job_id, submit), script, env) in &t.jobs {
            for (col, hash) in [("script_hash", script), ("env_hash", env)] {
                let Some(h) = hash else { continue };
                let mut q = Q::new(&format!("UPDATE jobs SET {col}="));
                q.bind(h.as_str())
                    .push(" WHERE cluster=")
                    .bind(cluster)
                    .push(" AND job_id=")
                    .bind(*job_id)
                    .push(" AND submit_time=")
                    .bind(*submit);
                q.execute(b, &mut *c).await?;
            }
        }
        Ok(())
    }

    /// Close the node's open event at `time` (if any); returns its (state, reason).
    async fn open_event(
        &self,
        c: &mut AnyConnection,
        cluster: &str,
        node: &str,
    ) -> Result<Option<(i64, String, Option<String>, i64)>> {
        let mut q = Q::new(
            "SELECT time_start, state, reason, cpus FROM node_events WHERE time_end IS NULL AND cluster=",
        );
        q.bind(cluster).push(" AND node=").bind(node);
        q.push(" ORDER BY time_start DESC");
        Ok(match q.fetch_all(self.backend, &mut *c).await?.first() {
            Some(r) => Some((
                r.i("time_start")?,
                r.s("state")?,
                r.os("reason")?,
                r.i("cpus")?,
            )),
            None => None,
        })
    }

    async fn close_events(
        &self,
        c: &mut AnyConnection,
        cluster: &str,
        node: &str,
        time: i64,
    ) -> Result<()> {
        let mut q = Q::new("UPDATE node_events SET time_end=");
        q.bind(time)
            .push(" WHERE time_end IS NULL AND cluster=")
            .bind(cluster)
            .push(" AND node=")
            .bind(node)
            .push(" AND time_start<=")
            .bind(time);
        q.execute(self.backend, c).await?;
        Ok(())
    }

    #[allow(clippy::too_many_arguments)]
    async fn open_new_event(
        &self,
        c: &mut AnyConnection,
        cluster: &str,
        node: &str,
        time: i64,
        state: &str,
        reason: Option<&str>,
        uid: Option<u32>,
        cpus: u32,
    ) -> Result<()> {
        let b = self.backend;
        let mut q = Q::new(
            "INSERT INTO node_events (cluster, node, time_start, time_end, state, reason, reason_uid, cpus) VALUES ",
        );
        q.bind_tuple(vec![
            cluster.into(),
            node.into(),
            time.into(),
            Val::I(None),
            state.into(),
            reason.into(),
            uid.into(),
            cpus.into(),
        ]);
        q.push(&b.upsert(
            &["cluster", "node", "time_start"],
            &["time_end", "state", "reason", "reason_uid", "cpus"],
        ));
        q.execute(b, c).await?;
        Ok(())
    }

    async fn node_event(&self, c: &mut AnyConnection, cluster: &str, e: &NodeEvent) -> Result<()> {
        let open = self.open_event(c, cluster, &e.node).await?;
        if !e.is_outage() {
            if open.is_some() {
                self.close_events(c, cluster, &e.node, e.time).await?;
            }
            return Ok(());
        }
        if let Some((_, state, reason, _)) = &open {
            if *state == e.state && *reason == e.reason {
                return Ok(());
            }
        }
        self.close_events(c, cluster, &e.node, e.time).await?;
        self.open_new_event(
            c,
            cluster,
            &e.node,
            e.time,
            &e.state.to_ascii_uppercase(),
            e.reason.as_deref(),
            e.reason_uid,
            e.cpus,
        )
        .await
    }

    /// The cluster's size: kept on its row, and as a cluster event (node '')
    /// each time its CPU count changes, so rollups know the size per hour.
    async fn cluster_info(
        &self,
        c: &mut AnyConnection,
        cluster: &str,
        ci: &ClusterInfo,
    ) -> Result<()> {
        let mut q = Q::new("UPDATE clusters SET control_host=");
        q.bind(ci.control_host.as_str())
            .push(", control_port=")
            .bind(u32::from(ci.control_port))
            .push(", cpus=")
            .bind(ci.cpus)
            .push(", nodes=")
            .bind(ci.nodes)
            .push(", tres=")
            .bind(ci.tres.as_str())
            .push(" WHERE name=")
            .bind(cluster);
        q.execute(self.backend, &mut *c).await?;
        if let Some((_, _, _, cpus)) = self.open_event(c, cluster, "").await? {
            if cpus == i64::from(ci.cpus) {
                return Ok(());
            }
        }
        self.close_events(c, cluster, "", ci.time).await?;
        self.open_new_event(
            c,
            cluster,
            "",
            ci.time,
            "CLUSTER",
            Some(&ci.tres),
            None,
            ci.cpus,
        )
        .await
    }
}
