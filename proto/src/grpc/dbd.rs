//! slurmdbd's requests and answers in their gRPC form: [`DbdCall`] is one
//! request of the `SlurmDbd` service with the method it goes to, and
//! [`dbd_reply`] / [`acct_response`] carry the answer.
//!
//! The accounting types (`crate::acct`) and the messages have the same
//! fields under the same names; [`ToWire`] and [`FromWire`] convert one
//! field at a time, so a struct's conversion is the list of its fields.
//! Where protobuf has no such type (a patch's `Set`, a list change, a job
//! state, an admin level) the field's own conversion says how it travels;
//! one that cannot be (an unknown state, a port past 16 bits) is refused,
//! naming the field.

use super::wire::{at, bad, FromWire, ToWire};
use super::{pb, ConvError};
use crate::acct::*;
use crate::JobState;

impl ToWire<u32> for u16 {
    fn to_wire(self) -> u32 {
        self.into()
    }
}

impl FromWire<u32> for u16 {
    fn from_wire(w: u32) -> Result<u16, ConvError> {
        u16::try_from(w).map_err(|_| bad(format!("{w} is not a port (at most 65535)")))
    }
}

impl ToWire<String> for JobState {
    fn to_wire(self) -> String {
        self.name().to_string()
    }
}

impl FromWire<String> for JobState {
    fn from_wire(w: String) -> Result<JobState, ConvError> {
        super::commands::state(&w, "")
    }
}

impl ToWire<String> for JobStateWire {
    fn to_wire(self) -> String {
        self.0.to_wire()
    }
}

impl FromWire<String> for JobStateWire {
    fn from_wire(w: String) -> Result<JobStateWire, ConvError> {
        JobState::from_wire(w).map(JobStateWire)
    }
}

impl ToWire<i32> for AdminLevel {
    fn to_wire(self) -> i32 {
        (match self {
            AdminLevel::None => pb::AdminLevel::None,
            AdminLevel::Operator => pb::AdminLevel::Operator,
            AdminLevel::Administrator => pb::AdminLevel::Administrator,
        }) as i32
    }
}

impl FromWire<i32> for AdminLevel {
    fn from_wire(w: i32) -> Result<AdminLevel, ConvError> {
        match pb::AdminLevel::try_from(w) {
            Ok(pb::AdminLevel::None) => Ok(AdminLevel::None),
            Ok(pb::AdminLevel::Operator) => Ok(AdminLevel::Operator),
            Ok(pb::AdminLevel::Administrator) => Ok(AdminLevel::Administrator),
            Err(_) => Err(bad(format!("unknown admin level {w}"))),
        }
    }
}

impl ToWire<i32> for Option<Span> {
    fn to_wire(self) -> i32 {
        (match self {
            None => pb::UsageSpan::Aligned,
            Some(Span::Hour) => pb::UsageSpan::Hour,
            Some(Span::Day) => pb::UsageSpan::Day,
            Some(Span::Month) => pb::UsageSpan::Month,
        }) as i32
    }
}

impl FromWire<i32> for Option<Span> {
    fn from_wire(w: i32) -> Result<Option<Span>, ConvError> {
        match pb::UsageSpan::try_from(w) {
            Ok(pb::UsageSpan::Aligned) => Ok(None),
            Ok(pb::UsageSpan::Hour) => Ok(Some(Span::Hour)),
            Ok(pb::UsageSpan::Day) => Ok(Some(Span::Day)),
            Ok(pb::UsageSpan::Month) => Ok(Some(Span::Month)),
            Err(_) => Err(bad(format!("unknown usage span {w}"))),
        }
    }
}

/// `Set<T>` as an optional `SetX { optional to }`: absent keeps, present
/// without `to` clears.
macro_rules! set_wire {
    ($($t:ty => $m:ident as $w:ty),* $(,)?) => {$(
        impl ToWire<Option<pb::$m>> for Set<$t> {
            fn to_wire(self) -> Option<pb::$m> {
                match self {
                    Set::Keep => None,
                    Set::Clear => Some(pb::$m { to: None }),
                    Set::To(v) => Some(pb::$m { to: Some(ToWire::<$w>::to_wire(v)) }),
                }
            }
        }
        impl FromWire<Option<pb::$m>> for Set<$t> {
            fn from_wire(w: Option<pb::$m>) -> Result<Self, ConvError> {
                Ok(match w {
                    None => Set::Keep,
                    Some(pb::$m { to: None }) => Set::Clear,
                    Some(pb::$m { to: Some(v) }) => Set::To(<$t>::from_wire(v)?),
                })
            }
        }
    )*};
}

set_wire!(
    u64 => SetU64 as u64,
    u32 => SetU32 as u32,
    String => SetString as String,
    f64 => SetDouble as f64,
    AdminLevel => SetAdminLevel as i32,
);

impl ToWire<Option<pb::ListChange>> for ListChange {
    fn to_wire(self) -> Option<pb::ListChange> {
        use pb::list_change::Change as C;
        let l = |items| pb::StringList { items };
        let change = match self {
            ListChange::Keep => return None,
            ListChange::Replace(v) => C::Replace(l(v)),
            ListChange::Add(v) => C::Add(l(v)),
            ListChange::Remove(v) => C::Remove(l(v)),
        };
        Some(pb::ListChange {
            change: Some(change),
        })
    }
}

