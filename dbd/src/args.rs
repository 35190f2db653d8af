//! `slurmdbd`'s command line, as Slurm's: `-D` (foreground, logging to the
//! terminal), `-f FILE`, `-v` (more verbose, repeatable), `-V` (version), `-h`.

use std::path::PathBuf;

#[derive(Debug, Default, PartialEq)]
pub struct Args {
    pub foreground: bool,
    pub conf: Option<PathBuf>,
    pub verbose: u8,
    pub version: bool,
    pub help: bool,
}

pub const USAGE: &str = "Usage: slurmdbd [OPTIONS]\n  -D            Run daemon in foreground, with logging copied to stderr.\n  -f file       Use specified file for slurmdbd configuration.\n  -h            Print this help message.\n  -v            Verbose mode. Multiple -v's increase verbosity.\n  -V            Print version information and exit.\n";

pub fn parse<I: IntoIterator<Item = String>>(args: I) -> Result<Args, String> {
    let mut a = Args::default();
    let mut it = args.into_iter();
    while let Some(arg) = it.next() {
        match arg.as_str() {
            "-D" => a.foreground = true,
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
            s if s.starts_with("-f") && s.len() > 2 => a.conf = Some(s[2..].into()),
            s if s.starts_with('-') && s.len() > 1 && s[1..].chars().all(|c| c == 'v') => {
                a.verbose = a.verbose.saturating_add((s.len() - 1) as u8)
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
        let a = p("-D -f /etc/slurm/slurmdbd.conf -vv -v").unwrap();
        assert!(a.foreground);
        assert_eq!(
            a.conf.as_deref(),
            Some(std::path::Path::new("/etc/slurm/slurmdbd.conf"))
        );
        assert_eq!(a.verbose, 3);
        assert!(p("-V").unwrap().version);
        assert_eq!(p("-fx.conf").unwrap().conf, Some("x.conf".into()));
        assert!(p("-f").is_err());
        assert_eq!(p("-x").unwrap_err(), "invalid option -- 'x'");
    }
}
