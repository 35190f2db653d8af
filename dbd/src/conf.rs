//! `slurmdbd.conf`: parse → defaults → validate.
//!
//! Same lexical rules as `slurm.conf`: `Key=Value` pairs (several per line
//! allowed), keys case-insensitive, values may be double-quoted, `#` starts a
//! comment (`\#` is a literal `#`, a `#` inside quotes is kept). Errors carry
//! `file:line`; unknown keys and keys we accept but do not act on become
//! warnings.

use crate::storage::{Backend, StorageTarget};
use slurm_common::conf::{ConfError, ConfWarning};
use std::path::{Path, PathBuf};

/// Default location: beside `slurm.conf`.
pub fn default_conf_path() -> PathBuf {
    if let Some(p) = std::env::var_os("SLURMDBD_CONF").filter(|p| !p.is_empty()) {
        return PathBuf::from(p);
    }
    slurm_common::conf::default_conf_path()
        .parent()
        .unwrap_or_else(|| Path::new("/etc/slurm"))
        .join("slurmdbd.conf")
}

/// How long to keep a kind of record (`PurgeJobAfter=12month`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PurgeAfter {
    Hours(u32),
    Days(u32),
    Months(u32),
}

/// As Slurm prints it (no `*`: nothing is archived here).
impl std::fmt::Display for PurgeAfter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            PurgeAfter::Hours(n) => write!(f, "{n} hours"),
            PurgeAfter::Days(n) => write!(f, "{n} days"),
            PurgeAfter::Months(n) => write!(f, "{n} months"),
        }
    }
}

impl PurgeAfter {
    /// `12`, `12month(s)`, `30day(s)`, `720hour(s)`; a bare number is months.
    pub fn parse(s: &str) -> Option<PurgeAfter> {
        let s = s.trim().to_ascii_lowercase();
        let digits = s.chars().take_while(|c| c.is_ascii_digit()).count();
        if digits == 0 {
            return None;
        }
        let n: u32 = s[..digits].parse().ok()?;
        match &s[digits..] {
            "" | "month" | "months" => Some(PurgeAfter::Months(n)),
            "day" | "days" => Some(PurgeAfter::Days(n)),
            "hour" | "hours" => Some(PurgeAfter::Hours(n)),
            _ => None,
        }
    }

    /// Records that ended before the returned time are purged.
    pub fn cutoff(self, now: i64) -> i64 {
        match self {
            PurgeAfter::Hours(n) => now - i64::from(n) * 3600,
            PurgeAfter::Days(n) => now - i64::from(n) * 86_400,
            PurgeAfter::Months(n) => crate::storage::time::add_months(now, -(n as i32)),
        }
    }
}

/// What to purge, and after how long (`None`: keep for ever).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PurgeSettings {
    pub jobs: Option<PurgeAfter>,
    pub steps: Option<PurgeAfter>,
    pub events: Option<PurgeAfter>,
    pub usage: Option<PurgeAfter>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct DbdConf {
    pub path: PathBuf,
    pub storage_type: Backend,
    pub storage_host: String,
    pub storage_port: Option<u16>,
    pub storage_user: Option<String>,
    pub storage_pass: Option<String>,
    /// Database name, or for SQLite the file path (relative to this file's directory).
    pub storage_loc: Option<String>,
    pub dbd_host: String,
    pub dbd_addr: Option<String>,
    pub dbd_port: u16,
    pub slurm_user: String,
    pub purge: PurgeSettings,
    pub log_file: Option<PathBuf>,
    pub pid_file: Option<PathBuf>,
    /// Lower-case Slurm level (`info`, `debug2`, ...).
    pub debug_level: String,
    pub auth_type: String,
    /// `PrivateData=`: what users may not see of one another.
    pub private: slurm_common::private::PrivateData,
    /// `DisableCoordDBD=yes`: account coordinators have no rights here
    /// (neither changes nor their accounts' jobs), as Slurm's.
    pub disable_coord: bool,
    /// `AuthAltTypes=auth/jwt` with `AuthAltParameters=jwt_key=PATH`:
    /// requests may carry a user's token (from a slurmrestd holding no key).
    pub jwt_key: Option<PathBuf>,
    jwt_enabled: bool,
    /// `LogTimeFormat`.
    pub log_time_format: slurm_common::logging::TimeFormat,
    /// `TLSType` / `TLSParameters`, as slurm.conf's.
    pub tls: Option<slurm_common::tls::TlsSettings>,
    tls_type: Option<String>,
    tls_parameters: Option<String>,
    pub warnings: Vec<ConfWarning>,
}