impl FromWire<Option<pb::ListChange>> for ListChange {
    fn from_wire(w: Option<pb::ListChange>) -> Result<Self, ConvError> {
        use pb::list_change::Change as C;
        Ok(match w.and_then(|c| c.change) {
            None => ListChange::Keep,
            Some(C::Replace(l)) => ListChange::Replace(l.items),
            Some(C::Add(l)) => ListChange::Add(l.items),
            Some(C::Remove(l)) => ListChange::Remove(l.items),
        })
    }
}

wire!(nested AcctJob <=> AcctJob {
    job_id, array_job_id, array_task_id, name, user, uid, group, gid, account,
    partition, qos, state, exit_status, submit_time, eligible_time, start_time,
    end_time, time_limit, priority, nodelist, node_count, alloc_cpus, req_cpus,
    req_mem, alloc_tres, req_tres, work_dir, submit_line, comment, requid,
    suspended_secs, suspend_start, script, env, wckey, constraints, sched_flag, reason,
    reservation, restarts, std_out, std_err, std_in, failed_node,
});
wire!(AcctStep <=> AcctStep {
    job_id, job_submit, step_id, name, state, nodelist, node_count, ntasks,
    alloc_cpus, start_time, end_time, exit_status, total_cpu_usec, user_cpu_usec,
    sys_cpu_usec, max_rss_kib, max_rss_node, max_vmsize_kib, alloc_tres,
});
wire!(NodeEvent <=> AcctNodeEvent { node, state, reason, reason_uid, cpus, time });
wire!(ClusterInfo <=> ClusterInfo { control_host, control_port, cpus, nodes, tres, time });
wire!(nested AssocLimits <=> AssocLimits {
    grp_jobs, grp_submit_jobs, grp_wall, max_jobs, max_submit_jobs, max_wall,
    grp_tres, grp_tres_mins, max_tres, max_tres_per_user, max_tres_mins,
});
wire!(nested AssocLimitsPatch <=> AssocLimitsPatch {
    grp_jobs, grp_submit_jobs, grp_wall, max_jobs, max_submit_jobs, max_wall,
    grp_tres, grp_tres_mins, max_tres, max_tres_per_user, max_tres_mins,
});
wire!(nested QosLimits <=> QosLimits {
    grp_jobs, grp_submit_jobs, grp_wall, max_jobs_per_user, max_submit_jobs_per_user,
    max_jobs_per_account, max_submit_jobs_per_account, max_wall, grp_tres,
    grp_tres_mins, max_tres_per_user, max_tres_per_job, max_tres_per_node,
    max_tres_per_account, min_tres_per_job,
});
wire!(nested QosLimitsPatch <=> QosLimitsPatch {
    grp_jobs, grp_submit_jobs, grp_wall, max_jobs_per_user, max_submit_jobs_per_user,
    max_jobs_per_account, max_submit_jobs_per_account, max_wall, grp_tres,
    grp_tres_mins, max_tres_per_user, max_tres_per_job, max_tres_per_node,
    max_tres_per_account, min_tres_per_job,
});
wire!(ClusterRec <=> ClusterRec {
    name, control_host, control_port, rpc_version, cpus, nodes, tres, created,
});
wire!(nested ClusterFilter <=> ClusterFilter { names });
wire!(AccountRec <=> AccountRec { name, description, organization, coordinators });
wire!(CoordChange <=> CoordChange { users, accounts });
wire!(nested AccountFilter <=> AccountFilter {
    names, descriptions, organizations, parents, clusters,
});
wire!(nested AccountPatch <=> AccountPatch { description, organization });
wire!(nested AssocSettings <=> AssocSettings { shares, limits, qos, default_qos });
wire!(AddAccounts <=> AddAccountsRequest {
    names, description, organization, parent, clusters, assoc,
});
wire!(UserRec <=> UserRec {
    name, default_account, admin_level, coord_accounts, coord_direct,
});
wire!(nested UserFilter <=> UserFilter {
    names, default_accounts, admin_levels, accounts, clusters, partitions,
});
wire!(nested UserPatch <=> UserPatch { default_account, admin_level });
wire!(AddUsers <=> AddUsersRequest {
    names, default_account, admin_level, accounts, clusters, partitions, assoc,
});
wire!(AssocRec <=> AssocRec {
    id, cluster, account, user, partition, parent, shares, limits, qos, default_qos,
});
wire!(nested AssocFilter <=> AssocFilter {
    ids, clusters, accounts, users, partitions, only_accounts, only_users,
});
wire!(nested AssocPatch <=> AssocPatch { shares, parent, limits, qos, default_qos });
wire!(QosRec <=> QosRec {
    id, name, description, priority, flags, preempt, preempt_mode, grace_time,
    usage_factor, limits,
});
wire!(nested QosFilter <=> QosFilter { names, ids });
wire!(nested QosPatch <=> QosPatch {
    description, priority, flags, preempt, preempt_mode, grace_time, usage_factor, limits,
});
wire!(JobQuery <=> AcctJobQuery {
    clusters, job_ids, users, uids, accounts, partitions, qos, names, states,
    start, end, with_steps, limit, with_script, with_env, duplicates,
});
wire!(UsageQuery <=> UsageQuery { clusters, accounts, users, start, end, span, total });
wire!(ClusterUsage <=> ClusterUsage {
    cluster, time_start, cpu_count, total_secs, alloc_secs, down_secs, idle_secs,
});
wire!(AssocUsage <=> AssocUsage { cluster, account, user, time_start, alloc_secs });
wire!(UsageReport <=> UsageReport { clusters, assocs });
wire!(nested RollupLevel <=> RollupLevel { count, last_run, last_us, max_us, total_us });
wire!(RpcCount <=> RpcCount { name, count, total_us });
wire!(DbdStats <=> DbdStats { time_start, hourly, daily, monthly, rpcs, users });
wire!(RollupStats <=> RollupStats { hours, days, months });
wire!(EventFilter <=> EventFilter {
    clusters, nodes, states, reasons, reason_uids, start, end, min_cpus, max_cpus, open_only,
    node_events, cluster_events,
});
wire!(RunawayJob <=> RunawayJob { job_id, submit_time });
wire!(TxnFilter <=> TxnFilter { actions, actors, accounts, users, clusters, start, end });
wire!(TxnRec <=> TxnRec { id, time, action, actor, cluster, name, info });
wire!(FixRunaway <=> FixRunawayRequest { cluster, jobs });
wire!(EventRec <=> EventRec {
    cluster, node, time_start, time_end, state, reason, reason_uid, cpus,
});
wire!(AcctResv <=> AcctResv {
    name, time_start, time_end, prev_start, nodes, node_count, cpus, flags, users, accounts,
    removed,
});
wire!(ResvFilter <=> ResvFilter {
    clusters, names, nodes, start, end, with_usage, jobs_of_uid,
});
wire!(ResvRec <=> ResvRec {
    cluster, name, time_start, time_end, nodes, node_count, cpus, flags, users, accounts,
    alloc_secs, unused_wall,
});
wire!(ClusterAck <=> ClusterAck { cluster, epoch, through });

