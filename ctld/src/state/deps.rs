//! Job dependencies (`--dependency`, `singleton`): where each clause of a
//! pending job stands against the jobs it names.

use super::*;

/// Where a job's dependencies stand.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum DepState {
    Satisfied,
    Waiting,
    Never,
}

/// Most jobs one `--dependency` may name (each is evaluated every pass).
pub const MAX_DEPENDENCIES: usize = 1000;

impl Controller {
    /// Where a job's dependencies stand.
    /// The job `job_id` names in a dependency: the job, or every task of
    /// the array with that id. Array tasks have consecutive ids from the
    /// array's, so this reads only them (never the whole job table).
    pub(super) fn dep_targets(&self, job_id: JobId) -> impl Iterator<Item = &Arc<JobRecord>> {
        self.p
            .jobs
            .range(job_id..)
            .map(|(_, o)| o)
            .take_while(move |o| {
                o.job_id == job_id || o.array.as_ref().is_some_and(|a| a.job_id == job_id)
            })
    }

    /// `singleton`: for each (user, name), the lowest id among jobs not yet
    /// gone; built once per pass, at the first job that asks.
    pub(super) fn singleton_index(&self) -> HashMap<(u32, &str), JobId> {
        let mut first: HashMap<(u32, &str), JobId> = HashMap::new();
        for o in self.p.jobs.values() {
            if !o.state.is_finished() || o.completing {
                first
                    .entry((o.user_id, o.name.as_str()))
                    .or_insert(o.job_id);
            }
        }
        first
    }

    pub(super) fn dependency_state<'a>(
        &'a self,
        j: &JobRecord,
        singles: &std::cell::OnceCell<HashMap<(u32, &'a str), JobId>>,
        now: i64,
    ) -> DepState {
        let Some(spec) = &j.dependency else {
            return DepState::Satisfied;
        };
        let Ok(dep) = jobspec::parse_dependency(spec) else {
            return DepState::Never;
        };
        let states: Vec<DepState> = dep
            .clauses
            .iter()
            .map(|c| self.clause_state(j, c, singles, now))
            .collect();
        if dep.any {
            if states.contains(&DepState::Satisfied) {
                DepState::Satisfied
            } else if states.iter().all(|s| *s == DepState::Never) {
                DepState::Never
            } else {
                DepState::Waiting
            }
        } else if states.contains(&DepState::Never) {
            DepState::Never
        } else if states.iter().all(|s| *s == DepState::Satisfied) {
            DepState::Satisfied
        } else {
            DepState::Waiting
        }
    }

    pub(super) fn clause_state<'a>(
        &'a self,
        me: &JobRecord,
        c: &jobspec::DepClause,
        singles: &std::cell::OnceCell<HashMap<(u32, &'a str), JobId>>,
        now: i64,
    ) -> DepState {
        use jobspec::{DepClause, DepKind};
        let (kind, job_id, task) = match c {
            DepClause::Singleton => {
                let first = singles.get_or_init(|| self.singleton_index());
                let earlier_active = first
                    .get(&(me.user_id, me.name.as_str()))
                    .is_some_and(|id| *id < me.job_id);
                return if earlier_active {
                    DepState::Waiting
                } else {
                    DepState::Satisfied
                };
            }
            DepClause::Job { kind, job_id, task } => (kind, *job_id, *task),
        };
        // The jobs a clause names: one job, one array task, or a whole array.
        let targets: Vec<&Arc<JobRecord>> = self
            .dep_targets(job_id)
            .filter(|o| match (&o.array, task, kind) {
                (Some(a), _, DepKind::AfterCorr) => {
                    a.job_id == job_id && Some(a.task_id) == me.array.as_ref().map(|m| m.task_id)
                }
                (Some(a), Some(t), _) => a.job_id == job_id && a.task_id == t,
                (Some(a), None, _) => a.job_id == job_id,
                (None, None, _) => o.job_id == job_id,
                (None, Some(_), _) => false,
            })
            .collect();
        // Purged jobs count as done.
        let each = |o: &JobRecord| -> DepState {
            let ended = o.state.is_finished() && !o.completing;
            match kind {
                DepKind::After(mins) => match o.start_time {
                    _ if o.state == JobState::Cancelled => DepState::Satisfied,
                    Some(s) if o.state != JobState::Pending && now >= s + *mins as i64 * 60 => {
                        DepState::Satisfied
                    }
                    _ => DepState::Waiting,
                },
                DepKind::AfterAny => {
                    if ended {
                        DepState::Satisfied
                    } else {
                        DepState::Waiting
                    }
                }
                DepKind::AfterOk | DepKind::AfterCorr => match (ended, o.state) {
                    (true, JobState::Completed) => DepState::Satisfied,
                    (true, _) => DepState::Never,
                    _ => DepState::Waiting,
                },
                DepKind::AfterNotOk => match (ended, o.state) {
                    (true, JobState::Completed) => DepState::Never,
                    (true, _) => DepState::Satisfied,
                    _ => DepState::Waiting,
                },
            }
        };
        let st: Vec<DepState> = targets.iter().map(|o| each(o)).collect();
        if st.contains(&DepState::Never) {
            DepState::Never
        } else if st.iter().all(|s| *s == DepState::Satisfied) {
            DepState::Satisfied
        } else {
            DepState::Waiting
        }
    }
}
