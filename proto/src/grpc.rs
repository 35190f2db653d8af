//! The gRPC services (`slurm/v1/*.proto`, compiled into [`pb`]) and the
//! conversions between their messages and the wire types of this crate.
//!
//! The node daemon's service (`NodeDaemon`) carries what the controller and
//! srun ask of a node; [`NodeCall`] is one such request in its gRPC form,
//! with the method it goes to. Conversions from the messages check what
//! protobuf cannot (a port that fits 16 bits) and name the field otherwise.

use crate::{
    Allocation, BatchLaunch, Credential, GresAlloc, JobPrologue, NodeRegistration, RequestBody,
    Response, RpcError, SlurmError, StepCred, StepLayout, TaskLaunch, TaskUsage,
};

/// The generated messages, clients and servers of package `slurm.v1`.
#[allow(clippy::all, clippy::pedantic, missing_docs)]
pub mod pb {
    tonic::include_proto!("slurm.v1");
}

#[macro_use]
mod wire;
pub mod commands;
pub mod dbd;

/// The metadata key the caller's [`pb::Credential`] travels in.
pub const CRED_METADATA: &str = "slurm-cred-bin";

/// A message that does not make a valid request.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid {field}: {why}")]
pub struct ConvError {
    pub field: &'static str,
    pub why: String,
}

fn missing(field: &'static str) -> ConvError {
    ConvError {
        field,
        why: "missing".into(),
    }
}

impl From<Credential> for pb::Credential {
    fn from(c: Credential) -> Self {
        pb::Credential {
            uid: c.uid,
            gid: c.gid,
            host: c.host,
            issued: c.issued,
            expires: c.expires,
            nonce: c.nonce,
            method: c.method,
            body_hash: c.body_hash,
            to: c.to,
            sig: c.sig,
            token: c.token,
        }
    }
}

impl From<pb::Credential> for Credential {
    fn from(c: pb::Credential) -> Self {
        Credential {
            uid: c.uid,
            gid: c.gid,
            host: c.host,
            issued: c.issued,
            expires: c.expires,
            nonce: c.nonce,
            method: c.method,
            body_hash: c.body_hash,
            to: c.to,
            sig: c.sig,
            token: c.token,
        }
    }
}

pub(crate) fn gres_to(v: Vec<Vec<GresAlloc>>) -> Vec<pb::GresOnNode> {
    v.into_iter()
        .map(|g| pb::GresOnNode {
            gres: g
                .into_iter()
                .map(|a| pb::GresAlloc {
                    name: a.name,
                    kind: a.kind,
                    indices: a.indices,
                })
                .collect(),
        })
        .collect()
}

pub(crate) fn gres_from(v: Vec<pb::GresOnNode>) -> Vec<Vec<GresAlloc>> {
    v.into_iter()
        .map(|g| {
            g.gres
                .into_iter()
                .map(|a| GresAlloc {
                    name: a.name,
                    kind: a.kind,
                    indices: a.indices,
                })
                .collect()
        })
        .collect()
}

impl From<Allocation> for pb::Allocation {
    fn from(a: Allocation) -> Self {
        pb::Allocation {
            nodes: a.nodes,
            cpus: a.cpus,
            mem: a.mem,
            tasks: a.tasks,
            gres: gres_to(a.gres),
        }
    }
}

impl From<pb::Allocation> for Allocation {
    fn from(a: pb::Allocation) -> Self {
        Allocation {
            nodes: a.nodes,
            cpus: a.cpus,
            mem: a.mem,
            tasks: a.tasks,
            gres: gres_from(a.gres),
        }
    }
}

fn task_ids_to(v: Vec<Vec<u32>>) -> Vec<pb::TaskIds> {
    v.into_iter().map(|ids| pb::TaskIds { ids }).collect()
}

fn task_ids_from(v: Vec<pb::TaskIds>) -> Vec<Vec<u32>> {
    v.into_iter().map(|t| t.ids).collect()
}

impl From<BatchLaunch> for pb::BatchLaunch {
    fn from(l: BatchLaunch) -> Self {
        pb::BatchLaunch {
            job_id: l.job_id,
            job_name: l.job_name,
            uid: l.uid,
            gid: l.gid,
            user_name: l.user_name,
            account: l.account,
            qos: l.qos,
            partition: l.partition,
            cluster_name: l.cluster_name,
            alloc: Some(l.alloc.into()),
            num_tasks: l.num_tasks,
            cpus_per_task: l.cpus_per_task,
            ntasks_per_node: l.ntasks_per_node,
            mem_per_node: l.mem_per_node,
            mem_per_cpu: l.mem_per_cpu,
            time_limit: l.time_limit,
            work_dir: l.work_dir,
            std_out: l.std_out,
            std_err: l.std_err,
            std_in: l.std_in,
            script: l.script,
            argv: l.argv,
            environment: l.environment,
            submit_host: l.submit_host,
            ctld_host: l.ctld_host,
            ctld_port: l.ctld_port.into(),
            start_time: l.start_time,
            append_output: l.append_output,
        }
    }
}

impl TryFrom<pb::BatchLaunch> for BatchLaunch {
    type Error = ConvError;
    fn try_from(l: pb::BatchLaunch) -> Result<Self, ConvError> {
        Ok(BatchLaunch {
            job_id: l.job_id,
            job_name: l.job_name,
            uid: l.uid,
            gid: l.gid,
            user_name: l.user_name,
            account: l.account,
            qos: l.qos,
            partition: l.partition,
            cluster_name: l.cluster_name,
            alloc: l.alloc.ok_or_else(|| missing("alloc"))?.into(),
            num_tasks: l.num_tasks,
            cpus_per_task: l.cpus_per_task,
            ntasks_per_node: l.ntasks_per_node,
            mem_per_node: l.mem_per_node,
            mem_per_cpu: l.mem_per_cpu,
            time_limit: l.time_limit,
            work_dir: l.work_dir,
            std_out: l.std_out,
            std_err: l.std_err,
            std_in: l.std_in,
            script: l.script,
            argv: l.argv,
            environment: l.environment,
            submit_host: l.submit_host,
            ctld_host: l.ctld_host,
            ctld_port: u16::try_from(l.ctld_port).map_err(|_| ConvError {
                field: "ctld_port",
                why: format!("{} is not a port", l.ctld_port),
            })?,
            start_time: l.start_time,
            append_output: l.append_output,
        })
    }
}

