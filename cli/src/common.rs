//! What every command shares: the configuration, the controller client, and
//! Slurm's way of reporting errors (`prog: error: message`).

use slurm_common::conf::{default_conf_path, SlurmConf};
use slurm_common::net::Client;
use slurm_proto::{RequestBody, Response, RpcError};

/// Load `$SLURM_CONF` (or /etc/slurm/slurm.conf), printing an error prefixed
/// with `prog` on failure.
/// `--test-only`'s answer, as sbatch and srun print it.
pub fn will_start_line(
    prog: &str,
    job_id: u32,
    start_time: i64,
    cpus: u32,
    nodes: &[String],
    partition: &str,
) -> String {
    format!(
        "{prog}: Job {job_id} to start at {} using {cpus} processors on nodes {} in partition {partition}\n",
        slurm_common::timefmt::format_timestamp(start_time),
        slurm_common::hostlist::compress(nodes)
    )
}

/// `-M`/`--clusters`: one cluster per controller here, so every name in
/// `list` (commas) must be this one's (or `all`); the first other name,
/// as `prog`'s error.
pub fn check_clusters(prog: &str, list: &str, conf: &SlurmConf) -> Result<(), String> {
    match list
        .split(',')
        .map(str::trim)
        .filter(|c| !c.is_empty())
        .find(|c| *c != conf.cluster_name && !c.eq_ignore_ascii_case("all"))
    {
        Some(c) => Err(format!(
            "{prog}: error: Invalid cluster name: {c} (this is {})",
            conf.cluster_name
        )),
        None => Ok(()),
    }
}

pub fn load_conf(prog: &str) -> Result<SlurmConf, i32> {
    // Every command that prints a time prints it as the user asked.
    slurm_common::timefmt::use_env_time_format();
    let path = default_conf_path();
    let conf = SlurmConf::load(&path).map_err(|e| {
        eprintln!("{prog}: error: {e}");
        1
    })?;
    // TLS on (TLSType): every call checks its server against the CA.
    slurm_common::tls::setup(&conf, &slurm_common::tls::Role::Command).map_err(|e| {
        eprintln!("{prog}: error: {e}");
        1
    })?;
    Ok(conf)
}

/// An error talking to the controller, in the shape the commands report.
#[derive(Debug, thiserror::Error)]
pub enum CallError {
    #[error("{text}: {0}", text = net_error_text(.0))]
    Net(#[from] slurm_common::net::NetError),
    #[error("{0}")]
    Rpc(RpcError),
    #[error("unexpected reply from the controller")]
    Unexpected,
}

/// Slurm's words for a call that did not come back: the controller
/// reached but silent past the time allowed is Slurm's socket timeout;
/// anything else, a controller that could not be reached.
pub fn net_error_text(e: &slurm_common::net::NetError) -> &'static str {
    use slurm_common::net::NetError;
    match e {
        NetError::Io(io) if io.kind() == std::io::ErrorKind::TimedOut => {
            "Socket timed out on send/recv operation"
        }
        NetError::Rpc { code, .. } if code == "DeadlineExceeded" => {
            "Socket timed out on send/recv operation"
        }
        _ => "Unable to contact slurm controller (connect failure)",
    }
}

/// Send one request and turn an `Error` response into `CallError::Rpc`.
pub fn call(client: &Client, body: RequestBody) -> Result<Response, CallError> {
    match client.call(body)? {
        Response::Error(e) => Err(CallError::Rpc(e)),
        r => Ok(r),
    }
}

pub fn client(conf: &SlurmConf) -> Client {
    Client::from_conf(conf)
}

/// Unix seconds now.
pub fn now() -> i64 {
    slurm_common::auth::now()
}

/// Send one request to slurmdbd (AccountingStorageHost:AccountingStoragePort).
pub fn dbd_call(
    conf: &SlurmConf,
    body: slurm_proto::acct::AcctRequest,
) -> Result<slurm_proto::acct::AcctResponse, String> {
    if conf.accounting_storage_type != "accounting_storage/slurmdbd" {
        return Err("Slurm accounting storage is disabled".into());
    }
    let cred = slurm_common::auth::CredSource::from_conf(conf)
        .credential(&slurm_common::dbd::bound(&body))
        .map_err(|e| format!("cannot get a credential: {e}"))?;
    let addr = conf.dbd_address();
    slurm_common::dbd::call_sync(
        &addr,
        conf.dbd_name(),
        &slurm_proto::acct::DbdRequest { cred, body },
        std::time::Duration::from_secs(30),
    )
    .map_err(|e| format!("Problem talking to the database: {e}"))
}

/// [`dbd_call`], with slurmdbd's refusal as an error too.
pub fn dbd_ask(
    conf: &SlurmConf,
    body: slurm_proto::acct::AcctRequest,
) -> Result<slurm_proto::acct::AcctResponse, String> {
    match dbd_call(conf, body)? {
        slurm_proto::acct::AcctResponse::Error(e) => Err(e.to_string()),
        a => Ok(a),
    }
}

