//! Nodes: registration and heartbeats from the node daemons, `scontrol
//! create|delete|update node`, draining, and failing the jobs of a node
//! that is gone.

use super::*;

/// Reason Slurm gives a node that stopped answering.
pub const NOT_RESPONDING: &str = "Not responding";

impl Controller {
    /// Add a run-time node (no persistence here; callers journal it).
    pub(super) fn add_node(&mut self, spec: &NodeSpec) {
        let external = spec.state == "EXTERNAL";
        let parts: Vec<String> = self
            .partitions
            .iter()
            .filter(|p| {
                spec.partitions.contains(&p.name) || p.nodes_expr.eq_ignore_ascii_case("ALL")
            })
            .map(|p| p.name.clone())
            .collect();
        for p in self
            .partitions
            .iter_mut()
            .filter(|p| parts.contains(&p.name))
        {
            if !p.nodes.contains(&spec.name) {
                p.nodes.push(spec.name.clone());
            }
        }
        Arc::make_mut(&mut self.node_index).insert(spec.name.clone(), self.nodes.len());
        self.use_ready = false;
        self.registered.push(external);
        self.nodes.push(NodeRecord {
            name: spec.name.clone(),
            addr: spec.addr.clone().unwrap_or_else(|| spec.name.clone()),
            hostname: spec.name.clone(),
            port: spec.port.unwrap_or(self.conf.slurmd_port),
            cpus: spec.cpus.max(1),
            boards: 1,
            sockets: spec.cpus.max(1),
            cores_per_socket: 1,
            threads_per_core: 1,
            real_memory: spec.real_memory.max(1),
            tmp_disk: 0,
            weight: 1,
            features: spec.features.clone(),
            gres: spec.gres.clone(),
            partitions: parts,
            external,
            ..Default::default()
        });
    }

    pub(super) fn create_node(
        &mut self,
        who: Caller,
        spec: NodeSpec,
    ) -> Result<Response, RpcError> {
        if !who.admin {
            return err(SlurmError::AccessDenied);
        }
        let mut spec = spec;
        spec.state = spec.state.to_ascii_uppercase();
        if spec.name.is_empty() || self.node_index.contains_key(&spec.name) {
            return err_detail(
                SlurmError::InvalidNodeName,
                format!("node '{}' exists or is unnamed", spec.name),
            );
        }
        if !matches!(
            spec.state.as_str(),
            "EXTERNAL" | "FUTURE" | "IDLE" | "CLOUD"
        ) {
            return err_detail(
                SlurmError::InvalidNodeState,
                format!("State={} (use External, Future or Idle)", spec.state),
            );
        }
        for p in &spec.partitions {
            if !self.partitions.iter().any(|x| &x.name == p) {
                return err(SlurmError::InvalidPartitionName);
            }
        }
        for g in &spec.gres {
            if let Err(e) = slurm_common::gres::parse_list(g) {
                return err_detail(SlurmError::InvalidGres, format!("Gres={g}: {e}"));
            }
        }
        self.add_node(&spec);
        self.refresh_gres_kinds();
        self.entries.push(Entry::DynNode(spec.clone()));
        self.p.dyn_nodes.insert(spec.name.clone(), spec);
        self.dirty = true;
        self.sched_needed = true;
        self.refresh();
        Ok(Response::Ok)
    }

    pub(super) fn delete_node(&mut self, who: Caller, name: &str) -> Result<Response, RpcError> {
        if !who.admin {
            return err(SlurmError::AccessDenied);
        }
        if !self.p.dyn_nodes.contains_key(name) {
            return err_detail(
                SlurmError::InvalidNodeName,
                format!("{name} was not created at run time"),
            );
        }
        let busy = self
            .p
            .jobs
            .values()
            .any(|j| Self::holds_devices(j) && j.alloc.nodes.iter().any(|n| n == name));
        if busy {
            return err(SlurmError::NodesBusy);
        }
        self.p.dyn_nodes.remove(name);
        self.entries.push(Entry::RemoveNode(name.to_string()));
        let index = Arc::make_mut(&mut self.node_index);
        if let Some(i) = index.remove(name) {
            self.use_ready = false;
            self.nodes.remove(i);
            self.registered.remove(i);
            for (k, n) in self.nodes.iter().enumerate() {
                index.insert(n.name.clone(), k);
            }
        }
        for p in &mut self.partitions {
            p.nodes.retain(|n| n != name);
        }
        self.dirty = true;
        self.refresh();
        Ok(Response::Ok)
    }

