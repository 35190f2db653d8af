//! `scontrol`: show and change controller state.
//!
//! Supported: `show job|node|partition|config|hostnames|hostlist[sorted]`,
//! `update NodeName=... State=... Reason=...`, `update JobId=... TimeLimit=...
//! Nice=... Name=...`, `hold`, `uhold`, `release`, `requeue`, `requeuehold`,
//! `suspend`, `resume`, `ping`, `version`, the `-o`/`--oneliner`, `-d`, `-Q`, `-v`, `-V` options and
//! an interactive mode reading commands from stdin. Commands, entities and
//! keys are case-insensitive and may be abbreviated while unambiguous.
//!
//! The record layouts ([`show_job`], [`show_node`], [`show_partition`],
//! [`show_config`]) are pure and checked against real Slurm output below; the
//! command itself runs against a [`Controller`] so its messages and exit codes
//! are tested without a cluster.
//!
//! Choices where we lack Slurm's data: `AllocNode:Sid=<submit host>:*` (no
//! session id is recorded), `Scheduler=Main`, `uhold` sends the same hold as
//! `hold` (the controller decides user vs admin hold from the credential).

use crate::fmt::{self, Tz};
use slurm_common::hostlist;
use slurm_common::timefmt::{format_duration_hms, format_limit_scontrol, parse_time_limit};
use slurm_proto::{
    ConfigDump, JobRecord, JobUpdate, NodeRecord, NodeStateRequest, PartitionRecord, RebootNodes,
    RequestBody, Response, SlurmError,
};

/// How records are rendered.
#[derive(Debug, Clone, Copy)]
pub struct ShowOpts {
    pub now: i64,
    pub tz: Tz,
    /// One line per record (`-o`).
    pub oneliner: bool,
}

fn finish(lines: Vec<String>, oneliner: bool) -> String {
    if oneliner {
        format!("{}\n", lines.join(" "))
    } else {
        format!("{}\n\n", lines.join("\n   "))
    }
}

fn null_str(s: &str) -> String {
    if s.is_empty() {
        "(null)".to_string()
    } else {
        s.to_string()
    }
}

/// `scontrol show slurmd`: a node daemon's account of itself, in Slurm's
/// layout.
pub fn show_slurmd(s: &slurm_proto::SlurmdStatus, tz: Tz) -> String {
    let steps = if s.steps.is_empty() {
        "NONE".to_string()
    } else {
        s.steps.join(", ")
    };
    let last = s
        .last_ctld_msg
        .map_or_else(|| "NONE".to_string(), |t| tz.timestamp(t));
    let rows = [
        ("Active Steps", steps),
        ("Actual CPUs", s.cpus.to_string()),
        ("Actual Boards", s.boards.to_string()),
        ("Actual sockets", s.sockets.to_string()),
        ("Actual cores", s.cores.to_string()),
        ("Actual threads per core", s.threads.to_string()),
        ("Actual real memory", format!("{} MB", s.real_memory)),
        ("Actual temp disk space", format!("{} MB", s.tmp_disk)),
        ("Boot time", tz.timestamp(s.boot_time)),
        ("Hostname", s.hostname.clone()),
        ("Last slurmctld msg time", last),
        ("Slurmd PID", s.pid.to_string()),
        ("Slurmd Debug", s.debug.to_string()),
        (
            "Slurmd Logfile",
            s.log_file.clone().unwrap_or_else(|| "(null)".into()),
        ),
        ("Version", s.version.clone()),
    ];
    rows.iter()
        .map(|(k, v)| format!("{k:<24} = {v}\n"))
        .collect()
}

/// `scontrol show step` for one step of `job`.
pub fn show_step(job: &JobRecord, st: &slurm_proto::StepRecord, o: &ShowOpts) -> String {
    let id = if st.step_id == slurm_proto::BATCH_STEP {
        format!("{}.batch", job.display_id())
    } else if st.step_id == slurm_proto::EXTERN_STEP {
        format!("{}.extern", job.display_id())
    } else {
        format!("{}.{}", job.display_id(), st.step_id)
    };
    let cpus = st.alloc_cpus();
    let lines = vec![
        format!(
            "StepId={id} UserId={} StartTime={} TimeLimit={}",
            job.user_id,
            o.tz.timestamp(st.start_time),
            slurm_common::timefmt::format_limit_scontrol(st.time_limit)
        ),
        format!(
            "State={} Partition={} NodeList={}",
            st.state.name(),
            job.partition,
            hostlist::compress(&st.nodes)
        ),
        format!(
            "Nodes={} CPUs={cpus} Tasks={} Name={} Network=(null)",
            st.nodes.len(),
            st.ntasks,
            st.name
        ),
        // (Memory in Slurm's units: 1G, not 1024M.)
        format!(
            "TRES={}",
            st.tres(&job.alloc)
                .split(',')
                .map(|kv| {
                    match kv
                        .strip_prefix("mem=")
                        .and_then(|m| m.strip_suffix('M'))
                        .and_then(|m| m.parse::<u64>().ok())
                    {
                        Some(m) => format!("mem={}", fmt::mem_str(m)),
                        None => kv.to_string(),
                    }
                })
                .collect::<Vec<_>>()
                .join(",")
        ),
        "ResvPorts=(null)".to_string(),
        "CPUFreqReq=Default Dist=Block".to_string(),
    ];
    finish(lines, o.oneliner)
}

/// `scontrol show job` for one job. `node_mem` is the memory per node a
/// pending job that asked for none would get (its requested TRES shows it).
/// A count asked for, or Slurm's `*` for none.
fn star(n: Option<u32>) -> String {
    n.map_or_else(|| "*".to_string(), |n| n.to_string())
}

pub fn show_job(job: &JobRecord, node_mem: Option<u64>, o: &ShowOpts) -> String {
    let tz = o.tz;
    let (code, sig) = job.exit_code_pair();
    let num_nodes = if job.alloc.nodes.is_empty() {
        match job.desc.max_nodes {
            Some(m) if m > job.min_nodes.max(1) => format!("{}-{}", job.min_nodes.max(1), m),
            _ => job.min_nodes.max(1).to_string(),
        }
    } else {
        job.alloc.nodes.len().to_string()
    };
    let min_mem = match job.desc.mem_per_cpu {
        Some(m) => format!("MinMemoryCPU={}", fmt::mem_str(m)),
        None => format!("MinMemoryNode={}", fmt::job_min_memory(job)),
    };
    let (out, err, input) = fmt::job_std_paths(job);
    let mut lines = vec![
        match &job.array {
            Some(a) => format!(
                "JobId={} ArrayJobId={} ArrayTaskId={} JobName={}",
                job.job_id, a.job_id, a.task_id, job.name
            ),
            None => format!("JobId={} JobName={}", job.job_id, job.name),
        },
        format!(
            "UserId={}({}) GroupId={}({}) MCS_label=N/A",
            job.user_name, job.user_id, job.group_name, job.group_id
        ),
        format!(
            "Priority={} Nice={} Account={} QOS={}",
            job.priority,
            job.desc.nice.unwrap_or(0),
            fmt::or_null(&job.account),
            job.qos
        ),
        format!(
            "JobState={} Reason={} Dependency={}",
            fmt::job_state_long(job),
            job.reason,
            job.dependency.as_deref().unwrap_or("(null)")
        ),
        format!(
            "Requeue={} Restarts={} BatchFlag={} Reboot=0 ExitCode={code}:{sig}",
            u8::from(job.desc.requeue.unwrap_or(true)),
            job.restarts,
            u8::from(job.batch)
        ),
        format!(
            "RunTime={} TimeLimit={} TimeMin={}",
            format_duration_hms(fmt::job_run_secs(job, o.now)),
            format_limit_scontrol(job.time_limit),
            job.desc
                .time_min
                .map_or("N/A".to_string(), |m| format_limit_scontrol(Some(m)))
        ),
        format!(
            "SubmitTime={} EligibleTime={}",
            tz.timestamp(job.submit_time),
            tz.opt_timestamp(job.eligible_time, "Unknown")
        ),
        format!(
            "AccrueTime={}",
            tz.opt_timestamp(job.eligible_time.filter(|t| *t <= o.now), "Unknown")
        ),
        format!(
            "StartTime={} EndTime={} Deadline={}",
            tz.opt_timestamp(fmt::job_start(job, o.now), "Unknown"),
            tz.opt_timestamp(fmt::job_end(job, o.now), "Unknown"),
            tz.opt_timestamp(job.desc.deadline, "N/A")
        ),
        format!(
            "SuspendTime={} SecsPreSuspend={} LastSchedEval={} Scheduler=Main",
            tz.opt_timestamp(job.suspend_time, "None"),
            job.secs_pre_suspend(),
            tz.opt_timestamp(job.last_sched_eval, "Unknown")
        ),
        format!(
            "Partition={} AllocNode:Sid={}:*",
            job.partition,
            null_str(&job.desc.submit_host)
        ),
        format!(
            "ReqNodeList={} ExcNodeList={}",
            null_str(&hostlist::compress(&job.desc.req_nodes)),
            null_str(&hostlist::compress(&job.desc.exc_nodes))
        ),
        format!("NodeList={}", hostlist::compress(&job.alloc.nodes)),
    ];
    if let Some(h) = &job.batch_host {
        lines.push(format!("BatchHost={h}"));
    }
    lines.extend([
        format!(
            "NumNodes={num_nodes} NumCPUs={} NumTasks={} CPUs/Task={} ReqB:S:C:T=0:0:{}:{}",
            fmt::job_num_cpus(job),
            job.num_tasks,
            fmt::job_cpus_per_task(job),
            star(job.desc.cores_per_socket),
            star(job.desc.threads_per_core),
        ),
        format!("TRES={}", fmt::job_tres(job, node_mem)),
        format!(
            "Socks/Node={} NtasksPerN:B:S:C={}:0:{}:{} CoreSpec=*",
            star(job.desc.sockets_per_node),
            job.desc.ntasks_per_node.unwrap_or(0),
            star(job.desc.ntasks_per_socket),
            star(job.desc.ntasks_per_core),
        ),
        format!(
            "MinCPUsNode={} {min_mem} MinTmpDiskNode={}",
            fmt::job_min_cpus_node(job),
            job.desc.tmp_disk.map_or("0".to_string(), fmt::mem_str)
        ),
        format!(
            "Features={} DelayBoot=00:00:00",
            job.desc.constraint.as_deref().unwrap_or("(null)")
        ),
        format!(
            "OverSubscribe={} Contiguous={} Licenses={} Network=(null)",
            if job.desc.exclusive { "NO" } else { "OK" },
            u8::from(job.desc.contiguous),
            job.desc.licenses.as_deref().unwrap_or("(null)")
        ),
        format!(
            "Command={}",
            null_str(job.desc.command.as_deref().unwrap_or(""))
        ),
        format!("WorkDir={}", job.desc.work_dir),
    ]);
    if let Some(c) = job.desc.admin_comment.as_deref().filter(|c| !c.is_empty()) {
        lines.push(format!("AdminComment={c}"));
    }
    if let Some(c) = job.desc.comment.as_deref().filter(|c| !c.is_empty()) {
        lines.push(format!("Comment={c}"));
    }
    if let Some(x) = job.desc.extra.as_deref().filter(|x| !x.is_empty()) {
        lines.push(format!("Extra={x}"));
    }
    if let Some(w) = job.desc.wckey.as_deref().filter(|w| !w.is_empty()) {
        lines.push(format!("WCKey={w}"));
    }
    lines.extend([
        format!("StdErr={err}"),
        format!("StdIn={input}"),
        format!("StdOut={out}"),
        "Power=".to_string(),
    ]);
    if let Some(t) = slurm_proto::jobenv::job_tres_per_task(&job.desc) {
        lines.push(format!("TresPerTask={t}"));
    }
    if let Some(k) = job.desc.ntasks_per_gpu {
        lines.push(format!("NtasksPerTRES={k}"));
    }
    lines.push(String::new());
    finish(lines, o.oneliner)
}

fn list_or_null(v: &[String]) -> String {
    if v.is_empty() {
        "(null)".to_string()
    } else {
        v.join(",")
    }
}

/// `scontrol show node` for one node.
pub fn show_node(n: &NodeRecord, o: &ShowOpts) -> String {
    let tz = o.tz;
    let mut first = format!("NodeName={} ", n.name);
    if let Some(a) = &n.arch {
        first.push_str(&format!("Arch={a} "));
    }
    first.push_str(&format!("CoresPerSocket={} ", n.cores_per_socket));
    let mut lines = vec![
        first,
        format!(
            "CPUAlloc={} CPUEfctv={} CPUTot={} CPULoad={}",
            n.alloc_cpus,
            n.cpus,
            n.cpus,
            n.cpu_load
                .map(|l| format!("{l:.2}"))
                .unwrap_or_else(|| "N/A".to_string())
        ),
        format!("AvailableFeatures={}", list_or_null(&n.features)),
        format!("ActiveFeatures={}", list_or_null(&n.features)),
        format!("Gres={}", list_or_null(&n.gres)),
        format!(
            "NodeAddr={} NodeHostName={} Version={}",
            n.addr,
            n.hostname,
            n.version.as_deref().unwrap_or("(null)")
        ),
    ];
    if let Some(os) = &n.os {
        lines.push(format!("OS={os} "));
    }
    lines.extend([
        format!(
            "RealMemory={} AllocMem={} FreeMem={} Sockets={} Boards={}",
            n.real_memory,
            n.alloc_mem,
            n.free_mem
                .map(|m| m.to_string())
                .unwrap_or_else(|| "N/A".to_string()),
            n.sockets,
            n.boards
        ),
        format!(
            "State={} ThreadsPerCore={} TmpDisk={} Weight={} Owner=N/A MCS_label=N/A",
            n.state_long(),
            n.threads_per_core,
            n.tmp_disk,
            n.weight
        ),
    ]);
    if !n.partitions.is_empty() {
        lines.push(format!("Partitions={} ", n.partitions.join(",")));
    }
    let mut alloc_tres = Vec::new();
    if n.alloc_cpus > 0 {
        alloc_tres.push(format!("cpu={}", n.alloc_cpus));
    }
    if n.alloc_mem > 0 {
        alloc_tres.push(format!("mem={}", fmt::mem_str(n.alloc_mem)));
    }
    let mut cfg_tres = vec![format!("cpu={}", n.cpus)];
    if n.real_memory > 0 {
        cfg_tres.push(format!("mem={}", fmt::mem_str(n.real_memory)));
    }
    cfg_tres.push(format!("billing={}", n.cpus));
    lines.extend([
        format!(
            "BootTime={} SlurmdStartTime={}",
            tz.opt_timestamp(n.boot_time, "None"),
            tz.opt_timestamp(n.slurmd_start_time, "None")
        ),
        format!("LastBusyTime={}", tz.opt_timestamp(n.last_busy, "Unknown")),
        format!("CfgTRES={}", cfg_tres.join(",")),
        format!("AllocTRES={}", alloc_tres.join(",")),
        "CapWatts=n/a".to_string(),
        "CurrentWatts=0 AveWatts=0".to_string(),
        "ExtSensorsJoules=n/s ExtSensorsWatts=0 ExtSensorsTemp=n/s".to_string(),
    ]);
    if let Some(r) = n.reason.as_deref().filter(|r| !r.is_empty()) {
        let who = n
            .reason_uid
            .map(slurm_common::users::user_name_or_id)
            .unwrap_or_else(|| "slurm".to_string());
        lines.push(format!(
            "Reason={r} [{who}@{}]",
            tz.opt_timestamp(n.reason_time, "Unknown")
        ));
    }
    finish(lines, o.oneliner)
}

fn yes_no(b: bool) -> &'static str {
    if b {
        "YES"
    } else {
        "NO"
    }
}

/// `scontrol show partition` for one partition.
pub fn show_partition(p: &PartitionRecord, o: &ShowOpts) -> String {
    let all = |v: &Option<String>| v.clone().unwrap_or_else(|| "ALL".to_string());
    let def_mem = match p.def_mem_per_cpu {
        Some(m) => format!("DefMemPerCPU={m}"),
        None => "DefMemPerNode=UNLIMITED".to_string(),
    };
    let max_mem = match p.max_mem_per_node {
        Some(m) => m.to_string(),
        None => "UNLIMITED".to_string(),
    };
    let lines = vec![
        format!("PartitionName={}", p.name),
        format!(
            "AllowGroups={} AllowAccounts={} AllowQos={}",
            all(&p.allow_groups),
            all(&p.allow_accounts),
            all(&p.allow_qos)
        ),
        format!("AllocNodes=ALL Default={} QoS=N/A", yes_no(p.default)),
        format!(
            "DefaultTime={} DisableRootJobs=NO ExclusiveUser=NO GraceTime=0 Hidden={}",
            match p.default_time {
                None => "NONE".to_string(),
                t => format_limit_scontrol(t),
            },
            yes_no(p.hidden)
        ),
        format!(
            "MaxNodes={} MaxTime={} MinNodes={} LLN=NO MaxCPUsPerNode=UNLIMITED",
            p.max_nodes
                .map(|m| m.to_string())
                .unwrap_or_else(|| "UNLIMITED".to_string()),
            format_limit_scontrol(p.max_time),
            p.min_nodes
        ),
        format!("Nodes={}", null_str(&p.nodes_expr)),
        format!(
            "PriorityJobFactor={} PriorityTier={} RootOnly=NO ReqResv=NO OverSubscribe={}",
            p.priority_job_factor, p.priority_tier, p.oversubscribe
        ),
        "OverTimeLimit=NONE PreemptMode=OFF".to_string(),
        format!(
            "State={} TotalCPUs={} TotalNodes={} SelectTypeParameters=NONE",
            p.state.name(),
            p.total_cpus,
            p.nodes.len()
        ),
        "JobDefaults=(null)".to_string(),
        format!("{def_mem} MaxMemPerNode={max_mem}"),
        format!(
            "TRES=cpu={},mem={},node={},billing={}",
            p.total_cpus,
            fmt::mem_str(p.total_mem),
            p.nodes.len(),
            p.total_cpus
        ),
    ];
    finish(lines, o.oneliner)
}

/// `scontrol show config`.
pub fn show_config(c: &ConfigDump, now: i64, tz: Tz) -> String {
    let mut out = format!("Configuration data as of {}\n", tz.timestamp(now));
    for (k, v) in &c.entries {
        out.push_str(&format!("{k:<23} = {v}\n"));
    }
    out
}

// ------------------------------------------------------------------ command

/// A failed controller call: Slurm's message, and whether it was a network failure.
#[derive(Debug, Clone)]
pub struct CallFail {
    pub message: String,
    pub net: bool,
}

/// What the command talks to: the real controller, or a fake in tests.
pub trait Controller {
    fn call(&self, body: RequestBody) -> Result<Response, CallFail>;
    /// [`Controller::call`], an error answer given back as one (with its
    /// detail) rather than as a failure.
    fn call_answer(&self, body: RequestBody) -> Result<Response, CallFail> {
        self.call(body)
    }
    /// The controllers' configured host names, primary first (`ping`).
    fn controllers(&self) -> Vec<String>;
    /// Send `body` to controller `i` alone, in control or not (`ping`,
    /// `takeover`).
    fn call_at(&self, i: usize, body: RequestBody) -> Result<Response, CallFail>;
    /// Send `body` to the node daemon of `node` (by default the node this
    /// host runs); the node's name and its answer.
    fn node_call(
        &self,
        node: Option<&str>,
        body: RequestBody,
    ) -> Result<(String, Response), CallFail> {
        let _ = (node, body);
        Err(CallFail {
            message: "no node daemon to ask".into(),
            net: true,
        })
    }
    /// The slurm.conf read, and this host's names (`show daemons`,
    /// `show aliases`).
    fn local_conf(&self) -> Option<(&slurm_common::conf::SlurmConf, Vec<String>)> {
        None
    }
}

