//! From `slurm.conf` plugin names to implementations. An unknown name is a
//! configuration error; a known name whose policy is not built yet resolves
//! to the closest one with a warning the caller must log.

use crate::backfill::{expected_value, Backfill, BackfillParams};
use crate::sched::{Builtin, Scheduler};

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum PluginError {
    #[error("unknown {kind} plugin '{name}'")]
    Unknown { kind: &'static str, name: String },
    /// A `SchedulerParameters` option with a value it cannot take.
    #[error(
        "invalid SchedulerParameters option {key}={value}: expected {}",
        expected_value(key)
    )]
    BadParam { key: String, value: String },
}

/// A resolved plugin and, when it stands in for another, why.
pub struct Resolved<T> {
    pub plugin: T,
    pub warning: Option<String>,
}

/// `SchedulerType` with default parameters.
pub fn scheduler(name: &str) -> Result<Resolved<Box<dyn Scheduler>>, PluginError> {
    scheduler_with_params(name, "")
}

/// `SchedulerType` configured by `SchedulerParameters`. `bf_` options are
/// read by sched/backfill (unknown or unsupported ones come back as a
/// warning; a bad value is an error); sched/builtin reads none.
pub fn scheduler_with_params(
    name: &str,
    params: &str,
) -> Result<Resolved<Box<dyn Scheduler>>, PluginError> {
    match name {
        "sched/builtin" => Ok(Resolved {
            plugin: Box::new(Builtin),
            warning: None,
        }),
        "sched/backfill" => {
            let (p, warnings) = BackfillParams::parse(params)?;
            Ok(Resolved {
                plugin: Box::new(Backfill::new(p)),
                warning: (!warnings.is_empty()).then(|| warnings.join("; ")),
            })
        }
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
        "priority/basic" | "priority/multifactor" => Ok(None),
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
        let bf = scheduler("sched/backfill").unwrap();
        assert_eq!(bf.plugin.name(), "sched/backfill");
        assert!(bf.warning.is_none());
        assert!(matches!(
            scheduler("sched/wiki"),
            Err(PluginError::Unknown { .. })
        ));
        assert_eq!(select("select/cons_tres"), Ok(None));
        assert!(select("select/bogus").is_err());
        assert!(priority("priority/fancy").is_err());
    }

    #[test]
    fn scheduler_parameters() {
        let r = scheduler_with_params(
            "sched/backfill",
            "bf_window=2880, bf_resolution=300,bf_max_job_test=1000,bf_continue,default_queue_depth=50",
        )
        .unwrap();
        assert_eq!(r.plugin.name(), "sched/backfill");
        assert!(r.warning.is_none(), "{:?}", r.warning);

        let r = scheduler_with_params("sched/backfill", "bf_max_time=60,bf_frobnicate=1").unwrap();
        let w = r.warning.unwrap();
        assert!(w.contains("bf_max_time is not supported yet"), "{w}");
        assert!(
            w.contains("unknown SchedulerParameters option bf_frobnicate"),
            "{w}"
        );

        let e = scheduler_with_params("sched/backfill", "bf_window=0")
            .err()
            .unwrap();
        assert_eq!(
            e,
            PluginError::BadParam {
                key: "bf_window".into(),
                value: "0".into()
            }
        );
        assert_eq!(
            e.to_string(),
            "invalid SchedulerParameters option bf_window=0: expected a number of minutes from 1 to 43200"
        );
        let e = scheduler_with_params("sched/backfill", "bf_resolution=soon")
            .err()
            .unwrap();
        assert!(e.to_string().contains("bf_resolution=soon"), "{e}");
        assert!(scheduler_with_params("sched/backfill", "bf_window").is_err());
        assert!(scheduler_with_params("sched/backfill", "bf_continue=yes").is_err());
        assert!(scheduler_with_params("sched/builtin", "bf_window=0").is_ok());
        assert!(scheduler_with_params("sched/wiki", "").is_err());
    }
}
