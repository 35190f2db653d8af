//! Job completion records (`JobCompType=jobcomp/filetxt`): one line per
//! ended job in `JobCompLoc`, in Slurm's `key=value` layout, written by the
//! controller and read back by `sacct -c` (`-f FILE`); or
//! (`jobcomp/script`) the program `JobCompLoc` run for each ended job with
//! the job in its environment, as Slurm's plugin runs it.

use chrono::{Local, TimeZone};
use slurm_proto::acct::{AcctJob, JobStateWire};
use slurm_proto::JobState;
use std::path::PathBuf;

/// Slurm's default `JobCompLoc` for `jobcomp/filetxt`.
pub const DEFAULT_LOC: &str = "/var/log/slurm_jobcomp.log";

/// What slurm.conf's `JobCompType` asks for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum JobCompConf {
    /// `jobcomp/none` or unset.
    None,
    /// `jobcomp/filetxt`: lines appended to this file.
    File(PathBuf),
    /// `jobcomp/script`: this program run for each ended job.
    Script(PathBuf),
    /// `jobcomp/script` without `JobCompLoc` to say what to run.
    NoScript,
    /// A plugin this implementation does not have (named as given).
    Unsupported(String),
}

impl JobCompConf {
    pub fn from_conf(conf: &crate::conf::SlurmConf) -> JobCompConf {
        match conf.get("JobCompType").map(str::trim).unwrap_or("") {
            "" | "jobcomp/none" | "none" => JobCompConf::None,
            "jobcomp/filetxt" | "filetxt" => JobCompConf::File(PathBuf::from(
                conf.get("JobCompLoc")
                    .map(str::trim)
                    .filter(|l| !l.is_empty())
                    .unwrap_or(DEFAULT_LOC),
            )),
            "jobcomp/script" | "script" => match conf
                .get("JobCompLoc")
                .map(str::trim)
                .filter(|l| !l.is_empty())
            {
                Some(l) => JobCompConf::Script(PathBuf::from(l)),
                None => JobCompConf::NoScript,
            },
            other => JobCompConf::Unsupported(other.to_string()),
        }
    }
}

/// Whether slurm.conf's `JobCompType` can be used: for `jobcomp/script`, a
/// `JobCompLoc` that is an absolute path to a script that can be run
/// (checked when the controller starts and when it is reconfigured).
pub fn check_conf(conf: &crate::conf::SlurmConf) -> Result<(), String> {
    match JobCompConf::from_conf(conf) {
        JobCompConf::NoScript => Err("jobcomp/script JobCompLoc needs to be set".into()),
        // (A relative name would be looked up where the script runs, /tmp,
        // where anyone may put a file.)
        JobCompConf::Script(p) if !p.is_absolute() => Err(format!(
            "jobcomp/script: JobCompLoc={} must be an absolute path",
            p.display()
        )),
        JobCompConf::Script(p) => check_script(&p),
        _ => Ok(()),
    }
}

/// Whether `path` is a script `jobcomp/script` can run (Slurm's checks,
/// and messages, when the plugin starts): a regular file this process may
/// execute.
pub fn check_script(path: &std::path::Path) -> Result<(), String> {
    let shown = path.display();
    let m = std::fs::metadata(path)
        .map_err(|e| format!("jobcomp/script: failed to stat {shown}: {e}"))?;
    if !m.is_file() {
        return Err(format!("jobcomp/script: {shown} isn't a regular file"));
    }
    let c = std::ffi::CString::new(path.as_os_str().as_encoded_bytes())
        .map_err(|_| format!("jobcomp/script: {shown} is not executable"))?;
    // SAFETY: access reads the NUL-terminated path only.
    if unsafe { libc::access(c.as_ptr(), libc::X_OK) } != 0 {
        return Err(format!("jobcomp/script: {shown} is not executable"));
    }
    Ok(())
}

/// An ended job, or a run of one ended by a requeue, as completion records
/// tell it.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Ended {
    pub job: AcctJob,
    /// A batch job (not an allocation made by salloc or srun).
    pub batch: bool,
    /// `--dependency` as asked.
    pub dependency: String,
    /// The highest exit status of its steps (raw wait status; Slurm's
    /// derived exit code).
    pub derived_ec: i32,
}

/// Slurm's array task id of a job that is not an array task (`NO_VAL`).
const NO_ARRAY_TASK: u32 = 0xffff_fffe;