/// A failed call as scontrol reports it.
fn call_fail(e: crate::common::CallError) -> CallFail {
    CallFail {
        message: crate::squeue::call_error_text(&e),
        net: matches!(e, crate::common::CallError::Net(_)),
    }
}

struct Real {
    client: slurm_common::net::Client,
    host: String,
    conf: slurm_common::conf::SlurmConf,
}

impl Real {
    /// The node of slurm.conf this host runs (its NodeHostname).
    fn local_node(&self) -> Result<String, CallFail> {
        let me = slurm_common::users::hostname();
        let short = me.split('.').next().unwrap_or(&me).to_string();
        let here: Vec<&str> = self
            .conf
            .nodes
            .iter()
            .filter(|n| n.node_hostname == me || n.node_hostname == short)
            .map(|n| n.name.as_str())
            .collect();
        match here.as_slice() {
            [one] => Ok(one.to_string()),
            [] => Err(CallFail {
                message: format!("no node of slurm.conf runs on this host ({me}): name one"),
                net: false,
            }),
            many => Err(CallFail {
                message: format!(
                    "several nodes run on this host ({}): name one",
                    many.join(",")
                ),
                net: false,
            }),
        }
    }
}

impl Controller for Real {
    fn call(&self, body: RequestBody) -> Result<Response, CallFail> {
        crate::common::call(&self.client, body).map_err(call_fail)
    }
    fn call_answer(&self, body: RequestBody) -> Result<Response, CallFail> {
        match crate::common::call(&self.client, body) {
            Err(crate::common::CallError::Rpc(e)) => Ok(Response::Error(e)),
            other => other.map_err(call_fail),
        }
    }
    fn controllers(&self) -> Vec<String> {
        match self.conf.slurmctld_hosts.as_slice() {
            [] => vec![self.host.clone()],
            hosts => hosts.iter().map(|h| h.name.clone()).collect(),
        }
    }
    fn call_at(&self, i: usize, body: RequestBody) -> Result<Response, CallFail> {
        let Some(client) = self.client.only(i) else {
            return Err(CallFail {
                message: format!("no controller {i} in slurm.conf"),
                net: false,
            });
        };
        crate::common::call(&client, body).map_err(call_fail)
    }
    fn node_call(
        &self,
        node: Option<&str>,
        body: RequestBody,
    ) -> Result<(String, Response), CallFail> {
        let name = match node {
            Some(n) => n.to_string(),
            None => self.local_node()?,
        };
        let fail = |message: String| CallFail {
            message,
            net: false,
        };
        let n = self
            .conf
            .node(&name)
            .ok_or_else(|| fail(format!("Invalid node name specified: {name}")))?;
        let addr = format!(
            "{}:{}",
            n.node_addr,
            n.port.unwrap_or(self.conf.slurmd_port)
        );
        let call = slurm_proto::grpc::NodeCall::from_body(body)
            .map_err(|b| fail(format!("not a node daemon's request: {b:?}")))?;
        let creds = slurm_common::auth::CredSource::from_conf(&self.conf);
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(|e| fail(e.to_string()))?;
        let r = rt.block_on(async {
            let ch = slurm_common::grpc::kept(&addr, &name)?;
            let sign = |b: &_| creds.credential(b);
            slurm_common::grpc::call_node(
                &ch,
                &name,
                call,
                sign,
                std::time::Duration::from_secs(10),
            )
            .await
        });
        r.map(|r| (name.clone(), r)).map_err(|e| CallFail {
            message: format!("cannot reach the node daemon of {name}: {e}"),
            net: true,
        })
    }
    fn local_conf(&self) -> Option<(&slurm_common::conf::SlurmConf, Vec<String>)> {
        let me = slurm_common::users::hostname();
        let short = me.split('.').next().unwrap_or(&me).to_string();
        Some((&self.conf, vec![me, short]))
    }
}

/// `scontrol listpids [JOBID[.STEPID]] [NODENAME]`: the processes of jobs
/// on this node (or on NODENAME, for several node daemons on one host),
/// as the node daemon knows them.
fn cmd_listpids(rest: &[String], ctl: &dyn Controller, out: &mut Out) -> i32 {
    let (mut job_id, mut step_id, mut node) = (None, None, None);
    let mut words = rest.iter();
    if let Some(w) = words.next() {
        if w != "*" {
            let (j, st) = match w.split_once('.') {
                Some((j, st)) => (j, Some(st)),
                None => (w.as_str(), None),
            };
            match (j.parse::<u32>(), st.map(str::parse::<u32>)) {
                (Ok(j), None) => job_id = Some(j),
                (Ok(j), Some(Ok(st))) => {
                    job_id = Some(j);
                    step_id = Some(st);
                }
                _ => {
                    out.err(format!("scontrol: error: Invalid job id specified: {w}"));
                    return 1;
                }
            }
        }
    }
    if let Some(n) = words.next() {
        node = Some(n.as_str());
    }
    if let Some(extra) = words.next() {
        out.err(format!(
            "scontrol: error: too many arguments for listpids: {extra}"
        ));
        return 1;
    }
    let mut procs = match ctl.node_call(node, RequestBody::ListPids { job_id, step_id }) {
        Ok((_, Response::Pids(p))) => p,
        Ok((_, Response::Error(e))) => {
            out.err(format!("scontrol: error: {}", e.error.message()));
            return 1;
        }
        Ok(_) => {
            out.err("scontrol: error: Unexpected message received");
            return 1;
        }
        Err(f) => {
            out.err(format!("scontrol: error: {}", f.message));
            return 1;
        }
    };
    if procs.is_empty() {
        out.err("No job steps exist on this node.");
        return 1;
    }
    // By job, the batch step first, then the steps in order; each task
    // before what it started.
    let order = |p: &slurm_proto::JobProcess| {
        (
            p.job_id,
            p.step.parse::<u64>().map(|n| n + 1).unwrap_or(0),
            p.local_id.is_none(),
            p.local_id,
            p.pid,
        )
    };
    procs.sort_by_key(order);
    out.stdout
        .push_str("PID      JOBID    STEPID   LOCALID GLOBALID\n");
    let id = |v: Option<u32>| v.map_or("-".to_string(), |v| v.to_string());
    for p in procs {
        out.stdout.push_str(&format!(
            "{:<8} {:<8} {:<8} {:<7} {}\n",
            p.pid,
            p.job_id,
            p.step,
            id(p.local_id),
            id(p.global_id)
        ));
    }
    0
}

/// The processes of jobs on this node (or NODENAME) the caller may see,
/// as the node daemon knows them; `Err` with the exit code once said.
fn local_processes(
    node: Option<&str>,
    ctl: &dyn Controller,
    out: &mut Out,
) -> Result<Vec<slurm_proto::JobProcess>, i32> {
    let body = RequestBody::ListPids {
        job_id: None,
        step_id: None,
    };
    match ctl.node_call(node, body) {
        Ok((_, Response::Pids(p))) => Ok(p),
        Ok((_, Response::Error(e))) => {
            out.err(format!("scontrol: error: {}", e.error.message()));
            Err(1)
        }
        Ok(_) => {
            out.err("scontrol: error: Unexpected message received");
            Err(1)
        }
        Err(f) => {
            out.err(format!("scontrol: error: {}", f.message));
            Err(1)
        }
    }
}

/// `scontrol listjobs [NODENAME]` and `liststeps [NODENAME]`: the jobs, or
/// the steps, running on this node (those of the caller's jobs, or every
/// one for root), as the node daemon knows them.
fn cmd_list_local(cmd: &str, rest: &[String], ctl: &dyn Controller, out: &mut Out) -> i32 {
    if rest.len() > 1 {
        out.err(format!("too many arguments for keyword:{cmd}"));
        return 1;
    }
    let procs = match local_processes(rest.first().map(String::as_str), ctl, out) {
        Ok(p) => p,
        Err(rc) => return rc,
    };
    // Steps in order: the batch step first, then by number.
    let order = |s: &str| s.parse::<u64>().map_or(0, |n| n + 1);
    let mut steps: Vec<(u32, String)> = procs.into_iter().map(|p| (p.job_id, p.step)).collect();
    steps.sort_by(|a, b| (a.0, order(&a.1), &a.1).cmp(&(b.0, order(&b.1), &b.1)));
    steps.dedup();
    if steps.is_empty() {
        out.err("No slurmstepd's found on this node");
        return 1;
    }
    if cmd == "listjobs" {
        out.stdout.push_str("JOBID\n");
        let mut jobs: Vec<u32> = steps.iter().map(|s| s.0).collect();
        jobs.dedup();
        for j in jobs {
            out.stdout.push_str(&format!("{j:<8}\n"));
        }
    } else {
        out.stdout
            .push_str(&format!("{:<8} {:<8}\n", "JOBID", "STEPID"));
        for (j, s) in steps {
            out.stdout.push_str(&format!("{j:<8} {s:<8}\n"));
        }
    }
    0
}

/// `scontrol pidinfo PID [NODENAME]`: the job and step a process of this
/// node (or of NODENAME, for several node daemons on one host) belongs to,
/// one of the caller's or any for root, and when the job ends.
fn cmd_pidinfo(rest: &[String], ctl: &dyn Controller, now: i64, tz: Tz, out: &mut Out) -> i32 {
    let pid = match rest {
        [p] | [p, _] => match p.parse::<i32>() {
            Ok(p) if p > 0 => p,
            _ => {
                out.err("Invalid pidinfo value");
                return 1;
            }
        },
        _ => {
            out.err("one arguments required for keyword:pidinfo");
            return 1;
        }
    };
    let procs = match local_processes(rest.get(1).map(String::as_str), ctl, out) {
        Ok(p) => p,
        Err(rc) => return rc,
    };
    let Some(p) = procs.into_iter().find(|p| p.pid == pid) else {
        out.err("Failed to locate job for requested pid");
        return 1;
    };
    let Some(jobs) = load_jobs(ctl, out) else {
        return 1;
    };
    let job = jobs.iter().find(|j| j.job_id == p.job_id);
    let Some(end) = job.and_then(expected_end) else {
        out.err("Failed to get job end time: Invalid job id specified");
        return 1;
    };
    out.stdout.push_str(&format!(
        "Slurm JobId={}.{} ends at {}\nJob remaining time is {} seconds\n",
        p.job_id,
        p.step,
        tz.header_time(end),
        (end - now).max(0)
    ));
    0
}

/// When a running job is to end: its start plus its time limit (a year
/// for no limit, as Slurm counts it).
fn expected_end(j: &JobRecord) -> Option<i64> {
    let start = j.start_time?;
    let secs = j.time_limit.map_or(365 * 86_400, |m| i64::from(m) * 60);
    Some(start + j.suspended_secs.max(0) + secs)
}

/// `scontrol completing`: jobs still completing, with how long since they
/// ended and their nodes still completing or down.
fn cmd_completing(rest: &[String], ctl: &dyn Controller, now: i64, tz: Tz, out: &mut Out) -> i32 {
    if !rest.is_empty() {
        out.err("too many arguments for keyword:completing");
        return 1;
    }
    let Some(mut jobs) = load_jobs(ctl, out) else {
        return 1;
    };
    let Some(nodes) = load_nodes(ctl, out) else {
        return 1;
    };
    let down: std::collections::HashSet<&str> = nodes
        .iter()
        .filter(|n| n.base_state == slurm_proto::NodeBaseState::Down)
        .map(|n| n.name.as_str())
        .collect();
    jobs.sort_by_key(|j| j.job_id);
    for j in jobs.iter().filter(|j| j.completing) {
        let end = j.end_time.unwrap_or(now);
        let mut line = format!(
            "JobId={} EndTime={} CompletingTime={} ",
            j.job_id,
            tz.timestamp(end),
            slurm_common::timefmt::format_duration_hms((now - end).max(0))
        );
        let comp: Vec<String> = j
            .completing_nodes
            .iter()
            .filter(|n| !down.contains(n.as_str()))
            .cloned()
            .collect();
        let dead: Vec<String> = j
            .alloc
            .nodes
            .iter()
            .filter(|n| down.contains(n.as_str()))
            .cloned()
            .collect();
        if !comp.is_empty() {
            let c = hostlist::compress(&hostlist::sort_hosts(&comp));
            line.push_str(&format!("Nodes(COMPLETING)={c} "));
        }
        if !dead.is_empty() {
            let d = hostlist::compress(&hostlist::sort_hosts(&dead));
            line.push_str(&format!("Nodes(DOWN)={d} "));
        }
        out.stdout.push_str(&line);
        out.stdout.push('\n');
    }
    0
}

/// `scontrol show daemons`: which daemons slurm.conf says run on this host.
fn show_daemons(ctl: &dyn Controller, out: &mut Out) -> i32 {
    let Some((conf, names)) = ctl.local_conf() else {
        out.err("scontrol: error: no slurm.conf to read");
        return 1;
    };
    let mine = |h: &str| names.iter().any(|n| n == h) || h.eq_ignore_ascii_case("localhost");
    let ctld = conf
        .slurmctld_hosts
        .iter()
        .any(|c| c.name.split(',').any(mine));
    let slurmd = conf
        .nodes
        .iter()
        .any(|n| mine(&n.name) || mine(&n.node_hostname));
    let mut list = String::new();
    if ctld {
        list.push_str("slurmctld ");
    }
    if slurmd {
        list.push_str("slurmd");
    }
    out.stdout.push_str(&list);
    out.stdout.push('\n');
    0
}

/// `scontrol show aliases [HOST]`: the nodes whose NodeHostname is this
/// host (or HOST): several node daemons on one machine.
fn show_aliases(host: Option<&str>, ctl: &dyn Controller, out: &mut Out) -> i32 {
    let Some((conf, names)) = ctl.local_conf() else {
        out.err("scontrol: error: no slurm.conf to read");
        return 1;
    };
    let names = match host {
        Some(h) => vec![h.to_string()],
        None => names,
    };
    let nodes: Vec<String> = conf
        .nodes
        .iter()
        .filter(|n| names.contains(&n.node_hostname))
        .map(|n| n.name.clone())
        .collect();
    if nodes.is_empty() {
        out.err(format!(
            "{} is not a NodeHostname of this cluster",
            names.first().map_or("this host", String::as_str)
        ));
        return 1;
    }
    out.stdout.push_str(&hostlist::compress(&nodes));
    out.stdout.push('\n');
    0
}

/// An error as scontrol's `_printf_error` prints it: `WHAT:message`.
fn printf_error(what: &str, r: Result<Response, CallFail>, out: &mut Out) -> i32 {
    match r {
        Ok(Response::Ok) => 0,
        Ok(Response::Error(e)) => {
            out.err(format!("{what}:{}", e.error.message()));
            1
        }
        Ok(_) => {
            out.err(format!("{what}:Unexpected message received"));
            1
        }
        Err(f) => {
            out.err(format!("{what}:{}", f.message));
            1
        }
    }
}

/// `scontrol schedloglevel LEVEL`: scheduler logging (`SlurmSchedLogFile`)
/// off or on: `0`/`disable` or `1`/`enable` (any case), with Slurm's texts.
fn cmd_schedloglevel(tag: &str, rest: &[String], ctl: &dyn Controller, out: &mut Out) -> i32 {
    let arg = match rest {
        [] => {
            out.err(format!("too few arguments for keyword:{tag}"));
            return 1;
        }
        [a] => a,
        _ => {
            out.err(format!("too many arguments for keyword:{tag}"));
            return 1;
        }
    };
    let level = match arg.to_ascii_lowercase().as_str() {
        // (Slurm reads an empty level as 0.)
        "disable" | "" => 0,
        "enable" => 1,
        a => match a.parse::<u32>() {
            Ok(n) if n <= 1 => n,
            _ => {
                out.err(format!("invalid schedlog level: {arg}"));
                return 1;
            }
        },
    };
    let r = ctl.call_answer(RequestBody::SetSchedLogLevel { level });
    printf_error("slurm_set_schedlog_level error", r, out)
}

/// `scontrol fsdampeningfactor N` (or `fairsharedampeningfactor`): the
/// controller's FairShareDampeningFactor until slurm.conf is read again
/// (its super users), with Slurm's texts.
fn cmd_fs_dampening(tag: &str, rest: &[String], ctl: &dyn Controller, out: &mut Out) -> i32 {
    match rest {
        [] => {
            out.err(format!("too few arguments for keyword:{tag}"));
            1
        }
        [v] => match v.parse::<u16>() {
            Ok(factor) if factor > 0 => printf_error(
                "slurm_set_fs_dampeningfactor error",
                ctl.call_answer(RequestBody::SetFsDampeningFactor { factor }),
                out,
            ),
            _ => {
                out.err(format!("invalid dampening factor: {v}"));
                1
            }
        },
        _ => {
            out.err(format!("too many arguments for keyword:{tag}"));
            1
        }
    }
}

/// `scontrol getaddrs NODES`: each node's address and port as the
/// controller knows them (`NODE: ADDR:PORT`, a name resolved to its first
/// address).
fn cmd_getaddrs(rest: &[String], ctl: &dyn Controller, out: &mut Out) -> i32 {
    let [list] = rest else {
        out.err("one argument required for keyword:getaddrs");
        return 1;
    };
    let names = match hostlist::expand(list) {
        Ok(n) if !n.is_empty() => n,
        _ => {
            out.err(format!("scontrol: error: Invalid node list: {list}"));
            return 1;
        }
    };
    let Some(nodes) = load_nodes(ctl, out) else {
        return 1;
    };
    let mut rc = 0;
    for name in names {
        let Some(n) = nodes.iter().find(|n| n.name == name) else {
            out.err(format!(
                "scontrol: error: {}: {name}",
                SlurmError::InvalidNodeName.message()
            ));
            rc = 1;
            continue;
        };
        use std::net::ToSocketAddrs;
        match (n.addr.as_str(), n.port)
            .to_socket_addrs()
            .map(|mut a| a.next())
        {
            Ok(Some(std::net::SocketAddr::V6(a))) => {
                out.stdout
                    .push_str(&format!("{name}: [{}]:{}\n", a.ip(), a.port()))
            }
            Ok(Some(a)) => out
                .stdout
                .push_str(&format!("{name}: {}:{}\n", a.ip(), a.port())),
            _ => {
                out.err(format!(
                    "scontrol: error: cannot resolve {name}'s address {}",
                    n.addr
                ));
                rc = 1;
            }
        }
    }
    rc
}

/// `scontrol shutdown [slurmctld|controller]`: the controller stops, and
/// the node daemons too unless told `slurmctld` or `controller`.
fn cmd_shutdown(rest: &[String], ctl: &dyn Controller, out: &mut Out) -> i32 {
    let controller_only = match rest {
        [] => false,
        [w] if w == "slurmctld" || w == "controller" => true,
        [w] => {
            out.err(format!("invalid shutdown argument:{w}"));
            return 1;
        }
        _ => {
            out.err("too many arguments for keyword:shutdown");
            return 1;
        }
    };
    // Every controller, backups first (as Slurm's): the one in control
    // tells the node daemons, the others only stop.
    let n = ctl.controllers().len().max(1);
    let mut failed = None;
    let mut stopped = false;
    for i in (1..n).chain(std::iter::once(0)) {
        match ctl.call_at(i, RequestBody::Shutdown { controller_only }) {
            Ok(Response::Ok) => stopped = true,
            other => failed = Some(other),
        }
    }
    match failed {
        Some(r) if !stopped => printf_error("slurm_shutdown error", r, out),
        _ => 0,
    }
}

