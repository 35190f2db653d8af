//! `sprio` (pending jobs' priorities and their factors) and `sshare` (fair
//! share per association), from the controller's multifactor state.

use crate::common::{self, call};
use slurm_proto::{JobPriority, RequestBody, Response, ShareInfo};

fn weight(weights: &[(String, u32)], name: &str) -> u32 {
    weights
        .iter()
        .find(|(n, _)| n == name)
        .map_or(0, |(_, w)| *w)
}

/// The factor columns, by weight name: weighted letter, normalized
/// letter.
const FACTORS: [(&str, char, char); 6] = [
    ("age", 'A', 'a'),
    ("assoc", 'B', 'b'),
    ("fairshare", 'F', 'f'),
    ("jobsize", 'J', 'j'),
    ("partition", 'P', 'p'),
    ("qos", 'Q', 'q'),
];

/// sprio's default `-o` format, as Slurm's: the job and its partition,
/// then the priority, the site factor and one column per factor with a
/// weight; normalized (`-n`): the lower-case letters, without the site
/// factor. With `-l`, Slurm's fixed long layouts (user, account, every
/// factor, QOS name, nice and TRES).
pub fn sprio_default_format(weights: &[(String, u32)], long: bool, norm: bool) -> String {
    sprio_format_for(weights, long, norm, false, false)
}

/// [`sprio_default_format`] with, as Slurm's, the cluster's column after
/// the partition for `--sibling` (without `--local`) and the user's for
/// `-u` (the long layouts have the user anyway).
pub fn sprio_format_for(
    weights: &[(String, u32)],
    long: bool,
    norm: bool,
    cluster: bool,
    users: bool,
) -> String {
    if long {
        return if norm {
            "%.15i %9r %.8u %.8o %10y %10a %10b %10f %10j %10p %10n %10q %20t"
        } else {
            "%.15i %9r %.8u %.8o %.10Y %.10S %.10A %.10B %.10F %.10J %.10P %.10n %.10Q %.11N %.20T"
        }
        .to_string();
    }
    let mut f = String::from("%.15i %9r");
    if cluster {
        f.push_str(" %.8c");
    }
    if users {
        f.push_str(" %.8u");
    }
    f.push_str(if norm { " %10y" } else { " %.10Y %.10S" });
    for (name, weighted, normalized) in FACTORS {
        if weight(weights, name) > 0 {
            f.push_str(&if norm {
                format!(" %10{normalized}")
            } else {
                format!(" %.10{weighted}")
            });
        }
    }
    f
}

/// A `-o` letter sprio knows.
fn sprio_letter(c: char) -> bool {
    "aAbBcfFiIjJnNopPqQrSTtuyY".contains(c)
}

fn sprio_header(key: &str) -> &'static str {
    match key {
        "i" => "JOBID",
        "r" => "PARTITION",
        "u" => "USER",
        "c" => "CLUSTER",
        "y" | "Y" => "PRIORITY",
        "S" => "SITE",
        "a" | "A" => "AGE",
        "b" | "B" => "ASSOC",
        "f" | "F" => "FAIRSHARE",
        "j" | "J" => "JOBSIZE",
        "p" | "P" => "PARTITION",
        "q" | "Q" => "QOS",
        "N" => "NICE",
        "o" => "ACCOUNT",
        "n" => "QOSNAME",
        _ => "TRES",
    }
}

/// One job's value for format letter `key`: weighted factors rounded, as
/// sprio prints them; normalized ones (the factor before its weight) with
/// seven decimals; the normalized priority as a fraction of the largest.
fn sprio_value(j: &JobPriority, weights: &[(String, u32)], cluster: &str, key: &str) -> String {
    let weighted = |name: &str| match name {
        "age" => j.age,
        "assoc" => j.assoc,
        "fairshare" => j.fairshare,
        "jobsize" => j.job_size,
        "partition" => j.partition_factor,
        _ => j.qos,
    };
    let c = key.chars().next().unwrap_or(' ');
    if let Some((name, w, _)) = FACTORS.iter().find(|(_, w, n)| *w == c || *n == c) {
        let v = weighted(name);
        return if c == *w {
            format!("{}", v.round() as i64)
        } else {
            let wt = weight(weights, name);
            format!("{:.7}", if wt > 0 { v / f64::from(wt) } else { 0.0 })
        };
    }
    match c {
        'i' => j.job_id.to_string(),
        'r' => j.partition.clone(),
        'u' => j.user.clone(),
        'c' => cluster.to_string(),
        'Y' => j.priority.to_string(),
        'y' => format!("{:.7}", f64::from(j.priority) / f64::from(u32::MAX)),
        'S' => j.site.to_string(),
        'N' => j.nice.to_string(),
        'o' => j.account.clone(),
        'n' => j.qos_name.clone(),
        _ => j.tres.clone(),
    }
}

/// The weights row of `sprio -w` under the same columns: "Weights" under
/// the job id, each factor's weight (1 for the site factor), nothing else.
fn sprio_weight_value(weights: &[(String, u32)], key: &str) -> String {
    let c = key.chars().next().unwrap_or(' ');
    if let Some((name, _, _)) = FACTORS.iter().find(|(_, w, n)| *w == c || *n == c) {
        return weight(weights, name).to_string();
    }
    match c {
        'i' => "Weights".into(),
        'S' => "1".into(),
        'T' | 't' => weights
            .iter()
            .find(|(n, _)| n == "tres")
            .map(|(_, w)| w.to_string())
            .unwrap_or_default(),
        _ => String::new(),
    }
}

/// How `sprio` lays its listing out.
pub struct SprioLayout<'a> {
    /// A `-o` format.
    pub format: &'a str,
    pub noheader: bool,
    /// `-w`: the weights row instead of the jobs.
    pub weights_only: bool,
    pub cluster: &'a str,
}

/// `sprio` output: a header, then one line per job (or the weights row).
/// Letters sprio does not know are an error naming them.
pub fn render_sprio_as(
    jobs: &[JobPriority],
    weights: &[(String, u32)],
    l: &SprioLayout,
) -> Result<String, String> {
    let (items, bad) = crate::fmt::parse_short(l.format, &sprio_letter);
    if let Some(b) = bad.first() {
        return Err(format!("Invalid job format specification: {b}"));
    }
    let mut out = String::new();
    if !l.noheader {
        crate::fmt::render_into(&mut out, &items, &mut |f| sprio_header(&f.key).into());
        out.push('\n');
    }
    if l.weights_only {
        crate::fmt::render_into(&mut out, &items, &mut |f| {
            sprio_weight_value(weights, &f.key).into()
        });
        out.push('\n');
        return Ok(out);
    }
    for j in jobs {
        crate::fmt::render_into(&mut out, &items, &mut |f| {
            sprio_value(j, weights, l.cluster, &f.key).into()
        });
        out.push('\n');
    }
    Ok(out)
}

/// `sprio` output in its default layout.
pub fn render_sprio(
    jobs: &[JobPriority],
    weights: &[(String, u32)],
    long: bool,
    noheader: bool,
) -> String {
    let format = sprio_default_format(weights, long, false);
    let l = SprioLayout {
        format: &format,
        noheader,
        weights_only: false,
        cluster: "",
    };
    render_sprio_as(jobs, weights, &l).unwrap_or_default()
}