/// The environment `jobcomp/script` runs its script with for `e`, by
/// Slurm's names (and nothing else: the controller's own environment stays
/// out, but for `TZ`, given as `tz`).
pub fn script_env(e: &Ended, cluster: &str, tz: Option<&str>) -> Vec<(String, String)> {
    let j = &e.job;
    let mut env: Vec<(String, String)> = Vec::new();
    let mut put = |k: &str, v: String| env.push((k.to_string(), v));
    put("JOBID", j.job_id.to_string());
    put("EXITCODE", code_pair(j.exit_status));
    put("DERIVED_EC", code_pair(e.derived_ec));
    put("ARRAYJOBID", j.array_job_id.unwrap_or(0).to_string());
    put(
        "ARRAYTASKID",
        j.array_task_id.unwrap_or(NO_ARRAY_TASK).to_string(),
    );
    put("UID", j.uid.to_string());
    put("GID", j.gid.to_string());
    put("START", j.start_time.unwrap_or(0).to_string());
    put("END", j.end_time.unwrap_or(0).to_string());
    put("SUBMIT", j.submit_time.to_string());
    put("ELIGIBLE", j.eligible_time.unwrap_or(0).to_string());
    put("PROCS", j.alloc_cpus.to_string());
    put("NODECNT", j.node_count.to_string());
    // (Slurm's word for an empty one.)
    let or_none = |s: &str| {
        if s.is_empty() {
            "None".to_string()
        } else {
            s.to_string()
        }
    };
    put("DB_FLAGS", or_none(&j.sched_flag));
    put("BATCH", if e.batch { "yes" } else { "no" }.to_string());
    put("CLUSTER", cluster.to_string());
    put("CONSTRAINTS", j.constraints.clone());
    let nodes = if j.nodelist.is_empty() {
        String::new()
    } else {
        crate::hostlist::compress(&j.nodelist.split(',').collect::<Vec<_>>())
    };
    put("NODES", nodes);
    put("ACCOUNT", j.account.clone());
    put("JOBNAME", j.name.clone());
    put("JOBSTATE", j.state.0.name().to_string());
    put("PARTITION", j.partition.clone());
    put("QOS", j.qos.clone());
    put("DEPENDENCY", e.dependency.clone());
    put(
        "WORK_DIR",
        if j.work_dir.is_empty() {
            "unknown".to_string()
        } else {
            j.work_dir.clone()
        },
    );
    put("RESERVATION", j.reservation.clone());
    put("USERNAME", j.user.clone());
    put("GROUPNAME", j.group.clone());
    put("STATEREASONPREV", or_none(&j.reason));
    for (k, v) in [
        ("STDIN", &j.std_in),
        ("STDOUT", &j.std_out),
        ("STDERR", &j.std_err),
    ] {
        if !v.is_empty() {
            put(k, v.clone());
        }
    }
    put("LIMIT", crate::timefmt::format_limit_scontrol(j.time_limit));
    if let Some(tz) = tz {
        put("TZ", tz.to_string());
    }
    put("PATH", "/usr/bin:/bin:/usr/sbin:/sbin".to_string());
    // (A NUL cannot be passed in an environment.)
    for (_, v) in &mut env {
        if v.contains('\0') {
            *v = v.replace('\0', "");
        }
    }
    env
}

/// The completion records of one committed batch, for their writer.
#[derive(Debug, Clone, PartialEq)]
pub enum Records {
    /// `jobcomp/filetxt`: lines for this file.
    Lines(PathBuf, Vec<String>),
    /// `jobcomp/script`: this script, run once for each job with
    /// [`script_env`].
    Script(ScriptRun),
}

/// What `jobcomp/script` runs for the jobs of one batch.
#[derive(Debug, Clone, PartialEq)]
pub struct ScriptRun {
    pub script: PathBuf,
    pub cluster: String,
    /// `SlurmUser`: whom the script runs as (as Slurm's controller, which
    /// runs as that user).
    pub user: String,
    pub jobs: Vec<Ended>,
}

fn time(t: Option<i64>) -> String {
    match t.filter(|t| *t != 0) {
        Some(t) => Local.timestamp_opt(t, 0).earliest().map_or_else(
            || "Unknown".into(),
            |d| d.format("%Y-%m-%dT%H:%M:%S").to_string(),
        ),
        None => "Unknown".into(),
    }
}

fn code_pair(status: i32) -> String {
    let (code, sig) = slurm_proto::wait_status_pair(status);
    format!("{code}:{sig}")
}

/// A value as it goes in a line: no white space or control character of
/// any kind (they would end the value, or the line, and let a job's name
/// forge the fields after it; Slurm writes them raw and cannot read such a
/// line back).
fn word(s: &str) -> String {
    s.chars()
        .map(|c| {
            if c.is_whitespace() || c.is_control() {
                '_'
            } else {
                c
            }
        })
        .collect()
}