/// `scontrol setdebugflags {+|-}NAME [{+|-}NAME...]`: the controller's
/// DebugFlags until slurm.conf is read again (root and SlurmUser). Slurm's
/// texts for a wrong name; `nodes=` (node daemons' flags) is refused with
/// Slurm's message: ours take no DebugFlags.
fn cmd_setdebugflags(rest: &[String], quiet: bool, ctl: &dyn Controller, out: &mut Out) -> i32 {
    use slurm_common::debugflags::DebugFlags;
    if rest.is_empty() {
        out.err("too few arguments for keyword:setdebugflags");
        return 1;
    }
    let (mut plus, mut minus) = (0u64, 0u64);
    let mut stop = None;
    for (i, a) in rest.iter().enumerate() {
        let (add, name) = match a.as_bytes().first() {
            Some(b'+') => (true, &a[1..]),
            Some(b'-') => (false, &a[1..]),
            _ => {
                stop = Some((i, false));
                break;
            }
        };
        match DebugFlags::parse(name) {
            Ok(f) if add => plus |= f.0,
            Ok(f) => minus |= f.0,
            Err(_) => {
                stop = Some((i, true));
                break;
            }
        }
    }
    match stop {
        Some((i, false))
            if i == rest.len() - 1
                && key_value(&rest[i]).is_some_and(|(k, _)| k == "node" || k == "nodes") =>
        {
            out.err("Failed to set DebugFlags on one or more nodes.");
            1
        }
        Some((i, signed)) => {
            out.err(format!("invalid debug flag: {}", rest[i]));
            if !quiet && !signed {
                out.err("Usage: setdebugflags {+|-}NAME [{+|-}NAME] [nodes=<NODES>]");
            }
            1
        }
        None => {
            let r = ctl.call_answer(RequestBody::SetDebugFlags { plus, minus });
            printf_error("slurm_set_debug_flags error", r, out)
        }
    }
}

/// `scontrol setdebug LEVEL [nodes=NODES]`: the controller's log level, or
/// the node daemons' of NODES, until slurm.conf is read again.
fn cmd_setdebug(rest: &[String], ctl: &dyn Controller, out: &mut Out) -> i32 {
    let level = match rest {
        [] => {
            out.err("too few arguments for keyword:setdebug");
            return 1;
        }
        [l] | [l, _] => l.clone(),
        _ => {
            out.err("too many arguments for keyword:setdebug");
            return 1;
        }
    };
    if slurm_common::logging::debug_level(&level).is_none() {
        out.err(format!("invalid debug level: {level}"));
        return 1;
    }
    let Some(spec) = rest.get(1) else {
        let r = ctl.call_answer(RequestBody::SetDebug { level });
        return printf_error("slurm_set_debug_level error", r, out);
    };
    let nodes = match key_value(spec) {
        Some((k, v)) if k == "nodes" || k == "node" => v,
        _ => {
            out.err(format!("Invalid option: {spec}"));
            return 1;
        }
    };
    let names = match hostlist::expand(&nodes) {
        Ok(n) if !n.is_empty() => n,
        _ => {
            out.err(format!("Invalid node list: {nodes}"));
            return 1;
        }
    };
    let mut failed = false;
    for n in names {
        let body = RequestBody::SetDebug {
            level: level.clone(),
        };
        match ctl.node_call(Some(&n), body) {
            Ok((_, Response::Ok)) => {}
            Ok((_, Response::Error(e))) => {
                out.err(format!("{n}: {}", e.error.message()));
                failed = true;
            }
            Ok(_) => failed = true,
            Err(f) => {
                out.err(format!("{n}: {}", f.message));
                failed = true;
            }
        }
    }
    if failed {
        out.err("Failed to change debug level on one or more nodes.");
        return 1;
    }
    0
}

/// Global options.
#[derive(Debug, Clone, Default)]
pub struct Globals {
    /// `-a`/`all` (or `SCONTROL_ALL`): hidden partitions, and nodes only
    /// in hidden partitions, are shown too.
    pub all: bool,
    /// `-F` (or `SCONTROL_FUTURE`): nodes in the FUTURE state are shown.
    pub future: bool,
    /// The caller is root or SlurmUser: hidden partitions are shown to it
    /// without `-a`, as Slurm's controller does for operators.
    pub privileged: bool,
    pub oneliner: bool,
    pub quiet: bool,
    pub verbose: bool,
    pub details: bool,
    /// `--json`: `show` prints slurmrestd's bodies.
    pub json: bool,
    /// For `--json`'s `meta`: the cluster and the command line.
    pub cluster: String,
    pub argv: Vec<String>,
}

/// Captured output of one command.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Out {
    pub stdout: String,
    pub stderr: String,
}

impl Out {
    fn err(&mut self, s: impl AsRef<str>) {
        self.stderr.push_str(s.as_ref());
        self.stderr.push('\n');
    }
}

/// Matches `word` against `names` case-insensitively: exact, else a unique
/// prefix of at least `min` characters.
fn pick<'a>(word: &str, names: &[&'a str], min: usize) -> Option<&'a str> {
    let w = word.to_ascii_lowercase();
    if let Some(n) = names.iter().find(|n| **n == w) {
        return Some(n);
    }
    if w.len() < min {
        return None;
    }
    let c: Vec<&&str> = names.iter().filter(|n| n.starts_with(&w)).collect();
    if c.len() == 1 {
        Some(c[0])
    } else {
        None
    }
}

/// What `scontrol show` shows.
const SHOW_ENTITIES: &[&str] = &[
    "jobs",
    "steps",
    "reservations",
    "licenses",
    "topology",
    "nodes",
    "partitions",
    "config",
    "hostnames",
    "hostlist",
    "hostlistsorted",
    "daemons",
    "aliases",
    "slurmd",
];

const COMMANDS: &[&str] = &[
    "show",
    "update",
    "create",
    "delete",
    "hold",
    "uhold",
    "release",
    "requeue",
    "requeuehold",
    "suspend",
    "resume",
    "ping",
    "takeover",
    "reboot",
    "cancel_reboot",
    "top",
    "notify",
    "listpids",
    "listjobs",
    "liststeps",
    "pidinfo",
    "completing",
    "shutdown",
    "setdebug",
    "setdebugflags",
    "schedloglevel",
    "fsdampeningfactor",
    "fairsharedampeningfactor",
    "getaddrs",
    "wait_job",
    "write",
    "reconfigure",
    "token",
    "errnumstr",
    "version",
    "help",
    "quit",
    "exit",
    "oneliner",
    "details",
    "quiet",
    "verbose",
    "all",
    "hide",
];

const HELP: &str = "scontrol [<OPTION>] [<COMMAND>]
    Valid <OPTION> values are:
     -a or --all: equivalent to \"all\" command
     -d or --details: provide more details (mostly for show job)
     -F or --future: show nodes in the FUTURE state too
     --hide: equivalent to \"hide\" command
     -h or --help: equivalent to \"help\" command
     -o or --oneliner: equivalent to \"oneliner\" command
     -Q or --quiet: equivalent to \"quiet\" command
     -v or --verbose: equivalent to \"verbose\" command
     -V or --version: equivalent to \"version\" command

  <keyword> may be omitted from the execute line and scontrol will execute
  in interactive mode. It will process commands as entered until explicitly
  terminated.

    Valid <COMMAND> values are:
     cancel_reboot <NODES>    cancel pending reboots of the nodes.
     completing               list jobs still completing and their nodes.
     errnumstr <ERRNO>        the text of a Slurm (or system) error number.
     exit                     terminate scontrol
     getaddrs <NODES>         the address and port of each node.
     help                     print this description of use.
     hold <job_list>          prevent specified job from starting.
     listjobs [<node>]        list the jobs running on this node.
     listpids <job_id<.step>> [<node>] list the processes of jobs (of one
                              job or step) on this node.
     liststeps [<node>]       list the job steps running on this node.
     pidinfo <pid> [<node>]   the job a process of this node belongs to,
                              and when that job ends.
     notify <job_id> msg      send message to specified job.
     ping                     print status of slurmctld daemons.
     quit                     terminate this command.
     reboot [ASAP] [FORCE] [nextstate=RESUME|DOWN] [reason=<reason>] ALL|<NODES>
                              reboot the nodes (RebootProgram) once idle.
     release <job_list>       permit specified job to start (see hold).
     requeue <job_id>         re-queue a batch job.
     requeuehold <job_id>     re-queue and hold a batch job.
     resume <job_list>        resume previously suspended job.
     schedloglevel <LEVEL>    turn scheduler logging (SlurmSchedLogFile) on (1,
                              enable) or off (0, disable).
     setdebug <LEVEL> [nodes=<NODES>] set the log level of slurmctld (or
                              of the slurmd daemons of NODES).
     setdebugflags [+|-]<FLAG> add or remove slurmctld DebugFlags.
     show <ENTITY> [<ID>]     display state of identified entity, default
                              is all records.
     shutdown <OPTION>        shut down slurm daemons (slurmctld or
                              controller: the controller only).
     suspend <job_list>       suspend specified job (see resume).
     takeover [<INDEX>]       ask a backup slurmctld (default the first) to
                              take over control now.
     top <job_list>           put these pending jobs first among their
                              owner's (same partition, account and QOS).
     uhold <job_list>         place user hold on specified job (see hold).
     update <SPECIFICATIONS>  update job or node configuration.
     version                  display tool version number.

  <ENTITY> may be \"aliases\", \"config\", \"daemons\", \"hostlist\",
       \"hostlistsorted\", \"hostnames\", \"job\", \"node\", \"partition\" or
       \"slurmd\" (this host's node daemon, or the one of the node named).

  Node updates: NodeName=<name> State=DOWN|DRAIN|IDLE|RESUME|UNDRAIN|CANCEL_REBOOT Reason=<text>
  Job updates:  JobId=<id> TimeLimit=<time> Nice=<n> Name=<name>
  Step updates: StepId=<job>[.<step>] TimeLimit=[+|-]<time>
";

fn load_jobs(ctl: &dyn Controller, out: &mut Out) -> Option<Vec<JobRecord>> {
    match ctl.call(RequestBody::GetJobs) {
        Ok(Response::Jobs { jobs, .. }) => Some(jobs),
        Ok(_) => {
            out.err("slurm_load_jobs error: Unexpected message received");
            None
        }
        Err(e) => {
            out.err(format!("slurm_load_jobs error: {}", e.message));
            None
        }
    }
}

/// `scontrol write batch_script JOBID [FILE]`: the job's script into FILE
/// (`slurm-JOBID.sh` by default, `-` for stdout), as its owner or an
/// administrator may read it.
fn cmd_write(args: &[String], ctl: &dyn Controller, out: &mut Out) -> i32 {
    match args.first().map(|a| a.to_ascii_lowercase()).as_deref() {
        Some("batch_script") => {}
        _ => {
            out.err("invalid write target: batch_script is the one known here");
            return 1;
        }
    }
    let Some(job_id) = args
        .get(1)
        .and_then(|a| a.parse::<u32>().ok())
        .filter(|n| *n > 0)
    else {
        out.err(format!(
            "scontrol: error: {}",
            SlurmError::InvalidJobId.message()
        ));
        return 1;
    };
    let script = match ctl.call(RequestBody::GetJobScript { job_id }) {
        Ok(Response::JobScript(s)) => s,
        Ok(Response::Error(e)) => {
            let m = match &e.detail {
                Some(d) => format!("{} ({d})", e.error.message()),
                None => e.error.message().to_string(),
            };
            out.err(format!("slurm_job_batch_script error: {m}"));
            return 1;
        }
        Ok(_) => {
            out.err("slurm_job_batch_script error: Unexpected message received");
            return 1;
        }
        Err(e) => {
            out.err(format!("slurm_job_batch_script error: {}", e.message));
            return 1;
        }
    };
    let file = args
        .get(2)
        .cloned()
        .unwrap_or_else(|| format!("slurm-{job_id}.sh"));
    if file == "-" {
        out.stdout.push_str(&script);
        return 0;
    }
    match std::fs::write(&file, script.as_bytes()) {
        Ok(()) => {
            out.stdout.push_str(&format!(
                "batch script for job {job_id} written to {file}\n"
            ));
            0
        }
        Err(e) => {
            out.err(format!("scontrol: error: failed to write {file}: {e}"));
            1
        }
    }
}

/// `scontrol wait_job JOBID`: returns once the job runs (0) or has ended
/// (1, saying so); asks again at growing intervals while it waits.
fn cmd_wait_job(args: &[String], ctl: &dyn Controller, out: &mut Out) -> i32 {
    let Some(id) = args
        .first()
        .and_then(|a| a.parse::<u32>().ok())
        .filter(|n| *n > 0)
    else {
        out.err(format!(
            "slurm_job_node_ready error: {}",
            SlurmError::InvalidJobId.message()
        ));
        return 1;
    };
    let mut pause = std::time::Duration::from_millis(100);
    loop {
        let filter = slurm_proto::JobFilter {
            job_ids: vec![id],
            states: Some(vec![]),
            ..Default::default()
        };
        let jobs = match ctl.call(RequestBody::GetJobsBrief(Some(filter))) {
            Ok(Response::Jobs { jobs, .. }) => jobs,
            Ok(_) => {
                out.err("slurm_job_node_ready error: Unexpected message received");
                return 1;
            }
            Err(e) => {
                out.err(format!("slurm_job_node_ready error: {}", e.message));
                return 1;
            }
        };
        let Some(j) = jobs.iter().find(|j| j.job_id == id) else {
            out.err(format!(
                "slurm_job_node_ready error: {}",
                SlurmError::InvalidJobId.message()
            ));
            return 1;
        };
        if j.state.is_active() {
            return 0;
        }
        if j.state.is_finished() {
            out.err(format!("Job {id} no longer running"));
            return 1;
        }
        std::thread::sleep(pause);
        pause = (pause * 2).min(std::time::Duration::from_secs(2));
    }
}

fn load_nodes(ctl: &dyn Controller, out: &mut Out) -> Option<Vec<NodeRecord>> {
    match ctl.call(RequestBody::GetNodes) {
        Ok(Response::Nodes { nodes, .. }) => Some(nodes),
        Ok(_) => {
            out.err("slurm_load_node error: Unexpected message received");
            None
        }
        Err(e) => {
            out.err(format!("slurm_load_node error: {}", e.message));
            None
        }
    }
}

fn load_partitions(ctl: &dyn Controller, out: &mut Out) -> Option<Vec<PartitionRecord>> {
    match ctl.call(RequestBody::GetPartitions) {
        Ok(Response::Partitions { partitions, .. }) => Some(partitions),
        Ok(_) => {
            out.err("slurm_load_partitions error: Unexpected message received");
            None
        }
        Err(e) => {
            out.err(format!("slurm_load_partitions error: {}", e.message));
            None
        }
    }
}

/// Memory per node a pending job without `--mem` would get in its partition.
fn partition_node_mem(
    job: &JobRecord,
    parts: &[PartitionRecord],
    nodes: &[NodeRecord],
) -> Option<u64> {
    let p = parts.iter().find(|p| p.name == job.partition)?;
    nodes
        .iter()
        .filter(|n| p.nodes.contains(&n.name))
        .map(|n| n.real_memory)
        .min()
}

/// Whether `scontrol show node` lists `n`: a FUTURE node only with `-F`,
/// a node whose every partition is hidden only with `-a` or to root and
/// SlurmUser (as Slurm's).
fn node_visible(n: &NodeRecord, g: &Globals, hidden_parts: &[String]) -> bool {
    let future = n.base_state == slurm_proto::NodeBaseState::Future;
    let hidden = !n.partitions.is_empty() && n.partitions.iter().all(|p| hidden_parts.contains(p));
    (g.future || !future) && (g.all || g.privileged || !hidden)
}

