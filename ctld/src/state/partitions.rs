//! Partitions: those of slurm.conf, and those created, updated or deleted
//! by `scontrol` (journaled, laid over slurm.conf's).

use super::*;

/// The partitions of a configuration (totals filled by `refresh`).
pub(super) fn partition_records(conf: &SlurmConf) -> Vec<PartitionRecord> {
    conf.partitions
        .iter()
        .map(|p| PartitionRecord {
            name: p.name.clone(),
            nodes_expr: p.nodes_expr.clone(),
            nodes: p.nodes.clone(),
            default: p.default,
            max_time: p.max_time,
            default_time: p.default_time,
            state: partition_state(&p.state),
            priority_job_factor: p.priority_job_factor,
            priority_tier: p.priority_tier,
            oversubscribe: p.oversubscribe.clone(),
            max_nodes: p.max_nodes,
            min_nodes: p.min_nodes,
            hidden: p.hidden,
            allow_groups: p.allow_groups.clone(),
            allow_accounts: p.allow_accounts.clone(),
            allow_qos: p.allow_qos.clone(),
            def_mem_per_cpu: p.def_mem_per_cpu.or(conf.def_mem_per_cpu),
            max_mem_per_node: p.max_mem_per_node.or(conf.max_mem_per_node),
            total_cpus: 0,
            total_mem: 0,
        })
        .collect()
}

pub(super) fn partition_state(s: &PartitionStateConf) -> PartitionState {
    match s {
        PartitionStateConf::Up => PartitionState::Up,
        PartitionStateConf::Down => PartitionState::Down,
        PartitionStateConf::Drain => PartitionState::Drain,
        PartitionStateConf::Inactive => PartitionState::Inactive,
    }
}

impl Controller {
    /// Lay the operator's partition changes over slurm.conf's values, and
    /// add the partitions made at run time that slurm.conf does not define
    /// (with their nodes' membership).
    pub(super) fn apply_part_admin(&mut self) {
        let created: Vec<(String, String, Option<bool>)> = self
            .p
            .partitions
            .iter()
            .filter_map(|(n, a)| a.created.clone().map(|nodes| (n.clone(), nodes, a.default)))
            .collect();
        for (name, expr, default) in created {
            if self.partitions.iter().any(|p| p.name == name) {
                continue;
            }
            // (Checked at creation; a node deleted since is left out.)
            let nodes: Vec<String> = slurm_common::hostlist::expand(&expr)
                .unwrap_or_default()
                .into_iter()
                .filter(|n| self.node_index.contains_key(n))
                .collect();
            for n in &nodes {
                if let Some(&i) = self.node_index.get(n) {
                    if !self.nodes[i].partitions.contains(&name) {
                        self.nodes[i].partitions.push(name.clone());
                    }
                }
            }
            if default == Some(true) {
                for p in &mut self.partitions {
                    p.default = false;
                }
            }
            self.partitions.push(PartitionRecord {
                name,
                nodes_expr: expr,
                nodes,
                default: default == Some(true),
                max_time: None,
                default_time: None,
                state: PartitionState::Up,
                priority_job_factor: 1,
                priority_tier: 1,
                oversubscribe: "NO".into(),
                max_nodes: None,
                min_nodes: 0,
                hidden: false,
                allow_groups: None,
                allow_accounts: None,
                allow_qos: None,
                def_mem_per_cpu: self.conf.def_mem_per_cpu,
                max_mem_per_node: self.conf.max_mem_per_node,
                total_cpus: 0,
                total_mem: 0,
            });
        }
        for p in &mut self.partitions {
            if let Some(a) = self.p.partitions.get(&p.name) {
                if let Some(s) = a.state {
                    p.state = s;
                }
                if let Some(t) = a.max_time {
                    p.max_time = t;
                }
                if let Some(t) = a.default_time {
                    p.default_time = t;
                }
            }
        }
    }

