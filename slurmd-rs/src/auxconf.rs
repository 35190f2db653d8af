//! Lexing of the files that live beside slurm.conf and only the node daemon
//! reads (`cgroup.conf`, `gres.conf`): `#` comments, `\` line continuation,
//! whitespace-separated `Key=Value` words, double-quoted values. Keys are
//! case-insensitive (callers compare them with `eq_ignore_ascii_case`).

use std::fmt;
use std::path::{Path, PathBuf};

/// A configuration error, naming the file and line.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub struct AuxConfError {
    pub file: PathBuf,
    /// 0 when the error is about the whole file (it cannot be read).
    pub line: usize,
    pub message: String,
}

impl fmt::Display for AuxConfError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.line == 0 {
            write!(f, "{}: {}", self.file.display(), self.message)
        } else {
            write!(f, "{}:{}: {}", self.file.display(), self.line, self.message)
        }
    }
}

/// One logical line: its first physical line number and its words.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Line {
    pub line: usize,
    pub words: Vec<(String, String)>,
}

impl Line {
    /// The value of `key` (case-insensitive), last one wins.
    pub fn get(&self, key: &str) -> Option<&str> {
        self.words
            .iter()
            .rev()
            .find(|(k, _)| k.eq_ignore_ascii_case(key))
            .map(|(_, v)| v.as_str())
    }
}

fn strip_comment(line: &str) -> &str {
    let mut in_quote = false;
    for (i, c) in line.char_indices() {
        match c {
            '"' => in_quote = !in_quote,
            '#' if !in_quote => return &line[..i],
            _ => {}
        }
    }
    line
}

fn words(text: &str) -> Result<Vec<(String, String)>, String> {
    let mut out = Vec::new();
    let mut rest = text.trim_start();
    while !rest.is_empty() {
        let Some(eq) = rest.find('=') else {
            let w = rest.split_whitespace().next().unwrap_or(rest);
            return Err(format!("expected Key=Value, found `{w}'"));
        };
        let key = &rest[..eq];
        if key.is_empty() || key.contains(char::is_whitespace) || key.contains('"') {
            let w = key.split_whitespace().next().unwrap_or(key);
            return Err(format!("expected Key=Value, found `{w}'"));
        }
        let mut value = String::new();
        let mut chars = rest[eq + 1..].char_indices();
        let mut end = rest.len() - eq - 1;
        let mut in_quote = false;
        for (i, c) in chars.by_ref() {
            match c {
                '"' => in_quote = !in_quote,
                c if c.is_whitespace() && !in_quote => {
                    end = i;
                    break;
                }
                c => value.push(c),
            }
        }
        if in_quote {
            return Err(format!("unterminated quote in the value of {key}"));
        }
        out.push((key.to_string(), value));
        rest = rest[eq + 1 + end..].trim_start();
    }
    Ok(out)
}

/// Split a file's text into logical lines of `Key=Value` words.
pub fn lex(text: &str, file: &Path) -> Result<Vec<Line>, AuxConfError> {
    let mut out = Vec::new();
    let mut pending = String::new();
    let mut start = 0;
    for (i, raw) in text.lines().enumerate() {
        let no = i + 1;
        let body = strip_comment(raw);
        if pending.is_empty() {
            start = no;
        }
        let trimmed = body.trim_end();
        if let Some(head) = trimmed.strip_suffix('\\') {
            pending.push_str(head);
            pending.push(' ');
            continue;
        }
        pending.push_str(trimmed);
        let logical = std::mem::take(&mut pending);
        if logical.trim().is_empty() {
            continue;
        }
        let words = words(&logical).map_err(|message| AuxConfError {
            file: file.to_path_buf(),
            line: start,
            message,
        })?;
        out.push(Line { line: start, words });
    }
    if !pending.trim().is_empty() {
        let words = words(&pending).map_err(|message| AuxConfError {
            file: file.to_path_buf(),
            line: start,
            message,
        })?;
        out.push(Line { line: start, words });
    }
    Ok(out)
}

/// Read a file beside slurm.conf; `Ok(None)` when it does not exist.
pub fn read_optional(path: &Path) -> Result<Option<String>, AuxConfError> {
    match std::fs::read_to_string(path) {
        Ok(t) => Ok(Some(t)),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(AuxConfError {
            file: path.to_path_buf(),
            line: 0,
            message: format!("cannot read: {e}"),
        }),
    }
}

/// `yes`/`no` (and `true`/`false`, `1`/`0`), case-insensitive.
pub fn parse_bool(v: &str) -> Option<bool> {
    match v.trim().to_ascii_lowercase().as_str() {
        "yes" | "true" | "1" | "on" => Some(true),
        "no" | "false" | "0" | "off" => Some(false),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_words_comments_and_continuations() {
        let text = "# header\nA=1 b=two  # trailing\n\nName=gpu \\\n  File=/dev/nvidia[0-1]\nQ=\"a # b\" R=\n";
        let lines = lex(text, Path::new("/etc/x.conf")).unwrap();
        assert_eq!(lines.len(), 3);
        assert_eq!(lines[0].line, 2);
        assert_eq!(lines[0].get("a"), Some("1"));
        assert_eq!(lines[0].get("B"), Some("two"));
        assert_eq!(lines[1].line, 4);
        assert_eq!(lines[1].get("file"), Some("/dev/nvidia[0-1]"));
        assert_eq!(lines[2].get("q"), Some("a # b"));
        assert_eq!(lines[2].get("r"), Some(""));
        let e = lex("ok=1\nnonsense here\n", Path::new("/etc/x.conf")).unwrap_err();
        assert_eq!(
            e.to_string(),
            "/etc/x.conf:2: expected Key=Value, found `nonsense'"
        );
        let e = lex("A=\"open\n", Path::new("/c")).unwrap_err();
        assert_eq!(e.line, 1);
        assert!(e.message.contains("unterminated"), "{e}");
        assert_eq!(parse_bool("Yes"), Some(true));
        assert_eq!(parse_bool("no"), Some(false));
        assert_eq!(parse_bool("maybe"), None);
    }
}