fn cmd_show(
    args: &[String],
    g: &Globals,
    ctl: &dyn Controller,
    now: i64,
    tz: Tz,
    out: &mut Out,
) -> i32 {
    let Some(entity) = args.first() else {
        out.err("too few arguments for keyword:show");
        return 1;
    };
    let so = ShowOpts {
        now,
        tz,
        oneliner: g.oneliner,
    };
    let id = args.get(1).map(String::as_str);
    // `topoconf`: five letters at least (as Slurm's, so `top` stays
    // `topology`): the topology configuration the controller read.
    let lower = entity.to_ascii_lowercase();
    if lower.len() >= 5 && "topoconf".starts_with(&lower) {
        return match ctl.call(RequestBody::GetTopoConfig) {
            Ok(Response::TopoConfig(text)) => {
                out.stdout.push_str(&text);
                0
            }
            Ok(Response::Error(e)) => {
                out.err(format!(
                    "slurm_load_topo_config error: {}",
                    e.error.message()
                ));
                1
            }
            Ok(_) => {
                out.err("slurm_load_topo_config error: Unexpected message received");
                1
            }
            Err(f) => {
                out.err(format!("slurm_load_topo_config error: {}", f.message));
                1
            }
        };
    }
    match pick(entity, SHOW_ENTITIES, 1) {
        Some("jobs") => {
            let wanted = match id {
                None => None,
                Some(s) => match s
                    .split(['_', '+', '.'])
                    .next()
                    .and_then(|b| b.parse::<u32>().ok())
                {
                    Some(n) if n > 0 => Some(n),
                    _ => {
                        out.err(format!(
                            "slurm_load_jobs error: {}",
                            SlurmError::InvalidJobId.message()
                        ));
                        return 1;
                    }
                },
            };
            let Some(mut jobs) = load_jobs(ctl, out) else {
                return 1;
            };
            jobs.sort_by_key(|j| j.job_id);
            // `A_T` names one array task; `A` the whole array.
            let task: Option<u32> = id
                .and_then(|s| s.split_once('_'))
                .and_then(|(_, t)| t.parse().ok());
            let jobs: Vec<&JobRecord> = jobs
                .iter()
                .filter(|j| match (wanted, &j.array) {
                    (None, _) => true,
                    (Some(w), Some(a)) if a.job_id == w => task.is_none_or(|t| a.task_id == t),
                    (Some(w), _) => j.job_id == w && task.is_none(),
                })
                .collect();
            if jobs.is_empty() {
                if wanted.is_some() {
                    out.err(format!(
                        "slurm_load_jobs error: {}",
                        SlurmError::InvalidJobId.message()
                    ));
                    return 1;
                }
                if !g.json {
                    out.stdout.push_str("No jobs in the system\n");
                    return 0;
                }
            }
            // Pending jobs that asked for no memory show their nodes' memory.
            let need_mem = jobs.iter().any(|j| {
                j.alloc.nodes.is_empty()
                    && j.desc.mem_per_cpu.is_none()
                    && j.desc.mem_per_node.unwrap_or(0) == 0
            });
            let (parts, nodes) = if need_mem {
                let mut sink = Out::default();
                (
                    load_partitions(ctl, &mut sink).unwrap_or_default(),
                    load_nodes(ctl, &mut sink).unwrap_or_default(),
                )
            } else {
                (Vec::new(), Vec::new())
            };
            if g.json {
                let last = jobs.iter().map(|j| j.submit_time).max().unwrap_or(0);
                out.stdout.push_str(&crate::jsonout::render(
                    crate::jsonout::Body::Jobs(&jobs, now.max(last), None),
                    &g.cluster,
                    &g.argv,
                ));
                return 0;
            }
            for j in jobs {
                let mem = partition_node_mem(j, &parts, &nodes);
                out.stdout.push_str(&show_job(j, mem, &so));
            }
            0
        }
        Some("topology") => {
            let list = match ctl.call(RequestBody::GetTopology) {
                Ok(Response::Topology(t)) => t,
                Ok(_) => {
                    out.err("slurm_load_topo error: Unexpected message received");
                    return 1;
                }
                Err(f) => {
                    out.err(format!("slurm_load_topo error: {}", f.message));
                    return 1;
                }
            };
            out.stdout.push_str(&show_topology(&list, id));
            0
        }
        Some("licenses") => {
            let (list, last_update) = match ctl.call(RequestBody::GetLicenses) {
                Ok(Response::Licenses {
                    licenses,
                    last_update,
                }) => (licenses, last_update),
                Ok(_) => {
                    out.err("slurm_load_licenses error: Unexpected message received");
                    return 1;
                }
                Err(f) => {
                    out.err(format!("slurm_load_licenses error: {}", f.message));
                    return 1;
                }
            };
            let shown: Vec<_> = list
                .iter()
                .filter(|l| id.is_none_or(|n| l.name == n))
                .collect();
            if g.json {
                let shown: Vec<slurm_proto::LicenseInfo> = shown.into_iter().cloned().collect();
                let body = slurm_openapi::openapi::licenses_body(&shown, last_update);
                let fields = body.as_object().cloned().unwrap_or_default();
                out.stdout.push_str(&crate::jsonout::render(
                    crate::jsonout::Body::Fields(fields),
                    &g.cluster,
                    &g.argv,
                ));
                return 0;
            }
            if shown.is_empty() {
                match id {
                    Some(n) => {
                        out.stdout.push_str(&format!("License {n} not found\n"));
                        return 1;
                    }
                    None => out.stdout.push_str("No licenses configured in Slurm.\n"),
                }
            }
            for l in shown {
                let sep = if so.oneliner { " " } else { "\n    " };
                out.stdout.push_str(&format!(
                    "LicenseName={}{sep}Total={} Used={} Free={} Reserved=0 Remote=no\n",
                    l.name,
                    l.total,
                    l.used,
                    l.total.saturating_sub(l.used)
                ));
            }
            0
        }
        Some("reservations") => {
            let list = match ctl.call(RequestBody::GetReservations) {
                Ok(Response::Reservations { reservations, .. }) => reservations,
                Ok(_) => {
                    out.err("slurm_load_reservations error: Unexpected message received");
                    return 1;
                }
                Err(f) => {
                    out.err(format!("slurm_load_reservations error: {}", f.message));
                    return 1;
                }
            };
            let shown: Vec<_> = list
                .iter()
                .filter(|r| id.is_none_or(|n| r.name == n))
                .collect();
            if shown.is_empty() {
                match id {
                    Some(n) => {
                        out.stdout.push_str(&format!("Reservation {n} not found\n"));
                        return 1;
                    }
                    None if g.json => {}
                    None => out.stdout.push_str("No reservations in the system\n"),
                }
            }
            if g.json {
                out.stdout.push_str(&crate::jsonout::render(
                    crate::jsonout::Body::Reservations(&shown, now),
                    &g.cluster,
                    &g.argv,
                ));
                return 0;
            }
            for r in shown {
                out.stdout.push_str(&show_reservation(r, &so));
            }
            0
        }
        Some("steps") => {
            // `job` or `job.step`.
            let (want_job, want_step) = match id {
                None => (None, None),
                Some(s) => {
                    let (j, st) = match s.split_once('.') {
                        Some((j, st)) => (j, Some(st)),
                        None => (s, None),
                    };
                    let st = match st {
                        None => None,
                        Some("batch") => Some(slurm_proto::BATCH_STEP),
                        Some("extern") => Some(slurm_proto::EXTERN_STEP),
                        Some(x) => x.parse::<u32>().ok(),
                    };
                    (j.parse::<u32>().ok(), st)
                }
            };
            let Some(jobs) = load_jobs(ctl, out) else {
                return 1;
            };
            let mut n = 0;
            for j in &jobs {
                if want_job.is_some_and(|w| w != j.job_id) {
                    continue;
                }
                for st in j
                    .steps
                    .iter()
                    .filter(|s| s.state == slurm_proto::JobState::Running)
                {
                    if want_step.is_some_and(|w| w != st.step_id) {
                        continue;
                    }
                    out.stdout.push_str(&show_step(j, st, &so));
                    n += 1;
                }
            }
            if n == 0 {
                if let Some(i) = id {
                    out.err(format!("Job step {i} not found"));
                    return 1;
                }
                out.stdout.push_str("No job steps in the system\n");
            }
            0
        }
        Some("nodes") => {
            let Some(nodes) = load_nodes(ctl, out) else {
                return 1;
            };
            let hidden_parts: Vec<String> = if g.all || g.privileged {
                Vec::new()
            } else {
                let mut sink = Out::default();
                load_partitions(ctl, &mut sink)
                    .unwrap_or_default()
                    .into_iter()
                    .filter(|p| p.hidden)
                    .map(|p| p.name)
                    .collect()
            };
            let visible = |n: &&NodeRecord| node_visible(n, g, &hidden_parts);
            let shown: Vec<&NodeRecord> = match id {
                None => nodes.iter().filter(visible).collect(),
                Some(expr) => {
                    let names = hostlist::expand(expr).unwrap_or_else(|_| vec![expr.to_string()]);
                    nodes
                        .iter()
                        .filter(|n| names.contains(&n.name))
                        .filter(visible)
                        .collect()
                }
            };
            if shown.is_empty() {
                match id {
                    Some(expr) => {
                        if !g.quiet {
                            out.stdout.push_str(&format!("Node {expr} not found\n"));
                        }
                        return 1;
                    }
                    None if g.json => {}
                    None => {
                        out.stdout.push_str("No nodes in the system\n");
                        return 0;
                    }
                }
            }
            if g.json {
                out.stdout.push_str(&crate::jsonout::render(
                    crate::jsonout::Body::Nodes(&shown, now),
                    &g.cluster,
                    &g.argv,
                ));
                return 0;
            }
            for n in shown {
                out.stdout.push_str(&show_node(n, &so));
            }
            0
        }
        Some("partitions") => {
            let Some(parts) = load_partitions(ctl, out) else {
                return 1;
            };
            let shown: Vec<&PartitionRecord> = parts
                .iter()
                .filter(|p| id.is_none_or(|w| p.name == w))
                .filter(|p| g.all || g.privileged || !p.hidden)
                .collect();
            if shown.is_empty() {
                match id {
                    Some(name) => {
                        if !g.quiet {
                            out.stdout
                                .push_str(&format!("Partition {name} not found\n"));
                        }
                        return 1;
                    }
                    None if g.json => {}
                    None => {
                        out.stdout.push_str("No partitions in the system\n");
                        return 0;
                    }
                }
            }
            if g.json {
                out.stdout.push_str(&crate::jsonout::render(
                    crate::jsonout::Body::Partitions(&shown, now),
                    &g.cluster,
                    &g.argv,
                ));
                return 0;
            }
            for p in shown {
                out.stdout.push_str(&show_partition(p, &so));
            }
            0
        }
        Some("config") => match ctl.call(RequestBody::GetConfig) {
            Ok(Response::Config(c)) => {
                out.stdout.push_str(&show_config(&c, now, tz));
                0
            }
            Ok(_) => {
                out.err("slurm_load_ctl_conf error: Unexpected message received");
                1
            }
            Err(e) => {
                out.err(format!("slurm_load_ctl_conf error: {}", e.message));
                1
            }
        },
        Some("daemons") => show_daemons(ctl, out),
        Some("slurmd") => match ctl.node_call(id, RequestBody::DaemonStatus) {
            Ok((_, Response::SlurmdStatus(s))) => {
                out.stdout.push_str(&show_slurmd(&s, tz));
                0
            }
            Ok((_, Response::Error(e))) => {
                out.err(format!("slurm_load_slurmd_status: {}", e.error.message()));
                1
            }
            Ok(_) => {
                out.err("slurm_load_slurmd_status: Unexpected message received");
                1
            }
            Err(f) => {
                out.err(format!("slurm_load_slurmd_status: {}", f.message));
                1
            }
        },
        Some("aliases") => show_aliases(id, ctl, out),
        Some(e @ ("hostnames" | "hostlist" | "hostlistsorted")) => {
            let input = match id {
                Some(s) => s.to_string(),
                None if e == "hostnames" => std::env::var("SLURM_JOB_NODELIST")
                    .or_else(|_| std::env::var("SLURM_NODELIST"))
                    .unwrap_or_default(),
                None => {
                    out.err("scontrol: error: a hostlist is required");
                    return 1;
                }
            };
            let names = match hostlist::expand(&input) {
                Ok(n) => n,
                Err(err) => {
                    out.err(format!("scontrol: error: Invalid hostlist: {err}"));
                    return 1;
                }
            };
            if e == "hostnames" {
                for n in names {
                    out.stdout.push_str(&n);
                    out.stdout.push('\n');
                }
            } else if e == "hostlist" {
                // In the order given, compressed where runs allow.
                out.stdout.push_str(&hostlist::compress(&names));
                out.stdout.push('\n');
            } else {
                out.stdout
                    .push_str(&hostlist::compress(&hostlist::sort_hosts(&names)));
                out.stdout.push('\n');
            }
            0
        }
        _ => {
            out.err(format!("invalid entity:{entity} for keyword:show "));
            1
        }
    }
}

/// Splits `Key=Value` into (lower-case key, value); quotes around the value are dropped.
fn key_value(tok: &str) -> Option<(String, String)> {
    let (k, v) = tok.split_once('=')?;
    let v = v
        .strip_prefix('"')
        .and_then(|x| x.strip_suffix('"'))
        .or_else(|| v.strip_prefix('\'').and_then(|x| x.strip_suffix('\'')))
        .unwrap_or(v);
    Some((k.to_ascii_lowercase(), v.to_string()))
}

/// `create reservation ...` / `update ReservationName=... ...`.
fn cmd_reservation(
    args: &[String],
    update: bool,
    ctl: &dyn Controller,
    now: i64,
    out: &mut Out,
) -> i32 {
    let verb = if update { "updating" } else { "creating" };
    let mut spec = slurm_proto::ReservationSpec::default();
    let list = |v: &str| -> Vec<String> {
        v.split(',')
            .filter(|x| !x.is_empty())
            .map(String::from)
            .collect()
    };
    for a in args {
        let Some((k, v)) = key_value(a) else {
            out.err(format!("Invalid input: {a}"));
            return 1;
        };
        let r: Result<(), String> = (|| {
            match k.as_str() {
                "reservation" | "reservationname" => spec.name = Some(v.clone()),
                "starttime" => {
                    spec.start_time = Some(
                        slurm_common::timefmt::parse_timestamp(&v, now)
                            .map_err(|e| e.to_string())?,
                    )
                }
                "endtime" => {
                    spec.end_time = Some(
                        slurm_common::timefmt::parse_timestamp(&v, now)
                            .map_err(|e| e.to_string())?,
                    )
                }
                "duration" => {
                    spec.duration = match slurm_common::timefmt::parse_time_limit(&v)
                        .map_err(|e| e.to_string())?
                    {
                        Some(m) => Some(m),
                        None => Some(365 * 24 * 60),
                    }
                }
                "nodes" => spec.nodes = Some(hostlist::expand(&v).map_err(|e| e.to_string())?),
                "nodecnt" | "nodecount" => {
                    spec.node_cnt = Some(v.parse().map_err(|_| format!("invalid NodeCnt {v}"))?)
                }
                "users" | "user" => spec.users = Some(list(&v)),
                "accounts" | "account" => spec.accounts = Some(list(&v)),
                "partition" | "partitionname" => spec.partition = Some(v.clone()),
                "flags" | "flag" => spec.flags = Some(list(&v.to_ascii_uppercase())),
                other => return Err(format!("unknown reservation option {other}")),
            }
            Ok(())
        })();
        if let Err(e) = r {
            out.err(format!("Error {verb} the reservation: {e}"));
            return 1;
        }
    }
    let body = if update {
        slurm_proto::RequestBody::UpdateReservation(spec)
    } else {
        slurm_proto::RequestBody::CreateReservation(spec)
    };
    match ctl.call(body) {
        Ok(Response::ReservationCreated { name }) => {
            out.stdout
                .push_str(&format!("Reservation created: {name}\n"));
            0
        }
        Ok(Response::Ok) => {
            out.stdout.push_str("Reservation updated.\n");
            0
        }
        Ok(Response::Error(e)) => {
            let msg = match &e.detail {
                Some(d) => format!("{}: {d}", e.error.message()),
                None => e.error.message().to_string(),
            };
            out.err(format!("Error {verb} the reservation: {msg}"));
            1
        }
        Ok(_) => 1,
        Err(f) => {
            out.err(format!("Error {verb} the reservation: {}", f.message));
            1
        }
    }
}

/// `scontrol create NodeName=... State=External CPUs=... RealMemory=...`.
fn cmd_create_node(args: &[String], ctl: &dyn Controller, out: &mut Out) -> i32 {
    let mut names = Vec::new();
    let mut spec = slurm_proto::NodeSpec {
        state: "IDLE".into(),
        cpus: 1,
        real_memory: 1,
        ..Default::default()
    };
    for a in args {
        let Some((k, v)) = key_value(a) else {
            out.err(format!("Invalid input: {a}"));
            return 1;
        };
        let bad = |out: &mut Out| {
            out.err(format!("scontrol: error: Invalid value for {k}: {v}"));
            1
        };
        match k.as_str() {
            "nodename" => match hostlist::expand(&v) {
                Ok(n) if !n.is_empty() => names = n,
                _ => return bad(out),
            },
            "state" => spec.state = v.to_ascii_uppercase(),
            "cpus" | "procs" => match v.parse() {
                Ok(n) => spec.cpus = n,
                Err(_) => return bad(out),
            },
            "realmemory" => match v.parse() {
                Ok(n) => spec.real_memory = n,
                Err(_) => return bad(out),
            },
            "feature" | "features" => spec.features = v.split(',').map(String::from).collect(),
            "partitions" | "partition" => {
                spec.partitions = v.split(',').map(String::from).collect()
            }
            "nodeaddr" => spec.addr = Some(v.clone()),
            "gres" => spec.gres = slurm_common::conf::split_top_commas(&v),
            "port" => match v.parse() {
                Ok(n) => spec.port = Some(n),
                Err(_) => return bad(out),
            },
            other => {
                out.err(format!(
                    "scontrol: error: Unsupported option for a new node: {other}"
                ));
                return 1;
            }
        }
    }
    let mut rc = 0;
    for n in names {
        let body = RequestBody::CreateNode(slurm_proto::NodeSpec {
            name: n.clone(),
            ..spec.clone()
        });
        match ctl.call_answer(body) {
            Ok(Response::Ok) => {}
            Ok(Response::Error(e)) => {
                let d = e.detail.map(|d| format!(": {d}")).unwrap_or_default();
                out.err(format!(
                    "scontrol: error: Unable to create node {n}: {}{d}",
                    e.error.message()
                ));
                rc = 1;
            }
            Ok(_) => rc = 1,
            Err(f) => {
                out.err(format!(
                    "scontrol: error: Unable to create node {n}: {}",
                    f.message
                ));
                rc = 1;
            }
        }
    }
    rc
}

/// `scontrol show reservation` for one reservation.
/// `scontrol show topology [name]`: switches (`SwitchName=`, with their
/// level, nodes and child switches) or blocks (`BlockName=`). A name keeps
/// the switches or blocks so named or holding a node so named.
pub fn show_topology(list: &[slurm_proto::TopologyEntry], name: Option<&str>) -> String {
    if list.is_empty() {
        return "No topology information available\n".into();
    }
    let many = list.iter().any(|e| e.topology != list[0].topology);
    let mut out = String::new();
    for e in list
        .iter()
        .filter(|e| name.is_none_or(|n| e.name == n || e.nodes.iter().any(|x| x == n)))
    {
        let nodes = hostlist::compress(&e.nodes);
        if e.block {
            out.push_str(&format!(
                "BlockName={} BlockIndex={} Nodes={nodes} BlockSize={}",
                e.name,
                e.level,
                e.nodes.len()
            ));
        } else {
            out.push_str(&format!(
                "SwitchName={} Level={} LinkSpeed=1 Nodes={nodes}",
                e.name, e.level
            ));
            if !e.switches.is_empty() {
                out.push_str(&format!(" Switches={}", hostlist::compress(&e.switches)));
            }
        }
        if many {
            out.push_str(&format!(" Topology={}", e.topology));
        }
        out.push('\n');
    }
    if out.is_empty() {
        if let Some(n) = name {
            out.push_str(&format!("No topology information for {n}\n"));
        }
    }
    out
}

pub fn show_reservation(r: &slurm_proto::ReservationRecord, o: &ShowOpts) -> String {
    let null = |v: &[String]| {
        if v.is_empty() {
            "(null)".to_string()
        } else {
            v.join(",")
        }
    };
    let state = if r.is_active(o.now) {
        "ACTIVE"
    } else {
        "INACTIVE"
    };
    let lines = vec![
        format!(
            "ReservationName={} StartTime={} EndTime={} Duration={}",
            r.name,
            o.tz.timestamp(r.start_time),
            o.tz.timestamp(r.end_time),
            slurm_common::timefmt::format_duration_hms(r.end_time - r.start_time)
        ),
        format!(
            "Nodes={} NodeCnt={} CoreCnt={} Features=(null) PartitionName={} Flags={}",
            if r.nodes.is_empty() { "(null)".into() } else { hostlist::compress(&r.nodes) },
            r.nodes.len(),
            r.core_cnt,
            r.partition.clone().unwrap_or_else(|| "(null)".into()),
            r.flags.join(",")
        ),
        format!("TRES=cpu={}", r.core_cnt),
        format!(
            "Users={} Groups=(null) Accounts={} Licenses=(null) State={state} BurstBuffer=(null) Watts=n/a",
            null(&r.users),
            null(&r.accounts)
        ),
        "MaxStartDelay=(null)".to_string(),
    ];
    finish(lines, o.oneliner)
}

/// Each `Key=Value` word as (lower-cased key, value) with the word; `None`
/// (said on `out`) at the first word that is not one.
fn pairs_of(args: &[String], out: &mut Out) -> Option<Vec<((String, String), String)>> {
    let mut pairs = Vec::new();
    for a in args {
        match key_value(a) {
            Some(kv) => pairs.push((kv, a.clone())),
            None => {
                out.err(format!("Invalid input: {a}"));
                out.err("Request aborted");
                return None;
            }
        }
    }
    Some(pairs)
}

fn cmd_update(args: &[String], ctl: &dyn Controller, out: &mut Out) -> i32 {
    let Some(pairs) = pairs_of(args, out) else {
        return 1;
    };
    let has = |k: &str| pairs.iter().any(|((key, _), _)| key == k);
    if has("reservation") || has("reservationname") {
        cmd_reservation(args, true, ctl, crate::common::now(), out)
    } else if has("nodename") {
        update_node(&pairs, ctl, out)
    } else if has("jobid") {
        update_job(&pairs, ctl, out)
    } else if has("stepid") {
        update_step(&pairs, ctl, out)
    } else if has("partitionname") {
        partition_request(&pairs, false, ctl, out)
    } else {
        out.err("No valid entity in update command");
        out.err(
            "Input line must include \"NodeName\", \"PartitionName\", \
             \"Reservation/ReservationName\", \"JobId\", \"StepId\", or \"FrontendName\"",
        );
        1
    }
}