    /// `scontrol update PartitionName=NAME State= MaxTime= DefaultTime=`:
    /// operators only; kept over restarts and reconfigures.
    pub(super) fn update_partition(
        &mut self,
        who: Caller,
        u: slurm_proto::PartitionUpdate,
        now: i64,
    ) -> Result<Response, RpcError> {
        if !who.admin {
            return err(SlurmError::AccessDenied);
        }
        if !self.partitions.iter().any(|p| p.name == u.name) {
            return err_detail(SlurmError::InvalidPartitionName, u.name);
        }
        if u.state.is_none() && u.max_time.is_none() && u.default_time.is_none() {
            return err_detail(SlurmError::InvalidRequest, "nothing to change");
        }
        let mut a = self.p.partitions.get(&u.name).cloned().unwrap_or_default();
        a.state = u.state.or(a.state);
        a.max_time = u.max_time.or(a.max_time);
        a.default_time = u.default_time.or(a.default_time);
        self.p.partitions.insert(u.name.clone(), a.clone());
        self.entries.push(Entry::Partition(u.name, Some(a)));
        self.apply_part_admin();
        self.dirty = true;
        self.sched_needed = true;
        self.last_update = self.last_update.max(now);
        Ok(Response::Ok)
    }

    pub(super) fn create_partition(
        &mut self,
        who: Caller,
        u: slurm_proto::PartitionUpdate,
        now: i64,
    ) -> Result<Response, RpcError> {
        if !who.admin {
            return err(SlurmError::AccessDenied);
        }
        let name = u.name.trim().to_string();
        if name.is_empty()
            || name.len() > 64
            || !name
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || "-_.".contains(c))
        {
            return err_detail(
                SlurmError::InvalidPartitionName,
                format!("{name:?}: letters, digits, '-', '_' and '.' only"),
            );
        }
        if self.partitions.iter().any(|p| p.name == name) {
            return err_detail(
                SlurmError::InvalidPartitionName,
                format!("partition {name} already exists"),
            );
        }
        let expr = u.nodes.clone().unwrap_or_default();
        let nodes = if expr.is_empty() {
            Vec::new()
        } else {
            match slurm_common::hostlist::expand(&expr) {
                Ok(n) => n,
                Err(e) => return err_detail(SlurmError::InvalidNodeName, format!("{expr}: {e}")),
            }
        };
        if let Some(n) = nodes.iter().find(|n| !self.node_index.contains_key(*n)) {
            return err_detail(SlurmError::InvalidNodeName, n.clone());
        }
        let a = crate::journal::PartAdmin {
            state: u.state,
            max_time: u.max_time,
            default_time: u.default_time,
            created: Some(expr),
            default: u.default,
        };
        self.p.partitions.insert(name.clone(), a.clone());
        self.entries.push(Entry::Partition(name.clone(), Some(a)));
        self.apply_part_admin();
        tracing::info!(uid = who.uid, "partition {name} created");
        self.dirty = true;
        self.sched_needed = true;
        self.last_update = self.last_update.max(now);
        self.refresh();
        Ok(Response::Ok)
    }

    /// `scontrol delete PartitionName=NAME`: one made at run time, once no
    /// job waits or runs in it (operators only).
    pub(super) fn delete_partition(
        &mut self,
        who: Caller,
        name: String,
        now: i64,
    ) -> Result<Response, RpcError> {
        if !who.admin {
            return err(SlurmError::AccessDenied);
        }
        if !self.partitions.iter().any(|p| p.name == name) {
            return err_detail(SlurmError::InvalidPartitionName, name);
        }
        let made_here = self
            .p
            .partitions
            .get(&name)
            .is_some_and(|a| a.created.is_some())
            && self.conf.partition(&name).is_none();
        if !made_here {
            return err_detail(
                SlurmError::InvalidRequest,
                format!("partition {name} is defined in slurm.conf: remove it there, then scontrol reconfigure"),
            );
        }
        let busy = self
            .p
            .jobs
            .values()
            .filter(|j| !j.state.is_finished() || j.completing)
            .any(|j| j.partition.split(',').any(|p| p == name));
        if busy {
            return err_detail(
                SlurmError::InvalidRequest,
                format!("jobs are pending or running in partition {name}: cancel them or move them first"),
            );
        }
        self.partitions.retain(|p| p.name != name);
        for n in &mut self.nodes {
            n.partitions.retain(|p| *p != name);
        }
        self.p.partitions.remove(&name);
        self.entries.push(Entry::Partition(name.clone(), None));
        tracing::info!(uid = who.uid, "partition {name} deleted");
        self.dirty = true;
        self.sched_needed = true;
        self.last_update = self.last_update.max(now);
        self.refresh();
        Ok(Response::Ok)
    }
}