/// The levels slurmdbd.conf's DebugLevel takes.
pub const DEBUG_LEVELS: [&str; 11] = [
    "quiet",
    "fatal",
    "error",
    "info",
    "verbose",
    "debug",
    "debug2",
    "debug3",
    "debug4",
    "debug5",
    "debugflags",
];

/// Keys Slurm knows that we read but do not act on yet.
const ACCEPTED_UNSUPPORTED: [&str; 24] = [
    "AllowNoDefAcct",
    "AllResourcesAbsolute",
    "ArchiveDir",
    "ArchiveEvents",
    "ArchiveJobs",
    "ArchiveResvs",
    "ArchiveScript",
    "ArchiveSteps",
    "ArchiveSuspend",
    "ArchiveTXN",
    "ArchiveUsage",
    "AuthInfo",
    "CommitDelay",
    "CommunicationParameters",
    "DebugFlags",
    "DefaultQOS",
    "MaxQueryTimeRange",
    "MessageTimeout",
    "Parameters",
    "PluginDir",
    "PurgeResvAfter",
    "PurgeSuspendAfter",
    "PurgeTXNAfter",
    "TrackWCKey",
];

const KNOWN: [&str; 28] = [
    "DisableCoordDBD",
    "LogTimeFormat",
    "TLSType",
    "TLSParameters",
    "AuthAltTypes",
    "AuthAltParameters",
    "PrivateData",
    "StorageType",
    "StorageHost",
    "StorageBackupHost",
    "StoragePort",
    "StorageUser",
    "StoragePass",
    "StorageLoc",
    "StorageParameters",
    "DbdHost",
    "DbdBackupHost",
    "DbdAddr",
    "DbdPort",
    "SlurmUser",
    "PurgeJobAfter",
    "PurgeStepAfter",
    "PurgeEventAfter",
    "PurgeUsageAfter",
    "LogFile",
    "PidFile",
    "DebugLevel",
    "AuthType",
];

impl DbdConf {
    pub fn load(path: &Path) -> Result<DbdConf, ConfError> {
        let text = std::fs::read_to_string(path).map_err(|e| ConfError {
            file: path.to_path_buf(),
            line: 0,
            message: format!("cannot read: {e}"),
        })?;
        DbdConf::parse_str(&text, path)
    }

    pub fn parse_str(text: &str, path: &Path) -> Result<DbdConf, ConfError> {
        let err = |line: usize, message: String| ConfError {
            file: path.to_path_buf(),
            line,
            message,
        };
        let mut c = DbdConf {
            path: path.to_path_buf(),
            storage_type: Backend::Sqlite,
            storage_host: "localhost".into(),
            storage_port: None,
            storage_user: None,
            storage_pass: None,
            storage_loc: None,
            dbd_host: "localhost".into(),
            dbd_addr: None,
            dbd_port: slurm_proto::acct::DEFAULT_DBD_PORT,
            slurm_user: "root".into(),
            purge: PurgeSettings::default(),
            log_file: None,
            pid_file: None,
            debug_level: "info".into(),
            auth_type: "auth/slurm".into(),
            private: Default::default(),
            disable_coord: false,
            jwt_key: None,
            jwt_enabled: false,
            log_time_format: Default::default(),
            tls: None,
            tls_type: None,
            tls_parameters: None,
            warnings: Vec::new(),
        };
        let mut pending = String::new();
        let mut start_line = 0;
        for (i, raw) in text.lines().enumerate() {
            let lineno = i + 1;
            let line = strip_comment(raw);
            if pending.is_empty() {
                start_line = lineno;
            }
            if let Some(cont) = line.strip_suffix('\\') {
                pending.push_str(cont);
                pending.push(' ');
                continue;
            }
            pending.push_str(&line);
            let full = std::mem::take(&mut pending);
            let pairs = tokenize(&full).map_err(|m| err(start_line, m))?;
            for (key, value) in pairs {
                c.set(&key, &value, start_line, path)
                    .map_err(|m| err(start_line, m))?;
            }
        }
        if !pending.trim().is_empty() {
            let pairs = tokenize(&pending).map_err(|m| err(start_line, m))?;
            for (key, value) in pairs {
                c.set(&key, &value, start_line, path)
                    .map_err(|m| err(start_line, m))?;
            }
        }
        let dir = path.parent().unwrap_or(Path::new("/etc/slurm"));
        c.tls = slurm_common::tls::TlsSettings::parse(
            c.tls_type.as_deref(),
            c.tls_parameters.as_deref(),
            dir,
        )
        .map_err(|e| err(0, e.to_string()))?;
        Ok(c)
    }

