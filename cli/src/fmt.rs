//! The output-format engine the query commands share: Slurm's `-o` field
//! syntax (`%[.][size]type[suffix]`), `-O` long-name syntax
//! (`name[:[.][size][suffix]]`), padding and truncation to a width, a small
//! getopt work-alike that reports bad options as Slurm's commands do, and the
//! time and memory renderings (`2026-11-22T05:37:34`, `Sun Nov 22 05:37:41
//! 2026`, `4000M`).
//!
//! Timestamps take a [`Tz`] so golden tests can render in UTC whatever the
//! machine's time zone; the commands themselves use [`Tz::Local`] as Slurm does.

use chrono::{Local, TimeZone, Utc};
use slurm_proto::{JobRecord, JobState};

/// Which clock face timestamps are rendered on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Tz {
    /// The machine's local time (what the commands print).
    Local,
    /// UTC (tests).
    Utc,
}

impl Tz {
    fn fmt(self, t: i64, pattern: &str) -> String {
        match self {
            Tz::Local => match Local.timestamp_opt(t, 0) {
                chrono::LocalResult::Single(d) | chrono::LocalResult::Ambiguous(d, _) => {
                    d.format(pattern).to_string()
                }
                chrono::LocalResult::None => "Unknown".to_string(),
            },
            Tz::Utc => match Utc.timestamp_opt(t, 0) {
                chrono::LocalResult::Single(d) | chrono::LocalResult::Ambiguous(d, _) => {
                    d.format(pattern).to_string()
                }
                chrono::LocalResult::None => "Unknown".to_string(),
            },
        }
    }

    /// `2026-11-22T05:37:34` (local time as `SLURM_TIME_FORMAT` says).
    pub fn timestamp(self, t: i64) -> String {
        match self {
            Tz::Local => slurm_common::timefmt::format_timestamp(t),
            Tz::Utc => self.fmt(t, "%Y-%m-%dT%H:%M:%S"),
        }
    }

    /// [`Tz::timestamp`], or `none` when unset (absent, 0 or negative).
    pub fn opt_timestamp(self, t: Option<i64>, none: &str) -> String {
        match t {
            Some(t) if t > 0 => self.timestamp(t),
            _ => none.to_string(),
        }
    }

    /// The date line `squeue -l` and `sinfo -l` print first: `Sun Nov 22 05:37:41 2026`.
    pub fn header_time(self, t: i64) -> String {
        self.fmt(t, "%a %b %e %H:%M:%S %Y")
    }
}

/// One piece of a parsed format: literal text or a field.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Item {
    Text(String),
    Field(Field),
}

/// A field reference with its layout.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Field {
    /// The type letter (`-o`) or the lower-cased long name (`-O`).
    pub key: String,
    /// 0 = as wide as the value.
    pub width: usize,
    /// Right-justify (the `.` flag).
    pub right: bool,
    /// Text printed after the field (`-O` suffix).
    pub suffix: String,
}

impl Field {
    pub fn new(key: &str, width: usize, right: bool) -> Field {
        Field {
            key: key.to_string(),
            width,
            right,
            suffix: String::new(),
        }
    }
}

/// Parses a `-o` format (`%.18i %9P %j`). Letters for which `valid` is false
/// are reported in the returned error list (Slurm prints them and goes on).
/// `%%` is a literal `%`.
pub fn parse_short(fmt: &str, valid: &dyn Fn(char) -> bool) -> (Vec<Item>, Vec<String>) {
    let mut items = Vec::new();
    let mut errors = Vec::new();
    let mut text = String::new();
    let chars: Vec<char> = fmt.chars().collect();
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        if c != '%' {
            text.push(c);
            i += 1;
            continue;
        }
        if i + 1 < chars.len() && chars[i + 1] == '%' {
            text.push('%');
            i += 2;
            continue;
        }
        let mut j = i + 1;
        let mut right = false;
        if j < chars.len() && chars[j] == '.' {
            right = true;
            j += 1;
        }
        let start = j;
        while j < chars.len() && chars[j].is_ascii_digit() {
            j += 1;
        }
        let digits: String = chars[start..j].iter().collect();
        if j >= chars.len() {
            // A dangling `%...` at the end: keep it as text.
            text.extend(&chars[i..]);
            break;
        }
        let letter = chars[j];
        let width = digits.parse::<usize>().unwrap_or(0).min(4096);
        if !text.is_empty() {
            items.push(Item::Text(std::mem::take(&mut text)));
        }
        if valid(letter) {
            items.push(Item::Field(Field::new(&letter.to_string(), width, right)));
        } else {
            errors.push(letter.to_string());
        }
        i = j + 1;
    }
    if !text.is_empty() {
        items.push(Item::Text(text));
    }
    (items, errors)
}

