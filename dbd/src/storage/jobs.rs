//! sacct's queries: jobs by id, user, account, partition, QOS, name, state
//! and time window, with their steps.

use super::sql::{RowExt, Q};
use super::{Result, Storage};
use slurm_proto::acct::*;
use slurm_proto::JobState;
use sqlx::any::AnyRow;
use std::collections::HashMap;

const JOB_SELECT: &str = "SELECT cluster, job_id, submit_time, array_job_id, array_task_id, \
    name, user_name, uid, group_name, gid, account, part, qos, state, exit_status, \
    eligible_time, start_time, end_time, time_limit, priority, nodelist, node_count, \
    alloc_cpus, req_cpus, req_mem, alloc_tres, req_tres, work_dir, submit_line, job_comment, \
    wckey, constraints, sched_flag, state_reason, reservation, restarts, std_out, std_err, \
    std_in, failed_node, requid, time_suspended, suspend_start, script_hash, env_hash FROM jobs WHERE 1=1";

const STEP_SELECT: &str = "SELECT job_id, job_submit, step_id, name, state, nodelist, \
    node_count, ntasks, alloc_cpus, start_time, end_time, exit_status, total_cpu_usec, \
    user_cpu_usec, sys_cpu_usec, max_rss_kib, max_rss_node, max_vmsize_kib, alloc_tres \
    FROM steps WHERE cluster=";

fn state_of(s: &str) -> JobStateWire {
    JobStateWire(JobState::parse(s).unwrap_or(JobState::Failed))
}

fn job_from_row(r: &AnyRow) -> Result<(String, AcctJob)> {
    Ok((
        r.s("cluster")?,
        AcctJob {
            job_id: r.u32("job_id")?,
            array_job_id: r.ou32("array_job_id")?,
            array_task_id: r.ou32("array_task_id")?,
            name: r.s("name")?,
            user: r.s("user_name")?,
            uid: r.u32("uid")?,
            group: r.s("group_name")?,
            gid: r.u32("gid")?,
            account: r.s("account")?,
            partition: r.s("part")?,
            qos: r.s("qos")?,
            state: state_of(&r.s("state")?),
            exit_status: r.i("exit_status")? as i32,
            submit_time: r.i("submit_time")?,
            eligible_time: r.oi("eligible_time")?,
            start_time: r.oi("start_time")?,
            end_time: r.oi("end_time")?,
            time_limit: r.ou32("time_limit")?,
            priority: r.u32("priority")?,
            nodelist: r.s("nodelist")?,
            node_count: r.u32("node_count")?,
            alloc_cpus: r.u32("alloc_cpus")?,
            req_cpus: r.u32("req_cpus")?,
            req_mem: r.u("req_mem")?,
            alloc_tres: r.s("alloc_tres")?,
            req_tres: r.s("req_tres")?,
            work_dir: r.s("work_dir")?,
            submit_line: r.s("submit_line")?,
            comment: r.s("job_comment")?,
            wckey: r.s("wckey")?,
            constraints: r.s("constraints")?,
            sched_flag: r.s("sched_flag")?,
            reason: r.s("state_reason")?,
            reservation: r.s("reservation")?,
            restarts: r.ou32("restarts")?.unwrap_or(0),
            std_out: r.s("std_out")?,
            std_err: r.s("std_err")?,
            std_in: r.s("std_in")?,
            failed_node: r.s("failed_node")?,
            requid: r.ou32("requid")?,
            suspended_secs: r.oi("time_suspended")?.unwrap_or(0),
            suspend_start: r.oi("suspend_start")?,
            script: None,
            env: None,
        },
    ))
}

fn step_from_row(r: &AnyRow) -> Result<AcctStep> {
    Ok(AcctStep {
        job_id: r.u32("job_id")?,
        job_submit: r.i("job_submit")?,
        step_id: r.u32("step_id")?,
        name: r.s("name")?,
        state: state_of(&r.s("state")?),
        nodelist: r.s("nodelist")?,
        node_count: r.u32("node_count")?,
        ntasks: r.u32("ntasks")?,
        alloc_cpus: r.u32("alloc_cpus")?,
        start_time: r.i("start_time")?,
        end_time: r.oi("end_time")?,
        exit_status: r.i("exit_status")? as i32,
        total_cpu_usec: r.u("total_cpu_usec")?,
        user_cpu_usec: r.u("user_cpu_usec")?,
        sys_cpu_usec: r.u("sys_cpu_usec")?,
        max_rss_kib: r.u("max_rss_kib")?,
        max_rss_node: r.s("max_rss_node")?,
        max_vmsize_kib: r.u("max_vmsize_kib")?,
        alloc_tres: r.s("alloc_tres")?,
    })
}

