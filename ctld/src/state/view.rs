//! What the scheduler plugins see: the cluster view (nodes, partitions,
//! running jobs, reservations, topology) and each pending job's view.

use super::*;

impl Controller {
    /// Licenses held by running (and still completing) jobs.
    pub(super) fn licenses_used(&self) -> HashMap<String, u32> {
        let mut used: HashMap<String, u32> = HashMap::new();
        if self.licenses.is_empty() {
            return used;
        }
        for j in self.p.jobs.values() {
            // Suspended jobs keep their licenses.
            if !Self::holds_devices(j) {
                continue;
            }
            let Some(l) = j.desc.licenses.as_deref() else {
                continue;
            };
            for (name, n) in slurm_common::licenses::parse(l).unwrap_or_default() {
                *used.entry(name).or_default() += n;
            }
        }
        used
    }

    /// The scheduler's view of nodes and partitions right now.
    pub(super) fn cluster_view(&self) -> ClusterView {
        self.cluster_view_with(true)
    }

    /// The view without what jobs hold (no running jobs, nothing in use):
    /// enough for "could it ever run" (`select::place` on an empty
    /// partition), which every submission asks, without a look at every job.
    pub(super) fn empty_view(&self) -> ClusterView {
        self.cluster_view_with(false)
    }

    fn cluster_view_with(&self, in_use: bool) -> ClusterView {
        let cr_cpu = self.conf.allocates_threads();
        let mut exclusive = vec![false; self.nodes.len()];
        let no_jobs = std::collections::BTreeMap::new();
        let jobs = if in_use { &self.p.jobs } else { &no_jobs };
        // `--exclusive=topo` jobs hold the rest of their leaves or blocks.
        let topo_held: HashMap<JobId, Vec<NodeAlloc>> = jobs
            .values()
            .filter(|j| j.state == JobState::Running || j.completing)
            .filter(|j| j.desc.exclusive_topo || self.topologies.exclusive.contains(&j.partition))
            .filter_map(|j| {
                let t = self
                    .topologies
                    .list
                    .get(self.topologies.of_partition(&j.partition))?;
                let extra = t.held_with(true, &self.allocs_of(j));
                (!extra.is_empty()).then_some((j.job_id, extra))
            })
            .collect();
        let mut gres_used = vec![GresCounts::default(); self.nodes.len()];
        // Cores of jobs suspended by preemption wait for them.
        let preempt_held = if in_use {
            self.system_held_cpus()
        } else {
            vec![0; self.nodes.len()]
        };
        for j in jobs.values() {
            if Self::holds_devices(j) && !j.alloc.gres.is_empty() {
                for (k, name) in j.alloc.nodes.iter().enumerate() {
                    let (Some(g), Some(&i)) = (j.alloc.gres.get(k), self.node_index.get(name))
                    else {
                        continue;
                    };
                    let c = self.gres_kinds.alloc_counts(g);
                    for (u, x) in gres_used[i].iter_mut().zip(c) {
                        *u = u.saturating_add(x);
                    }
                }
            }
            if (j.state == JobState::Running || j.completing)
                && (j.desc.exclusive || j.desc.exclusive_topo)
            {
                for name in &j.alloc.nodes {
                    if let Some(&i) = self.node_index.get(name) {
                        exclusive[i] = true;
                    }
                }
            }
            if let Some(extra) = topo_held.get(&j.job_id) {
                for a in extra {
                    exclusive[a.node] = true;
                }
            }
        }
        ClusterView {
            nodes: self
                .nodes
                .iter()
                .enumerate()
                .map(|(i, n)| NodeView {
                    name: n.name.clone(),
                    cpus: n.cpus,
                    mem: n.real_memory,
                    // Shared cores (OverSubscribe) count once per job: the
                    // sum may pass the node's count (free is then none).
                    alloc_cpus: if in_use {
                        self.cores_in_use.get(i).copied().unwrap_or(n.alloc_cpus) + preempt_held[i]
                    } else {
                        0
                    },
                    alloc_mem: if in_use { n.alloc_mem } else { 0 },
                    available: n.is_available() && self.registered[i],
                    weight: n.weight,
                    features: n.features.clone(),
                    exclusive_in_use: exclusive[i],
                    gres: self.gres_kinds.node_counts(&n.gres),
                    alloc_gres: gres_used[i],
                    // CR_Core (the default): whole cores; CR_CPU: threads.
                    threads_per_core: if cr_cpu { 1 } else { n.threads_per_core.max(1) },
                    sockets: n.sockets.max(1),
                })
                .collect(),
            partitions: self
                .partitions
                .iter()
                .map(|p| PartitionView {
                    name: p.name.clone(),
                    nodes: p
                        .nodes
                        .iter()
                        .filter_map(|n| self.node_index.get(n).copied())
                        .collect(),
                    // A draining partition still starts what it queued.
                    up: matches!(p.state, PartitionState::Up | PartitionState::Drain),
                    max_time: p.max_time,
                    max_nodes: p.max_nodes,
                    exclusive: p.oversubscribe.eq_ignore_ascii_case("EXCLUSIVE"),
                    priority_tier: p.priority_tier,
                    def_mem_per_cpu: p.def_mem_per_cpu,
                    topology: self.topologies.of_partition(&p.name),
                    exclusive_topo: self.topologies.exclusive.contains(&p.name),
                })
                .collect(),
            topologies: self.topologies.list.clone(),
            running: jobs
                .values()
                .filter(|j| j.state == JobState::Running || j.completing)
                .map(|j| RunningJob {
                    id: j.job_id,
                    // A job cleaning up frees its nodes any moment now.
                    end: if j.state == JobState::Running {
                        j.end_time
                    } else {
                        Some(self.last_update)
                    },
                    alloc: self
                        .allocs_of(j)
                        .into_iter()
                        .filter(|a| {
                            j.state == JobState::Running
                                || j.completing_nodes.contains(&self.nodes[a.node].name)
                        })
                        .chain(topo_held.get(&j.job_id).cloned().unwrap_or_default())
                        .collect(),
                    priority: j.priority,
                    partition: self
                        .partitions
                        .iter()
                        .position(|p| p.name == j.partition)
                        .unwrap_or(0),
                })
                .collect(),
        }
    }