/// Parses a `-O` format (`jobid:10,name,state:.8`). Names are lower-cased;
/// `canon` maps a name to its canonical key (or `None` when unknown, which is
/// reported in the error list). Fields without a size get `default_width`.
pub fn parse_long(
    fmt: &str,
    default_width: usize,
    canon: &dyn Fn(&str) -> Option<String>,
) -> (Vec<Item>, Vec<String>) {
    let mut items = Vec::new();
    let mut errors = Vec::new();
    for part in fmt.split(',') {
        if part.is_empty() {
            continue;
        }
        let (name, spec) = match part.split_once(':') {
            Some((n, s)) => (n, Some(s)),
            None => (part, None),
        };
        let Some(key) = canon(&name.to_ascii_lowercase()) else {
            errors.push(name.to_string());
            continue;
        };
        let mut width = default_width;
        let mut right = false;
        let mut suffix = String::new();
        if let Some(spec) = spec {
            let mut rest = spec;
            if let Some(r) = rest.strip_prefix('.') {
                right = true;
                rest = r;
            }
            let digits: String = rest.chars().take_while(|c| c.is_ascii_digit()).collect();
            if !digits.is_empty() {
                width = digits.parse::<usize>().unwrap_or(default_width).min(4096);
            }
            suffix = rest[digits.len()..].to_string();
        }
        items.push(Item::Field(Field {
            key,
            width,
            right,
            suffix,
        }));
    }
    (items, errors)
}

/// Pads (or truncates) `s` to `width` characters; width 0 leaves it as is.
pub fn pad(s: &str, width: usize, right: bool) -> String {
    let mut out = String::with_capacity(width.max(s.len()));
    pad_into(&mut out, s, width, right);
    out
}

/// [`pad`], appended to `out` (no allocation of its own: a listing of
/// thousands of jobs pads tens of thousands of values).
pub fn pad_into(out: &mut String, s: &str, width: usize, right: bool) {
    if width == 0 {
        out.push_str(s);
        return;
    }
    let ascii = s.is_ascii();
    let n = if ascii { s.len() } else { s.chars().count() };
    if n >= width {
        if ascii {
            out.push_str(&s[..width]);
        } else {
            out.extend(s.chars().take(width));
        }
        return;
    }
    let fill = width - n;
    if !right {
        out.push_str(s);
    }
    push_spaces(out, fill);
    if right {
        out.push_str(s);
    }
}

/// `n` spaces onto `out`.
fn push_spaces(out: &mut String, mut n: usize) {
    const SPACES: &str = "                                ";
    while n > 0 {
        let k = n.min(SPACES.len());
        out.push_str(&SPACES[..k]);
        n -= k;
    }
}

/// Slurm's accounting tables (sacctmgr, sreport): right-aligned columns of
/// the given widths, a value too long cut with `+`, a dashed line under the
/// titles; or `|`-separated with `parsable` (`Some(true)`: trailing `|`).
pub fn acct_table(
    cols: &[(&str, usize)],
    rows: &[Vec<String>],
    parsable: Option<bool>,
    header: bool,
) -> String {
    let signed: Vec<(&str, i64)> = cols.iter().map(|c| (c.0, c.1 as i64)).collect();
    acct_table_aligned(&signed, rows, parsable, header)
}

