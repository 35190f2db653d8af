//! The configuration in force: reconfigure (slurm.conf, topology, GRES
//! kinds), and what `scontrol show config` and `sdiag` read of it.

use super::*;

/// slurm.conf and what a reconfigure takes from beside it, read and parsed
/// before the request reaches the writer (which reads no files): the
/// topology, the scheduler with its parameters and the priority weights.
pub struct Reconf {
    conf: SlurmConf,
    topologies: slurm_common::topologies::Topologies,
    scheduler: Box<dyn Scheduler>,
    /// Checked only where multifactor priority is in force.
    priority: Result<slurm_plugins::priority::PriorityParams, String>,
}

impl Reconf {
    /// Read slurm.conf at `path` and the files beside it. Errors name what
    /// is wrong; nothing is changed either way.
    pub fn read(path: &std::path::Path) -> Result<Reconf, RpcError> {
        let conf = SlurmConf::load(path)
            .or_else(|e| err_detail(SlurmError::InvalidRequest, e.to_string()))?;
        Reconf::of(conf)
    }

    /// The rest, for a configuration already parsed.
    pub fn of(conf: SlurmConf) -> Result<Reconf, RpcError> {
        // A completion script that cannot run is refused now, as at
        // start-up (rather than records dropped, or a restart refused).
        slurm_common::jobcomp::check_conf(&conf)
            .or_else(|e| err_detail(SlurmError::InvalidRequest, e))?;
        let topologies =
            load_topology(&conf).or_else(|e| err_detail(SlurmError::InvalidRequest, e))?;
        let scheduler = slurm_plugins::registry::scheduler_with_params(
            &conf.scheduler_type,
            conf.get("SchedulerParameters").unwrap_or(""),
        )
        .or_else(|e| err_detail(SlurmError::InvalidRequest, e.to_string()))?
        .plugin;
        let priority = slurm_plugins::priority::PriorityParams::from_config(&conf.entries)
            .map_err(|e| e.to_string());
        Ok(Reconf {
            conf,
            topologies,
            scheduler,
            priority,
        })
    }
}

/// Read the topology beside `conf` (nodes as configured now).
pub fn load_topology(conf: &SlurmConf) -> Result<slurm_common::topologies::Topologies, String> {
    let names: Vec<String> = conf.nodes.iter().map(|n| n.name.clone()).collect();
    slurm_common::topologies::load(conf, &names)
}

impl Stats {
    /// Put these counters into `d` (`sdiag`'s scheduling figures).
    pub fn fill(&self, d: &mut DiagStats) {
        let st = self;
        d.jobs_submitted = st.jobs_submitted;
        d.jobs_started = st.jobs_started;
        d.jobs_completed = st.jobs_completed;
        d.jobs_canceled = st.jobs_canceled;
        d.jobs_failed = st.jobs_failed;
        d.main_cycles = st.sched_cycles;
        d.main_last_us = st.last_cycle_us;
        d.main_max_us = st.max_cycle_us;
        d.main_total_us = st.total_cycle_us;
        d.main_total_depth = st.total_depth;
        d.main_last_queue = st.last_queue;
        d.bf_cycles = st.bf_cycles;
        d.bf_last_us = st.bf_last_us;
        d.bf_max_us = st.bf_max_us;
        d.bf_total_us = st.bf_total_us;
        d.bf_last_depth = st.bf_last_depth;
        d.bf_total_depth = st.bf_total_depth;
        d.bf_backfilled_jobs = st.bf_backfilled_jobs;
        d.bf_last_when = st.bf_last_when;
        d.bf_last_queue = st.bf_last_queue;
        d.bf_last_depth_try = st.bf_last_depth_try;
        d.bf_total_depth_try = st.bf_total_depth_try;
        d.bf_total_queue = st.bf_total_queue;
        d.bf_table_size = st.bf_table_size;
        d.bf_total_table_size = st.bf_total_table_size;
        d.bf_exit_end = st.bf_exit_end;
        d.bf_exit_max_job_test = st.bf_exit_max_job_test;
    }
}

impl Controller {
    /// The GRES kinds of every node's `Gres=` line.
    pub(super) fn refresh_gres_kinds(&mut self) {
        let (k, warn) = crate::gres::GresKinds::of(self.nodes.iter().map(|n| n.gres.as_slice()));
        for w in warn {
            tracing::warn!("{w}");
        }
        self.gres_kinds = k;
    }