type Pairs = [((String, String), String)];

/// `scontrol update PartitionName=NAME [State=UP|DOWN|DRAIN|INACTIVE]
/// [MaxTime=...] [DefaultTime=...]`, or (`create`) `scontrol create
/// PartitionName=NAME [Nodes=LIST] [Default=YES|NO]` with those too.
fn partition_request(pairs: &Pairs, create: bool, ctl: &dyn Controller, out: &mut Out) -> i32 {
    let mut u = slurm_proto::PartitionUpdate::default();
    for ((k, v), raw) in pairs {
        match k.as_str() {
            "partitionname" => u.name = v.clone(),
            "nodes" if create => u.nodes = Some(v.clone()),
            "default" if create => {
                u.default = Some(match v.to_ascii_uppercase().as_str() {
                    "YES" => true,
                    "NO" => false,
                    _ => {
                        out.err(format!("Invalid input: {raw}"));
                        out.err("Request aborted");
                        out.err("Acceptable Default values are YES and NO");
                        return 1;
                    }
                })
            }
            "state" => {
                u.state = Some(match v.to_ascii_uppercase().as_str() {
                    "UP" => slurm_proto::PartitionState::Up,
                    "DOWN" => slurm_proto::PartitionState::Down,
                    "DRAIN" => slurm_proto::PartitionState::Drain,
                    "INACTIVE" => slurm_proto::PartitionState::Inactive,
                    _ => {
                        out.err(format!("Invalid input: {raw}"));
                        out.err("Request aborted");
                        out.err("Acceptable State values are: UP, DOWN, DRAIN, INACTIVE");
                        return 1;
                    }
                })
            }
            "maxtime" | "defaulttime" => match parse_time_limit(v) {
                Ok(t) if k == "maxtime" => u.max_time = Some(t),
                Ok(t) => u.default_time = Some(t),
                Err(_) => {
                    out.err(format!("Invalid input: {raw}"));
                    out.err("Request aborted");
                    return 1;
                }
            },
            _ => {
                if create {
                    out.err(format!(
                        "Setting this parameter at creation is not supported: {raw}"
                    ));
                } else {
                    out.err(format!("Update of this parameter is not supported: {raw}"));
                }
                out.err("Request aborted");
                return 1;
            }
        }
    }
    let (body, what) = if create {
        (
            RequestBody::CreatePartition(u),
            "Error creating the partition",
        )
    } else {
        (RequestBody::UpdatePartition(u), "slurm_update error")
    };
    match ctl.call_answer(body) {
        Ok(Response::Error(e)) => {
            match &e.detail {
                Some(d) => out.err(format!("{what}: {} ({d})", e.error.message())),
                None => out.err(format!("{what}: {}", e.error.message())),
            }
            1
        }
        Ok(_) => 0,
        Err(e) => {
            out.err(format!("{what}: {}", e.message));
            1
        }
    }
}

fn update_node(pairs: &Pairs, ctl: &dyn Controller, out: &mut Out) -> i32 {
    let mut names = Vec::new();
    let mut state = None;
    let mut cancel_reboot = false;
    let mut reason = None;
    let mut features: Option<Vec<String>> = None;
    for ((k, v), raw) in pairs {
        match k.as_str() {
            "state" if v.eq_ignore_ascii_case("cancel_reboot") => cancel_reboot = true,
            "nodename" => match node_names(v, out) {
                Some(n) => names.extend(n),
                None => return 1,
            },
            "state" => {
                state = Some(match v.to_ascii_lowercase().as_str() {
                    "drain" => NodeStateRequest::Drain,
                    "resume" => NodeStateRequest::Resume,
                    "down" => NodeStateRequest::Down,
                    "undrain" => NodeStateRequest::Undrain,
                    "idle" => NodeStateRequest::Idle,
                    _ => {
                        out.err(format!("Invalid input: {raw}"));
                        out.err("Request aborted");
                        out.err("Valid states are: DOWN DRAIN IDLE RESUME UNDRAIN");
                        return 1;
                    }
                })
            }
            "reason" => reason = Some(v.clone()),
            "availablefeatures" | "activefeatures" | "features" => {
                features = Some(fmt::split_list(v))
            }
            _ => {
                out.err(format!("Update of this parameter is not supported: {raw}"));
                out.err("Request aborted");
                return 1;
            }
        }
    }
    let needs_reason = matches!(
        state,
        Some(NodeStateRequest::Drain | NodeStateRequest::Down)
    );
    if needs_reason && reason.as_deref().is_none_or(str::is_empty) {
        out.err("You must specify a reason when DOWNING or DRAINING a node. Request denied");
        return 1;
    }
    if cancel_reboot {
        return cancel_reboots(names, ctl, out);
    }
    if state.is_none() && reason.is_none() && features.is_none() {
        return 0;
    }
    let body = RequestBody::UpdateNode {
        names,
        state,
        reason,
        features,
    };
    call_or_say(ctl, out, "slurm_update", body)
}

/// Send a request whose answer is Ok or an error; the error printed as
/// Slurm's commands do (`<what> error: <message>`). The exit status.
fn call_or_say(ctl: &dyn Controller, out: &mut Out, what: &str, body: RequestBody) -> i32 {
    call_or_perror(ctl, out, &format!("{what} error"), body)
}

/// `scontrol reboot [ASAP] [FORCE] [nextstate=RESUME|DOWN] [reason=...]
/// ALL|NODES`.
fn cmd_reboot(rest: &[String], ctl: &dyn Controller, out: &mut Out) -> i32 {
    if rest.len() > 6 {
        out.err("too many arguments for keyword:reboot");
        return 1;
    }
    let (mut asap, mut force) = (false, false);
    let (mut next_state, mut reason, mut list) = (None, None, None::<String>);
    for tok in rest {
        let (key, value) = match tok.split_once('=') {
            Some((k, v)) => (k.to_ascii_lowercase(), Some(v)),
            None => (tok.to_ascii_lowercase(), None),
        };
        match (key.as_str(), value) {
            ("asap", None) => asap = true,
            ("force", None) => force = true,
            ("reason", Some(v)) => {
                if v.is_empty() {
                    out.err("missing reason");
                    return 1;
                }
                if reason.is_some() {
                    out.err("multiple reasons specified");
                    return 1;
                }
                reason = Some(v.to_string());
            }
            ("nextstate", Some(v)) => {
                let up = v.to_ascii_uppercase();
                next_state = Some(if !up.is_empty() && "DOWN".starts_with(&up) {
                    NodeStateRequest::Down
                } else if !up.is_empty() && "RESUME".starts_with(&up) {
                    NodeStateRequest::Resume
                } else if v.is_empty() {
                    out.err("missing state");
                    return 1;
                } else {
                    out.err(format!("Invalid state: {v}\n Valid states: DOWN, RESUME"));
                    return 1;
                });
            }
            ("action", Some(_)) => {
                out.err("Invalid power action: no PowerAction is configured");
                return 1;
            }
            _ => {
                if list.is_some() {
                    out.err("Multiple node lists specified");
                    return 1;
                }
                list = Some(tok.clone());
            }
        }
    }
    let Some(list) = list else {
        out.err("Missing node list. Specify ALL|<NodeList>");
        return 1;
    };
    let names = if list.eq_ignore_ascii_case("ALL") {
        Vec::new()
    } else {
        let Some(n) = node_names(&list, out) else {
            return 1;
        };
        n
    };
    let r = reboot_call(
        ctl,
        out,
        RebootNodes {
            names,
            asap,
            force,
            next_state,
            reason,
            cancel: false,
        },
    );
    if r != 0 {
        out.err("scontrol_reboot_nodes error");
    }
    r
}

/// `scontrol top JOBS`: the jobs (ids, array tasks `123_4` or whole
/// arrays) first among their owner's pending jobs of the same partition,
/// account and QOS, in the order given.
fn cmd_top(rest: &[String], ctl: &dyn Controller, out: &mut Out) -> i32 {
    let Some(list) = one_arg(rest, "top", "too few arguments", out) else {
        return 1;
    };
    let mut sink = Out::default();
    let jobs = load_jobs(ctl, &mut sink).unwrap_or_default();
    let pending = |j: &JobRecord| j.state == slurm_proto::JobState::Pending;
    let mut job_ids = Vec::new();
    for w in fmt::split_list(list) {
        match array_targets(&w, &jobs, &pending) {
            Some(Ok(t)) => job_ids.extend(t.into_iter().map(|(_, id)| id)),
            Some(Err(e)) => {
                out.err(e);
                return 1;
            }
            None => {
                out.err(format!("Invalid job id specified: {w}"));
                return 1;
            }
        }
    }
    call_or_say(ctl, out, "slurm_top_job", RequestBody::TopJobs { job_ids })
}

/// `scontrol notify JOBID MESSAGE...`: the words of the message joined by
/// spaces, to the job's batch script (its error file) or srun. The job id
/// is read as Slurm's (`atoi`: `5_2` is job 5).
fn cmd_notify(rest: &[String], ctl: &dyn Controller, out: &mut Out) -> i32 {
    let [id, words @ ..] = rest else {
        out.err("too few arguments for keyword:notify");
        return 1;
    };
    if words.is_empty() {
        out.err("too few arguments for keyword:notify");
        return 1;
    }
    let job_id = match fmt::leading_int(id) {
        n if n > 0 && n <= i64::from(u32::MAX) => n as u32,
        _ => {
            out.err(format!("Invalid job_id {id}"));
            return 1;
        }
    };
    let message = words.join(" ");
    call_or_perror(
        ctl,
        out,
        "job notify failure",
        RequestBody::NotifyJob { job_id, message },
    )
}

/// As [`call_or_say`], in `slurm_perror`'s words (`WHAT: message`).
fn call_or_perror(ctl: &dyn Controller, out: &mut Out, what: &str, body: RequestBody) -> i32 {
    match ctl.call(body) {
        Ok(Response::Error(e)) => {
            out.err(format!("{what}: {}", e.error.message()));
            1
        }
        Ok(_) => 0,
        Err(e) => {
            out.err(format!("{what}: {}", e.message));
            1
        }
    }
}

/// The one argument of `keyword`, else Slurm's complaint (`missing`
/// names what it says when there is none).
fn one_arg<'a>(
    rest: &'a [String],
    keyword: &str,
    missing: &str,
    out: &mut Out,
) -> Option<&'a String> {
    match rest {
        [a] => Some(a),
        [] => {
            out.err(format!("{missing} for keyword:{keyword}"));
            None
        }
        _ => {
            out.err(format!("too many arguments for keyword:{keyword}"));
            None
        }
    }
}

/// A node list expanded, else Slurm's complaint.
fn node_names(list: &str, out: &mut Out) -> Option<Vec<String>> {
    match hostlist::expand(list) {
        Ok(n) if !n.is_empty() => Some(n),
        _ => {
            out.err(format!("Invalid node name specified: {list}"));
            None
        }
    }
}

/// `scontrol cancel_reboot NODES`.
fn cmd_cancel_reboot(rest: &[String], ctl: &dyn Controller, out: &mut Out) -> i32 {
    let Some(list) = one_arg(rest, "cancel_reboot", "missing argument", out) else {
        return 1;
    };
    let Some(names) = node_names(list, out) else {
        return 1;
    };
    cancel_reboots(names, ctl, out)
}

/// `cancel_reboot` (or `update NodeName= State=CANCEL_REBOOT`).
fn cancel_reboots(names: Vec<String>, ctl: &dyn Controller, out: &mut Out) -> i32 {
    let req = RebootNodes {
        names,
        cancel: true,
        ..Default::default()
    };
    reboot_call(ctl, out, req)
}

/// Send a reboot request; the controller's refusal printed as Slurm does.
fn reboot_call(ctl: &dyn Controller, out: &mut Out, req: RebootNodes) -> i32 {
    match ctl.call(RequestBody::RebootNodes(req)) {
        Ok(Response::Error(e)) => {
            match &e.detail {
                Some(d) if d.starts_with("Skipping") => out.err(d.clone()),
                Some(d) => out.err(format!("{}: {d}", e.error.message())),
                None => out.err(e.error.message()),
            }
            1
        }
        Ok(_) => 0,
        Err(e) => {
            out.err(e.message);
            1
        }
    }
}

/// `scontrol update StepId=JOB[.STEP] TimeLimit=[+|-]TIME`: a step's time
/// limit (without `.STEP`, every running step's); `+`/`-` move it from the
/// step's present one. Slurm's texts for what is wrong.
fn update_step(pairs: &Pairs, ctl: &dyn Controller, out: &mut Out) -> i32 {
    let mut target: Option<(slurm_proto::JobId, Option<u32>)> = None;
    let mut limit: Option<(i8, Option<u32>)> = None;
    for ((k, v), raw) in pairs {
        match k.as_str() {
            "stepid" => {
                let (job, step) = match v.split_once('.') {
                    Some((j, s)) => (j, Some(s)),
                    None => (v.as_str(), None),
                };
                let job = job.parse::<slurm_proto::JobId>().ok();
                let step = step.map(|s| s.parse::<u32>().ok());
                match (job, step) {
                    (Some(j), Some(Some(s))) => target = Some((j, Some(s))),
                    (Some(j), None) => target = Some((j, None)),
                    _ => {
                        out.err(format!("Invalid StepID parameter: {raw}"));
                        out.err("Request aborted");
                        return 1;
                    }
                }
            }
            "timelimit" => {
                let (sign, rest) = match v.as_bytes().first() {
                    Some(b'+') => (1, &v[1..]),
                    Some(b'-') => (-1, &v[1..]),
                    _ => (0, v.as_str()),
                };
                match parse_time_limit(rest) {
                    Ok(t) => limit = Some((sign, t)),
                    Err(_) => {
                        out.err("scontrol: error: Invalid TimeLimit value");
                        return 1;
                    }
                }
            }
            _ => {
                out.err(format!("Update of this parameter is not supported: {raw}"));
                out.err("Request aborted");
                return 1;
            }
        }
    }
    let Some((sign, minutes)) = limit else {
        out.err("No changes specified");
        return 1;
    };
    let Some((job_id, step_id)) = target else {
        return 1;
    };
    // UNLIMITED travels as Slurm's INFINITE.
    let mut time_limit = minutes.unwrap_or(u32::MAX);
    if sign != 0 && step_id.is_none() {
        // No one step's limit to move from (Slurm's exits 1 silently).
        return 1;
    }
    if sign != 0 {
        let current = load_jobs(ctl, &mut Out::default())
            .unwrap_or_default()
            .iter()
            .find(|j| j.job_id == job_id)
            .and_then(|j| {
                j.steps
                    .iter()
                    .find(|s| Some(s.step_id) == step_id)
                    .map(|s| s.time_limit)
            });
        let Some(current) = current else {
            out.err(format!(
                "scontrol: error: Could not load state information for StepId={job_id}{}: Invalid job id specified",
                step_id.map(|s| format!(".{s}")).unwrap_or_default()
            ));
            return 1;
        };
        time_limit = match (current, minutes) {
            // Nothing to move an unlimited step (or by UNLIMITED) by.
            (None, _) | (_, None) => u32::MAX,
            (Some(c), Some(m)) if sign > 0 => c.saturating_add(m).min(u32::MAX - 1),
            (Some(c), Some(m)) if m > c => {
                out.err(format!(
                    "scontrol: error: TimeLimit decrement larger than current time limit ({m} > {c})"
                ));
                return 1;
            }
            (Some(c), Some(m)) => c - m,
        };
    }
    call_or_perror(
        ctl,
        out,
        "slurm_update error",
        RequestBody::UpdateStep {
            job_id,
            step_id,
            time_limit,
        },
    )
}

fn update_job(pairs: &Pairs, ctl: &dyn Controller, out: &mut Out) -> i32 {
    let mut ids = Vec::new();
    let mut updates = Vec::new();
    for ((k, v), raw) in pairs {
        match k.as_str() {
            "jobid" => {
                for id in fmt::split_list(v) {
                    let base = id.split('_').next().unwrap_or("");
                    match base.parse::<u32>() {
                        Ok(n) if n > 0 => ids.push(id),
                        _ => {
                            out.err(format!("Invalid JobId value: {id}"));
                            return 1;
                        }
                    }
                }
            }
            "timelimit" => match parse_time_limit(v) {
                Ok(t) => updates.push(JobUpdate::TimeLimit(t)),
                Err(_) => {
                    out.err(format!("Invalid TimeLimit value: {v}"));
                    return 1;
                }
            },
            "nice" => match v.parse::<i32>() {
                Ok(n) if n.unsigned_abs() < 2_147_483_645 => updates.push(JobUpdate::Nice(n)),
                _ => {
                    out.err(format!("Invalid nice value: {v}"));
                    return 1;
                }
            },
            "name" | "jobname" => updates.push(JobUpdate::Name(v.clone())),
            "comment" => updates.push(JobUpdate::Comment(v.clone())),
            "admincomment" => updates.push(JobUpdate::AdminComment(v.clone())),
            "partition" => updates.push(JobUpdate::Partition(v.clone())),
            "account" => updates.push(JobUpdate::Account(v.clone())),
            "qos" => updates.push(JobUpdate::Qos(v.clone())),
            _ => {
                out.err(format!("Update of this parameter is not supported: {raw}"));
                out.err("Request aborted");
                return 1;
            }
        }
    }
    let mut rc = 0;
    // Array ids (`N`, `N_T`, `N_[1-3]`) name their tasks.
    let jobs = if !ids.is_empty() && !updates.is_empty() {
        load_jobs(ctl, &mut Out::default()).unwrap_or_default()
    } else {
        Vec::new()
    };
    let mut targets = Vec::new();
    for w in &ids {
        match array_targets(w, &jobs, &|_| true) {
            Some(Ok(t)) => targets.extend(t.into_iter().map(|(_, id)| id)),
            Some(Err(e)) => {
                out.err(format!("slurm_update error: {e}"));
                return 1;
            }
            None => {}
        }
    }
    for id in targets {
        for u in &updates {
            match ctl.call(RequestBody::UpdateJob {
                job_id: id,
                update: u.clone(),
            }) {
                Ok(Response::Error(e)) => {
                    out.err(format!("slurm_update error: {}", e.error.message()));
                    rc = 1;
                }
                Ok(_) => {}
                Err(e) => {
                    out.err(format!("slurm_update error: {}", e.message));
                    rc = 1;
                    break;
                }
            }
        }
    }
    rc
}