/// The record of an ended job, as Slurm's `jobcomp/filetxt` writes it
/// (with its newline).
pub fn line(e: &Ended, cluster: &str) -> String {
    let j = &e.job;
    let limit = j
        .time_limit
        .map_or_else(|| "UNLIMITED".to_string(), |m| m.to_string());
    // Cancelled while pending: no start.
    let start = if j
        .start_time
        .is_some_and(|s| j.end_time.is_some_and(|e| s > e))
    {
        "Unknown".to_string()
    } else {
        time(j.start_time)
    };
    let nodes = if j.nodelist.is_empty() {
        "(null)".to_string()
    } else {
        crate::hostlist::compress(&j.nodelist.split(',').collect::<Vec<_>>())
    };
    let work_dir = if j.work_dir.is_empty() {
        "unknown"
    } else {
        &j.work_dir
    };
    let array = match (j.array_job_id, j.array_task_id) {
        (Some(a), Some(t)) => format!(" ArrayJobId={a} ArrayTaskId={t}"),
        _ => String::new(),
    };
    format!(
        "JobId={} UserId={}({}) GroupId={}({}) Name={} JobState={} Partition={} \
         TimeLimit={limit} StartTime={start} EndTime={} NodeList={nodes} NodeCnt={} ProcCnt={} \
         WorkDir={} ReservationName={} Tres={} Account={} QOS={} WcKey={} Cluster={} \
         SubmitTime={} EligibleTime={}{array} DerivedExitCode={} ExitCode={} \n",
        j.job_id,
        word(&j.user),
        j.uid,
        word(&j.group),
        j.gid,
        word(&j.name),
        j.state.0.name(),
        word(&j.partition),
        time(j.end_time),
        j.node_count,
        j.alloc_cpus,
        word(work_dir),
        word(&j.reservation),
        word(&j.req_tres),
        word(&j.account),
        word(&j.qos),
        word(&j.wckey),
        word(cluster),
        time(Some(j.submit_time)),
        time(j.eligible_time),
        code_pair(e.derived_ec),
        code_pair(j.exit_status),
    )
}

fn parse_time(v: &str) -> Option<i64> {
    if v.eq_ignore_ascii_case("unknown") {
        return None;
    }
    crate::timefmt::parse_timestamp(v, 0).ok()
}

/// `name(id)`, or a bare id.
fn name_id(v: &str) -> (String, u32) {
    match v.split_once('(') {
        Some((name, rest)) => (
            name.to_string(),
            rest.trim_end_matches(')').parse().unwrap_or(0),
        ),
        None => (v.to_string(), v.parse().unwrap_or(0)),
    }
}

/// `code:signal` as a wait status.
fn status(v: &str) -> i32 {
    let (code, sig) = v.split_once(':').unwrap_or((v, "0"));
    let (code, sig): (i32, i32) = (code.parse().unwrap_or(0), sig.parse().unwrap_or(0));
    if sig != 0 {
        sig & 0x7f
    } else {
        (code & 0xff) << 8
    }
}

/// One line of a `jobcomp/filetxt` file as the job it records (`None`:
/// not a record: no `JobId`). What the line does not say stays empty.
/// The cluster comes back in `AcctJob::...`: see [`Record`].
pub fn parse(line: &str) -> Option<Record> {
    let mut j = AcctJob::default();
    let mut cluster = String::new();
    let mut has_id = false;
    // A key given twice: not a line [`line`] wrote (a value that ran into
    // the next field), so no record at all rather than a forged one.
    let mut seen = std::collections::HashSet::new();
    for item in line.split_whitespace() {
        let Some((k, v)) = item.split_once('=') else {
            continue;
        };
        let k = k.to_ascii_lowercase();
        if !seen.insert(k.clone()) {
            return None;
        }
        match k.as_str() {
            "jobid" => {
                j.job_id = v.parse().ok()?;
                has_id = true;
            }
            "userid" => (j.user, j.uid) = name_id(v),
            "groupid" => (j.group, j.gid) = name_id(v),
            "name" => j.name = v.to_string(),
            "jobstate" => {
                j.state = JobStateWire(JobState::parse(v).unwrap_or(JobState::Completed));
            }
            "partition" => j.partition = v.to_string(),
            "timelimit" => j.time_limit = v.parse().ok(),
            "starttime" => j.start_time = parse_time(v),
            "endtime" => j.end_time = parse_time(v),
            "nodelist" if v != "(null)" => {
                j.nodelist = crate::hostlist::expand(v)
                    .map(|n| n.join(","))
                    .unwrap_or_else(|_| v.to_string());
            }
            "nodecnt" => j.node_count = v.parse().unwrap_or(0),
            "proccnt" => j.alloc_cpus = v.parse().unwrap_or(0),
            "workdir" => j.work_dir = v.to_string(),
            "reservationname" => j.reservation = v.to_string(),
            "tres" => j.req_tres = v.to_string(),
            "account" => j.account = v.to_string(),
            "qos" => j.qos = v.to_string(),
            "wckey" => j.wckey = v.to_string(),
            "cluster" => cluster = v.to_string(),
            "submittime" => j.submit_time = parse_time(v).unwrap_or(0),
            "eligibletime" => j.eligible_time = parse_time(v),
            "arrayjobid" => j.array_job_id = v.parse().ok(),
            "arraytaskid" => j.array_task_id = v.parse().ok(),
            "exitcode" => j.exit_status = status(v),
            _ => {}
        }
    }
    has_id.then_some(Record { job: j, cluster })
}