    pub(super) fn node_addr(&self, name: &str) -> Option<String> {
        self.node_index
            .get(name)
            .map(|&i| format!("{}:{}", self.nodes[i].addr, self.nodes[i].port))
    }

    /// A daemon that can take messages (external nodes have none).
    pub(super) fn node_responding(&self, name: &str) -> bool {
        self.node_index.get(name).is_some_and(|&i| {
            !self.nodes[i].external && !self.nodes[i].flags.not_responding && self.registered[i]
        })
    }

    // ------------------------------------------------------------------
    // Derived state

    /// A node's jobs die with it: NODE_FAIL, other nodes are told to clean.
    pub(super) fn fail_node_jobs(&mut self, node: &str, now: i64) {
        let ids: Vec<JobId> = self
            .p
            .jobs
            .values()
            .filter(|j| j.alloc.nodes.iter().any(|n| n == node))
            .filter(|j| Self::holds_devices(j))
            .map(|j| j.job_id)
            .collect();
        for id in ids {
            let running = self.p.jobs.get(&id).is_some_and(|j| j.state.is_active());
            if running && self.drop_failed_node(id, node) {
                continue;
            }
            if running {
                self.lose_job(id, node, now);
            }
            self.node_cleaned(id, node, None);
        }
    }

    /// `-k/--no-kill`: a running job keeps running without `node`, when
    /// it asked to and it has other nodes and its batch script is not on
    /// this one. Whether it did.
    fn drop_failed_node(&mut self, id: JobId, node: &str) -> bool {
        let Some(j) = self.p.jobs.get(&id) else {
            return false;
        };
        let Some(k) = j.alloc.nodes.iter().position(|n| n == node) else {
            return false;
        };
        if !j.desc.no_kill || j.alloc.nodes.len() < 2 || j.batch_host.as_deref() == Some(node) {
            return false;
        }
        tracing::warn!("job {id}: node {node} failed; the job keeps its other nodes (--no-kill)");
        let Some(j) = self.job_mut(id) else {
            return false;
        };
        let a = &mut j.alloc;
        a.nodes.remove(k);
        for v in [&mut a.cpus, &mut a.tasks] {
            if k < v.len() {
                v.remove(k);
            }
        }
        if k < a.mem.len() {
            a.mem.remove(k);
        }
        if k < a.gres.len() {
            a.gres.remove(k);
        }
        self.save_job(id);
        self.sched_needed = true;
        self.refresh();
        true
    }

    pub(super) fn set_admin(&mut self, name: &str, f: impl FnOnce(&mut NodeAdmin)) {
        let a = self.p.nodes.entry(name.to_string()).or_default();
        f(a);
        self.save_node(name);
        self.sched_needed = true;
        self.refresh();
    }