    pub(super) fn job_view(&self, j: &JobRecord) -> Option<JobView> {
        self.job_view_with(j, true)
    }

    /// [`Controller::job_view`]; without `reservations`, the nodes other
    /// jobs' reservations hold are not kept from it (they will be free when
    /// the reservations end): for "could it ever run".
    pub(super) fn job_view_with(&self, j: &JobRecord, reservations: bool) -> Option<JobView> {
        let partition = self.partitions.iter().position(|p| p.name == j.partition)?;
        let idx = |names: &Vec<String>| {
            names
                .iter()
                .filter_map(|n| self.node_index.get(n).copied())
                .collect()
        };
        let (constraint_away, node_counts) = self.constraint_nodes(j, partition);
        Some(JobView {
            id: j.job_id,
            priority: j.priority,
            submit_time: j.submit_time,
            partition,
            min_nodes: j.min_nodes,
            max_nodes: j.max_nodes,
            // Overcommitted: placed as one task per node.
            num_tasks: if j.desc.overcommit {
                j.min_nodes.max(1)
            } else {
                j.num_tasks
            },
            cpus_per_task: j.desc.cpus_per_task.unwrap_or(1).max(1),
            ntasks_per_node: j.desc.ntasks_per_node.filter(|_| !j.desc.overcommit),
            mem_per_node: j.desc.mem_per_node,
            mem_per_cpu: j.desc.mem_per_cpu,
            req_nodes: idx(&j.desc.req_nodes),
            exc_nodes: {
                let mut x: Vec<usize> = idx(&j.desc.exc_nodes);
                if reservations || j.desc.reservation.is_some() {
                    x.extend(self.reserved_away(j));
                } else {
                    x.extend(self.external_away(j));
                }
                x.extend(constraint_away);
                x.extend(self.hardware_away(&j.desc));
                x.sort_unstable();
                x.dedup();
                x
            },
            exclusive: j.desc.exclusive,
            time_limit: super::schedule::limit_from(j, self.last_update),
            time_min: j.desc.time_min,
            begin_time: j.desc.begin_time,
            hold: j.held.map(|h| match h {
                HoldKind::User => Hold::User,
                HoldKind::Admin => Hold::Admin,
            }),
            switches: j.desc.switches.filter(|_| {
                let eligible = j.desc.begin_time.unwrap_or(0).max(j.submit_time);
                let wait = j.desc.wait4switch.map_or(self.max_switch_wait(), i64::from);
                self.last_update < eligible.saturating_add(wait)
            }),
            segment: j.desc.segment,
            exclusive_topo: j.desc.exclusive_topo,
            contiguous: j.desc.contiguous,
            ntasks_per_socket: j.desc.ntasks_per_socket,
            ntasks_per_core: j.desc.ntasks_per_core,
            min_cpus_per_node: j.desc.min_cpus.unwrap_or(0),
            node_counts,
            // Checked at submission; a request no node serves never fits.
            gres: self
                .job_gres(&j.desc, j.min_nodes, j.num_tasks)
                .unwrap_or_else(|_| vec![GresReq { mask: 0, count: 1 }]),
        })
    }

