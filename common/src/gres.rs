//! Generic resource (GRES) specifications: a node's `Gres=gpu:a100:4(S:0-1)`
//! and a job's `--gres=gpu:a100:2`, `--gpus=[type:]n`.

/// One generic resource and how many: `gpu:a100:2` → (`gpu`, `a100`, 2).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GresSpec {
    pub name: String,
    pub kind: Option<String>,
    pub count: u64,
}

fn count(s: &str) -> Option<u64> {
    let s = s.trim();
    let (num, mult) = match s.chars().last()? {
        'k' | 'K' => (&s[..s.len() - 1], 1024),
        'm' | 'M' => (&s[..s.len() - 1], 1024 * 1024),
        'g' | 'G' => (&s[..s.len() - 1], 1024 * 1024 * 1024),
        _ => (s, 1),
    };
    num.parse::<u64>().ok().map(|n| n * mult)
}

fn valid_name(s: &str) -> bool {
    !s.is_empty()
        && s.chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-' || c == '.')
}

/// One item: `name[:type][:count]`, with an optional `(S:0-1)` suffix and
/// `gres/` or `gres:` prefix.
pub fn parse_one(item: &str) -> Result<GresSpec, String> {
    let bad = || format!("Invalid generic resource (gres) specification '{item}'");
    let mut s = item.trim();
    if let Some(i) = s.find('(') {
        s = &s[..i];
    }
    let s = s
        .strip_prefix("gres/")
        .or_else(|| s.strip_prefix("gres:"))
        .unwrap_or(s);
    let parts: Vec<&str> = s.split(':').collect();
    let (name, kind, n) = match parts.as_slice() {
        [name] => (*name, None, 1),
        [name, x] => match count(x) {
            Some(n) => (*name, None, n),
            None => (*name, Some(*x), 1),
        },
        [name, kind, n] => (*name, Some(*kind), count(n).ok_or_else(bad)?),
        _ => return Err(bad()),
    };
    if !valid_name(name) || kind.is_some_and(|k| !valid_name(k)) {
        return Err(bad());
    }
    Ok(GresSpec {
        name: name.to_string(),
        kind: kind.map(str::to_string),
        count: n,
    })
}

/// A comma list of items (`gpu:a100:2,gpu:v100:1`).
pub fn parse_list(s: &str) -> Result<Vec<GresSpec>, String> {
    let mut out = Vec::new();
    let mut depth = 0;
    let mut cur = String::new();
    // Commas inside `(S:0,1)` belong to the item.
    for c in s.chars() {
        match c {
            '(' => depth += 1,
            ')' => depth -= 1,
            ',' if depth == 0 => {
                if !cur.trim().is_empty() {
                    out.push(parse_one(&cur)?);
                }
                cur.clear();
                continue;
            }
            _ => {}
        }
        cur.push(c);
    }
    if !cur.trim().is_empty() {
        out.push(parse_one(&cur)?);
    }
    Ok(out)
}

/// `--gpus`-style value: `[type:]count` as a `gpu` spec.
pub fn parse_gpus(s: &str) -> Result<GresSpec, String> {
    let bad = || format!("Invalid GPU specification '{s}'");
    let (kind, n) = match s.trim().rsplit_once(':') {
        Some((k, n)) => (Some(k.to_string()), n),
        None => (None, s.trim()),
    };
    let count = n.parse::<u64>().map_err(|_| bad())?;
    if kind.as_deref().is_some_and(|k| !valid_name(k)) {
        return Err(bad());
    }
    Ok(GresSpec {
        name: "gpu".into(),
        kind,
        count,
    })
}

/// What a job wants on each node, from `--gres`, `--gpus-per-node`,
/// `--gpus` (spread over `nodes`) and `--gpus-per-task` (times the tasks of
/// the busiest node).
pub fn job_per_node(
    gres: Option<&str>,
    gpus: Option<&str>,
    gpus_per_node: Option<&str>,
    gpus_per_task: Option<&str>,
    nodes: u32,
    tasks: u32,
) -> Result<Vec<GresSpec>, String> {
    let mut out = match gres {
        Some(g) => parse_list(g)?,
        None => Vec::new(),
    };
    let nodes = u64::from(nodes.max(1));
    if let Some(g) = gpus_per_node {
        out.push(parse_gpus(g)?);
    }
    if let Some(g) = gpus {
        let mut s = parse_gpus(g)?;
        s.count = s.count.div_ceil(nodes);
        out.push(s);
    }
    if let Some(g) = gpus_per_task {
        let mut s = parse_gpus(g)?;
        s.count *= u64::from(tasks.max(1)).div_ceil(nodes);
        out.push(s);
    }
    out.retain(|s| s.count > 0);
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn node_and_job_specs() {
        let v = parse_list("gpu:a100:4(S:0-1),gpu:v100:2,mps:200,nic").unwrap();
        assert_eq!(v[0].kind.as_deref(), Some("a100"));
        assert_eq!(
            (v[0].count, v[1].count, v[2].count, v[3].count),
            (4, 2, 200, 1)
        );
        assert_eq!(v[2].kind, None);
        assert_eq!(parse_one("gpu:tesla").unwrap().count, 1);
        assert_eq!(parse_one("gres/gpu:2").unwrap().count, 2);
        assert!(parse_one("gpu:a:b:c").is_err());
        assert!(parse_one("g pu:1").is_err());
        let j = job_per_node(None, Some("a100:5"), None, None, 2, 2).unwrap();
        assert_eq!((j[0].kind.as_deref(), j[0].count), (Some("a100"), 3));
        let j = job_per_node(Some("gpu:1"), None, Some("2"), Some("1"), 1, 4).unwrap();
        assert_eq!(j.iter().map(|s| s.count).collect::<Vec<_>>(), vec![1, 2, 4]);
        assert!(job_per_node(None, Some("x"), None, None, 1, 1).is_err());
    }
}
