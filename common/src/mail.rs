//! `--mail-type` and `--mail-user`, checked the same way by the commands
//! and the controller (whose mailer, `slurmctld::mail`, acts on them).

/// Every event `--mail-type` may name, as Slurm spells them.
pub const TYPES: &[&str] = &[
    "NONE",
    "BEGIN",
    "END",
    "FAIL",
    "REQUEUE",
    "ALL",
    "INVALID_DEPEND",
    "STAGE_OUT",
    "TIME_LIMIT",
    "TIME_LIMIT_90",
    "TIME_LIMIT_80",
    "TIME_LIMIT_50",
    "ARRAY_TASKS",
];

/// What `ALL` stands for.
const ALL: &[&str] = &[
    "BEGIN",
    "END",
    "FAIL",
    "REQUEUE",
    "INVALID_DEPEND",
    "STAGE_OUT",
];

/// `--mail-type=v` as the upper-case, comma-separated list the job keeps
/// (`ALL` spelled out); `None` for `NONE`. The error names the bad word.
pub fn parse_types(v: &str) -> Result<Option<String>, String> {
    let mut out: Vec<&str> = Vec::new();
    for w in v.split(',').map(str::trim).filter(|w| !w.is_empty()) {
        let up = w.to_ascii_uppercase();
        let Some(t) = TYPES.iter().find(|t| **t == up) else {
            return Err(format!("--mail-type={v} invalid: unknown type {w}"));
        };
        match *t {
            "NONE" => out.clear(),
            "ALL" => out.extend(ALL),
            t => out.push(t),
        }
    }
    out.sort_unstable();
    out.dedup();
    if v.split(',').all(|w| w.trim().is_empty()) {
        return Err(format!("--mail-type={v} invalid: no type given"));
    }
    Ok((!out.is_empty()).then(|| out.join(",")))
}

/// Whether `types` (as [`parse_types`] keeps them) holds `t`.
pub fn has(types: &str, t: &str) -> bool {
    types.split(',').any(|x| x == t)
}

/// `--mail-user`: one address or user name, handed to `MailProg` as one
/// argument, so nothing in it may read as an option or break a line.
pub fn check_user(v: &str) -> Result<(), String> {
    if v.is_empty() || v.len() > 256 {
        return Err(format!("--mail-user={v} invalid: empty or too long"));
    }
    if v.starts_with('-') {
        return Err(format!("--mail-user={v} invalid: may not start with '-'"));
    }
    if v.chars()
        .any(|c| c.is_whitespace() || c.is_control() || c == ',')
    {
        return Err(format!(
            "--mail-user={v} invalid: one address, without spaces or control characters"
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn types_are_checked_and_all_spelled_out() {
        assert_eq!(
            parse_types("begin,End").unwrap().as_deref(),
            Some("BEGIN,END")
        );
        assert_eq!(
            parse_types("ALL").unwrap().as_deref(),
            Some("BEGIN,END,FAIL,INVALID_DEPEND,REQUEUE,STAGE_OUT")
        );
        assert_eq!(parse_types("NONE").unwrap(), None);
        assert_eq!(parse_types("ALL,NONE").unwrap(), None);
        assert!(parse_types("BEGIN,BOGUS").unwrap_err().contains("BOGUS"));
        assert!(parse_types(",").is_err());
        assert!(has("BEGIN,END", "END") && !has("BEGIN,END", "FAIL"));
    }

    #[test]
    fn a_mail_user_cannot_pass_an_option_or_a_second_address() {
        assert!(check_user("alice@example.org").is_ok());
        assert!(check_user("alice").is_ok());
        assert!(check_user("-fattacker").is_err());
        assert!(check_user("a b").is_err());
        assert!(check_user("a\nb").is_err());
        assert!(check_user("a,b").is_err());
        assert!(check_user("").is_err());
    }
}
