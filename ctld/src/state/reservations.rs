//! Advance reservations: created, updated, deleted and rolled on, and
//! which nodes a reservation keeps from other jobs.

use super::*;

impl Controller {
    pub(super) fn reservation_nodes_free(
        &self,
        nodes: &[String],
        start: i64,
        ignore_jobs: bool,
    ) -> bool {
        ignore_jobs
            || !self.p.jobs.values().any(|j| {
                Self::holds_devices(j)
                    // A suspended job's end is unknown until it resumes.
                    && (j.state == JobState::Suspended || j.end_time.is_none_or(|e| e > start))
                    && j.alloc.nodes.iter().any(|n| nodes.contains(n))
            })
    }

    pub(super) fn reservation_from(
        &self,
        who: Caller,
        spec: &ReservationSpec,
        base: Option<&ReservationRecord>,
        now: i64,
    ) -> Result<ReservationRecord, RpcError> {
        let bad = |d: String| {
            Err(RpcError {
                error: SlurmError::ReservationInvalid,
                detail: Some(d),
            })
        };
        let mut r = base.cloned().unwrap_or_default();
        if base.is_none() {
            r.name = match &spec.name {
                Some(n) if !n.is_empty() => n.clone(),
                _ => {
                    let user = self.identity(who).user_or(who.uid);
                    let mut k = 1;
                    while self.p.reservations.contains_key(&format!("{user}_{k}")) {
                        k += 1;
                    }
                    format!("{user}_{k}")
                }
            };
            r.start_time = now;
        }
        if let Some(t) = spec.start_time {
            r.start_time = t.max(if base.is_none() { now } else { i64::MIN });
        }
        match (spec.end_time, spec.duration) {
            (Some(e), _) => r.end_time = e,
            (None, Some(d)) => r.end_time = r.start_time + d as i64 * 60,
            (None, None) if base.is_none() => {
                return bad("a Duration or EndTime is required".into())
            }
            _ => {}
        }
        if r.end_time <= r.start_time {
            return bad("EndTime must follow StartTime".into());
        }
        if let Some(f) = &spec.flags {
            const KNOWN: &[&str] = &[
                "MAINT",
                "IGNORE_JOBS",
                "FLEX",
                "DAILY",
                "WEEKLY",
                "WEEKDAY",
                "WEEKEND",
                "OVERLAP",
                "PART_NODES",
                "STATIC_ALLOC",
                "ANY_NODES",
                "NO_HOLD_JOBS_AFTER",
                "PURGE_COMP",
                "FIRST_CORES",
                "TIME_FLOAT",
                "REPLACE",
                "REPLACE_DOWN",
                "SPEC_NODES",
                "NO_HOLD_JOBS_AFTER_END",
                "MAGNETIC",
                "USER_DELETE",
                "HOURLY",
            ];
            for x in f {
                if !KNOWN.contains(&x.as_str()) {
                    return bad(format!("unknown reservation flag {x}"));
                }
            }
            r.flags = f.clone();
        }
        if let Some(u) = &spec.users {
            r.users = u.clone();
        }
        if let Some(a) = &spec.accounts {
            r.accounts = a.clone();
        }
        if spec.partition.is_some() {
            r.partition = spec.partition.clone();
        }
        if base.is_none() && r.users.is_empty() && r.accounts.is_empty() {
            return bad("Users or Accounts must be given".into());
        }
        let ignore = r.has_flag("IGNORE_JOBS") || r.has_flag("MAINT");
        // `Nodes=ALL`: every node of the cluster (its external ones aside).
        let all: Vec<String>;
        let nodes = match spec.nodes.as_deref() {
            Some([x]) if x.eq_ignore_ascii_case("ALL") => {
                all = self
                    .nodes
                    .iter()
                    .filter(|n| !n.external)
                    .map(|n| n.name.clone())
                    .collect();
                Some(&all)
            }
            _ => spec.nodes.as_ref(),
        };
        if let Some(n) = nodes {
            for x in n {
                if !self.node_index.contains_key(x) {
                    return Err(RpcError {
                        error: SlurmError::InvalidNodeName,
                        detail: Some(x.clone()),
                    });
                }
            }
            r.nodes = n.clone();
        } else if let Some(cnt) = spec.node_cnt {
            let pool: Vec<String> = self
                .nodes
                .iter()
                .filter(|n| {
                    r.partition
                        .as_ref()
                        .is_none_or(|p| n.partitions.contains(p))
                })
                .filter(|n| {
                    !self.p.reservations.values().any(|o| {
                        o.name != r.name
                            && o.nodes.contains(&n.name)
                            && o.start_time < r.end_time
                            && r.start_time < o.end_time
                    })
                })
                .filter(|n| {
                    self.reservation_nodes_free(std::slice::from_ref(&n.name), r.start_time, ignore)
                })
                .map(|n| n.name.clone())
                .take(cnt as usize)
                .collect();
            if pool.len() < cnt as usize {
                return Err(RpcError {
                    error: SlurmError::ReservationBusy,
                    detail: Some(format!("only {} nodes free", pool.len())),
                });
            }
            r.nodes = pool;
        } else if base.is_none() {
            return bad("Nodes or NodeCnt must be given".into());
        }
        if !self.reservation_nodes_free(&r.nodes, r.start_time, ignore) {
            return Err(SlurmError::ReservationBusy.into());
        }
        if !r.has_flag("OVERLAP") {
            for o in self.p.reservations.values().filter(|o| o.name != r.name) {
                if o.start_time < r.end_time
                    && r.start_time < o.end_time
                    && o.nodes.iter().any(|n| r.nodes.contains(n))
                {
                    return Err(RpcError {
                        error: SlurmError::ReservationBusy,
                        detail: Some(format!("overlaps reservation {}", o.name)),
                    });
                }
            }
        }
        r.core_cnt = r
            .nodes
            .iter()
            .filter_map(|n| self.node_index.get(n))
            .map(|&i| self.nodes[i].cpus)
            .sum();
        Ok(r)
    }