/// [`acct_table`] where a negative width is a left-aligned column (as
/// Slurm's `NodeName%-15`).
/// A double as Slurm's accounting commands print one in a column `width`
/// wide (C's `%f`; one too wide for it in exponent form, its precision cut
/// until it fits, as `print_fields_double` does). Parsable output: `%f`.
pub fn acct_double(v: f64, width: usize, parsable: bool) -> String {
    let fixed = format!("{v:.6}");
    if parsable || fixed.len() <= width {
        return fixed;
    }
    // C's `%.*e`: at least two exponent digits, with its sign.
    let c_exp = |prec: usize| {
        let s = format!("{v:.prec$e}");
        match s.split_once('e') {
            Some((m, e)) => {
                let n: i32 = e.parse().unwrap_or(0);
                format!("{m}e{}{:02}", if n < 0 { '-' } else { '+' }, n.abs())
            }
            None => s,
        }
    };
    let first = c_exp(width).len();
    let prec = if first > width {
        width.saturating_sub(first - width)
    } else {
        width
    };
    c_exp(prec)
}

pub fn acct_table_aligned(
    cols: &[(&str, i64)],
    rows: &[Vec<String>],
    parsable: Option<bool>,
    header: bool,
) -> String {
    let fit = |v: &str, width: i64| {
        let w = width.unsigned_abs() as usize;
        if v.chars().count() > w && w > 0 {
            let mut t: String = v.chars().take(w - 1).collect();
            t.push('+');
            t
        } else if width < 0 {
            format!("{v:<w$}")
        } else {
            format!("{v:>w$}")
        }
    };
    let mut out = String::new();
    let line = |vals: &[String], out: &mut String| {
        match parsable {
            Some(trailing) => {
                out.push_str(&vals.join("|"));
                if trailing {
                    out.push('|');
                }
            }
            None => {
                for (v, c) in vals.iter().zip(cols) {
                    out.push_str(&fit(v, c.1));
                    out.push(' ');
                }
            }
        }
        out.push('\n');
    };
    if header {
        let t: Vec<String> = cols.iter().map(|c| c.0.to_string()).collect();
        line(&t, &mut out);
        if parsable.is_none() {
            for c in cols {
                out.push_str(&"-".repeat(c.1.unsigned_abs() as usize));
                out.push(' ');
            }
            out.push('\n');
        }
    }
    for r in rows {
        line(r, &mut out);
    }
    out
}

/// Renders one line (without its newline), asking `value` for each field.
pub fn render(items: &[Item], value: &mut dyn FnMut(&Field) -> String) -> String {
    let mut out = String::new();
    render_into(&mut out, items, &mut |f| std::borrow::Cow::Owned(value(f)));
    out
}

/// [`render`], appended to `out`; a value may borrow (no copy per field).
pub fn render_into<'a>(
    out: &mut String,
    items: &[Item],
    value: &mut dyn FnMut(&Field) -> std::borrow::Cow<'a, str>,
) {
    for it in items {
        match it {
            Item::Text(t) => out.push_str(t),
            Item::Field(f) => {
                let v = value(f);
                pad_into(out, &v, f.width, f.right);
                out.push_str(&f.suffix);
            }
        }
    }
}

/// Memory in MiB as Slurm prints it with unit conversion: `0`, `4000M`, `8G`, `2T`.
pub fn mem_str(mib: u64) -> String {
    if mib == 0 {
        return "0".to_string();
    }
    let units = ["M", "G", "T", "P"];
    let mut v = mib;
    let mut u = 0;
    while v.is_multiple_of(1024) && u + 1 < units.len() {
        v /= 1024;
        u += 1;
    }
    format!("{v}{}", units[u])
}

// ---------------------------------------------------------------- job views

/// Long state name, `COMPLETING` while the job cleans up.
pub fn job_state_long(job: &JobRecord) -> &'static str {
    if job.completing {
        "COMPLETING"
    } else {
        job.state.name()
    }
}

/// Compact state, `CG` while the job cleans up.
pub fn job_state_short(job: &JobRecord) -> &'static str {
    if job.completing {
        "CG"
    } else {
        job.state.short()
    }
}

