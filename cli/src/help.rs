//! `--help` and `--usage` of every command, in the layout of Slurm's
//! (`Usage: cmd [OPTIONS]`, then one line per option: `-x, --long=arg`
//! and what it does), made from the parsers' own tables ([`crate::compat`])
//! and the descriptions in `compat/help.txt`. Options the parser only
//! refuses are left out; a test checks that every option a table accepts
//! has its line, so the help cannot drift from the parser.

use crate::compat::{self, Known, Support};

const HELP_TXT: &str = include_str!("../compat/help.txt");

/// One line of `compat/help.txt`: (command, option, metavar, description).
fn entries() -> impl Iterator<Item = (&'static str, &'static str, &'static str, &'static str)> {
    HELP_TXT
        .lines()
        .filter(|l| !l.starts_with('#') && !l.trim().is_empty())
        .filter_map(|l| {
            let mut f = l.splitn(4, '\t');
            Some((f.next()?, f.next()?, f.next()?, f.next()?))
        })
}

fn entry(cmd: &str, k: &Known) -> Option<(&'static str, &'static str)> {
    let name = match (k.long, k.short) {
        (Some(l), _) => l.to_string(),
        (None, Some(s)) => format!("-{s}"),
        (None, None) => return None,
    };
    entries()
        .find(|(c, o, _, _)| *c == cmd && *o == name)
        .map(|(_, _, m, d)| (m, d))
}

/// What follows the options in the usage line.
fn operands(cmd: &str) -> &'static str {
    entries()
        .find(|(c, o, _, _)| *c == cmd && *o == "@usage")
        .map(|(_, _, _, d)| d)
        .filter(|d| *d != "-")
        .unwrap_or("")
}

/// The options `--help` lists: accepted ones, in the table's order.
fn listed(cmd: &str) -> Vec<Known> {
    compat::commands()
        .into_iter()
        .find(|c| c.name == cmd)
        .map(|c| c.options)
        .unwrap_or_default()
        .into_iter()
        .filter(|k| !matches!(k.support, Support::NotYet(_)))
        .collect()
}

/// Whether the option takes an argument, and whether it is optional.
fn arg_kind(metavar: &str) -> Option<&str> {
    (metavar != "-").then_some(metavar)
}

/// `-A, --account=name` (the option column of `--help`).
fn spelled(k: &Known, metavar: &str, optional: bool) -> String {
    let mut s = match k.short {
        Some(c) if k.long.is_some() => format!("-{c}, "),
        Some(c) => format!("-{c}"),
        None => "    ".to_string(),
    };
    if let Some(l) = k.long {
        s.push_str("--");
        s.push_str(l);
    }
    if let Some(m) = arg_kind(metavar) {
        match (k.long.is_some(), optional) {
            (true, true) => s.push_str(&format!("[={m}]")),
            (true, false) => s.push_str(&format!("={m}")),
            (false, true) => s.push_str(&format!("[{m}]")),
            (false, false) => s.push_str(&format!(" {m}")),
        }
    }
    s
}

/// `cmd --help`.
pub fn help(cmd: &str) -> String {
    let mut out = format!("Usage: {cmd} [OPTIONS...] {}", operands(cmd))
        .trim_end()
        .to_string();
    out.push_str("\n\nOptions:\n");
    for k in listed(cmd) {
        let Some((metavar, what)) = entry(cmd, &k) else {
            continue;
        };
        let col = spelled(&k, metavar, k.optional);
        if col.len() <= 30 {
            out.push_str(&format!("  {col:<30}{what}\n"));
        } else {
            out.push_str(&format!("  {col}\n  {:<30}{what}\n", ""));
        }
    }
    out
}

/// `cmd --usage`: every accepted option in brackets, wrapped at 80
/// columns under the command's name, as Slurm's.
pub fn usage(cmd: &str) -> String {
    let head = format!("Usage: {cmd} ");
    let indent = " ".repeat(head.len());
    let mut words: Vec<String> = Vec::new();
    for k in listed(cmd) {
        let Some((metavar, _)) = entry(cmd, &k) else {
            continue;
        };
        let is_opt = k.optional;
        let w = match (k.short, k.long, arg_kind(metavar)) {
            (Some(c), _, None) => format!("[-{c}]"),
            (Some(c), _, Some(m)) if is_opt => format!("[-{c}[{m}]]"),
            (Some(c), _, Some(m)) => format!("[-{c} {m}]"),
            (None, Some(l), None) => format!("[--{l}]"),
            (None, Some(l), Some(m)) if is_opt => format!("[--{l}[={m}]]"),
            (None, Some(l), Some(m)) => format!("[--{l}={m}]"),
            (None, None, _) => continue,
        };
        words.push(w);
    }
    let ops = operands(cmd);
    if !ops.is_empty() {
        words.push(ops.to_string());
    }
    let mut out = head.clone();
    let mut col = head.len();
    for (i, w) in words.iter().enumerate() {
        if i > 0 && col + 1 + w.len() > 80 {
            out.push('\n');
            out.push_str(&indent);
            col = indent.len();
        } else if i > 0 {
            out.push(' ');
            col += 1;
        }
        out.push_str(w);
        col += w.len();
    }
    out.push('\n');
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_accepted_option_has_its_help_line_and_no_line_is_stale() {
        for c in compat::commands() {
            for k in &c.options {
                if matches!(k.support, Support::NotYet(_)) {
                    continue;
                }
                assert!(
                    entry(c.name, k).is_some(),
                    "{}: no line in compat/help.txt for {:?}",
                    c.name,
                    k.long
                        .map(String::from)
                        .or(k.short.map(|s| format!("-{s}")))
                );
            }
        }
        for (cmd, opt, _, _) in entries() {
            if opt == "@usage" {
                continue;
            }
            let c = compat::commands().into_iter().find(|c| c.name == cmd);
            let c = c.unwrap_or_else(|| panic!("compat/help.txt names command {cmd}"));
            let known = c.options.iter().any(|k| match opt.strip_prefix('-') {
                Some(s) => k.long.is_none() && k.short.map(String::from).as_deref() == Some(s),
                None => k.long == Some(opt),
            });
            assert!(known, "compat/help.txt: {cmd} has no option {opt}");
        }
    }

    #[test]
    fn help_and_usage_in_slurms_layout() {
        let h = help("sbatch");
        assert!(h.starts_with("Usage: sbatch [OPTIONS...] script [args...]\n\nOptions:\n"));
        assert!(h.contains("\n  -A, --account=name            charge the job to this account\n"));
        // Optional arguments are bracketed; refused options are not listed.
        assert!(h.contains("      --exclusive[="), "{h}");
        assert!(!h.contains("--container"), "{h}");
        assert!(h.contains("\n      --uid=user "), "{h}");
        let u = usage("squeue");
        assert!(u.starts_with("Usage: squeue [-A "), "{u}");
        assert!(u.lines().all(|l| l.len() <= 80), "{u}");
        assert!(
            u.lines().skip(1).all(|l| l.starts_with("              [")),
            "{u}"
        );
    }
}
