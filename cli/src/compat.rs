//! What each command accepts, read from the parsers' own tables, for the
//! compatibility matrix (`docs/compat.md`, `scripts/compat-report`).
//!
//! An option in a command's table is taken as working unless the command
//! says otherwise here ([`Support::Differs`] for options accepted with a
//! different effect, [`Support::NotYet`] for options the table knows only to
//! refuse them). Input environment variables are found by running the
//! command's own environment reader with a lookup that records each name it
//! asks for, so a variable the code stops reading leaves the matrix too.

use std::cell::RefCell;

/// How well an option works.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Support {
    Works,
    /// Accepted, with this difference from Slurm.
    Differs(&'static str),
    /// Refused (with Slurm's own error or ours), for this reason.
    NotYet(&'static str),
}

/// One option a command's parser knows.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Known {
    pub short: Option<char>,
    pub long: Option<&'static str>,
    pub support: Support,
    /// Its argument may be left out.
    pub optional: bool,
}

/// Everything the matrix needs from one command.
#[derive(Debug, Clone, Default)]
pub struct Command {
    pub name: &'static str,
    pub options: Vec<Known>,
    /// Input environment variables the command reads.
    pub env_in: Vec<String>,
    /// Words of a command language: scontrol's and sacctmgr's commands
    /// (`cmd show`), their entities (`entity show job`), sreport's reports.
    pub words: Vec<String>,
    /// The notes its options' support was read from.
    pub notes: Notes,
}

impl Command {
    /// How the option named `long` (or, with none, `short`) is supported;
    /// `None` when the parser does not know it.
    pub fn lookup(&self, short: Option<char>, long: Option<&str>) -> Option<&Known> {
        match long {
            Some(l) => self.options.iter().find(|k| k.long == Some(l)),
            None => self
                .options
                .iter()
                .find(|k| k.short.is_some() && k.short == short),
        }
    }
}

/// Options a table accepts whose effect differs from Slurm's, or which the
/// parser knows only to refuse: (long name, or `-x` for a short-only one).
pub type Notes = &'static [(&'static str, Support)];

fn from_fmt(table: &[crate::fmt::Opt], notes: Notes) -> Vec<Known> {
    table
        .iter()
        .map(|o| {
            let long = (!o.long.is_empty()).then_some(o.long);
            Known {
                short: o.short,
                long,
                support: note_for(notes, o.short, long),
                optional: matches!(o.arg, crate::fmt::Arg::Optional | crate::fmt::Arg::Attached),
            }
        })
        .collect()
}

/// How an option accepted with a warning and no effect is reported.
pub(crate) const IGNORED_NOTE: Support = Support::Differs("accepted with a warning; no effect yet");

/// srun's and salloc's options of [`crate::srun::IGNORED`] marked so.
fn ignored(mut options: Vec<Known>) -> Vec<Known> {
    for k in &mut options {
        // (Unless a note says how it is taken: srun's --gpu-bind.)
        if crate::srun::IGNORED.iter().any(|i| Some(i.long) == k.long)
            && matches!(k.support, Support::Works)
        {
            k.support = IGNORED_NOTE;
        }
    }
    options
}

fn from_getopt(table: &[crate::getopt::Opt], notes: Notes) -> Vec<Known> {
    table
        .iter()
        .map(|o| Known {
            short: o.short,
            long: o.long,
            support: note_for(notes, o.short, o.long),
            optional: matches!(
                o.has_arg,
                crate::getopt::HasArg::Optional | crate::getopt::HasArg::OptionalNext
            ),
        })
        .collect()
}

fn note_for(notes: Notes, short: Option<char>, long: Option<&str>) -> Support {
    notes
        .iter()
        .find(|(name, _)| match name.strip_prefix('-') {
            Some(s) if !s.starts_with('-') => short.map(String::from).as_deref() == Some(s),
            _ => Some(*name) == long,
        })
        .map(|(_, s)| s.clone())
        .unwrap_or(Support::Works)
}

/// Runs `read` with an environment that holds nothing and records every
/// variable asked for.
fn recorded(read: impl FnOnce(&dyn Fn(&str) -> Option<String>)) -> Vec<String> {
    let seen = RefCell::new(Vec::<String>::new());
    let lookup = |k: &str| {
        let mut s = seen.borrow_mut();
        if !s.iter().any(|x| x == k) {
            s.push(k.to_string());
        }
        None
    };
    read(&lookup);
    seen.into_inner()
}

/// Every command's table, in the order of `docs/compat.md`.
pub fn commands() -> Vec<Command> {
    let mut all = tables();
    // Every command finds slurm.conf the same way.
    for c in &mut all {
        c.env_in.push(slurm_common::conf::CONF_ENV.to_string());
        // Read where the configuration is loaded (`common::load_conf`).
        c.env_in
            .push(slurm_common::timefmt::TIME_FORMAT_ENV.to_string());
    }
    all
}