/// A Slurm hostfile (`-F/--nodefile`): node names one per line or comma
/// separated, `#` starting a comment (`\\#` a literal `#`), `NAME*N` for N
/// times NAME, hostlist ranges expanded; duplicates dropped. `None` for a
/// file that cannot be read, an entry not starting with a letter or digit,
/// or no name at all (Slurm's "Invalid --nodefile node file").
pub fn read_hostfile(path: &str) -> Option<Vec<String>> {
    let text = std::fs::read_to_string(path).ok()?;
    let mut names: Vec<String> = Vec::new();
    for line in text.lines() {
        // A `#` ends the line unless escaped.
        let mut kept = String::new();
        let mut chars = line.chars().peekable();
        while let Some(c) = chars.next() {
            match c {
                '\\' if chars.peek() == Some(&'#') => {
                    kept.push('#');
                    chars.next();
                }
                '#' => break,
                c => kept.push(c),
            }
        }
        let kept = kept.trim();
        if kept.is_empty() {
            continue;
        }
        if !kept.starts_with(|c: char| c.is_ascii_alphanumeric()) {
            return None;
        }
        for entry in slurm_common::conf::split_top_commas(kept) {
            let entry = entry.trim();
            if entry.is_empty() {
                continue;
            }
            let (name, times) = match entry.split_once('*') {
                Some((n, k)) => (n, k.trim().parse::<usize>().ok()?),
                None => (entry, 1),
            };
            for n in slurm_common::hostlist::expand(name).ok()? {
                if times > 0 && !names.contains(&n) {
                    names.push(n);
                }
            }
        }
    }
    (!names.is_empty()).then_some(names)
}

/// Interactive mode's input (scontrol, sacctmgr, sreport): a `PROG: `
/// prompt on a terminal, one command per line from stdin split into words
/// (quotes kept together), `!!` replaced by the last command. `each` gets
/// every command's words and says whether to go on; input ending stops.
pub fn read_commands(prog: &str, mut each: impl FnMut(Vec<String>) -> bool) {
    use std::io::{BufRead, IsTerminal, Write};
    let stdin = std::io::stdin();
    let tty = stdin.is_terminal();
    let mut last: Option<Vec<String>> = None;
    loop {
        if tty {
            print!("{prog}: ");
            let _ = std::io::stdout().flush();
        }
        let mut line = String::new();
        match stdin.lock().read_line(&mut line) {
            Ok(0) | Err(_) => break,
            Ok(_) => {}
        }
        let mut words = crate::fmt::split_words(&line);
        if words.first().is_some_and(|w| w == "!!") {
            match &last {
                Some(l) => words = l.clone(),
                None => continue,
            }
        }
        if words.is_empty() {
            continue;
        }
        last = Some(words.clone());
        if !each(words) {
            break;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hostfiles_as_slurm_reads_them() {
        let dir = tempfile::tempdir().unwrap();
        let f = dir.path().join("h");
        let read = |text: &str| {
            std::fs::write(&f, text).unwrap();
            read_hostfile(f.to_str().unwrap())
        };
        assert_eq!(
            read("# head\nn1,n2 # two\nn[2-4]\nm1*3\n\n"),
            Some(
                vec!["n1", "n2", "n3", "n4", "m1"]
                    .into_iter()
                    .map(String::from)
                    .collect()
            )
        );
        assert_eq!(read("a\\#b\n"), Some(vec!["a#b".to_string()]));
        assert_eq!(read("# only a comment\n"), None);
        assert_eq!(
            read("-n1\n"),
            None,
            "an entry must start with a letter or digit"
        );
        assert_eq!(read("n1*x\n"), None);
        assert_eq!(read_hostfile("/nonexistent/hostfile"), None);
    }
}

/// The exit codes srun, salloc and sbatch end with on a Slurm error and
/// (srun, salloc) when `--immediate` could not be met: `SLURM_EXIT_ERROR`
/// and `SLURM_EXIT_IMMEDIATE`, 1 unless set. A value that is not a
/// non-zero number is reported (as Slurm's "has zero value") and 1 kept.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ExitCodes {
    pub error: i32,
    pub immediate: i32,
}

pub const EXIT_ERROR_ENV: &str = "SLURM_EXIT_ERROR";
pub const EXIT_IMMEDIATE_ENV: &str = "SLURM_EXIT_IMMEDIATE";

impl ExitCodes {
    pub fn from_env(prog: &str, env: &dyn Fn(&str) -> Option<String>) -> ExitCodes {
        let read = |var: &str| match env(var) {
            None => 1,
            Some(v) => match i32::try_from(crate::fmt::leading_int(&v)).unwrap_or(0) {
                0 => {
                    eprintln!("{prog}: error: {var} has zero value");
                    1
                }
                n => n,
            },
        };
        ExitCodes {
            error: read(EXIT_ERROR_ENV),
            immediate: read(EXIT_IMMEDIATE_ENV),
        }
    }

    /// `code` with a Slurm error's 1 replaced by `SLURM_EXIT_ERROR`.
    pub fn on_error(&self, code: i32) -> i32 {
        if code == 1 {
            self.error
        } else {
            code
        }
    }
}

#[cfg(test)]
mod exit_code_tests {
    use super::*;

    #[test]
    fn exit_codes_come_from_the_environment_as_slurm_reads_them() {
        let env = crate::fmt::test_env;
        let none = ExitCodes::from_env("srun", &env(&[]));
        assert_eq!(
            none,
            ExitCodes {
                error: 1,
                immediate: 1
            }
        );
        let set = ExitCodes::from_env(
            "srun",
            &env(&[("SLURM_EXIT_ERROR", "42"), ("SLURM_EXIT_IMMEDIATE", " 7x")]),
        );
        assert_eq!(
            set,
            ExitCodes {
                error: 42,
                immediate: 7
            }
        );
        assert_eq!(set.on_error(1), 42);
        assert_eq!(set.on_error(0), 0);
        assert_eq!(set.on_error(3), 3);
        // Zero or not a number: kept at 1 (Slurm says "has zero value").
        let zero = ExitCodes::from_env("srun", &env(&[("SLURM_EXIT_ERROR", "0")]));
        assert_eq!(zero.error, 1);
        let junk = ExitCodes::from_env("srun", &env(&[("SLURM_EXIT_ERROR", "abc")]));
        assert_eq!(junk.error, 1);
    }
}
