//! The daemons' logs, as Slurm's: a level from `SlurmctldDebug`,
//! `SlurmdDebug` or `DebugLevel` (Slurm's names, each `-v` one step more),
//! a log file (`SlurmctldLogFile`, `SlurmdLogFile`, `LogFile`) reopened on
//! SIGUSR2 so logrotate can move it, and systemd's readiness protocol
//! ([`notify`]: `READY=1`, `RELOADING=1`, `STOPPING=1` to `NOTIFY_SOCKET`).

use std::fs::File;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

/// The tracing filter for a Slurm debug level name (`quiet`, `fatal`,
/// `error`, `info`, `verbose`, `debug`, `debug2`...`debug5`; default
/// `info`), raised one step by each of `verbose` (`-v`).
pub fn level(name: Option<&str>, verbose: u32) -> &'static str {
    const LEVELS: [&str; 5] = ["off", "error", "info", "debug", "trace"];
    let base = match name.map(|s| s.trim().to_ascii_lowercase()).as_deref() {
        Some("quiet") => 0,
        Some("fatal" | "error") => 1,
        Some("debug") => 3,
        Some(s) if s.starts_with("debug") => 4,
        _ => 2,
    };
    LEVELS[(base + verbose as usize).min(LEVELS.len() - 1)]
}

const LEVEL_NAMES: [&str; 10] = [
    "quiet", "fatal", "error", "info", "verbose", "debug", "debug2", "debug3", "debug4", "debug5",
];

/// Slurm's number for a debug level name (0 quiet .. 9 debug5; default
/// info, 3), raised one step by each of `verbose` (`-v`).
pub fn level_number(name: Option<&str>, verbose: u32) -> u32 {
    let name = name.map(|s| s.trim().to_ascii_lowercase());
    let base = name
        .as_deref()
        .and_then(|n| LEVEL_NAMES.iter().position(|l| *l == n))
        .unwrap_or(3) as u32;
    (base + verbose).min(9)
}

/// `scontrol setdebug`'s level as Slurm's number, from a name (any case)
/// or the number itself; `None` for anything else.
pub fn debug_level_number(s: &str) -> Option<u32> {
    let s = s.trim().to_ascii_lowercase();
    match s.parse::<usize>() {
        Ok(n) => (n < LEVEL_NAMES.len()).then_some(n as u32),
        Err(_) => LEVEL_NAMES.iter().position(|n| *n == s).map(|n| n as u32),
    }
}

/// `scontrol setdebug`'s level: a Slurm name (any case) or its number
/// (0 quiet .. 9 debug5), as the tracing filter [`level`] gives for it;
/// `None` for anything else.
pub fn debug_level(s: &str) -> Option<&'static str> {
    let n = debug_level_number(s)?;
    Some(level(Some(LEVEL_NAMES[n as usize]), 0))
}

/// A log file that can be opened again under its name (after logrotate
/// moved it away).
pub struct LogFile {
    path: PathBuf,
    file: Mutex<File>,
}

fn open_append(path: &Path) -> std::io::Result<File> {
    if let Some(dir) = path.parent() {
        let _ = std::fs::create_dir_all(dir);
    }
    std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)
}

impl LogFile {
    pub fn open(path: &Path) -> std::io::Result<Arc<LogFile>> {
        Ok(Arc::new(LogFile {
            path: path.to_path_buf(),
            file: Mutex::new(open_append(path)?),
        }))
    }

    /// Open the file again under its name; writes go there from now on.
    pub fn reopen(&self) -> std::io::Result<()> {
        let f = open_append(&self.path)?;
        *self.file.lock().unwrap_or_else(|p| p.into_inner()) = f;
        Ok(())
    }

    pub fn writer(self: &Arc<Self>) -> LogWriter {
        LogWriter(self.clone())
    }
}

/// Writes to the [`LogFile`] as it is now.
pub struct LogWriter(Arc<LogFile>);

impl Write for LogWriter {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0
            .file
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .write(buf)
    }
    fn flush(&mut self) -> std::io::Result<()> {
        self.0
            .file
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .flush()
    }
}

/// `LogTimeFormat`: how a log line's time is written.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum TimeFormat {
    Iso8601,
    #[default]
    Iso8601Ms,
    Rfc5424,
    Rfc5424Ms,
    Rfc3339,
    /// Microseconds of processor time (C's `clock()`).
    Clock,
    Short,
    /// ctime's form without the year, with microseconds, the process id and
    /// the thread's name.
    ThreadId,
}