/// Steps in the order sacct lists them: batch, extern, then 0, 1, 2...
fn step_order(id: u32) -> (u8, u32) {
    if id >= 0xFFFF_FFF0 {
        (0, id)
    } else {
        (1, id)
    }
}

/// The window conditions (see [`JobQuery::states`]).
fn push_window(q: &mut Q, f: &JobQuery) {
    let (s, e) = (f.start, f.end);
    let ended_after = |q: &mut Q| {
        if let Some(s) = s {
            q.push("(end_time IS NULL OR end_time>=").bind(s).push(")");
        } else {
            q.push("1=1");
        }
    };
    if f.states.is_empty() {
        if s.is_none() && e.is_none() {
            return;
        }
        q.push(" AND ");
        ended_after(q);
        if let Some(e) = e {
            q.push(" AND submit_time<=").bind(e);
        }
        return;
    }
    if s.is_none() && e.is_none() {
        let names: Vec<&str> = f.states.iter().map(|s| s.name()).collect();
        q.and_in("state", &names);
        return;
    }
    q.push(" AND (");
    for (i, st) in f.states.iter().enumerate() {
        if i > 0 {
            q.push(" OR ");
        }
        q.push("(");
        match st {
            JobState::Pending => {
                ended_after(q);
                q.push(" AND (start_time IS NULL");
                if let Some(s) = s {
                    q.push(" OR start_time>=").bind(s);
                }
                q.push(")");
                if let Some(e) = e {
                    q.push(" AND submit_time<=").bind(e);
                }
            }
            JobState::Running | JobState::Suspended => {
                if *st == JobState::Suspended {
                    q.push("state=").bind("SUSPENDED").push(" AND ");
                }
                q.push("start_time IS NOT NULL AND ");
                ended_after(q);
                if let Some(e) = e {
                    q.push(" AND start_time<=").bind(e);
                }
            }
            done => {
                q.push("state=")
                    .bind(done.name())
                    .push(" AND end_time IS NOT NULL");
                if let Some(s) = s {
                    q.push(" AND end_time>=").bind(s);
                }
                if let Some(e) = e {
                    q.push(" AND end_time<=").bind(e);
                }
            }
        }
        q.push(")");
    }
    q.push(")");
}

/// Only each job id's last record (by submit time, the order rows come
/// in): a requeued job's earlier runs, or an earlier job of the same id,
/// are for `sacct -D`.
pub fn keep_last_records(rows: &mut Vec<JobRow>) {
    let mut last: HashMap<(String, u32), usize> = HashMap::new();
    for (i, r) in rows.iter().enumerate() {
        last.insert((r.cluster.clone(), r.job.job_id), i);
    }
    let mut i = 0;
    rows.retain(|r| {
        i += 1;
        last.get(&(r.cluster.clone(), r.job.job_id)) == Some(&(i - 1))
    });
}

impl Storage {
    /// `sacctmgr show runawayjobs`, fixed: each named job of the cluster
    /// still pending, running or suspended here ends COMPLETED at the
    /// latest of its submit, eligible and start times (its open steps
    /// too), and usage is rolled up again from the earliest submission.
    /// Jobs already ended are left alone. Answers the jobs ended.
    pub async fn fix_runaway(&self, f: &FixRunaway) -> Result<Vec<String>> {
        let cluster = super::admin::check_name("cluster", &f.cluster, 64)?;
        let _w = self.write_lock.lock().await;
        let mut tx = self.write_tx().await?;
        let b = self.backend;
        let open = ["PENDING", "RUNNING", "SUSPENDED"];
        let mut fixed = Vec::new();
        let mut earliest: Option<i64> = None;
        for j in &f.jobs {
            let mut q = Q::new(
                "SELECT submit_time, eligible_time, start_time FROM jobs WHERE end_time IS NULL AND cluster=",
            );
            q.bind(cluster.as_str())
                .push(" AND job_id=")
                .bind(j.job_id)
                .push(" AND submit_time=")
                .bind(j.submit_time);
            q.and_in("state", &open);
            let Some(r) = q.fetch_optional(b, &mut *tx).await? else {
                continue;
            };
            let end = [r.oi("eligible_time")?, r.oi("start_time")?]
                .into_iter()
                .flatten()
                .fold(r.i("submit_time")?, i64::max);
            let mut q = Q::new("UPDATE jobs SET state='COMPLETED', end_time=");
            q.bind(end)
                .push(" WHERE cluster=")
                .bind(cluster.as_str())
                .push(" AND job_id=")
                .bind(j.job_id)
                .push(" AND submit_time=")
                .bind(j.submit_time);
            q.execute(b, &mut *tx).await?;
            let mut q = Q::new("UPDATE steps SET state='COMPLETED', end_time=");
            q.bind(end)
                .push(" WHERE end_time IS NULL AND cluster=")
                .bind(cluster.as_str())
                .push(" AND job_id=")
                .bind(j.job_id)
                .push(" AND job_submit=")
                .bind(j.submit_time);
            q.execute(b, &mut *tx).await?;
            fixed.push(j.job_id.to_string());
            earliest = Some(earliest.map_or(j.submit_time, |e: i64| e.min(j.submit_time)));
        }
        if let Some(t) = earliest {
            let h = super::time::floor_hour(t);
            let mut q = Q::new("UPDATE rollup_state SET hour_done=");
            q.bind(h)
                .push(" WHERE cluster=")
                .bind(cluster.as_str())
                .push(" AND hour_done>")
                .bind(h);
            q.execute(b, &mut *tx).await?;
        }
        tx.commit().await?;
        Ok(fixed)
    }