/// The jobs a job id word names, as Slurm reads them: `N` (a job, or
/// every task of array `N` that `applies` takes), `N_T` (task `T` of array
/// `N`), `N_[1-3,5]` (those tasks): (label, job id) each. `None` when the
/// word is not a job id (a job name); an error names a task that does not
/// exist.
fn array_targets(
    w: &str,
    jobs: &[JobRecord],
    applies: &dyn Fn(&JobRecord) -> bool,
) -> Option<Result<Vec<(String, u32)>, String>> {
    let (base, tasks) = match w.split_once('_') {
        Some((b, t)) => (b, Some(t)),
        None => (w.split('+').next().unwrap_or(w), None),
    };
    let n = base.parse::<u32>().ok()?;
    let invalid = |label: &str| format!("{} for job {label}", SlurmError::InvalidJobId.message());
    let of_array = |j: &&JobRecord| j.array.as_ref().is_some_and(|a| a.job_id == n);
    let Some(spec) = tasks else {
        let all: Vec<(String, u32)> = jobs
            .iter()
            .filter(of_array)
            .filter(|j| applies(j))
            .map(|j| {
                (
                    format!("{n}_{}", j.array.as_ref().map_or(0, |a| a.task_id)),
                    j.job_id,
                )
            })
            .collect();
        return Some(Ok(if all.is_empty() {
            vec![(w.to_string(), n)]
        } else {
            all
        }));
    };
    let list = spec
        .strip_prefix('[')
        .and_then(|x| x.strip_suffix(']'))
        .unwrap_or(spec);
    let ids = match slurm_common::jobspec::parse_array(list, 4_000_001) {
        Ok(a) if !list.contains('%') => a.tasks,
        _ => return Some(Err(invalid(w))),
    };
    let mut out = Vec::with_capacity(ids.len());
    for t in ids {
        let label = format!("{n}_{t}");
        match jobs
            .iter()
            .filter(of_array)
            .find(|j| j.array.as_ref().is_some_and(|a| a.task_id == t))
        {
            Some(j) => out.push((label, j.job_id)),
            None => return Some(Err(invalid(&label))),
        }
    }
    Some(Ok(out))
}

/// `hold`, `uhold`, `release`, `requeue`, `requeuehold`, `suspend`,
/// `resume` over a job list (ids, or names of the caller's unfinished jobs).
fn cmd_job_list(cmd: &str, args: &[String], ctl: &dyn Controller, out: &mut Out) -> i32 {
    let words: Vec<String> = args.iter().flat_map(|a| fmt::split_list(a)).collect();
    if words.is_empty() {
        out.err(format!("too few arguments for keyword:{cmd}"));
        return 1;
    }
    let mut targets: Vec<(String, u32)> = Vec::new();
    let mut jobs_cache: Option<Vec<JobRecord>> = None;
    let mut rc = 0;
    // Which tasks of a whole array the command is for.
    let applies = |j: &JobRecord| match cmd {
        "hold" | "uhold" | "release" => j.state == slurm_proto::JobState::Pending,
        "suspend" => j.state == slurm_proto::JobState::Running,
        "resume" => j.state == slurm_proto::JobState::Suspended,
        _ => j.state != slurm_proto::JobState::Pending,
    };
    for w in words {
        if jobs_cache.is_none() {
            let mut sink = Out::default();
            jobs_cache = Some(load_jobs(ctl, &mut sink).unwrap_or_default());
        }
        let jobs = jobs_cache.as_deref().unwrap_or_default();
        match array_targets(&w, jobs, &applies) {
            Some(Ok(t)) => {
                targets.extend(t);
                continue;
            }
            Some(Err(e)) => {
                out.err(e);
                rc = 1;
                continue;
            }
            None => {}
        }
        let found: Vec<u32> = jobs_cache
            .as_ref()
            .map(|js| {
                js.iter()
                    .filter(|j| j.name == w && !j.state.is_finished())
                    .map(|j| j.job_id)
                    .collect()
            })
            .unwrap_or_default();
        if found.is_empty() {
            out.err(format!(
                "{} for job {w}",
                SlurmError::InvalidJobId.message()
            ));
            rc = 1;
        }
        targets.extend(found.into_iter().map(|id| (id.to_string(), id)));
    }
    let updates: &[JobUpdate] = match cmd {
        "hold" | "uhold" => &[JobUpdate::Hold],
        "release" => &[JobUpdate::Release],
        "requeue" => &[JobUpdate::Requeue],
        "suspend" | "resume" => &[],
        _ => &[JobUpdate::Requeue, JobUpdate::Hold],
    };
    let requests = |id: u32| -> Vec<RequestBody> {
        if matches!(cmd, "suspend" | "resume") {
            return vec![RequestBody::SuspendJob {
                job_id: id,
                suspend: cmd == "suspend",
            }];
        }
        updates
            .iter()
            .map(|u| RequestBody::UpdateJob {
                job_id: id,
                update: u.clone(),
            })
            .collect()
    };
    for (label, id) in targets {
        for body in requests(id) {
            let res = ctl.call(body);
            let msg = match res {
                Ok(Response::Error(e)) => Some(e.error.message().to_string()),
                Ok(_) => None,
                Err(e) => Some(e.message),
            };
            if let Some(m) = msg {
                out.err(format!("{m} for job {label}"));
                rc = 1;
                break;
            }
        }
    }
    rc
}

/// `scontrol token [username=NAME] [lifespan=SECONDS]`: `SLURM_JWT=...`.
fn cmd_token(rest: &[String], ctl: &dyn Controller, out: &mut Out) -> i32 {
    let (mut username, mut lifespan) = (None, None);
    for w in rest {
        match w.split_once('=') {
            Some((k, v)) if k.eq_ignore_ascii_case("username") => username = Some(v.to_string()),
            Some((k, v)) if k.eq_ignore_ascii_case("lifespan") => match v.parse::<i64>() {
                Ok(n) if n > 0 => lifespan = Some(n),
                _ => {
                    out.err(format!("Invalid lifespan value: {v}"));
                    return 1;
                }
            },
            _ => {
                out.err(format!("Invalid parameter for token: {w}"));
                return 1;
            }
        }
    }
    match ctl.call(RequestBody::GetToken { username, lifespan }) {
        Ok(Response::Token(t)) => {
            out.stdout.push_str(&format!("SLURM_JWT={t}\n"));
            0
        }
        Ok(_) => {
            out.err("slurm_request_token: Unexpected message received");
            1
        }
        Err(e) => {
            out.err(format!("slurm_request_token: {}", e.message));
            1
        }
    }
}

/// `scontrol ping`: whether each controller answers, primary first
/// (`--json`: slurmrestd's `ping` body, with each round trip in
/// microseconds). Exits 1 when any is down.
fn cmd_ping(g: &Globals, ctl: &dyn Controller, out: &mut Out) -> i32 {
    let names = ctl.controllers();
    let mut pings = Vec::new();
    let mut down = false;
    for (i, host) in names.iter().enumerate() {
        let start = std::time::Instant::now();
        let up = matches!(
            ctl.call_at(i, RequestBody::Ping),
            Ok(Response::Pong { .. }) | Ok(Response::Ok)
        );
        down |= !up;
        let mode = slurm_common::conf::SlurmConf::controller_mode(i, names.len());
        let state = if up { "UP" } else { "DOWN" };
        if g.json {
            pings.push(serde_json::json!({
                "hostname": host,
                "pinged": state,
                "responding": up,
                "latency": start.elapsed().as_micros() as i64,
                "mode": mode,
                "primary": i == 0,
            }));
        } else {
            out.stdout
                .push_str(&format!("Slurmctld({mode}) at {host} is {state}\n"));
        }
    }
    if g.json {
        let mut m = serde_json::Map::new();
        m.insert("pings".into(), serde_json::Value::Array(pings));
        out.stdout.push_str(&crate::jsonout::render(
            crate::jsonout::Body::Fields(m),
            &g.cluster,
            &g.argv,
        ));
    }
    i32::from(down)
}

/// `scontrol takeover [INDEX]`: the backup `INDEX` (default 1, the first
/// backup) takes control now, asking the controllers ahead of it to give it
/// up (root and SlurmUser).
fn cmd_takeover(rest: &[String], ctl: &dyn Controller, out: &mut Out) -> i32 {
    let count = ctl.controllers().len();
    let index = match rest {
        [] => 1,
        [n] => match n.parse::<usize>() {
            Ok(i) if i >= 1 && i < count => i,
            _ => {
                out.err(format!(
                    "Invalid backup controller index: {n} (backups are 1 to {})",
                    count.saturating_sub(1)
                ));
                return 1;
            }
        },
        _ => {
            out.err("too many arguments for keyword:takeover");
            return 1;
        }
    };
    if index >= count {
        out.err(
            "slurm_takeover error: No backup controller is configured (a second SlurmctldHost)",
        );
        return 1;
    }
    match ctl.call_at(index, RequestBody::Takeover) {
        Ok(Response::Ok) => 0,
        Ok(Response::Error(e)) => {
            out.err(format!("slurm_takeover error: {}", e.error.message()));
            1
        }
        Ok(_) => {
            out.err("slurm_takeover error: Unexpected message received");
            1
        }
        Err(e) => {
            out.err(format!("slurm_takeover error: {}", e.message));
            1
        }
    }
}

/// Runs one scontrol command (`words` after the global options).
pub fn run_command(
    words: &[String],
    g: &mut Globals,
    ctl: &dyn Controller,
    now: i64,
    tz: Tz,
    out: &mut Out,
) -> i32 {
    let Some(first) = words.first() else {
        return 0;
    };
    let rest = &words[1..];
    match pick(first, COMMANDS, 2) {
        Some("show") => cmd_show(rest, g, ctl, now, tz, out),
        Some("update") => {
            if rest.is_empty() {
                out.err("too few arguments for keyword:update");
                return 1;
            }
            cmd_update(rest, ctl, out)
        }
        Some("create") => {
            match rest.first().map(|e| e.to_ascii_lowercase()) {
                Some(e) if "reservation".starts_with(&e) && e.len() >= 3 => {
                    cmd_reservation(&rest[1..], false, ctl, now, out)
                }
                Some(e) if e.starts_with("nodename=") => cmd_create_node(rest, ctl, out),
                Some(e) if e.starts_with("partitionname=") => match pairs_of(rest, out) {
                    Some(pairs) => partition_request(&pairs, true, ctl, out),
                    None => 1,
                },
                _ => {
                    out.err("invalid entity for keyword:create (reservation, NodeName= or PartitionName=)");
                    1
                }
            }
        }
        Some("delete")
            if rest
                .iter()
                .any(|a| a.to_ascii_lowercase().starts_with("partitionname=")) =>
        {
            let mut rc = 0;
            for (k, name) in rest.iter().filter_map(|a| key_value(a)) {
                if k != "partitionname" {
                    continue;
                }
                let fail = |m: String, out: &mut Out| {
                    out.err(format!("Error deleting the partition {name}: {m}"));
                };
                match ctl.call_answer(RequestBody::DeletePartition { name: name.clone() }) {
                    Ok(Response::Ok) => {}
                    Ok(Response::Error(e)) => {
                        let m = match &e.detail {
                            Some(d) => format!("{} ({d})", e.error.message()),
                            None => e.error.message().to_string(),
                        };
                        fail(m, out);
                        rc = 1;
                    }
                    Ok(_) => rc = 1,
                    Err(f) => {
                        fail(f.message, out);
                        rc = 1;
                    }
                }
            }
            rc
        }
        Some("delete")
            if rest
                .iter()
                .any(|a| a.to_ascii_lowercase().starts_with("nodename=")) =>
        {
            let mut rc = 0;
            for a in rest {
                let Some((k, v)) = key_value(a) else { continue };
                if k != "nodename" {
                    continue;
                }
                for name in hostlist::expand(&v).unwrap_or_else(|_| vec![v.clone()]) {
                    match ctl.call(RequestBody::DeleteNode { name: name.clone() }) {
                        Ok(Response::Ok) => {}
                        Ok(Response::Error(e)) => {
                            out.err(format!(
                                "scontrol: error: Unable to delete node {name}: {}",
                                e.error.message()
                            ));
                            rc = 1;
                        }
                        Ok(_) => rc = 1,
                        Err(f) => {
                            out.err(format!(
                                "scontrol: error: Unable to delete node {name}: {}",
                                f.message
                            ));
                            rc = 1;
                        }
                    }
                }
            }
            rc
        }
        Some("delete") => {
            let name = rest
                .iter()
                .filter_map(|a| key_value(a))
                .find(|(k, _)| k == "reservation" || k == "reservationname")
                .map(|(_, v)| v);
            match name {
                Some(n) => match ctl.call(RequestBody::DeleteReservation { name: n }) {
                    Ok(Response::Ok) => 0,
                    Ok(Response::Error(e)) => {
                        out.err(format!(
                            "Error deleting the reservation: {}",
                            e.error.message()
                        ));
                        1
                    }
                    Ok(_) => 1,
                    Err(f) => {
                        out.err(format!("Error deleting the reservation: {}", f.message));
                        1
                    }
                },
                None => {
                    out.err("invalid keyword: delete needs Reservation=NAME");
                    1
                }
            }
        }
        Some(
            c @ ("hold" | "uhold" | "release" | "requeue" | "requeuehold" | "suspend" | "resume"),
        ) => cmd_job_list(c, rest, ctl, out),
        Some("ping") => cmd_ping(g, ctl, out),
        Some("takeover") => cmd_takeover(rest, ctl, out),
        Some("reboot" | "reboot_nodes") => cmd_reboot(rest, ctl, out),
        Some("cancel_reboot") => cmd_cancel_reboot(rest, ctl, out),
        Some("top") => cmd_top(rest, ctl, out),
        Some("notify") => cmd_notify(rest, ctl, out),
        Some("listpids") => cmd_listpids(rest, ctl, out),
        Some(c @ ("listjobs" | "liststeps")) => cmd_list_local(c, rest, ctl, out),
        Some("pidinfo") => cmd_pidinfo(rest, ctl, now, tz, out),
        Some("completing") => cmd_completing(rest, ctl, now, tz, out),
        // (Only the whole word, as Slurm's.)
        Some("shutdown") if first.len() < 8 => {
            out.err(format!("invalid keyword: {first}"));
            1
        }
        Some("shutdown") => cmd_shutdown(rest, ctl, out),
        Some("setdebug") => cmd_setdebug(rest, ctl, out),
        Some("setdebugflags") => cmd_setdebugflags(rest, g.quiet, ctl, out),
        Some("schedloglevel") => cmd_schedloglevel(first, rest, ctl, out),
        Some("getaddrs") => cmd_getaddrs(rest, ctl, out),
        Some("fsdampeningfactor" | "fairsharedampeningfactor") => {
            cmd_fs_dampening(first, rest, ctl, out)
        }
        Some("wait_job") => cmd_wait_job(rest, ctl, out),
        Some("write") => cmd_write(rest, ctl, out),
        Some("token") => cmd_token(rest, ctl, out),
        Some("errnumstr") => cmd_errnumstr(rest, out),
        Some("reconfigure") => match ctl.call(RequestBody::Reconfigure) {
            Ok(Response::Ok) => 0,
            Ok(_) => {
                out.err("slurm_reconfigure error: Unexpected message received");
                1
            }
            Err(e) => {
                out.err(format!("slurm_reconfigure error: {}", e.message));
                1
            }
        },
        Some("version") => {
            out.stdout
                .push_str(&format!("slurm {}\n", slurm_proto::SLURM_VERSION));
            0
        }
        Some("help") => {
            out.stdout.push_str(HELP);
            0
        }
        Some("quit" | "exit") => 0,
        Some("oneliner") => {
            g.oneliner = true;
            0
        }
        Some("details") => {
            g.details = true;
            0
        }
        Some("quiet") => {
            g.quiet = true;
            0
        }
        Some("verbose") => {
            g.verbose = true;
            0
        }
        Some("all") => {
            g.all = true;
            0
        }
        Some("hide") => {
            g.all = false;
            g.details = false;
            0
        }
        _ => {
            out.err(format!("invalid keyword: {first}"));
            1
        }
    }
}

/// `scontrol errnumstr N`: what error number `N` means (Slurm's own codes,
/// else the system's).
fn cmd_errnumstr(rest: &[String], out: &mut Out) -> i32 {
    let [n] = rest else {
        out.err(if rest.is_empty() {
            "too few arguments for keyword:errnumstr"
        } else {
            "too many arguments for keyword:errnumstr"
        });
        return 1;
    };
    let Ok(num) = n.parse::<i32>() else {
        out.err(format!("Invalid error number: {n}"));
        return 1;
    };
    out.stdout.push_str(&errnum_str(num));
    out.stdout.push('\n');
    0
}

/// The text of error number `num`, as `slurm_strerror` gives it.
pub fn errnum_str(num: i32) -> String {
    let slurm = slurm_proto::SlurmError::from_code(num);
    if slurm.code() == num {
        return slurm.message().to_string();
    }
    let os = std::io::Error::from_raw_os_error(num).to_string();
    match os.rsplit_once(" (os error ") {
        Some((text, _)) => text.to_string(),
        None => os,
    }
}

/// scontrol's options (the parser's table, also read by [`crate::compat`]).
pub(crate) const OPTS: &[crate::fmt::Opt] = {
    use crate::fmt::{Arg::*, Opt};
    &[
        Opt::new(Some('a'), "all", No),
        Opt::new(None, "cluster", Required),
        Opt::new(Some('M'), "clusters", Required),
        Opt::new(Some('d'), "details", No),
        Opt::new(Some('F'), "future", No),
        Opt::new(None, "federation", No),
        Opt::new(Some('h'), "help", No),
        Opt::new(None, "hide", No),
        Opt::new(None, "json", Attached),
        Opt::new(None, "local", No),
        Opt::new(Some('o'), "oneliner", No),
        Opt::new(Some('Q'), "quiet", No),
        Opt::new(None, "sibling", No),
        Opt::new(None, "usage", No),
        Opt::new(Some('v'), "verbose", No),
        Opt::new(Some('V'), "version", No),
        Opt::new(None, "yaml", Attached),
    ]
};

pub(crate) const COMPAT_NOTES: &[(&str, crate::compat::Support)] = &[
    (
        "all",
        crate::compat::Support::Differs(
            "root and SlurmUser see hidden partitions without it; operators named only in accounting need it",
        ),
    ),
    (
        "clusters",
        crate::compat::Support::Differs("one cluster per controller: the name is not checked"),
    ),
    (
        "cluster",
        crate::compat::Support::Differs("one cluster per controller: the name is not checked"),
    ),
    (
        "federation",
        crate::compat::Support::Differs("no federations: nothing to add"),
    ),
    (
        "sibling",
        crate::compat::Support::Differs("no federations: nothing to add"),
    ),
];

/// The commands and `show` entities scontrol knows, for [`crate::compat`].
pub(crate) fn compat_words() -> Vec<String> {
    let mut w: Vec<String> = COMMANDS.iter().map(|c| format!("cmd {c}")).collect();
    w.extend(SHOW_ENTITIES.iter().map(|e| {
        // The man page names them in the singular.
        let one = match *e {
            "jobs" | "steps" | "nodes" | "partitions" | "reservations" => e.trim_end_matches('s'),
            other => other,
        };
        format!("entity show {one}")
    }));
    for e in ["job", "step", "node", "partition", "reservation"] {
        w.push(format!("entity update {e}"));
    }
    for e in ["node", "partition", "reservation"] {
        w.push(format!("entity create {e}"));
        w.push(format!("entity delete {e}"));
    }
    w.push("entity write batch_script".to_string());
    w.push("entity show topoconf".to_string());
    // Interactive mode repeats the last command.
    w.push("cmd !!".to_string());
    w
}

/// Parsed command line: global options (anywhere, as getopt permutes them)
/// and the command words.
fn parse_globals(args: &[String]) -> Result<(Globals, Vec<String>, Option<String>), String> {
    parse_globals_env(args, &|k| std::env::var(k).ok())
}