    /// `SchedulerParameters=max_switch_wait=` (seconds; default 300): the
    /// longest a job waits for its `--switches` count.
    pub(super) fn max_switch_wait(&self) -> i64 {
        self.conf
            .get("SchedulerParameters")
            .unwrap_or("")
            .split(',')
            .find_map(|o| o.trim().strip_prefix("max_switch_wait="))
            .and_then(|v| v.parse().ok())
            .unwrap_or(300)
    }

    /// What a job's `--constraint` means on its partition: the nodes it
    /// rules out (for `[a|b]`, the first alternative enough of the
    /// partition's nodes have) and, per count (`gpu*2`), the nodes with the
    /// feature and how many of them the job needs.
    pub(super) fn constraint_nodes(
        &self,
        j: &JobRecord,
        partition: usize,
    ) -> (Vec<usize>, Vec<(Vec<usize>, u32)>) {
        let Some(c) = j
            .desc
            .constraint
            .as_deref()
            .and_then(|c| slurm_common::constraint::Constraint::parse(c).ok())
        else {
            return (Vec::new(), Vec::new());
        };
        let mut nodes: Vec<usize> = self.partitions[partition]
            .nodes
            .iter()
            .filter_map(|n| self.node_index.get(n).copied())
            .collect();
        nodes.sort_unstable();
        nodes.dedup();
        let choice = (0..c.choices())
            .find(|&k| {
                nodes
                    .iter()
                    .filter(|&&i| c.node_ok(&self.nodes[i].features, k))
                    .count()
                    >= j.min_nodes.max(1) as usize
            })
            .unwrap_or(0);
        let counts = c
            .counts()
            .into_iter()
            .map(|(f, n)| {
                let set = nodes
                    .iter()
                    .copied()
                    .filter(|&i| self.nodes[i].features.iter().any(|x| x == f))
                    .collect();
                (set, n)
            })
            .collect();
        let away = nodes
            .into_iter()
            .filter(|&i| !c.node_ok(&self.nodes[i].features, choice))
            .collect();
        (away, counts)
    }

    /// Nodes with fewer sockets, cores per socket or threads per core, or
    /// less temporary disk (`--tmp`) or fewer CPUs (`--mincpus`), than the
    /// job asks for (none when it asks for none).
    pub(super) fn hardware_away(&self, d: &JobDesc) -> Vec<usize> {
        if d.sockets_per_node.is_none()
            && d.cores_per_socket.is_none()
            && d.threads_per_core.is_none()
            && d.tmp_disk.is_none()
            && d.min_cpus.is_none()
        {
            return Vec::new();
        }
        (0..self.nodes.len())
            .filter(|&i| {
                let n = &self.nodes[i];
                d.sockets_per_node.is_some_and(|s| n.sockets < s)
                    || d.cores_per_socket.is_some_and(|c| n.cores_per_socket < c)
                    || d.threads_per_core.is_some_and(|t| n.threads_per_core < t)
                    || d.tmp_disk.is_some_and(|t| n.tmp_disk < t)
                    || d.min_cpus.is_some_and(|c| n.cpus < c)
            })
            .collect()
    }