impl From<JobPrologue> for pb::JobPrologue {
    fn from(p: JobPrologue) -> Self {
        pb::JobPrologue {
            job_id: p.job_id,
            uid: p.uid,
            gid: p.gid,
            user_name: p.user_name,
            partition: p.partition,
            account: p.account,
            alloc: Some(p.alloc.into()),
            pod_uids: p.pod_uids,
        }
    }
}

impl TryFrom<pb::JobPrologue> for JobPrologue {
    type Error = ConvError;
    fn try_from(p: pb::JobPrologue) -> Result<Self, ConvError> {
        Ok(JobPrologue {
            job_id: p.job_id,
            uid: p.uid,
            gid: p.gid,
            user_name: p.user_name,
            partition: p.partition,
            account: p.account,
            alloc: p.alloc.ok_or_else(|| missing("alloc"))?.into(),
            pod_uids: p.pod_uids,
        })
    }
}

impl From<StepCred> for pb::StepCred {
    fn from(c: StepCred) -> Self {
        pb::StepCred {
            job_id: c.job_id,
            step_id: c.step_id,
            uid: c.uid,
            gid: c.gid,
            user_name: c.user_name,
            nodes: c.nodes,
            expires: c.expires,
            alloc: Some(c.alloc.into()),
            partition: c.partition,
            account: c.account,
            job_start: c.job_start,
            tasks: task_ids_to(c.tasks),
            cpus_per_task: c.cpus_per_task,
            job_cpus: c.job_cpus,
            sig: c.sig,
            step_cpus: c.step_cpus,
            step_gres: gres_to(c.step_gres),
            step_mem: c.step_mem,
        }
    }
}

impl TryFrom<pb::StepCred> for StepCred {
    type Error = ConvError;
    fn try_from(c: pb::StepCred) -> Result<Self, ConvError> {
        Ok(StepCred {
            job_id: c.job_id,
            step_id: c.step_id,
            uid: c.uid,
            gid: c.gid,
            user_name: c.user_name,
            nodes: c.nodes,
            expires: c.expires,
            alloc: c.alloc.ok_or_else(|| missing("cred.alloc"))?.into(),
            partition: c.partition,
            account: c.account,
            job_start: c.job_start,
            tasks: task_ids_from(c.tasks),
            cpus_per_task: c.cpus_per_task,
            job_cpus: c.job_cpus,
            sig: c.sig,
            step_cpus: c.step_cpus,
            step_gres: gres_from(c.step_gres),
            step_mem: c.step_mem,
        })
    }
}

impl From<StepLayout> for pb::StepLayout {
    fn from(l: StepLayout) -> Self {
        pb::StepLayout {
            job_id: l.job_id,
            step_id: l.step_id,
            nodes: l.nodes,
            addrs: l.addrs,
            tasks: task_ids_to(l.tasks),
            cpus_per_task: l.cpus_per_task,
            job_cpus: l.job_cpus,
            cred: Some(l.cred.into()),
        }
    }
}

impl TryFrom<pb::StepLayout> for StepLayout {
    type Error = ConvError;
    fn try_from(l: pb::StepLayout) -> Result<Self, ConvError> {
        Ok(StepLayout {
            job_id: l.job_id,
            step_id: l.step_id,
            nodes: l.nodes,
            addrs: l.addrs,
            tasks: task_ids_from(l.tasks),
            cpus_per_task: l.cpus_per_task,
            job_cpus: l.job_cpus,
            cred: l.cred.ok_or_else(|| missing("layout.cred"))?.try_into()?,
        })
    }
}

impl From<TaskLaunch> for pb::TaskLaunch {
    fn from(t: TaskLaunch) -> Self {
        pb::TaskLaunch {
            layout: Some(t.layout.into()),
            node_index: t.node_index,
            argv: t.argv,
            environment: t.environment,
            cwd: t.cwd,
            job_name: t.job_name,
            partition: t.partition,
            account: t.account,
            cluster_name: t.cluster_name,
            job_nodes: t.job_nodes,
            job_cpus: t.job_cpus,
            job_tasks: t.job_tasks,
            job_gres: gres_to(t.job_gres),
            cpu_bind: t.cpu_bind,
            distribution: t.distribution,
            job_start: t.job_start,
            job_mem: t.job_mem,
            pty: t.pty.map(|(rows, cols)| pb::PtySize {
                rows: rows.into(),
                cols: cols.into(),
            }),
            task_prolog: t.task_prolog,
            task_epilog: t.task_epilog,
            preserve_env: t.preserve_env,
            bcast: t.bcast.map(|b| pb::Bcast {
                dest: b.dest,
                data: bytes::Bytes::from_owner(b.data),
                mode: b.mode,
                mtime: b.mtime,
            }),
            gpu_bind: t.gpu_bind,
        }
    }
}

impl TryFrom<pb::TaskLaunch> for TaskLaunch {
    type Error = ConvError;
    fn try_from(t: pb::TaskLaunch) -> Result<Self, ConvError> {
        Ok(TaskLaunch {
            layout: t.layout.ok_or_else(|| missing("layout"))?.try_into()?,
            node_index: t.node_index,
            argv: t.argv,
            environment: t.environment,
            cwd: t.cwd,
            job_name: t.job_name,
            partition: t.partition,
            account: t.account,
            cluster_name: t.cluster_name,
            job_nodes: t.job_nodes,
            job_cpus: t.job_cpus,
            job_tasks: t.job_tasks,
            job_gres: gres_from(t.job_gres),
            cpu_bind: t.cpu_bind,
            distribution: t.distribution,
            job_start: t.job_start,
            job_mem: t.job_mem,
            pty: match t.pty {
                None => None,
                Some(p) => Some((
                    u16::try_from(p.rows).map_err(|_| ConvError {
                        field: "pty.rows",
                        why: "over 65535".into(),
                    })?,
                    u16::try_from(p.cols).map_err(|_| ConvError {
                        field: "pty.cols",
                        why: "over 65535".into(),
                    })?,
                )),
            },
            task_prolog: t.task_prolog,
            task_epilog: t.task_epilog,
            preserve_env: t.preserve_env,
            bcast: t.bcast.map(|b| crate::Bcast {
                dest: b.dest,
                data: b.data.as_ref().into(),
                mode: b.mode,
                mtime: b.mtime,
            }),
            gpu_bind: t.gpu_bind,
        })
    }
}