impl TimeFormat {
    /// `LogTimeFormat=` as Slurm takes it (`format_stderr` may follow after
    /// a comma; our lines always carry the time).
    pub fn parse(v: Option<&str>) -> Result<TimeFormat, String> {
        let mut out = TimeFormat::default();
        for w in v
            .unwrap_or("")
            .split(',')
            .map(str::trim)
            .filter(|w| !w.is_empty())
        {
            out = match w.to_ascii_lowercase().as_str() {
                "iso8601" => TimeFormat::Iso8601,
                "iso8601_ms" => TimeFormat::Iso8601Ms,
                "rfc5424" => TimeFormat::Rfc5424,
                "rfc5424_ms" => TimeFormat::Rfc5424Ms,
                "rfc3339" => TimeFormat::Rfc3339,
                "clock" => TimeFormat::Clock,
                "short" => TimeFormat::Short,
                "thread_id" => TimeFormat::ThreadId,
                "format_stderr" => out,
                _ => return Err(format!("LogTimeFormat={w}: unknown format")),
            };
        }
        Ok(out)
    }

    /// The time as a log line begins with it (without brackets).
    pub fn stamp(self) -> String {
        let now = chrono::Local::now();
        match self {
            TimeFormat::Iso8601 => now.format("%Y-%m-%dT%H:%M:%S").to_string(),
            TimeFormat::Iso8601Ms => now.format("%Y-%m-%dT%H:%M:%S%.3f").to_string(),
            TimeFormat::Rfc5424 | TimeFormat::Rfc3339 => {
                now.format("%Y-%m-%dT%H:%M:%S%:z").to_string()
            }
            TimeFormat::Rfc5424Ms => now.format("%Y-%m-%dT%H:%M:%S%.3f%:z").to_string(),
            TimeFormat::Clock => {
                let mut ts = libc::timespec {
                    tv_sec: 0,
                    tv_nsec: 0,
                };
                // SAFETY: ts is a valid timespec; the clock id is a constant.
                unsafe { libc::clock_gettime(libc::CLOCK_PROCESS_CPUTIME_ID, &mut ts) };
                (ts.tv_sec * 1_000_000 + ts.tv_nsec / 1000).to_string()
            }
            TimeFormat::Short => now.format("%b %d %H:%M:%S").to_string(),
            TimeFormat::ThreadId => format!(
                "{} [{}] [{}]",
                now.format("%a %b %d %H:%M:%S%.6f"),
                std::process::id(),
                std::thread::current().name().unwrap_or("?")
            ),
        }
    }
}

/// Slurm's log line: `[time] ` then `error: `, `warning: `, `debug:  `,
/// `debug2: ` or nothing (info) before the message and its fields.
struct SlurmLine(TimeFormat);

impl<S, N> tracing_subscriber::fmt::FormatEvent<S, N> for SlurmLine
where
    S: tracing::Subscriber + for<'a> tracing_subscriber::registry::LookupSpan<'a>,
    N: for<'a> tracing_subscriber::fmt::FormatFields<'a> + 'static,
{
    fn format_event(
        &self,
        ctx: &tracing_subscriber::fmt::FmtContext<'_, S, N>,
        mut w: tracing_subscriber::fmt::format::Writer<'_>,
        event: &tracing::Event<'_>,
    ) -> std::fmt::Result {
        let prefix = match *event.metadata().level() {
            tracing::Level::ERROR => "error: ",
            tracing::Level::WARN => "warning: ",
            tracing::Level::INFO => "",
            tracing::Level::DEBUG => "debug:  ",
            tracing::Level::TRACE => "debug2: ",
        };
        let _ = ctx;
        let mut line = Fields::default();
        event.record(&mut line);
        writeln!(
            w,
            "[{}] {prefix}{}{}",
            self.0.stamp(),
            line.message,
            line.rest
        )
    }
}

/// An event's message, then its other fields as ` key=value`, plain.
#[derive(Default)]
struct Fields {
    message: String,
    rest: String,
}

