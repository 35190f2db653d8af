//! `--tres-per-task` (`SLURM_TRES_PER_TASK`): trackable resources asked
//! for each task, as `type[/name[:kind]]=count` entries separated by commas
//! (`cpu=4`, `gres/gpu=1`, `gres/gpu:a100=2`). What each task can be given
//! here is CPUs and GPUs: the entries become `--cpus-per-task` and
//! `--gpus-per-task`, as Slurm's commands turn them into those too.

/// What `--tres-per-task` asks for each task.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TresPerTask {
    /// `cpu=N`.
    pub cpus: Option<u32>,
    /// `gres/gpu[:kind]=N`, as `--gpus-per-task` takes it (`N` or
    /// `kind:N`).
    pub gpus: Option<String>,
}

/// Why a `--tres-per-task` is refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TresError {
    /// Refused by the command itself in Slurm's words (printed after
    /// `fatal:`).
    #[error("{0}")]
    Fatal(String),
    /// What Slurm's controller refuses as "Invalid Trackable RESource
    /// (TRES) specification": the entry at fault, and why.
    #[error("Invalid Trackable RESource (TRES) specification ({0})")]
    Invalid(String),
}

/// Slurm's refusal of `--tres-per-task` with the option one of its
/// entries stands for (`cpu` and `--cpus-per-task`, `gres/gpu` and
/// `--gpus-per-task`), both given in one place.
pub fn given_twice(tres: &str, option: &str) -> String {
    format!("You can not have --tres-per-task={tres}= and --{option} please use one or the other")
}

/// Slurm's refusal of CPUs per task beside `--cpus-per-gpu`.
pub const CPUS_PER_GPU_EXCLUSIVE: &str =
    "--cpus-per-task, --tres-per-task=cpu:#, and --cpus-per-gpu are mutually exclusive";

/// TRES that Slurm never takes per task.
const NOT_PER_TASK: &[&str] = &[
    "mem", "energy", "node", "billing", "fs", "vmem", "pages", "bb",
];

/// A count as TRES counts are written: digits with an optional binary
/// suffix (`k`, `m`, `g`, `t`, `p`: multiples of 1024).
fn count(s: &str) -> Option<u64> {
    let s = s.trim();
    let (digits, mult) = match s.char_indices().last() {
        Some((i, c)) if c.is_ascii_alphabetic() => {
            let shift = match c.to_ascii_lowercase() {
                'k' => 10,
                'm' => 20,
                'g' => 30,
                't' => 40,
                'p' => 50,
                _ => return None,
            };
            (&s[..i], 1u64 << shift)
        }
        _ => (s, 1),
    };
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    digits.parse::<u64>().ok()?.checked_mul(mult)
}

/// Parse a `--tres-per-task` value. Entries of a count of 0 ask for
/// nothing (as Slurm's); a later entry of the same resource replaces an
/// earlier one.
pub fn parse(spec: &str) -> Result<TresPerTask, TresError> {
    let mut out = TresPerTask::default();
    for raw in spec.split(',').map(str::trim).filter(|e| !e.is_empty()) {
        let invalid = |why: &str| TresError::Invalid(format!("{raw}: {why}"));
        // Slurm takes `gres:gpu` for `gres/gpu` (and `license:x`).
        let entry = match raw.split_once(':') {
            Some((t, rest))
                if !raw[..t.len()].contains('/')
                    && (t.eq_ignore_ascii_case("gres") || t.eq_ignore_ascii_case("license")) =>
            {
                format!("{t}/{rest}")
            }
            _ => raw.to_string(),
        };
        let kind_end = entry.find(['/', ':', '=']).unwrap_or(entry.len());
        let kind = entry[..kind_end].to_ascii_lowercase();
        if NOT_PER_TASK.contains(&kind.as_str()) {
            return Err(TresError::Fatal(format!(
                "Invalid TRES for --tres-per-task: {kind}"
            )));
        }
        // The count follows the last `=`, or else the last `:` when a
        // number follows it; without one it is 1 (as Slurm's).
        let (name, n) = match entry.rsplit_once('=') {
            Some((name, n)) => (
                name,
                count(n).ok_or_else(|| invalid("the count is not a number"))?,
            ),
            None => match entry.rsplit_once(':') {
                Some((name, n)) if count(n).is_some() => (name, count(n).unwrap_or(1)),
                _ => (entry.as_str(), 1),
            },
        };
        match kind.as_str() {
            "cpu" => {
                if name != &entry[..kind_end] {
                    return Err(invalid("cpu has no name or type"));
                }
                let n = u32::try_from(n)
                    .ok()
                    .filter(|n| *n > 0 && *n <= u32::from(u16::MAX))
                    .ok_or_else(|| TresError::Fatal(format!("Invalid --tres-per-task=cpu={n}")))?;
                out.cpus = Some(n);
            }
            "gres" => {
                let gres = name[kind_end..].trim_start_matches('/');
                let (gname, gkind) = match gres.split_once(':') {
                    Some((g, k)) => (g, Some(k)),
                    None => (gres, None),
                };
                if gname != "gpu" {
                    return Err(invalid(
                        "only gres/gpu can be asked for each task (use --gres for the others)",
                    ));
                }
                if gkind.is_some_and(|k| {
                    k.is_empty()
                        || !k
                            .chars()
                            .all(|c| c.is_ascii_alphanumeric() || "_-.".contains(c))
                }) {
                    return Err(invalid("bad GPU type"));
                }
                if n == 0 {
                    continue;
                }
                if out.gpus.is_some() {
                    return Err(invalid(
                        "GPUs of one kind only can be asked for each task here",
                    ));
                }
                out.gpus = Some(match gkind {
                    Some(k) => format!("{k}:{n}"),
                    None => n.to_string(),
                });
            }
            "license" => {
                return Err(invalid(
                    "licenses cannot be asked for each task here (use -L/--licenses)",
                ))
            }
            _ => return Err(invalid("not a trackable resource that tasks are given")),
        }
    }
    Ok(out)
}