fn tables() -> Vec<Command> {
    let words = |ws: &[String]| ws.to_vec();
    vec![
        Command {
            notes: crate::sbatch::JOB_NOTES,
            name: "sbatch",
            options: crate::sbatch::compat_options(),
            env_in: crate::sbatch::compat_env_in(),
            words: vec![],
        },
        Command {
            notes: crate::srun::COMPAT_NOTES,
            name: "srun",
            options: ignored(from_fmt(
                &crate::srun::table("srun"),
                crate::srun::COMPAT_NOTES,
            )),
            env_in: recorded(|env| {
                crate::srun::env_options(env);
                crate::common::ExitCodes::from_env("srun", env);
                // What srun passes on as its tasks' when it is set.
                crate::srun::step_vars(&Default::default(), &Default::default(), env);
            }),
            words: vec![],
        },
        Command {
            // srun's notes are about options salloc does not take, but
            // those of every job's.
            notes: crate::sbatch::JOB_NOTES,
            name: "salloc",
            options: ignored(from_fmt(
                &crate::srun::table("salloc"),
                crate::sbatch::JOB_NOTES,
            )),
            env_in: recorded(|env| {
                crate::srun::salloc_env_options(env);
                crate::common::ExitCodes::from_env("salloc", env);
            }),
            words: vec![],
        },
        Command {
            notes: crate::squeue::COMPAT_NOTES,
            name: "squeue",
            options: from_fmt(crate::squeue::OPTS, crate::squeue::COMPAT_NOTES),
            env_in: recorded(|env| {
                let _ = crate::squeue::parse_args(&[], env);
            }),
            words: vec![],
        },
        Command {
            notes: crate::sinfo::COMPAT_NOTES,
            name: "sinfo",
            options: from_fmt(crate::sinfo::OPTS, crate::sinfo::COMPAT_NOTES),
            env_in: recorded(|env| {
                let _ = crate::sinfo::parse_args(&[], env);
            }),
            words: vec![],
        },
        Command {
            notes: crate::scancel::COMPAT_NOTES,
            name: "scancel",
            options: from_getopt(&crate::scancel::table(), crate::scancel::COMPAT_NOTES),
            env_in: recorded(|env| {
                let _ = crate::scancel::parse_with(&[], env, 0, &mut Vec::new());
            }),
            words: vec![],
        },
        Command {
            notes: crate::scontrol::COMPAT_NOTES,
            name: "scontrol",
            options: from_fmt(crate::scontrol::OPTS, crate::scontrol::COMPAT_NOTES),
            env_in: recorded(|env| {
                let _ = crate::scontrol::parse_globals_env(&[], env);
            }),
            words: words(&crate::scontrol::compat_words()),
        },
        Command {
            notes: crate::sacct::COMPAT_NOTES,
            name: "sacct",
            options: from_fmt(crate::sacct::OPTS, crate::sacct::COMPAT_NOTES),
            env_in: recorded(|env| {
                let _ = crate::sacct::parse_args_env(&[], 0, env);
            }),
            words: vec![],
        },
        Command {
            notes: crate::sacctmgr::COMPAT_NOTES,
            name: "sacctmgr",
            options: from_fmt(crate::sacctmgr::OPTS, crate::sacctmgr::COMPAT_NOTES),
            env_in: recorded(|env| {
                let _ = crate::sacctmgr::parse_flags_env(&[], env);
            }),
            words: words(&crate::sacctmgr::compat_words()),
        },
        Command {
            notes: crate::sreport::COMPAT_NOTES,
            name: "sreport",
            options: from_fmt(crate::sreport::OPTS, crate::sreport::COMPAT_NOTES),
            env_in: recorded(|env| {
                let _ = crate::sreport::parse_args_env(&[], 0, env);
            }),
            words: words(&crate::sreport::compat_words()),
        },
        Command {
            notes: crate::shares::SSHARE_NOTES,
            name: "sshare",
            options: from_fmt(
                &[crate::shares::SSHARE_OPTS, crate::shares::REPORT_OPTS].concat(),
                crate::shares::SSHARE_NOTES,
            ),
            env_in: recorded(|env| {
                let _ = crate::shares::format_flag_env(&[], env);
            }),
            words: vec![],
        },
        Command {
            notes: crate::shares::SPRIO_NOTES,
            name: "sprio",
            options: from_fmt(
                &[crate::shares::SPRIO_OPTS, crate::shares::REPORT_OPTS].concat(),
                crate::shares::SPRIO_NOTES,
            ),
            env_in: recorded(|env| {
                let _ = crate::shares::sprio_args_env(&[], env);
                let _ = crate::shares::format_flag_env(&[], env);
            }),
            words: vec![],
        },
        Command {
            notes: crate::sdiag::COMPAT_NOTES,
            name: "sdiag",
            options: from_fmt(crate::sdiag::OPTS, crate::sdiag::COMPAT_NOTES),
            env_in: recorded(|env| {
                let _ = crate::sdiag::parse_args_env(&[], env);
            }),
            words: vec![],
        },
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn notes_name_options_the_tables_have() {
        // A note for an option no table has would never show.
        for c in commands() {
            for (name, _) in c.notes.iter() {
                let hit = c.options.iter().any(|k| match name.strip_prefix('-') {
                    Some(s) if !s.starts_with('-') => {
                        k.short.map(String::from).as_deref() == Some(s)
                    }
                    _ => k.long == Some(*name),
                });
                assert!(hit, "{}: note for {name}, which its table lacks", c.name);
            }
        }
    }

    #[test]
    fn input_variables_are_read_from_the_code() {
        let cmds = commands();
        let get = |n: &str| cmds.iter().find(|c| c.name == n).unwrap();
        assert!(get("squeue").env_in.contains(&"SQUEUE_FORMAT".to_string()));
        assert!(get("sinfo").env_in.contains(&"SINFO_PARTITION".to_string()));
        assert!(get("srun").env_in.contains(&"SLURM_NTASKS".to_string()));
        assert!(get("sbatch").env_in.contains(&"SBATCH_ACCOUNT".to_string()));
        assert!(get("scancel").env_in.contains(&"SCANCEL_USER".to_string()));
        // sbatch's refused options are not yet, its warned ones differ.
        let sbatch = get("sbatch");
        assert!(matches!(
            sbatch.lookup(None, Some("container")).unwrap().support,
            Support::NotYet(_)
        ));
        assert!(matches!(
            sbatch.lookup(None, Some("hint")).unwrap().support,
            Support::Differs(_)
        ));
        assert_eq!(
            sbatch.lookup(Some('A'), Some("account")).unwrap().support,
            Support::Works
        );
    }
}
