//! The commands' requests to the controller for jobs and steps in their
//! gRPC form ([`CommandCall`]), and the conversions of the job messages.
//!
//! A job listing carries each job without its script, arguments and
//! environment: no command shows them, and they are most of a job's bytes.

use super::wire::{FromWire, ToWire};
use super::{missing, pb, ConvError};
use crate::{
    ArrayInfo, CancelFilter, ConfigDump, DiagStats, HoldKind, JobDesc, JobFilter, JobPriority,
    JobReason, JobRecord, JobState, JobUpdate, LicenseInfo, NodeBaseState, NodeFlags, NodeRecord,
    NodeSpec, NodeStateRequest, PartitionRecord, PartitionState, PartitionUpdate, RequestBody,
    ReservationRecord, ReservationSpec, Response, RpcError, SchedFlag, ShareInfo, SlurmError,
    StateSel, StepRecord, StepRequest, TopologyEntry,
};

impl From<JobDesc> for pb::JobDesc {
    fn from(d: JobDesc) -> Self {
        desc_to_pb(&d, true)
    }
}

/// `d` as a message; without its script, arguments and environment (the
/// payload) unless `payload`.
fn desc_to_pb(d: &JobDesc, payload: bool) -> pb::JobDesc {
    pb::JobDesc {
        name: d.name.clone(),
        partition: d.partition.clone(),
        account: d.account.clone(),
        qos: d.qos.clone(),
        time_limit: d.time_limit.flatten(),
        time_unlimited: matches!(d.time_limit, Some(None)),
        min_nodes: d.min_nodes,
        max_nodes: d.max_nodes,
        ntasks: d.ntasks,
        cpus_per_task: d.cpus_per_task,
        ntasks_per_node: d.ntasks_per_node,
        mem_per_node: d.mem_per_node,
        mem_per_cpu: d.mem_per_cpu,
        req_nodes: d.req_nodes.clone(),
        exc_nodes: d.exc_nodes.clone(),
        exclusive: d.exclusive,
        hold: d.hold,
        begin_time: d.begin_time,
        nice: d.nice,
        requeue: d.requeue,
        work_dir: d.work_dir.clone(),
        std_out: d.std_out.clone(),
        std_err: d.std_err.clone(),
        std_in: d.std_in.clone(),
        script: if payload {
            d.script.clone()
        } else {
            Default::default()
        },
        argv: if payload {
            d.argv.clone()
        } else {
            Default::default()
        },
        environment: if payload {
            d.environment.clone()
        } else {
            Default::default()
        },
        submit_host: d.submit_host.clone(),
        command: d.command.clone(),
        comment: d.comment.clone(),
        array: d.array.clone(),
        dependency: d.dependency.clone(),
        reservation: d.reservation.clone(),
        external: d.external,
        gres: d.gres.clone(),
        gpus: d.gpus.clone(),
        gpus_per_node: d.gpus_per_node.clone(),
        gpus_per_task: d.gpus_per_task.clone(),
        gpu_bind: d.gpu_bind.clone(),
        constraint: d.constraint.clone(),
        licenses: d.licenses.clone(),
        admin_comment: d.admin_comment.clone(),
        cpus_per_gpu: d.cpus_per_gpu,
        mem_per_gpu: d.mem_per_gpu,
        switches: d.switches,
        wait4switch: d.wait4switch,
        segment: d.segment,
        exclusive_topo: d.exclusive_topo,
        oversubscribe: d.oversubscribe,
        contiguous: d.contiguous,
        sockets_per_node: d.sockets_per_node,
        cores_per_socket: d.cores_per_socket,
        threads_per_core: d.threads_per_core,
        mail_type: d.mail_type.clone(),
        mail_user: d.mail_user.clone(),
        signal: d.signal.clone(),
        open_mode: d.open_mode.clone(),
        ntasks_per_socket: d.ntasks_per_socket,
        ntasks_per_core: d.ntasks_per_core,
        ntasks_per_gpu: d.ntasks_per_gpu,
        tmp_disk: d.tmp_disk,
        priority: d.priority,
        min_cpus: d.min_cpus,
        deadline: d.deadline,
        time_min: d.time_min,
        kill_on_invalid_dep: d.kill_on_invalid_dep,
        extra: d.extra.clone(),
        wckey: d.wckey.clone(),
        user_id: d.user_id,
        group_id: d.group_id,
        no_kill: d.no_kill,
        overcommit: d.overcommit,
    }
}

impl From<pb::JobDesc> for JobDesc {
    fn from(d: pb::JobDesc) -> Self {
        JobDesc {
            name: d.name,
            partition: d.partition,
            account: d.account,
            qos: d.qos,
            time_limit: match (d.time_unlimited, d.time_limit) {
                (true, _) => Some(None),
                (false, t) => t.map(Some),
            },
            min_nodes: d.min_nodes,
            max_nodes: d.max_nodes,
            ntasks: d.ntasks,
            cpus_per_task: d.cpus_per_task,
            ntasks_per_node: d.ntasks_per_node,
            mem_per_node: d.mem_per_node,
            mem_per_cpu: d.mem_per_cpu,
            req_nodes: d.req_nodes,
            exc_nodes: d.exc_nodes,
            exclusive: d.exclusive,
            hold: d.hold,
            begin_time: d.begin_time,
            nice: d.nice,
            requeue: d.requeue,
            work_dir: d.work_dir,
            std_out: d.std_out,
            std_err: d.std_err,
            std_in: d.std_in,
            script: d.script,
            argv: d.argv,
            environment: d.environment,
            submit_host: d.submit_host,
            command: d.command,
            comment: d.comment,
            array: d.array,
            dependency: d.dependency,
            reservation: d.reservation,
            external: d.external,
            gres: d.gres,
            gpus: d.gpus,
            gpus_per_node: d.gpus_per_node,
            gpus_per_task: d.gpus_per_task,
            gpu_bind: d.gpu_bind,
            constraint: d.constraint,
            licenses: d.licenses,
            admin_comment: d.admin_comment,
            cpus_per_gpu: d.cpus_per_gpu,
            mem_per_gpu: d.mem_per_gpu,
            switches: d.switches,
            wait4switch: d.wait4switch,
            segment: d.segment,
            exclusive_topo: d.exclusive_topo,
            oversubscribe: d.oversubscribe,
            contiguous: d.contiguous,
            sockets_per_node: d.sockets_per_node,
            cores_per_socket: d.cores_per_socket,
            mail_type: d.mail_type,
            mail_user: d.mail_user,
            signal: d.signal,
            open_mode: d.open_mode,
            threads_per_core: d.threads_per_core,
            ntasks_per_socket: d.ntasks_per_socket,
            ntasks_per_core: d.ntasks_per_core,
            ntasks_per_gpu: d.ntasks_per_gpu,
            tmp_disk: d.tmp_disk,
            priority: d.priority,
            min_cpus: d.min_cpus,
            deadline: d.deadline,
            time_min: d.time_min,
            kill_on_invalid_dep: d.kill_on_invalid_dep,
            extra: d.extra,
            wckey: d.wckey,
            user_id: d.user_id,
            group_id: d.group_id,
            no_kill: d.no_kill,
            overcommit: d.overcommit,
        }
    }
}

/// The job state a long name gives, or which field was wrong.
pub(super) fn state(name: &str, field: &'static str) -> Result<JobState, ConvError> {
    crate::ALL_JOB_STATES
        .into_iter()
        .find(|s| s.name() == name)
        .ok_or_else(|| ConvError {
            field,
            why: format!("unknown job state {name:?}"),
        })
}

impl From<ArrayInfo> for pb::ArrayInfo {
    fn from(a: ArrayInfo) -> Self {
        pb::ArrayInfo {
            job_id: a.job_id,
            task_id: a.task_id,
            task_count: a.task_count,
            task_min: a.task_min,
            task_max: a.task_max,
            task_step: a.task_step,
            max_running: a.max_running,
        }
    }
}

impl From<pb::ArrayInfo> for ArrayInfo {
    fn from(a: pb::ArrayInfo) -> Self {
        ArrayInfo {
            job_id: a.job_id,
            task_id: a.task_id,
            task_count: a.task_count,
            task_min: a.task_min,
            task_max: a.task_max,
            task_step: a.task_step,
            max_running: a.max_running,
        }
    }
}

impl From<&StepRecord> for pb::StepRecord {
    fn from(s: &StepRecord) -> Self {
        pb::StepRecord {
            step_id: s.step_id,
            name: s.name.clone(),
            state: s.state.name().to_string(),
            nodes: s.nodes.clone(),
            ntasks: s.ntasks,
            tasks_per_node: s.tasks_per_node.clone(),
            cpus_per_task: s.cpus_per_task,
            start_time: s.start_time,
            end_time: s.end_time,
            exit_status: s.exit_status,
            usage: s.usage.map(Into::into),
            usage_node: s.usage_node.clone(),
            time_limit: s.time_limit,
            cpus: s.cpus.clone(),
            overlap: s.overlap,
            gres: super::gres_to(s.gres.clone()),
            mem: s.mem.clone(),
        }
    }
}

impl TryFrom<pb::StepRecord> for StepRecord {
    type Error = ConvError;
    fn try_from(s: pb::StepRecord) -> Result<Self, ConvError> {
        Ok(StepRecord {
            step_id: s.step_id,
            name: s.name,
            state: state(&s.state, "step.state")?,
            nodes: s.nodes,
            ntasks: s.ntasks,
            tasks_per_node: s.tasks_per_node,
            cpus_per_task: s.cpus_per_task,
            start_time: s.start_time,
            end_time: s.end_time,
            exit_status: s.exit_status,
            usage: s.usage.map(Into::into),
            usage_node: s.usage_node,
            time_limit: s.time_limit,
            job_secs_at_start: None,
            cpus: s.cpus,
            overlap: s.overlap,
            gres: super::gres_from(s.gres),
            mem: s.mem,
            ended_on: Vec::new(),
        })
    }
}

/// A job as a listing sends it: everything but its script, arguments and
/// environment.
impl From<&JobRecord> for pb::JobRecord {
    fn from(j: &JobRecord) -> Self {
        pb::JobRecord {
            job_id: j.job_id,
            name: j.name.clone(),
            user_id: j.user_id,
            user_name: j.user_name.clone(),
            group_id: j.group_id,
            group_name: j.group_name.clone(),
            account: j.account.clone(),
            qos: j.qos.clone(),
            partition: j.partition.clone(),
            priority: j.priority,
            state: j.state.name().to_string(),
            completing: j.completing,
            reason: j.reason.to_string(),
            time_limit: j.time_limit,
            submit_time: j.submit_time,
            eligible_time: j.eligible_time,
            start_time: j.start_time,
            end_time: j.end_time,
            last_sched_eval: j.last_sched_eval,
            exit_status: j.exit_status,
            restarts: j.restarts,
            batch_host: j.batch_host.clone(),
            alloc: Some(j.alloc.clone().into()),
            completing_nodes: j.completing_nodes.clone(),
            desc: Some(desc_to_pb(&j.desc, false)),
            num_tasks: j.num_tasks,
            req_cpus: j.req_cpus,
            min_nodes: j.min_nodes,
            max_nodes: j.max_nodes,
            held: match j.held {
                None => pb::HoldKind::HoldNone,
                Some(HoldKind::User) => pb::HoldKind::HoldUser,
                Some(HoldKind::Admin) => pb::HoldKind::HoldAdmin,
            } as i32,
            cancelled: j.cancelled,
            timed_out: j.timed_out,
            node_failed: j.node_failed,
            array: j.array.clone().map(Into::into),
            dependency: j.dependency.clone(),
            steps: j.steps.iter().map(Into::into).collect(),
            batch: j.batch,
            cancelled_by: j.cancelled_by,
            suspend_time: j.suspend_time,
            suspended_secs: j.suspended_secs,
            preempt_suspended: j.preempt_suspended,
            gang_suspended: j.gang_suspended,
            reason_prev: if j.reason_prev.is_none() {
                String::new()
            } else {
                j.reason_prev.to_string()
            },
            sched_flag: j.sched_flag.map_or("", |f| f.name()).to_string(),
            failed_node: j.failed_node.clone(),
        }
    }
}