/// One request to a node daemon, as the message of its gRPC method.
#[derive(Debug, Clone, PartialEq)]
pub enum NodeCall {
    LaunchBatch(Box<pb::BatchLaunch>),
    Prologue(Box<pb::JobPrologue>),
    SignalJob(pb::SignalJobRequest),
    NotifyJob(pb::JobNotifyRequest),
    SuspendJob(pb::SuspendJobRequest),
    TerminateJob(pb::TerminateJobRequest),
    SignalTasks(pb::SignalTasksRequest),
    Ping(pb::NodePing),
    ListPids(pb::ListPidsRequest),
    DaemonStatus(pb::Empty),
    Shutdown(pb::Empty),
    Reboot(pb::Empty),
    SetDebug(pb::DebugLevel),
}

/// The full gRPC path of each `NodeDaemon` method: what a credential for
/// it names as its method.
pub mod node_method {
    pub const LAUNCH_BATCH: &str = "/slurm.v1.NodeDaemon/LaunchBatch";
    pub const LAUNCH_BATCHES: &str = "/slurm.v1.NodeDaemon/LaunchBatches";
    pub const PROLOGUE: &str = "/slurm.v1.NodeDaemon/Prologue";
    pub const SIGNAL_JOB: &str = "/slurm.v1.NodeDaemon/SignalJob";
    pub const NOTIFY_JOB: &str = "/slurm.v1.NodeDaemon/NotifyJob";
    pub const SUSPEND_JOB: &str = "/slurm.v1.NodeDaemon/SuspendJob";
    pub const TERMINATE_JOB: &str = "/slurm.v1.NodeDaemon/TerminateJob";
    pub const RUN_TASKS: &str = "/slurm.v1.NodeDaemon/RunTasks";
    pub const SIGNAL_TASKS: &str = "/slurm.v1.NodeDaemon/SignalTasks";
    pub const PING: &str = "/slurm.v1.NodeDaemon/Ping";
    pub const LIST_PIDS: &str = "/slurm.v1.NodeDaemon/ListPids";
    pub const DAEMON_STATUS: &str = "/slurm.v1.NodeDaemon/DaemonStatus";
    pub const SHUTDOWN: &str = "/slurm.v1.NodeDaemon/Shutdown";
    pub const REBOOT: &str = "/slurm.v1.NodeDaemon/Reboot";
    pub const SET_DEBUG: &str = "/slurm.v1.NodeDaemon/SetDebug";
}

impl NodeCall {
    /// The request in its gRPC form; `Err` gives back a body that is not a
    /// node daemon's request.
    pub fn from_body(body: RequestBody) -> Result<NodeCall, Box<RequestBody>> {
        Ok(match body {
            RequestBody::LaunchBatch(l) => NodeCall::LaunchBatch(Box::new((*l).into())),
            RequestBody::JobPrologue(p) => NodeCall::Prologue(Box::new((*p).into())),
            RequestBody::SignalJob { job_id, signal } => {
                NodeCall::SignalJob(pb::SignalJobRequest { job_id, signal })
            }
            RequestBody::NotifyJob { job_id, message } => {
                NodeCall::NotifyJob(pb::JobNotifyRequest { job_id, message })
            }
            RequestBody::SuspendJobHere {
                job_id,
                suspend,
                seq,
                epoch,
                start_time,
            } => NodeCall::SuspendJob(pb::SuspendJobRequest {
                job_id,
                suspend,
                seq,
                epoch,
                start_time,
            }),
            RequestBody::TerminateJob {
                job_id,
                kill_wait,
                start_time,
                cause,
            } => NodeCall::TerminateJob(pb::TerminateJobRequest {
                job_id,
                kill_wait,
                start_time,
                cause: cause.code(),
            }),
            RequestBody::SignalTasks {
                job_id,
                step_id,
                signal,
                cause,
                job_start,
            } => NodeCall::SignalTasks(pb::SignalTasksRequest {
                job_id,
                step_id,
                signal,
                cause: cause.code(),
                job_start,
            }),
            RequestBody::NodePing => NodeCall::Ping(pb::NodePing {}),
            RequestBody::ListPids { job_id, step_id } => {
                NodeCall::ListPids(pb::ListPidsRequest { job_id, step_id })
            }
            RequestBody::DaemonStatus => NodeCall::DaemonStatus(pb::Empty {}),
            RequestBody::NodeShutdown => NodeCall::Shutdown(pb::Empty {}),
            RequestBody::NodeReboot => NodeCall::Reboot(pb::Empty {}),
            RequestBody::SetDebug { level } => NodeCall::SetDebug(pb::DebugLevel { level }),
            other => return Err(Box::new(other)),
        })
    }

    /// The request as the node daemon acts on it.
    pub fn into_body(self) -> Result<RequestBody, ConvError> {
        Ok(match self {
            NodeCall::LaunchBatch(l) => RequestBody::LaunchBatch(Box::new((*l).try_into()?)),
            NodeCall::Prologue(p) => RequestBody::JobPrologue(Box::new((*p).try_into()?)),
            NodeCall::SignalJob(s) => RequestBody::SignalJob {
                job_id: s.job_id,
                signal: s.signal,
            },
            NodeCall::NotifyJob(n) => RequestBody::NotifyJob {
                job_id: n.job_id,
                message: n.message,
            },
            NodeCall::SuspendJob(s) => RequestBody::SuspendJobHere {
                job_id: s.job_id,
                suspend: s.suspend,
                seq: s.seq,
                epoch: s.epoch,
                start_time: s.start_time,
            },
            NodeCall::TerminateJob(t) => RequestBody::TerminateJob {
                job_id: t.job_id,
                kill_wait: t.kill_wait,
                start_time: t.start_time,
                cause: crate::TermCause::from_code(t.cause),
            },
            NodeCall::SignalTasks(s) => RequestBody::SignalTasks {
                job_id: s.job_id,
                step_id: s.step_id,
                signal: s.signal,
                cause: crate::TermCause::from_code(s.cause),
                job_start: s.job_start,
            },
            NodeCall::Ping(_) => RequestBody::NodePing,
            NodeCall::ListPids(l) => RequestBody::ListPids {
                job_id: l.job_id,
                step_id: l.step_id,
            },
            NodeCall::DaemonStatus(_) => RequestBody::DaemonStatus,
            NodeCall::Shutdown(_) => RequestBody::NodeShutdown,
            NodeCall::Reboot(_) => RequestBody::NodeReboot,
            NodeCall::SetDebug(d) => RequestBody::SetDebug { level: d.level },
        })
    }