    pub async fn jobs(&self, f: &JobQuery) -> Result<Vec<JobRow>> {
        let mut q = Q::new(JOB_SELECT);
        let lower = |v: &[String]| -> Vec<String> {
            v.iter().map(|s| s.trim().to_ascii_lowercase()).collect()
        };
        q.and_in("cluster", &lower(&f.clusters));
        if !f.job_ids.is_empty() {
            q.push(" AND (1=0");
            q.push(" OR job_id IN ")
                .bind_tuple(f.job_ids.iter().map(|&i| i.into()).collect());
            q.push(" OR array_job_id IN ")
                .bind_tuple(f.job_ids.iter().map(|&i| i.into()).collect());
            q.push(")");
        }
        q.and_in("user_name", &f.users);
        q.and_in("uid", &f.uids);
        q.and_in("account", &lower(&f.accounts));
        q.and_in("part", &f.partitions);
        q.and_in("qos", &lower(&f.qos));
        q.and_in("name", &f.names);
        push_window(&mut q, f);
        q.push(" ORDER BY cluster, submit_time, job_id");
        if let Some(n) = f.limit {
            q.push(" LIMIT ").bind(n);
        }
        let rows = q.fetch_all(self.backend, &self.pool).await?;
        // Scripts and environments, when asked for: each content fetched once.
        let mut hashes: Vec<(Option<String>, Option<String>)> = Vec::new();
        if f.with_script || f.with_env {
            for r in &rows {
                hashes.push((
                    r.os("script_hash")?.filter(|_| f.with_script),
                    r.os("env_hash")?.filter(|_| f.with_env),
                ));
            }
        }
        let mut out: Vec<JobRow> = rows
            .iter()
            .map(|r| {
                job_from_row(r).map(|(cluster, job)| JobRow {
                    cluster,
                    job,
                    steps: Vec::new(),
                })
            })
            .collect::<Result<_>>()?;
        if !hashes.is_empty() {
            let mut wanted: Vec<String> = hashes
                .iter()
                .flat_map(|(s, e)| s.iter().chain(e.iter()).cloned())
                .collect();
            wanted.sort();
            wanted.dedup();
            let mut bodies: HashMap<String, String> = HashMap::new();
            for chunk in wanted.chunks(1000) {
                let mut q = Q::new("SELECT hash, body FROM job_texts WHERE 1=1");
                q.and_in("hash", chunk);
                for r in q.fetch_all(self.backend, &self.pool).await? {
                    bodies.insert(r.s("hash")?, r.s("body")?);
                }
            }
            for (row, (s, e)) in out.iter_mut().zip(&hashes) {
                row.job.script = s.as_ref().and_then(|h| bodies.get(h).cloned());
                row.job.env = e.as_ref().and_then(|h| bodies.get(h).cloned());
            }
        }
        if f.with_steps && !out.is_empty() {
            let mut by_cluster: HashMap<String, Vec<usize>> = HashMap::new();
            for (i, r) in out.iter().enumerate() {
                by_cluster.entry(r.cluster.clone()).or_default().push(i);
            }
            for (cluster, idx) in by_cluster {
                let mut at: HashMap<(u32, i64), usize> = HashMap::new();
                for &i in &idx {
                    at.insert((out[i].job.job_id, out[i].job.submit_time), i);
                }
                let ids: Vec<u32> = {
                    let mut v: Vec<u32> = idx.iter().map(|&i| out[i].job.job_id).collect();
                    v.sort_unstable();
                    v.dedup();
                    v
                };
                for chunk in ids.chunks(1000) {
                    let mut q = Q::new(STEP_SELECT);
                    q.bind(&cluster).and_in("job_id", chunk);
                    for r in q.fetch_all(self.backend, &self.pool).await? {
                        let s = step_from_row(&r)?;
                        if let Some(&i) = at.get(&(s.job_id, s.job_submit)) {
                            out[i].steps.push(s);
                        }
                    }
                }
            }
            for r in &mut out {
                r.steps.sort_by_key(|s| step_order(s.step_id));
            }
        }
        if !f.duplicates {
            keep_last_records(&mut out);
        }
        Ok(out)
    }
}
