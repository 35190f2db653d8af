//! From `slurm.conf` plugin names to implementations. An unknown name is a
//! configuration error; a known name whose policy is not built yet resolves
//! to the closest one with a warning the caller must log.

use crate::sched::{Builtin, Scheduler};

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum PluginError {
    #[error("unknown {kind} plugin '{name}'")]
    Unknown { kind: &'static str, name: String },
}

/// A resolved plugin and, when it stands in for another, why.
pub struct Resolved<T> {
    pub plugin: T,
    pub warning: Option<String>,
}

pub fn scheduler(name: &str) -> Result<Resolved<Box<dyn Scheduler>>, PluginError> {
    match name {
        "sched/builtin" => Ok(Resolved {
            plugin: Box::new(Builtin),
            warning: None,
        }),
        "sched/backfill" => Ok(Resolved {
            plugin: Box::new(Builtin),
            warning: Some(
                "SchedulerType=sched/backfill is not supported yet: scheduling in strict priority order (sched/builtin)".into(),
            ),
        }),
        _ => Err(PluginError::Unknown {
            kind: "SchedulerType",
            name: name.to_string(),
        }),
    }
}

/// Validate `SelectType`; cons_tres is the only placement we have.
pub fn select(name: &str) -> Result<Option<String>, PluginError> {
    match name {
        "select/cons_tres" => Ok(None),
        "select/cons_res" | "select/linear" => Ok(Some(format!(
            "SelectType={name} is not supported: using select/cons_tres"
        ))),
        _ => Err(PluginError::Unknown {
            kind: "SelectType",
            name: name.to_string(),
        }),
    }
}

/// Validate `PriorityType`.
pub fn priority(name: &str) -> Result<Option<String>, PluginError> {
    match name {
        "priority/basic" => Ok(None),
        "priority/multifactor" => Ok(Some(
            "PriorityType=priority/multifactor is not supported yet: using priority/basic".into(),
        )),
        _ => Err(PluginError::Unknown {
            kind: "PriorityType",
            name: name.to_string(),
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_resolve_or_fail() {
        assert_eq!(
            scheduler("sched/builtin").unwrap().plugin.name(),
            "sched/builtin"
        );
        assert!(scheduler("sched/backfill").unwrap().warning.is_some());
        assert!(matches!(
            scheduler("sched/wiki"),
            Err(PluginError::Unknown { .. })
        ));
        assert_eq!(select("select/cons_tres"), Ok(None));
        assert!(select("select/bogus").is_err());
        assert!(priority("priority/fancy").is_err());
    }
}