/// Seconds the job has run: `now - start` while running, `end - start`
/// after, time spent suspended left out.
pub fn job_run_secs(job: &JobRecord, now: i64) -> i64 {
    match job.start_time {
        Some(s) if s > 0 && job.state != JobState::Pending => job.run_secs(now),
        _ => 0,
    }
}

/// Nodes to show in NODELIST: the ones still completing for a completing job,
/// else the allocation.
pub fn job_nodes(job: &JobRecord) -> Vec<String> {
    if job.completing && !job.completing_nodes.is_empty() {
        job.completing_nodes.clone()
    } else {
        job.alloc.nodes.clone()
    }
}

/// Compressed node list (`n[1-3]`), empty when none.
pub fn job_nodelist(job: &JobRecord) -> String {
    slurm_common::hostlist::compress(&job_nodes(job))
}

/// Node count: allocated nodes, or the minimum asked for while pending.
pub fn job_num_nodes(job: &JobRecord) -> u32 {
    if job.alloc.nodes.is_empty() {
        job.min_nodes.max(1)
    } else {
        job.alloc.nodes.len() as u32
    }
}

/// CPU count: allocated, or asked for while pending.
pub fn job_num_cpus(job: &JobRecord) -> u32 {
    if job.alloc.nodes.is_empty() {
        job.req_cpus.max(1)
    } else {
        job.alloc.total_cpus()
    }
}

/// CPUs per task (1 unless `-c` was given).
pub fn job_cpus_per_task(job: &JobRecord) -> u32 {
    job.desc.cpus_per_task.unwrap_or(1).max(1)
}

/// Minimum CPUs per node (`MinCPUsNode`, squeue `%c`).
pub fn job_min_cpus_node(job: &JobRecord) -> u32 {
    let cpt = job_cpus_per_task(job);
    let tasks = match job.desc.ntasks_per_node {
        Some(n) if n > 0 => n.saturating_mul(cpt),
        _ => cpt,
    };
    tasks.max(job.desc.min_cpus.unwrap_or(0))
}

/// `MinMemoryNode` / squeue `%m`: `0`, `4000M`, or per-CPU as `500M`.
pub fn job_min_memory(job: &JobRecord) -> String {
    if let Some(m) = job.desc.mem_per_cpu {
        return mem_str(m);
    }
    mem_str(job.desc.mem_per_node.unwrap_or(0))
}

/// Expected or actual start, for pending jobs falling back on `--begin`.
pub fn job_start(job: &JobRecord, now: i64) -> Option<i64> {
    match job.start_time {
        Some(s) if s > 0 => Some(s),
        _ if job.state == JobState::Pending => job.desc.begin_time.filter(|b| *b > now),
        _ => None,
    }
}

/// Actual end, or expected end (start + limit) while running.
pub fn job_end(job: &JobRecord, now: i64) -> Option<i64> {
    if job.state.is_finished() {
        return job.end_time.filter(|e| *e > 0);
    }
    let start = job_start(job, now)?;
    job.time_limit.map(|l| start + i64::from(l) * 60)
}