impl TryFrom<pb::JobRecord> for JobRecord {
    type Error = ConvError;
    fn try_from(j: pb::JobRecord) -> Result<Self, ConvError> {
        let held = match pb::HoldKind::try_from(j.held) {
            Ok(pb::HoldKind::HoldNone) => None,
            Ok(pb::HoldKind::HoldUser) => Some(HoldKind::User),
            Ok(pb::HoldKind::HoldAdmin) => Some(HoldKind::Admin),
            Err(_) => {
                return Err(ConvError {
                    field: "job.held",
                    why: format!("unknown hold kind {}", j.held),
                })
            }
        };
        Ok(JobRecord {
            job_id: j.job_id,
            name: j.name,
            user_id: j.user_id,
            user_name: j.user_name,
            group_id: j.group_id,
            group_name: j.group_name,
            account: j.account,
            qos: j.qos,
            partition: j.partition,
            priority: j.priority,
            state: state(&j.state, "job.state")?,
            completing: j.completing,
            reason: JobReason::from_name(&j.reason),
            time_limit: j.time_limit,
            submit_time: j.submit_time,
            eligible_time: j.eligible_time,
            start_time: j.start_time,
            // (The controller's own: not sent.)
            run_start: None,
            end_time: j.end_time,
            last_sched_eval: j.last_sched_eval,
            exit_status: j.exit_status,
            restarts: j.restarts,
            batch_host: j.batch_host,
            alloc: j.alloc.ok_or_else(|| missing("job.alloc"))?.into(),
            completing_nodes: j.completing_nodes,
            desc: std::sync::Arc::new(j.desc.ok_or_else(|| missing("job.desc"))?.into()),
            num_tasks: j.num_tasks,
            req_cpus: j.req_cpus,
            min_nodes: j.min_nodes,
            max_nodes: j.max_nodes,
            held,
            cancelled: j.cancelled,
            timed_out: j.timed_out,
            node_failed: j.node_failed,
            array: j.array.map(Into::into),
            dependency: j.dependency,
            steps: j
                .steps
                .into_iter()
                .map(TryInto::try_into)
                .collect::<Result<_, _>>()?,
            batch: j.batch,
            cancelled_by: j.cancelled_by,
            suspend_time: j.suspend_time,
            suspended_secs: j.suspended_secs,
            preempt_suspended: j.preempt_suspended,
            gang_suspended: j.gang_suspended,
            reason_prev: if j.reason_prev.is_empty() {
                JobReason::None
            } else {
                JobReason::from_name(&j.reason_prev)
            },
            // (A flag this side does not know reads as none: never a
            // reason to refuse a whole listing.)
            sched_flag: SchedFlag::from_name(&j.sched_flag),
            failed_node: j.failed_node,
        })
    }
}

/// The name `squeue -t CG` selects by.
const COMPLETING: &str = "COMPLETING";

impl From<JobFilter> for pb::JobFilter {
    fn from(f: JobFilter) -> Self {
        pb::JobFilter {
            job_ids: f.job_ids,
            users: f.users,
            states: f.states.map(|l| pb::StateList {
                states: l
                    .into_iter()
                    .map(|s| match s {
                        StateSel::Completing => COMPLETING.to_string(),
                        StateSel::State(st) => st.name().to_string(),
                    })
                    .collect(),
            }),
            partitions: f.partitions,
            names: f.names,
            accounts: f.accounts,
            qos: f.qos,
        }
    }
}

impl TryFrom<pb::JobFilter> for JobFilter {
    type Error = ConvError;
    fn try_from(f: pb::JobFilter) -> Result<Self, ConvError> {
        let states = match f.states {
            None => None,
            Some(l) => Some(
                l.states
                    .iter()
                    .map(|s| match s.as_str() {
                        COMPLETING => Ok(StateSel::Completing),
                        other => state(other, "filter.states").map(StateSel::State),
                    })
                    .collect::<Result<_, _>>()?,
            ),
        };
        Ok(JobFilter {
            job_ids: f.job_ids,
            users: f.users,
            states,
            partitions: f.partitions,
            names: f.names,
            accounts: f.accounts,
            qos: f.qos,
        })
    }
}

impl From<CancelFilter> for pb::CancelFilter {
    fn from(f: CancelFilter) -> Self {
        pb::CancelFilter {
            job_ids: f.job_ids,
            user: f.user,
            states: f.states.iter().map(|s| s.name().to_string()).collect(),
            name: f.name,
            partition: f.partition,
            signal: f.signal,
            admin_comment: f.admin_comment,
        }
    }
}

impl TryFrom<pb::CancelFilter> for CancelFilter {
    type Error = ConvError;
    fn try_from(f: pb::CancelFilter) -> Result<Self, ConvError> {
        Ok(CancelFilter {
            job_ids: f.job_ids,
            user: f.user,
            states: f
                .states
                .iter()
                .map(|s| state(s, "cancel.states"))
                .collect::<Result<_, _>>()?,
            name: f.name,
            partition: f.partition,
            signal: f.signal,
            admin_comment: f.admin_comment,
        })
    }
}

impl From<StepRequest> for pb::StepRequest {
    fn from(r: StepRequest) -> Self {
        pb::StepRequest {
            job_id: r.job_id,
            name: r.name,
            ntasks: r.ntasks,
            min_nodes: r.min_nodes,
            max_nodes: r.max_nodes,
            cpus_per_task: r.cpus_per_task,
            ntasks_per_node: r.ntasks_per_node,
            nodelist: r.nodelist,
            exclude: r.exclude,
            distribution: r.distribution,
            relative: r.relative,
            ntasks_per_core: r.ntasks_per_core,
            time_limit: r.time_limit,
            exact: r.exact,
            overlap: r.overlap,
            overcommit: r.overcommit,
            gpus: r.gpus.map(Into::into),
            mem_per_node: r.mem_per_node,
            mem_per_cpu: r.mem_per_cpu,
        }
    }
}

impl From<pb::StepRequest> for StepRequest {
    fn from(r: pb::StepRequest) -> Self {
        StepRequest {
            job_id: r.job_id,
            name: r.name,
            ntasks: r.ntasks,
            min_nodes: r.min_nodes,
            max_nodes: r.max_nodes,
            cpus_per_task: r.cpus_per_task,
            ntasks_per_node: r.ntasks_per_node,
            nodelist: r.nodelist,
            exclude: r.exclude,
            distribution: r.distribution,
            relative: r.relative,
            ntasks_per_core: r.ntasks_per_core,
            time_limit: r.time_limit,
            exact: r.exact,
            overlap: r.overlap,
            overcommit: r.overcommit,
            gpus: r.gpus.map(Into::into),
            mem_per_node: r.mem_per_node,
            mem_per_cpu: r.mem_per_cpu,
        }
    }
}

impl From<&NodeRecord> for pb::NodeRecord {
    fn from(n: &NodeRecord) -> Self {
        let base_state = match n.base_state {
            NodeBaseState::Unknown => pb::NodeBaseState::NodeUnknown,
            NodeBaseState::Idle => pb::NodeBaseState::NodeIdle,
            NodeBaseState::Allocated => pb::NodeBaseState::NodeAllocated,
            NodeBaseState::Mixed => pb::NodeBaseState::NodeMixed,
            NodeBaseState::Down => pb::NodeBaseState::NodeDown,
            NodeBaseState::Future => pb::NodeBaseState::NodeFuture,
        };
        pb::NodeRecord {
            name: n.name.clone(),
            addr: n.addr.clone(),
            hostname: n.hostname.clone(),
            port: n.port.into(),
            cpus: n.cpus,
            boards: n.boards,
            sockets: n.sockets,
            cores_per_socket: n.cores_per_socket,
            threads_per_core: n.threads_per_core,
            real_memory: n.real_memory,
            tmp_disk: n.tmp_disk,
            weight: n.weight,
            features: n.features.clone(),
            gres: n.gres.clone(),
            base_state: base_state as i32,
            drain: n.flags.drain,
            not_responding: n.flags.not_responding,
            completing: n.flags.completing,
            reserved: n.flags.reserved,
            maint: n.flags.maint,
            reboot_requested: n.flags.reboot_requested,
            reboot_issued: n.flags.reboot_issued,
            reason: n.reason.clone(),
            reason_time: n.reason_time,
            reason_uid: n.reason_uid,
            alloc_cpus: n.alloc_cpus,
            alloc_mem: n.alloc_mem,
            partitions: n.partitions.clone(),
            boot_time: n.boot_time,
            slurmd_start_time: n.slurmd_start_time,
            last_busy: n.last_busy,
            last_heard: n.last_heard,
            version: n.version.clone(),
            os: n.os.clone(),
            arch: n.arch.clone(),
            cpu_load: n.cpu_load,
            free_mem: n.free_mem,
            external: n.external,
            kubelet: n.kubelet,
        }
    }
}

impl TryFrom<pb::NodeRecord> for NodeRecord {
    type Error = ConvError;
    fn try_from(n: pb::NodeRecord) -> Result<Self, ConvError> {
        let base_state = match pb::NodeBaseState::try_from(n.base_state) {
            Ok(pb::NodeBaseState::NodeUnknown) => NodeBaseState::Unknown,
            Ok(pb::NodeBaseState::NodeIdle) => NodeBaseState::Idle,
            Ok(pb::NodeBaseState::NodeAllocated) => NodeBaseState::Allocated,
            Ok(pb::NodeBaseState::NodeMixed) => NodeBaseState::Mixed,
            Ok(pb::NodeBaseState::NodeDown) => NodeBaseState::Down,
            Ok(pb::NodeBaseState::NodeFuture) => NodeBaseState::Future,
            Err(_) => {
                return Err(ConvError {
                    field: "node.base_state",
                    why: format!("unknown state {}", n.base_state),
                })
            }
        };
        Ok(NodeRecord {
            port: u16::try_from(n.port).map_err(|_| ConvError {
                field: "node.port",
                why: format!("{} is not a port", n.port),
            })?,
            name: n.name,
            addr: n.addr,
            hostname: n.hostname,
            cpus: n.cpus,
            boards: n.boards,
            sockets: n.sockets,
            cores_per_socket: n.cores_per_socket,
            threads_per_core: n.threads_per_core,
            real_memory: n.real_memory,
            tmp_disk: n.tmp_disk,
            weight: n.weight,
            features: n.features,
            gres: n.gres,
            base_state,
            flags: NodeFlags {
                drain: n.drain,
                not_responding: n.not_responding,
                completing: n.completing,
                reserved: n.reserved,
                maint: n.maint,
                reboot_requested: n.reboot_requested,
                reboot_issued: n.reboot_issued,
            },
            reason: n.reason,
            reason_time: n.reason_time,
            reason_uid: n.reason_uid,
            alloc_cpus: n.alloc_cpus,
            alloc_mem: n.alloc_mem,
            partitions: n.partitions,
            boot_time: n.boot_time,
            slurmd_start_time: n.slurmd_start_time,
            last_busy: n.last_busy,
            last_heard: n.last_heard,
            version: n.version,
            os: n.os,
            arch: n.arch,
            cpu_load: n.cpu_load,
            free_mem: n.free_mem,
            external: n.external,
            kubelet: n.kubelet,
        })
    }
}

impl From<&PartitionRecord> for pb::PartitionRecord {
    fn from(p: &PartitionRecord) -> Self {
        let state = partition_state_to(p.state);
        pb::PartitionRecord {
            name: p.name.clone(),
            nodes_expr: p.nodes_expr.clone(),
            nodes: p.nodes.clone(),
            default: p.default,
            max_time: p.max_time,
            default_time: p.default_time,
            state: state as i32,
            priority_job_factor: p.priority_job_factor,
            priority_tier: p.priority_tier,
            oversubscribe: p.oversubscribe.clone(),
            max_nodes: p.max_nodes,
            min_nodes: p.min_nodes,
            hidden: p.hidden,
            allow_groups: p.allow_groups.clone(),
            allow_accounts: p.allow_accounts.clone(),
            allow_qos: p.allow_qos.clone(),
            def_mem_per_cpu: p.def_mem_per_cpu,
            max_mem_per_node: p.max_mem_per_node,
            total_cpus: p.total_cpus,
            total_mem: p.total_mem,
        }
    }
}