    pub(super) fn create_reservation(
        &mut self,
        who: Caller,
        spec: ReservationSpec,
        now: i64,
    ) -> Result<Response, RpcError> {
        if !who.operator {
            return err(SlurmError::AccessDenied);
        }
        if spec
            .name
            .as_ref()
            .is_some_and(|n| self.p.reservations.contains_key(n))
        {
            return err_detail(
                SlurmError::ReservationInvalid,
                "a reservation of that name exists",
            );
        }
        let mut r = self.reservation_from(who, &spec, None, now)?;
        let name = r.name.clone();
        self.acct_resv(None, Some(&mut r), now);
        self.entries.push(Entry::Reservation(r.clone()));
        self.p.reservations.insert(name.clone(), r);
        self.dirty = true;
        self.sched_needed = true;
        self.refresh();
        trace_reservation("created", &name);
        Ok(Response::ReservationCreated { name })
    }

    pub(super) fn update_reservation(
        &mut self,
        who: Caller,
        spec: ReservationSpec,
        now: i64,
    ) -> Result<Response, RpcError> {
        if !who.operator {
            return err(SlurmError::AccessDenied);
        }
        let Some(base) = spec
            .name
            .as_ref()
            .and_then(|n| self.p.reservations.get(n))
            .cloned()
        else {
            return err(SlurmError::ReservationInvalid);
        };
        let mut r = self.reservation_from(who, &spec, Some(&base), now)?;
        trace_reservation("updated", &r.name);
        self.acct_resv(Some(&base), Some(&mut r), now);
        self.entries.push(Entry::Reservation(r.clone()));
        self.p.reservations.insert(r.name.clone(), r);
        self.dirty = true;
        self.sched_needed = true;
        self.refresh();
        Ok(Response::Ok)
    }

    pub(super) fn delete_reservation(
        &mut self,
        who: Caller,
        name: &str,
        now: i64,
    ) -> Result<Response, RpcError> {
        if !who.operator {
            return err(SlurmError::AccessDenied);
        }
        let Some(gone) = self.p.reservations.remove(name) else {
            return err(SlurmError::ReservationInvalid);
        };
        self.acct_resv(Some(&gone), None, now);
        trace_reservation("deleted", name);
        self.entries
            .push(Entry::RemoveReservation(name.to_string()));
        self.dirty = true;
        self.sched_needed = true;
        self.refresh();
        Ok(Response::Ok)
    }

    /// Repeat DAILY/WEEKLY reservations past their end; drop ended ones.
    pub(super) fn roll_reservations(&mut self, now: i64) {
        let ended: Vec<ReservationRecord> = self
            .p
            .reservations
            .values()
            .filter(|r| r.end_time <= now)
            .cloned()
            .collect();
        for mut r in ended {
            let period = if r.has_flag("DAILY") {
                86400
            } else if r.has_flag("WEEKLY") {
                7 * 86400
            } else if r.has_flag("HOURLY") {
                3600
            } else {
                0
            };
            if period > 0 {
                while r.end_time <= now {
                    r.start_time += period;
                    r.end_time += period;
                }
                // The period that ended keeps its record; the next has
                // one of its own.
                self.acct_resv(None, Some(&mut r), now);
                self.entries.push(Entry::Reservation(r.clone()));
                self.p.reservations.insert(r.name.clone(), r);
            } else {
                self.p.reservations.remove(&r.name);
                self.entries.push(Entry::RemoveReservation(r.name.clone()));
            }
            self.dirty = true;
            self.sched_needed = true;
        }
    }

    // ------------------------------------------------------------------
    // Priority (multifactor)
}

/// `DebugFlags=Reservation`: each change of a reservation, in the log.
fn trace_reservation(what: &str, name: &str) {
    if slurm_common::debugflags::on(slurm_common::debugflags::RESERVATION) {
        tracing::info!("Reservation: {name} {what}");
    }
}