/// TRES string as `scontrol show job` prints it: allocated when the job has
/// nodes, requested otherwise (`node_mem` is the per-node memory a job that
/// asked for no memory would get, used for pending jobs).
pub fn job_tres(job: &JobRecord, node_mem: Option<u64>) -> String {
    let mut parts = Vec::new();
    if !job.alloc.nodes.is_empty() {
        let cpus = job.alloc.total_cpus();
        parts.push(format!("cpu={cpus}"));
        let mem: u64 = job.alloc.mem.iter().sum();
        if mem > 0 {
            parts.push(format!("mem={}", mem_str(mem)));
        }
        parts.push(format!("node={}", job.alloc.nodes.len()));
        parts.push(format!("billing={cpus}"));
        // As Slurm: `gres/gpu=2`, then each type (`gres/gpu:a100=2`).
        let mut gres: std::collections::BTreeMap<String, usize> = Default::default();
        for g in job.alloc.gres.iter().flatten() {
            *gres.entry(g.name.clone()).or_default() += g.indices.len();
            if let Some(k) = &g.kind {
                *gres.entry(format!("{}:{k}", g.name)).or_default() += g.indices.len();
            }
        }
        for (name, n) in gres.into_iter().filter(|(_, n)| *n > 0) {
            parts.push(format!("gres/{name}={n}"));
        }
    } else {
        let cpus = job.req_cpus.max(1);
        let nodes = job.min_nodes.max(1);
        parts.push(format!("cpu={cpus}"));
        let mem = match (job.desc.mem_per_cpu, job.desc.mem_per_node) {
            (Some(m), _) => m.saturating_mul(u64::from(cpus)),
            (None, Some(m)) if m > 0 => m.saturating_mul(u64::from(nodes)),
            _ => node_mem.unwrap_or(0).saturating_mul(u64::from(nodes)),
        };
        if mem > 0 {
            parts.push(format!("mem={}", mem_str(mem)));
        }
        parts.push(format!("node={nodes}"));
        parts.push(format!("billing={cpus}"));
    }
    parts.join(",")
}

pub use slurm_openapi::openapi::{expand_std_path, job_std_patterns};

/// The paths `StdOut`, `StdErr`, `StdIn` as shown: [`job_std_patterns`]
/// expanded.
pub fn job_std_paths(job: &JobRecord) -> (String, String, String) {
    let (out, err, input) = job_std_patterns(job);
    (
        expand_std_path(&out, job),
        expand_std_path(&err, job),
        expand_std_path(&input, job),
    )
}

// ------------------------------------------------------------ option parsing

/// Whether an option takes an argument.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Arg {
    No,
    Required,
    /// Attached (`-j1`, `--jobs=1`), or the next word when it is not an option.
    Optional,
    /// Attached only (`--json=v0.0.44`), as getopt's optional arguments:
    /// the next word is never taken.
    Attached,
}

/// One option a command accepts.
#[derive(Debug, Clone, Copy)]
pub struct Opt {
    pub short: Option<char>,
    pub long: &'static str,
    pub arg: Arg,
}

impl Opt {
    pub const fn new(short: Option<char>, long: &'static str, arg: Arg) -> Opt {
        Opt { short, long, arg }
    }
}

/// What the parser found, in order: (long name, argument) or a positional word.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Parsed {
    Opt(&'static str, Option<String>),
    Word(String),
}

/// Parses `args` (without the program name) the way getopt_long does
/// ([`crate::getopt`]), returning the message getopt would print on a bad
/// option. Options come first in the result, in their order, then the
/// words.
pub fn getopt(prog: &str, args: &[String], opts: &[Opt]) -> Result<Vec<Parsed>, String> {
    use crate::getopt::HasArg;
    let table: Vec<crate::getopt::Opt> = opts
        .iter()
        .enumerate()
        .map(|(id, o)| crate::getopt::Opt {
            long: (!o.long.is_empty()).then_some(o.long),
            short: o.short,
            has_arg: match o.arg {
                Arg::No => HasArg::No,
                Arg::Required => HasArg::Required,
                Arg::Optional => HasArg::OptionalNext,
                Arg::Attached => HasArg::Optional,
            },
            id,
        })
        .collect();
    let p = crate::getopt::parse(prog, args, &table, true).map_err(|e| e.message)?;
    let mut out: Vec<Parsed> = p
        .opts
        .into_iter()
        .map(|(id, v)| Parsed::Opt(opts[id].long, v))
        .collect();
    out.extend(p.operands.into_iter().map(Parsed::Word));
    Ok(out)
}

/// Input environment variables that stand for options: (variable, long
/// option, whether it carries a value). Their words go before the command
/// line's, whose options then win, as Slurm's do; a flag variable counts
/// unless empty or `0`.
pub type EnvOptions = [(&'static str, &'static str, bool)];