/// Slurm's `SLURM_TRES_PER_TASK` / `TresPerTask=` for CPUs and GPUs asked
/// per task (`--cpus-per-task`, `--gpus-per-task` or `--tres-per-task`):
/// `cpu=4,gres/gpu:a100=2`, CPUs first.
pub fn format(cpus: Option<u32>, gpus: Option<&str>) -> Option<String> {
    slurm_proto::jobenv::tres_per_task(cpus, gpus)
}

/// An entry's resource (`cpu`, `gres/gpu:a100`) and count (`cpu=2`, or
/// `cpu:2`).
fn entry(e: &str) -> (&str, &str) {
    match e.split_once('=') {
        Some(p) => p,
        None => e.rsplit_once(':').unwrap_or((e, "")),
    }
}

/// A step's `SLURM_TRES_PER_TASK` when a sibling option (`-c`,
/// `--gpus-per-task`) gave entry `key` the count `n`, as Slurm's srun
/// makes it: the entry's count changed where it stands (written as it was
/// when the same), else the entry put first; `None` removes it. GPU keys
/// match any GPU entry (`gres/gpu` or `gres/gpu:kind`).
pub fn update(tres: Option<&str>, key: &str, n: Option<&str>) -> Option<String> {
    let same =
        |name: &str| name == key || (key.starts_with("gres/gpu") && name.starts_with("gres/gpu"));
    // `gres:`/`license:` written `gres/`/`license/` first, as Slurm's
    // srun does to the whole string.
    let mut entries: Vec<String> = tres
        .unwrap_or("")
        .split(',')
        .map(str::trim)
        .filter(|e| !e.is_empty())
        .map(
            |e| match ["gres:", "license:"].iter().find(|p| e.starts_with(*p)) {
                Some(p) => format!("{}/{}", &p[..p.len() - 1], &e[p.len()..]),
                None => e.to_string(),
            },
        )
        .collect();
    match (entries.iter().position(|e| same(entry(e).0)), n) {
        (Some(i), None) => {
            entries.remove(i);
        }
        (Some(i), Some(n)) => {
            let (name, old) = entry(&entries[i]);
            if name != key || count(old) != count(n) {
                entries[i] = format!("{key}={n}");
            }
        }
        (None, Some(n)) => entries.insert(0, format!("{key}={n}")),
        (None, None) => {}
    }
    (!entries.is_empty()).then(|| entries.join(","))
}

/// The `SLURM_TRES_PER_TASK` entry of `--gpus-per-task`'s value.
pub use slurm_proto::jobenv::gpu_entry;

#[cfg(test)]
mod tests {
    use super::*;

    fn t(cpus: Option<u32>, gpus: Option<&str>) -> TresPerTask {
        TresPerTask {
            cpus,
            gpus: gpus.map(String::from),
        }
    }