    fn warn(&mut self, path: &Path, line: usize, message: String) {
        self.warnings.push(ConfWarning {
            file: path.to_path_buf(),
            line,
            message,
        });
    }

    fn set(&mut self, key: &str, value: &str, line: usize, path: &Path) -> Result<(), String> {
        let Some(k) = KNOWN
            .iter()
            .chain(ACCEPTED_UNSUPPORTED.iter())
            .find(|k| k.eq_ignore_ascii_case(key))
        else {
            self.warn(path, line, format!("unknown key '{key}' ignored"));
            return Ok(());
        };
        let opt = |v: &str| (!v.is_empty()).then(|| v.to_string());
        let purge = |v: &str| {
            PurgeAfter::parse(v).map(Some).ok_or_else(|| {
                format!("invalid value '{v}' for {k} (expected N, Nmonths, Ndays or Nhours)")
            })
        };
        match *k {
            "StorageType" => {
                self.storage_type = match value.to_ascii_lowercase().as_str() {
                    "accounting_storage/mysql" => Backend::Mysql,
                    "accounting_storage/sqlite" => Backend::Sqlite,
                    "accounting_storage/pgsql" => Backend::Postgres,
                    _ => {
                        return Err(format!(
                            "invalid value '{value}' for StorageType (expected \
                             accounting_storage/mysql, accounting_storage/sqlite or \
                             accounting_storage/pgsql)"
                        ))
                    }
                }
            }
            "DisableCoordDBD" => {
                // Slurm's booleans.
                self.disable_coord = match value.to_ascii_lowercase().as_str() {
                    "yes" | "true" | "up" | "1" => true,
                    "no" | "false" | "down" | "0" => false,
                    _ => return Err(format!("invalid value '{value}' for DisableCoordDBD")),
                }
            }
            "StorageHost" => self.storage_host = value.to_string(),
            "StoragePort" => {
                self.storage_port = Some(
                    value
                        .parse()
                        .map_err(|_| format!("invalid value '{value}' for StoragePort"))?,
                )
            }
            "StorageUser" => self.storage_user = opt(value),
            "StoragePass" => self.storage_pass = opt(value),
            "StorageLoc" => self.storage_loc = opt(value),
            "DbdHost" => self.dbd_host = value.to_string(),
            "DbdAddr" => self.dbd_addr = opt(value),
            "DbdPort" => {
                self.dbd_port = value
                    .parse()
                    .map_err(|_| format!("invalid value '{value}' for DbdPort"))?
            }
            "SlurmUser" => self.slurm_user = value.to_string(),
            "PurgeJobAfter" => self.purge.jobs = purge(value)?,
            "PurgeStepAfter" => self.purge.steps = purge(value)?,
            "PurgeEventAfter" => self.purge.events = purge(value)?,
            "PurgeUsageAfter" => self.purge.usage = purge(value)?,
            "LogFile" => self.log_file = opt(value).map(PathBuf::from),
            "PidFile" => self.pid_file = opt(value).map(PathBuf::from),
            "DebugLevel" => {
                let v = value.to_ascii_lowercase();
                if !DEBUG_LEVELS.contains(&v.as_str()) {
                    return Err(format!(
                        "invalid value '{value}' for DebugLevel (expected one of {})",
                        DEBUG_LEVELS.join(", ")
                    ));
                }
                self.debug_level = v;
            }
            "LogTimeFormat" => {
                self.log_time_format = slurm_common::logging::TimeFormat::parse(Some(value))?
            }
            "TLSType" => self.tls_type = opt(value),
            "TLSParameters" => self.tls_parameters = opt(value),
            "AuthAltTypes" => {
                self.jwt_enabled = value
                    .split(',')
                    .any(|t| t.trim().eq_ignore_ascii_case("auth/jwt"));
            }
            "AuthAltParameters" => {
                self.jwt_key = value.split(',').find_map(|kv| {
                    let (k, v) = kv.split_once('=')?;
                    (k.trim().eq_ignore_ascii_case("jwt_key") && !v.trim().is_empty())
                        .then(|| PathBuf::from(v.trim()))
                });
            }
            "PrivateData" => {
                let (p, unknown) = slurm_common::private::PrivateData::parse(value);
                self.private = p;
                for w in unknown {
                    self.warn(
                        path,
                        line,
                        format!("PrivateData value '{w}' is not known: ignored"),
                    );
                }
            }
            "AuthType" => {
                self.auth_type = value.to_ascii_lowercase();
                if self.auth_type != "auth/slurm" {
                    self.warn(
                        path,
                        line,
                        format!(
                            "AuthType={value} is not supported: using auth/slurm with slurm.key"
                        ),
                    );
                }
            }
            "StorageBackupHost" | "DbdBackupHost" | "StorageParameters" => {
                self.warn(path, line, format!("{k} is not supported yet: ignored"))
            }
            other => self.warn(path, line, format!("{other} is not supported yet: ignored")),
        }
        Ok(())
    }

