//! Job dependencies (`--dependency`, `singleton`): where each clause of a
//! pending job stands against the jobs it names.

use super::*;

pub(super) use slurm_plugins::deps::DepState;
use slurm_plugins::deps::{Asking, Outcome, Target};

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
        let earlier_namesake = dep.clauses.contains(&jobspec::DepClause::Singleton) && {
            let first = singles.get_or_init(|| self.singleton_index());
            first
                .get(&(j.user_id, j.name.as_str()))
                .is_some_and(|id| *id < j.job_id)
        };
        let me = Asking {
            id: j.job_id,
            task: j.array.as_ref().map(|a| a.task_id),
            earlier_namesake,
        };
        slurm_plugins::deps::state(&me, &dep, |id| self.dep_targets(id).map(|o| target(o)), now)
    }
}

/// A job as a dependency on it sees it: ended only once done completing.
fn target(o: &JobRecord) -> Target {
    let outcome = if o.state.is_finished() && !o.completing {
        match o.state {
            JobState::Completed => Outcome::Completed,
            JobState::Cancelled => Outcome::Cancelled,
            _ => Outcome::Failed,
        }
    } else if o.state == JobState::Pending {
        Outcome::Pending
    } else {
        Outcome::Started
    };
    Target {
        id: o.job_id,
        array: o.array.as_ref().map(|a| (a.job_id, a.task_id)),
        outcome,
        start_time: o.start_time,
    }
}
