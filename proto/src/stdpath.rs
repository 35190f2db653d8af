//! Output-file patterns (`--output=%x-%j.out`): the defaults a job keeps and
//! their expansion as Slurm shows it (`scontrol show job`, `squeue
//! --expand-patterns`, `sacct --expand-patterns`, slurmrestd's
//! `stdout_expanded`). One implementation for the controller's records and
//! accounting's.

use crate::JobId;

/// What a pattern may name about a job.
#[derive(Debug, Clone, Copy)]
pub struct PatternJob<'a> {
    pub job_id: JobId,
    /// An array task's array id and index.
    pub array: Option<(JobId, u32)>,
    pub name: &'a str,
    pub user: &'a str,
    /// The node the batch script runs on (`%N`); `None` before it runs.
    pub node: Option<&'a str>,
    /// Relative paths are relative to it.
    pub work_dir: &'a str,
}

/// `StdOut`, `StdErr`, `StdIn` as a job keeps them, Slurm's defaults
/// applied (`slurm-%j.out`, an array's `slurm-%A_%a.out`, stderr with
/// stdout, stdin `/dev/null`).
pub fn patterns(
    out: Option<&str>,
    err: Option<&str>,
    input: Option<&str>,
    array: bool,
) -> (String, String, String) {
    let out = out.map(str::to_string).unwrap_or_else(|| {
        if array {
            "slurm-%A_%a.out".to_string()
        } else {
            "slurm-%j.out".to_string()
        }
    });
    let err = err.map_or_else(|| out.clone(), str::to_string);
    let input = input.unwrap_or("/dev/null").to_string();
    (out, err, input)
}

/// Expands `pattern` as Slurm shows it (`%j`, `%x`, `%u`, `%A`, `%a`,
/// `%b`, `%N`, `%%`, with an optional zero-padding width; `%n`/`%t`, which
/// name a range, as the first of it, 0), relative to the work dir. An array
/// task's `%A`/`%a` are the array's id and its index (what its node daemon
/// names the file by).
pub fn expand(pattern: &str, job: &PatternJob<'_>) -> String {
    let chars: Vec<char> = pattern.chars().collect();
    let mut out = String::new();
    let mut i = 0;
    while i < chars.len() {
        if chars[i] != '%' {
            out.push(chars[i]);
            i += 1;
            continue;
        }
        let mut j = i + 1;
        while j < chars.len() && chars[j].is_ascii_digit() {
            j += 1;
        }
        if j >= chars.len() {
            out.extend(&chars[i..]);
            break;
        }
        let width: usize = chars[i + 1..j]
            .iter()
            .collect::<String>()
            .parse()
            .unwrap_or(0)
            .min(10);
        let num = |v: u64| format!("{v:0width$}");
        // A job that is no array task: Slurm's NO_VAL - 1 as its index.
        let task = job.array.map_or(4_294_967_294, |(_, t)| u64::from(t));
        match chars[j] {
            '%' => out.push('%'),
            'j' | 'J' => out.push_str(&num(u64::from(job.job_id))),
            'A' => out.push_str(&num(u64::from(job.array.map_or(job.job_id, |(a, _)| a)))),
            'a' => out.push_str(&num(task)),
            'b' => out.push_str(&num(task % 10)),
            'x' => out.push_str(job.name),
            'u' => out.push_str(job.user),
            'n' | 't' => out.push_str(&num(0)),
            'N' => match job.node {
                Some(h) => out.push_str(h),
                None => out.extend(&chars[i..=j]),
            },
            _ => out.extend(&chars[i..=j]),
        }
        i = j + 1;
    }
    if out.starts_with('/') || job.work_dir.is_empty() {
        out
    } else {
        format!("{}/{}", job.work_dir.trim_end_matches('/'), out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reason_codes_are_the_names_before_any_text() {
        use crate::JobReason;
        assert_eq!(JobReason::Dependency.code(), "Dependency");
        let r = JobReason::Other("ReqNodeNotAvail, May be reserved for other job".into());
        assert_eq!(r.code(), "ReqNodeNotAvail");
        let r = JobReason::Other("launch failed requeued held".into());
        assert_eq!(r.code(), "JobHeldAdmin");
    }

    #[test]
    fn defaults_and_expansion() {
        assert_eq!(
            patterns(None, None, None, false),
            (
                "slurm-%j.out".into(),
                "slurm-%j.out".into(),
                "/dev/null".into()
            )
        );
        assert_eq!(patterns(None, None, None, true).0, "slurm-%A_%a.out");
        assert_eq!(patterns(Some("o"), Some("e"), Some("i"), true).1, "e");
        let job = PatternJob {
            job_id: 17,
            array: Some((12, 5)),
            name: "nm",
            user: "alice",
            node: Some("n3"),
            work_dir: "/home/alice/",
        };
        assert_eq!(
            expand("%x-%u-%A_%3a-%b.%N.%j.%t%%", &job),
            "/home/alice/nm-alice-12_005-5.n3.17.0%"
        );
        let plain = PatternJob {
            array: None,
            node: None,
            work_dir: "",
            ..job
        };
        assert_eq!(
            expand("/o/%A.%a.%N.%q.%", &plain),
            "/o/17.4294967294.%N.%q.%"
        );
    }
}