impl TryFrom<pb::PartitionRecord> for PartitionRecord {
    type Error = ConvError;
    fn try_from(p: pb::PartitionRecord) -> Result<Self, ConvError> {
        let state = partition_state_from(p.state, "partition.state")?;
        Ok(PartitionRecord {
            name: p.name,
            nodes_expr: p.nodes_expr,
            nodes: p.nodes,
            default: p.default,
            max_time: p.max_time,
            default_time: p.default_time,
            state,
            priority_job_factor: p.priority_job_factor,
            priority_tier: p.priority_tier,
            oversubscribe: p.oversubscribe,
            max_nodes: p.max_nodes,
            min_nodes: p.min_nodes,
            hidden: p.hidden,
            allow_groups: p.allow_groups,
            allow_accounts: p.allow_accounts,
            allow_qos: p.allow_qos,
            def_mem_per_cpu: p.def_mem_per_cpu,
            max_mem_per_node: p.max_mem_per_node,
            total_cpus: p.total_cpus,
            total_mem: p.total_mem,
        })
    }
}

impl From<JobUpdate> for pb::update_job_request::Change {
    fn from(u: JobUpdate) -> Self {
        use pb::update_job_request::Change as C;
        match u {
            JobUpdate::Hold => C::Hold(pb::Empty {}),
            JobUpdate::Release => C::Release(pb::Empty {}),
            JobUpdate::Requeue => C::Requeue(pb::Empty {}),
            JobUpdate::TimeLimit(minutes) => C::TimeLimit(pb::TimeLimit { minutes }),
            JobUpdate::Nice(n) => C::Nice(n),
            JobUpdate::Name(v) => C::Name(v),
            JobUpdate::Comment(v) => C::Comment(v),
            JobUpdate::AdminComment(v) => C::AdminComment(v),
            JobUpdate::Partition(v) => C::Partition(v),
            JobUpdate::Account(v) => C::Account(v),
            JobUpdate::Qos(v) => C::Qos(v),
        }
    }
}

impl From<pb::update_job_request::Change> for JobUpdate {
    fn from(c: pb::update_job_request::Change) -> Self {
        use pb::update_job_request::Change as C;
        match c {
            C::Hold(_) => JobUpdate::Hold,
            C::Release(_) => JobUpdate::Release,
            C::Requeue(_) => JobUpdate::Requeue,
            C::TimeLimit(t) => JobUpdate::TimeLimit(t.minutes),
            C::Nice(n) => JobUpdate::Nice(n),
            C::Name(v) => JobUpdate::Name(v),
            C::Comment(v) => JobUpdate::Comment(v),
            C::AdminComment(v) => JobUpdate::AdminComment(v),
            C::Partition(v) => JobUpdate::Partition(v),
            C::Account(v) => JobUpdate::Account(v),
            C::Qos(v) => JobUpdate::Qos(v),
        }
    }
}

fn reboot_from(r: pb::RebootNodesRequest) -> Result<crate::RebootNodes, ConvError> {
    Ok(crate::RebootNodes {
        names: r.names,
        asap: r.asap,
        force: r.force,
        next_state: r.next_state.map(node_change_from).transpose()?,
        reason: r.reason,
        cancel: r.cancel,
    })
}

fn node_change_to(s: NodeStateRequest) -> pb::NodeStateChange {
    match s {
        NodeStateRequest::Drain => pb::NodeStateChange::NodeChangeDrain,
        NodeStateRequest::Resume => pb::NodeStateChange::NodeChangeResume,
        NodeStateRequest::Down => pb::NodeStateChange::NodeChangeDown,
        NodeStateRequest::Undrain => pb::NodeStateChange::NodeChangeUndrain,
        NodeStateRequest::Idle => pb::NodeStateChange::NodeChangeIdle,
    }
}

fn node_change_from(v: i32) -> Result<NodeStateRequest, ConvError> {
    Ok(match pb::NodeStateChange::try_from(v) {
        Ok(pb::NodeStateChange::NodeChangeDrain) => NodeStateRequest::Drain,
        Ok(pb::NodeStateChange::NodeChangeResume) => NodeStateRequest::Resume,
        Ok(pb::NodeStateChange::NodeChangeDown) => NodeStateRequest::Down,
        Ok(pb::NodeStateChange::NodeChangeUndrain) => NodeStateRequest::Undrain,
        Ok(pb::NodeStateChange::NodeChangeIdle) => NodeStateRequest::Idle,
        Err(_) => {
            return Err(ConvError {
                field: "update.state",
                why: format!("unknown node state change {v}"),
            })
        }
    })
}

impl From<&TopologyEntry> for pb::TopologyEntry {
    fn from(t: &TopologyEntry) -> Self {
        pb::TopologyEntry {
            topology: t.topology.clone(),
            block: t.block,
            name: t.name.clone(),
            level: t.level,
            nodes: t.nodes.clone(),
            switches: t.switches.clone(),
        }
    }
}

impl From<pb::TopologyEntry> for TopologyEntry {
    fn from(t: pb::TopologyEntry) -> Self {
        TopologyEntry {
            topology: t.topology,
            block: t.block,
            name: t.name,
            level: t.level,
            nodes: t.nodes,
            switches: t.switches,
        }
    }
}

use crate::{PendingRpc, RpcStat};

wire!(RpcStat <=> RpcStat { name, id, count, total_us });
wire!(PendingRpc <=> PendingRpc { name, id, count, hosts });
wire!(DiagStats <=> DiagStats {
    since, now, jobs_submitted, jobs_started, jobs_completed, jobs_canceled,
    jobs_failed, jobs_pending, jobs_running, main_cycles, main_last_us,
    main_max_us, main_total_us, main_total_depth, main_last_queue, bf_cycles,
    bf_last_us, bf_max_us, bf_total_us, bf_last_depth, bf_total_depth,
    bf_backfilled_jobs, bf_last_when, bf_last_queue, rpc_types, rpc_users,
    server_threads, agent_count, agent_retrying, dbd_queue, pending_rpcs, job_states_ts,
    bf_last_depth_try, bf_total_depth_try, bf_total_queue, bf_table_size,
    bf_total_table_size, bf_exit_end, bf_exit_max_job_test, gettimeofday_latency,
});

impl From<JobPriority> for pb::JobPriority {
    fn from(p: JobPriority) -> Self {
        pb::JobPriority {
            job_id: p.job_id,
            partition: p.partition,
            user: p.user,
            priority: p.priority,
            site: p.site,
            age: p.age,
            assoc: p.assoc,
            fairshare: p.fairshare,
            job_size: p.job_size,
            partition_factor: p.partition_factor,
            qos: p.qos,
            nice: p.nice,
            tres: p.tres,
            account: p.account,
            qos_name: p.qos_name,
        }
    }
}

impl From<pb::JobPriority> for JobPriority {
    fn from(p: pb::JobPriority) -> Self {
        JobPriority {
            job_id: p.job_id,
            partition: p.partition,
            user: p.user,
            priority: p.priority,
            site: p.site,
            age: p.age,
            assoc: p.assoc,
            fairshare: p.fairshare,
            job_size: p.job_size,
            partition_factor: p.partition_factor,
            qos: p.qos,
            nice: p.nice,
            tres: p.tres,
            account: p.account,
            qos_name: p.qos_name,
        }
    }
}

impl From<ShareInfo> for pb::ShareInfo {
    fn from(s: ShareInfo) -> Self {
        pb::ShareInfo {
            account: s.account,
            user: s.user,
            depth: s.depth,
            raw_shares: s.raw_shares,
            norm_shares: s.norm_shares,
            raw_usage: s.raw_usage,
            effective_usage: s.effective_usage,
            fairshare: s.fairshare,
            level_fs: s.level_fs,
            partition: s.partition,
            norm_usage: s.norm_usage,
            assoc_id: s.assoc_id,
            tres_names: s.tres_names,
            tres_grp_mins: s.tres_grp_mins,
            tres_run_secs: s.tres_run_secs,
        }
    }
}

impl From<pb::ShareInfo> for ShareInfo {
    fn from(s: pb::ShareInfo) -> Self {
        ShareInfo {
            account: s.account,
            user: s.user,
            depth: s.depth,
            raw_shares: s.raw_shares,
            norm_shares: s.norm_shares,
            raw_usage: s.raw_usage,
            effective_usage: s.effective_usage,
            fairshare: s.fairshare,
            level_fs: s.level_fs,
            partition: s.partition,
            norm_usage: s.norm_usage,
            assoc_id: s.assoc_id,
            tres_names: s.tres_names,
            tres_grp_mins: s.tres_grp_mins,
            tres_run_secs: s.tres_run_secs,
        }
    }
}

impl From<ReservationRecord> for pb::ReservationRecord {
    fn from(r: ReservationRecord) -> Self {
        pb::ReservationRecord {
            name: r.name,
            start_time: r.start_time,
            end_time: r.end_time,
            nodes: r.nodes,
            users: r.users,
            accounts: r.accounts,
            partition: r.partition,
            flags: r.flags,
            core_cnt: r.core_cnt,
        }
    }
}

impl From<pb::ReservationRecord> for ReservationRecord {
    fn from(r: pb::ReservationRecord) -> Self {
        ReservationRecord {
            name: r.name,
            start_time: r.start_time,
            end_time: r.end_time,
            nodes: r.nodes,
            users: r.users,
            accounts: r.accounts,
            partition: r.partition,
            flags: r.flags,
            core_cnt: r.core_cnt,
            record_start: None,
        }
    }
}

fn list_to(v: Option<Vec<String>>) -> Option<pb::StringList> {
    v.map(|items| pb::StringList { items })
}

fn list_from(v: Option<pb::StringList>) -> Option<Vec<String>> {
    v.map(|l| l.items)
}

impl From<ReservationSpec> for pb::ReservationSpec {
    fn from(r: ReservationSpec) -> Self {
        pb::ReservationSpec {
            name: r.name,
            start_time: r.start_time,
            end_time: r.end_time,
            duration: r.duration,
            nodes: list_to(r.nodes),
            node_cnt: r.node_cnt,
            users: list_to(r.users),
            accounts: list_to(r.accounts),
            partition: r.partition,
            flags: list_to(r.flags),
        }
    }
}

impl From<pb::ReservationSpec> for ReservationSpec {
    fn from(r: pb::ReservationSpec) -> Self {
        ReservationSpec {
            name: r.name,
            start_time: r.start_time,
            end_time: r.end_time,
            duration: r.duration,
            nodes: list_from(r.nodes),
            node_cnt: r.node_cnt,
            users: list_from(r.users),
            accounts: list_from(r.accounts),
            partition: r.partition,
            flags: list_from(r.flags),
        }
    }
}

fn partition_state_to(s: PartitionState) -> pb::PartitionState {
    match s {
        PartitionState::Up => pb::PartitionState::PartitionUp,
        PartitionState::Down => pb::PartitionState::PartitionDown,
        PartitionState::Drain => pb::PartitionState::PartitionDrain,
        PartitionState::Inactive => pb::PartitionState::PartitionInactive,
    }
}

fn partition_state_from(v: i32, field: &'static str) -> Result<PartitionState, ConvError> {
    Ok(match pb::PartitionState::try_from(v) {
        Ok(pb::PartitionState::PartitionUp) => PartitionState::Up,
        Ok(pb::PartitionState::PartitionDown) => PartitionState::Down,
        Ok(pb::PartitionState::PartitionDrain) => PartitionState::Drain,
        Ok(pb::PartitionState::PartitionInactive) => PartitionState::Inactive,
        Err(_) => {
            return Err(ConvError {
                field,
                why: format!("unknown state {v}"),
            })
        }
    })
}

impl From<PartitionUpdate> for pb::PartitionUpdate {
    fn from(u: PartitionUpdate) -> Self {
        pb::PartitionUpdate {
            name: u.name,
            state: u.state.map(|s| partition_state_to(s) as i32),
            max_time: u.max_time.map(|minutes| pb::TimeLimit { minutes }),
            default_time: u.default_time.map(|minutes| pb::TimeLimit { minutes }),
            nodes: u.nodes,
            default: u.default,
        }
    }
}

impl TryFrom<pb::PartitionUpdate> for PartitionUpdate {
    type Error = ConvError;
    fn try_from(u: pb::PartitionUpdate) -> Result<Self, ConvError> {
        Ok(PartitionUpdate {
            name: u.name,
            state: u
                .state
                .map(|s| partition_state_from(s, "update.state"))
                .transpose()?,
            max_time: u.max_time.map(|t| t.minutes),
            default_time: u.default_time.map(|t| t.minutes),
            nodes: u.nodes,
            default: u.default,
        })
    }
}