    /// The method's full gRPC path.
    pub fn method(&self) -> &'static str {
        use node_method::*;
        match self {
            NodeCall::LaunchBatch(_) => LAUNCH_BATCH,
            NodeCall::Prologue(_) => PROLOGUE,
            NodeCall::SignalJob(_) => SIGNAL_JOB,
            NodeCall::NotifyJob(_) => NOTIFY_JOB,
            NodeCall::SuspendJob(_) => SUSPEND_JOB,
            NodeCall::TerminateJob(_) => TERMINATE_JOB,
            NodeCall::SignalTasks(_) => SIGNAL_TASKS,
            NodeCall::Ping(_) => PING,
            NodeCall::ListPids(_) => LIST_PIDS,
            NodeCall::DaemonStatus(_) => DAEMON_STATUS,
            NodeCall::Shutdown(_) => SHUTDOWN,
            NodeCall::Reboot(_) => REBOOT,
            NodeCall::SetDebug(_) => SET_DEBUG,
        }
    }

    /// The message's protobuf bytes (what a credential's body hash covers).
    pub fn encode(&self) -> Vec<u8> {
        use prost::Message;
        match self {
            NodeCall::LaunchBatch(m) => m.encode_to_vec(),
            NodeCall::Prologue(m) => m.encode_to_vec(),
            NodeCall::SignalJob(m) => m.encode_to_vec(),
            NodeCall::NotifyJob(m) => m.encode_to_vec(),
            NodeCall::SuspendJob(m) => m.encode_to_vec(),
            NodeCall::TerminateJob(m) => m.encode_to_vec(),
            NodeCall::SignalTasks(m) => m.encode_to_vec(),
            NodeCall::Ping(m) => m.encode_to_vec(),
            NodeCall::ListPids(m) => m.encode_to_vec(),
            NodeCall::DaemonStatus(m) => m.encode_to_vec(),
            NodeCall::Shutdown(m) | NodeCall::Reboot(m) => m.encode_to_vec(),
            NodeCall::SetDebug(m) => m.encode_to_vec(),
        }
    }
}

impl From<NodeRegistration> for pb::NodeRegistration {
    fn from(r: NodeRegistration) -> Self {
        pb::NodeRegistration {
            name: r.name,
            cpus: r.cpus,
            boards: r.boards,
            sockets: r.sockets,
            cores_per_socket: r.cores_per_socket,
            threads_per_core: r.threads_per_core,
            real_memory: r.real_memory,
            tmp_disk: r.tmp_disk,
            boot_time: r.boot_time,
            slurmd_start_time: r.slurmd_start_time,
            version: r.version,
            os: r.os,
            arch: r.arch,
            cpu_load: r.cpu_load,
            free_mem: r.free_mem,
            running_jobs: r.running_jobs,
            kubelet: r.kubelet,
        }
    }
}

impl From<pb::NodeRegistration> for NodeRegistration {
    fn from(r: pb::NodeRegistration) -> Self {
        NodeRegistration {
            name: r.name,
            cpus: r.cpus,
            boards: r.boards,
            sockets: r.sockets,
            cores_per_socket: r.cores_per_socket,
            threads_per_core: r.threads_per_core,
            real_memory: r.real_memory,
            tmp_disk: r.tmp_disk,
            boot_time: r.boot_time,
            slurmd_start_time: r.slurmd_start_time,
            version: r.version,
            os: r.os,
            arch: r.arch,
            cpu_load: r.cpu_load,
            free_mem: r.free_mem,
            running_jobs: r.running_jobs,
            kubelet: r.kubelet,
        }
    }
}

impl From<TaskUsage> for pb::TaskUsage {
    fn from(u: TaskUsage) -> Self {
        pb::TaskUsage {
            cpu_usec: u.cpu_usec,
            user_usec: u.user_usec,
            system_usec: u.system_usec,
            max_rss_bytes: u.max_rss_bytes,
        }
    }
}

impl From<pb::TaskUsage> for TaskUsage {
    fn from(u: pb::TaskUsage) -> Self {
        TaskUsage {
            cpu_usec: u.cpu_usec,
            user_usec: u.user_usec,
            system_usec: u.system_usec,
            max_rss_bytes: u.max_rss_bytes,
        }
    }
}

/// One report of a node daemon to the controller, as the message of its
/// gRPC method.
#[derive(Debug, Clone, PartialEq)]
pub enum CtldCall {
    RegisterNode(pb::NodeRegistration),
    Heartbeat(pb::HeartbeatRequest),
    BatchComplete(pb::BatchCompleteRequest),
    JobCleaned(pb::JobOnNode),
    EpilogFailed(pb::JobOnNode),
    PrologFailed(pb::JobOnNode),
    StepUsage(pb::StepUsageRequest),
}

/// The full gRPC path of each `Controller` method.
pub mod ctld_method {
    pub const REGISTER_NODE: &str = "/slurm.v1.Controller/RegisterNode";
    pub const HEARTBEAT: &str = "/slurm.v1.Controller/Heartbeat";
    pub const BATCH_COMPLETE: &str = "/slurm.v1.Controller/BatchComplete";
    pub const JOB_CLEANED: &str = "/slurm.v1.Controller/JobCleaned";
    pub const EPILOG_FAILED: &str = "/slurm.v1.Controller/EpilogFailed";
    pub const PROLOG_FAILED: &str = "/slurm.v1.Controller/PrologFailed";
    pub const STEP_USAGE: &str = "/slurm.v1.Controller/StepUsage";
    pub const NODE_REPORTS: &str = "/slurm.v1.Controller/NodeReports";
    pub const WATCH: &str = "/slurm.v1.Controller/Watch";
    pub const GET_CONFIG_FILES: &str = "/slurm.v1.Controller/GetConfigFiles";
}

