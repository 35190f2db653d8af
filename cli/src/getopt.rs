//! getopt_long, as glibc implements it: the one option parser of every
//! command (sbatch and scancel on it directly, the others through
//! [`crate::fmt::getopt`]).
//!
//! Long options take `--name=value` or `--name value` (required arguments
//! only); unambiguous prefixes of long names are accepted; short options may
//! be clustered (`-vQ`) and take their argument attached (`-n2`) or as the
//! next word (`-n 2`); optional arguments are only ever attached, except
//! [`HasArg::OptionalNext`]'s (squeue's `-j 12`, as Slurm reads it). `--`
//! ends the options. Error messages are glibc's.

/// Whether an option takes an argument.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum HasArg {
    No,
    Required,
    Optional,
    /// Attached, or else the next word when it is not an option.
    OptionalNext,
}

/// Whether `args[i]` can be an optional argument (not an option).
fn next_is_value(args: &[String], i: usize) -> bool {
    args.get(i).is_some_and(|a| !a.starts_with('-') || a == "-")
}

/// One entry of an option table. `id` names what the option does;
/// aliases (`--name`/`--jobname`) share an id.
#[derive(Clone, Copy, Debug)]
pub struct Opt {
    pub long: Option<&'static str>,
    pub short: Option<char>,
    pub has_arg: HasArg,
    pub id: usize,
}

/// Options in the order given (id, argument), and the operands.
#[derive(Debug, Default, Clone, PartialEq)]
pub struct Parsed {
    pub opts: Vec<(usize, Option<String>)>,
    pub operands: Vec<String>,
}

/// A getopt failure: glibc's one-line message (prefixed with the program
/// name), and the options read before it (a command acts on those in
/// order, so `--version` before a bad option still wins).
#[derive(Debug, Clone, PartialEq)]
pub struct Error {
    pub message: String,
    pub before: Parsed,
}

/// Parses `args` (without the program name). With `permute`, operands
/// may be mixed with options (glibc's default); without, the first
/// operand ends the options (a leading `+` in the option string).
pub fn parse(prog: &str, args: &[String], table: &[Opt], permute: bool) -> Result<Parsed, Error> {
    let mut out = Parsed::default();
    macro_rules! fail {
        ($($t:tt)*) => {
            return Err(Error { message: format!($($t)*), before: out })
        };
    }
    let mut i = 0;
    while i < args.len() {
        let a = &args[i];
        if a == "--" {
            out.operands.extend(args[i + 1..].iter().cloned());
            break;
        }
        if let Some(body) = a.strip_prefix("--") {
            let (name, val) = match body.find('=') {
                Some(p) => (&body[..p], Some(&body[p + 1..])),
                None => (body, None),
            };
            let opt = match table.iter().find(|o| o.long == Some(name)) {
                Some(o) => *o,
                None => {
                    let cands: Vec<&Opt> = table
                        .iter()
                        .filter(|o| o.long.is_some_and(|l| l.starts_with(name)))
                        .collect();
                    let mut uniq: Vec<&Opt> = Vec::new();
                    for c in &cands {
                        if !uniq.iter().any(|u| u.id == c.id && u.has_arg == c.has_arg) {
                            uniq.push(c);
                        }
                    }
                    match uniq.len() {
                        0 => fail!("{prog}: unrecognized option '--{body}'"),
                        1 => *uniq[0],
                        _ => {
                            let mut msg =
                                format!("{prog}: option '--{body}' is ambiguous; possibilities:");
                            for c in cands {
                                msg.push_str(&format!(" '--{}'", c.long.unwrap_or_default()));
                            }
                            fail!("{msg}");
                        }
                    }
                }
            };
            let long = opt.long.unwrap_or_default();
            match opt.has_arg {
                HasArg::No => {
                    if val.is_some() {
                        fail!("{prog}: option '--{long}' doesn't allow an argument");
                    }
                    out.opts.push((opt.id, None));
                }
                HasArg::Required => {
                    if let Some(v) = val {
                        out.opts.push((opt.id, Some(v.to_string())));
                    } else if i + 1 < args.len() {
                        i += 1;
                        out.opts.push((opt.id, Some(args[i].clone())));
                    } else {
                        fail!("{prog}: option '--{long}' requires an argument");
                    }
                }
                HasArg::Optional => out.opts.push((opt.id, val.map(str::to_string))),
                HasArg::OptionalNext => match val {
                    Some(v) => out.opts.push((opt.id, Some(v.to_string()))),
                    None if next_is_value(args, i + 1) => {
                        i += 1;
                        out.opts.push((opt.id, Some(args[i].clone())));
                    }
                    None => out.opts.push((opt.id, None)),
                },
            }
            i += 1;
            continue;
        }
        if a.len() > 1 && a.starts_with('-') {
            let chars: Vec<char> = a[1..].chars().collect();
            let mut j = 0;
            while j < chars.len() {
                let c = chars[j];
                let Some(opt) = table.iter().find(|o| o.short == Some(c)) else {
                    fail!("{prog}: invalid option -- '{c}'");
                };
                let rest: String = chars[j + 1..].iter().collect();
                match opt.has_arg {
                    HasArg::No => {
                        out.opts.push((opt.id, None));
                        j += 1;
                    }
                    HasArg::Required => {
                        if !rest.is_empty() {
                            out.opts.push((opt.id, Some(rest)));
                        } else if i + 1 < args.len() {
                            i += 1;
                            out.opts.push((opt.id, Some(args[i].clone())));
                        } else {
                            fail!("{prog}: option requires an argument -- '{c}'");
                        }
                        break;
                    }
                    HasArg::Optional => {
                        out.opts.push((opt.id, (!rest.is_empty()).then_some(rest)));
                        break;
                    }
                    HasArg::OptionalNext => {
                        if !rest.is_empty() {
                            out.opts.push((opt.id, Some(rest)));
                        } else if next_is_value(args, i + 1) {
                            i += 1;
                            out.opts.push((opt.id, Some(args[i].clone())));
                        } else {
                            out.opts.push((opt.id, None));
                        }
                        break;
                    }
                }
            }
            i += 1;
            continue;
        }
        if permute {
            out.operands.push(a.clone());
            i += 1;
        } else {
            out.operands.extend(args[i..].iter().cloned());
            break;
        }
    }
    Ok(out)
}