/// [`parse_globals`] with the environment as `env` gives it (`SLURM_JSON`,
/// `SLURM_YAML`).
pub(crate) fn parse_globals_env(
    args: &[String],
    env: &dyn Fn(&str) -> Option<String>,
) -> Result<(Globals, Vec<String>, Option<String>), String> {
    let try_help = "Try \"scontrol --help\" for more information";
    let version = || Some(format!("slurm {}\n", slurm_proto::SLURM_VERSION));
    let mut g = Globals {
        json: crate::jsonout::env_wants(env).map_err(|e| format!("scontrol: error: {e}"))?,
        all: env("SCONTROL_ALL").is_some(),
        future: env("SCONTROL_FUTURE").is_some(),
        ..Globals::default()
    };
    // One cluster per controller and no federations: these change nothing
    // (as the options --local, --federation, --sibling and -M).
    for v in [
        "SCONTROL_LOCAL",
        "SCONTROL_FEDERATION",
        "SCONTROL_SIBLING",
        "SLURM_CLUSTERS",
    ] {
        let _ = env(v);
    }
    let mut words = Vec::new();
    // After `setdebugflags`, `-NAME` is a flag to take away, never an
    // option (as Slurm's scontrol reads it).
    let (args, after) = match args
        .iter()
        .position(|a| a.len() >= 8 && "setdebugflags".starts_with(a.to_ascii_lowercase().as_str()))
    {
        Some(i) => (&args[..i], &args[i..]),
        None => (args, &args[args.len()..]),
    };
    let parsed =
        crate::fmt::getopt("scontrol", args, OPTS).map_err(|e| format!("{e}\n{try_help}"))?;
    for p in parsed {
        let (name, v) = match p {
            crate::fmt::Parsed::Word(w) => {
                words.push(w);
                continue;
            }
            crate::fmt::Parsed::Opt(n, v) => (n, v),
        };
        match name {
            "oneliner" => g.oneliner = true,
            "json" | "yaml" => {
                crate::jsonout::check_parser(v.as_deref())
                    .map_err(|e| format!("scontrol: error: {e}"))?;
                g.json = true;
            }
            "details" => g.details = true,
            "all" => g.all = true,
            "future" => g.future = true,
            "hide" => {
                g.all = false;
                g.details = false;
            }
            "quiet" => g.quiet = true,
            "verbose" => g.verbose = true,
            "version" => return Ok((g, vec![], version())),
            "help" | "usage" => return Ok((g, vec![], Some(HELP.to_string()))),
            // --local, -M/--federation/--sibling: one cluster.
            _ => {}
        }
    }
    words.extend(after.iter().cloned());
    Ok((g, words, None))
}

/// Runs scontrol with `args` (without the program name) against `ctl`.
pub fn run(args: &[String], ctl: &dyn Controller, now: i64, tz: Tz) -> (i32, Out) {
    let mut out = Out::default();
    match parse_globals(args) {
        Err(e) => {
            out.err(e);
            (1, out)
        }
        Ok((_, _, Some(text))) => {
            out.stdout.push_str(&text);
            (0, out)
        }
        Ok((mut g, words, None)) => {
            let rc = run_command(&words, &mut g, ctl, now, tz, &mut out);
            (rc, out)
        }
    }
}