/// The words `table`'s variables give (see [`EnvOptions`]).
pub fn env_words(table: &EnvOptions, env: &dyn Fn(&str) -> Option<String>) -> Vec<String> {
    let mut words = Vec::new();
    for (var, opt, value) in table {
        match env(var) {
            Some(v) if *value && !v.is_empty() => words.push(format!("--{opt}={v}")),
            Some(v) if !*value && !v.is_empty() && v != "0" => words.push(format!("--{opt}")),
            _ => {}
        }
    }
    words
}

/// Splits a line into words, honouring single and double quotes (which
/// go): scontrol's interactive lines, srun's `--multi-prog` files.
pub fn split_words(line: &str) -> Vec<String> {
    let mut words = Vec::new();
    let mut cur = String::new();
    let mut quote: Option<char> = None;
    let mut any = false;
    for c in line.chars() {
        match quote {
            Some(q) if c == q => quote = None,
            Some(_) => cur.push(c),
            None if c == '"' || c == '\'' => {
                quote = Some(c);
                any = true;
            }
            None if c.is_whitespace() => {
                if any || !cur.is_empty() {
                    words.push(std::mem::take(&mut cur));
                    any = false;
                }
            }
            None => cur.push(c),
        }
    }
    if any || !cur.is_empty() {
        words.push(cur);
    }
    words
}

/// Splits a comma-separated option value, dropping empty items.
pub fn split_list(s: &str) -> Vec<String> {
    s.split(',')
        .map(|x| x.trim())
        .filter(|x| !x.is_empty())
        .map(|x| x.to_string())
        .collect()
}

/// Slurm's natural host-name order (prefix, then numeric suffix).
pub fn host_cmp(a: &str, b: &str) -> std::cmp::Ordering {
    fn split(s: &str) -> (&str, Option<u64>) {
        let idx = s
            .char_indices()
            .rev()
            .take_while(|(_, c)| c.is_ascii_digit())
            .last()
            .map(|(i, _)| i);
        match idx {
            Some(i) => (&s[..i], s[i..].parse().ok()),
            None => (s, None),
        }
    }
    let (pa, na) = split(a);
    let (pb, nb) = split(b);
    pa.cmp(pb).then(na.cmp(&nb)).then(a.cmp(b))
}

/// Slurm prints unset strings as `(null)`.
pub fn or_null(s: &str) -> &str {
    if s.is_empty() {
        "(null)"
    } else {
        s
    }
}

/// C's `atoi`/`strtol` as Slurm reads numbers: leading blanks, a sign and
/// the digits that follow; 0 when there are none (too many digits: the
/// largest number).
pub(crate) fn leading_int(s: &str) -> i64 {
    let t = s.trim_start();
    let (neg, rest) = match t.strip_prefix('-') {
        Some(r) => (true, r),
        None => (false, t.strip_prefix('+').unwrap_or(t)),
    };
    let digits: String = rest.chars().take_while(|c| c.is_ascii_digit()).collect();
    let n = digits
        .parse::<i64>()
        .unwrap_or(if digits.is_empty() { 0 } else { i64::MAX });
    if neg {
        -n
    } else {
        n
    }
}