impl From<NodeSpec> for pb::NodeSpec {
    fn from(n: NodeSpec) -> Self {
        pb::NodeSpec {
            name: n.name,
            cpus: n.cpus,
            real_memory: n.real_memory,
            features: n.features,
            partitions: n.partitions,
            state: n.state,
            addr: n.addr,
            port: n.port.map(u32::from),
            gres: n.gres,
        }
    }
}

impl TryFrom<pb::NodeSpec> for NodeSpec {
    type Error = ConvError;
    fn try_from(n: pb::NodeSpec) -> Result<Self, ConvError> {
        Ok(NodeSpec {
            port: n
                .port
                .map(|p| {
                    u16::try_from(p).map_err(|_| ConvError {
                        field: "node.port",
                        why: format!("{p} is not a port"),
                    })
                })
                .transpose()?,
            name: n.name,
            cpus: n.cpus,
            real_memory: n.real_memory,
            features: n.features,
            partitions: n.partitions,
            state: n.state,
            addr: n.addr,
            gres: n.gres,
        })
    }
}

/// A command's request to the controller in its gRPC form.
#[derive(Debug, Clone, PartialEq)]
pub enum CommandCall {
    Ping(pb::Empty),
    SubmitJob(Box<pb::JobDesc>),
    TestJob(Box<pb::JobDesc>),
    AllocateJob(Box<pb::JobDesc>),
    GetJobs(pb::JobQuery),
    CancelJobs(pb::CancelFilter),
    CompleteJob(pb::CompleteJobRequest),
    CreateStep(pb::StepRequest),
    StepComplete(pb::StepCompleteRequest),
    CancelStep(pb::CancelStepRequest),
    GetNodes(pb::Empty),
    GetPartitions(pb::Empty),
    UpdateJob(pb::UpdateJobRequest),
    SuspendJob(pb::SuspendRequest),
    UpdateNode(pb::UpdateNodeRequest),
    RebootNodes(pb::RebootNodesRequest),
    TopJobs(pb::TopJobsRequest),
    NotifyJob(pb::JobNotifyRequest),
    UpdateStep(pb::StepUpdateRequest),
    Reconfigure(pb::Empty),
    GetToken(pb::TokenRequest),
    GetLicenses(pb::Empty),
    GetTopoConfig(pb::Empty),
    GetJobScript(pb::JobIdRequest),
    GetConfig(pb::Empty),
    GetTopology(pb::Empty),
    GetDiag(pb::Empty),
    ResetDiag(pb::Empty),
    GetPriorities(pb::Empty),
    GetShares(pb::Empty),
    GetReservations(pb::Empty),
    CreateReservation(pb::ReservationSpec),
    UpdateReservation(pb::ReservationSpec),
    DeleteReservation(pb::NameRequest),
    UpdatePartition(pb::PartitionUpdate),
    CreateNode(pb::NodeSpec),
    DeleteNode(pb::NameRequest),
    CreatePartition(pb::PartitionUpdate),
    DeletePartition(pb::NameRequest),
    AcctChanged(pb::Empty),
    GetJobsDelta(pb::JobsDeltaRequest),
    Takeover(pb::Empty),
    RelinquishControl(pb::Empty),
    Shutdown(pb::ShutdownRequest),
    SetDebug(pb::DebugLevel),
    SetDebugFlags(pb::DebugFlagsRequest),
    SetSchedLogLevel(pb::SchedLogLevel),
    SetFsDampeningFactor(pb::FsDampeningFactor),
}

/// The full gRPC path of each command method of `Controller`.
pub mod command_method {
    pub const PING: &str = "/slurm.v1.Controller/Ping";
    pub const SUBMIT_JOB: &str = "/slurm.v1.Controller/SubmitJob";
    pub const TEST_JOB: &str = "/slurm.v1.Controller/TestJob";
    pub const ALLOCATE_JOB: &str = "/slurm.v1.Controller/AllocateJob";
    pub const GET_JOBS: &str = "/slurm.v1.Controller/GetJobs";
    pub const CANCEL_JOBS: &str = "/slurm.v1.Controller/CancelJobs";
    pub const COMPLETE_JOB: &str = "/slurm.v1.Controller/CompleteJob";
    pub const CREATE_STEP: &str = "/slurm.v1.Controller/CreateStep";
    pub const STEP_COMPLETE: &str = "/slurm.v1.Controller/StepComplete";
    pub const CANCEL_STEP: &str = "/slurm.v1.Controller/CancelStep";
    pub const GET_NODES: &str = "/slurm.v1.Controller/GetNodes";
    pub const GET_PARTITIONS: &str = "/slurm.v1.Controller/GetPartitions";
    pub const UPDATE_JOB: &str = "/slurm.v1.Controller/UpdateJob";
    pub const SUSPEND_JOB: &str = "/slurm.v1.Controller/SuspendJob";
    pub const UPDATE_NODE: &str = "/slurm.v1.Controller/UpdateNode";
    pub const REBOOT_NODES: &str = "/slurm.v1.Controller/RebootNodes";
    pub const TOP_JOBS: &str = "/slurm.v1.Controller/TopJobs";
    pub const NOTIFY_JOB: &str = "/slurm.v1.Controller/NotifyJob";
    pub const UPDATE_STEP: &str = "/slurm.v1.Controller/UpdateStep";
    pub const RECONFIGURE: &str = "/slurm.v1.Controller/Reconfigure";
    pub const GET_TOKEN: &str = "/slurm.v1.Controller/GetToken";
    pub const GET_LICENSES: &str = "/slurm.v1.Controller/GetLicenses";
    pub const GET_TOPO_CONFIG: &str = "/slurm.v1.Controller/GetTopoConfig";
    pub const GET_JOB_SCRIPT: &str = "/slurm.v1.Controller/GetJobScript";
    pub const GET_CONFIG: &str = "/slurm.v1.Controller/GetConfig";
    pub const GET_TOPOLOGY: &str = "/slurm.v1.Controller/GetTopology";
    pub const GET_DIAG: &str = "/slurm.v1.Controller/GetDiag";
    pub const RESET_DIAG: &str = "/slurm.v1.Controller/ResetDiag";
    pub const GET_PRIORITIES: &str = "/slurm.v1.Controller/GetPriorities";
    pub const GET_SHARES: &str = "/slurm.v1.Controller/GetShares";
    pub const GET_RESERVATIONS: &str = "/slurm.v1.Controller/GetReservations";
    pub const CREATE_RESERVATION: &str = "/slurm.v1.Controller/CreateReservation";
    pub const UPDATE_RESERVATION: &str = "/slurm.v1.Controller/UpdateReservation";
    pub const DELETE_RESERVATION: &str = "/slurm.v1.Controller/DeleteReservation";
    pub const UPDATE_PARTITION: &str = "/slurm.v1.Controller/UpdatePartition";
    pub const CREATE_NODE: &str = "/slurm.v1.Controller/CreateNode";
    pub const DELETE_NODE: &str = "/slurm.v1.Controller/DeleteNode";
    pub const CREATE_PARTITION: &str = "/slurm.v1.Controller/CreatePartition";
    pub const DELETE_PARTITION: &str = "/slurm.v1.Controller/DeletePartition";
    pub const ACCT_CHANGED: &str = "/slurm.v1.Controller/AcctChanged";
    pub const GET_JOBS_DELTA: &str = "/slurm.v1.Controller/GetJobsDelta";
    pub const TAKEOVER: &str = "/slurm.v1.Controller/Takeover";
    pub const SHUTDOWN: &str = "/slurm.v1.Controller/Shutdown";
    pub const SET_DEBUG: &str = "/slurm.v1.Controller/SetDebug";
    pub const SET_DEBUG_FLAGS: &str = "/slurm.v1.Controller/SetDebugFlags";
    pub const SET_SCHED_LOG_LEVEL: &str = "/slurm.v1.Controller/SetSchedLogLevel";
    pub const SET_FS_DAMPENING_FACTOR: &str = "/slurm.v1.Controller/SetFsDampeningFactor";
    pub const RELINQUISH_CONTROL: &str = "/slurm.v1.Controller/RelinquishControl";
    pub const REPLICATE: &str = "/slurm.v1.Controller/Replicate";
}

impl CommandCall {
    /// The request in its gRPC form; `Err` gives back a body that still
    /// travels as a framed request.
    pub fn from_body(body: RequestBody) -> Result<CommandCall, Box<RequestBody>> {
        Ok(match body {
            RequestBody::Ping => CommandCall::Ping(pb::Empty {}),
            RequestBody::SubmitBatchJob(d) => CommandCall::SubmitJob(Box::new(d.into())),
            RequestBody::TestJob(d) => CommandCall::TestJob(Box::new(d.into())),
            RequestBody::AllocateJob(d) => CommandCall::AllocateJob(Box::new(d.into())),
            RequestBody::GetJobs => CommandCall::GetJobs(pb::JobQuery {
                filter: None,
                brief: false,
            }),
            RequestBody::GetJobsMatching(f) => CommandCall::GetJobs(pb::JobQuery {
                filter: Some(f.into()),
                brief: false,
            }),
            RequestBody::GetJobsBrief(f) => CommandCall::GetJobs(pb::JobQuery {
                filter: f.map(Into::into),
                brief: true,
            }),
            RequestBody::Cancel(f) => CommandCall::CancelJobs(f.into()),
            RequestBody::CompleteJob { job_id, status } => {
                CommandCall::CompleteJob(pb::CompleteJobRequest { job_id, status })
            }
            RequestBody::CreateStep(r) => CommandCall::CreateStep(r.into()),
            RequestBody::StepComplete {
                job_id,
                step_id,
                status,
                job_start,
            } => CommandCall::StepComplete(pb::StepCompleteRequest {
                job_id,
                step_id,
                status,
                job_start,
            }),
            RequestBody::CancelStep {
                job_id,
                step_id,
                signal,
            } => CommandCall::CancelStep(pb::CancelStepRequest {
                job_id,
                step_id,
                signal,
            }),
            RequestBody::GetNodes => CommandCall::GetNodes(pb::Empty {}),
            RequestBody::GetPartitions => CommandCall::GetPartitions(pb::Empty {}),
            RequestBody::UpdateJob { job_id, update } => {
                CommandCall::UpdateJob(pb::UpdateJobRequest {
                    job_id,
                    change: Some(update.into()),
                })
            }
            RequestBody::SuspendJob { job_id, suspend } => {
                CommandCall::SuspendJob(pb::SuspendRequest { job_id, suspend })
            }
            RequestBody::UpdateNode {
                names,
                state,
                reason,
                features,
            } => CommandCall::UpdateNode(pb::UpdateNodeRequest {
                names,
                state: state.map(|s| node_change_to(s) as i32),
                reason,
                features: features.map(|items| pb::StringList { items }),
            }),
            RequestBody::RebootNodes(r) => CommandCall::RebootNodes(pb::RebootNodesRequest {
                names: r.names,
                asap: r.asap,
                force: r.force,
                next_state: r.next_state.map(|s| node_change_to(s) as i32),
                reason: r.reason,
                cancel: r.cancel,
            }),
            RequestBody::TopJobs { job_ids } => {
                CommandCall::TopJobs(pb::TopJobsRequest { job_ids })
            }
            RequestBody::NotifyJob { job_id, message } => {
                CommandCall::NotifyJob(pb::JobNotifyRequest { job_id, message })
            }
            RequestBody::UpdateStep {
                job_id,
                step_id,
                time_limit,
            } => CommandCall::UpdateStep(pb::StepUpdateRequest {
                job_id,
                step_id,
                time_limit,
            }),
            RequestBody::Reconfigure => CommandCall::Reconfigure(pb::Empty {}),
            RequestBody::GetToken { username, lifespan } => {
                CommandCall::GetToken(pb::TokenRequest { username, lifespan })
            }
            RequestBody::GetLicenses => CommandCall::GetLicenses(pb::Empty {}),
            RequestBody::GetTopoConfig => CommandCall::GetTopoConfig(pb::Empty {}),
            RequestBody::GetJobScript { job_id } => {
                CommandCall::GetJobScript(pb::JobIdRequest { job_id })
            }
            RequestBody::GetConfig => CommandCall::GetConfig(pb::Empty {}),
            RequestBody::GetTopology => CommandCall::GetTopology(pb::Empty {}),
            RequestBody::GetDiag => CommandCall::GetDiag(pb::Empty {}),
            RequestBody::ResetDiag => CommandCall::ResetDiag(pb::Empty {}),
            RequestBody::GetPriorities => CommandCall::GetPriorities(pb::Empty {}),
            RequestBody::GetShares => CommandCall::GetShares(pb::Empty {}),
            RequestBody::GetReservations => CommandCall::GetReservations(pb::Empty {}),
            RequestBody::CreateReservation(r) => CommandCall::CreateReservation(r.into()),
            RequestBody::UpdateReservation(r) => CommandCall::UpdateReservation(r.into()),
            RequestBody::DeleteReservation { name } => {
                CommandCall::DeleteReservation(pb::NameRequest { name })
            }
            RequestBody::UpdatePartition(u) => CommandCall::UpdatePartition(u.into()),
            RequestBody::CreateNode(n) => CommandCall::CreateNode(n.into()),
            RequestBody::DeleteNode { name } => CommandCall::DeleteNode(pb::NameRequest { name }),
            RequestBody::CreatePartition(u) => CommandCall::CreatePartition(u.into()),
            RequestBody::DeletePartition { name } => {
                CommandCall::DeletePartition(pb::NameRequest { name })
            }
            RequestBody::AcctChanged => CommandCall::AcctChanged(pb::Empty {}),
            RequestBody::Takeover => CommandCall::Takeover(pb::Empty {}),
            RequestBody::Shutdown { controller_only } => {
                CommandCall::Shutdown(pb::ShutdownRequest { controller_only })
            }
            RequestBody::SetDebug { level } => CommandCall::SetDebug(pb::DebugLevel { level }),
            RequestBody::SetDebugFlags { plus, minus } => {
                CommandCall::SetDebugFlags(pb::DebugFlagsRequest { plus, minus })
            }
            RequestBody::SetSchedLogLevel { level } => {
                CommandCall::SetSchedLogLevel(pb::SchedLogLevel { level })
            }
            RequestBody::SetFsDampeningFactor { factor } => {
                CommandCall::SetFsDampeningFactor(pb::FsDampeningFactor {
                    factor: u32::from(factor),
                })
            }
            RequestBody::RelinquishControl => CommandCall::RelinquishControl(pb::Empty {}),
            RequestBody::GetJobsDelta { epoch, since } => {
                CommandCall::GetJobsDelta(pb::JobsDeltaRequest { epoch, since })
            }
            other => return Err(Box::new(other)),
        })
    }