/// `scontrol`'s entry point; returns the exit code.
pub fn main() -> i32 {
    use std::io::Write;
    let args: Vec<String> = std::env::args().skip(1).collect();
    let (mut g, words) = match parse_globals(&args) {
        Err(e) => {
            eprintln!("{e}");
            return 1;
        }
        Ok((_, _, Some(text))) => {
            print!("{text}");
            return 0;
        }
        Ok((g, words, None)) => (g, words),
    };
    let conf = match crate::common::load_conf("scontrol") {
        Ok(c) => c,
        Err(code) => return code,
    };
    let host = conf
        .slurmctld_hosts
        .first()
        .map(|h| h.name.clone())
        .unwrap_or_else(|| conf.ctld_address());
    let ctl = Real {
        client: crate::common::client(&conf),
        host,
        conf: conf.clone(),
    };
    g.cluster = conf.cluster_name.clone();
    // SAFETY: getuid has no preconditions and cannot fail.
    let uid = unsafe { libc::getuid() };
    g.privileged = uid == 0
        || slurm_common::users::user_by_name(&conf.slurm_user).is_some_and(|u| u.uid == uid);
    g.argv = std::iter::once("scontrol".to_string())
        .chain(args.iter().cloned())
        .collect();
    let emit = |out: &Out| {
        print!("{}", out.stdout);
        eprint!("{}", out.stderr);
        let _ = std::io::stdout().flush();
    };
    if !words.is_empty() {
        let mut out = Out::default();
        let rc = run_command(
            &words,
            &mut g,
            &ctl,
            crate::common::now(),
            Tz::Local,
            &mut out,
        );
        emit(&out);
        return rc;
    }
    // Interactive mode.
    let mut rc = 0;
    crate::common::read_commands("scontrol", |words| {
        if matches!(pick(&words[0], COMMANDS, 2), Some("quit" | "exit")) {
            return false;
        }
        let mut out = Out::default();
        rc = run_command(
            &words,
            &mut g,
            &ctl,
            crate::common::now(),
            Tz::Local,
            &mut out,
        );
        emit(&out);
        true
    });
    rc
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sinfo::tests::{debug_partition, node, nodes, T_BOOT};
    use crate::squeue::tests::{job, reference_jobs, running, T_NOW, T_START, T_SUBMIT};
    use slurm_proto::{JobReason, JobState, NodeBaseState, RpcError};
    use std::cell::RefCell;

    fn so() -> ShowOpts {
        ShowOpts {
            now: T_NOW,
            tz: Tz::Utc,
            oneliner: false,
        }
    }

    /// The reference shows a session id we do not record.
    fn golden(s: &str) -> String {
        s.replace("AllocNode:Sid=localhost:2546", "AllocNode:Sid=localhost:*")
    }

    #[test]
    fn show_job_running_matches_slurm() {
        let j = running(6, "long1", "n1");
        assert_eq!(
            show_job(&j, Some(4000), &so()),
            golden(include_str!(
                "../tests/golden/scontrol-show-job-running.out"
            ))
        );
    }

    #[test]
    fn show_job_pending_matches_slurm() {
        let j = job(9, "waitres", JobState::Pending, JobReason::Resources, 11333);
        assert_eq!(
            show_job(&j, Some(4000), &so()),
            golden(include_str!(
                "../tests/golden/scontrol-show-job-pending.out"
            ))
        );
    }

    #[test]
    fn show_job_cancelled_matches_slurm() {
        let mut j = running(6, "long1", "n1");
        j.state = JobState::Cancelled;
        j.cancelled = true;
        j.end_time = Some(T_NOW);
        j.exit_status = 15;
        let o = ShowOpts {
            now: T_NOW + 30,
            ..so()
        };
        assert_eq!(
            show_job(&j, None, &o),
            golden(include_str!(
                "../tests/golden/scontrol-show-job-cancelled.out"
            ))
        );
    }

    #[test]
    fn show_job_details_and_oneliner() {
        let mut j = job(12, "later", JobState::Pending, JobReason::BeginTime, 1);
        j.time_limit = Some(60);
        let d = std::sync::Arc::make_mut(&mut j.desc);
        d.begin_time = Some(T_SUBMIT + 3600);
        d.std_out = Some("out-%j-%x.txt".into());
        d.std_err = None;
        d.mem_per_node = Some(8192);
        d.req_nodes = vec!["n2".into(), "n1".into()];
        let o = ShowOpts {
            oneliner: true,
            ..so()
        };
        let s = show_job(&j, Some(4000), &o);
        assert!(s.ends_with(" Power= \n"), "{s}");
        assert_eq!(s.lines().count(), 1);
        for want in [
            "StartTime=2026-11-22T06:37:34 EndTime=2026-11-22T07:37:34",
            "TimeLimit=01:00:00",
            "ReqNodeList=n[1-2]",
            "TRES=cpu=4,mem=8G,node=1,billing=4",
            "MinMemoryNode=8G",
            "StdOut=/home/alice/jobs/out-12-later.txt",
            "StdErr=/home/alice/jobs/out-12-later.txt",
        ] {
            assert!(s.contains(want), "missing {want} in {s}");
        }
    }

    #[test]
    fn show_node_matches_slurm() {
        assert_eq!(
            show_node(&node("n1"), &so()),
            include_str!("../tests/golden/scontrol-show-node.out")
        );
        let mut n = node("n1");
        n.base_state = NodeBaseState::Allocated;
        n.alloc_cpus = 4;
        n.last_busy = Some(T_SUBMIT);
        assert_eq!(
            show_node(&n, &so()),
            include_str!("../tests/golden/scontrol-show-node-busy.out")
        );
    }

    #[test]
    fn show_node_reason_and_unregistered() {
        let mut n = node("n2");
        n.flags.drain = true;
        n.reason = Some("maint".into());
        n.reason_uid = Some(0);
        n.reason_time = Some(T_BOOT);
        let s = show_node(&n, &so());
        assert!(s.contains("State=IDLE+DRAIN "));
        assert!(
            s.ends_with("\n   Reason=maint [root@2026-11-22T04:39:11]\n\n"),
            "{s}"
        );
        let mut n = node("n3");
        n.os = None;
        n.cpu_load = None;
        n.free_mem = None;
        n.version = None;
        n.boot_time = None;
        let s = show_node(&n, &so());
        assert!(!s.contains("OS="));
        assert!(s.contains("CPULoad=N/A"));
        assert!(s.contains("FreeMem=N/A"));
        assert!(s.contains("Version=(null)"));
        assert!(s.contains("BootTime=None"));
    }

    #[test]
    fn show_partition_matches_slurm() {
        assert_eq!(
            show_partition(&debug_partition(), &so()),
            include_str!("../tests/golden/scontrol-show-partition.out")
        );
    }

    #[test]
    fn show_config_layout() {
        let c = ConfigDump {
            entries: vec![
                ("AccountingStorageHost".into(), "localhost".into()),
                ("AccountingStorageBackupHost".into(), "(null)".into()),
            ],
            boot_time: T_BOOT,
        };
        assert_eq!(
            show_config(&c, T_NOW, Tz::Utc),
            "Configuration data as of 2026-11-22T05:37:41\n\
             AccountingStorageHost   = localhost\n\
             AccountingStorageBackupHost = (null)\n"
        );
    }

    /// A controller answering from fixed records and logging updates.
    struct Fake {
        up: bool,
        calls: RefCell<Vec<String>>,
    }

    impl Controller for Fake {
        fn call(&self, body: RequestBody) -> Result<Response, CallFail> {
            if !self.up {
                return Err(CallFail {
                    message: "Unable to contact slurm controller (connect failure)".into(),
                    net: true,
                });
            }
            let err = |e: SlurmError| Ok(Response::Error(RpcError::from(e)));
            match body {
                RequestBody::Ping => Ok(Response::Pong {
                    controller: "vm".into(),
                    standby: false,
                }),
                RequestBody::GetJobs => Ok(Response::Jobs {
                    jobs: reference_jobs(),
                    last_update: T_NOW,
                }),
                RequestBody::GetJobScript { job_id: 9 } => {
                    Ok(Response::JobScript("#!/bin/sh\ntrue\n".into()))
                }
                RequestBody::GetJobScript { .. } => err(SlurmError::InvalidJobId),
                RequestBody::GetJobsBrief(f) => Ok(Response::Jobs {
                    jobs: reference_jobs()
                        .into_iter()
                        .filter(|j| f.as_ref().is_none_or(|f| f.matches(j)))
                        .collect(),
                    last_update: T_NOW,
                }),
                RequestBody::GetNodes => Ok(Response::Nodes {
                    nodes: nodes(),
                    last_update: T_NOW,
                }),
                RequestBody::GetPartitions => Ok(Response::Partitions {
                    partitions: vec![debug_partition()],
                    last_update: T_NOW,
                }),
                RequestBody::UpdateJob { job_id, update } => {
                    self.calls.borrow_mut().push(format!("{job_id} {update:?}"));
                    match (job_id, &update) {
                        (6..=12, JobUpdate::Hold) if job_id <= 8 => err(SlurmError::JobNotPending),
                        (6..=12, _) => Ok(Response::Ok),
                        _ => err(SlurmError::InvalidJobId),
                    }
                }
                RequestBody::SetDebugFlags { plus, minus } => {
                    self.calls
                        .borrow_mut()
                        .push(format!("flags +{plus:#x} -{minus:#x}"));
                    Ok(Response::Ok)
                }
                RequestBody::SetSchedLogLevel { level } => {
                    self.calls.borrow_mut().push(format!("schedlog {level}"));
                    Ok(Response::Ok)
                }
                RequestBody::SetFsDampeningFactor { factor } => {
                    self.calls.borrow_mut().push(format!("dampening {factor}"));
                    match factor {
                        13 => err(SlurmError::AccessDenied),
                        _ => Ok(Response::Ok),
                    }
                }
                RequestBody::UpdateStep {
                    job_id,
                    step_id,
                    time_limit,
                } => {
                    self.calls
                        .borrow_mut()
                        .push(format!("step {job_id} {step_id:?} {time_limit}"));
                    match job_id {
                        9 => Ok(Response::Ok),
                        _ => err(SlurmError::InvalidJobId),
                    }
                }
                RequestBody::UpdateNode {
                    names,
                    state,
                    reason,
                    ..
                } => {
                    self.calls
                        .borrow_mut()
                        .push(format!("{names:?} {state:?} {reason:?}"));
                    if names.iter().all(|n| n.starts_with('n') && n.len() == 2) {
                        Ok(Response::Ok)
                    } else {
                        err(SlurmError::InvalidNodeName)
                    }
                }
                _ => err(SlurmError::InvalidRequest),
            }
        }
        fn controllers(&self) -> Vec<String> {
            vec!["vm".into()]
        }
        fn call_at(&self, i: usize, body: RequestBody) -> Result<Response, CallFail> {
            assert_eq!(i, 0, "the fake has one controller");
            self.call(body)
        }
    }

    fn fake() -> Fake {
        Fake {
            up: true,
            calls: RefCell::new(vec![]),
        }
    }

    /// Array ids as Slurm reads them: the whole array, one task, a range.
    #[test]
    fn array_ids_name_their_tasks() {
        let task = |id: u32, t: u32, st: JobState| {
            let mut j = job(id, "a", st, JobReason::None, 1);
            j.array = Some(slurm_proto::ArrayInfo {
                job_id: 20,
                task_id: t,
                task_count: 4,
                task_min: 0,
                task_max: 3,
                task_step: None,
                max_running: None,
            });
            j
        };
        let jobs = vec![
            task(20, 0, JobState::Running),
            task(21, 1, JobState::Pending),
            task(22, 2, JobState::Pending),
            task(23, 3, JobState::Pending),
            job(30, "plain", JobState::Pending, JobReason::None, 1),
        ];
        let pending = |j: &JobRecord| j.state == JobState::Pending;
        let ids = |w: &str| -> Vec<u32> {
            array_targets(w, &jobs, &pending)
                .unwrap()
                .unwrap()
                .into_iter()
                .map(|(_, id)| id)
                .collect()
        };
        // The whole array: its pending tasks (not task 0, running).
        assert_eq!(ids("20"), vec![21, 22, 23]);
        // One task is that task's job, not the array's first.
        assert_eq!(ids("20_2"), vec![22]);
        assert_eq!(ids("20_[1-2]"), vec![21, 22]);
        assert_eq!(ids("20_[1,3]"), vec![21, 23]);
        assert_eq!(ids("30"), vec![30]);
        let e = array_targets("20_9", &jobs, &pending).unwrap().unwrap_err();
        assert_eq!(e, "Invalid job id specified for job 20_9");
        assert!(array_targets("20_x", &jobs, &pending).unwrap().is_err());
        assert!(array_targets("myjob", &jobs, &pending).is_none());
    }

    fn sc(ctl: &Fake, args: &[&str]) -> (i32, String, String) {
        let args: Vec<String> = args.iter().map(|s| s.to_string()).collect();
        let (rc, out) = run(&args, ctl, T_NOW, Tz::Utc);
        (rc, out.stdout, out.stderr)
    }

    #[test]
    fn write_batch_script_to_stdout_or_a_file() {
        let f = fake();
        assert_eq!(
            sc(&f, &["write", "batch_script", "9", "-"]),
            (0, "#!/bin/sh\ntrue\n".into(), String::new())
        );
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("s.sh");
        let (rc, out, _) = sc(&f, &["write", "batch_script", "9", file.to_str().unwrap()]);
        assert_eq!(rc, 0);
        assert!(
            out.starts_with("batch script for job 9 written to "),
            "{out}"
        );
        assert_eq!(std::fs::read_to_string(&file).unwrap(), "#!/bin/sh\ntrue\n");
        let (rc, _, err) = sc(&f, &["write", "batch_script", "8", "-"]);
        assert_eq!(rc, 1);
        assert_eq!(
            err,
            "slurm_job_batch_script error: Invalid job id specified\n"
        );
        assert_eq!(sc(&f, &["write", "config"]).0, 1);
    }

    #[test]
    fn wait_job_returns_when_the_job_runs_or_has_ended() {
        let f = fake();
        let jobs = reference_jobs();
        let running = jobs.iter().find(|j| j.state == JobState::Running).unwrap();
        let ended = jobs.iter().find(|j| j.state.is_finished());
        assert_eq!(sc(&f, &["wait_job", &running.job_id.to_string()]).0, 0);
        if let Some(e) = ended {
            let (rc, _, err) = sc(&f, &["wait_job", &e.job_id.to_string()]);
            assert_eq!(
                (rc, err),
                (1, format!("Job {} no longer running\n", e.job_id))
            );
        }
        let (rc, _, err) = sc(&f, &["wait_job", "4242"]);
        assert_eq!(rc, 1);
        assert_eq!(
            err,
            "slurm_job_node_ready error: Invalid job id specified\n"
        );
        assert_eq!(sc(&f, &["wait_job", "x"]).0, 1);
    }

    #[test]
    fn errnumstr_says_what_a_number_means() {
        let f = fake();
        let (rc, out, _) = sc(&f, &["errnumstr", "2017"]);
        assert_eq!((rc, out.as_str()), (0, "Invalid job id specified\n"));
        let (rc, out, _) = sc(&f, &["errnum", "2"]);
        assert_eq!((rc, out.as_str()), (0, "No such file or directory\n"));
        let (rc, out, _) = sc(&f, &["errnumstr", "7777"]);
        assert_eq!((rc, out.as_str()), (0, "Unknown error 7777\n"));
        let (rc, _, err) = sc(&f, &["errnumstr", "x"]);
        assert_eq!((rc, err.as_str()), (1, "Invalid error number: x\n"));
        let (rc, _, err) = sc(&f, &["errnumstr"]);
        assert_eq!(
            (rc, err.as_str()),
            (1, "too few arguments for keyword:errnumstr\n")
        );
    }

    #[test]
    fn show_commands_and_errors() {
        let f = fake();
        let (rc, out, _) = sc(&f, &["show", "job", "9"]);
        assert_eq!(rc, 0);
        assert_eq!(
            out,
            golden(include_str!(
                "../tests/golden/scontrol-show-job-pending.out"
            ))
        );
        let (rc, out, err) = sc(&f, &["show", "job", "999999"]);
        assert_eq!((rc, out.as_str()), (1, ""));
        assert_eq!(
            err,
            include_str!("../tests/golden/scontrol-show-job-nonexistent.err")
        );
        let (rc, _, err) = sc(&f, &["sho", "jobs", "abc"]);
        assert_eq!(
            (rc, err.as_str()),
            (1, "slurm_load_jobs error: Invalid job id specified\n")
        );
        let (rc, out, _) = sc(&f, &["SHOW", "Node", "n1"]);
        assert_eq!(
            (rc, out.as_str()),
            (0, include_str!("../tests/golden/scontrol-show-node.out"))
        );
        let (rc, out, _) = sc(&f, &["show", "node", "n9"]);
        assert_eq!((rc, out.as_str()), (1, "Node n9 not found\n"));
        let (rc, out, _) = sc(&f, &["show", "partition", "foo"]);
        assert_eq!((rc, out.as_str()), (1, "Partition foo not found\n"));
        let (rc, out, _) = sc(&f, &["show", "part"]);
        assert_eq!(
            (rc, out.as_str()),
            (
                0,
                include_str!("../tests/golden/scontrol-show-partition.out")
            )
        );
        assert_eq!(
            sc(&f, &["-o", "show", "nodes"]),
            sc(&f, &["show", "nodes", "--oneliner"])
        );
        let (rc, out, _) = sc(&f, &["-o", "show", "nodes"]);
        assert_eq!(rc, 0);
        assert_eq!(out.lines().count(), 3);
        assert!(out.starts_with("NodeName=n1 Arch=x86_64 CoresPerSocket=1  CPUAlloc=0 "));
        let (rc, _, err) = sc(&f, &["show", "bogus"]);
        assert_eq!(
            (rc, err.as_str()),
            (1, "invalid entity:bogus for keyword:show \n")
        );
        let (rc, _, err) = sc(&f, &["frobnicate"]);
        assert_eq!((rc, err.as_str()), (1, "invalid keyword: frobnicate\n"));
        let (rc, out, _) = sc(&f, &["show", "hostnames", "n[1-3]"]);
        assert_eq!((rc, out.as_str()), (0, "n1\nn2\nn3\n"));
        let (rc, out, _) = sc(&f, &["show", "hostlist", "n1,n2,n3"]);
        assert_eq!((rc, out.as_str()), (0, "n[1-3]\n"));
        let (rc, _, err) = sc(
            &Fake {
                up: false,
                calls: RefCell::new(vec![]),
            },
            &["show", "job"],
        );
        assert_eq!(
            (rc, err.as_str()),
            (
                1,
                "slurm_load_jobs error: Unable to contact slurm controller (connect failure)\n"
            )
        );
    }

    #[test]
    fn ping_and_version() {
        assert_eq!(
            sc(&fake(), &["ping"]),
            (0, "Slurmctld(primary) at vm is UP\n".into(), String::new())
        );
        let down = Fake {
            up: false,
            calls: RefCell::new(vec![]),
        };
        assert_eq!(
            sc(&down, &["ping"]),
            (
                1,
                "Slurmctld(primary) at vm is DOWN\n".into(),
                String::new()
            )
        );
        // --json: slurmrestd's ping body.
        let (rc, out, _) = sc(&fake(), &["--json", "ping"]);
        assert_eq!(rc, 0);
        let v: serde_json::Value = serde_json::from_str(&out).unwrap();
        assert_eq!(v["pings"][0]["hostname"], "vm");
        assert_eq!(v["pings"][0]["pinged"], "UP");
        assert_eq!(v["pings"][0]["mode"], "primary");
        assert!(v["pings"][0]["latency"].is_i64());
        let (rc, out, _) = sc(&down, &["ping", "--json"]);
        assert_eq!(rc, 1);
        let v: serde_json::Value = serde_json::from_str(&out).unwrap();
        assert_eq!(v["pings"][0]["pinged"], "DOWN");
        assert_eq!(sc(&fake(), &["version"]).1, "slurm 25.11.0\n");
        assert_eq!(sc(&fake(), &["-V"]).1, "slurm 25.11.0\n");
        assert_eq!(sc(&fake(), &["--version"]).1, "slurm 25.11.0\n");
        let (rc, _, err) = sc(&fake(), &["-z"]);
        assert_eq!(rc, 1);
        assert_eq!(
            err,
            "scontrol: invalid option -- 'z'\nTry \"scontrol --help\" for more information\n"
        );
    }

    #[test]
    fn update_node() {
        let f = fake();
        let (rc, _, err) = sc(&f, &["update", "NodeName=n[1-2]", "State=DRAIN"]);
        assert_eq!(rc, 1);
        assert_eq!(
            err,
            "You must specify a reason when DOWNING or DRAINING a node. Request denied\n"
        );
        assert!(f.calls.borrow().is_empty());
        let (rc, _, err) = sc(
            &f,
            &[
                "update",
                "nodename=n[1-2]",
                "state=drain",
                "reason=maint work",
            ],
        );
        assert_eq!((rc, err.as_str()), (0, ""));
        let (rc, _, _) = sc(&f, &["update", "NodeName=n3", "State=RESUME"]);
        assert_eq!(rc, 0);
        assert_eq!(
            *f.calls.borrow(),
            vec![
                "[\"n1\", \"n2\"] Some(Drain) Some(\"maint work\")".to_string(),
                "[\"n3\"] Some(Resume) None".to_string(),
            ]
        );
        let (rc, _, err) = sc(&f, &["update", "NodeName=foo9", "State=idle"]);
        assert_eq!(
            (rc, err.as_str()),
            (1, "slurm_update error: Invalid node name specified\n")
        );
        let (rc, _, err) = sc(&f, &["update", "NodeName=n1", "State=sleepy"]);
        assert_eq!(rc, 1);
        assert!(err.starts_with("Invalid input: State=sleepy\nRequest aborted\n"));
        let (rc, _, err) = sc(&f, &["update", "NodeName=n1", "Weight=5"]);
        assert_eq!(rc, 1);
        assert!(err.starts_with("Update of this parameter is not supported: Weight=5\n"));
        let (rc, _, err) = sc(&f, &["update", "foo=bar"]);
        assert_eq!(rc, 1);
        assert!(err.starts_with("No valid entity in update command\n"));
    }

    /// `setdebugflags`: what reaches the controller (a `-NAME` is a flag,
    /// never an option) and Slurm's texts for what is wrong.
    #[test]
    fn schedloglevel_words_and_errors() {
        let f = fake();
        for (arg, level) in [("1", 1), ("0", 0), ("ENABLE", 1), ("disable", 0)] {
            let (rc, _, err) = sc(&f, &["schedloglevel", arg]);
            assert_eq!((rc, err.as_str()), (0, ""), "{arg}");
            assert_eq!(
                f.calls.borrow_mut().pop(),
                Some(format!("schedlog {level}"))
            );
        }
        // (Slurm's shortest form; its errors name the keyword as typed.)
        let (rc, _, _) = sc(&f, &["sch", "1"]);
        assert_eq!(rc, 0);
        let (rc, _, err) = sc(&f, &["sch"]);
        assert_eq!(
            (rc, err.as_str()),
            (1, "too few arguments for keyword:sch\n")
        );
        f.calls.borrow_mut().clear();
        let cases: &[(&[&str], &str)] = &[
            (
                &["schedloglevel"],
                "too few arguments for keyword:schedloglevel\n",
            ),
            (
                &["schedloglevel", "1", "2"],
                "too many arguments for keyword:schedloglevel\n",
            ),
            (&["schedloglevel", "2"], "invalid schedlog level: 2\n"),
            (&["schedloglevel", "on"], "invalid schedlog level: on\n"),
        ];
        for (args, want) in cases {
            let (rc, _, err) = sc(&f, args);
            assert_eq!((rc, err.as_str()), (1, *want), "{args:?}");
        }
        assert!(f.calls.borrow().is_empty(), "nothing sent for bad levels");
    }

    #[test]
    fn setdebugflags_words_and_errors() {
        let f = fake();
        let (rc, _, err) = sc(&f, &["setdebugflags", "+Backfill", "-gres", "+TraceJobs"]);
        assert_eq!((rc, err.as_str()), (0, ""));
        let (rc, _, err) = sc(&f, &["-o", "setdebugflags", "-Steps"]);
        assert_eq!((rc, err.as_str()), (0, ""));
        let cases: &[(&[&str], &str)] = &[
            (&["setdebugflags"], "too few arguments for keyword:setdebugflags\n"),
            (&["setdebugflags", "+Loud"], "invalid debug flag: +Loud\n"),
            (
                &["setdebugflags", "Backfill"],
                "invalid debug flag: Backfill\nUsage: setdebugflags {+|-}NAME [{+|-}NAME] [nodes=<NODES>]\n",
            ),
            (&["-Q", "setdebugflags", "Backfill"], "invalid debug flag: Backfill\n"),
            (
                &["setdebugflags", "+Steps", "nodes=n1"],
                "Failed to set DebugFlags on one or more nodes.\n",
            ),
        ];
        for (args, want) in cases {
            let (rc, _, err) = sc(&f, args);
            assert_eq!((rc, err.as_str()), (1, *want), "{args:?}");
        }
        let b = |n: &str| slurm_common::debugflags::DebugFlags::parse(n).unwrap().0;
        assert_eq!(
            *f.calls.borrow(),
            vec![
                format!("flags +{:#x} -{:#x}", b("Backfill,TraceJobs"), b("Gres")),
                format!("flags +0x0 -{:#x}", b("Steps")),
            ]
        );
    }

    /// `fsdampeningfactor N`: what reaches the controller, Slurm's texts
    /// for what is wrong and for the controller's refusal.
    #[test]
    fn fsdampeningfactor_words_and_errors() {
        let f = fake();
        assert_eq!(sc(&f, &["fsdampeningfactor", "3"]).0, 0);
        assert_eq!(sc(&f, &["fairsharedampeningfactor", "4"]).0, 0);
        let cases: &[(&[&str], &str)] = &[
            (
                &["fsdamp"],
                "too few arguments for keyword:fsdamp
",
            ),
            (
                &["fsdampeningfactor", "1", "2"],
                "too many arguments for keyword:fsdampeningfactor
",
            ),
            (
                &["fsdampeningfactor", "0"],
                "invalid dampening factor: 0
",
            ),
            (
                &["fsdampeningfactor", "2x"],
                "invalid dampening factor: 2x
",
            ),
            (
                &["fsdampeningfactor", "70000"],
                "invalid dampening factor: 70000
",
            ),
            (
                &["fsdampeningfactor", "13"],
                "slurm_set_fs_dampeningfactor error:Access/permission denied
",
            ),
        ];
        for (args, want) in cases {
            let (rc, _, err) = sc(&f, args);
            assert_eq!((rc, err.as_str()), (1, *want), "{args:?}");
        }
        assert_eq!(
            *f.calls.borrow(),
            vec!["dampening 3", "dampening 4", "dampening 13"]
        );
    }

    /// `show slurmd` in Slurm's layout.
    #[test]
    fn show_slurmd_layout() {
        let s = slurm_proto::SlurmdStatus {
            steps: vec!["5".into(), "5.0".into()],
            cpus: 4,
            boards: 1,
            sockets: 2,
            cores: 2,
            threads: 1,
            real_memory: 1987,
            tmp_disk: 9951,
            boot_time: T_BOOT,
            hostname: "n1".into(),
            last_ctld_msg: None,
            pid: 77,
            debug: 3,
            log_file: Some("/var/log/slurmd.log".into()),
            version: "25.11.0".into(),
        };
        assert_eq!(
            show_slurmd(&s, Tz::Utc),
            "Active Steps             = 5, 5.0\n\
             Actual CPUs              = 4\n\
             Actual Boards            = 1\n\
             Actual sockets           = 2\n\
             Actual cores             = 2\n\
             Actual threads per core  = 1\n\
             Actual real memory       = 1987 MB\n\
             Actual temp disk space   = 9951 MB\n\
             Boot time                = 2026-11-22T04:39:11\n\
             Hostname                 = n1\n\
             Last slurmctld msg time  = NONE\n\
             Slurmd PID               = 77\n\
             Slurmd Debug             = 3\n\
             Slurmd Logfile           = /var/log/slurmd.log\n\
             Version                  = 25.11.0\n"
        );
        let idle = slurm_proto::SlurmdStatus { steps: vec![], ..s };
        assert!(show_slurmd(&idle, Tz::Utc).starts_with("Active Steps             = NONE\n"));
    }

    /// `update StepId=...`: what reaches the controller, and Slurm's texts
    /// for what is wrong (nothing sent then).
    #[test]
    fn update_step_time_limits() {
        let f = fake();
        let ok = |args: &[&str]| {
            let (rc, _, err) = sc(&f, args);
            assert_eq!((rc, err.as_str()), (0, ""), "{args:?}");
        };
        ok(&["update", "StepId=9.0", "TimeLimit=10"]);
        ok(&["update", "stepid=9", "timelimit=1-00:00:00"]);
        ok(&["update", "StepId=9.1", "TimeLimit=UNLIMITED"]);
        let cases: &[(&[&str], &str)] = &[
            (
                &["update", "StepId=999.0", "TimeLimit=5"],
                "slurm_update error: Invalid job id specified\n",
            ),
            (
                &["update", "StepId=9.x", "TimeLimit=5"],
                "Invalid StepID parameter: StepId=9.x\nRequest aborted\n",
            ),
            (
                &["update", "StepId=9x", "TimeLimit=5"],
                "Invalid StepID parameter: StepId=9x\nRequest aborted\n",
            ),
            (
                &["update", "StepId=9.0", "TimeLimit=soon"],
                "scontrol: error: Invalid TimeLimit value\n",
            ),
            (
                &["update", "StepId=9.0", "Nodes=n1"],
                "Update of this parameter is not supported: Nodes=n1\nRequest aborted\n",
            ),
            (&["update", "StepId=9.0"], "No changes specified\n"),
            (
                &["update", "StepId=9.0", "TimeLimit=+5"],
                "scontrol: error: Could not load state information for StepId=9.0: Invalid job id specified\n",
            ),
        ];
        for (args, want) in cases {
            let (rc, _, err) = sc(&f, args);
            assert_eq!((rc, err.as_str()), (1, *want), "{args:?}");
        }
        assert_eq!(
            *f.calls.borrow(),
            vec![
                "step 9 Some(0) 10",
                "step 9 None 1440",
                format!("step 9 Some(1) {}", u32::MAX).as_str(),
                "step 999 Some(0) 5",
            ]
        );
    }

    #[test]
    fn update_job_and_holds() {
        let f = fake();
        let (rc, _, err) = sc(
            &f,
            &[
                "update",
                "JobId=9",
                "TimeLimit=1:00:00",
                "Nice=10",
                "name=x",
            ],
        );
        assert_eq!((rc, err.as_str()), (0, ""));
        let (rc, _, err) = sc(&f, &["update", "jobid=999999", "timelimit=10"]);
        assert_eq!(
            (rc, err.as_str()),
            (1, "slurm_update error: Invalid job id specified\n")
        );
        let (rc, _, err) = sc(&f, &["update", "jobid=9", "timelimit=soon"]);
        assert_eq!((rc, err.as_str()), (1, "Invalid TimeLimit value: soon\n"));
        let (rc, _, err) = sc(&f, &["hold", "9,10", "12"]);
        assert_eq!((rc, err.as_str()), (0, ""));
        let (rc, _, err) = sc(&f, &["hold", "6"]);
        assert_eq!(
            (rc, err.as_str()),
            (1, "Job is no longer pending execution for job 6\n")
        );
        let (rc, _, err) = sc(&f, &["release", "999"]);
        assert_eq!(
            (rc, err.as_str()),
            (1, "Invalid job id specified for job 999\n")
        );
        let (rc, _, _) = sc(&f, &["uhold", "waitres"]);
        assert_eq!(rc, 0);
        let (rc, _, _) = sc(&f, &["requeue", "6"]);
        assert_eq!(rc, 0);
        assert_eq!(
            *f.calls.borrow(),
            vec![
                "9 TimeLimit(Some(60))",
                "9 Nice(10)",
                "9 Name(\"x\")",
                "999999 TimeLimit(Some(10))",
                "9 Hold",
                "10 Hold",
                "12 Hold",
                "6 Hold",
                "999 Release",
                "9 Hold",
                "6 Requeue",
            ]
        );
        let _ = (T_START, T_BOOT);
    }

    #[test]
    fn interactive_words() {
        assert_eq!(
            crate::fmt::split_words("update NodeName=n1 State=DRAIN Reason=\"disk gone\""),
            vec!["update", "NodeName=n1", "State=DRAIN", "Reason=disk gone"]
        );
    }

    #[test]
    fn topology_lines() {
        let e = |name: &str, level: u32, nodes: &[&str], sw: &[&str]| slurm_proto::TopologyEntry {
            topology: "default".into(),
            block: false,
            name: name.into(),
            level,
            nodes: nodes.iter().map(|x| x.to_string()).collect(),
            switches: sw.iter().map(|x| x.to_string()).collect(),
        };
        let list = vec![
            e("s0", 0, &["n1", "n2"], &[]),
            e("s1", 0, &["n3"], &[]),
            e("top", 1, &["n1", "n2", "n3"], &["s0", "s1"]),
        ];
        assert_eq!(
            show_topology(&list, None),
            "SwitchName=s0 Level=0 LinkSpeed=1 Nodes=n[1-2]\n\
             SwitchName=s1 Level=0 LinkSpeed=1 Nodes=n3\n\
             SwitchName=top Level=1 LinkSpeed=1 Nodes=n[1-3] Switches=s[0-1]\n"
        );
        assert_eq!(
            show_topology(&list, Some("n3")),
            "SwitchName=s1 Level=0 LinkSpeed=1 Nodes=n3\n\
             SwitchName=top Level=1 LinkSpeed=1 Nodes=n[1-3] Switches=s[0-1]\n"
        );
        assert_eq!(
            show_topology(&list, Some("zz")),
            "No topology information for zz\n"
        );
        assert_eq!(
            show_topology(&[], None),
            "No topology information available\n"
        );
    }

    #[test]
    fn all_future_and_hide_come_from_options_and_the_environment() {
        let a = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        let none = |_: &str| None;
        let (g, ..) = parse_globals_env(&a(&["show", "node"]), &none).unwrap();
        assert!(!g.all && !g.future);
        let (g, ..) = parse_globals_env(&a(&["-a", "-F", "show", "node"]), &none).unwrap();
        assert!(g.all && g.future);
        let env = |k: &str| matches!(k, "SCONTROL_ALL" | "SCONTROL_FUTURE").then(String::new);
        let (g, ..) = parse_globals_env(&a(&["show", "node"]), &env).unwrap();
        assert!(g.all && g.future);
        let (g, ..) = parse_globals_env(&a(&["-d", "--hide", "show", "node"]), &env).unwrap();
        assert!(!g.all && !g.details && g.future);
        // Which nodes `show node` lists.
        let node = |name: &str, state: slurm_proto::NodeBaseState, parts: &[&str]| NodeRecord {
            name: name.into(),
            base_state: state,
            partitions: parts.iter().map(|p| p.to_string()).collect(),
            ..Default::default()
        };
        use slurm_proto::NodeBaseState::{Future, Idle};
        let hidden = vec!["secret".to_string()];
        let plain = Globals::default();
        assert!(node_visible(
            &node("n1", Idle, &["debug", "secret"]),
            &plain,
            &hidden
        ));
        assert!(node_visible(&node("n2", Idle, &[]), &plain, &hidden));
        assert!(!node_visible(
            &node("n3", Idle, &["secret"]),
            &plain,
            &hidden
        ));
        assert!(!node_visible(
            &node("f1", Future, &["debug"]),
            &plain,
            &hidden
        ));
        let both = Globals {
            all: true,
            future: true,
            ..Globals::default()
        };
        assert!(node_visible(&node("n3", Idle, &["secret"]), &both, &hidden));
        assert!(node_visible(
            &node("f1", Future, &["debug"]),
            &both,
            &hidden
        ));
    }
}