impl tracing::field::Visit for Fields {
    fn record_str(&mut self, f: &tracing::field::Field, v: &str) {
        if f.name() == "message" {
            self.message.push_str(v);
        } else {
            self.rest.push_str(&format!(" {}={v}", f.name()));
        }
    }
    fn record_debug(&mut self, f: &tracing::field::Field, v: &dyn std::fmt::Debug) {
        if f.name() == "message" {
            self.message.push_str(&format!("{v:?}"));
        } else {
            self.rest.push_str(&format!(" {}={v:?}", f.name()));
        }
    }
}

/// Start logging at `level` (a tracing filter; `env` names a variable that
/// overrides it) to `file`, else to stderr, each line as Slurm's
/// (`LogTimeFormat` given as `time`). Returns the file, to be reopened on
/// SIGUSR2 ([`reopen_on_sigusr2`]).
pub fn init(
    env: &str,
    level: &str,
    file: Option<&Path>,
    time: TimeFormat,
) -> Result<Option<Arc<LogFile>>, String> {
    let from_env = tracing_subscriber::EnvFilter::try_from_env(env).ok();
    // The environment's filter, when given, stays (it is for debugging).
    let pinned = from_env.is_some();
    let filter = from_env.unwrap_or_else(|| filter(level));
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .event_format(SlurmLine(time));
    match file {
        Some(path) => {
            let log = LogFile::open(path)
                .map_err(|e| format!("cannot open log file {}: {e}", path.display()))?;
            let w = log.clone();
            let builder = builder
                .with_writer(move || w.writer())
                .with_filter_reloading();
            keep_reload(builder.reload_handle(), pinned);
            builder.init();
            Ok(Some(log))
        }
        None => {
            let builder = builder.with_writer(std::io::stderr).with_filter_reloading();
            keep_reload(builder.reload_handle(), pinned);
            builder.init();
            Ok(None)
        }
    }
}

/// `level` for this program's own lines; libraries' chatter (Raft's
/// elections, step by step) only when it is an error.
fn filter(level: &str) -> tracing_subscriber::EnvFilter {
    tracing_subscriber::EnvFilter::new(format!("{level},openraft=error"))
}

fn keep_reload<S: 'static>(
    handle: tracing_subscriber::reload::Handle<tracing_subscriber::EnvFilter, S>,
    pinned: bool,
) {
    if pinned {
        return;
    }
    let _ = RELOAD.set(Box::new(move |level: &str| {
        handle.reload(filter(level)).map_err(|e| e.to_string())
    }));
}

/// Changes the level [`init`] set.
type Reload = Box<dyn Fn(&str) -> Result<(), String> + Send + Sync>;
static RELOAD: std::sync::OnceLock<Reload> = std::sync::OnceLock::new();

/// Log at `level` from now on (a daemon's debug level changed by a
/// reconfigure). False when logging was not started by [`init`] or its
/// level comes from the environment variable, which then stays in force.
pub fn set_level(level: &str) -> bool {
    RELOAD.get().is_some_and(|r| r(level).is_ok())
}

/// On each SIGUSR2, open the log file again (Slurm's daemons do this for
/// logrotate). Call from within a tokio runtime.
pub fn reopen_on_sigusr2(log: Option<Arc<LogFile>>) {
    let Some(log) = log else { return };
    let Ok(mut sig) = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::user_defined2())
    else {
        return;
    };
    tokio::spawn(async move {
        while sig.recv().await.is_some() {
            match log.reopen() {
                Ok(()) => tracing::info!("log file reopened"),
                Err(e) => eprintln!("cannot reopen log file {}: {e}", log.path.display()),
            }
        }
    });
}

/// Tell systemd how the daemon is (`READY=1`, `RELOADING=1`,
/// `STOPPING=1`, `STATUS=...`) when it started us with `NOTIFY_SOCKET`
/// (`Type=notify`); nothing otherwise. Returns whether it was sent.
pub fn notify(state: &str) -> bool {
    match std::env::var_os("NOTIFY_SOCKET") {
        Some(p) => notify_to(Path::new(&p), state).is_ok(),
        None => false,
    }
}

