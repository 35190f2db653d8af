//! Job dependencies (`--dependency`): where a pending job's conditions
//! stand against the jobs they name. Pure: the caller says what it knows of
//! those jobs ([`Target`]) and what time it is; the controller's pass and
//! `slurmsim` ask the same questions of it.
//!
//! Slurm's rules: `after[:+min]` holds once a target started (plus the
//! minutes) or was cancelled; `afterany` once it ended; `afterok` and
//! `aftercorr` once it completed (any other end makes them impossible);
//! `afternotok` once it ended otherwise (completing makes it impossible);
//! `singleton` while no earlier job of the same user and name is left. A
//! clause naming an array holds for all of its tasks; clauses joined by `,`
//! must all hold, by `?` any one. A purged target counts as done.

/// One dependency condition.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DepKind {
    /// Started (or was cancelled), plus `+minutes` after the start.
    After(u32),
    AfterAny,
    AfterOk,
    AfterNotOk,
    /// Array task with the same index completed successfully.
    AfterCorr,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DepClause {
    Job {
        kind: DepKind,
        job_id: u32,
        task: Option<u32>,
    },
    Singleton,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Dependency {
    pub clauses: Vec<DepClause>,
    /// `?`-separated: any clause suffices; `,`: all must hold.
    pub any: bool,
}

/// Where a job's dependencies stand.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DepState {
    Satisfied,
    Waiting,
    /// Can never hold (`DependencyNeverSatisfied`).
    Never,
}

/// How a named job stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    /// Not started.
    Pending,
    /// Started, not yet ended (running, suspended, or ending).
    Started,
    /// Ended: completed with exit 0.
    Completed,
    /// Ended: cancelled.
    Cancelled,
    /// Ended any other way (failed, timed out, node failure...).
    Failed,
}

/// A job a clause may name.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Target {
    pub id: u32,
    /// The array it is a task of: (array id, task index).
    pub array: Option<(u32, u32)>,
    pub outcome: Outcome,
    pub start_time: Option<i64>,
}

/// The job asking.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Asking {
    pub id: u32,
    /// Its own array task index (for `aftercorr`).
    pub task: Option<u32>,
    /// An earlier job of the same user and name is not yet gone (for
    /// `singleton`).
    pub earlier_namesake: bool,
}