    /// The JWT key file, when tokens are accepted (`AuthAltTypes=auth/jwt`).
    pub fn jwt_key_path(&self) -> Option<&Path> {
        self.jwt_key.as_deref().filter(|_| self.jwt_enabled)
    }

    /// Where to listen: DbdAddr, else DbdHost.
    pub fn listen_addr(&self) -> String {
        let host = self.dbd_addr.as_deref().unwrap_or(&self.dbd_host);
        format!("{host}:{}", self.dbd_port)
    }

    /// The settings `sacctmgr show configuration` lists (Slurm's names,
    /// in its order; never the storage password).
    pub fn key_pairs(&self) -> Vec<(String, String)> {
        let or_null = |v: Option<String>| v.unwrap_or_else(|| "(null)".into());
        let path = |p: &Option<PathBuf>| p.as_ref().map(|p| p.display().to_string());
        let purge = |p: Option<PurgeAfter>| p.map_or_else(|| "NONE".into(), |p| p.to_string());
        let storage_type = match self.storage_type {
            Backend::Mysql => "accounting_storage/mysql",
            Backend::Sqlite => "accounting_storage/sqlite",
            Backend::Postgres => "accounting_storage/pgsql",
        };
        let pairs: Vec<(&str, String)> = vec![
            (
                "AuthAltTypes",
                if self.jwt_enabled {
                    "auth/jwt".into()
                } else {
                    "(null)".into()
                },
            ),
            ("AuthType", self.auth_type.clone()),
            ("DbdAddr", or_null(self.dbd_addr.clone())),
            ("DbdHost", self.dbd_host.clone()),
            ("DbdPort", self.dbd_port.to_string()),
            ("DebugLevel", self.debug_level.clone()),
            (
                "DisableCoordDBD",
                if self.disable_coord { "Yes" } else { "No" }.into(),
            ),
            ("LogFile", or_null(path(&self.log_file))),
            ("PidFile", or_null(path(&self.pid_file))),
            ("PrivateData", self.private.names()),
            ("PurgeEventAfter", purge(self.purge.events)),
            ("PurgeJobAfter", purge(self.purge.jobs)),
            ("PurgeStepAfter", purge(self.purge.steps)),
            ("PurgeUsageAfter", purge(self.purge.usage)),
            ("SlurmUser", self.slurm_user.clone()),
            ("StorageHost", self.storage_host.clone()),
            ("StorageLoc", or_null(self.storage_loc.clone())),
            (
                "StoragePort",
                self.storage_port
                    .map_or_else(|| "(null)".into(), |p| p.to_string()),
            ),
            ("StorageType", storage_type.into()),
            ("StorageUser", or_null(self.storage_user.clone())),
            ("TLSType", or_null(self.tls_type.clone())),
        ];
        pairs.into_iter().map(|(k, v)| (k.to_string(), v)).collect()
    }

    /// Which database to open.
    pub fn storage_target(&self) -> StorageTarget {
        match self.storage_type {
            Backend::Sqlite => {
                let loc = self
                    .storage_loc
                    .clone()
                    .unwrap_or_else(|| "/var/spool/slurmdbd/slurm_acct_db.sqlite".into());
                let p = PathBuf::from(&loc);
                let p = if p.is_relative() {
                    self.path.parent().unwrap_or_else(|| Path::new(".")).join(p)
                } else {
                    p
                };
                StorageTarget::sqlite(p)
            }
            b => StorageTarget {
                backend: b,
                host: self.storage_host.clone(),
                port: self.storage_port,
                user: self.storage_user.clone(),
                pass: self.storage_pass.clone(),
                database: self
                    .storage_loc
                    .clone()
                    .unwrap_or_else(|| "slurm_acct_db".into()),
            },
        }
    }