/// [`notify`] to the socket at `path` (`@name`: the abstract namespace).
pub fn notify_to(path: &Path, state: &str) -> std::io::Result<()> {
    use std::os::unix::ffi::OsStrExt;
    let sock = std::os::unix::net::UnixDatagram::unbound()?;
    let bytes = path.as_os_str().as_bytes();
    match bytes.strip_prefix(b"@") {
        Some(name) => {
            use std::os::linux::net::SocketAddrExt;
            let addr = std::os::unix::net::SocketAddr::from_abstract_name(name)?;
            sock.send_to_addr(state.as_bytes(), &addr)?;
        }
        None => {
            sock.send_to(state.as_bytes(), path)?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn setdebug_levels_by_name_or_number() {
        assert_eq!(debug_level("Debug2"), Some("trace"));
        assert_eq!(debug_level("5"), Some("debug"));
        assert_eq!(debug_level("0"), Some("off"));
        assert_eq!(debug_level("error"), Some("error"));
        assert_eq!(debug_level("verbose"), Some("info"));
        for bad in ["10", "-1", "loud", ""] {
            assert_eq!(debug_level(bad), None, "{bad}");
            assert_eq!(debug_level_number(bad), None, "{bad}");
        }
        assert_eq!(debug_level_number("Debug2"), Some(6));
        assert_eq!(debug_level_number("9"), Some(9));
        assert_eq!(level_number(None, 0), 3);
        assert_eq!(level_number(Some("verbose"), 1), 5);
        assert_eq!(level_number(Some("debug5"), 3), 9);
        assert_eq!(level_number(Some("nonsense"), 0), 3);
    }

    #[test]
    fn log_time_formats() {
        assert_eq!(TimeFormat::parse(None).unwrap(), TimeFormat::Iso8601Ms);
        assert_eq!(
            TimeFormat::parse(Some("rfc5424_ms,format_stderr")).unwrap(),
            TimeFormat::Rfc5424Ms
        );
        assert!(TimeFormat::parse(Some("bogus"))
            .unwrap_err()
            .contains("bogus"));
        let iso = TimeFormat::Iso8601Ms.stamp();
        assert_eq!(iso.len(), "2026-11-26T14:55:58.123".len(), "{iso}");
        assert_eq!(&iso[10..11], "T");
        let rfc = TimeFormat::Rfc5424.stamp();
        assert!(
            rfc.ends_with(":00") || rfc.contains('+') || rfc.contains('-'),
            "{rfc}"
        );
    }

    #[test]
    fn slurm_level_names() {
        assert_eq!(level(None, 0), "info");
        assert_eq!(level(Some("quiet"), 0), "off");
        assert_eq!(level(Some("error"), 0), "error");
        assert_eq!(level(Some("Verbose"), 0), "info");
        assert_eq!(level(Some("debug"), 0), "debug");
        assert_eq!(level(Some("debug3"), 0), "trace");
        assert_eq!(level(Some("info"), 1), "debug");
        assert_eq!(level(Some("info"), 9), "trace");
    }

    #[test]
    fn readiness_reaches_the_socket() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("notify");
        let s = std::os::unix::net::UnixDatagram::bind(&p).unwrap();
        notify_to(&p, "READY=1\nSTATUS=serving").unwrap();
        let mut b = [0u8; 64];
        let n = s.recv(&mut b).unwrap();
        assert_eq!(&b[..n], b"READY=1\nSTATUS=serving");
        // The abstract namespace too.
        let name = format!("slurm-test-{}", std::process::id());
        use std::os::linux::net::SocketAddrExt;
        let a = std::os::unix::net::SocketAddr::from_abstract_name(name.as_bytes()).unwrap();
        let s = std::os::unix::net::UnixDatagram::bind_addr(&a).unwrap();
        notify_to(Path::new(&format!("@{name}")), "STOPPING=1").unwrap();
        let n = s.recv(&mut b).unwrap();
        assert_eq!(&b[..n], b"STOPPING=1");
        assert!(notify_to(&d.path().join("absent"), "READY=1").is_err());
    }

    #[test]
    fn a_moved_log_file_is_opened_again() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("x.log");
        let log = LogFile::open(&p).unwrap();
        let mut w = log.writer();
        w.write_all(b"one\n").unwrap();
        std::fs::rename(&p, d.path().join("x.log.1")).unwrap();
        w.write_all(b"two\n").unwrap();
        log.reopen().unwrap();
        w.write_all(b"three\n").unwrap();
        assert_eq!(
            std::fs::read_to_string(d.path().join("x.log.1")).unwrap(),
            "one\ntwo\n"
        );
        assert_eq!(std::fs::read_to_string(&p).unwrap(), "three\n");
    }
}