/// Order `jobs` by `-S` (field letters, comma-separated or not, each
/// optionally `-` for descending or `+`): numbers as numbers.
pub fn sort_sprio(
    jobs: &mut [JobPriority],
    weights: &[(String, u32)],
    spec: &str,
) -> Result<(), String> {
    let mut keys = Vec::new();
    let mut desc = false;
    for c in spec.chars() {
        match c {
            '-' => desc = true,
            '+' | ',' | ' ' => {}
            c if sprio_letter(c) => {
                keys.push((c.to_string(), desc));
                desc = false;
            }
            c => return Err(format!("Invalid sort specification: {c}")),
        }
    }
    jobs.sort_by(|a, b| {
        for (k, desc) in &keys {
            let (x, y) = (
                sprio_value(a, weights, "", k),
                sprio_value(b, weights, "", k),
            );
            let o = match (x.parse::<f64>(), y.parse::<f64>()) {
                (Ok(x), Ok(y)) => x.total_cmp(&y),
                _ => x.cmp(&y),
            };
            let o = if *desc { o.reverse() } else { o };
            if o != std::cmp::Ordering::Equal {
                return o;
            }
        }
        std::cmp::Ordering::Equal
    });
    Ok(())
}

fn num(v: Option<f64>, width: usize, prec: usize) -> String {
    let Some(v) = v else {
        return format!("{:>width$}", "");
    };
    if v.is_infinite() || v == f64::MAX {
        format!("{:>width$}", "inf")
    } else {
        format!("{v:>width$.prec$}")
    }
}

/// A TRES column's text cut to `width` as Slurm cuts text: its last
/// character `+` when longer.
fn cut(v: &str, width: usize) -> String {
    if v.chars().count() <= width || width == 0 {
        return v.to_string();
    }
    let mut s: String = v.chars().take(width - 1).collect();
    s.push('+');
    s
}

/// `name=value` for each TRES of `r`'s list `vals` (sshare's TRES
/// fields): those with no value (`u64::MAX`) left out, each divided by
/// `div` (seconds to minutes).
fn tres_text(r: &ShareInfo, vals: &[u64], div: u64) -> String {
    r.tres_names
        .iter()
        .zip(vals)
        .filter(|(_, v)| **v != u64::MAX)
        .map(|(n, v)| format!("{n}={}", v / div))
        .collect::<Vec<_>>()
        .join(",")
}

/// `sshare` output (`-l` adds NormUsage, LevelFS, GrpTRESMins and
/// TRESRunMins).
pub fn render_sshare(rows: &[ShareInfo], long: bool, noheader: bool) -> String {
    let mut out = String::new();
    if !noheader {
        out.push_str("Account                    User  RawShares  NormShares    RawUsage ");
        if long {
            out.push_str("  NormUsage ");
        }
        out.push_str(" EffectvUsage  FairShare ");
        if long {
            out.push_str(&format!(
                "   LevelFS {:>30} {:>30} ",
                "GrpTRESMins", "TRESRunMins"
            ));
        }
        out.push('\n');
        out.push_str("-------------------- ---------- ---------- ----------- ----------- ");
        if long {
            out.push_str("----------- ");
        }
        out.push_str("------------- ---------- ");
        if long {
            out.push_str(&format!("---------- {0} {0} ", "-".repeat(30)));
        }
        out.push('\n');
    }
    for r in rows {
        let account = format!("{}{}", " ".repeat(r.depth as usize), r.account);
        out.push_str(&format!(
            "{:<20} {:>10} {:>10} {} {:>11} ",
            account.chars().take(20).collect::<String>(),
            r.user.clone().unwrap_or_default(),
            r.raw_shares,
            num(Some(r.norm_shares), 11, 6),
            r.raw_usage.round() as i64,
        ));
        if long {
            out.push_str(&format!("{} ", num(Some(r.norm_usage), 11, 6)));
        }
        out.push_str(&format!(
            "{} {} ",
            num(Some(r.effective_usage), 13, 6),
            num(r.fairshare, 10, 6),
        ));
        if long {
            out.push_str(&format!(
                "{} {:>30} {:>30} ",
                num(r.level_fs, 10, 6),
                cut(&tres_text(r, &r.tres_grp_mins, 1), 30),
                cut(&tres_text(r, &r.tres_run_secs, 60), 30)
            ));
        }
        out.push('\n');
    }
    out
}

/// A `-u` list: each user known here, or the error naming the first that
/// is not.
fn user_list(v: &str) -> Result<Vec<String>, String> {
    let users = crate::fmt::split_list(v);
    match users
        .iter()
        .find(|u| slurm_common::users::parse_user(u).is_none())
    {
        Some(u) => Err(format!("Invalid user: {u}")),
        None => Ok(users),
    }
}

/// Whether the user asked for (`want`, a name or a number) is `have`.
fn same_user(want: &str, have: &str) -> bool {
    want == have
        || slurm_common::users::parse_user(want)
            .is_some_and(|u| Some(u) == slurm_common::users::parse_user(have))
}

/// `-V`/`--version` and `--help`/`--usage`, answered before anything else:
/// the exit code when one was asked for.
fn version_or_help(args: &[String], prog: &str) -> Option<i32> {
    for a in args {
        match a.as_str() {
            "-V" | "--version" => {
                println!("slurm {}", slurm_proto::SLURM_VERSION);
                return Some(0);
            }
            "--help" => {
                print!("{}", crate::help::help(prog));
                return Some(0);
            }
            "--usage" => {
                print!("{}", crate::help::usage(prog));
                return Some(0);
            }
            _ => {}
        }
    }
    None
}

/// `sshare -p`/`-P`: the same columns, `|`-delimited (with a trailing `|`
/// for `-p`), numbers unpadded.
pub fn render_sshare_parsable(rows: &[ShareInfo], a: &SshareArgs) -> String {
    let end = if a.parsable == Some(Parsable::Trailing) {
        "|"
    } else {
        ""
    };
    let mut out = String::new();
    let mut head = vec!["Account", "User", "RawShares", "NormShares", "RawUsage"];
    if a.long {
        head.push("NormUsage");
    }
    head.extend(["EffectvUsage", "FairShare"]);
    if a.long {
        head.extend(["LevelFS", "GrpTRESMins", "TRESRunMins"]);
    }
    if !a.noheader {
        out.push_str(&head.join("|"));
        out.push_str(end);
        out.push('\n');
    }
    let num = |v: Option<f64>| num(v, 0, 6).trim().to_string();
    for r in rows {
        let mut cols = vec![
            format!("{}{}", " ".repeat(r.depth as usize), r.account),
            r.user.clone().unwrap_or_default(),
            r.raw_shares.clone(),
            num(Some(r.norm_shares)),
            (r.raw_usage.round() as i64).to_string(),
        ];
        if a.long {
            cols.push(num(Some(r.norm_usage)));
        }
        cols.extend([num(Some(r.effective_usage)), num(r.fairshare)]);
        if a.long {
            cols.extend([
                num(r.level_fs),
                tres_text(r, &r.tres_grp_mins, 1),
                tres_text(r, &r.tres_run_secs, 60),
            ]);
        }
        out.push_str(&cols.join("|"));
        out.push_str(end);
        out.push('\n');
    }
    out
}

/// sshare's `-o` fields: name, default width.
const SSHARE_FIELDS: [(&str, usize); 14] = [
    ("Account", 20),
    ("User", 10),
    ("Partition", 12),
    ("RawShares", 10),
    ("NormShares", 11),
    ("RawUsage", 11),
    ("NormUsage", 11),
    ("EffectvUsage", 13),
    ("FairShare", 10),
    ("LevelFS", 10),
    ("Cluster", 10),
    ("GrpTRESMins", 30),
    ("TRESRunMins", 30),
    ("ID", 6),
];

