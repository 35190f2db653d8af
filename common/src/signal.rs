//! Signals by name or number (`scancel -s USR1`), and `--signal`'s
//! `[B:]SIG[@TIME]`, read alike by the commands and the controller.

/// A signal by name (`USR1`, `SIGUSR1`, any case) or number; `None` when
/// unknown.
pub fn parse(s: &str) -> Option<i32> {
    let t = s.trim();
    if t.trim_start_matches(['+', '-'])
        .starts_with(|c: char| c.is_ascii_digit())
    {
        let n = t.parse::<i64>().ok()?;
        return (1..=127).contains(&n).then_some(n as i32);
    }
    let upper = t.to_ascii_uppercase();
    let name = upper.strip_prefix("SIG").unwrap_or(&upper);
    let sig = match name {
        "HUP" => libc::SIGHUP,
        "INT" => libc::SIGINT,
        "QUIT" => libc::SIGQUIT,
        "ILL" => libc::SIGILL,
        "TRAP" => libc::SIGTRAP,
        "ABRT" | "IOT" => libc::SIGABRT,
        "BUS" => libc::SIGBUS,
        "FPE" => libc::SIGFPE,
        "KILL" => libc::SIGKILL,
        "USR1" => libc::SIGUSR1,
        "SEGV" => libc::SIGSEGV,
        "USR2" => libc::SIGUSR2,
        "PIPE" => libc::SIGPIPE,
        "ALRM" => libc::SIGALRM,
        "TERM" => libc::SIGTERM,
        "CHLD" => libc::SIGCHLD,
        "CONT" => libc::SIGCONT,
        "STOP" => libc::SIGSTOP,
        "TSTP" => libc::SIGTSTP,
        "TTIN" => libc::SIGTTIN,
        "TTOU" => libc::SIGTTOU,
        "URG" => libc::SIGURG,
        "XCPU" => libc::SIGXCPU,
        "XFSZ" => libc::SIGXFSZ,
        "VTALRM" => libc::SIGVTALRM,
        "PROF" => libc::SIGPROF,
        "WINCH" => libc::SIGWINCH,
        "IO" | "POLL" => libc::SIGIO,
        "SYS" => libc::SIGSYS,
        _ => return None,
    };
    Some(sig)
}

/// `--signal=[{R}:][B:]SIG[@TIME]`: send SIG to the job TIME seconds (60 by
/// default, at most 65535) before its time limit; with `B:` to the batch
/// shell only, else to its steps.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Warning {
    pub signal: i32,
    pub secs: u32,
    pub batch_only: bool,
}

/// Reads `--signal`'s value; the error names what is wrong.
pub fn parse_warning(v: &str) -> Result<Warning, String> {
    let bad = |why: &str| format!("Invalid --signal specification: {v} ({why})");
    let mut rest = v.trim();
    let mut batch_only = false;
    loop {
        if let Some(r) = rest.strip_prefix("B:") {
            batch_only = true;
            rest = r;
        } else if rest.starts_with("R:") {
            return Err(bad("signals at a reservation's end are not supported yet"));
        } else {
            break;
        }
    }
    let (sig, secs) = match rest.split_once('@') {
        Some((s, t)) => {
            let secs: u32 = t.trim().parse().map_err(|_| bad("bad time"))?;
            if secs > 65535 {
                return Err(bad("time over 65535 seconds"));
            }
            (s, secs)
        }
        None => (rest, 60),
    };
    let signal = parse(sig).ok_or_else(|| bad("unknown signal"))?;
    Ok(Warning {
        signal,
        secs,
        batch_only,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_numbers_and_warnings() {
        assert_eq!(parse("usr1"), Some(libc::SIGUSR1));
        assert_eq!(parse("SIGTERM"), Some(libc::SIGTERM));
        assert_eq!(parse("10"), Some(10));
        assert_eq!(parse("0"), None);
        assert_eq!(parse("bogus"), None);
        assert_eq!(
            parse_warning("B:USR1@120").unwrap(),
            Warning {
                signal: libc::SIGUSR1,
                secs: 120,
                batch_only: true
            }
        );
        assert_eq!(parse_warning("10").unwrap().secs, 60);
        assert!(parse_warning("USR1@x").is_err());
        assert!(parse_warning("NOPE@10").is_err());
        assert!(parse_warning("R:USR1@10")
            .unwrap_err()
            .contains("reservation"));
        assert!(parse_warning("USR1@70000").is_err());
    }
}