impl ToWire<pb::JobRow> for JobRow {
    fn to_wire(self) -> pb::JobRow {
        pb::JobRow {
            cluster: self.cluster,
            job: self.job.to_wire(),
            steps: self.steps.to_wire(),
        }
    }
}

impl FromWire<pb::JobRow> for JobRow {
    fn from_wire(w: pb::JobRow) -> Result<JobRow, ConvError> {
        Ok(JobRow {
            cluster: w.cluster,
            job: FromWire::from_wire(w.job).map_err(|e| at(e, "job"))?,
            steps: FromWire::from_wire(w.steps).map_err(|e| at(e, "steps"))?,
        })
    }
}

impl ToWire<pb::SeqRecord> for SeqRecord {
    fn to_wire(self) -> pb::SeqRecord {
        use pb::seq_record::Record as R;
        let record = match self.record {
            AcctRecord::JobStart(j) => R::JobStart(j.to_wire()),
            AcctRecord::JobEnd(j) => R::JobEnd(j.to_wire()),
            AcctRecord::StepStart(s) => R::StepStart(s.to_wire()),
            AcctRecord::StepEnd(s) => R::StepEnd(s.to_wire()),
            AcctRecord::NodeState(n) => R::NodeState(n.to_wire()),
            AcctRecord::ClusterInfo(c) => R::ClusterInfo(c.to_wire()),
            AcctRecord::Resv(r) => R::Resv(r.to_wire()),
        };
        pb::SeqRecord {
            cluster: self.cluster,
            epoch: self.epoch,
            seq: self.seq,
            record: Some(record),
        }
    }
}

impl FromWire<pb::SeqRecord> for SeqRecord {
    fn from_wire(w: pb::SeqRecord) -> Result<SeqRecord, ConvError> {
        use pb::seq_record::Record as R;
        let record = match w.record.ok_or_else(|| super::missing("record"))? {
            R::JobStart(j) => AcctRecord::JobStart(FromWire::from_wire(j)?),
            R::JobEnd(j) => AcctRecord::JobEnd(FromWire::from_wire(j)?),
            R::StepStart(s) => AcctRecord::StepStart(FromWire::from_wire(s)?),
            R::StepEnd(s) => AcctRecord::StepEnd(FromWire::from_wire(s)?),
            R::NodeState(n) => AcctRecord::NodeState(FromWire::from_wire(n)?),
            R::ClusterInfo(c) => AcctRecord::ClusterInfo(FromWire::from_wire(c)?),
            R::Resv(r) => AcctRecord::Resv(FromWire::from_wire(r)?),
        };
        Ok(SeqRecord {
            cluster: w.cluster,
            epoch: w.epoch,
            seq: w.seq,
            record,
        })
    }
}