/// Where `dep` stands for `me` at `now`; `targets(id)` gives the jobs with
/// that id or in the array with that id (purged ones are simply absent).
pub fn state<I>(me: &Asking, dep: &Dependency, targets: impl Fn(u32) -> I, now: i64) -> DepState
where
    I: Iterator<Item = Target>,
{
    let states: Vec<DepState> = dep
        .clauses
        .iter()
        .map(|c| clause(me, c, &targets, now))
        .collect();
    if dep.any {
        if states.contains(&DepState::Satisfied) {
            DepState::Satisfied
        } else if !states.is_empty() && states.iter().all(|s| *s == DepState::Never) {
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

fn clause<I>(me: &Asking, c: &DepClause, targets: &impl Fn(u32) -> I, now: i64) -> DepState
where
    I: Iterator<Item = Target>,
{
    let (kind, job_id, task) = match c {
        DepClause::Singleton => {
            return if me.earlier_namesake {
                DepState::Waiting
            } else {
                DepState::Satisfied
            };
        }
        DepClause::Job { kind, job_id, task } => (kind, *job_id, *task),
    };
    let named = targets(job_id).filter(|o| match (o.array, task, kind) {
        (Some((a, t)), _, DepKind::AfterCorr) => a == job_id && Some(t) == me.task,
        (Some((a, t)), Some(want), _) => a == job_id && t == want,
        (Some((a, _)), None, _) => a == job_id,
        (None, None, _) => o.id == job_id,
        (None, Some(_), _) => false,
    });
    let mut all = DepState::Satisfied;
    for o in named {
        let s = one(kind, &o, now);
        if s == DepState::Never {
            return DepState::Never;
        }
        if s == DepState::Waiting {
            all = DepState::Waiting;
        }
    }
    all
}

fn one(kind: &DepKind, o: &Target, now: i64) -> DepState {
    let ended = matches!(
        o.outcome,
        Outcome::Completed | Outcome::Cancelled | Outcome::Failed
    );
    match kind {
        DepKind::After(mins) => match o.start_time {
            _ if o.outcome == Outcome::Cancelled => DepState::Satisfied,
            Some(s) if o.outcome != Outcome::Pending && now >= s + i64::from(*mins) * 60 => {
                DepState::Satisfied
            }
            _ => DepState::Waiting,
        },
        DepKind::AfterAny if ended => DepState::Satisfied,
        DepKind::AfterAny => DepState::Waiting,
        DepKind::AfterOk | DepKind::AfterCorr => match o.outcome {
            Outcome::Completed => DepState::Satisfied,
            Outcome::Cancelled | Outcome::Failed => DepState::Never,
            _ => DepState::Waiting,
        },
        DepKind::AfterNotOk => match o.outcome {
            Outcome::Completed => DepState::Never,
            Outcome::Cancelled | Outcome::Failed => DepState::Satisfied,
            _ => DepState::Waiting,
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t(id: u32, outcome: Outcome, start: Option<i64>) -> Target {
        Target {
            id,
            array: None,
            outcome,
            start_time: start,
        }
    }

    fn job(kind: DepKind, job_id: u32) -> DepClause {
        DepClause::Job {
            kind,
            job_id,
            task: None,
        }
    }

    fn ask(all: &[Target], dep: Dependency, now: i64) -> DepState {
        let me = Asking {
            id: 100,
            task: Some(1),
            earlier_namesake: false,
        };
        state(
            &me,
            &dep,
            |id| {
                all.iter()
                    .filter(move |o| o.id == id || o.array.is_some_and(|a| a.0 == id))
                    .copied()
            },
            now,
        )
    }

    fn dep(clauses: Vec<DepClause>, any: bool) -> Dependency {
        Dependency { clauses, any }
    }

    #[test]
    fn each_kind_against_each_outcome() {
        use DepState::*;
        use Outcome::*;
        let cases = [
            (DepKind::AfterOk, Completed, Satisfied),
            (DepKind::AfterOk, Failed, Never),
            (DepKind::AfterOk, Cancelled, Never),
            (DepKind::AfterOk, Started, Waiting),
            (DepKind::AfterNotOk, Completed, Never),
            (DepKind::AfterNotOk, Failed, Satisfied),
            (DepKind::AfterNotOk, Pending, Waiting),
            (DepKind::AfterAny, Failed, Satisfied),
            (DepKind::AfterAny, Started, Waiting),
            (DepKind::After(0), Started, Satisfied),
            (DepKind::After(0), Pending, Waiting),
            (DepKind::After(0), Cancelled, Satisfied),
            (DepKind::After(2), Started, Waiting),
        ];
        for (kind, outcome, want) in cases {
            let start = (outcome != Pending).then_some(1000);
            let got = ask(
                &[t(5, outcome, start)],
                dep(vec![job(kind.clone(), 5)], false),
                1060,
            );
            assert_eq!(got, want, "{kind:?} against {outcome:?}");
        }
        // after:5+2 holds two minutes after the start.
        let got = ask(
            &[t(5, Started, Some(1000))],
            dep(vec![job(DepKind::After(2), 5)], false),
            1120,
        );
        assert_eq!(got, Satisfied);
        // A purged job counts as done.
        assert_eq!(
            ask(&[], dep(vec![job(DepKind::AfterOk, 5)], false), 0),
            Satisfied
        );
    }

    #[test]
    fn arrays_all_tasks_one_task_and_corresponding_tasks() {
        let task = |id, k, o| Target {
            id,
            array: Some((10, k)),
            outcome: o,
            start_time: Some(0),
        };
        let all = [
            task(10, 0, Outcome::Completed),
            task(11, 1, Outcome::Started),
            task(12, 2, Outcome::Failed),
        ];
        // The whole array: one failed task makes afterok impossible.
        assert_eq!(
            ask(&all, dep(vec![job(DepKind::AfterOk, 10)], false), 0),
            DepState::Never
        );
        // One task by index.
        let one_task = DepClause::Job {
            kind: DepKind::AfterOk,
            job_id: 10,
            task: Some(0),
        };
        assert_eq!(
            ask(&all, dep(vec![one_task], false), 0),
            DepState::Satisfied
        );
        // aftercorr: my index is 1, task 1 still runs.
        assert_eq!(
            ask(&all, dep(vec![job(DepKind::AfterCorr, 10)], false), 0),
            DepState::Waiting
        );
    }

    #[test]
    fn all_or_any_and_singleton() {
        let all = [
            t(1, Outcome::Completed, Some(0)),
            t(2, Outcome::Failed, Some(0)),
        ];
        let both = vec![job(DepKind::AfterOk, 1), job(DepKind::AfterOk, 2)];
        assert_eq!(ask(&all, dep(both.clone(), false), 0), DepState::Never);
        assert_eq!(ask(&all, dep(both, true), 0), DepState::Satisfied);
        let neither = vec![job(DepKind::AfterNotOk, 1), job(DepKind::AfterOk, 2)];
        assert_eq!(ask(&all, dep(neither, true), 0), DepState::Never);
        let me = Asking {
            id: 9,
            task: None,
            earlier_namesake: true,
        };
        let single = dep(vec![DepClause::Singleton], false);
        let none = |_| std::iter::empty();
        assert_eq!(state(&me, &single, none, 0), DepState::Waiting);
        let alone = Asking {
            earlier_namesake: false,
            ..me
        };
        assert_eq!(state(&alone, &single, none, 0), DepState::Satisfied);
    }

    mod props {
        use super::*;
        use proptest::prelude::*;

        /// How a named job goes, one stage per step: pending, started,
        /// then ended some way; or cancelled before it started.
        fn life() -> impl Strategy<Value = Vec<Outcome>> {
            prop_oneof![
                Just(vec![Outcome::Pending, Outcome::Cancelled]),
                prop_oneof![
                    Just(Outcome::Completed),
                    Just(Outcome::Cancelled),
                    Just(Outcome::Failed)
                ]
                .prop_map(|end| vec![Outcome::Pending, Outcome::Started, end]),
            ]
        }

        fn kind() -> impl Strategy<Value = DepKind> {
            prop_oneof![
                (0u32..3).prop_map(DepKind::After),
                Just(DepKind::AfterAny),
                Just(DepKind::AfterOk),
                Just(DepKind::AfterNotOk),
            ]
        }

        proptest! {
            /// As the jobs a dependency names go through their lives, its
            /// verdict only ever settles: waiting, then satisfied or never,
            /// and never changes once settled; when every named job has
            /// ended it is settled (minutes after a start aside).
            #[test]
            fn a_verdict_settles_once_and_for_all(
                lives in proptest::collection::vec(life(), 2),
                clauses in proptest::collection::vec((kind(), 0u32..2), 1..4),
                any in any::<bool>(),
            ) {
                let dep = Dependency {
                    clauses: clauses
                        .iter()
                        .map(|(kind, k)| DepClause::Job { kind: kind.clone(), job_id: k + 1, task: None })
                        .collect(),
                    any,
                };
                let me = Asking { id: 10, task: None, earlier_namesake: false };
                let mut seen: Vec<DepState> = Vec::new();
                // A step is a minute; a job starts at its step of Started.
                for step in 0..4usize {
                    let now = step as i64 * 60;
                    let at = |k: usize| {
                        let life = &lives[k];
                        let outcome = life[step.min(life.len() - 1)];
                        let start = life
                            .iter()
                            .position(|o| *o == Outcome::Started)
                            .filter(|&s| s <= step)
                            .map(|s| s as i64 * 60);
                        t(k as u32 + 1, outcome, start)
                    };
                    let targets = |id: u32| (0..2).map(at).filter(move |x| x.id == id);
                    seen.push(state(&me, &dep, targets, now));
                }
                let first_settled = seen.iter().position(|s| *s != DepState::Waiting);
                if let Some(k) = first_settled {
                    prop_assert!(seen[k..].iter().all(|s| *s == seen[k]), "{:?}", seen);
                }
                // By the last step every job has ended; an `after:+N` of
                // up to two minutes after a start at step 1 has passed too.
                prop_assert_ne!(seen[3], DepState::Waiting, "{:?}", seen);
            }
        }
    }
}
