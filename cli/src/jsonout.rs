//! `--json` and `--yaml` for the commands: the same bodies as slurmrestd's
//! responses (`openapi/slurmctld` and `openapi/slurmdbd`, data_parser
//! v0.0.44), built with its writers, with `meta.command` naming the command
//! line. A command line with `--yaml` gets the same body as YAML.

use serde_json::{json, Map, Value};
use slurm_openapi::openapi as oa;
use slurm_proto::{JobRecord, NodeRecord, PartitionRecord, ReservationRecord};

/// What a command prints with `--json`.
pub enum Body<'a> {
    Jobs(&'a [&'a JobRecord], i64, Option<i64>),
    Nodes(&'a [&'a NodeRecord], i64),
    Partitions(&'a [&'a PartitionRecord], i64),
    Reservations(&'a [&'a ReservationRecord], i64),
    /// Fair-share rows, with the accounts and users asked for.
    Shares(&'a [slurm_proto::ShareInfo], &'a [String], &'a [String]),
    /// Fields already written (the `slurmdb` bodies: `jobs`, `accounts`...).
    Fields(Map<String, Value>),
}

/// `prog args...`'s `--json`/`--yaml` output of fields already written.
pub fn fields_text(
    prog: &str,
    args: &[String],
    cluster: &str,
    fields: Map<String, Value>,
) -> String {
    let argv: Vec<String> = std::iter::once(prog.to_string())
        .chain(args.iter().cloned())
        .collect();
    render(Body::Fields(fields), cluster, &argv)
}

/// Does the command line ask for YAML? `--yaml`, or with neither `--json`
/// nor `--yaml` given, `SLURM_YAML` set without `SLURM_JSON`.
pub fn wants_yaml(command: &[String]) -> bool {
    yaml_of(command, &|k| std::env::var(k).ok())
}

fn yaml_of(command: &[String], env: &dyn Fn(&str) -> Option<String>) -> bool {
    let given = |f: &str| {
        command
            .iter()
            .skip(1)
            .any(|a| a == f || a.starts_with(&format!("{f}=")))
    };
    if given("--yaml") {
        return true;
    }
    !given("--json") && env("SLURM_JSON").is_none() && env("SLURM_YAML").is_some()
}

/// `SLURM_JSON` / `SLURM_YAML`: as `--json`/`--yaml` (the value, if any,
/// naming the data parser). Whether either is set; a parser we do not
/// speak is an error.
pub fn env_wants(env: &dyn Fn(&str) -> Option<String>) -> Result<bool, String> {
    for k in ["SLURM_JSON", "SLURM_YAML"] {
        if let Some(v) = env(k) {
            check_parser(Some(&v)).map_err(|e| format!("{k}: {e}"))?;
            return Ok(true);
        }
    }
    Ok(false)
}

/// `--json[=data_parser]`: only the version we speak is accepted.
pub fn check_parser(v: Option<&str>) -> Result<(), String> {
    match v {
        None | Some("") => Ok(()),
        Some(p) if oa::DATA_PARSER.ends_with(p.trim_start_matches("data_parser/")) => Ok(()),
        Some(p) => Err(format!(
            "unknown data_parser '{p}' (this build speaks {})",
            oa::DATA_PARSER
        )),
    }
}

/// The whole response, pretty-printed with a final newline.
pub fn render(body: Body, cluster: &str, command: &[String]) -> String {
    let mut m = Map::new();
    match body {
        Body::Jobs(jobs, last, last_backfill) => {
            m.insert(
                "jobs".into(),
                Value::Array(jobs.iter().map(|j| oa::job_info(j, cluster)).collect()),
            );
            m.insert("last_backfill".into(), oa::time(last_backfill));
            m.insert("last_update".into(), oa::num(last));
        }
        Body::Nodes(nodes, last) => {
            m.insert(
                "nodes".into(),
                Value::Array(nodes.iter().map(|n| oa::node_info(n, cluster)).collect()),
            );
            m.insert("last_update".into(), oa::num(last));
        }
        Body::Partitions(parts, last) => {
            m.insert(
                "partitions".into(),
                Value::Array(
                    parts
                        .iter()
                        .map(|p| oa::partition_info(p, cluster))
                        .collect(),
                ),
            );
            m.insert("last_update".into(), oa::num(last));
        }
        Body::Shares(rows, accounts, users) => {
            m.insert(
                "shares".into(),
                oa::shares_info(rows, cluster, accounts, users),
            );
        }
        Body::Fields(f) => m.extend(f),
        Body::Reservations(rs, last) => {
            m.insert(
                "reservations".into(),
                Value::Array(rs.iter().map(|r| oa::reservation_info(r)).collect()),
            );
            m.insert("last_update".into(), oa::num(last));
        }
    }
    // SAFETY: getuid cannot fail.
    let user = slurm_common::users::user_name_or_id(unsafe { libc::getuid() });
    // SAFETY: getgid cannot fail.
    let group = slurm_common::users::group_name_or_id(unsafe { libc::getgid() });
    let client = oa::Client {
        source: String::new(),
        user,
        group,
    };
    let v = oa::envelope(
        m,
        oa::meta(cluster, Some(&client), command),
        Vec::new(),
        Vec::new(),
    );
    if wants_yaml(command) {
        return serde_yaml::to_string(&v).unwrap_or_else(|_| "{}\n".to_string());
    }
    let mut s = serde_json::to_string_pretty(&v).unwrap_or_else(|_| json!({}).to_string());
    s.push('\n');
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn environment_asks_for_json_or_yaml_and_the_command_line_wins() {
        let cmd = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        let yaml = |k: &str| (k == "SLURM_YAML").then(String::new);
        let both = |k: &str| {
            Some(k.to_string())
                .filter(|_| k.starts_with("SLURM_"))
                .map(|_| String::new())
        };
        assert!(env_wants(&yaml).unwrap());
        assert!(!env_wants(&|_| None).unwrap());
        assert!(yaml_of(&cmd(&["squeue"]), &yaml));
        assert!(!yaml_of(&cmd(&["squeue", "--json"]), &yaml));
        assert!(!yaml_of(&cmd(&["squeue"]), &both), "SLURM_JSON wins");
        assert!(yaml_of(&cmd(&["squeue", "--yaml=v0.0.44"]), &|_| None));
        let bad = |k: &str| (k == "SLURM_YAML").then(|| "nonsense".to_string());
        assert!(env_wants(&bad)
            .unwrap_err()
            .starts_with("SLURM_YAML: unknown data_parser"));
    }
}