    /// `slurm.key` beside this file.
    pub fn key_path(&self) -> PathBuf {
        slurm_common::auth::key_path(&self.path)
    }
}

fn strip_comment(line: &str) -> String {
    let mut out = String::with_capacity(line.len());
    let mut quoted = false;
    let mut chars = line.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '\\' if chars.peek() == Some(&'#') => {
                out.push('#');
                chars.next();
            }
            '"' => {
                quoted = !quoted;
                out.push(c);
            }
            '#' if !quoted => break,
            _ => out.push(c),
        }
    }
    out.trim_end().to_string()
}

/// Split `A=b C="d e"` into pairs; spaces around `=` are allowed.
fn tokenize(line: &str) -> Result<Vec<(String, String)>, String> {
    let chars: Vec<char> = line.chars().collect();
    let mut out = Vec::new();
    let mut i = 0;
    let skip_ws = |i: &mut usize| {
        while *i < chars.len() && chars[*i].is_whitespace() {
            *i += 1;
        }
    };
    loop {
        skip_ws(&mut i);
        if i >= chars.len() {
            return Ok(out);
        }
        let ks = i;
        while i < chars.len() && chars[i] != '=' && !chars[i].is_whitespace() {
            i += 1;
        }
        let key: String = chars[ks..i].iter().collect();
        skip_ws(&mut i);
        if i >= chars.len() || chars[i] != '=' {
            return Err(format!("expected Key=Value, found '{}'", line.trim()));
        }
        if key.is_empty() {
            return Err(format!("missing key before '=' in '{}'", line.trim()));
        }
        i += 1;
        skip_ws(&mut i);
        let mut value = String::new();
        if i < chars.len() && chars[i] == '"' {
            i += 1;
            while i < chars.len() && chars[i] != '"' {
                value.push(chars[i]);
                i += 1;
            }
            if i >= chars.len() {
                return Err(format!("unterminated quote in value of {key}"));
            }
            i += 1;
        } else {
            while i < chars.len() && !chars[i].is_whitespace() {
                value.push(chars[i]);
                i += 1;
            }
        }
        out.push((key, value));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(s: &str) -> Result<DbdConf, ConfError> {
        DbdConf::parse_str(s, Path::new("/etc/slurm/slurmdbd.conf"))
    }

    #[test]
    fn a_site_file_loads() {
        let c = parse(
            "# Example slurmdbd.conf\n\
             AuthType=auth/slurm\n\
             DbdAddr=10.0.0.5\n\
             dbdhost=head   # the host\n\
             DbdPort=7031\n\
             SlurmUser=slurm\n\
             DebugLevel=Debug2\n\
             LogFile=/var/log/slurm/slurmdbd.log\n\
             PidFile=/run/slurmdbd.pid\n\
             StorageType=accounting_storage/mysql\n\
             StorageHost=db1\n\
             StoragePort=3307\n\
             StorageUser=slurm\n\
             StoragePass=\"pa#ss word\"\n\
             StorageLoc=slurm_acct_db\n\
             PurgeJobAfter=12month\n\
             PurgeStepAfter=30days\n\
             PurgeEventAfter=720hours\n\
             PurgeUsageAfter=24\n\
             ArchiveJobs=yes\n\
             Frobnicate=1\n",
        )
        .unwrap();
        assert_eq!(c.storage_type, Backend::Mysql);
        assert_eq!(c.listen_addr(), "10.0.0.5:7031");
        assert_eq!(c.slurm_user, "slurm");
        assert_eq!(c.debug_level, "debug2");
        assert_eq!(c.storage_pass.as_deref(), Some("pa#ss word"));
        assert_eq!(c.purge.jobs, Some(PurgeAfter::Months(12)));
        assert_eq!(c.purge.steps, Some(PurgeAfter::Days(30)));
        assert_eq!(c.purge.events, Some(PurgeAfter::Hours(720)));
        assert_eq!(c.purge.usage, Some(PurgeAfter::Months(24)));
        let t = c.storage_target();
        assert_eq!(
            t.url(None),
            "mysql://slurm:pa%23ss%20word@db1:3307/slurm_acct_db"
        );
        assert!(c
            .warnings
            .iter()
            .any(|w| w.line == 21 && w.message.contains("unknown key 'Frobnicate'")));
        assert!(c
            .warnings
            .iter()
            .any(|w| w.line == 20 && w.message.contains("ArchiveJobs is not supported")));
    }

    #[test]
    fn defaults_are_sqlite_on_6819() {
        let c = parse("").unwrap();
        assert_eq!(c.storage_type, Backend::Sqlite);
        assert_eq!(c.dbd_port, 6819);
        assert!(!c.disable_coord);
        assert!(parse("DisableCoordDBD=Yes\n").unwrap().disable_coord);
        assert!(!parse("DisableCoordDBD=no\n").unwrap().disable_coord);
        assert_eq!(c.listen_addr(), "localhost:6819");
        assert_eq!(c.key_path(), PathBuf::from("/etc/slurm/slurm.key"));
        let c = parse("StorageType=accounting_storage/sqlite\nStorageLoc=acct.db\n").unwrap();
        assert_eq!(
            c.storage_target().url(None),
            "sqlite:///etc/slurm/acct.db?mode=rwc"
        );
        let c = parse("StorageType=accounting_storage/pgsql\n").unwrap();
        assert_eq!(
            c.storage_target().url(None),
            "postgres://localhost:5432/slurm_acct_db"
        );
    }

    #[test]
    fn errors_name_file_and_line() {
        for (text, line, msg) in [
            (
                "\nStorageType=accounting_storage/oracle\n",
                2,
                "StorageType",
            ),
            ("DbdPort=x\n", 1, "invalid value 'x' for DbdPort"),
            ("\n\nPurgeJobAfter=12weeks\n", 3, "PurgeJobAfter"),
            ("DebugLevel=loud\n", 1, "DebugLevel"),
            ("StorageHost\n", 1, "expected Key=Value"),
            ("StoragePass=\"open\n", 1, "unterminated quote"),
            ("DisableCoordDBD=maybe\n", 1, "DisableCoordDBD"),
        ] {
            let e = parse(text).unwrap_err();
            assert_eq!(e.line, line, "{text:?}: {e}");
            assert!(e.message.contains(msg), "{text:?}: {e}");
            assert!(e
                .to_string()
                .starts_with(&format!("/etc/slurm/slurmdbd.conf:{line}: ")));
        }
    }

    #[test]
    fn purge_formats() {
        assert_eq!(PurgeAfter::parse("1"), Some(PurgeAfter::Months(1)));
        assert_eq!(PurgeAfter::parse("2DAYS"), Some(PurgeAfter::Days(2)));
        assert_eq!(PurgeAfter::parse("1hour"), Some(PurgeAfter::Hours(1)));
        assert_eq!(PurgeAfter::parse("hours"), None);
        assert_eq!(PurgeAfter::parse("-1"), None);
        assert_eq!(PurgeAfter::Days(1).cutoff(100_000), 100_000 - 86_400);
        // 2024-03-31 00:00 UTC minus one month clamps to 2024-02-29.
        assert_eq!(PurgeAfter::Months(1).cutoff(1_711_843_200), 1_709_164_800);
    }

    #[test]
    fn never_panics_on_garbage() {
        for t in [
            "=",
            "\"",
            "a=\"",
            "\\",
            "#",
            "StoragePort=99999999",
            "a b c",
        ] {
            let _ = parse(t);
        }
    }

    #[test]
    fn key_pairs_list_the_settings_but_never_the_password() {
        let c = parse(
            "StorageType=accounting_storage/mysql\nStorageHost=db1\nStorageUser=slurm\n\
             StoragePass=s3cret\nPurgeJobAfter=12month\nPrivateData=jobs,usage\nDbdPort=7031\n",
        )
        .unwrap();
        let pairs = c.key_pairs();
        assert!(pairs
            .iter()
            .all(|(k, v)| k != "StoragePass" && !v.contains("s3cret")));
        let get = |k: &str| pairs.iter().find(|p| p.0 == k).map(|p| p.1.as_str());
        assert_eq!(get("StorageType"), Some("accounting_storage/mysql"));
        assert_eq!(get("StorageHost"), Some("db1"));
        assert_eq!(get("StorageUser"), Some("slurm"));
        assert_eq!(get("PurgeJobAfter"), Some("12 months"));
        assert_eq!(get("PurgeStepAfter"), Some("NONE"));
        assert_eq!(get("PrivateData"), Some("jobs,usage"));
        assert_eq!(get("DbdPort"), Some("7031"));
    }
}