    pub(super) fn register(&mut self, r: NodeRegistration, now: i64) -> Result<Response, RpcError> {
        let Some(&i) = self.node_index.get(&r.name) else {
            return err_detail(SlurmError::InvalidNodeName, r.name);
        };
        let restarted = self.nodes[i]
            .slurmd_start_time
            .is_some_and(|t| t != r.slurmd_start_time);
        {
            let n = &mut self.nodes[i];
            n.boot_time = Some(r.boot_time);
            n.slurmd_start_time = Some(r.slurmd_start_time);
            n.version = Some(r.version.clone());
            n.os = Some(r.os.clone());
            n.arch = Some(r.arch.clone());
            n.cpu_load = Some(r.cpu_load);
            n.free_mem = Some(r.free_mem);
            n.kubelet = r.kubelet && !n.external;
            n.last_heard = Some(now);
            n.flags.not_responding = false;
        }
        self.registered[i] = true;
        // Known now: its state follows (before any job it lost ends, which
        // refreshes only the nodes the job used).
        self.refresh();
        // Less hardware than its line says: drained, as Slurm does (unless
        // SlurmdParameters=config_overrides).
        if !self.conf.config_overrides() && !self.nodes[i].external {
            use slurm_common::conf::{low_hardware, HwCounts};
            let n = &self.nodes[i];
            let found = HwCounts::new(
                r.cpus,
                r.sockets,
                r.cores_per_socket,
                r.real_memory,
                r.tmp_disk,
            );
            let conf = HwCounts::new(
                n.cpus,
                n.sockets,
                n.cores_per_socket,
                n.real_memory,
                n.tmp_disk,
            );
            if let Some(why) = low_hardware(&found, &conf) {
                let same = self
                    .p
                    .nodes
                    .get(&r.name)
                    .is_some_and(|a| a.drain && a.reason.as_deref() == Some(why.as_str()));
                if !same {
                    tracing::warn!("node {} drained: {why}", r.name);
                    self.drain_for(&r.name, &why, now);
                }
            }
        }
        let admin = self.p.nodes.get(&r.name).cloned().unwrap_or_default();
        if admin.down {
            let by_timeout = admin.reason.as_deref() == Some(NOT_RESPONDING);
            let back = match self.conf.return_to_service {
                2 => true,
                1 => by_timeout,
                _ => false,
            };
            if back {
                self.set_admin(&r.name, |a| {
                    a.down = false;
                    if !a.drain {
                        a.reason = None;
                        a.reason_time = None;
                        a.reason_uid = None;
                    }
                });
            }
        }
        // Jobs we think run here but the daemon does not know: lost if the
        // daemon restarted after they started (a finished job's report may
        // still be on its way otherwise).
        let name = r.name.clone();
        // Jobs started before this controller's run were launched by
        // another: no launch of theirs is still on its way here.
        let recovered = self.recovered.remove(&name).unwrap_or_default();
        let lost: Vec<JobId> = self
            .p
            .jobs
            .values()
            .filter(|j| j.state.is_active() && j.batch_host.as_deref() == Some(name.as_str()))
            .filter(|j| !r.running_jobs.contains(&j.job_id))
            .filter(|j| {
                restarted
                    || j.start_time.is_some_and(|s| s < r.slurmd_start_time)
                    || recovered.contains(&j.job_id)
            })
            .map(|j| j.job_id)
            .collect();
        for id in lost {
            self.lose_job(id, &name, now);
        }
        // Jobs the daemon runs that we consider over: make it stop them.
        for id in &r.running_jobs {
            let keep = self
                .p
                .jobs
                .get(id)
                .is_some_and(|j| Self::holds_devices(j) && j.alloc.nodes.contains(&name));
            if !keep {
                if let Some(addr) = self.node_addr(&name) {
                    self.effects.push(Effect::Terminate {
                        node: name.clone(),
                        addr,
                        job_id: *id,
                        kill_wait: 0,
                        start_time: None,
                        cause: slurm_proto::TermCause::None,
                    });
                }
            }
        }
        // Back from a reboot it was sent?
        self.reboot_registered(&name, r.boot_time, now);
        // Its jobs that were suspended (or resumed) stay so.
        self.suspends_for_node(&name);
        self.dirty = true;
        self.sched_needed = true;
        self.refresh();
        Ok(Response::Ok)
    }

    /// Heartbeats the RPC server answered itself (node, when).
    pub fn heard_from(&mut self, heard: HashMap<String, i64>, now: i64) {
        for (node, t) in heard {
            // A time from before a backward clock step is not in the future.
            let t = t.min(now);
            if let Some(&i) = self.node_index.get(&node) {
                let last = &mut self.nodes[i].last_heard;
                *last = Some(last.map_or(t, |l| l.max(t)));
            }
        }
    }