/// A job read back from a completion file, with its cluster.
#[derive(Debug, Clone, PartialEq)]
pub struct Record {
    pub job: AcctJob,
    pub cluster: String,
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `j` ended, its steps' highest exit `derived_ec`.
    fn of(j: &AcctJob, derived_ec: i32) -> Ended {
        Ended {
            job: j.clone(),
            batch: true,
            dependency: String::new(),
            derived_ec,
        }
    }

    #[test]
    fn jobcomp_script_is_checked_as_slurm_checks_it() {
        let conf = |extra: &str| {
            let text = format!("ClusterName=c\nSlurmctldHost=h\n{extra}");
            let c = crate::conf::SlurmConf::parse_str(&text, std::path::Path::new("/x")).unwrap();
            JobCompConf::from_conf(&c)
        };
        assert_eq!(conf("JobCompType=jobcomp/script\n"), JobCompConf::NoScript);
        let checked = |extra: &str| {
            let text = format!("ClusterName=c\nSlurmctldHost=h\n{extra}");
            check_conf(
                &crate::conf::SlurmConf::parse_str(&text, std::path::Path::new("/x")).unwrap(),
            )
        };
        assert_eq!(
            checked("JobCompType=jobcomp/script\n"),
            Err("jobcomp/script JobCompLoc needs to be set".into())
        );
        assert_eq!(
            checked("JobCompType=jobcomp/script\nJobCompLoc=./x.sh\n"),
            Err("jobcomp/script: JobCompLoc=./x.sh must be an absolute path".into())
        );
        assert_eq!(checked("JobCompType=jobcomp/filetxt\n"), Ok(()));
        assert_eq!(
            conf("JobCompType=jobcomp/script\nJobCompLoc=/s.sh\n"),
            JobCompConf::Script("/s.sh".into())
        );
        let d = tempfile::tempdir().unwrap();
        let missing = d.path().join("none.sh");
        assert!(check_script(&missing)
            .unwrap_err()
            .contains("failed to stat"));
        assert!(check_script(d.path())
            .unwrap_err()
            .ends_with("isn't a regular file"));
        let s = d.path().join("s.sh");
        std::fs::write(&s, "#!/bin/sh\n").unwrap();
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&s, std::fs::Permissions::from_mode(0o644)).unwrap();
        // (Root may execute a file only when some execute bit is set.)
        assert!(check_script(&s).unwrap_err().ends_with("is not executable"));
        std::fs::set_permissions(&s, std::fs::Permissions::from_mode(0o755)).unwrap();
        assert_eq!(check_script(&s), Ok(()));
    }

    #[test]
    fn a_scripts_environment_holds_the_job_by_slurms_names() {
        let mut j = AcctJob {
            job_id: 9,
            array_job_id: Some(8),
            array_task_id: Some(1),
            name: "a\0b".into(),
            nodelist: "n1,n2,n3".into(),
            time_limit: Some(1500),
            exit_status: 9,
            ..Default::default()
        };
        j.state = JobStateWire(JobState::Failed);
        let e = Ended {
            job: j,
            batch: false,
            dependency: "afterok:3".into(),
            derived_ec: 3 << 8,
        };
        let env: std::collections::HashMap<String, String> =
            script_env(&e, "c1", Some("UTC")).into_iter().collect();
        for (k, v) in [
            ("JOBID", "9"),
            ("ARRAYJOBID", "8"),
            ("ARRAYTASKID", "1"),
            ("EXITCODE", "0:9"),
            ("DERIVED_EC", "3:0"),
            ("JOBNAME", "ab"),
            ("NODES", "n[1-3]"),
            ("LIMIT", "1-01:00:00"),
            ("BATCH", "no"),
            ("DEPENDENCY", "afterok:3"),
            ("JOBSTATE", "FAILED"),
            ("CLUSTER", "c1"),
            ("TZ", "UTC"),
        ] {
            assert_eq!(env.get(k).map(String::as_str), Some(v), "{k}");
        }
        assert!(!env.contains_key("STDOUT"));
    }

    #[test]
    fn a_line_reads_back_as_the_job_it_records() {
        let j = AcctJob {
            job_id: 42,
            array_job_id: Some(40),
            array_task_id: Some(2),
            name: "my job".into(),
            user: "alice".into(),
            uid: 1000,
            group: "users".into(),
            gid: 100,
            account: "physics".into(),
            partition: "debug".into(),
            qos: "normal".into(),
            state: JobStateWire(JobState::Failed),
            exit_status: 3 << 8,
            submit_time: 1_700_000_000,
            eligible_time: Some(1_700_000_001),
            start_time: Some(1_700_000_010),
            end_time: Some(1_700_000_070),
            time_limit: Some(30),
            nodelist: "n1,n2".into(),
            node_count: 2,
            alloc_cpus: 4,
            req_tres: "cpu=4,node=2,billing=4".into(),
            work_dir: "/home/alice".into(),
            ..Default::default()
        };
        let l = line(&of(&j, 0), "tux");
        assert!(
            l.starts_with("JobId=42 UserId=alice(1000) GroupId=users(100) Name=my_job JobState=FAILED Partition=debug TimeLimit=30 StartTime=20"),
            "{l}"
        );
        assert!(l.contains(" NodeList=n[1-2] NodeCnt=2 ProcCnt=4 WorkDir=/home/alice ReservationName= Tres=cpu=4,node=2,billing=4 Account=physics QOS=normal WcKey= Cluster=tux SubmitTime=20"), "{l}");
        assert!(
            l.ends_with(" ArrayJobId=40 ArrayTaskId=2 DerivedExitCode=0:0 ExitCode=3:0 \n"),
            "{l}"
        );
        // The highest exit of its steps, as Slurm's derived exit code.
        let d = line(&of(&j, 2 << 8), "tux");
        assert!(d.contains(" DerivedExitCode=2:0 ExitCode=3:0 "), "{d}");
        let back = parse(&l).unwrap();
        assert_eq!(back.cluster, "tux");
        let want = AcctJob {
            name: "my_job".into(),
            ..j
        };
        assert_eq!(back.job, want);
        // Signalled, unlimited, never started, no nodes.
        let k = AcctJob {
            job_id: 7,
            state: JobStateWire(JobState::Cancelled),
            exit_status: 9,
            ..Default::default()
        };
        let l = line(&of(&k, 0), "tux");
        assert!(
            l.contains(" TimeLimit=UNLIMITED StartTime=Unknown EndTime=Unknown NodeList=(null) "),
            "{l}"
        );
        assert!(l.contains(" ExitCode=0:9 "), "{l}");
        let back = parse(&l).unwrap().job;
        assert_eq!(
            (back.exit_status, back.time_limit, back.start_time),
            (9, None, None)
        );
        assert!(back.nodelist.is_empty());
        assert!(parse("not a record\n").is_none());
        assert!(parse("JobId=x UserId=a(1)").is_none());
    }

    /// A job's name cannot forge the fields of its line: every kind of
    /// white space and control character is written as `_`; a line with a
    /// key twice is no record.
    #[test]
    fn a_name_cannot_forge_fields() {
        for sep in [
            "\u{b}", "\u{c}", "\r", "\u{85}", "\u{a0}", "\u{2028}", "\u{1}",
        ] {
            let j = AcctJob {
                job_id: 42,
                name: format!("x{sep}Partition=evil{sep}WorkDir=/root"),
                user: "mallory".into(),
                uid: 1001,
                partition: "debug".into(),
                work_dir: "/home/mallory".into(),
                state: JobStateWire(JobState::Completed),
                ..Default::default()
            };
            let l = line(&of(&j, 0), "tux");
            assert_eq!(l.lines().count(), 1, "{l:?}");
            let back = parse(&l).unwrap_or_else(|| panic!("{sep:?}: {l:?}")).job;
            assert_eq!(
                (back.partition.as_str(), back.work_dir.as_str()),
                ("debug", "/home/mallory"),
                "{sep:?}: {l:?}"
            );
        }
        assert!(parse("JobId=5 UserId=bob(7) UserId=root(0)").is_none());
    }
}