    /// Nodes a job may not use because of reservations: for a job in a
    /// reservation, every node outside it; for others, nodes of reservations
    /// that are active or would begin before the job could end.
    pub(super) fn reserved_away(&self, j: &JobRecord) -> Vec<usize> {
        let mut away = self.external_away(j);
        away.extend(self.reservation_away(j));
        away
    }

    /// External jobs only on external nodes and nodes whose daemon runs
    /// beside a kubelet, and the others never on external nodes.
    pub(super) fn external_away(&self, j: &JobRecord) -> Vec<usize> {
        #[cfg(debug_assertions)]
        if super::check_from_scratch(self.nodes.len(), self.p.jobs.len()) {
            let scan: Vec<usize> = (0..self.nodes.len())
                .filter(|&i| pods_kept_off(&self.nodes[i], j.desc.external))
                .collect();
            let kept = if j.desc.external {
                &self.no_pods_nodes
            } else {
                &self.external_nodes
            };
            assert_eq!(
                &scan, kept,
                "the external node lists kept by refresh are stale"
            );
        }
        if j.desc.external {
            self.no_pods_nodes.clone()
        } else {
            self.external_nodes.clone()
        }
    }

    /// Why `id`, which cannot run now, waits, when it is because other
    /// jobs' reservations hold the nodes it could run on (Slurm's
    /// "ReqNodeNotAvail, May be reserved for other job").
    pub(super) fn reserved_reason(&self, id: JobId, view: &ClusterView) -> Option<JobReason> {
        let j = self.p.jobs.get(&id)?;
        if self.p.reservations.is_empty() || j.desc.reservation.is_some() {
            return None;
        }
        let held = self.job_view_with(j, true)?;
        let free = self.job_view_with(j, false)?;
        (slurm_plugins::select::place(view, &held, true).is_err()
            && slurm_plugins::select::place(view, &free, true).is_ok())
        .then(|| JobReason::Other("ReqNodeNotAvail, May be reserved for other job".into()))
    }

    pub(super) fn reservation_away(&self, j: &JobRecord) -> Vec<usize> {
        let now = self.last_update;
        if let Some(r) = j
            .desc
            .reservation
            .as_ref()
            .and_then(|n| self.p.reservations.get(n))
        {
            return (0..self.nodes.len())
                .filter(|&i| !r.nodes.contains(&self.nodes[i].name))
                .collect();
        }
        let end = j
            .time_limit
            .map_or(i64::MAX, |m| now.saturating_add(m as i64 * 60));
        self.p
            .reservations
            .values()
            .filter(|r| r.end_time > now && r.start_time < end)
            .flat_map(|r| r.nodes.iter())
            .filter_map(|n| self.node_index.get(n).copied())
            .collect()
    }

    /// Whether a job holds its GRES and memory: running, suspended or
    /// still cleaning up.
    pub(super) fn holds_devices(j: &JobRecord) -> bool {
        j.state.is_active() || j.completing
    }

    pub(super) fn allocs_of(&self, j: &JobRecord) -> Vec<NodeAlloc> {
        j.alloc
            .nodes
            .iter()
            .enumerate()
            .filter_map(|(k, n)| {
                Some(NodeAlloc {
                    node: *self.node_index.get(n)?,
                    cpus: j.alloc.cpus.get(k).copied().unwrap_or(0),
                    mem: j.alloc.mem.get(k).copied().unwrap_or(0),
                    tasks: j.alloc.tasks.get(k).copied().unwrap_or(0),
                    exclusive: j.desc.exclusive || j.desc.exclusive_topo,
                    gres: j
                        .alloc
                        .gres
                        .get(k)
                        .map(|g| self.gres_kinds.alloc_counts(g))
                        .unwrap_or_default(),
                })
            })
            .collect()
    }

    // ------------------------------------------------------------------
    // Scheduling
}

/// Whether node `n` is kept from a job that is (`external`) or is not a
/// Kubernetes pod: external nodes take only pods, and pods go only to
/// external nodes and nodes whose daemon runs beside a kubelet.
pub(super) fn pods_kept_off(n: &NodeRecord, external: bool) -> bool {
    if external {
        !n.external && !n.kubelet
    } else {
        n.external
    }
}