    /// A job's generic resources per node, as the core counts them.
    pub(super) fn job_gres(
        &self,
        d: &JobDesc,
        nodes: u32,
        tasks: u32,
    ) -> Result<Vec<GresReq>, String> {
        let specs = slurm_common::gres::job_per_node(
            d.gres.as_deref(),
            d.gpus.as_deref(),
            d.gpus_per_node.as_deref(),
            d.gpus_per_task.as_deref(),
            nodes,
            tasks,
        )?;
        self.gres_kinds.job_reqs(&specs)
    }

    /// `scontrol reconfigure`: apply a configuration read outside the
    /// writer ([`Reconf::read`]): what can change while running
    /// (partitions, node weights/features/GRES, licenses, scheduler and
    /// priority parameters, preemption, limits...). A file that did not
    /// parse, or a change that needs a restart (the node set, cluster name,
    /// ports, state directory, plugins), is refused and changes nothing:
    /// every check comes before the first change.
    pub fn reconfigure(
        &mut self,
        who: Caller,
        read: Result<Reconf, RpcError>,
        now: i64,
    ) -> Result<Response, RpcError> {
        if !who.admin {
            return err(SlurmError::AccessDenied);
        }
        // systemd hears of it (Type=notify): reloading, then ready again.
        slurm_common::logging::notify("RELOADING=1");
        let r = read.and_then(|r| self.reconfigure_now(r, now));
        slurm_common::logging::notify("READY=1");
        r
    }

    fn reconfigure_now(&mut self, read: Reconf, now: i64) -> Result<Response, RpcError> {
        let Reconf {
            conf: new,
            topologies,
            scheduler,
            priority,
        } = read;
        let old = &self.conf;
        let node_names = |c: &SlurmConf| c.nodes.iter().map(|n| n.name.clone()).collect::<Vec<_>>();
        let fixed = [
            ("ClusterName", old.cluster_name != new.cluster_name),
            ("the node list", node_names(old) != node_names(&new)),
            ("SlurmctldPort", old.slurmctld_port != new.slurmctld_port),
            ("SlurmdPort", old.slurmd_port != new.slurmd_port),
            (
                "StateSaveLocation",
                old.state_save_location != new.state_save_location,
            ),
            ("SchedulerType", old.scheduler_type != new.scheduler_type),
            ("SelectType", old.select_type != new.select_type),
            ("PriorityType", old.priority_type != new.priority_type),
            (
                "AccountingStorageType",
                old.accounting_storage_type != new.accounting_storage_type,
            ),
        ];
        if let Some((what, _)) = fixed.iter().find(|(_, changed)| *changed) {
            return err_detail(
                SlurmError::NeedRestart,
                format!("{what} changed: restart slurmctld to apply it"),
            );
        }
        let priority = match (self.multifactor.is_some(), priority) {
            (true, Err(e)) => return err_detail(SlurmError::InvalidRequest, e),
            (true, Ok(p)) => Some(p),
            (false, _) => None,
        };
        let sched_log = crate::schedlog::SCHED.prepare(&new).map_err(|e| RpcError {
            error: SlurmError::InvalidRequest,
            detail: Some(e),
        })?;
        // Every check passed: apply (nothing below fails).
        crate::schedlog::SCHED.apply(sched_log);
        if new.get("SlurmctldDebug") != old.get("SlurmctldDebug") {
            let level = slurm_common::logging::level(new.get("SlurmctldDebug"), self.log_verbose);
            if slurm_common::logging::set_level(level) {
                tracing::info!("reconfigure: logging at {level} now (SlurmctldDebug)");
            }
        }
        self.topologies = topologies;
        if new.get("SchedulerParameters") != old.get("SchedulerParameters") {
            self.scheduler = scheduler;
        }
        if let (Some(m), Some(p)) = (self.multifactor.as_mut(), priority) {
            m.reconfigure(p);
        }
        // slurm.conf's FairShareDampeningFactor again (scontrol's ends).
        self.fs_dampening = None;
        for n in &new.nodes {
            if let Some(&i) = self.node_index.get(&n.name) {
                let admin = self.p.nodes.get(&n.name).and_then(|a| a.features.clone());
                let r = &mut self.nodes[i];
                r.weight = n.weight;
                r.features = admin.unwrap_or_else(|| n.features.clone());
                r.gres = n.gres.clone();
                r.partitions = new
                    .partitions
                    .iter()
                    .filter(|p| p.nodes.contains(&n.name))
                    .map(|p| p.name.clone())
                    .collect();
            }
        }
        self.partitions = partition_records(&new);
        // Operator changes outlive a reconfigure; those of partitions no
        // longer configured go.
        let gone: Vec<String> = self
            .p
            .partitions
            .iter()
            .filter(|(n, a)| a.created.is_none() && !self.partitions.iter().any(|p| &p.name == *n))
            .map(|(n, _)| n.clone())
            .collect();
        for n in gone {
            self.p.partitions.remove(&n);
            self.entries.push(Entry::Partition(n, None));
        }
        self.apply_part_admin();
        self.licenses =
            slurm_common::licenses::parse(new.get("Licenses").unwrap_or("")).unwrap_or_default();
        self.enforce = crate::assoc::Enforce::parse(&new.accounting_storage_enforce);
        self.limits = SubmitLimits::from_conf(&new);
        super::apply_debug_flags(&new);
        self.conf = Arc::new(new);
        self.refresh_gres_kinds();
        self.last_update = self.last_update.max(now);
        self.dirty = true;
        self.sched_needed = true;
        self.refresh();
        tracing::info!("reconfigured from {}", self.conf.path.display());
        Ok(Response::Ok)
    }

