//! Resource limits carried from the submitting shell to a job's processes
//! (slurm.conf's `PropagateResourceLimits` and `PropagateResourceLimitsExcept`,
//! the commands' `--propagate`), as Slurm does: the command puts each soft
//! limit in the job's environment as `SLURM_RLIMIT_<NAME>=<value>`; the node
//! daemon takes those out and sets them in the job's processes before they
//! run as the user, never above the node's hard limit (a user cannot raise
//! a limit the node's administrator set).

/// Environment variables that carry a limit: this, then the limit's name.
pub const PREFIX: &str = "SLURM_RLIMIT_";

/// The limits Slurm propagates, by the names its configuration uses.
pub const NAMES: [&str; 10] = [
    "AS", "CORE", "CPU", "DATA", "FSIZE", "MEMLOCK", "NOFILE", "NPROC", "RSS", "STACK",
];

/// The kernel's resource number of a limit name of [`NAMES`].
fn resource(name: &str) -> Option<libc::c_int> {
    Some(match name {
        "AS" => libc::RLIMIT_AS,
        "CORE" => libc::RLIMIT_CORE,
        "CPU" => libc::RLIMIT_CPU,
        "DATA" => libc::RLIMIT_DATA,
        "FSIZE" => libc::RLIMIT_FSIZE,
        "MEMLOCK" => libc::RLIMIT_MEMLOCK,
        "NOFILE" => libc::RLIMIT_NOFILE,
        "NPROC" => libc::RLIMIT_NPROC,
        "RSS" => libc::RLIMIT_RSS,
        "STACK" => libc::RLIMIT_STACK,
        _ => return None,
    } as libc::c_int)
}

/// A list of limits as `--propagate` and `PropagateResourceLimits` take it:
/// `ALL`, `NONE`, or names of [`NAMES`] separated by commas (any case).
pub fn parse_list(spec: &str) -> Result<Vec<&'static str>, String> {
    let spec = spec.trim();
    if spec.eq_ignore_ascii_case("ALL") || spec.is_empty() {
        return Ok(NAMES.to_vec());
    }
    if spec.eq_ignore_ascii_case("NONE") {
        return Ok(Vec::new());
    }
    let mut out = Vec::new();
    for w in spec.split(',').map(str::trim) {
        let w = w.strip_prefix("RLIMIT_").unwrap_or(w);
        match NAMES.iter().find(|n| n.eq_ignore_ascii_case(w)) {
            Some(n) if !out.contains(n) => out.push(*n),
            Some(_) => {}
            None => return Err(format!("Bad rlimit name: {w}")),
        }
    }
    Ok(out)
}

/// The limits a submission carries: `--propagate`'s when given (a bare
/// `--propagate` is ALL), else slurm.conf's `PropagateResourceLimits`
/// (default ALL) less `PropagateResourceLimitsExcept`.
pub fn chosen(
    option: Option<&str>,
    conf: &crate::conf::SlurmConf,
) -> Result<Vec<&'static str>, String> {
    if let Some(o) = option {
        return parse_list(o);
    }
    let mut names = parse_list(conf.get("PropagateResourceLimits").unwrap_or("ALL"))?;
    if let Some(except) = conf.get("PropagateResourceLimitsExcept") {
        let except = parse_list(except)?;
        names.retain(|n| !except.contains(n));
    }
    Ok(names)
}

/// This process's soft limit of each of `names`, as environment variables
/// for the job.
pub fn env_of(names: &[&str]) -> Vec<(String, String)> {
    names
        .iter()
        .filter_map(|n| {
            let r = resource(n)?;
            let mut l = libc::rlimit {
                rlim_cur: 0,
                rlim_max: 0,
            };
            // SAFETY: getrlimit writes into the struct we pass.
            if unsafe { libc::getrlimit(r as _, &mut l) } != 0 {
                return None;
            }
            Some((format!("{PREFIX}{n}"), l.rlim_cur.to_string()))
        })
        .collect()
}

/// Put this process's soft limits of `names` in a job's environment
/// (`NAME=value` entries), in place of any carried there already.
pub fn carry_in(env: &mut Vec<String>, names: &[&str]) {
    env.retain(|kv| !kv.starts_with(PREFIX));
    env.extend(env_of(names).into_iter().map(|(k, v)| format!("{k}={v}")));
}

/// One limit to set in a job's process: (resource, soft limit).
pub type Limit = (libc::c_int, u64);