    /// The request as the controller acts on it.
    pub fn into_body(self) -> Result<RequestBody, ConvError> {
        Ok(match self {
            CommandCall::Ping(_) => RequestBody::Ping,
            CommandCall::SubmitJob(d) => RequestBody::SubmitBatchJob((*d).into()),
            CommandCall::TestJob(d) => RequestBody::TestJob((*d).into()),
            CommandCall::AllocateJob(d) => RequestBody::AllocateJob((*d).into()),
            // The controller answers a brief query as any other (the
            // caller leaves the requests out as it decodes).
            CommandCall::GetJobs(q) => match q.filter {
                None => RequestBody::GetJobs,
                Some(f) => RequestBody::GetJobsMatching(f.try_into()?),
            },
            CommandCall::CancelJobs(f) => RequestBody::Cancel(f.try_into()?),
            CommandCall::CompleteJob(c) => RequestBody::CompleteJob {
                job_id: c.job_id,
                status: c.status,
            },
            CommandCall::CreateStep(r) => RequestBody::CreateStep(r.into()),
            CommandCall::StepComplete(s) => RequestBody::StepComplete {
                job_id: s.job_id,
                step_id: s.step_id,
                status: s.status,
                job_start: s.job_start,
            },
            CommandCall::CancelStep(c) => RequestBody::CancelStep {
                job_id: c.job_id,
                step_id: c.step_id,
                signal: c.signal,
            },
            CommandCall::GetNodes(_) => RequestBody::GetNodes,
            CommandCall::GetPartitions(_) => RequestBody::GetPartitions,
            CommandCall::UpdateJob(u) => RequestBody::UpdateJob {
                job_id: u.job_id,
                update: u.change.ok_or_else(|| missing("update.change"))?.into(),
            },
            CommandCall::SuspendJob(r) => RequestBody::SuspendJob {
                job_id: r.job_id,
                suspend: r.suspend,
            },
            CommandCall::UpdateNode(u) => RequestBody::UpdateNode {
                names: u.names,
                state: u.state.map(node_change_from).transpose()?,
                reason: u.reason,
                features: u.features.map(|l| l.items),
            },
            CommandCall::RebootNodes(r) => RequestBody::RebootNodes(reboot_from(r)?),
            CommandCall::TopJobs(r) => RequestBody::TopJobs { job_ids: r.job_ids },
            CommandCall::NotifyJob(n) => RequestBody::NotifyJob {
                job_id: n.job_id,
                message: n.message,
            },
            CommandCall::UpdateStep(u) => RequestBody::UpdateStep {
                job_id: u.job_id,
                step_id: u.step_id,
                time_limit: u.time_limit,
            },
            CommandCall::Reconfigure(_) => RequestBody::Reconfigure,
            CommandCall::GetToken(t) => RequestBody::GetToken {
                username: t.username,
                lifespan: t.lifespan,
            },
            CommandCall::GetLicenses(_) => RequestBody::GetLicenses,
            CommandCall::GetTopoConfig(_) => RequestBody::GetTopoConfig,
            CommandCall::GetJobScript(m) => RequestBody::GetJobScript { job_id: m.job_id },
            CommandCall::GetConfig(_) => RequestBody::GetConfig,
            CommandCall::GetTopology(_) => RequestBody::GetTopology,
            CommandCall::GetDiag(_) => RequestBody::GetDiag,
            CommandCall::ResetDiag(_) => RequestBody::ResetDiag,
            CommandCall::GetPriorities(_) => RequestBody::GetPriorities,
            CommandCall::GetShares(_) => RequestBody::GetShares,
            CommandCall::GetReservations(_) => RequestBody::GetReservations,
            CommandCall::CreateReservation(r) => RequestBody::CreateReservation(r.into()),
            CommandCall::UpdateReservation(r) => RequestBody::UpdateReservation(r.into()),
            CommandCall::DeleteReservation(n) => RequestBody::DeleteReservation { name: n.name },
            CommandCall::UpdatePartition(u) => RequestBody::UpdatePartition(u.try_into()?),
            CommandCall::CreateNode(n) => RequestBody::CreateNode(n.try_into()?),
            CommandCall::DeleteNode(n) => RequestBody::DeleteNode { name: n.name },
            CommandCall::CreatePartition(u) => RequestBody::CreatePartition(u.try_into()?),
            CommandCall::DeletePartition(n) => RequestBody::DeletePartition { name: n.name },
            CommandCall::AcctChanged(_) => RequestBody::AcctChanged,
            CommandCall::Takeover(_) => RequestBody::Takeover,
            CommandCall::Shutdown(s) => RequestBody::Shutdown {
                controller_only: s.controller_only,
            },
            CommandCall::SetDebug(d) => RequestBody::SetDebug { level: d.level },
            CommandCall::SetDebugFlags(d) => RequestBody::SetDebugFlags {
                plus: d.plus,
                minus: d.minus,
            },
            CommandCall::SetSchedLogLevel(d) => RequestBody::SetSchedLogLevel { level: d.level },
            CommandCall::SetFsDampeningFactor(d) => RequestBody::SetFsDampeningFactor {
                factor: u16::try_from(d.factor).map_err(|_| ConvError {
                    field: "factor",
                    why: format!("{} is more than 65535", d.factor),
                })?,
            },
            CommandCall::RelinquishControl(_) => RequestBody::RelinquishControl,
            CommandCall::GetJobsDelta(d) => RequestBody::GetJobsDelta {
                epoch: d.epoch,
                since: d.since,
            },
        })
    }

    /// The method's full gRPC path.
    pub fn method(&self) -> &'static str {
        use command_method::*;
        match self {
            CommandCall::Ping(_) => PING,
            CommandCall::SubmitJob(_) => SUBMIT_JOB,
            CommandCall::TestJob(_) => TEST_JOB,
            CommandCall::AllocateJob(_) => ALLOCATE_JOB,
            CommandCall::GetJobs(_) => GET_JOBS,
            CommandCall::CancelJobs(_) => CANCEL_JOBS,
            CommandCall::CompleteJob(_) => COMPLETE_JOB,
            CommandCall::CreateStep(_) => CREATE_STEP,
            CommandCall::StepComplete(_) => STEP_COMPLETE,
            CommandCall::CancelStep(_) => CANCEL_STEP,
            CommandCall::GetNodes(_) => GET_NODES,
            CommandCall::GetPartitions(_) => GET_PARTITIONS,
            CommandCall::UpdateJob(_) => UPDATE_JOB,
            CommandCall::SuspendJob(_) => SUSPEND_JOB,
            CommandCall::UpdateNode(_) => UPDATE_NODE,
            CommandCall::RebootNodes(_) => REBOOT_NODES,
            CommandCall::TopJobs(_) => TOP_JOBS,
            CommandCall::NotifyJob(_) => NOTIFY_JOB,
            CommandCall::UpdateStep(_) => UPDATE_STEP,
            CommandCall::Reconfigure(_) => RECONFIGURE,
            CommandCall::GetToken(_) => GET_TOKEN,
            CommandCall::GetLicenses(_) => GET_LICENSES,
            CommandCall::GetTopoConfig(_) => GET_TOPO_CONFIG,
            CommandCall::GetJobScript(_) => GET_JOB_SCRIPT,
            CommandCall::GetConfig(_) => GET_CONFIG,
            CommandCall::GetTopology(_) => GET_TOPOLOGY,
            CommandCall::GetDiag(_) => GET_DIAG,
            CommandCall::ResetDiag(_) => RESET_DIAG,
            CommandCall::GetPriorities(_) => GET_PRIORITIES,
            CommandCall::GetShares(_) => GET_SHARES,
            CommandCall::GetReservations(_) => GET_RESERVATIONS,
            CommandCall::CreateReservation(_) => CREATE_RESERVATION,
            CommandCall::UpdateReservation(_) => UPDATE_RESERVATION,
            CommandCall::DeleteReservation(_) => DELETE_RESERVATION,
            CommandCall::UpdatePartition(_) => UPDATE_PARTITION,
            CommandCall::CreateNode(_) => CREATE_NODE,
            CommandCall::DeleteNode(_) => DELETE_NODE,
            CommandCall::CreatePartition(_) => CREATE_PARTITION,
            CommandCall::DeletePartition(_) => DELETE_PARTITION,
            CommandCall::AcctChanged(_) => ACCT_CHANGED,
            CommandCall::GetJobsDelta(_) => GET_JOBS_DELTA,
            CommandCall::Takeover(_) => TAKEOVER,
            CommandCall::Shutdown(_) => SHUTDOWN,
            CommandCall::SetDebug(_) => SET_DEBUG,
            CommandCall::SetDebugFlags(_) => SET_DEBUG_FLAGS,
            CommandCall::SetSchedLogLevel(_) => SET_SCHED_LOG_LEVEL,
            CommandCall::SetFsDampeningFactor(_) => SET_FS_DAMPENING_FACTOR,
            CommandCall::RelinquishControl(_) => RELINQUISH_CONTROL,
        }
    }

    /// The message's protobuf bytes (what a credential's body hash covers).
    pub fn encode(&self) -> Vec<u8> {
        use prost::Message;
        match self {
            CommandCall::Ping(m)
            | CommandCall::GetNodes(m)
            | CommandCall::GetPartitions(m)
            | CommandCall::Reconfigure(m)
            | CommandCall::GetLicenses(m)
            | CommandCall::GetTopoConfig(m)
            | CommandCall::GetConfig(m)
            | CommandCall::GetTopology(m)
            | CommandCall::GetDiag(m)
            | CommandCall::ResetDiag(m)
            | CommandCall::GetPriorities(m)
            | CommandCall::GetShares(m)
            | CommandCall::GetReservations(m)
            | CommandCall::AcctChanged(m)
            | CommandCall::Takeover(m)
            | CommandCall::RelinquishControl(m) => m.encode_to_vec(),
            CommandCall::CreateReservation(m) | CommandCall::UpdateReservation(m) => {
                m.encode_to_vec()
            }
            CommandCall::DeleteReservation(m)
            | CommandCall::DeleteNode(m)
            | CommandCall::DeletePartition(m) => m.encode_to_vec(),
            CommandCall::UpdatePartition(m) | CommandCall::CreatePartition(m) => m.encode_to_vec(),
            CommandCall::CreateNode(m) => m.encode_to_vec(),
            CommandCall::GetJobScript(m) => m.encode_to_vec(),
            CommandCall::GetJobsDelta(m) => m.encode_to_vec(),
            CommandCall::Shutdown(m) => m.encode_to_vec(),
            CommandCall::SetDebug(m) => m.encode_to_vec(),
            CommandCall::SetDebugFlags(m) => m.encode_to_vec(),
            CommandCall::SetSchedLogLevel(m) => m.encode_to_vec(),
            CommandCall::SetFsDampeningFactor(m) => m.encode_to_vec(),
            CommandCall::UpdateJob(m) => m.encode_to_vec(),
            CommandCall::SuspendJob(m) => m.encode_to_vec(),
            CommandCall::UpdateNode(m) => m.encode_to_vec(),
            CommandCall::RebootNodes(m) => m.encode_to_vec(),
            CommandCall::TopJobs(m) => m.encode_to_vec(),
            CommandCall::NotifyJob(m) => m.encode_to_vec(),
            CommandCall::UpdateStep(m) => m.encode_to_vec(),
            CommandCall::GetToken(m) => m.encode_to_vec(),
            CommandCall::SubmitJob(m) | CommandCall::TestJob(m) | CommandCall::AllocateJob(m) => {
                m.encode_to_vec()
            }
            CommandCall::GetJobs(m) => m.encode_to_vec(),
            CommandCall::CancelJobs(m) => m.encode_to_vec(),
            CommandCall::CompleteJob(m) => m.encode_to_vec(),
            CommandCall::CreateStep(m) => m.encode_to_vec(),
            CommandCall::StepComplete(m) => m.encode_to_vec(),
            CommandCall::CancelStep(m) => m.encode_to_vec(),
        }
    }
}