    #[test]
    fn entries_become_cpus_and_gpus_per_task() {
        assert_eq!(parse("cpu=4"), Ok(t(Some(4), None)));
        assert_eq!(parse("cpu:4"), Ok(t(Some(4), None)));
        assert_eq!(parse("gres/gpu=2"), Ok(t(None, Some("2"))));
        assert_eq!(parse("gres:gpu=2"), Ok(t(None, Some("2"))));
        assert_eq!(parse("gres/gpu:a100=2"), Ok(t(None, Some("a100:2"))));
        assert_eq!(
            parse("cpu=8,gres/gpu:1"),
            Ok(t(Some(8), Some("1"))),
            "a count after a colon"
        );
        assert_eq!(parse("cpu=2,cpu=3"), Ok(t(Some(3), None)));
        assert_eq!(parse("gres/gpu=0,cpu=1"), Ok(t(Some(1), None)));
        assert_eq!(parse("cpu=1k"), Ok(t(Some(1024), None)));
        // Without a count: one.
        assert_eq!(parse("cpu"), Ok(t(Some(1), None)));
        assert_eq!(parse("gres/gpu"), Ok(t(None, Some("1"))));
        assert_eq!(parse("gres/gpu:a100"), Ok(t(None, Some("a100:1"))));
        assert_eq!(parse(""), Ok(t(None, None)));
    }

    #[test]
    fn what_tasks_cannot_be_given_is_refused_naming_it() {
        for (spec, kind) in [
            ("mem=4G", "mem"),
            ("cpu=1,billing=3", "billing"),
            ("bb=1", "bb"),
        ] {
            assert_eq!(
                parse(spec),
                Err(TresError::Fatal(format!(
                    "Invalid TRES for --tres-per-task: {kind}"
                )))
            );
        }
        assert_eq!(
            parse("cpu=0"),
            Err(TresError::Fatal("Invalid --tres-per-task=cpu=0".into()))
        );
        for bad in [
            "cpu=x",
            "cpu=-1",
            "cpu/x=1",
            "gres/shard=1",
            "license/ansys=1",
            "foo=1",
            "gres/gpu:=1",
            "gres/gpu:a b=1",
        ] {
            let e = parse(bad).unwrap_err();
            assert!(
                matches!(&e, TresError::Invalid(why) if why.starts_with(bad)),
                "{bad}: {e:?}"
            );
            assert!(e
                .to_string()
                .starts_with("Invalid Trackable RESource (TRES) specification ("));
        }
    }

    #[test]
    fn gpus_of_two_kinds_per_task_are_refused() {
        assert_eq!(
            parse("gres/gpu:a100=1,gres/gpu:v100=1"),
            Err(TresError::Invalid(
                "gres/gpu:v100=1: GPUs of one kind only can be asked for each task here".into()
            ))
        );
    }

    #[test]
    fn formatted_as_slurm_sets_it() {
        assert_eq!(format(Some(4), None).as_deref(), Some("cpu=4"));
        assert_eq!(
            format(Some(4), Some("a100:2")).as_deref(),
            Some("cpu=4,gres/gpu:a100=2")
        );
        assert_eq!(format(None, Some("1")).as_deref(), Some("gres/gpu=1"));
        assert_eq!(format(None, None), None);
        let back = parse(&format(Some(3), Some("v100:1")).unwrap()).unwrap();
        assert_eq!(back, t(Some(3), Some("v100:1")));
    }

    #[test]
    fn a_sibling_option_updates_its_entry_in_place_or_first() {
        // Slurm's order: an entry new to the string goes first.
        assert_eq!(
            update(Some("cpu=2"), "gres/gpu", Some("1")).as_deref(),
            Some("gres/gpu=1,cpu=2")
        );
        assert_eq!(
            update(Some("cpu=2"), "cpu", Some("1")).as_deref(),
            Some("cpu=1")
        );
        // The same count keeps how it was written.
        assert_eq!(
            update(Some("cpu:2"), "cpu", Some("2")).as_deref(),
            Some("cpu:2")
        );
        assert_eq!(
            update(Some("gres:gpu=1,cpu=2"), "gres/gpu:a100", Some("2")).as_deref(),
            Some("gres/gpu:a100=2,cpu=2")
        );
        // Every entry's `gres:` written `gres/`, changed or not.
        assert_eq!(
            update(Some("gres:gpu=1"), "cpu", Some("2")).as_deref(),
            Some("cpu=2,gres/gpu=1")
        );
        assert_eq!(update(Some("cpu=2"), "cpu", None), None);
        assert_eq!(
            update(Some("gres/gpu=1,cpu=2"), "cpu", None).as_deref(),
            Some("gres/gpu=1")
        );
        assert_eq!(update(None, "cpu", Some("4")).as_deref(), Some("cpu=4"));
        assert_eq!(update(None, "cpu", None), None);
        assert_eq!(gpu_entry("a100:2"), ("gres/gpu:a100".into(), "2".into()));
        assert_eq!(gpu_entry("1"), ("gres/gpu".into(), "1".into()));
    }
}