impl CtldCall {
    /// The report in its gRPC form; `Err` gives back a body that is not a
    /// node daemon's report.
    pub fn from_body(body: RequestBody) -> Result<CtldCall, Box<RequestBody>> {
        Ok(match body {
            RequestBody::RegisterNode(r) => CtldCall::RegisterNode(r.into()),
            RequestBody::Heartbeat { node, running_jobs } => {
                CtldCall::Heartbeat(pb::HeartbeatRequest { node, running_jobs })
            }
            RequestBody::BatchComplete {
                job_id,
                node,
                status,
                oom,
                usage,
                job_start,
            } => CtldCall::BatchComplete(pb::BatchCompleteRequest {
                job_id,
                node,
                status,
                oom,
                usage: usage.map(Into::into),
                job_start,
            }),
            RequestBody::JobCleaned {
                job_id,
                node,
                job_start,
            } => CtldCall::JobCleaned(pb::JobOnNode {
                job_id,
                node,
                job_start,
            }),
            RequestBody::EpilogFailed { job_id, node } => CtldCall::EpilogFailed(pb::JobOnNode {
                job_id,
                node,
                job_start: None,
            }),
            RequestBody::PrologFailed { job_id, node } => CtldCall::PrologFailed(pb::JobOnNode {
                job_id,
                node,
                job_start: None,
            }),
            RequestBody::StepUsage {
                job_id,
                step_id,
                node,
                usage,
                job_start,
            } => CtldCall::StepUsage(pb::StepUsageRequest {
                job_id,
                step_id,
                job_start,
                node,
                usage: usage.map(Into::into),
            }),
            other => return Err(Box::new(other)),
        })
    }

    /// The report as the controller acts on it.
    pub fn into_body(self) -> Result<RequestBody, ConvError> {
        Ok(match self {
            CtldCall::RegisterNode(r) => RequestBody::RegisterNode(r.into()),
            CtldCall::Heartbeat(h) => RequestBody::Heartbeat {
                node: h.node,
                running_jobs: h.running_jobs,
            },
            CtldCall::BatchComplete(b) => RequestBody::BatchComplete {
                job_id: b.job_id,
                node: b.node,
                status: b.status,
                oom: b.oom,
                usage: b.usage.map(Into::into),
                job_start: b.job_start,
            },
            CtldCall::JobCleaned(j) => RequestBody::JobCleaned {
                job_id: j.job_id,
                node: j.node,
                job_start: j.job_start,
            },
            CtldCall::EpilogFailed(j) => RequestBody::EpilogFailed {
                job_id: j.job_id,
                node: j.node,
            },
            CtldCall::PrologFailed(j) => RequestBody::PrologFailed {
                job_id: j.job_id,
                node: j.node,
            },
            CtldCall::StepUsage(u) => RequestBody::StepUsage {
                job_id: u.job_id,
                step_id: u.step_id,
                job_start: u.job_start,
                node: u.node,
                usage: u.usage.map(Into::into),
            },
        })
    }

    /// The method's full gRPC path.
    pub fn method(&self) -> &'static str {
        use ctld_method::*;
        match self {
            CtldCall::RegisterNode(_) => REGISTER_NODE,
            CtldCall::Heartbeat(_) => HEARTBEAT,
            CtldCall::BatchComplete(_) => BATCH_COMPLETE,
            CtldCall::JobCleaned(_) => JOB_CLEANED,
            CtldCall::EpilogFailed(_) => EPILOG_FAILED,
            CtldCall::PrologFailed(_) => PROLOG_FAILED,
            CtldCall::StepUsage(_) => STEP_USAGE,
        }
    }

    /// The message's protobuf bytes (what a credential's body hash covers).
    pub fn encode(&self) -> Vec<u8> {
        use prost::Message;
        match self {
            CtldCall::RegisterNode(m) => m.encode_to_vec(),
            CtldCall::Heartbeat(m) => m.encode_to_vec(),
            CtldCall::BatchComplete(m) => m.encode_to_vec(),
            CtldCall::JobCleaned(m) | CtldCall::EpilogFailed(m) | CtldCall::PrologFailed(m) => {
                m.encode_to_vec()
            }
            CtldCall::StepUsage(m) => m.encode_to_vec(),
        }
    }
}

/// A node daemon's job events as one `NodeReports` call; `Err` names the
/// first that is not a job event of `node`.
pub fn node_report_batch(
    node: &str,
    reports: Vec<RequestBody>,
) -> Result<pb::NodeReportBatch, String> {
    use pb::node_report::Report as R;
    let mut out = Vec::with_capacity(reports.len());
    for body in reports {
        let what = body.message_type().0;
        if body.reporting_node() != Some(node) {
            return Err(format!("{what} is not a report of node {node}"));
        }
        let report = match CtldCall::from_body(body) {
            Ok(CtldCall::BatchComplete(m)) => R::BatchComplete(m),
            Ok(CtldCall::JobCleaned(m)) => R::JobCleaned(m),
            Ok(CtldCall::EpilogFailed(m)) => R::EpilogFailed(m),
            Ok(CtldCall::PrologFailed(m)) => R::PrologFailed(m),
            Ok(CtldCall::StepUsage(m)) => R::StepUsage(m),
            _ => return Err(format!("{what} is not a job event")),
        };
        out.push(pb::NodeReport {
            report: Some(report),
        });
    }
    Ok(pb::NodeReportBatch {
        node: node.to_string(),
        reports: out,
    })
}

/// A `NodeReports` call as the controller acts on it: each event as its
/// own report, refused unless every one names the batch's node.
pub fn node_reports_of(b: pb::NodeReportBatch) -> Result<RequestBody, ConvError> {
    use pb::node_report::Report as R;
    let mut reports = Vec::with_capacity(b.reports.len());
    for r in b.reports {
        let call = match r.report.ok_or_else(|| missing("report"))? {
            R::BatchComplete(m) => CtldCall::BatchComplete(m),
            R::JobCleaned(m) => CtldCall::JobCleaned(m),
            R::EpilogFailed(m) => CtldCall::EpilogFailed(m),
            R::PrologFailed(m) => CtldCall::PrologFailed(m),
            R::StepUsage(m) => CtldCall::StepUsage(m),
        };
        let body = call.into_body()?;
        if body.reporting_node() != Some(b.node.as_str()) {
            return Err(ConvError {
                field: "reports",
                why: format!("a report of node {} names another node", b.node),
            });
        }
        reports.push(body);
    }
    Ok(RequestBody::NodeReports {
        node: b.node,
        reports,
    })
}

