//! Job array index specifications (`--array=0-99:2%10`) and dependency
//! expressions (`--dependency=afterok:12:13,singleton`), parsed the same way
//! by `sbatch` (to reject bad input early) and the controller.

/// A parsed `--array` value.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ArraySpec {
    /// Task indices, ascending, without duplicates.
    pub tasks: Vec<u32>,
    /// `%N`: at most N tasks run at once.
    pub max_running: Option<u32>,
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct SpecError(pub String);

fn num(s: &str, what: &str) -> Result<u32, SpecError> {
    s.trim()
        .parse::<u32>()
        .map_err(|_| SpecError(format!("invalid {what} '{s}'")))
}

/// Parse `0-15`, `0,6,16-32`, `0-15:4`, `1-7%2`. Indices must be below
/// `max_array_size` (Slurm's MaxArraySize, default 1001).
pub fn parse_array(spec: &str, max_array_size: u32) -> Result<ArraySpec, SpecError> {
    let bad = || SpecError(format!("Invalid job array specification: {spec}"));
    let (list, limit) = match spec.split_once('%') {
        Some((l, m)) => (l, Some(num(m, "array task limit").map_err(|_| bad())?)),
        None => (spec, None),
    };
    if list.trim().is_empty() || limit == Some(0) {
        return Err(bad());
    }
    // Every part is checked, and the tasks counted, before any is expanded:
    // a spec of many overlapping ranges costs nothing to refuse.
    let mut parts = Vec::new();
    let mut total = 0u64;
    for part in list.split(',') {
        let (range, step) = match part.split_once(':') {
            Some((r, s)) => (r, num(s, "array step").map_err(|_| bad())?),
            None => (part, 1),
        };
        if step == 0 {
            return Err(bad());
        }
        let (a, b) = match range.split_once('-') {
            Some((a, b)) => (
                num(a, "index").map_err(|_| bad())?,
                num(b, "index").map_err(|_| bad())?,
            ),
            None => {
                let a = num(range, "index").map_err(|_| bad())?;
                (a, a)
            }
        };
        if b < a {
            return Err(bad());
        }
        if b >= max_array_size {
            return Err(SpecError(format!(
                "Invalid job array specification: {spec} (index {b} exceeds MaxArraySize-1 = {})",
                max_array_size.saturating_sub(1)
            )));
        }
        total += u64::from((b - a) / step) + 1;
        if total > u64::from(max_array_size) {
            return Err(SpecError(format!(
                "Invalid job array specification: more than MaxArraySize = {max_array_size} tasks"
            )));
        }
        parts.push((a, b, step));
    }
    let mut tasks = Vec::with_capacity(total as usize);
    for (a, b, step) in parts {
        tasks.extend((a..=b).step_by(step as usize));
    }
    tasks.sort_unstable();
    tasks.dedup();
    Ok(ArraySpec {
        tasks,
        max_running: limit,
    })
}

/// Write task indices compactly as Slurm shows them: `0-3,7,9`.
pub fn format_indices(tasks: &[u32]) -> String {
    let mut out: Vec<String> = Vec::new();
    let mut i = 0;
    while i < tasks.len() {
        let start = tasks[i];
        let mut end = start;
        while i + 1 < tasks.len() && tasks[i + 1] == end + 1 {
            i += 1;
            end = tasks[i];
        }
        out.push(if start == end {
            start.to_string()
        } else {
            format!("{start}-{end}")
        });
        i += 1;
    }
    out.join(",")
}

/// The parsed forms live in the scheduling core, which evaluates them.
pub use slurm_plugins::deps::{DepClause, DepKind, Dependency};