/// The `SlurmDbd` methods: each call's variant, message and method name.
macro_rules! dbd_calls {
    ($($v:ident($m:ty) = $path:literal),* $(,)?) => {
        /// One request to slurmdbd in its gRPC form.
        #[derive(Debug, Clone, PartialEq)]
        pub enum DbdCall {
            $($v($m),)*
        }

        /// The full gRPC path of each `SlurmDbd` method.
        pub mod dbd_method {
            $(
                #[allow(non_upper_case_globals)]
                pub const $v: &str = concat!("/slurm.v1.SlurmDbd/", $path);
            )*
        }

        impl DbdCall {
            /// The method's full gRPC path.
            pub fn method(&self) -> &'static str {
                match self {
                    $(DbdCall::$v(_) => dbd_method::$v,)*
                }
            }

            /// The message's protobuf bytes (what a credential's body hash
            /// covers).
            pub fn encode(&self) -> Vec<u8> {
                use prost::Message;
                match self {
                    $(DbdCall::$v(m) => m.encode_to_vec(),)*
                }
            }
        }
    };
}

dbd_calls!(
    Ping(pb::Empty) = "Ping",
    SendRecords(pb::RecordBatch) = "SendRecords",
    AddClusters(pb::ClusterList) = "AddClusters",
    DeleteClusters(pb::ClusterFilter) = "DeleteClusters",
    AddAccounts(pb::AddAccountsRequest) = "AddAccounts",
    ModifyAccounts(pb::ModifyAccountsRequest) = "ModifyAccounts",
    DeleteAccounts(pb::AccountFilter) = "DeleteAccounts",
    AddUsers(pb::AddUsersRequest) = "AddUsers",
    ModifyUsers(pb::ModifyUsersRequest) = "ModifyUsers",
    DeleteUsers(pb::UserFilter) = "DeleteUsers",
    ModifyAssocs(pb::ModifyAssocsRequest) = "ModifyAssocs",
    DeleteAssocs(pb::AssocFilter) = "DeleteAssocs",
    AddQos(pb::QosList) = "AddQos",
    ModifyQos(pb::ModifyQosRequest) = "ModifyQos",
    DeleteQos(pb::QosFilter) = "DeleteQos",
    AddCoords(pb::CoordChange) = "AddCoords",
    RemoveCoords(pb::CoordChange) = "RemoveCoords",
    Rollup(pb::RollupRequest) = "Rollup",
    ListClusters(pb::ClusterFilter) = "ListClusters",
    ListAccounts(pb::AccountFilter) = "ListAccounts",
    ListUsers(pb::UserFilter) = "ListUsers",
    ListAssocs(pb::AssocFilter) = "ListAssocs",
    ListQos(pb::QosFilter) = "ListQos",
    GetJobs(pb::AcctJobQuery) = "GetJobs",
    GetUsage(pb::UsageQuery) = "GetUsage",
    GetStats(pb::Empty) = "GetStats",
    ListEvents(pb::EventFilter) = "ListEvents",
    ListTxns(pb::TxnFilter) = "ListTxns",
    ListResvs(pb::ResvFilter) = "ListResvs",
    FixRunaway(pb::FixRunawayRequest) = "FixRunaway",
    Shutdown(pb::Empty) = "Shutdown",
    ClearStats(pb::Empty) = "ClearStats",
    GetConfig(pb::Empty) = "GetConfig",
);

/// A required message field: absent is the default.
fn or_default<A: FromWire<Option<W>>, W>(
    w: Option<W>,
    field: &'static str,
) -> Result<A, ConvError> {
    A::from_wire(w).map_err(|e| at(e, field))
}

