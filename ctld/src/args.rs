//! `slurmctld`'s command line, as Slurm's: `-D` (foreground), `-f FILE`,
//! `-i` (ignore errors in saved state), `-c` (clear saved jobs), `-L FILE`
//! (log file), `-v` (more verbose, repeatable), `-V` (version), `-h`; and,
//! beyond Slurm, `--host NAME`: which `SlurmctldHost` this process is (for
//! controllers that share a host name, as on one test machine).

use std::path::PathBuf;

#[derive(Debug, Default, PartialEq)]
pub struct Args {
    pub foreground: bool,
    pub conf: Option<PathBuf>,
    pub ignore_state_errors: bool,
    pub clear_state: bool,
    pub log_file: Option<PathBuf>,
    pub verbose: u8,
    pub version: bool,
    pub help: bool,
    pub host: Option<String>,
}

pub const USAGE: &str = "Usage: slurmctld [OPTIONS]\n  -c            Do not recover state from last checkpoint.\n  -D            Run daemon in foreground, with logging copied to stdout.\n  -f file       Use specified file for slurmctld configuration.\n  -h            Print this help message.\n  -i            Ignore errors found while reading in state files on startup.\n  -L logfile    Log messages to the specified file.\n  -v            Verbose mode. Multiple -v's increase verbosity.\n  -V            Print version information and exit.\n  --host NAME   Serve as the SlurmctldHost named NAME (default: this host's name).\n";

pub fn parse<I: IntoIterator<Item = String>>(args: I) -> Result<Args, String> {
    let mut a = Args::default();
    let mut it = args.into_iter();
    while let Some(arg) = it.next() {
        match arg.as_str() {
            "-D" => a.foreground = true,
            "-i" => a.ignore_state_errors = true,
            "-c" => a.clear_state = true,
            "-R" | "-s" => {}
            "-V" | "--version" => a.version = true,
            "-h" | "--help" => a.help = true,
            "-f" => {
                a.conf = Some(
                    it.next()
                        .ok_or("option requires an argument -- 'f'")?
                        .into(),
                )
            }
            "-L" => {
                a.log_file = Some(
                    it.next()
                        .ok_or("option requires an argument -- 'L'")?
                        .into(),
                )
            }
            "--host" => a.host = Some(it.next().ok_or("option '--host' requires an argument")?),
            s if s.starts_with("--host=") => a.host = Some(s["--host=".len()..].into()),
            s if s.starts_with("-f") && s.len() > 2 => a.conf = Some(s[2..].into()),
            s if s.starts_with("-L") && s.len() > 2 => a.log_file = Some(s[2..].into()),
            s if s.starts_with('-') && s.len() > 1 && s[1..].chars().all(|c| c == 'v') => {
                a.verbose += (s.len() - 1) as u8
            }
            s => return Err(format!("invalid option -- '{}'", s.trim_start_matches('-'))),
        }
    }
    Ok(a)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(s: &str) -> Result<Args, String> {
        parse(s.split_whitespace().map(String::from))
    }

    #[test]
    fn slurm_style_flags() {
        let a = p("-D -f /etc/slurm/slurm.conf -i -vv").unwrap();
        assert!(a.foreground && a.ignore_state_errors);
        assert_eq!(
            a.conf.as_deref(),
            Some(std::path::Path::new("/etc/slurm/slurm.conf"))
        );
        assert_eq!(a.verbose, 2);
        assert!(p("-V").unwrap().version);
        assert!(p("-f").is_err());
        assert_eq!(p("-x").unwrap_err(), "invalid option -- 'x'");
        assert_eq!(p("--host ctl2").unwrap().host.as_deref(), Some("ctl2"));
        assert_eq!(p("--host=ctl2").unwrap().host.as_deref(), Some("ctl2"));
        assert!(p("--host").is_err());
    }
}