fn error_reply(error: SlurmError, detail: Option<String>) -> pb::command_reply::Result {
    pb::command_reply::Result::Error(RpcError { error, detail }.into())
}

/// The controller's answer to a command in its gRPC form (job listings
/// have their own answer: [`encode_listed`], [`listing_response`]).
pub fn command_reply(r: Response) -> pb::CommandReply {
    use pb::command_reply::Result as R;
    let result = match r {
        Response::Ok => R::Ok(pb::Empty {}),
        Response::Error(e) => error_reply(e.error, e.detail),
        Response::Pong {
            controller,
            standby,
        } => R::Pong(pb::Pong {
            controller,
            standby,
        }),
        Response::Submitted { job_id } => R::Submitted(pb::Submitted { job_id }),
        Response::TestResult {
            job_id,
            start_time,
            cpus,
            nodes,
            partition,
        } => R::Test(pb::TestResult {
            job_id,
            start_time,
            cpus,
            nodes,
            partition,
        }),
        Response::Cancelled(outcomes) => R::Cancelled(pb::CancelOutcomes {
            jobs: outcomes
                .into_iter()
                .map(|(job_id, e)| pb::CancelOutcome {
                    job_id,
                    error: e.map(SlurmError::code),
                })
                .collect(),
        }),
        Response::StepCreated(l) => R::Step((*l).into()),
        Response::Nodes { nodes, last_update } => R::Nodes(pb::NodeList {
            nodes: nodes.iter().map(Into::into).collect(),
            last_update,
        }),
        Response::Partitions {
            partitions,
            last_update,
        } => R::Partitions(pb::PartitionList {
            partitions: partitions.iter().map(Into::into).collect(),
            last_update,
        }),
        Response::Token(t) => R::Token(t),
        Response::JobScript(s) => R::JobScript(s),
        Response::TopoConfig(s) => R::TopoConfig(s),
        Response::Licenses {
            licenses,
            last_update,
        } => R::Licenses(pb::LicenseList {
            licenses: licenses
                .into_iter()
                .map(|l| pb::LicenseInfo {
                    name: l.name,
                    total: l.total,
                    used: l.used,
                })
                .collect(),
            last_update,
        }),
        Response::Config(c) => R::Config(pb::ConfigDump {
            entries: c
                .entries
                .into_iter()
                .map(|(key, value)| pb::ConfigEntry { key, value })
                .collect(),
            boot_time: c.boot_time,
        }),
        Response::Topology(t) => R::Topology(pb::TopologyList {
            entries: t.iter().map(Into::into).collect(),
        }),
        Response::Diag(d) => R::Diag(ToWire::to_wire(*d)),
        Response::Priorities { jobs, weights } => R::Priorities(pb::Priorities {
            jobs: jobs.into_iter().map(Into::into).collect(),
            weights: weights
                .into_iter()
                .map(|(name, weight)| pb::Weight { name, weight })
                .collect(),
        }),
        Response::Shares(s) => R::Shares(pb::Shares {
            shares: s.into_iter().map(Into::into).collect(),
        }),
        Response::Reservations {
            reservations,
            last_update,
        } => R::Reservations(pb::ReservationList {
            reservations: reservations.into_iter().map(Into::into).collect(),
            last_update,
        }),
        Response::ReservationCreated { name } => R::ReservationCreated(name),
        Response::JobsUnchanged { version } => R::JobsUnchanged(pb::JobsUnchanged { version }),
        Response::JobsDelta {
            epoch,
            version,
            ids,
            changed,
            last_update,
        } => R::JobsDelta(pb::JobsDelta {
            epoch,
            version,
            ids,
            changed: changed.iter().map(Into::into).collect(),
            last_update,
        }),
        other => error_reply(
            SlurmError::InternalError,
            Some(format!("unexpected answer {other:?}")),
        ),
    };
    pb::CommandReply {
        result: Some(result),
    }
}

/// One job as a listing carries it: its protobuf bytes, listing form.
pub fn encode_listed(j: &JobRecord) -> bytes::Bytes {
    use prost::Message;
    pb::JobRecord::from(j).encode_to_vec().into()
}

/// The controller's answer to `GetJobs` as a [`Response`] (`Jobs`, or the
/// error; a record that does not decode or convert is a protocol error).
pub fn listing_response(r: pb::JobListing) -> Response {
    listing_response_as(r, false)
}

/// One listed job, appended to `jobs` (see [`decode_brief`] for a brief
/// one, made from `blank` where it lies: a listing of a big queue is
/// mostly this, and a record is large).
fn decode_listed(
    b: &[u8],
    brief: Option<&JobRecord>,
    jobs: &mut Vec<JobRecord>,
) -> Result<(), String> {
    use prost::Message;
    if let Some(blank) = brief {
        jobs.push(blank.clone());
        let Some(slot) = jobs.last_mut() else {
            return Err("no room for a job".into());
        };
        return decode_brief(b, slot).inspect_err(|_| {
            jobs.pop();
        });
    }
    let j = pb::JobRecord::decode(b).map_err(|e| e.to_string())?;
    jobs.push(JobRecord::try_from(j).map_err(|e| e.to_string())?);
    Ok(())
}

/// A listed `pb::JobRecord` decoded straight into a [`JobRecord`], its
/// request (field 25, `desc`) skipped and left at its default: no message
/// in between, no copy of the state and reason names (a listing's cost is
/// mostly this, per job). Field numbers as in `slurmctld.proto`; the
/// whole-record path is the reference (`a_brief_decode_is_the_record_less_its_request`).
fn decode_brief(b: &[u8], j: &mut JobRecord) -> Result<(), String> {
    use prost::encoding::{
        bool as boolean, decode_key, decode_varint, int32, int64, message, skip_field, string,
        uint32, DecodeContext, WireType,
    };
    let c = DecodeContext::default;
    let e = |e: prost::DecodeError| e.to_string();
    // A length-delimited field as text, borrowed from the buffer.
    fn text<'a>(wt: WireType, buf: &mut &'a [u8]) -> Result<&'a str, String> {
        if wt != WireType::LengthDelimited {
            return Err(format!("a text field of wire type {wt:?}"));
        }
        let n = decode_varint(buf).map_err(|e| e.to_string())? as usize;
        if n > buf.len() {
            return Err("a text field past the end".into());
        }
        let (s, rest) = buf.split_at(n);
        *buf = rest;
        std::str::from_utf8(s).map_err(|e| e.to_string())
    }
    let mut buf = b;
    while !buf.is_empty() {
        let (tag, wt) = decode_key(&mut buf).map_err(e)?;
        let b = &mut buf;
        match tag {
            1 => uint32::merge(wt, &mut j.job_id, b, c()).map_err(e)?,
            2 => string::merge(wt, &mut j.name, b, c()).map_err(e)?,
            3 => uint32::merge(wt, &mut j.user_id, b, c()).map_err(e)?,
            4 => string::merge(wt, &mut j.user_name, b, c()).map_err(e)?,
            5 => uint32::merge(wt, &mut j.group_id, b, c()).map_err(e)?,
            6 => string::merge(wt, &mut j.group_name, b, c()).map_err(e)?,
            7 => string::merge(wt, &mut j.account, b, c()).map_err(e)?,
            8 => string::merge(wt, &mut j.qos, b, c()).map_err(e)?,
            9 => string::merge(wt, &mut j.partition, b, c()).map_err(e)?,
            10 => uint32::merge(wt, &mut j.priority, b, c()).map_err(e)?,
            11 => j.state = state(text(wt, b)?, "job.state").map_err(|e| e.to_string())?,
            12 => boolean::merge(wt, &mut j.completing, b, c()).map_err(e)?,
            13 => j.reason = JobReason::from_name(text(wt, b)?),
            14 => uint32::merge(wt, j.time_limit.get_or_insert(0), b, c()).map_err(e)?,
            15 => int64::merge(wt, &mut j.submit_time, b, c()).map_err(e)?,
            16 => int64::merge(wt, j.eligible_time.get_or_insert(0), b, c()).map_err(e)?,
            17 => int64::merge(wt, j.start_time.get_or_insert(0), b, c()).map_err(e)?,
            18 => int64::merge(wt, j.end_time.get_or_insert(0), b, c()).map_err(e)?,
            19 => int64::merge(wt, j.last_sched_eval.get_or_insert(0), b, c()).map_err(e)?,
            20 => int32::merge(wt, &mut j.exit_status, b, c()).map_err(e)?,
            21 => uint32::merge(wt, &mut j.restarts, b, c()).map_err(e)?,
            22 => string::merge(wt, j.batch_host.get_or_insert_default(), b, c()).map_err(e)?,
            23 => {
                let mut a = pb::Allocation::default();
                message::merge(wt, &mut a, b, c()).map_err(e)?;
                j.alloc = a.into();
            }
            24 => string::merge_repeated(wt, &mut j.completing_nodes, b, c()).map_err(e)?,
            26 => uint32::merge(wt, &mut j.num_tasks, b, c()).map_err(e)?,
            27 => uint32::merge(wt, &mut j.req_cpus, b, c()).map_err(e)?,
            28 => uint32::merge(wt, &mut j.min_nodes, b, c()).map_err(e)?,
            29 => uint32::merge(wt, &mut j.max_nodes, b, c()).map_err(e)?,
            30 => {
                let mut h = 0;
                int32::merge(wt, &mut h, b, c()).map_err(e)?;
                j.held = match pb::HoldKind::try_from(h) {
                    Ok(pb::HoldKind::HoldNone) => None,
                    Ok(pb::HoldKind::HoldUser) => Some(HoldKind::User),
                    Ok(pb::HoldKind::HoldAdmin) => Some(HoldKind::Admin),
                    Err(_) => return Err(format!("job.held: unknown hold kind {h}")),
                };
            }
            31 => boolean::merge(wt, &mut j.cancelled, b, c()).map_err(e)?,
            32 => boolean::merge(wt, &mut j.timed_out, b, c()).map_err(e)?,
            33 => boolean::merge(wt, &mut j.node_failed, b, c()).map_err(e)?,
            34 => {
                let mut a = pb::ArrayInfo::default();
                message::merge(wt, &mut a, b, c()).map_err(e)?;
                j.array = Some(a.into());
            }
            35 => string::merge(wt, j.dependency.get_or_insert_default(), b, c()).map_err(e)?,
            36 => {
                let mut st = pb::StepRecord::default();
                message::merge(wt, &mut st, b, c()).map_err(e)?;
                j.steps
                    .push(st.try_into().map_err(|e: ConvError| e.to_string())?);
            }
            37 => boolean::merge(wt, &mut j.batch, b, c()).map_err(e)?,
            38 => uint32::merge(wt, j.cancelled_by.get_or_insert(0), b, c()).map_err(e)?,
            39 => int64::merge(wt, j.suspend_time.get_or_insert(0), b, c()).map_err(e)?,
            40 => int64::merge(wt, &mut j.suspended_secs, b, c()).map_err(e)?,
            41 => boolean::merge(wt, &mut j.preempt_suspended, b, c()).map_err(e)?,
            42 => boolean::merge(wt, &mut j.gang_suspended, b, c()).map_err(e)?,
            43 => j.reason_prev = JobReason::from_name(text(wt, b)?),
            44 => j.sched_flag = SchedFlag::from_name(text(wt, b)?),
            45 => string::merge(wt, j.failed_node.get_or_insert_default(), b, c()).map_err(e)?,
            _ => skip_field(wt, tag, b, c()).map_err(e)?,
        }
    }
    Ok(())
}