/// A test environment: the variables `pairs` sets, as commands look them up.
#[cfg(test)]
pub(crate) fn test_env(
    pairs: &'static [(&'static str, &'static str)],
) -> impl Fn(&str) -> Option<String> {
    move |k: &str| {
        pairs
            .iter()
            .find(|(n, _)| *n == k)
            .map(|(_, v)| v.to_string())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_double_too_wide_for_its_column_turns_to_exponent_form_as_slurms() {
        assert_eq!(acct_double(999.5, 10, false), "999.500000");
        assert_eq!(acct_double(1200.0, 10, false), "1.2000e+03");
        assert_eq!(acct_double(120.5, 10, false), "120.500000");
        assert_eq!(acct_double(3600.0, 10, false), "3.6000e+03");
        assert_eq!(acct_double(123456.0, 10, false), "1.2346e+05");
        assert_eq!(acct_double(3600.0, 10, true), "3600.000000");
    }

    #[test]
    fn short_format_parses_widths_and_text() {
        let (items, errs) = parse_short("%.18i %9P|%j%%", &|c| c != 'z');
        assert!(errs.is_empty());
        assert_eq!(
            items,
            vec![
                Item::Field(Field::new("i", 18, true)),
                Item::Text(" ".into()),
                Item::Field(Field::new("P", 9, false)),
                Item::Text("|".into()),
                Item::Field(Field::new("j", 0, false)),
                Item::Text("%".into()),
            ]
        );
        let (_, errs) = parse_short("%z %i", &|c| c != 'z');
        assert_eq!(errs, vec!["z".to_string()]);
    }

    #[test]
    fn long_format_parses_sizes_and_suffixes() {
        let canon = |s: &str| {
            if s == "bogus" {
                None
            } else {
                Some(s.to_string())
            }
        };
        let (items, errs) = parse_long("JobID:10,name,state:.8|,bogus", 20, &canon);
        assert_eq!(errs, vec!["bogus".to_string()]);
        assert_eq!(items.len(), 3);
        assert_eq!(items[0], Item::Field(Field::new("jobid", 10, false)));
        assert_eq!(items[1], Item::Field(Field::new("name", 20, false)));
        let mut f = Field::new("state", 8, true);
        f.suffix = "|".into();
        assert_eq!(items[2], Item::Field(f));
    }

    #[test]
    fn pad_truncates_and_justifies() {
        assert_eq!(pad("TIME_LIMIT", 9, true), "TIME_LIMI");
        assert_eq!(pad("ab", 4, true), "  ab");
        assert_eq!(pad("ab", 4, false), "ab  ");
        assert_eq!(pad("abc", 0, false), "abc");
    }

    #[test]
    fn memory_units() {
        assert_eq!(mem_str(0), "0");
        assert_eq!(mem_str(4000), "4000M");
        assert_eq!(mem_str(12000), "12000M");
        assert_eq!(mem_str(8192), "8G");
        assert_eq!(mem_str(1024 * 1024), "1T");
    }

    #[test]
    fn getopt_handles_clusters_attached_and_errors() {
        let opts = [
            Opt {
                short: Some('h'),
                long: "noheader",
                arg: Arg::No,
            },
            Opt {
                short: Some('o'),
                long: "format",
                arg: Arg::Required,
            },
            Opt {
                short: Some('j'),
                long: "jobs",
                arg: Arg::Optional,
            },
        ];
        let args: Vec<String> = ["-ho%i", "--form=%j", "-j", "1,2", "-j3", "--jobs"]
            .iter()
            .map(|s| s.to_string())
            .collect();
        let p = getopt("squeue", &args, &opts).unwrap();
        assert_eq!(
            p,
            vec![
                Parsed::Opt("noheader", None),
                Parsed::Opt("format", Some("%i".into())),
                Parsed::Opt("format", Some("%j".into())),
                Parsed::Opt("jobs", Some("1,2".into())),
                Parsed::Opt("jobs", Some("3".into())),
                Parsed::Opt("jobs", None),
            ]
        );
        let bad = getopt("squeue", &["-z".to_string()], &opts).unwrap_err();
        assert_eq!(bad, "squeue: invalid option -- 'z'");
        let bad = getopt("squeue", &["-o".to_string()], &opts).unwrap_err();
        assert_eq!(bad, "squeue: option requires an argument -- 'o'");
        let bad = getopt("squeue", &["--bogus".to_string()], &opts).unwrap_err();
        assert_eq!(bad, "squeue: unrecognized option '--bogus'");
    }

    #[test]
    fn timestamps_in_utc() {
        assert_eq!(Tz::Utc.timestamp(1_795_325_854), "2026-11-22T05:37:34");
        assert_eq!(
            Tz::Utc.header_time(1_795_325_861),
            "Sun Nov 22 05:37:41 2026"
        );
        assert_eq!(Tz::Utc.opt_timestamp(None, "Unknown"), "Unknown");
    }

    #[test]
    fn host_order_is_natural() {
        let mut v = vec!["n10", "n2", "n1", "m3"];
        v.sort_by(|a, b| host_cmp(a, b));
        assert_eq!(v, vec!["m3", "n1", "n2", "n10"]);
    }
}
