//! TRES strings (`cpu=4,mem=16G,node=2,gres/gpu=1`): validation,
//! normalisation (Slurm's TRES order, memory in MiB with an `M`), and the
//! merge a patch does (`cpu=-1` drops cpu, other items replace theirs).

use std::collections::BTreeMap;

const BUILTIN: [&str; 8] = [
    "cpu", "mem", "energy", "node", "billing", "fs/disk", "vmem", "pages",
];
const TYPED: [&str; 5] = ["gres/", "license/", "bb/", "fs/", "ic/"];

fn rank(name: &str) -> usize {
    BUILTIN
        .iter()
        .position(|b| *b == name)
        .unwrap_or(BUILTIN.len())
}

/// One item: its name and count (`-1` only in patches).
fn parse_item(item: &str) -> Result<(String, i64), String> {
    let (name, value) = item
        .split_once('=')
        .ok_or_else(|| format!("invalid TRES '{item}': expected name=count"))?;
    let name = name.trim().to_ascii_lowercase();
    let known = BUILTIN.contains(&name.as_str())
        || TYPED
            .iter()
            .any(|p| name.starts_with(p) && name.len() > p.len());
    if !known {
        return Err(format!("invalid TRES '{item}': unknown TRES '{name}'"));
    }
    let value = value.trim();
    if value == "-1" {
        return Ok((name, -1));
    }
    let digits = value.chars().take_while(|c| c.is_ascii_digit()).count();
    let n: i64 = value[..digits]
        .parse()
        .map_err(|_| format!("invalid TRES '{item}': bad count '{value}'"))?;
    let mult: i64 = match (&value[digits..].to_ascii_uppercase()[..], name.as_str()) {
        ("", _) => 1,
        ("M" | "MB", "mem" | "vmem") => 1,
        ("G" | "GB", "mem" | "vmem") => 1024,
        ("T" | "TB", "mem" | "vmem") => 1024 * 1024,
        ("P" | "PB", "mem" | "vmem") => 1024 * 1024 * 1024,
        ("K" | "KB", "mem" | "vmem") => {
            return Ok((name, n / 1024 + i64::from(n % 1024 != 0)));
        }
        (s, _) => return Err(format!("invalid TRES '{item}': bad unit '{s}'")),
    };
    n.checked_mul(mult)
        .map(|v| (name, v))
        .ok_or_else(|| format!("invalid TRES '{item}': count too large"))
}

fn parse(s: &str) -> Result<BTreeMap<(usize, String), i64>, String> {
    let mut out = BTreeMap::new();
    for item in s.split(',').map(str::trim).filter(|i| !i.is_empty()) {
        let (name, v) = parse_item(item)?;
        out.insert((rank(&name), name), v);
    }
    Ok(out)
}

fn render(m: &BTreeMap<(usize, String), i64>) -> Option<String> {
    let items: Vec<String> = m
        .iter()
        .filter(|(_, v)| **v >= 0)
        .map(|((_, n), v)| {
            if n == "mem" || n == "vmem" {
                format!("{n}={v}M")
            } else {
                format!("{n}={v}")
            }
        })
        .collect();
    (!items.is_empty()).then(|| items.join(","))
}

/// Check a TRES string (as given in a request; `-1` allowed).
pub fn validate(s: &str) -> Result<(), String> {
    parse(s).map(|_| ())
}

/// The canonical form of a TRES string, `None` when it is empty.
pub fn normalize(s: &str) -> Result<Option<String>, String> {
    parse(s).map(|m| render(&m))
}

/// Apply `patch` to `old`; items set to -1 are removed.
pub fn merge(old: Option<&str>, patch: &str) -> Option<String> {
    let mut m = old.and_then(|o| parse(o).ok()).unwrap_or_default();
    if let Ok(p) = parse(patch) {
        for (k, v) in p {
            if v < 0 {
                m.remove(&k);
            } else {
                m.insert(k, v);
            }
        }
    }
    render(&m)
}

/// The count of one TRES in a canonical string.
pub fn get(s: &str, name: &str) -> Option<i64> {
    parse(s)
        .ok()?
        .into_iter()
        .find(|((_, n), _)| n == name)
        .map(|(_, v)| v)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn normalizes_orders_and_merges() {
        assert_eq!(
            normalize("node=2, MEM=2G,gres/gpu=1,cpu=8")
                .unwrap()
                .as_deref(),
            Some("cpu=8,mem=2048M,node=2,gres/gpu=1")
        );
        assert_eq!(normalize("mem=1500K").unwrap().as_deref(), Some("mem=2M"));
        assert_eq!(normalize("").unwrap(), None);
        assert!(validate("cpu").unwrap_err().contains("expected name=count"));
        assert!(validate("gpu=1")
            .unwrap_err()
            .contains("unknown TRES 'gpu'"));
        assert!(validate("cpu=4G").unwrap_err().contains("bad unit"));
        assert!(validate("cpu=x").unwrap_err().contains("bad count"));
        assert_eq!(
            merge(Some("cpu=4,mem=100M"), "cpu=-1,node=3").as_deref(),
            Some("mem=100M,node=3")
        );
        assert_eq!(merge(Some("cpu=4"), "cpu=-1"), None);
        assert_eq!(get("cpu=4,mem=100M", "mem"), Some(100));
    }
}
