//! Output/input file-name patterns (`sbatch -o/-e/-i`), expanded on the node.
//!
//! `%j` job id, `%J` job id (the batch step has no step number), `%s` step
//! (`batch`), `%x` job name, `%u` user name, `%N` this node's short name,
//! `%n` node index, `%t` task id, `%A` array master job id, `%a` array
//! index, `%b` array index modulo 10, `%%` a literal `%`. A number between
//! `%` and the letter zero-pads numeric fields (`%5j` → `00042`) and is
//! ignored for names. A pattern holding a backslash is taken literally
//! (backslashes removed), as Slurm does. Unknown letters are left as written.

/// `NO_VAL - 1`: the array index Slurm substitutes for a job that is not an array.
pub const NO_ARRAY_INDEX: u32 = 4_294_967_294;

/// What the pattern letters stand for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PatternVars<'a> {
    pub job_id: u32,
    pub job_name: &'a str,
    pub user: &'a str,
    pub node: &'a str,
    pub node_index: u32,
    pub task_id: u32,
    pub array_job_id: u32,
    pub array_task_id: u32,
}

impl<'a> PatternVars<'a> {
    /// Variables for a batch script that is not part of an array.
    pub fn batch(job_id: u32, job_name: &'a str, user: &'a str, node: &'a str) -> Self {
        PatternVars {
            job_id,
            job_name,
            user,
            node,
            node_index: 0,
            task_id: 0,
            array_job_id: job_id,
            array_task_id: NO_ARRAY_INDEX,
        }
    }
}

/// Expand `pat` (see the module doc).
pub fn expand(pat: &str, v: &PatternVars) -> String {
    if pat.contains('\\') {
        return pat.replace('\\', "");
    }
    let chars: Vec<char> = pat.chars().collect();
    let mut out = String::with_capacity(pat.len() + 16);
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        if c != '%' {
            out.push(c);
            i += 1;
            continue;
        }
        // Optional width, then the letter.
        let mut j = i + 1;
        while j < chars.len() && chars[j].is_ascii_digit() {
            j += 1;
        }
        let width = chars[i + 1..j]
            .iter()
            .fold(0usize, |w, d| {
                w.saturating_mul(10)
                    .saturating_add(d.to_digit(10).unwrap_or(0) as usize)
            })
            .min(64);
        let Some(&letter) = chars.get(j) else {
            // A trailing '%' (or '%5') stays as written.
            out.extend(&chars[i..]);
            break;
        };
        let num = |n: u64, out: &mut String| out.push_str(&format!("{n:0width$}"));
        match letter {
            '%' => out.push('%'),
            'j' | 'J' => num(v.job_id.into(), &mut out),
            'A' => num(v.array_job_id.into(), &mut out),
            'a' => num(v.array_task_id.into(), &mut out),
            'b' => num((v.array_task_id % 10).into(), &mut out),
            'n' => num(v.node_index.into(), &mut out),
            't' => num(v.task_id.into(), &mut out),
            's' => out.push_str("batch"),
            'x' => out.push_str(v.job_name),
            'u' => out.push_str(v.user),
            'N' => out.push_str(v.node),
            _ => out.extend(&chars[i..=j]),
        }
        i = j + 1;
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn vars() -> PatternVars<'static> {
        PatternVars::batch(42, "envdump", "alice", "n1")
    }

    #[test]
    fn letters_expand() {
        let v = vars();
        assert_eq!(expand("slurm-%j.out", &v), "slurm-42.out");
        assert_eq!(expand("%x-%u-%N-%n.log", &v), "envdump-alice-n1-0.log");
        assert_eq!(expand("%A_%a", &v), "42_4294967294");
        assert_eq!(expand("%J.%s.%t", &v), "42.batch.0");
        assert_eq!(expand("100%%", &v), "100%");
        assert_eq!(expand("plain", &v), "plain");
        assert_eq!(expand("", &v), "");
    }

    #[test]
    fn widths_pad_numbers_only() {
        let v = vars();
        assert_eq!(expand("%5j", &v), "00042");
        assert_eq!(expand("%1j", &v), "42");
        assert_eq!(expand("%3n-%10x", &v), "000-envdump");
        let mut arr = vars();
        arr.array_task_id = 7;
        arr.array_job_id = 40;
        assert_eq!(expand("%A_%3a.%b", &arr), "40_007.7");
    }

    #[test]
    fn odd_patterns_are_kept() {
        let v = vars();
        assert_eq!(expand("a%", &v), "a%");
        assert_eq!(expand("a%12", &v), "a%12");
        assert_eq!(expand("%q%j", &v), "%q42");
        assert_eq!(expand("%99999999999999999999j", &v).len(), 64);
        assert_eq!(expand("out\\%j", &v), "out%j");
        assert_eq!(expand("é%j", &v), "é42");
    }
}