/// `sshare -e/--helpformat`: the fields `-o` takes, in Slurm's layout
/// (four to a line, each in 17 columns), in its order.
pub fn sshare_help_format() -> String {
    let mut names: Vec<&str> = SSHARE_FIELDS.iter().map(|f| f.0).collect();
    names.sort_unstable();
    let mut out = String::new();
    for (i, n) in names.iter().enumerate() {
        if i % 4 != 0 {
            out.push(' ');
        } else if i > 0 {
            out.push('\n');
        }
        out.push_str(&format!("{n:<17}"));
    }
    out.push('\n');
    out
}

/// `-o Account,User%15,FairShare`: each field (any case) and its width.
pub fn sshare_format(spec: &str) -> Result<Vec<(&'static str, usize)>, String> {
    let mut out = Vec::new();
    for item in spec.split(',').map(str::trim).filter(|s| !s.is_empty()) {
        let (name, width) = match item.split_once('%') {
            Some((n, w)) => (
                n,
                Some(
                    w.parse::<usize>()
                        .map_err(|_| format!("Invalid field width: \"{item}\""))?,
                ),
            ),
            None => (item, None),
        };
        // As Slurm's: the first field, in its (alphabetical) order, that
        // begins with what was typed (`Grp` is GrpTRESMins, `P` Partition).
        let mut fields: Vec<&(&'static str, usize)> = SSHARE_FIELDS.iter().collect();
        fields.sort_by_key(|(f, _)| *f);
        let typed = name.to_ascii_lowercase();
        let (field, default) = fields
            .into_iter()
            .find(|(f, _)| !typed.is_empty() && f.to_ascii_lowercase().starts_with(&typed))
            .ok_or_else(|| format!("Invalid field requested: \"{name}\""))?;
        out.push((*field, width.unwrap_or(*default).min(4096)));
    }
    if out.is_empty() {
        return Err("No fields given to --format".into());
    }
    Ok(out)
}

/// One row's value of an sshare field.
fn sshare_value(r: &ShareInfo, field: &str, cluster: &str) -> String {
    let num = |v: Option<f64>| num(v, 0, 6).trim().to_string();
    match field {
        "Account" => format!("{}{}", " ".repeat(r.depth as usize), r.account),
        "User" => r.user.clone().unwrap_or_default(),
        "Partition" => r.partition.clone().unwrap_or_default(),
        "RawShares" => r.raw_shares.clone(),
        "NormShares" => num(Some(r.norm_shares)),
        "RawUsage" => (r.raw_usage.round() as i64).to_string(),
        "NormUsage" => num(Some(r.norm_usage)),
        "EffectvUsage" => num(Some(r.effective_usage)),
        "FairShare" => num(r.fairshare),
        "LevelFS" => num(r.level_fs),
        "GrpTRESMins" => tres_text(r, &r.tres_grp_mins, 1),
        "TRESRunMins" => tres_text(r, &r.tres_run_secs, 60),
        "ID" => r.assoc_id.map(|i| i.to_string()).unwrap_or_default(),
        _ => cluster.to_string(),
    }
}

/// `sshare -o`: the fields asked for, as columns (Account left-justified,
/// the rest right-justified, each cut to its width) under a dashed line,
/// or `|`-separated with `-p`/`-P`.
pub fn render_sshare_fields(
    rows: &[ShareInfo],
    fields: &[(&str, usize)],
    a: &SshareArgs,
    cluster: &str,
) -> String {
    let mut out = String::new();
    let line = |vals: Vec<String>, out: &mut String| {
        match a.parsable {
            Some(p) => {
                out.push_str(&vals.join("|"));
                if p == Parsable::Trailing {
                    out.push('|');
                }
            }
            None => {
                for (v, (f, w)) in vals.iter().zip(fields) {
                    // (Slurm marks a cut TRES list with `+`.)
                    let v: String = match *f {
                        "GrpTRESMins" | "TRESRunMins" => cut(v, *w),
                        // Whole numbers are never cut (the column widens).
                        "ID" | "RawShares" | "RawUsage" => v.clone(),
                        _ => v.chars().take(*w).collect(),
                    };
                    // (At least as wide as the value: only what was cut
                    // above is shorter.)
                    let w = (*w).max(v.chars().count());
                    crate::fmt::pad_into(out, &v, w, *f != "Account");
                    out.push(' ');
                }
            }
        }
        out.push('\n');
    };
    if !a.noheader {
        line(
            fields.iter().map(|(f, _)| f.to_string()).collect(),
            &mut out,
        );
        if a.parsable.is_none() {
            for (_, w) in fields {
                out.push_str(&"-".repeat(*w));
                out.push(' ');
            }
            out.push('\n');
        }
    }
    for r in rows {
        line(
            fields
                .iter()
                .map(|(f, _)| sshare_value(r, f, cluster))
                .collect(),
            &mut out,
        );
    }
    out
}

/// `-p` (a trailing `|`) or `-P` (none).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Parsable {
    Trailing,
    Plain,
}