/// Parse `afterok:12:13,afterany:14`, `after:5+10`, `singleton`,
/// `afterok:1?afternotok:2`, with array tasks as `12_3`.
pub fn parse_dependency(s: &str) -> Result<Dependency, SpecError> {
    let bad = |why: &str| SpecError(format!("Invalid dependency specification '{s}': {why}"));
    let s = s.trim();
    if s.is_empty() {
        return Err(bad("empty"));
    }
    let any = s.contains('?');
    if any && s.contains(',') {
        return Err(bad("',' and '?' cannot be mixed"));
    }
    let mut clauses = Vec::new();
    for part in s.split([',', '?']) {
        let part = part.trim();
        if part.eq_ignore_ascii_case("singleton") {
            clauses.push(DepClause::Singleton);
            continue;
        }
        let mut it = part.split(':');
        let kind_s = it.next().unwrap_or("").to_ascii_lowercase();
        let ids: Vec<&str> = it.collect();
        if ids.is_empty() {
            return Err(bad(&format!("'{part}' names no job")));
        }
        for id in ids {
            let (id, plus) = match id.split_once('+') {
                Some((i, m)) => (i, Some(num(m, "delay").map_err(|_| bad("bad +time"))?)),
                None => (id, None),
            };
            let kind = match kind_s.as_str() {
                "after" => DepKind::After(plus.unwrap_or(0)),
                _ if plus.is_some() => return Err(bad("+time is only valid with after")),
                "afterany" => DepKind::AfterAny,
                "afterok" => DepKind::AfterOk,
                "afternotok" => DepKind::AfterNotOk,
                "aftercorr" => DepKind::AfterCorr,
                other => return Err(bad(&format!("unknown type '{other}'"))),
            };
            let (job_id, task) = match id.split_once('_') {
                Some((j, t)) => (
                    num(j, "job id").map_err(|_| bad("bad job id"))?,
                    Some(num(t, "task").map_err(|_| bad("bad task id"))?),
                ),
                None => (
                    num(id, "job id").map_err(|_| bad(&format!("bad job id '{id}'")))?,
                    None,
                ),
            };
            clauses.push(DepClause::Job { kind, job_id, task });
        }
    }
    Ok(Dependency { clauses, any })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn arrays_as_the_man_page_shows() {
        assert_eq!(parse_array("0-3", 1001).unwrap().tasks, vec![0, 1, 2, 3]);
        assert_eq!(
            parse_array("0,6,16-18", 1001).unwrap().tasks,
            vec![0, 6, 16, 17, 18]
        );
        assert_eq!(
            parse_array("0-15:4", 1001).unwrap().tasks,
            vec![0, 4, 8, 12]
        );
        let a = parse_array("0-99:2%10", 1001).unwrap();
        assert_eq!((a.tasks.len(), a.max_running), (50, Some(10)));
        assert_eq!(parse_array("3,1,1", 1001).unwrap().tasks, vec![1, 3]);
        // Refused before anything is expanded: 100,000 ranges of 1000.
        let many = vec!["0-999"; 100_000].join(",");
        let e = parse_array(&many, 1001).unwrap_err();
        assert!(e.0.contains("more than MaxArraySize = 1001 tasks"), "{e}");
        assert!(parse_array("0-4000000", 1001).is_err());
        for bad in ["", "5-3", "a-b", "1-3:0", "1%0", "0-1001", "1-"] {
            assert!(parse_array(bad, 1001).is_err(), "{bad}");
        }
        assert_eq!(format_indices(&[0, 1, 2, 5, 7, 8]), "0-2,5,7-8");
    }

    #[test]
    fn dependencies() {
        let d = parse_dependency("afterok:12:13,afterany:14_2").unwrap();
        assert!(!d.any);
        assert_eq!(d.clauses.len(), 3);
        assert_eq!(
            d.clauses[2],
            DepClause::Job {
                kind: DepKind::AfterAny,
                job_id: 14,
                task: Some(2)
            }
        );
        let d = parse_dependency("after:5+10?singleton").unwrap();
        assert!(d.any);
        assert_eq!(
            d.clauses[0],
            DepClause::Job {
                kind: DepKind::After(10),
                job_id: 5,
                task: None
            }
        );
        assert_eq!(d.clauses[1], DepClause::Singleton);
        for bad in [
            "",
            "afterok",
            "afterok:x",
            "sometime:1",
            "afterok:1+5",
            "afterok:1,afterany:2?singleton",
        ] {
            assert!(parse_dependency(bad).is_err(), "{bad}");
        }
    }
}