/// Take the `SLURM_RLIMIT_*` variables out of a job's environment: the
/// limits they ask for (a name or value that does not parse is dropped).
pub fn take_from_env(env: &mut Vec<(String, String)>) -> Vec<Limit> {
    let mut out = Vec::new();
    env.retain(|(k, v)| {
        let Some(name) = k.strip_prefix(PREFIX) else {
            return true;
        };
        if let (Some(r), Ok(n)) = (resource(name), v.trim().parse::<u64>()) {
            out.push((r, n));
        }
        false
    });
    out
}

/// Set `limits` in this process: each soft limit as asked, but never above
/// the hard limit it has. Only system calls: safe between `fork` and `exec`.
/// A limit that cannot be set is left as it was.
pub fn apply(limits: &[Limit]) {
    for &(r, want) in limits {
        let mut l = libc::rlimit {
            rlim_cur: 0,
            rlim_max: 0,
        };
        // SAFETY: getrlimit/setrlimit read and write the struct we pass.
        unsafe {
            if libc::getrlimit(r as _, &mut l) != 0 {
                continue;
            }
            let hard = l.rlim_max;
            l.rlim_cur = want.min(hard);
            libc::setrlimit(r as _, &l);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lists_name_limits_or_say_which_is_bad() {
        assert_eq!(parse_list("ALL").unwrap().len(), NAMES.len());
        assert!(parse_list("none").unwrap().is_empty());
        assert_eq!(
            parse_list("stack, NOFILE,RLIMIT_CORE,stack").unwrap(),
            vec!["STACK", "NOFILE", "CORE"]
        );
        assert_eq!(parse_list("STACK,FOO").unwrap_err(), "Bad rlimit name: FOO");
    }

    #[test]
    fn the_configuration_chooses_unless_the_option_does() {
        let conf = |text: &str| {
            let dir = tempfile::tempdir().unwrap();
            let p = dir.path().join("slurm.conf");
            std::fs::write(
                &p,
                format!("ClusterName=c\nSlurmctldHost=h\nNodeName=n CPUs=1\n{text}"),
            )
            .unwrap();
            crate::conf::SlurmConf::load(&p).unwrap()
        };
        let all = conf("");
        assert_eq!(chosen(None, &all).unwrap().len(), NAMES.len());
        assert_eq!(chosen(Some("STACK"), &all).unwrap(), vec!["STACK"]);
        let except = conf("PropagateResourceLimitsExcept=MEMLOCK,NOFILE\n");
        let names = chosen(None, &except).unwrap();
        assert!(!names.contains(&"MEMLOCK") && !names.contains(&"NOFILE"));
        assert_eq!(names.len(), NAMES.len() - 2);
        let some = conf("PropagateResourceLimits=CORE,CPU\n");
        assert_eq!(chosen(None, &some).unwrap(), vec!["CORE", "CPU"]);
        // The option wins over the configuration.
        assert_eq!(chosen(Some("NONE"), &some).unwrap(), Vec::<&str>::new());
    }

    #[test]
    fn limits_leave_the_environment_and_never_pass_the_hard_limit() {
        let mut env = vec![
            ("A".to_string(), "1".to_string()),
            (format!("{PREFIX}NOFILE"), "64".to_string()),
            (format!("{PREFIX}BOGUS"), "1".to_string()),
            (format!("{PREFIX}CORE"), "many".to_string()),
        ];
        let limits = take_from_env(&mut env);
        assert_eq!(env, vec![("A".to_string(), "1".to_string())]);
        assert_eq!(limits, vec![(libc::RLIMIT_NOFILE as libc::c_int, 64)]);
        // In a child: lower the soft limit, then ask for more than the
        // hard one: it stops at the hard limit.
        let out = std::process::Command::new("sh")
            .args(["-c", "ulimit -Hn"])
            .output()
            .unwrap();
        let hard = String::from_utf8_lossy(&out.stdout).trim().to_string();
        let run = |want: u64| {
            use std::os::unix::process::CommandExt;
            let mut c = std::process::Command::new("sh");
            c.args(["-c", "ulimit -Sn"]);
            // SAFETY: only system calls in the child.
            unsafe {
                c.pre_exec(move || {
                    apply(&[(libc::RLIMIT_NOFILE as libc::c_int, want)]);
                    Ok(())
                });
            }
            let out = c.output().unwrap();
            String::from_utf8_lossy(&out.stdout).trim().to_string()
        };
        assert_eq!(run(100), "100");
        match hard.parse::<u64>() {
            Ok(h) => assert_eq!(run(h + 1000), hard),
            // No hard limit: nothing to stop at.
            Err(_) => assert_eq!(run(u64::MAX), "unlimited"),
        }
    }
}