/// What `sshare` was asked for.
#[derive(Debug, Default, PartialEq)]
pub struct SshareArgs {
    pub long: bool,
    pub noheader: bool,
    /// `-A`: these accounts (and the users under them) only.
    pub accounts: Vec<String>,
    /// `-u`: of the users' rows, these users' only.
    pub users: Vec<String>,
    /// `-U`: users' rows only.
    pub users_only: bool,
    pub parsable: Option<Parsable>,
    pub cluster: Option<String>,
    /// `-o`: the fields asked for.
    pub format: Option<Vec<(&'static str, usize)>>,
    /// `-m`: a Partition column after User.
    pub partition: bool,
    /// `-e/--helpformat`: list the `-o` fields and stop.
    pub help_format: bool,
}

/// The options sprio and sshare share: `-M`, `-v`, `--json`, `--yaml`.
pub(crate) const REPORT_OPTS: &[crate::fmt::Opt] = {
    use crate::fmt::{Arg, Opt};
    &[
        Opt {
            short: Some('M'),
            long: "clusters",
            arg: Arg::Required,
        },
        Opt {
            short: None,
            long: "json",
            arg: Arg::Optional,
        },
        Opt {
            short: None,
            long: "yaml",
            arg: Arg::Optional,
        },
        Opt {
            short: Some('v'),
            long: "verbose",
            arg: Arg::No,
        },
        // Answered before the options are parsed (`version_or_help`).
        Opt {
            short: None,
            long: "help",
            arg: Arg::No,
        },
        Opt {
            short: None,
            long: "usage",
            arg: Arg::No,
        },
        Opt {
            short: Some('V'),
            long: "version",
            arg: Arg::No,
        },
    ]
};

pub(crate) const SSHARE_OPTS: &[crate::fmt::Opt] = {
    use crate::fmt::{Arg, Opt};
    &[
        Opt {
            short: Some('A'),
            long: "accounts",
            arg: Arg::Required,
        },
        Opt {
            short: Some('a'),
            long: "all",
            arg: Arg::No,
        },
        Opt {
            short: Some('u'),
            long: "users",
            arg: Arg::Required,
        },
        Opt {
            short: Some('U'),
            long: "Users",
            arg: Arg::No,
        },
        Opt {
            short: Some('l'),
            long: "long",
            arg: Arg::No,
        },
        Opt {
            short: Some('n'),
            long: "noheader",
            arg: Arg::No,
        },
        Opt {
            short: Some('h'),
            long: "",
            arg: Arg::No,
        },
        Opt {
            short: Some('p'),
            long: "parsable",
            arg: Arg::No,
        },
        Opt {
            short: Some('P'),
            long: "parsable2",
            arg: Arg::No,
        },
        Opt {
            short: Some('o'),
            long: "format",
            arg: Arg::Required,
        },
        Opt {
            short: Some('e'),
            long: "helpformat",
            arg: Arg::No,
        },
        Opt {
            short: Some('m'),
            long: "partition",
            arg: Arg::No,
        },
    ]
};

/// Options of sshare's table that differ from Slurm's (for [`crate::compat`]).
pub(crate) const SSHARE_NOTES: &[(&str, crate::compat::Support)] = &[
    (
        "all",
        crate::compat::Support::Differs("every user visible to the caller is always shown"),
    ),
    (
        "clusters",
        crate::compat::Support::Differs("one cluster per controller: the name is not checked"),
    ),
    (
        "verbose",
        crate::compat::Support::Differs("prints nothing more"),
    ),
    (
        "format",
        crate::compat::Support::Differs(
            "every field but GrpTRESRaw (usage is kept for CPUs only, as RawUsage)",
        ),
    ),
];

/// Options of sprio's table that differ from Slurm's (for [`crate::compat`]).
pub(crate) const SPRIO_NOTES: &[(&str, crate::compat::Support)] = &[
    (
        "local",
        crate::compat::Support::Differs("no federations: nothing to add"),
    ),
    (
        "clusters",
        crate::compat::Support::Differs("one cluster per controller: the name is not checked"),
    ),
    (
        "verbose",
        crate::compat::Support::Differs("prints nothing more"),
    ),
];

/// `sshare`'s command line (without `--help`, `--usage`, `-V`).
pub fn sshare_args(args: &[String]) -> Result<SshareArgs, String> {
    use crate::fmt::Parsed;
    let mut a = SshareArgs::default();
    // `-e` prints and ends where it stands, as Slurm's: what follows it is
    // not read (nor refused).
    let end = args
        .iter()
        .position(|w| w == "-e" || w == "--helpformat")
        .map_or(args.len(), |i| i + 1);
    // Every -o's text, joined, is checked once all is read (as Slurm's).
    let mut format: Option<String> = None;
    for p in crate::fmt::getopt("sshare", &args[..end], &[SSHARE_OPTS, REPORT_OPTS].concat())? {
        match p {
            Parsed::Opt("accounts", Some(v)) => a.accounts = crate::fmt::split_list(&v),
            Parsed::Opt("users", Some(v)) => a.users = user_list(&v)?,
            Parsed::Opt("Users", _) => a.users_only = true,
            Parsed::Opt("long", _) => a.long = true,
            Parsed::Opt("noheader" | "", _) => a.noheader = true,
            Parsed::Opt("parsable", _) => a.parsable = Some(Parsable::Trailing),
            Parsed::Opt("parsable2", _) => a.parsable = Some(Parsable::Plain),
            Parsed::Opt("clusters", Some(v)) => a.cluster = Some(v),
            Parsed::Opt("format", Some(v)) => {
                format = Some(match format {
                    Some(f) => format!("{f},{v}"),
                    None => v,
                })
            }
            Parsed::Opt("partition", _) => a.partition = true,
            Parsed::Opt("helpformat", _) => {
                a.help_format = true;
                return Ok(a);
            }
            Parsed::Opt(_, _) => {}
            Parsed::Word(w) => return Err(format!("Unknown argument: {w}")),
        }
    }
    if let Some(f) = format {
        a.format = Some(sshare_format(&f)?);
    }
    // `-m` without `-o`: the usual columns with Partition after User.
    if a.partition && a.format.is_none() {
        let mut spec = String::from("Account,User,Partition,RawShares,NormShares,RawUsage,");
        if a.long {
            spec.push_str("NormUsage,");
        }
        spec.push_str("EffectvUsage,FairShare");
        if a.long {
            spec.push_str(",LevelFS,GrpTRESMins,TRESRunMins");
        }
        a.format = Some(sshare_format(&spec)?);
    }
    Ok(a)
}

impl SshareArgs {
    /// The rows asked for, in their order: with `-A`, those accounts'
    /// rows and the users under them; with `-u`, of the users' rows only
    /// those users'; with `-U`, no account rows.
    pub fn select(&self, rows: Vec<ShareInfo>) -> Vec<ShareInfo> {
        rows.into_iter()
            .filter(|r| self.accounts.is_empty() || self.accounts.contains(&r.account))
            .filter(|r| match &r.user {
                Some(u) => self.users.is_empty() || self.users.iter().any(|w| same_user(w, u)),
                None => !self.users_only,
            })
            .collect()
    }
}

/// `--json[=parser]` or `--yaml[=parser]` on the command line (checked).
fn format_flag(args: &[String]) -> Result<bool, String> {
    format_flag_env(args, &|k| std::env::var(k).ok())
}

/// [`format_flag`], `SLURM_JSON`/`SLURM_YAML` as `env` gives them.
pub(crate) fn format_flag_env(
    args: &[String],
    env: &dyn Fn(&str) -> Option<String>,
) -> Result<bool, String> {
    let mut on = crate::jsonout::env_wants(env)?;
    for a in args {
        for f in ["--json", "--yaml"] {
            if a == f || a.starts_with(&format!("{f}=")) {
                crate::jsonout::check_parser(a.split_once('=').map(|x| x.1))?;
                on = true;
            }
        }
    }
    Ok(on)
}

/// `sprio --json`: slurmrestd's v0.0.44 document has no priority-factor
/// response, so the body carries sprio's own columns (factors as sprio
/// weighs them) and the weights, in the usual envelope.
pub fn sprio_fields(
    jobs: &[slurm_proto::JobPriority],
    weights: &[(String, u32)],
) -> serde_json::Map<String, serde_json::Value> {
    use serde_json::json;
    let list: Vec<serde_json::Value> = jobs
        .iter()
        .map(|j| {
            json!({
                "job_id": j.job_id,
                "partition": j.partition,
                "user": j.user,
                "priority": j.priority,
                "factors": {
                    "site": j.site,
                    "age": j.age,
                    "association": j.assoc,
                    "fairshare": j.fairshare,
                    "job_size": j.job_size,
                    "partition": j.partition_factor,
                    "qos": j.qos,
                    "nice": j.nice,
                    "tres": slurm_openapi::dbjson::tres_list(&j.tres),
                },
            })
        })
        .collect();
    let w: serde_json::Map<String, serde_json::Value> =
        weights.iter().map(|(k, v)| (k.clone(), json!(v))).collect();
    let mut m = serde_json::Map::new();
    m.insert("jobs".into(), serde_json::Value::Array(list));
    m.insert("weights".into(), serde_json::Value::Object(w));
    m
}

/// What `sprio` was asked for.
#[derive(Debug, Default, PartialEq)]
pub struct SprioArgs {
    pub long: bool,
    pub noheader: bool,
    /// `-j`: these jobs only (`-j` alone: every job).
    pub jobs: Vec<u32>,
    /// `-u`: these users' jobs only.
    pub users: Vec<String>,
    /// `-p`: jobs in these partitions only.
    pub partitions: Vec<String>,
    /// `-M`: the cluster asked for.
    pub cluster: Option<String>,
    /// `-n`: normalized factors.
    pub norm: bool,
    /// `-w`: the weights only.
    pub weights: bool,
    /// `-o`: the layout.
    pub format: Option<String>,
    /// `-S`: the order.
    pub sort: Option<String>,
    /// `--federation`, `--sibling`, `--local` (or `SPRIO_FEDERATION`,
    /// `SPRIO_SIBLING`, `SPRIO_LOCAL`; `SLURM_CLUSTERS` means local): with
    /// no federation every job is this cluster's; `--sibling` without
    /// `--local` adds its CLUSTER column, as Slurm's.
    pub federation: bool,
    pub sibling: bool,
    pub local: bool,
}

pub(crate) const SPRIO_OPTS: &[crate::fmt::Opt] = {
    use crate::fmt::{Arg, Opt};
    &[
        Opt {
            short: Some('j'),
            long: "jobs",
            arg: Arg::Optional,
        },
        Opt {
            short: Some('u'),
            long: "user",
            arg: Arg::Required,
        },
        Opt {
            short: None,
            long: "users",
            arg: Arg::Required,
        },
        Opt {
            short: Some('p'),
            long: "partition",
            arg: Arg::Required,
        },
        Opt {
            short: Some('l'),
            long: "long",
            arg: Arg::No,
        },
        Opt {
            short: Some('h'),
            long: "noheader",
            arg: Arg::No,
        },
        Opt {
            short: None,
            long: "local",
            arg: Arg::No,
        },
        Opt {
            short: None,
            long: "federation",
            arg: Arg::No,
        },
        Opt {
            short: None,
            long: "sibling",
            arg: Arg::No,
        },
        Opt {
            short: Some('n'),
            long: "norm",
            arg: Arg::No,
        },
        Opt {
            short: Some('w'),
            long: "weights",
            arg: Arg::No,
        },
        Opt {
            short: Some('o'),
            long: "format",
            arg: Arg::Required,
        },
        Opt {
            short: Some('S'),
            long: "sort",
            arg: Arg::Required,
        },
    ]
};

/// `sprio`'s command line (without `--help`, `--usage`, `-V`, answered
/// first); the error names what is wrong.
pub fn sprio_args(args: &[String]) -> Result<SprioArgs, String> {
    sprio_args_env(args, &|k| std::env::var(k).ok())
}

/// [`sprio_args`] with the environment as `env` gives it: `SPRIO_FORMAT`
/// (as `-o`) and `SLURM_CLUSTERS` (as `-M`); options win.
pub fn sprio_args_env(
    args: &[String],
    env: &dyn Fn(&str) -> Option<String>,
) -> Result<SprioArgs, String> {
    use crate::fmt::Parsed;
    let mut a = SprioArgs {
        format: env("SPRIO_FORMAT").filter(|f| !f.is_empty()),
        cluster: env("SLURM_CLUSTERS").filter(|c| !c.is_empty()),
        federation: env("SPRIO_FEDERATION").is_some(),
        sibling: env("SPRIO_SIBLING").is_some(),
        ..SprioArgs::default()
    };
    a.local = a.cluster.is_some() || env("SPRIO_LOCAL").is_some();
    for p in crate::fmt::getopt("sprio", args, &[SPRIO_OPTS, REPORT_OPTS].concat())? {
        match p {
            Parsed::Opt("jobs", Some(v)) => {
                for w in crate::fmt::split_list(&v) {
                    a.jobs.push(
                        w.parse()
                            .map_err(|_| format!("Invalid job id specified: {w}"))?,
                    );
                }
            }
            Parsed::Opt("user" | "users", Some(v)) => a.users = user_list(&v)?,
            Parsed::Opt("partition", Some(v)) => a.partitions = crate::fmt::split_list(&v),
            Parsed::Opt("long", _) => a.long = true,
            Parsed::Opt("noheader", _) => a.noheader = true,
            Parsed::Opt("clusters", Some(v)) => {
                a.cluster = Some(v);
                a.local = true;
            }
            Parsed::Opt("local", _) => a.local = true,
            Parsed::Opt("federation", _) => a.federation = true,
            Parsed::Opt("sibling", _) => a.sibling = true,
            Parsed::Opt("norm", _) => a.norm = true,
            Parsed::Opt("weights", _) => a.weights = true,
            Parsed::Opt("format", Some(v)) => a.format = Some(v),
            Parsed::Opt("sort", Some(v)) => a.sort = Some(v),
            Parsed::Opt(_, _) => {}
            Parsed::Word(w) => return Err(format!("Unknown argument: {w}")),
        }
    }
    Ok(a)
}

impl SprioArgs {
    /// Whether `j` is among the jobs asked for.
    pub fn wants(&self, j: &JobPriority) -> bool {
        (self.jobs.is_empty() || self.jobs.contains(&j.job_id))
            && (self.users.is_empty() || self.users.iter().any(|u| same_user(u, &j.user)))
            && (self.partitions.is_empty() || self.partitions.contains(&j.partition))
    }
}

/// A command line refused: getopt's own words (they name the program) and
/// the hint, as Slurm's commands print them; the rest as an error.
fn usage_error(prog: &str, e: &str) {
    if e.starts_with(&format!("{prog}: ")) {
        eprintln!("{e}\nTry \"{prog} --help\" for more information");
    } else {
        eprintln!("{prog}: error: {e}");
    }
}

pub fn sprio_main() -> i32 {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if let Some(code) = version_or_help(&args, "sprio") {
        return code;
    }
    let opts = match sprio_args(&args) {
        Ok(o) => o,
        Err(e) => {
            usage_error("sprio", &e);
            return 1;
        }
    };
    let noheader = opts.noheader;
    let conf = match common::load_conf("sprio") {
        Ok(c) => c,
        Err(code) => return code,
    };
    if let Some(c) = opts.cluster.as_ref().filter(|c| **c != conf.cluster_name) {
        eprintln!(
            "sprio: error: Invalid cluster name: {c} (this is {})",
            conf.cluster_name
        );
        return 1;
    }
    if conf.priority_type != "priority/multifactor" {
        eprintln!("You are not running a supported priority plugin\n({}).\nOnly 'priority/multifactor' is supported.", conf.priority_type);
        return 1;
    }
    let json = match format_flag(&args) {
        Ok(j) => j,
        Err(e) => {
            eprintln!("sprio: error: {e}");
            return 1;
        }
    };
    let answer = call(&common::client(&conf), RequestBody::GetPriorities).map(|r| match r {
        Response::Priorities { jobs, weights } => Response::Priorities {
            jobs: jobs.into_iter().filter(|j| opts.wants(j)).collect(),
            weights,
        },
        other => other,
    });
    match answer {
        Ok(Response::Priorities { jobs, weights }) if json => {
            let fields = sprio_fields(&jobs, &weights);
            let text = crate::jsonout::fields_text("sprio", &args, &conf.cluster_name, fields);
            print!("{text}");
            0
        }
        Ok(Response::Priorities { mut jobs, weights }) => {
            if let Some(spec) = &opts.sort {
                if let Err(e) = sort_sprio(&mut jobs, &weights, spec) {
                    eprintln!("sprio: error: {e}");
                    return 1;
                }
            }
            let format = opts.format.clone().unwrap_or_else(|| {
                sprio_format_for(
                    &weights,
                    opts.long,
                    opts.norm,
                    opts.sibling && !opts.local,
                    !opts.users.is_empty(),
                )
            });
            let layout = SprioLayout {
                format: &format,
                noheader,
                weights_only: opts.weights,
                cluster: &conf.cluster_name,
            };
            match render_sprio_as(&jobs, &weights, &layout) {
                Ok(text) => {
                    print!("{text}");
                    0
                }
                Err(e) => {
                    eprintln!("sprio: error: {e}");
                    1
                }
            }
        }
        Ok(_) => 1,
        Err(e) => {
            eprintln!("sprio: error: {e}");
            1
        }
    }
}

pub fn sshare_main() -> i32 {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if let Some(code) = version_or_help(&args, "sshare") {
        return code;
    }
    let json = match format_flag(&args) {
        Ok(j) => j,
        Err(e) => {
            eprintln!("sshare: error: {e}");
            return 1;
        }
    };
    let opts = match sshare_args(&args) {
        Ok(o) => o,
        Err(e) => {
            usage_error("sshare", &e);
            return 1;
        }
    };
    if opts.help_format {
        print!("{}", sshare_help_format());
        return 0;
    }
    let conf = match common::load_conf("sshare") {
        Ok(c) => c,
        Err(code) => return code,
    };
    if let Some(c) = opts.cluster.as_ref().filter(|c| **c != conf.cluster_name) {
        eprintln!(
            "sshare: error: Invalid cluster name: {c} (this is {})",
            conf.cluster_name
        );
        return 1;
    }
    match call(&common::client(&conf), RequestBody::GetShares) {
        Ok(Response::Shares(rows)) if json => {
            let rows = opts.select(rows);
            let argv: Vec<String> = std::iter::once("sshare".to_string())
                .chain(args.iter().cloned())
                .collect();
            print!(
                "{}",
                crate::jsonout::render(
                    crate::jsonout::Body::Shares(&rows, &[], &[]),
                    &conf.cluster_name,
                    &argv
                )
            );
            0
        }
        Ok(Response::Shares(rows)) => {
            let rows = opts.select(rows);
            if let Some(fields) = &opts.format {
                print!(
                    "{}",
                    render_sshare_fields(&rows, fields, &opts, &conf.cluster_name)
                );
            } else if opts.parsable.is_some() {
                print!("{}", render_sshare_parsable(&rows, &opts));
            } else {
                print!("{}", render_sshare(&rows, opts.long, opts.noheader));
            }
            0
        }
        Ok(_) => 1,
        Err(e) => {
            eprintln!("sshare: error: {e}");
            1
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sprio_reads_its_environment_and_takes_users_and_json_from_it() {
        let a = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        let env = |k: &str| match k {
            "SPRIO_FORMAT" => Some("%i %Y".to_string()),
            "SLURM_CLUSTERS" => Some("other".to_string()),
            "SLURM_JSON" => Some(String::new()),
            _ => None,
        };
        let o = sprio_args_env(&a(&["--users=root"]), &env).unwrap();
        assert_eq!(o.format.as_deref(), Some("%i %Y"));
        assert_eq!(o.cluster.as_deref(), Some("other"));
        assert_eq!(o.users, vec!["root"]);
        let o = sprio_args_env(&a(&["-o", "%i", "-M", "local"]), &env).unwrap();
        assert_eq!(
            (o.format.as_deref(), o.cluster.as_deref()),
            (Some("%i"), Some("local"))
        );
        assert!(format_flag_env(&[], &env).unwrap());
        assert!(!format_flag_env(&[], &|_| None).unwrap());
        let bad = |k: &str| (k == "SLURM_JSON").then(|| "v0.0.1".to_string());
        assert!(format_flag_env(&[], &bad)
            .unwrap_err()
            .contains("SLURM_JSON"));
    }

    #[test]
    fn sshare_helpformat_lists_the_fields_as_slurms() {
        let a = sshare_args(&["-e".to_string()]).unwrap();
        assert!(a.help_format);
        // Done where it stands: what follows is not read, a format before
        // it not checked (as Slurm's, which checks formats after reading
        // all).
        let args = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        assert!(
            sshare_args(&args(&["-e", "-o", "Bogus"]))
                .unwrap()
                .help_format
        );
        assert!(sshare_args(&args(&["-e", "--bogus"])).unwrap().help_format);
        assert!(
            sshare_args(&args(&["-o", "Bogus", "-e"]))
                .unwrap()
                .help_format
        );
        assert!(sshare_args(&args(&["--bogus", "-e"])).is_err());
        // Every -o counts, joined.
        let a = sshare_args(&args(&["-o", "Account", "-o", "User"])).unwrap();
        assert_eq!(
            a.format
                .map(|f| f.iter().map(|(n, _)| *n).collect::<Vec<_>>()),
            Some(vec!["Account", "User"])
        );
        assert!(sshare_args(&args(&["-o", "Account", "-o", "Bogus"])).is_err());
        assert_eq!(
            sshare_help_format(),
            format!(
                "{:<17} {:<17} {:<17} {:<17}\n{:<17} {:<17} {:<17} {:<17}\n{:<17} {:<17} {:<17} {:<17}\n{:<17} {:<17}\n",
                "Account",
                "Cluster",
                "EffectvUsage",
                "FairShare",
                "GrpTRESMins",
                "ID",
                "LevelFS",
                "NormShares",
                "NormUsage",
                "Partition",
                "RawShares",
                "RawUsage",
                "TRESRunMins",
                "User"
            )
        );
        // Every field listed is one -o takes.
        for f in sshare_help_format().split_whitespace() {
            assert!(sshare_format(f).is_ok(), "{f}");
        }
    }

    #[test]
    fn sprio_sibling_adds_the_cluster_column_unless_local() {
        let a = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        let none = |_: &str| None;
        let o = sprio_args_env(&a(&["--sibling"]), &none).unwrap();
        assert!(o.sibling && !o.local);
        let sib = |k: &str| (k == "SPRIO_SIBLING").then(String::new);
        let o = sprio_args_env(&a(&[]), &sib).unwrap();
        assert!(o.sibling);
        let o = sprio_args_env(&a(&["--sibling", "--local"]), &none).unwrap();
        assert!(o.local);
        // SLURM_CLUSTERS (as -M) means local, as Slurm's.
        let clusters = |k: &str| (k == "SLURM_CLUSTERS").then(|| "c".to_string());
        assert!(sprio_args_env(&a(&["--sibling"]), &clusters).unwrap().local);
        let fed = |k: &str| (k == "SPRIO_FEDERATION").then(String::new);
        assert!(sprio_args_env(&a(&[]), &fed).unwrap().federation);
        let w: Vec<(String, u32)> = vec![("age".into(), 1000)];
        assert_eq!(
            sprio_format_for(&w, false, false, true, true),
            "%.15i %9r %.8c %.8u %.10Y %.10S %.10A"
        );
        assert_eq!(
            sprio_format_for(&w, false, false, false, false),
            sprio_default_format(&w, false, false)
        );
    }

    #[test]
    fn sprio_options_select_jobs_users_and_partitions() {
        let args = |a: &[&str]| sprio_args(&a.iter().map(|s| s.to_string()).collect::<Vec<_>>());
        let a = args(&["-j1008,1009", "-u", "root", "--partition=debug", "-l"]).unwrap();
        assert_eq!(a.jobs, vec![1008, 1009]);
        assert_eq!(a.users, vec!["root".to_string()]);
        assert_eq!(a.partitions, vec!["debug".to_string()]);
        assert!(a.long && !a.noheader);
        assert_eq!(args(&["--jobs"]).unwrap().jobs, Vec::<u32>::new());
        assert_eq!(
            args(&["-j", "12x"]).unwrap_err(),
            "Invalid job id specified: 12x"
        );
        assert_eq!(
            args(&["-u", "no-such-user-xyz"]).unwrap_err(),
            "Invalid user: no-such-user-xyz"
        );
        assert!(args(&["stray"]).unwrap_err().contains("stray"));
        assert!(args(&["--bogus"]).is_err());
        let job = |id, user: &str, part: &str| JobPriority {
            job_id: id,
            user: user.into(),
            partition: part.into(),
            ..Default::default()
        };
        let a = args(&["-j1,2", "-p", "debug"]).unwrap();
        assert!(a.wants(&job(1, "root", "debug")));
        assert!(!a.wants(&job(3, "root", "debug")));
        assert!(!a.wants(&job(2, "root", "gpu")));
        // A user by name or by number.
        let a = args(&["-u", "0"]).unwrap();
        assert!(a.wants(&job(1, "root", "debug")));
        assert!(!a.wants(&job(1, "nobody", "debug")));
    }

    #[test]
    fn sshare_options_pick_accounts_users_and_parsable_output() {
        let args = |a: &[&str]| sshare_args(&a.iter().map(|s| s.to_string()).collect::<Vec<_>>());
        let row = |account: &str, user: Option<&str>, depth| ShareInfo {
            account: account.into(),
            user: user.map(str::to_string),
            depth,
            raw_shares: "1".into(),
            norm_shares: 0.5,
            raw_usage: 12.4,
            effective_usage: 0.25,
            fairshare: user.map(|_| 0.75),
            level_fs: None,
            partition: None,
            norm_usage: 0.124,
            ..Default::default()
        };
        let rows = vec![
            row("root", None, 0),
            row("root", Some("root"), 1),
            row("phys", None, 1),
            row("phys", Some("nobody"), 2),
            row("chem", None, 1),
            row("chem", Some("root"), 2),
        ];
        let pick = |a: &[&str]| {
            args(a)
                .unwrap()
                .select(rows.clone())
                .iter()
                .map(|r| format!("{}/{}", r.account, r.user.clone().unwrap_or_default()))
                .collect::<Vec<_>>()
        };
        assert_eq!(pick(&["-a"]).len(), 6);
        assert_eq!(pick(&["-A", "phys"]), ["phys/", "phys/nobody"]);
        assert_eq!(
            pick(&["--users=root"]),
            ["root/", "root/root", "phys/", "chem/", "chem/root"]
        );
        assert_eq!(pick(&["-U", "-u", "0"]), ["root/root", "chem/root"]);
        assert_eq!(
            args(&["-u", "no-such-user-xyz"]).unwrap_err(),
            "Invalid user: no-such-user-xyz"
        );
        assert!(args(&["stray"]).is_err());
        // -P: '|' between columns; -p: and one at the end.
        let a = args(&["-P", "-A", "phys"]).unwrap();
        let out = render_sshare_parsable(&a.select(rows.clone()), &a);
        assert_eq!(
            out,
            "Account|User|RawShares|NormShares|RawUsage|EffectvUsage|FairShare\n\
             \x20phys||1|0.500000|12|0.250000|\n\
             \x20\x20phys|nobody|1|0.500000|12|0.250000|0.750000\n"
        );
        let a = args(&["-p", "-n", "-U"]).unwrap();
        let out = render_sshare_parsable(&a.select(rows.clone()), &a);
        assert!(out.lines().all(|l| l.ends_with('|')), "{out}");
        assert_eq!(out.lines().count(), 3);
    }

    #[test]
    fn sprio_formats_sorts_normalizes_and_shows_weights() {
        let args = |a: &[&str]| sprio_args(&a.iter().map(|s| s.to_string()).collect::<Vec<_>>());
        let job = |id, priority, age: f64| JobPriority {
            job_id: id,
            partition: "debug".into(),
            user: "alice".into(),
            priority,
            age,
            fairshare: 2500.0,
            ..Default::default()
        };
        let w = vec![("age".to_string(), 1000), ("fairshare".to_string(), 10000)];
        let mut jobs = vec![job(7, 100, 250.0), job(8, 300, 750.0), job(9, 200, 500.0)];
        let a = args(&["-S", "-Y", "-o", "%i|%Y|%A|%a|%f|%u"]).unwrap();
        sort_sprio(&mut jobs, &w, a.sort.as_deref().unwrap()).unwrap();
        let l = SprioLayout {
            format: a.format.as_deref().unwrap(),
            noheader: false,
            weights_only: false,
            cluster: "c",
        };
        assert_eq!(
            render_sprio_as(&jobs, &w, &l).unwrap(),
            "JOBID|PRIORITY|AGE|AGE|FAIRSHARE|USER\n\
             8|300|750|0.7500000|0.2500000|alice\n\
             9|200|500|0.5000000|0.2500000|alice\n\
             7|100|250|0.2500000|0.2500000|alice\n"
        );
        sort_sprio(&mut jobs, &w, "i").unwrap();
        assert_eq!(jobs.iter().map(|j| j.job_id).collect::<Vec<_>>(), [7, 8, 9]);
        assert!(sort_sprio(&mut jobs, &w, "Z").is_err());
        // -n: Slurm's layout of the normalized factors (no site column);
        // -l: its long layouts, the account and QOS name among them.
        let a = args(&["-n"]).unwrap();
        assert!(a.norm);
        assert_eq!(
            sprio_default_format(&w, false, true),
            "%.15i %9r %10y %10a %10f"
        );
        let long = sprio_default_format(&w, true, false);
        assert!(
            long.starts_with("%.15i %9r %.8u %.8o %.10Y %.10S"),
            "{long}"
        );
        let mut named = jobs.clone();
        for j in &mut named {
            j.account = "phys".into();
            j.qos_name = "normal".into();
        }
        let l = SprioLayout {
            format: "%i|%o|%n",
            noheader: false,
            weights_only: false,
            cluster: "c",
        };
        let out = render_sprio_as(&named[..1], &w, &l).unwrap();
        assert_eq!(
            out,
            format!("JOBID|ACCOUNT|QOSNAME\n{}|phys|normal\n", named[0].job_id)
        );
        // -w: the weights under the same columns.
        let a = args(&["--weights"]).unwrap();
        let format = sprio_default_format(&w, false, false);
        let l = SprioLayout {
            format: &format,
            noheader: false,
            weights_only: a.weights,
            cluster: "c",
        };
        assert_eq!(
            render_sprio_as(&jobs, &w, &l).unwrap(),
            "          JOBID PARTITION   PRIORITY       SITE        AGE  FAIRSHARE\n        Weights                               1       1000      10000\n"
        );
        // An unknown letter is refused, naming it.
        let l = SprioLayout {
            format: "%i %z",
            noheader: true,
            weights_only: false,
            cluster: "c",
        };
        assert_eq!(
            render_sprio_as(&jobs, &w, &l).unwrap_err(),
            "Invalid job format specification: z"
        );
    }

    #[test]
    fn sshare_format_picks_fields_and_widths() {
        let args = |a: &[&str]| sshare_args(&a.iter().map(|s| s.to_string()).collect::<Vec<_>>());
        let rows = vec![
            ShareInfo {
                account: "phys".into(),
                depth: 1,
                raw_shares: "1".into(),
                norm_shares: 0.5,
                ..Default::default()
            },
            ShareInfo {
                account: "phys".into(),
                user: Some("nobody".into()),
                depth: 2,
                raw_shares: "1".into(),
                raw_usage: 12.4,
                fairshare: Some(0.75),
                ..Default::default()
            },
        ];
        let a = args(&["-o", "account%8,user,fairshare%9,cluster"]).unwrap();
        assert_eq!(
            render_sshare_fields(&rows, a.format.as_ref().unwrap(), &a, "c"),
            "Account        User FairShare    Cluster \n\
             -------- ---------- --------- ---------- \n\
             \x20phys                                  c \n\
             \x20\x20phys       nobody  0.750000          c \n"
        );
        let a = args(&["-P", "-n", "--format=User,RawUsage"]).unwrap();
        assert_eq!(
            render_sshare_fields(&rows, a.format.as_ref().unwrap(), &a, "c"),
            "|0\nnobody|12\n"
        );
        assert_eq!(
            args(&["-o", "Account,Bogus"]).unwrap_err(),
            "Invalid field requested: \"Bogus\""
        );
        assert!(args(&["-o", "User%x"]).is_err());
        // Names begun are taken as Slurm's: the first field so begun.
        let names = |spec: &str| -> Vec<&str> {
            sshare_format(spec)
                .unwrap()
                .into_iter()
                .map(|(n, _)| n)
                .collect()
        };
        assert_eq!(
            names("Grp,TRES,P,id,u,raw,norm"),
            [
                "GrpTRESMins",
                "TRESRunMins",
                "Partition",
                "ID",
                "User",
                "RawShares",
                "NormShares"
            ]
        );
        assert_eq!(sshare_format("Partition").unwrap(), [("Partition", 12)]);
    }

    #[test]
    fn sprio_shows_weighted_factor_columns() {
        let j = JobPriority {
            job_id: 12,
            partition: "debug".into(),
            user: "alice".into(),
            priority: 1500,
            age: 500.4,
            fairshare: 1000.0,
            ..Default::default()
        };
        let w = vec![("age".to_string(), 1000), ("fairshare".to_string(), 10000)];
        assert_eq!(
            render_sprio(&[j], &w, false, false),
            "          JOBID PARTITION   PRIORITY       SITE        AGE  FAIRSHARE\n             12 debug           1500          0        500       1000\n"
        );
    }

    #[test]
    fn sshare_layout() {
        let rows = vec![
            ShareInfo {
                account: "root".into(),
                depth: 0,
                raw_shares: "1".into(),
                norm_shares: 1.0,
                raw_usage: 100.0,
                effective_usage: 1.0,
                fairshare: None,
                level_fs: None,
                user: None,
                partition: None,
                norm_usage: 1.0,
                ..Default::default()
            },
            ShareInfo {
                account: "default".into(),
                user: Some("alice".into()),
                depth: 1,
                raw_shares: "1".into(),
                norm_shares: 1.0,
                raw_usage: 100.0,
                effective_usage: 1.0,
                fairshare: Some(1.0),
                level_fs: Some(1.0),
                partition: Some("gpu".into()),
                norm_usage: 1.0,
                ..Default::default()
            },
        ];
        let out = render_sshare(&rows, false, false);
        let lines: Vec<&str> = out.lines().collect();
        assert_eq!(
            lines[2],
            format!(
                "{:<20} {:>10} {:>10} {:>11} {:>11} {:>13} {:>10} ",
                "root", "", "1", "1.000000", "100", "1.000000", ""
            )
        );
        assert_eq!(
            lines[3],
            format!(
                "{:<20} {:>10} {:>10} {:>11} {:>11} {:>13} {:>10} ",
                " default", "alice", "1", "1.000000", "100", "1.000000", "1.000000"
            )
        );
        // -m: the same columns with the user association's partition after
        // User (the same layout as without it, but for that column).
        let m = sshare_args(&["-m".to_string()]).unwrap();
        let out = render_sshare_fields(&rows, m.format.as_ref().unwrap(), &m, "c");
        let lines: Vec<&str> = out.lines().collect();
        assert_eq!(
            lines[0],
            format!(
                "{:<20} {:>10} {:>12} {:>10} {:>11} {:>11} {:>13} {:>10} ",
                "Account",
                "User",
                "Partition",
                "RawShares",
                "NormShares",
                "RawUsage",
                "EffectvUsage",
                "FairShare"
            )
        );
        assert_eq!(
            lines[3],
            format!(
                "{:<20} {:>10} {:>12} {:>10} {:>11} {:>11} {:>13} {:>10} ",
                " default", "alice", "gpu", "1", "1.000000", "100", "1.000000", "1.000000"
            )
        );
        assert_eq!(
            lines[2],
            format!(
                "{:<20} {:>10} {:>12} {:>10} {:>11} {:>11} {:>13} {:>10} ",
                "root", "", "", "1", "1.000000", "100", "1.000000", ""
            ),
            "an account row has an empty Partition"
        );
        let ml = sshare_args(&["-l".to_string(), "--part".to_string()]).unwrap();
        assert_eq!(
            ml.format.as_ref().unwrap().len(),
            12,
            "-l adds NormUsage, LevelFS, GrpTRESMins and TRESRunMins"
        );
        // -l: the TRES limit and what running jobs have left, in minutes,
        // each in 30 columns (cut with `+`, as Slurm's).
        let mut rows = rows;
        for r in &mut rows {
            r.tres_names = [
                "cpu", "mem", "energy", "node", "billing", "fs/disk", "vmem", "pages",
            ]
            .map(String::from)
            .to_vec();
            r.tres_run_secs = vec![720, 360_000, 0, 360, 720, 0, 0, 0];
            r.tres_grp_mins = vec![u64::MAX; 8];
        }
        rows[1].tres_grp_mins[0] = 600;
        let out = render_sshare(&rows, true, false);
        let lines: Vec<&str> = out.lines().collect();
        assert!(
            lines[0].ends_with(
                "   LevelFS                    GrpTRESMins                    TRESRunMins "
            ),
            "{out}"
        );
        assert!(
            lines[1].ends_with(&format!("---------- {0} {0} ", "-".repeat(30))),
            "{out}"
        );
        assert!(
            lines[3].ends_with(&format!(
                " {:>30} {:>30} ",
                "cpu=600", "cpu=12,mem=6000,energy=0,node+"
            )),
            "{out}"
        );
        assert!(
            lines[2].ends_with(&format!(
                " {:>30} {:>30} ",
                "", "cpu=12,mem=6000,energy=0,node+"
            )),
            "{out}"
        );
        let p = sshare_args(&["-l".to_string(), "-P".to_string()]).unwrap();
        let out = render_sshare_parsable(&rows, &p);
        let lines: Vec<&str> = out.lines().collect();
        assert!(
            lines[0].ends_with("|LevelFS|GrpTRESMins|TRESRunMins"),
            "{out}"
        );
        assert!(
            lines[2].ends_with(
                "|cpu=600|cpu=12,mem=6000,energy=0,node=6,billing=12,fs/disk=0,vmem=0,pages=0"
            ),
            "{out}"
        );
        // -o ID: the association's id (none without accounting).
        rows[1].assoc_id = Some(4);
        let o = sshare_args(&["-o".to_string(), "User,ID".to_string(), "-P".to_string()]).unwrap();
        let out = render_sshare_fields(&rows, o.format.as_ref().unwrap(), &o, "c");
        assert_eq!(out, "User|ID\n|\nalice|4\n");
        // A number wider than its column widens it.
        rows[1].assoc_id = Some(12_345_678);
        let o = sshare_args(&["-o".to_string(), "ID".to_string(), "-n".to_string()]).unwrap();
        let out = render_sshare_fields(&rows, o.format.as_ref().unwrap(), &o, "c");
        assert_eq!(out, "       \n12345678 \n");
    }
}