impl DbdCall {
    /// The request in its gRPC form.
    pub fn from_body(body: AcctRequest) -> DbdCall {
        match body {
            AcctRequest::Ping => DbdCall::Ping(pb::Empty {}),
            AcctRequest::Record(r) => DbdCall::SendRecords(pb::RecordBatch {
                records: vec![r.to_wire()],
            }),
            AcctRequest::Records(v) => DbdCall::SendRecords(pb::RecordBatch {
                records: v.to_wire(),
            }),
            AcctRequest::AddClusters(v) => DbdCall::AddClusters(pb::ClusterList {
                clusters: v.to_wire(),
            }),
            AcctRequest::DeleteClusters(f) => DbdCall::DeleteClusters(f.to_wire()),
            AcctRequest::AddAccounts(a) => DbdCall::AddAccounts(a.to_wire()),
            AcctRequest::ModifyAccounts { filter, set, assoc } => {
                DbdCall::ModifyAccounts(pb::ModifyAccountsRequest {
                    filter: filter.to_wire(),
                    set: set.to_wire(),
                    assoc: assoc.to_wire(),
                })
            }
            AcctRequest::DeleteAccounts(f) => DbdCall::DeleteAccounts(f.to_wire()),
            AcctRequest::AddUsers(a) => DbdCall::AddUsers(a.to_wire()),
            AcctRequest::ModifyUsers { filter, set, assoc } => {
                DbdCall::ModifyUsers(pb::ModifyUsersRequest {
                    filter: filter.to_wire(),
                    set: set.to_wire(),
                    assoc: assoc.to_wire(),
                })
            }
            AcctRequest::DeleteUsers(f) => DbdCall::DeleteUsers(f.to_wire()),
            AcctRequest::ModifyAssocs { filter, set } => {
                DbdCall::ModifyAssocs(pb::ModifyAssocsRequest {
                    filter: filter.to_wire(),
                    set: set.to_wire(),
                })
            }
            AcctRequest::DeleteAssocs(f) => DbdCall::DeleteAssocs(f.to_wire()),
            AcctRequest::AddQos(v) => DbdCall::AddQos(pb::QosList { qos: v.to_wire() }),
            AcctRequest::ModifyQos { filter, set } => DbdCall::ModifyQos(pb::ModifyQosRequest {
                filter: filter.to_wire(),
                set: set.to_wire(),
            }),
            AcctRequest::DeleteQos(f) => DbdCall::DeleteQos(f.to_wire()),
            AcctRequest::AddCoords(c) => DbdCall::AddCoords(c.to_wire()),
            AcctRequest::RemoveCoords(c) => DbdCall::RemoveCoords(c.to_wire()),
            AcctRequest::Rollup { now } => DbdCall::Rollup(pb::RollupRequest { now }),
            AcctRequest::ListClusters(f) => DbdCall::ListClusters(f.to_wire()),
            AcctRequest::ListAccounts(f) => DbdCall::ListAccounts(f.to_wire()),
            AcctRequest::ListUsers(f) => DbdCall::ListUsers(f.to_wire()),
            AcctRequest::ListAssocs(f) => DbdCall::ListAssocs(f.to_wire()),
            AcctRequest::ListQos(f) => DbdCall::ListQos(f.to_wire()),
            AcctRequest::GetJobs(q) => DbdCall::GetJobs(q.to_wire()),
            AcctRequest::GetUsage(q) => DbdCall::GetUsage(q.to_wire()),
            AcctRequest::Stats => DbdCall::GetStats(pb::Empty {}),
            AcctRequest::ListEvents(f) => DbdCall::ListEvents(f.to_wire()),
            AcctRequest::ListTxns(f) => DbdCall::ListTxns(f.to_wire()),
            AcctRequest::ListResvs(f) => DbdCall::ListResvs(f.to_wire()),
            AcctRequest::FixRunaway(f) => DbdCall::FixRunaway(f.to_wire()),
            AcctRequest::Shutdown => DbdCall::Shutdown(pb::Empty {}),
            AcctRequest::ClearStats => DbdCall::ClearStats(pb::Empty {}),
            AcctRequest::GetConfig => DbdCall::GetConfig(pb::Empty {}),
        }
    }

    /// The request as slurmdbd acts on it.
    pub fn into_body(self) -> Result<AcctRequest, ConvError> {
        Ok(match self {
            DbdCall::Ping(_) => AcctRequest::Ping,
            DbdCall::SendRecords(b) => {
                AcctRequest::Records(FromWire::from_wire(b.records).map_err(|e| at(e, "records"))?)
            }
            DbdCall::AddClusters(l) => AcctRequest::AddClusters(
                FromWire::from_wire(l.clusters).map_err(|e| at(e, "clusters"))?,
            ),
            DbdCall::DeleteClusters(f) => AcctRequest::DeleteClusters(FromWire::from_wire(f)?),
            DbdCall::AddAccounts(a) => AcctRequest::AddAccounts(FromWire::from_wire(a)?),
            DbdCall::ModifyAccounts(m) => AcctRequest::ModifyAccounts {
                filter: or_default(m.filter, "filter")?,
                set: or_default(m.set, "set")?,
                assoc: or_default(m.assoc, "assoc")?,
            },
            DbdCall::DeleteAccounts(f) => AcctRequest::DeleteAccounts(FromWire::from_wire(f)?),
            DbdCall::AddUsers(a) => AcctRequest::AddUsers(FromWire::from_wire(a)?),
            DbdCall::ModifyUsers(m) => AcctRequest::ModifyUsers {
                filter: or_default(m.filter, "filter")?,
                set: or_default(m.set, "set")?,
                assoc: or_default(m.assoc, "assoc")?,
            },
            DbdCall::DeleteUsers(f) => AcctRequest::DeleteUsers(FromWire::from_wire(f)?),
            DbdCall::ModifyAssocs(m) => AcctRequest::ModifyAssocs {
                filter: or_default(m.filter, "filter")?,
                set: or_default(m.set, "set")?,
            },
            DbdCall::DeleteAssocs(f) => AcctRequest::DeleteAssocs(FromWire::from_wire(f)?),
            DbdCall::AddQos(l) => {
                AcctRequest::AddQos(FromWire::from_wire(l.qos).map_err(|e| at(e, "qos"))?)
            }
            DbdCall::ModifyQos(m) => AcctRequest::ModifyQos {
                filter: or_default(m.filter, "filter")?,
                set: or_default(m.set, "set")?,
            },
            DbdCall::DeleteQos(f) => AcctRequest::DeleteQos(FromWire::from_wire(f)?),
            DbdCall::AddCoords(c) => AcctRequest::AddCoords(FromWire::from_wire(c)?),
            DbdCall::RemoveCoords(c) => AcctRequest::RemoveCoords(FromWire::from_wire(c)?),
            DbdCall::Rollup(r) => AcctRequest::Rollup { now: r.now },
            DbdCall::ListClusters(f) => AcctRequest::ListClusters(FromWire::from_wire(f)?),
            DbdCall::ListAccounts(f) => AcctRequest::ListAccounts(FromWire::from_wire(f)?),
            DbdCall::ListUsers(f) => AcctRequest::ListUsers(FromWire::from_wire(f)?),
            DbdCall::ListAssocs(f) => AcctRequest::ListAssocs(FromWire::from_wire(f)?),
            DbdCall::ListQos(f) => AcctRequest::ListQos(FromWire::from_wire(f)?),
            DbdCall::GetJobs(q) => AcctRequest::GetJobs(FromWire::from_wire(q)?),
            DbdCall::GetUsage(q) => AcctRequest::GetUsage(FromWire::from_wire(q)?),
            DbdCall::GetStats(_) => AcctRequest::Stats,
            DbdCall::ListEvents(f) => AcctRequest::ListEvents(FromWire::from_wire(f)?),
            DbdCall::ListTxns(f) => AcctRequest::ListTxns(FromWire::from_wire(f)?),
            DbdCall::ListResvs(f) => AcctRequest::ListResvs(FromWire::from_wire(f)?),
            DbdCall::FixRunaway(f) => AcctRequest::FixRunaway(FromWire::from_wire(f)?),
            DbdCall::Shutdown(_) => AcctRequest::Shutdown,
            DbdCall::ClearStats(_) => AcctRequest::ClearStats,
            DbdCall::GetConfig(_) => AcctRequest::GetConfig,
        })
    }
}