impl From<&crate::JobRecord> for pb::JobEvent {
    fn from(j: &crate::JobRecord) -> Self {
        pb::JobEvent {
            job_id: j.job_id,
            name: j.name.clone(),
            user_id: j.user_id,
            partition: j.partition.clone(),
            account: j.account.clone(),
            state: j.state.name().to_string(),
            reason: j.reason.to_string(),
            nodes: j.alloc.nodes.clone(),
            start_time: j.start_time,
            end_time: j.end_time,
            exit_status: j.exit_status,
            admin_comment: j.desc.admin_comment.clone(),
            array_job_id: j.array.as_ref().map(|a| a.job_id),
            array_task_id: j.array.as_ref().map(|a| a.task_id),
            restarts: j.restarts,
        }
    }
}

/// The files a configless node fetches from the controller, when they
/// exist beside slurm.conf (never slurmdbd.conf, keys or certificates).
pub const CONFIG_FILES: &[&str] = &[
    "slurm.conf",
    "gres.conf",
    "cgroup.conf",
    "topology.conf",
    "topology.yaml",
    "plugstack.conf",
    "acct_gather.conf",
    "job_container.conf",
    "mpi.conf",
    "oci.conf",
    "helpers.conf",
    "cli_filter.lua",
    "job_submit.lua",
];

/// The controller's answer to a report in its gRPC form.
pub fn ctld_reply(r: Response) -> pb::CtldReply {
    use pb::ctld_reply::Result as R;
    let result = match r {
        Response::Ok => R::Ok(pb::Empty {}),
        Response::Error(e) => R::Error(e.into()),
        other => R::Error(
            RpcError {
                error: SlurmError::InternalError,
                detail: Some(format!("unexpected answer {other:?}")),
            }
            .into(),
        ),
    };
    pb::CtldReply {
        result: Some(result),
    }
}

/// The controller's gRPC answer to a report as a [`Response`].
pub fn ctld_response(r: pb::CtldReply) -> Response {
    use pb::ctld_reply::Result as R;
    match r.result {
        Some(R::Ok(_)) => Response::Ok,
        Some(R::Error(e)) => Response::Error(e.into()),
        None => Response::Error(RpcError {
            error: SlurmError::ProtocolError,
            detail: Some("empty answer".into()),
        }),
    }
}

impl From<RpcError> for pb::Error {
    fn from(e: RpcError) -> Self {
        let kind = SlurmError::ALL
            .iter()
            .position(|x| *x == e.error)
            .map_or(0, |i| i as u32 + 1);
        pb::Error {
            code: e.error.code(),
            detail: e.detail,
            kind,
        }
    }
}

impl From<pb::Error> for RpcError {
    fn from(e: pb::Error) -> Self {
        let named = (e.kind as usize)
            .checked_sub(1)
            .and_then(|i| SlurmError::ALL.get(i))
            .filter(|x| x.code() == e.code);
        RpcError {
            error: named
                .copied()
                .unwrap_or_else(|| SlurmError::from_code(e.code)),
            detail: e.detail,
        }
    }
}

impl SlurmError {
    /// Every error, for looking one up by its number.
    pub const ALL: [SlurmError; 44] = [
        SlurmError::InvalidJobId,
        SlurmError::AccessDenied,
        SlurmError::InvalidPartitionName,
        SlurmError::DefaultPartitionNotSet,
        SlurmError::RequestedNodeConfigUnavailable,
        SlurmError::InvalidNodeName,
        SlurmError::InvalidTimeLimit,
        SlurmError::JobPending,
        SlurmError::AlreadyDone,
        SlurmError::TransitionStateNoUpdate,
        SlurmError::InvalidNodeState,
        SlurmError::NodesBusy,
        SlurmError::PartitionDown,
        SlurmError::PartitionNotAvail,
        SlurmError::TooManyRequestedCpus,
        SlurmError::TooManyRequestedNodes,
        SlurmError::InvalidCredential,
        SlurmError::ExpiredCredential,
        SlurmError::InvalidRequest,
        SlurmError::ReachedMaxJobCount,
        SlurmError::JobNotPending,
        SlurmError::Disabled,
        SlurmError::ProtocolError,
        SlurmError::InternalError,
        SlurmError::Dependency,
        SlurmError::InvalidArray,
        SlurmError::InvalidAccount,
        SlurmError::InvalidQos,
        SlurmError::ReservationInvalid,
        SlurmError::ReservationBusy,
        SlurmError::ReservationAccess,
        SlurmError::AccountingPolicy,
        SlurmError::PrologFailed,
        SlurmError::InvalidGres,
        SlurmError::InvalidTaskMemory,
        SlurmError::InvalidFeature,
        SlurmError::InvalidLicenses,
        SlurmError::NeedRestart,
        SlurmError::Backoff,
        SlurmError::InStandby,
        SlurmError::UserIdMissing,
        SlurmError::BadTaskCount,
        SlurmError::JobNotRunning,
        SlurmError::JobNotSuspended,
    ];

    /// The error with Slurm's number `code` (an unknown number is a
    /// protocol error).
    pub fn from_code(code: i32) -> SlurmError {
        SlurmError::ALL
            .into_iter()
            .find(|e| e.code() == code)
            .unwrap_or(SlurmError::ProtocolError)
    }
}

/// A node daemon's answer in its gRPC form (only what a node daemon
/// answers: done, refused, or its running jobs).
pub fn node_reply(r: Response) -> pb::NodeReply {
    use pb::node_reply::Result as R;
    let result = match r {
        Response::Ok => R::Ok(pb::Empty {}),
        Response::NodePong { running_jobs } => R::Pong(pb::NodePong { running_jobs }),
        Response::Pids(procs) => R::Pids(pb::PidList {
            procs: procs
                .into_iter()
                .map(|p| pb::JobProcess {
                    pid: p.pid,
                    job_id: p.job_id,
                    step: p.step,
                    local_id: p.local_id,
                    global_id: p.global_id,
                })
                .collect(),
        }),
        Response::SlurmdStatus(s) => R::Status(pb::SlurmdStatus {
            steps: s.steps,
            cpus: s.cpus,
            boards: s.boards,
            sockets: s.sockets,
            cores: s.cores,
            threads: s.threads,
            real_memory: s.real_memory,
            tmp_disk: s.tmp_disk,
            boot_time: s.boot_time,
            hostname: s.hostname,
            last_ctld_msg: s.last_ctld_msg,
            pid: s.pid,
            debug: s.debug,
            log_file: s.log_file,
            version: s.version,
        }),
        Response::Error(e) => R::Error(e.into()),
        other => R::Error(
            RpcError {
                error: SlurmError::InternalError,
                detail: Some(format!("unexpected answer {other:?}")),
            }
            .into(),
        ),
    };
    pb::NodeReply {
        result: Some(result),
    }
}