    pub(super) fn heartbeat(&mut self, node: &str, now: i64) -> Result<Response, RpcError> {
        let Some(&i) = self.node_index.get(node) else {
            return err_detail(SlurmError::InvalidNodeName, node.to_string());
        };
        if !self.registered[i] || self.nodes[i].flags.not_responding || self.reboot_issued(node) {
            // Ask the daemon to register again (we restarted or marked it down).
            return err_detail(SlurmError::InvalidNodeState, "register");
        }
        self.nodes[i].last_heard = Some(now);
        Ok(Response::Ok)
    }

    pub(super) fn update_node(
        &mut self,
        who: Caller,
        names: Vec<String>,
        state: Option<NodeStateRequest>,
        reason: Option<String>,
        features: Option<Vec<String>>,
        now: i64,
    ) -> Result<Response, RpcError> {
        if !who.admin {
            return err(SlurmError::AccessDenied);
        }
        if let Some(f) = &features {
            if let Some(bad) = f.iter().find(|x| {
                x.is_empty()
                    || !x
                        .chars()
                        .all(|c| c.is_ascii_alphanumeric() || "_-.:=".contains(c))
            }) {
                return err_detail(
                    SlurmError::InvalidFeature,
                    format!("invalid feature '{bad}'"),
                );
            }
        }
        for n in &names {
            if !self.node_index.contains_key(n) {
                return err_detail(SlurmError::InvalidNodeName, n.clone());
            }
        }
        if matches!(
            state,
            Some(NodeStateRequest::Drain) | Some(NodeStateRequest::Down)
        ) && reason.as_deref().is_none_or(|r| r.trim().is_empty())
        {
            return err_detail(
                SlurmError::InvalidNodeState,
                "a reason is required to DOWN or DRAIN a node",
            );
        }
        for n in names {
            let uid = who.uid;
            let reason = reason.clone();
            if let Some(f) = &features {
                let f = f.clone();
                if let Some(&i) = self.node_index.get(&n) {
                    self.nodes[i].features = f.clone();
                }
                self.set_admin(&n, |a| a.features = Some(f));
            }
            match state {
                Some(NodeStateRequest::Drain) => self.set_admin(&n, |a| {
                    a.drain = true;
                    a.reason = reason;
                    a.reason_time = Some(now);
                    a.reason_uid = Some(uid);
                }),
                Some(NodeStateRequest::Down) => {
                    self.set_admin(&n, |a| {
                        a.down = true;
                        a.reason = reason;
                        a.reason_time = Some(now);
                        a.reason_uid = Some(uid);
                    });
                    self.fail_node_jobs(&n, now);
                }
                Some(NodeStateRequest::Resume) | Some(NodeStateRequest::Idle) => {
                    self.set_admin(&n, |a| {
                        *a = NodeAdmin {
                            features: a.features.take(),
                            ..NodeAdmin::default()
                        }
                    })
                }
                Some(NodeStateRequest::Undrain) => self.set_admin(&n, |a| {
                    a.drain = false;
                    if !a.down {
                        a.reason = None;
                        a.reason_time = None;
                        a.reason_uid = None;
                    }
                }),
                None => {
                    if let Some(r) = reason {
                        self.set_admin(&n, |a| {
                            a.reason = Some(r);
                            a.reason_time = Some(now);
                            a.reason_uid = Some(uid);
                        })
                    }
                }
            }
        }
        Ok(Response::Ok)
    }

    // ------------------------------------------------------------------
    // Time-driven work

    pub(super) fn drain_for(&mut self, node: &str, reason: &str, now: i64) {
        self.set_admin(node, |a| {
            a.drain = true;
            a.reason = Some(reason.into());
            a.reason_time = Some(now);
            a.reason_uid = Some(0);
        });
    }
}