fn kind_to(k: AcctErrorKind) -> pb::DbdErrorKind {
    use pb::DbdErrorKind as P;
    match k {
        AcctErrorKind::InvalidCredential => P::DbdErrorInvalidCredential,
        AcctErrorKind::ExpiredCredential => P::DbdErrorExpiredCredential,
        AcctErrorKind::AccessDenied => P::DbdErrorAccessDenied,
        AcctErrorKind::InvalidRequest => P::DbdErrorInvalidRequest,
        AcctErrorKind::NotFound => P::DbdErrorNotFound,
        AcctErrorKind::AlreadyExists => P::DbdErrorAlreadyExists,
        AcctErrorKind::InUse => P::DbdErrorInUse,
        AcctErrorKind::Storage => P::DbdErrorStorage,
        AcctErrorKind::Protocol => P::DbdErrorProtocol,
    }
}

fn kind_from(v: i32) -> AcctErrorKind {
    use pb::DbdErrorKind as P;
    match P::try_from(v) {
        Ok(P::DbdErrorInvalidCredential) => AcctErrorKind::InvalidCredential,
        Ok(P::DbdErrorExpiredCredential) => AcctErrorKind::ExpiredCredential,
        Ok(P::DbdErrorAccessDenied) => AcctErrorKind::AccessDenied,
        Ok(P::DbdErrorInvalidRequest) => AcctErrorKind::InvalidRequest,
        Ok(P::DbdErrorNotFound) => AcctErrorKind::NotFound,
        Ok(P::DbdErrorAlreadyExists) => AcctErrorKind::AlreadyExists,
        Ok(P::DbdErrorInUse) => AcctErrorKind::InUse,
        Ok(P::DbdErrorStorage) => AcctErrorKind::Storage,
        Ok(P::DbdErrorProtocol) | Err(_) => AcctErrorKind::Protocol,
    }
}

/// slurmdbd's answer in its gRPC form.
pub fn dbd_reply(r: AcctResponse) -> pb::DbdReply {
    use pb::dbd_reply::Result as R;
    let result = match r {
        AcctResponse::Ok => R::Ok(pb::Empty {}),
        AcctResponse::Pong { version } => R::Version(version),
        AcctResponse::Ack {
            applied,
            duplicates,
            clusters,
        } => R::Ack(pb::RecordsAck {
            applied,
            duplicates,
            clusters: clusters.to_wire(),
        }),
        AcctResponse::Changed(items) => R::Changed(pb::StringList { items }),
        AcctResponse::Clusters(v) => R::Clusters(pb::ClusterList {
            clusters: v.to_wire(),
        }),
        AcctResponse::Accounts(v) => R::Accounts(pb::AccountList {
            accounts: v.to_wire(),
        }),
        AcctResponse::Users(v) => R::Users(pb::UserList { users: v.to_wire() }),
        AcctResponse::Assocs(v) => R::Assocs(pb::AssocList {
            assocs: v.to_wire(),
        }),
        AcctResponse::Qos(v) => R::Qos(pb::QosList { qos: v.to_wire() }),
        AcctResponse::Jobs(v) => R::Jobs(pb::JobRows { rows: v.to_wire() }),
        AcctResponse::Usage(u) => R::Usage(u.to_wire()),
        AcctResponse::RolledUp(s) => R::RolledUp(s.to_wire()),
        AcctResponse::Stats(s) => R::Stats(s.to_wire()),
        AcctResponse::Events(v) => R::Events(pb::EventList {
            events: v.to_wire(),
        }),
        AcctResponse::Txns(v) => R::Txns(pb::TxnList { txns: v.to_wire() }),
        AcctResponse::Resvs(v) => R::Resvs(pb::ResvList { resvs: v.to_wire() }),
        AcctResponse::Config(v) => R::Config(pb::ConfigPairs {
            pairs: v
                .into_iter()
                .map(|(key, value)| pb::ConfigPair { key, value })
                .collect(),
        }),
        AcctResponse::Error(e) => R::Error(pb::DbdError {
            kind: kind_to(e.kind) as i32,
            message: e.message,
        }),
    };
    pb::DbdReply {
        result: Some(result),
    }
}

