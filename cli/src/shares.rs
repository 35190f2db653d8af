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

/// `sprio` output: fixed columns plus one per factor with a weight.
pub fn render_sprio(
    jobs: &[JobPriority],
    weights: &[(String, u32)],
    long: bool,
    noheader: bool,
) -> String {
    let factors: Vec<(&str, &str)> = [
        ("age", "AGE"),
        ("assoc", "ASSOC"),
        ("fairshare", "FAIRSHARE"),
        ("jobsize", "JOBSIZE"),
        ("partition", "PARTITION"),
        ("qos", "QOS"),
    ]
    .into_iter()
    .filter(|(k, _)| long || weight(weights, k) > 0)
    .collect();
    let mut out = String::new();
    if !noheader {
        out.push_str(&format!("{:>15} {:<9}", "JOBID", "PARTITION"));
        if long {
            out.push_str(&format!(" {:>8}", "USER"));
        }
        out.push_str(&format!(" {:>10} {:>10}", "PRIORITY", "SITE"));
        for (_, h) in &factors {
            out.push_str(&format!(" {h:>10}"));
        }
        if long {
            out.push_str(&format!(" {:>6} {:<20}", "NICE", "TRES"));
        }
        out.push('\n');
    }
    for j in jobs {
        out.push_str(&format!("{:>15} {:<9}", j.job_id, j.partition));
        if long {
            out.push_str(&format!(" {:>8}", j.user));
        }
        out.push_str(&format!(" {:>10} {:>10}", j.priority, j.site));
        for (k, _) in &factors {
            let v = match *k {
                "age" => j.age,
                "assoc" => j.assoc,
                "fairshare" => j.fairshare,
                "jobsize" => j.job_size,
                "partition" => j.partition_factor,
                _ => j.qos,
            };
            out.push_str(&format!(" {:>10}", v.round() as i64));
        }
        if long {
            out.push_str(&format!(" {:>6} {:<20}", j.nice, j.tres));
        }
        out.push('\n');
    }
    out
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

/// `sshare` output (`-l` adds LevelFS).
pub fn render_sshare(rows: &[ShareInfo], long: bool, noheader: bool) -> String {
    let mut out = String::new();
    if !noheader {
        out.push_str("Account                    User  RawShares  NormShares    RawUsage  EffectvUsage  FairShare ");
        if long {
            out.push_str("   LevelFS ");
        }
        out.push('\n');
        out.push_str("-------------------- ---------- ---------- ----------- ----------- ------------- ---------- ");
        if long {
            out.push_str("---------- ");
        }
        out.push('\n');
    }
    for r in rows {
        let account = format!("{}{}", " ".repeat(r.depth as usize), r.account);
        out.push_str(&format!(
            "{:<20} {:>10} {:>10} {} {:>11} {} {} ",
            account.chars().take(20).collect::<String>(),
            r.user.clone().unwrap_or_default(),
            r.raw_shares,
            num(Some(r.norm_shares), 11, 6),
            r.raw_usage.round() as i64,
            num(Some(r.effective_usage), 13, 6),
            num(r.fairshare, 10, 6),
        ));
        if long {
            out.push_str(&format!("{} ", num(r.level_fs, 10, 6)));
        }
        out.push('\n');
    }
    out
}

fn flags(prog: &str) -> Result<(bool, bool), i32> {
    let (mut long, mut noheader) = (false, false);
    for a in std::env::args().skip(1) {
        match a.as_str() {
            "-l" | "--long" => long = true,
            "-h" | "--noheader" => noheader = true,
            s if s == "--json"
                || s.starts_with("--json=")
                || s == "--yaml"
                || s.starts_with("--yaml=") => {}
            "-V" | "--version" => {
                println!("slurm {}", slurm_proto::SLURM_VERSION);
                return Err(0);
            }
            "--help" | "--usage" => {
                println!("Usage: {prog} [-l] [-h]");
                return Err(0);
            }
            other => {
                eprintln!("{prog}: unrecognized option '{other}'");
                eprintln!("Try \"{prog} --help\" for more information");
                return Err(1);
            }
        }
    }
    Ok((long, noheader))
}

/// `--json[=parser]` or `--yaml[=parser]` on the command line (checked).
fn format_flag(args: &[String]) -> Result<bool, String> {
    let mut on = false;
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
                    "tres": slurmrestd::dbjson::tres_list(&j.tres),
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

pub fn sprio_main() -> i32 {
    let (long, noheader) = match flags("sprio") {
        Ok(f) => f,
        Err(code) => return code,
    };
    let conf = match common::load_conf("sprio") {
        Ok(c) => c,
        Err(code) => return code,
    };
    if conf.priority_type != "priority/multifactor" {
        eprintln!("You are not running a supported priority plugin\n({}).\nOnly 'priority/multifactor' is supported.", conf.priority_type);
        return 1;
    }
    let args: Vec<String> = std::env::args().skip(1).collect();
    let json = match format_flag(&args) {
        Ok(j) => j,
        Err(e) => {
            eprintln!("sprio: error: {e}");
            return 1;
        }
    };
    match call(&common::client(&conf), RequestBody::GetPriorities) {
        Ok(Response::Priorities { jobs, weights }) if json => {
            let fields = sprio_fields(&jobs, &weights);
            let text = crate::jsonout::fields_text("sprio", &args, &conf.cluster_name, fields);
            print!("{text}");
            0
        }
        Ok(Response::Priorities { jobs, weights }) => {
            print!("{}", render_sprio(&jobs, &weights, long, noheader));
            0
        }
        Ok(_) => 1,
        Err(e) => {
            eprintln!("sprio: error: {e}");
            1
        }
    }
}

pub fn sshare_main() -> i32 {
    let is_fmt = |a: &str| {
        ["--json", "--yaml"]
            .iter()
            .any(|f| a == *f || a.starts_with(&format!("{f}=")))
    };
    let json = std::env::args().skip(1).any(|a| is_fmt(&a));
    for a in std::env::args().skip(1).filter(|a| is_fmt(a)) {
        if let Err(e) = crate::jsonout::check_parser(a.split_once('=').map(|x| x.1)) {
            eprintln!("sshare: error: {e}");
            return 1;
        }
    }
    let (long, noheader) = match flags("sshare") {
        Ok(f) => f,
        Err(code) => return code,
    };
    let conf = match common::load_conf("sshare") {
        Ok(c) => c,
        Err(code) => return code,
    };
    match call(&common::client(&conf), RequestBody::GetShares) {
        Ok(Response::Shares(rows)) if json => {
            let argv: Vec<String> = std::iter::once("sshare".to_string())
                .chain(std::env::args().skip(1))
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
            print!("{}", render_sshare(&rows, long, noheader));
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
    }
}