/// [`listing_response`], leaving each job's request at its default when
/// `brief` (see `RequestBody::GetJobsBrief`).
pub fn listing_response_as(r: pb::JobListing, brief: bool) -> Response {
    let mut jobs = Vec::new();
    match append_listing(r, brief, &mut jobs) {
        Ok((last_update, _)) => Response::Jobs { jobs, last_update },
        Err(e) => e,
    }
}

/// One message of a listing (the controller streams a big one in parts):
/// its jobs appended to `jobs`, its `last_update` and whether it is the
/// last part returned; `Err` is the answer instead (the controller's
/// error, or a protocol error).
pub fn append_listing(
    r: pb::JobListing,
    brief: bool,
    jobs: &mut Vec<JobRecord>,
) -> Result<(i64, bool), Response> {
    use pb::job_listing::Result as R;
    let protocol = |why: String| {
        Response::Error(RpcError {
            error: SlurmError::ProtocolError,
            detail: Some(why),
        })
    };
    match r.result {
        Some(R::Jobs(l)) => {
            jobs.reserve(l.jobs.len());
            // Every brief job shares one empty request.
            let blank = brief.then(JobRecord::default);
            for b in &l.jobs {
                decode_listed(b.as_ref(), blank.as_ref(), jobs).map_err(protocol)?;
            }
            Ok((l.last_update, l.last))
        }
        Some(R::Error(e)) => Err(Response::Error(e.into())),
        None => Err(protocol("empty answer".into())),
    }
}