/// slurmdbd's answer as the caller acts on it.
pub fn acct_response(r: pb::DbdReply) -> Result<AcctResponse, ConvError> {
    use pb::dbd_reply::Result as R;
    Ok(match r.result.ok_or_else(|| super::missing("result"))? {
        R::Ok(_) => AcctResponse::Ok,
        R::Version(version) => AcctResponse::Pong { version },
        R::Ack(a) => AcctResponse::Ack {
            applied: a.applied,
            duplicates: a.duplicates,
            clusters: FromWire::from_wire(a.clusters)?,
        },
        R::Changed(l) => AcctResponse::Changed(l.items),
        R::Clusters(l) => AcctResponse::Clusters(FromWire::from_wire(l.clusters)?),
        R::Accounts(l) => AcctResponse::Accounts(FromWire::from_wire(l.accounts)?),
        R::Users(l) => AcctResponse::Users(FromWire::from_wire(l.users)?),
        R::Assocs(l) => AcctResponse::Assocs(FromWire::from_wire(l.assocs)?),
        R::Qos(l) => AcctResponse::Qos(FromWire::from_wire(l.qos)?),
        R::Jobs(l) => AcctResponse::Jobs(FromWire::from_wire(l.rows)?),
        R::Usage(u) => AcctResponse::Usage(FromWire::from_wire(u)?),
        R::RolledUp(s) => AcctResponse::RolledUp(FromWire::from_wire(s)?),
        R::Stats(s) => AcctResponse::Stats(FromWire::from_wire(s)?),
        R::Events(l) => {
            AcctResponse::Events(FromWire::from_wire(l.events).map_err(|e| at(e, "events"))?)
        }
        R::Txns(l) => AcctResponse::Txns(FromWire::from_wire(l.txns).map_err(|e| at(e, "txns"))?),
        R::Resvs(l) => {
            AcctResponse::Resvs(FromWire::from_wire(l.resvs).map_err(|e| at(e, "resvs"))?)
        }
        R::Config(c) => {
            AcctResponse::Config(c.pairs.into_iter().map(|p| (p.key, p.value)).collect())
        }
        R::Error(e) => AcctResponse::Error(AcctError::new(kind_from(e.kind), e.message)),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn round_trip(body: AcctRequest) -> AcctRequest {
        DbdCall::from_body(body).into_body().unwrap()
    }

    fn job() -> AcctJob {
        AcctJob {
            job_id: 7,
            array_job_id: Some(6),
            array_task_id: Some(1),
            name: "x".into(),
            user: "u".into(),
            uid: 1000,
            state: JobState::Timeout.into(),
            exit_status: 256,
            submit_time: 10,
            eligible_time: Some(11),
            start_time: Some(12),
            end_time: None,
            time_limit: Some(5),
            requid: Some(0),
            suspend_start: Some(20),
            suspended_secs: 3,
            alloc_tres: "cpu=2".into(),
            ..Default::default()
        }
    }

    #[test]
    fn records_and_queries_convert_both_ways_unchanged() {
        let records = AcctRequest::Records(vec![
            SeqRecord {
                cluster: "c".into(),
                epoch: 9,
                seq: 1,
                record: AcctRecord::JobStart(job()),
            },
            SeqRecord {
                cluster: "c".into(),
                epoch: 9,
                seq: 2,
                record: AcctRecord::StepEnd(AcctStep {
                    job_id: 7,
                    step_id: crate::BATCH_STEP,
                    state: JobState::Completed.into(),
                    end_time: Some(30),
                    max_rss_kib: 5,
                    ..Default::default()
                }),
            },
            SeqRecord {
                cluster: "c".into(),
                epoch: 9,
                seq: 3,
                record: AcctRecord::NodeState(NodeEvent {
                    node: "n1".into(),
                    state: "DOWN".into(),
                    reason: Some("x".into()),
                    reason_uid: Some(0),
                    cpus: 4,
                    time: 5,
                }),
            },
            SeqRecord {
                cluster: "c".into(),
                epoch: 9,
                seq: 4,
                record: AcctRecord::ClusterInfo(ClusterInfo {
                    control_host: "h".into(),
                    control_port: 6817,
                    ..Default::default()
                }),
            },
        ]);
        assert_eq!(round_trip(records.clone()), records);
        let q = AcctRequest::GetJobs(JobQuery {
            job_ids: vec![1, 2],
            states: vec![JobState::Running, JobState::OutOfMemory],
            start: Some(5),
            limit: Some(3),
            with_steps: true,
            ..Default::default()
        });
        assert_eq!(round_trip(q.clone()), q);
        let u = AcctRequest::GetUsage(UsageQuery {
            span: Some(Span::Day),
            total: true,
            ..Default::default()
        });
        assert_eq!(round_trip(u.clone()), u);
        for r in [
            AcctRequest::Ping,
            AcctRequest::Stats,
            AcctRequest::Shutdown,
            AcctRequest::ClearStats,
            AcctRequest::GetConfig,
            AcctRequest::Rollup { now: Some(3) },
        ] {
            assert_eq!(round_trip(r.clone()), r);
        }
    }

    #[test]
    fn changes_keep_leave_clear_and_set_apart() {
        let m = AcctRequest::ModifyUsers {
            filter: UserFilter {
                names: vec!["a".into()],
                admin_levels: vec![AdminLevel::Operator],
                ..Default::default()
            },
            set: UserPatch {
                default_account: Set::Clear,
                admin_level: Set::To(AdminLevel::Administrator),
            },
            assoc: AssocPatch {
                shares: Set::To(FAIRSHARE_PARENT),
                parent: Set::Keep,
                limits: AssocLimitsPatch {
                    max_jobs: Set::To(0),
                    grp_tres: Set::Clear,
                    max_tres: Set::To("cpu=-1".into()),
                    ..Default::default()
                },
                qos: ListChange::Remove(vec!["normal".into()]),
                default_qos: Set::To(String::new()),
            },
        };
        assert_eq!(round_trip(m.clone()), m);
        let q = AcctRequest::ModifyQos {
            filter: QosFilter {
                names: vec!["q".into()],
                ids: vec![3],
            },
            set: QosPatch {
                usage_factor: Set::To(0.5),
                flags: ListChange::Replace(vec![]),
                preempt: ListChange::Add(vec!["low".into()]),
                grace_time: Set::Clear,
                ..Default::default()
            },
        };
        assert_eq!(round_trip(q.clone()), q);
        let add = AcctRequest::AddUsers(AddUsers {
            names: vec!["u".into()],
            admin_level: Some(AdminLevel::None),
            assoc: AssocSettings {
                shares: Some(2),
                limits: AssocLimits {
                    grp_wall: Some(60),
                    ..Default::default()
                },
                qos: vec!["normal".into()],
                default_qos: None,
            },
            ..Default::default()
        });
        assert_eq!(round_trip(add.clone()), add);
        let qos = AcctRequest::AddQos(vec![QosRec {
            name: "q".into(),
            limits: QosLimits {
                min_tres_per_job: Some("gres/gpu=1".into()),
                ..Default::default()
            },
            ..Default::default()
        }]);
        assert_eq!(round_trip(qos.clone()), qos);
    }

    #[test]
    fn answers_convert_both_ways_unchanged() {
        let answers = [
            AcctResponse::Ok,
            AcctResponse::Pong {
                version: "1".into(),
            },
            AcctResponse::Ack {
                applied: 2,
                duplicates: 1,
                clusters: vec![ClusterAck {
                    cluster: "c".into(),
                    epoch: 1,
                    through: 3,
                }],
            },
            AcctResponse::Changed(vec!["a".into()]),
            AcctResponse::Jobs(vec![JobRow {
                cluster: "c".into(),
                job: job(),
                steps: vec![AcctStep::default()],
            }]),
            AcctResponse::Assocs(vec![AssocRec {
                parent: None,
                shares: FAIRSHARE_PARENT,
                ..Default::default()
            }]),
            AcctResponse::Qos(vec![QosRec::default()]),
            AcctResponse::Stats(DbdStats {
                hourly: RollupLevel {
                    count: 1,
                    ..Default::default()
                },
                rpcs: vec![RpcCount {
                    name: "DBD_PING".into(),
                    count: 1,
                    total_us: 2,
                }],
                ..Default::default()
            }),
            AcctResponse::Error(AcctError::new(AcctErrorKind::InUse, "busy")),
        ];
        for a in answers {
            assert_eq!(acct_response(dbd_reply(a.clone())).unwrap(), a);
        }
    }

    #[test]
    fn bad_fields_are_named() {
        let mut q = DbdCall::from_body(AcctRequest::GetJobs(JobQuery::default()));
        if let DbdCall::GetJobs(m) = &mut q {
            m.states = vec!["NAPPING".into()];
        }
        let e = q.into_body().unwrap_err();
        assert_eq!(e.field, "states");
        assert!(e.why.contains("NAPPING"), "{e}");
        let c = DbdCall::AddClusters(pb::ClusterList {
            clusters: vec![pb::ClusterRec {
                control_port: 70_000,
                ..Default::default()
            }],
        });
        let e = c.into_body().unwrap_err();
        assert_eq!(e.field, "control_port", "{e}");
        let u = DbdCall::ListUsers(pb::UserFilter {
            admin_levels: vec![9],
            ..Default::default()
        });
        assert_eq!(u.into_body().unwrap_err().field, "admin_levels");
        let r = DbdCall::SendRecords(pb::RecordBatch {
            records: vec![pb::SeqRecord::default()],
        });
        assert_eq!(r.into_body().unwrap_err().field, "record");
    }
}