    /// `sdiag -r` (the RPC server checked the caller is an operator): the
    /// scheduler's counters from zero, as of `now`.
    pub fn reset_stats(&mut self, now: i64) {
        self.stats = Stats::default();
        self.stats_since = now;
        self.dirty = true;
    }

    pub(super) fn diag(&self) -> DiagStats {
        // (Jobs pending and running: counted by readers,
        // `Snapshot::diag_counted`.)
        let mut d = DiagStats {
            since: self.stats_since,
            now: self.last_update,
            dbd_queue: self.p.acct.pending.len() as u64,
            ..Default::default()
        };
        self.stats.fill(&mut d);
        d
    }

    /// `scontrol fsdampeningfactor N`: the fair share's dampening factor
    /// until slurm.conf is read again, as Slurm's (its super users: root,
    /// SlurmUser, accounting's Administrators). Shown by `show config`.
    pub(super) fn set_fs_dampening(
        &mut self,
        who: Caller,
        factor: u16,
        now: i64,
    ) -> Result<Response, RpcError> {
        if !who.admin {
            return err(SlurmError::AccessDenied);
        }
        if factor == 0 {
            return err_detail(
                SlurmError::InvalidRequest,
                "the dampening factor must be 1 or more",
            );
        }
        self.fs_dampening = Some(factor);
        if let Some(m) = self.multifactor.as_mut() {
            let mut p = m.params.clone();
            p.dampening = factor;
            m.reconfigure(p);
        }
        // The fair share is computed again at once: so are the pending
        // jobs' priorities (sprio shows them), not at the next period.
        self.recompute_priorities(now);
        tracing::info!("Set FairShareDampeningFactor to {factor}");
        self.sched_needed = true;
        self.dirty = true;
        Ok(Response::Ok)
    }

    pub(super) fn config_dump(&self) -> ConfigDump {
        let mut entries = self.conf.entries.clone();
        // Every controller, numbered, as Slurm shows them.
        entries.retain(|(k, _)| !k.eq_ignore_ascii_case("SlurmctldHost"));
        for (i, h) in self.conf.slurmctld_hosts.iter().enumerate() {
            let v = match &h.addr {
                Some(a) => format!("{}({a})", h.name),
                None => h.name.clone(),
            };
            entries.push((format!("SlurmctldHost[{i}]"), v));
        }
        if let Some(f) = self.fs_dampening {
            entries.retain(|(k, _)| !k.eq_ignore_ascii_case("FairShareDampeningFactor"));
            entries.push(("FairShareDampeningFactor".into(), f.to_string()));
        }
        entries.push(("SLURM_CONF".into(), self.conf.path.display().to_string()));
        entries.push(("SLURM_VERSION".into(), SLURM_VERSION.into()));
        entries.sort_by_key(|e| e.0.to_ascii_lowercase());
        ConfigDump {
            entries,
            boot_time: self.boot_time,
        }
    }
}