/// The controller's gRPC answer to a command as a [`Response`] (a message
/// that does not convert is a protocol error, naming the field).
pub fn command_response(r: pb::CommandReply) -> Response {
    use pb::command_reply::Result as R;
    let protocol = |why: String| {
        Response::Error(RpcError {
            error: SlurmError::ProtocolError,
            detail: Some(why),
        })
    };
    match r.result {
        Some(R::Ok(_)) => Response::Ok,
        Some(R::Error(e)) => Response::Error(e.into()),
        Some(R::Pong(p)) => Response::Pong {
            controller: p.controller,
            standby: p.standby,
        },
        Some(R::Submitted(s)) => Response::Submitted { job_id: s.job_id },
        Some(R::Test(t)) => Response::TestResult {
            job_id: t.job_id,
            start_time: t.start_time,
            cpus: t.cpus,
            nodes: t.nodes,
            partition: t.partition,
        },
        Some(R::Cancelled(c)) => Response::Cancelled(
            c.jobs
                .into_iter()
                .map(|o| (o.job_id, o.error.map(SlurmError::from_code)))
                .collect(),
        ),
        Some(R::Step(l)) => match l.try_into() {
            Ok(l) => Response::StepCreated(Box::new(l)),
            Err(e) => protocol(e.to_string()),
        },
        Some(R::Nodes(l)) => match l.nodes.into_iter().map(TryInto::try_into).collect() {
            Ok(nodes) => Response::Nodes {
                nodes,
                last_update: l.last_update,
            },
            Err(e) => protocol(e.to_string()),
        },
        Some(R::Partitions(l)) => match l.partitions.into_iter().map(TryInto::try_into).collect() {
            Ok(partitions) => Response::Partitions {
                partitions,
                last_update: l.last_update,
            },
            Err(e) => protocol(e.to_string()),
        },
        Some(R::Token(t)) => Response::Token(t),
        Some(R::JobScript(s)) => Response::JobScript(s),
        Some(R::TopoConfig(s)) => Response::TopoConfig(s),
        Some(R::Licenses(l)) => Response::Licenses {
            licenses: l
                .licenses
                .into_iter()
                .map(|l| LicenseInfo {
                    name: l.name,
                    total: l.total,
                    used: l.used,
                })
                .collect(),
            last_update: l.last_update,
        },
        Some(R::Config(c)) => Response::Config(ConfigDump {
            entries: c.entries.into_iter().map(|e| (e.key, e.value)).collect(),
            boot_time: c.boot_time,
        }),
        Some(R::Topology(t)) => Response::Topology(t.entries.into_iter().map(Into::into).collect()),
        Some(R::Diag(d)) => match DiagStats::from_wire(d) {
            Ok(d) => Response::Diag(Box::new(d)),
            Err(e) => protocol(e.to_string()),
        },
        Some(R::Priorities(p)) => Response::Priorities {
            jobs: p.jobs.into_iter().map(Into::into).collect(),
            weights: p.weights.into_iter().map(|w| (w.name, w.weight)).collect(),
        },
        Some(R::Shares(s)) => Response::Shares(s.shares.into_iter().map(Into::into).collect()),
        Some(R::Reservations(l)) => Response::Reservations {
            reservations: l.reservations.into_iter().map(Into::into).collect(),
            last_update: l.last_update,
        },
        Some(R::ReservationCreated(name)) => Response::ReservationCreated { name },
        Some(R::JobsUnchanged(u)) => Response::JobsUnchanged { version: u.version },
        Some(R::JobsDelta(d)) => match d
            .changed
            .into_iter()
            .map(JobRecord::try_from)
            .collect::<Result<Vec<_>, _>>()
        {
            Ok(changed) => Response::JobsDelta {
                epoch: d.epoch,
                version: d.version,
                ids: d.ids,
                changed,
                last_update: d.last_update,
            },
            Err(e) => protocol(e.to_string()),
        },
        None => protocol("empty answer".into()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn desc() -> JobDesc {
        JobDesc {
            name: Some("n".into()),
            time_limit: Some(None),
            nice: Some(-5),
            requeue: Some(false),
            req_nodes: vec!["a1".into(), "a2".into()],
            script: "#!/bin/sh\ntrue\n".into(),
            environment: vec!["A=1".into()],
            mem_per_gpu: Some(1024),
            exclusive_topo: true,
            ntasks_per_socket: Some(2),
            mail_type: Some("BEGIN,END".into()),
            mail_user: Some("u@example.org".into()),
            signal: Some("B:USR1@90".into()),
            open_mode: Some("append".into()),
            deadline: Some(1_800_000_000),
            time_min: Some(30),
            kill_on_invalid_dep: Some(false),
            extra: Some("k=v".into()),
            wckey: Some("*proj".into()),
            no_kill: true,
            user_id: Some(1000),
            group_id: Some(100),
            ..Default::default()
        }
    }

    fn job(id: u32) -> JobRecord {
        JobRecord {
            job_id: id,
            name: "n".into(),
            user_id: 1000,
            user_name: "u".into(),
            group_id: 1000,
            group_name: "g".into(),
            account: "a".into(),
            qos: "normal".into(),
            partition: "p".into(),
            priority: 3,
            state: JobState::Pending,
            completing: true,
            reason: JobReason::Priority,
            time_limit: Some(10),
            submit_time: 100,
            eligible_time: Some(101),
            start_time: None,
            run_start: None,
            end_time: Some(5),
            last_sched_eval: Some(102),
            exit_status: 256,
            restarts: 2,
            batch_host: Some("a1".into()),
            alloc: crate::Allocation {
                nodes: vec!["a1".into()],
                cpus: vec![2],
                mem: vec![100],
                tasks: vec![1],
                gres: vec![vec![crate::GresAlloc {
                    name: "gpu".into(),
                    kind: Some("a100".into()),
                    indices: vec![0, 3],
                }]],
            },
            completing_nodes: vec!["a1".into()],
            desc: desc().into(),
            num_tasks: 1,
            req_cpus: 2,
            min_nodes: 1,
            max_nodes: 4,
            held: None,
            cancelled: true,
            timed_out: true,
            node_failed: true,
            array: None,
            dependency: Some("afterok:3".into()),
            steps: Vec::new(),
            batch: false,
            cancelled_by: Some(0),
            suspend_time: Some(7),
            suspended_secs: 8,
            preempt_suspended: true,
            gang_suspended: true,
            reason_prev: JobReason::Dependency,
            sched_flag: Some(SchedFlag::Backfill),
            failed_node: Some("a2".into()),
        }
    }

    #[test]
    fn a_submission_converts_both_ways_unchanged() {
        for limit in [None, Some(None), Some(Some(30))] {
            let d = JobDesc {
                time_limit: limit,
                ..desc()
            };
            let call = CommandCall::from_body(RequestBody::SubmitBatchJob(d.clone())).unwrap();
            assert_eq!(call.method(), command_method::SUBMIT_JOB);
            match call.into_body().unwrap() {
                RequestBody::SubmitBatchJob(back) => assert_eq!(back, d, "limit {limit:?}"),
                other => panic!("{other:?}"),
            }
        }
    }

    #[test]
    fn a_listed_job_keeps_everything_but_its_script_and_environment() {
        let mut j = job(7);
        j.held = Some(HoldKind::Admin);
        j.reason = JobReason::Other("QOSMaxJobsPerUserLimit".into());
        j.array = Some(ArrayInfo {
            job_id: 5,
            task_id: 2,
            task_count: 3,
            task_min: 0,
            task_max: 2,
            task_step: None,
            max_running: Some(1),
        });
        j.steps.push(StepRecord {
            step_id: 0,
            name: "s".into(),
            state: JobState::Completed,
            nodes: vec!["a1".into()],
            ntasks: 1,
            tasks_per_node: vec![1],
            cpus_per_task: 1,
            start_time: 1,
            end_time: Some(2),
            exit_status: 0,
            usage: None,
            usage_node: None,
            time_limit: None,
            job_secs_at_start: None,
            cpus: vec![1],
            overlap: false,
            gres: Vec::new(),
            mem: Vec::new(),
            ended_on: Vec::new(),
        });
        let back = match listing_response(pb::JobListing {
            result: Some(pb::job_listing::Result::Jobs(pb::EncodedJobs {
                jobs: vec![encode_listed(&j)],
                last_update: 9,
                last: true,
            })),
        }) {
            Response::Jobs { jobs, last_update } => {
                assert_eq!(last_update, 9);
                jobs.into_iter().next().unwrap()
            }
            other => panic!("{other:?}"),
        };
        let mut want = j;
        let d = std::sync::Arc::make_mut(&mut want.desc);
        d.script.clear();
        d.environment.clear();
        assert_eq!(back, want);
    }

    /// The brief decode gives what the whole-record path gives, less the
    /// request, for every field (held, array, steps, optional times ...),
    /// whichever way each is set; a bad state or hold kind is refused.
    #[test]
    fn a_brief_decode_is_the_record_less_its_request() {
        let listed = |jobs: Vec<bytes::Bytes>, brief: bool| {
            let l = pb::JobListing {
                result: Some(pb::job_listing::Result::Jobs(pb::EncodedJobs {
                    jobs,
                    last_update: 0,
                    last: true,
                })),
            };
            listing_response_as(l, brief)
        };
        let mut full = job(7);
        full.held = Some(HoldKind::User);
        full.reason = JobReason::Other("QOSMaxJobsPerUserLimit".into());
        full.array = Some(ArrayInfo {
            job_id: 5,
            task_id: 2,
            task_count: 3,
            task_min: 0,
            task_max: 2,
            task_step: Some(1),
            max_running: Some(1),
        });
        full.steps.push(StepRecord {
            step_id: 1,
            name: "s".into(),
            state: JobState::Completed,
            nodes: vec!["a1".into(), "a2".into()],
            ntasks: 2,
            tasks_per_node: vec![1, 1],
            cpus_per_task: 1,
            start_time: 1,
            end_time: Some(2),
            exit_status: 9,
            usage: None,
            usage_node: Some("a2".into()),
            time_limit: None,
            job_secs_at_start: None,
            cpus: vec![1],
            overlap: false,
            gres: Vec::new(),
            mem: Vec::new(),
            ended_on: Vec::new(),
        });
        full.steps.push(full.steps[0].clone());
        let mut plain = job(8);
        plain.state = JobState::Running;
        plain.reason = JobReason::None;
        plain.held = Some(HoldKind::Admin);
        (plain.time_limit, plain.eligible_time, plain.start_time) = (None, None, Some(3));
        (plain.batch_host, plain.dependency, plain.cancelled_by) = (None, None, None);
        plain.alloc = Default::default();
        plain.completing_nodes.clear();
        let jobs = [full, plain, JobRecord::default()];
        let bytes: Vec<_> = jobs.iter().map(encode_listed).collect();
        let (Response::Jobs { jobs: whole, .. }, Response::Jobs { jobs: brief, .. }) =
            (listed(bytes.clone(), false), listed(bytes, true))
        else {
            panic!("not listings");
        };
        assert_eq!(whole.len(), 3);
        for (w, b) in whole.into_iter().zip(brief) {
            assert_eq!(
                JobRecord {
                    desc: Default::default(),
                    ..w
                },
                b
            );
        }
        // What the whole path refuses, the brief one refuses too.
        let mut bad: pb::JobRecord = (&job(1)).into();
        bad.state = "ZOMBIE".into();
        let mut held: pb::JobRecord = (&job(1)).into();
        held.held = 99;
        for m in [bad, held] {
            use prost::Message;
            let b = vec![bytes::Bytes::from(m.encode_to_vec())];
            assert!(matches!(listed(b.clone(), false), Response::Error(_)));
            assert!(matches!(listed(b, true), Response::Error(_)));
        }
    }

    #[test]
    fn bad_states_and_hold_kinds_are_named() {
        let f = pb::JobFilter {
            states: Some(pb::StateList {
                states: vec!["RUNNING".into(), "SLEEPING".into()],
            }),
            ..Default::default()
        };
        let e = CommandCall::GetJobs(pb::JobQuery {
            filter: Some(f),
            brief: false,
        })
        .into_body()
        .unwrap_err();
        assert_eq!(e.field, "filter.states");
        let mut j: pb::JobRecord = (&job(1)).into();
        j.held = 7;
        assert_eq!(JobRecord::try_from(j).unwrap_err().field, "job.held");
    }

    #[test]
    fn errors_that_share_slurm_numbers_stay_apart() {
        for e in SlurmError::ALL {
            let back = command_response(command_reply(Response::Error(e.into())));
            assert!(
                matches!(back, Response::Error(ref r) if r.error == e),
                "{e:?} came back as {back:?}"
            );
        }
    }

    #[test]
    fn nodes_and_partitions_convert_both_ways_unchanged() {
        let node = NodeRecord {
            name: "n1".into(),
            addr: "127.0.0.2".into(),
            hostname: "h1".into(),
            port: 6818,
            cpus: 8,
            boards: 1,
            sockets: 2,
            cores_per_socket: 2,
            threads_per_core: 2,
            real_memory: 4000,
            tmp_disk: 10,
            weight: 3,
            features: vec!["ib".into()],
            gres: vec!["gpu:a100:2".into()],
            base_state: NodeBaseState::Mixed,
            flags: NodeFlags {
                drain: true,
                not_responding: false,
                completing: true,
                reserved: false,
                maint: true,
                reboot_requested: true,
                reboot_issued: false,
            },
            reason: Some("bad fan".into()),
            reason_time: Some(5),
            reason_uid: Some(0),
            alloc_cpus: 4,
            alloc_mem: 100,
            partitions: vec!["p".into()],
            boot_time: Some(1),
            slurmd_start_time: Some(2),
            last_busy: None,
            last_heard: Some(3),
            version: Some("25.11".into()),
            os: None,
            arch: Some("x86_64".into()),
            cpu_load: Some(0.5),
            free_mem: Some(77),
            external: true,
            kubelet: false,
        };
        let part = PartitionRecord {
            name: "p".into(),
            nodes_expr: "n[1-2]".into(),
            nodes: vec!["n1".into(), "n2".into()],
            default: true,
            max_time: None,
            default_time: Some(10),
            state: PartitionState::Drain,
            priority_job_factor: 1,
            priority_tier: 2,
            oversubscribe: "FORCE:4".into(),
            max_nodes: Some(2),
            min_nodes: 1,
            hidden: true,
            allow_groups: Some("g".into()),
            allow_accounts: None,
            allow_qos: Some("normal".into()),
            def_mem_per_cpu: Some(100),
            max_mem_per_node: None,
            total_cpus: 16,
            total_mem: 8000,
        };
        let mut bad: pb::NodeRecord = (&node).into();
        match command_response(command_reply(Response::Nodes {
            nodes: vec![node.clone()],
            last_update: 4,
        })) {
            Response::Nodes { nodes, last_update } => {
                assert_eq!((nodes, last_update), (vec![node], 4))
            }
            other => panic!("{other:?}"),
        }
        match command_response(command_reply(Response::Partitions {
            partitions: vec![part.clone()],
            last_update: 6,
        })) {
            Response::Partitions {
                partitions,
                last_update,
            } => assert_eq!((partitions, last_update), (vec![part], 6)),
            other => panic!("{other:?}"),
        }
        bad.port = 70_000;
        assert_eq!(NodeRecord::try_from(bad).unwrap_err().field, "node.port");
    }

    #[test]
    fn job_and_node_updates_convert_both_ways_unchanged() {
        let updates = [
            JobUpdate::Hold,
            JobUpdate::Release,
            JobUpdate::Requeue,
            JobUpdate::TimeLimit(None),
            JobUpdate::TimeLimit(Some(5)),
            JobUpdate::Nice(-3),
            JobUpdate::Name("n".into()),
            JobUpdate::Comment("c".into()),
            JobUpdate::AdminComment("a".into()),
            JobUpdate::Partition("p".into()),
            JobUpdate::Account("acct".into()),
            JobUpdate::Qos("q".into()),
        ];
        for u in updates {
            let call = CommandCall::from_body(RequestBody::UpdateJob {
                job_id: 4,
                update: u.clone(),
            })
            .unwrap();
            match call.into_body().unwrap() {
                RequestBody::UpdateJob { job_id, update } => assert_eq!((job_id, update), (4, u)),
                other => panic!("{other:?}"),
            }
        }
        for state in [None, Some(NodeStateRequest::Undrain)] {
            for features in [None, Some(vec![]), Some(vec!["ib".to_string()])] {
                let call = CommandCall::from_body(RequestBody::UpdateNode {
                    names: vec!["n1".into()],
                    state,
                    reason: Some("r".into()),
                    features: features.clone(),
                })
                .unwrap();
                match call.into_body().unwrap() {
                    RequestBody::UpdateNode {
                        names,
                        state: s,
                        reason,
                        features: f,
                    } => {
                        assert_eq!(names, vec!["n1".to_string()]);
                        assert_eq!((s, reason, f), (state, Some("r".into()), features));
                    }
                    other => panic!("{other:?}"),
                }
            }
        }
        let no_change = CommandCall::UpdateJob(pb::UpdateJobRequest {
            job_id: 1,
            change: None,
        });
        assert_eq!(no_change.into_body().unwrap_err().field, "update.change");
    }

    /// `body` as a gRPC call and back.
    fn round_trip(body: RequestBody) -> RequestBody {
        CommandCall::from_body(body).unwrap().into_body().unwrap()
    }

    #[test]
    fn admin_requests_and_their_answers_convert_both_ways_unchanged() {
        let spec = ReservationSpec {
            name: Some("r".into()),
            start_time: Some(1),
            duration: Some(60),
            nodes: Some(vec![]),
            users: Some(vec!["alice".into()]),
            accounts: None,
            flags: Some(vec!["MAINT".into()]),
            ..Default::default()
        };
        match round_trip(RequestBody::UpdateReservation(spec.clone())) {
            RequestBody::UpdateReservation(back) => assert_eq!(back, spec),
            other => panic!("{other:?}"),
        }
        for max_time in [None, Some(None), Some(Some(30))] {
            let u = PartitionUpdate {
                name: "p".into(),
                state: Some(PartitionState::Drain),
                max_time,
                default_time: Some(None),
                nodes: Some("n[1-2]".into()),
                default: Some(true),
            };
            match round_trip(RequestBody::UpdatePartition(u.clone())) {
                RequestBody::UpdatePartition(back) => assert_eq!(back, u),
                other => panic!("{other:?}"),
            }
            match round_trip(RequestBody::CreatePartition(u.clone())) {
                RequestBody::CreatePartition(back) => assert_eq!(back, u),
                other => panic!("{other:?}"),
            }
        }
        let node = NodeSpec {
            name: "k1".into(),
            cpus: 4,
            real_memory: 100,
            features: vec!["k8s".into()],
            partitions: vec!["ext".into()],
            state: "EXTERNAL".into(),
            addr: None,
            port: Some(6818),
            gres: vec!["gpu:a100:2".into()],
        };
        match round_trip(RequestBody::CreateNode(node.clone())) {
            RequestBody::CreateNode(back) => assert_eq!(back, node),
            other => panic!("{other:?}"),
        }
        let mut bad: pb::NodeSpec = node.into();
        bad.port = Some(1 << 20);
        assert_eq!(
            CommandCall::CreateNode(bad).into_body().unwrap_err().field,
            "node.port"
        );

        let diag = DiagStats {
            since: 1,
            bf_last_when: Some(3),
            main_max_us: 7,
            rpc_types: vec![crate::RpcStat {
                name: "REQUEST_PING".into(),
                id: 1008,
                count: 2,
                total_us: 9,
            }],
            ..Default::default()
        };
        let prio = JobPriority {
            job_id: 3,
            user: "alice".into(),
            age: 0.5,
            nice: -2,
            tres: "cpu=1.0".into(),
            ..Default::default()
        };
        let share = ShareInfo {
            account: "a".into(),
            user: None,
            fairshare: None,
            level_fs: Some(f64::MAX),
            assoc_id: Some(3),
            tres_names: vec!["cpu".into(), "mem".into()],
            tres_grp_mins: vec![600, u64::MAX],
            tres_run_secs: vec![720, 360_000],
            ..Default::default()
        };
        let answers = [
            Response::Diag(Box::new(diag)),
            Response::Priorities {
                jobs: vec![prio],
                weights: vec![("Age".into(), 1000)],
            },
            Response::Shares(vec![share]),
            Response::ReservationCreated { name: "r".into() },
            Response::JobsUnchanged { version: 4 },
        ];
        for a in answers {
            let want = format!("{a:?}");
            assert_eq!(format!("{:?}", command_response(command_reply(a))), want);
        }
    }

    #[test]
    fn reasons_read_back_as_written() {
        let known = crate::REASON_NAMES.iter().map(|(r, _)| r.clone());
        for r in known.chain([JobReason::Other("AssocGrpCpuLimit".into())]) {
            assert_eq!(JobReason::from_name(&r.to_string()), r);
        }
    }

    #[test]
    fn filters_keep_completing_and_the_default_apart() {
        for states in [None, Some(vec![]), Some(vec![StateSel::Completing])] {
            let f = JobFilter {
                job_ids: vec![3],
                states: states.clone(),
                ..Default::default()
            };
            let back: JobFilter = pb::JobFilter::from(f.clone()).try_into().unwrap();
            assert_eq!(back, f, "{states:?}");
        }
    }
}