/// A node daemon's gRPC answer as a [`Response`].
pub fn node_response(r: pb::NodeReply) -> Response {
    use pb::node_reply::Result as R;
    match r.result {
        Some(R::Ok(_)) => Response::Ok,
        Some(R::Pong(p)) => Response::NodePong {
            running_jobs: p.running_jobs,
        },
        Some(R::Pids(l)) => Response::Pids(
            l.procs
                .into_iter()
                .map(|p| crate::JobProcess {
                    pid: p.pid,
                    job_id: p.job_id,
                    step: p.step,
                    local_id: p.local_id,
                    global_id: p.global_id,
                })
                .collect(),
        ),
        Some(R::Status(s)) => Response::SlurmdStatus(Box::new(crate::SlurmdStatus {
            steps: s.steps,
            cpus: s.cpus,
            boards: s.boards,
            sockets: s.sockets,
            cores: s.cores,
            threads: s.threads,
            real_memory: s.real_memory,
            tmp_disk: s.tmp_disk,
            boot_time: s.boot_time,
            hostname: s.hostname,
            last_ctld_msg: s.last_ctld_msg,
            pid: s.pid,
            debug: s.debug,
            log_file: s.log_file,
            version: s.version,
        })),
        Some(R::Error(e)) => Response::Error(e.into()),
        None => Response::Error(RpcError {
            error: SlurmError::ProtocolError,
            detail: Some("empty answer".into()),
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_error_number_comes_back() {
        // (Two errors share Slurm's number 2050: the number comes back.)
        for e in SlurmError::ALL {
            assert_eq!(SlurmError::from_code(e.code()).code(), e.code());
        }
        assert_eq!(
            SlurmError::from_code(SlurmError::ExpiredCredential.code()),
            SlurmError::ExpiredCredential
        );
        assert_eq!(SlurmError::from_code(-7), SlurmError::ProtocolError);
    }

    fn launch() -> TaskLaunch {
        let cred = StepCred {
            job_id: 7,
            step_id: 2,
            uid: 1000,
            gid: 1000,
            user_name: "u".into(),
            nodes: vec!["n1".into(), "n2".into()],
            expires: 99,
            alloc: Allocation {
                nodes: vec!["n1".into(), "n2".into()],
                cpus: vec![2, 4],
                mem: vec![100, 200],
                tasks: vec![1, 2],
                gres: vec![
                    vec![GresAlloc {
                        name: "gpu".into(),
                        kind: Some("a100".into()),
                        indices: vec![0, 1],
                    }],
                    vec![],
                ],
            },
            partition: "p".into(),
            account: "a".into(),
            job_start: Some(5),
            tasks: vec![vec![0], vec![1, 2]],
            cpus_per_task: 1,
            job_cpus: vec![2, 4],
            sig: "ab".into(),
            step_cpus: vec![1, 4],
            step_gres: vec![
                vec![],
                vec![GresAlloc {
                    name: "gpu".into(),
                    kind: None,
                    indices: vec![3],
                }],
            ],
            step_mem: vec![0, 512],
        };
        TaskLaunch {
            layout: StepLayout {
                job_id: 7,
                step_id: 2,
                nodes: cred.nodes.clone(),
                addrs: vec!["127.0.0.1:1".into(), "127.0.0.1:2".into()],
                tasks: cred.tasks.clone(),
                cpus_per_task: 1,
                job_cpus: vec![2, 4],
                cred: cred.clone(),
            },
            node_index: 1,
            argv: vec!["hostname".into()],
            environment: vec!["A=1".into()],
            cwd: "/tmp".into(),
            job_name: "j".into(),
            partition: "p".into(),
            account: "a".into(),
            cluster_name: "c".into(),
            job_nodes: cred.alloc.nodes.clone(),
            job_cpus: cred.alloc.cpus.clone(),
            job_tasks: cred.alloc.tasks.clone(),
            job_gres: cred.alloc.gres.clone(),
            cpu_bind: None,
            distribution: Some("cyclic".into()),
            job_start: Some(5),
            job_mem: vec![100, 200],
            pty: Some((40, 120)),
            task_prolog: Some("/tp".into()),
            task_epilog: None,
            preserve_env: true,
            bcast: Some(crate::Bcast {
                dest: "/tmp/".into(),
                data: b"#!/bin/sh\n".as_slice().into(),
                mode: 0o755,
                mtime: 7,
            }),
            gpu_bind: Some("single:2".into()),
        }
    }

    #[test]
    fn node_requests_round_trip() {
        let t: pb::TaskLaunch = launch().into();
        assert_eq!(
            format!("{:?}", TaskLaunch::try_from(t).unwrap()),
            format!("{:?}", launch())
        );
        let bodies = vec![
            RequestBody::SuspendJobHere {
                job_id: 3,
                suspend: true,
                seq: 4,
                epoch: 5,
                start_time: None,
            },
            RequestBody::NotifyJob {
                job_id: 3,
                message: "hi".into(),
            },
            RequestBody::TerminateJob {
                job_id: 3,
                kill_wait: 30,
                start_time: Some(8),
                cause: crate::TermCause::TimeLimit,
            },
            RequestBody::SignalTasks {
                job_id: 1,
                step_id: 0,
                signal: 15,
                cause: crate::TermCause::TimeLimit,
                job_start: Some(7),
            },
            RequestBody::NodePing,
            RequestBody::ListPids {
                job_id: Some(4),
                step_id: None,
            },
            RequestBody::DaemonStatus,
        ];
        for b in bodies {
            let want = format!("{b:?}");
            let call = NodeCall::from_body(b).unwrap();
            let bytes = call.encode();
            let back = call.into_body().unwrap();
            assert_eq!(format!("{back:?}"), want);
            // The same request encodes to the same bytes every time.
            assert_eq!(NodeCall::from_body(back).unwrap().encode(), bytes);
        }
        assert!(NodeCall::from_body(RequestBody::Ping).is_err());
    }

    #[test]
    fn node_reports_round_trip() {
        let usage = TaskUsage {
            cpu_usec: 1,
            user_usec: 2,
            system_usec: 3,
            max_rss_bytes: 4,
        };
        let bodies = vec![
            RequestBody::RegisterNode(NodeRegistration {
                name: "n1".into(),
                cpus: 8,
                cpu_load: 0.5,
                running_jobs: vec![3],
                ..Default::default()
            }),
            RequestBody::Heartbeat {
                node: "n1".into(),
                running_jobs: vec![1, 2],
            },
            RequestBody::BatchComplete {
                job_id: 4,
                node: "n1".into(),
                status: 256,
                oom: true,
                usage: Some(usage),
                job_start: Some(1_700_000_000),
            },
            RequestBody::BatchComplete {
                job_id: 4,
                node: "n1".into(),
                status: 0,
                oom: false,
                usage: None,
                job_start: None,
            },
            RequestBody::JobCleaned {
                job_id: 4,
                node: "n1".into(),
                job_start: Some(1_700_000_000),
            },
            RequestBody::EpilogFailed {
                job_id: 4,
                node: "n1".into(),
            },
            RequestBody::PrologFailed {
                job_id: 4,
                node: "n1".into(),
            },
            RequestBody::StepUsage {
                job_id: 4,
                step_id: 1,
                node: "n1".into(),
                usage: Some(usage),
                job_start: Some(5),
            },
            RequestBody::StepUsage {
                job_id: 4,
                step_id: 2,
                node: "n1".into(),
                usage: None,
                job_start: Some(5),
            },
        ];
        let mut methods = std::collections::HashSet::new();
        for b in bodies {
            let want = format!("{b:?}");
            let call = CtldCall::from_body(b).unwrap();
            methods.insert(call.method());
            assert_eq!(format!("{:?}", call.into_body().unwrap()), want);
        }
        // Each report kind has its own method (a credential names one).
        assert_eq!(methods.len(), 7);
        assert!(CtldCall::from_body(RequestBody::GetJobs).is_err());
    }

    #[test]
    fn a_message_missing_a_part_names_it() {
        let mut t: pb::TaskLaunch = launch().into();
        t.layout.as_mut().unwrap().cred = None;
        let e = TaskLaunch::try_from(t).unwrap_err();
        assert_eq!(e.to_string(), "invalid layout.cred: missing");
        let mut b: pb::BatchLaunch = pb::BatchLaunch {
            alloc: Some(pb::Allocation::default()),
            ..Default::default()
        };
        b.ctld_port = 70000;
        let e = BatchLaunch::try_from(b).unwrap_err();
        assert!(e.to_string().contains("ctld_port"), "{e}");
    }

    #[test]
    fn answers_round_trip() {
        for r in [
            Response::Ok,
            Response::NodePong {
                running_jobs: vec![1, 2],
            },
            Response::Pids(vec![crate::JobProcess {
                pid: 10,
                job_id: 4,
                step: "batch".into(),
                local_id: Some(0),
                global_id: None,
            }]),
            Response::SlurmdStatus(Box::new(crate::SlurmdStatus {
                steps: vec!["5".into(), "5.0".into()],
                cpus: 4,
                boards: 1,
                sockets: 2,
                cores: 2,
                threads: 1,
                real_memory: 1987,
                tmp_disk: 9951,
                boot_time: 100,
                hostname: "n1".into(),
                last_ctld_msg: Some(120),
                pid: 77,
                debug: 3,
                log_file: None,
                version: "25.11.0".into(),
            })),
            Response::Error(RpcError {
                error: SlurmError::ExpiredCredential,
                detail: Some("late".into()),
            }),
        ] {
            assert_eq!(
                format!("{:?}", node_response(node_reply(r.clone()))),
                format!("{r:?}")
            );
        }
    }
}

#[cfg(test)]
mod node_report_tests {
    use super::*;

    #[test]
    fn a_batch_of_one_nodes_events_goes_and_comes_back_whole() {
        let events = vec![
            RequestBody::BatchComplete {
                job_id: 7,
                node: "n1".into(),
                status: 256,
                oom: true,
                usage: None,
                job_start: Some(5),
            },
            RequestBody::JobCleaned {
                job_id: 7,
                node: "n1".into(),
                job_start: None,
            },
            RequestBody::EpilogFailed {
                job_id: 8,
                node: "n1".into(),
            },
        ];
        let b = node_report_batch("n1", events.clone()).unwrap();
        let back = node_reports_of(b).unwrap();
        assert_eq!(
            format!("{back:?}"),
            format!(
                "{:?}",
                RequestBody::NodeReports {
                    node: "n1".into(),
                    reports: events
                }
            )
        );
    }

    #[test]
    fn a_batch_holds_only_its_own_nodes_job_events() {
        let of = |node: &str| RequestBody::JobCleaned {
            job_id: 1,
            node: node.into(),
            job_start: None,
        };
        assert!(node_report_batch("n1", vec![of("n1"), of("n2")]).is_err());
        let hb = RequestBody::Heartbeat {
            node: "n1".into(),
            running_jobs: vec![],
        };
        assert!(node_report_batch("n1", vec![hb]).is_err());
        // Forged on the wire: an event of another node inside the batch.
        let mut b = node_report_batch("n1", vec![of("n1")]).unwrap();
        b.reports
            .extend(node_report_batch("n2", vec![of("n2")]).unwrap().reports);
        assert!(node_reports_of(b).is_err());
        let empty = pb::NodeReportBatch {
            node: "n1".into(),
            reports: vec![pb::NodeReport { report: None }],
        };
        assert!(node_reports_of(empty).is_err());
    }
}

impl From<crate::StepGpus> for pb::StepGpus {
    fn from(g: crate::StepGpus) -> Self {
        pb::StepGpus {
            kind: g.kind,
            per_node: g.per_node,
            per_task: g.per_task,
            total: g.total,
        }
    }
}

impl From<pb::StepGpus> for crate::StepGpus {
    fn from(g: pb::StepGpus) -> Self {
        crate::StepGpus {
            kind: g.kind,
            per_node: g.per_node,
            per_task: g.per_task,
            total: g.total,
        }
    }
}
