//! Slurm hostlist expressions and count lists.
//!
//! - [`expand`]: `n[001-003,7],login` → `n001 n002 n003 n007 login` (in the order written,
//!   duplicates kept, several bracket groups give their cartesian product).
//! - [`compress`]: the inverse, as Slurm prints a NODELIST: the names are sorted (by prefix,
//!   then numeric suffix) and de-duplicated, then runs of consecutive numbers sharing a
//!   prefix and zero padding are written as ranges (`n[001-003,007],login`).
//! - [`compress_counts`] / [`expand_counts`]: the `2(x3),1` notation of
//!   `SLURM_TASKS_PER_NODE` and `SLURM_JOB_CPUS_PER_NODE`.
//!
//! Nothing here panics on bad input; every failure is a [`HostlistError`] naming the
//! expression.

use std::cmp::Ordering;

/// Most names a single expression may expand to.
pub const MAX_HOSTS: usize = 1_000_000;

/// Longest numeric suffix (in digits) treated as a number; longer ones are plain text.
const MAX_DIGITS: usize = 18;

/// A hostlist expression (or count list) that could not be parsed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid hostlist expression '{expr}': {reason}")]
pub struct HostlistError {
    /// The whole expression as given.
    pub expr: String,
    /// What was wrong with it.
    pub reason: String,
}

impl HostlistError {
    fn new(expr: &str, reason: impl Into<String>) -> Self {
        HostlistError {
            expr: expr.to_string(),
            reason: reason.into(),
        }
    }
}

/// One piece of a single host pattern: literal text or a bracket group of ranges.
enum Segment<'a> {
    Lit(&'a str),
    /// `(lo, hi, width)`, width being the digit count of `lo` as written.
    Ranges(Vec<(u64, u64, usize)>),
}

/// Splits `expr` at top-level separators (commas and whitespace outside brackets).
/// Checks bracket balance; empty pieces are dropped.
fn split_top(expr: &str) -> Result<Vec<&str>, HostlistError> {
    let mut parts = Vec::new();
    let mut depth = 0usize;
    let mut start = 0usize;
    for (i, c) in expr.char_indices() {
        match c {
            '[' => {
                if depth > 0 {
                    return Err(HostlistError::new(expr, "nested '['"));
                }
                depth += 1;
            }
            ']' => {
                if depth == 0 {
                    return Err(HostlistError::new(expr, "unbalanced ']'"));
                }
                depth -= 1;
            }
            c if depth == 0 && (c == ',' || c.is_whitespace()) => {
                if i > start {
                    parts.push(&expr[start..i]);
                }
                start = i + c.len_utf8();
            }
            _ => {}
        }
    }
    if depth != 0 {
        return Err(HostlistError::new(expr, "unbalanced '['"));
    }
    if start < expr.len() {
        parts.push(&expr[start..]);
    }
    Ok(parts)
}

fn parse_number(expr: &str, digits: &str) -> Result<u64, HostlistError> {
    if digits.is_empty() {
        return Err(HostlistError::new(expr, "empty range bound"));
    }
    if !digits.bytes().all(|b| b.is_ascii_digit()) {
        return Err(HostlistError::new(
            expr,
            format!("non-numeric range bound '{digits}'"),
        ));
    }
    if digits.len() > MAX_DIGITS {
        return Err(HostlistError::new(
            expr,
            format!("range bound '{digits}' is too large"),
        ));
    }
    digits
        .parse::<u64>()
        .map_err(|_| HostlistError::new(expr, format!("bad range bound '{digits}'")))
}

/// Parses the inside of a bracket group: `001-003,7`.
fn parse_ranges(expr: &str, inner: &str) -> Result<Vec<(u64, u64, usize)>, HostlistError> {
    if inner.is_empty() {
        return Err(HostlistError::new(expr, "empty brackets"));
    }
    let mut out = Vec::new();
    for piece in inner.split(',') {
        let piece = piece.trim();
        if piece.is_empty() {
            return Err(HostlistError::new(expr, "empty range in brackets"));
        }
        let (lo_s, hi_s) = match piece.split_once('-') {
            Some((a, b)) => (a, Some(b)),
            None => (piece, None),
        };
        let lo = parse_number(expr, lo_s)?;
        let hi = match hi_s {
            Some(h) => parse_number(expr, h)?,
            None => lo,
        };
        if hi < lo {
            return Err(HostlistError::new(
                expr,
                format!("reversed range '{piece}'"),
            ));
        }
        out.push((lo, hi, lo_s.len()));
    }
    Ok(out)
}

/// Splits one host pattern (no top-level commas) into literal and bracket segments.
fn segments<'a>(expr: &str, pattern: &'a str) -> Result<Vec<Segment<'a>>, HostlistError> {
    let mut segs = Vec::new();
    let mut rest = pattern;
    while !rest.is_empty() {
        match rest.find('[') {
            None => {
                if rest.contains(']') {
                    return Err(HostlistError::new(expr, "unbalanced ']'"));
                }
                segs.push(Segment::Lit(rest));
                rest = "";
            }
            Some(open) => {
                let lit = &rest[..open];
                if lit.contains(']') {
                    return Err(HostlistError::new(expr, "unbalanced ']'"));
                }
                if !lit.is_empty() {
                    segs.push(Segment::Lit(lit));
                }
                let after = &rest[open + 1..];
                let close = after
                    .find(']')
                    .ok_or_else(|| HostlistError::new(expr, "unbalanced '['"))?;
                let inner = &after[..close];
                if inner.contains('[') {
                    return Err(HostlistError::new(expr, "nested '['"));
                }
                segs.push(Segment::Ranges(parse_ranges(expr, inner)?));
                rest = &after[close + 1..];
            }
        }
    }
    Ok(segs)
}

fn format_num(v: u64, width: usize) -> String {
    format!("{v:0width$}")
}

/// Expands a hostlist expression into host names, in the order written.
///
/// `""` gives an empty list; `n[001-003,7]` gives `n001 n002 n003 n7`;
/// `rack[1-2]-n[1-2]` gives `rack1-n1 rack1-n2 rack2-n1 rack2-n2`.
pub fn expand(expr: &str) -> Result<Vec<String>, HostlistError> {
    let mut out: Vec<String> = Vec::new();
    for pattern in split_top(expr)? {
        let segs = segments(expr, pattern)?;
        // Count first, so a huge expression fails before allocating.
        let mut count: u64 = 1;
        for seg in &segs {
            if let Segment::Ranges(ranges) = seg {
                let n = ranges
                    .iter()
                    .fold(0u64, |acc, (lo, hi, _)| acc.saturating_add(hi - lo + 1));
                count = count.saturating_mul(n);
            }
        }
        let total = (out.len() as u64).saturating_add(count);
        if total > MAX_HOSTS as u64 {
            return Err(HostlistError::new(
                expr,
                format!("expands to more than {MAX_HOSTS} names"),
            ));
        }
        let mut names = vec![String::new()];
        for seg in &segs {
            match seg {
                Segment::Lit(s) => {
                    for n in &mut names {
                        n.push_str(s);
                    }
                }
                Segment::Ranges(ranges) => {
                    let mut next = Vec::with_capacity(names.len());
                    for n in &names {
                        for &(lo, hi, width) in ranges {
                            for v in lo..=hi {
                                let mut s = n.clone();
                                s.push_str(&format_num(v, width));
                                next.push(s);
                            }
                        }
                    }
                    names = next;
                }
            }
        }
        out.extend(names);
    }
    Ok(out)
}

/// A host name split into prefix and numeric suffix.
struct HostName<'a> {
    full: &'a str,
    prefix: &'a str,
    /// The numeric suffix: (value, digits as written).
    num: Option<(u64, &'a str)>,
}

fn split_name(full: &str) -> HostName<'_> {
    let digits_start = full
        .char_indices()
        .rev()
        .take_while(|(_, c)| c.is_ascii_digit())
        .last()
        .map(|(i, _)| i);
    if let Some(start) = digits_start {
        let digits = &full[start..];
        if digits.len() <= MAX_DIGITS {
            if let Ok(v) = digits.parse::<u64>() {
                return HostName {
                    full,
                    prefix: &full[..start],
                    num: Some((v, digits)),
                };
            }
        }
    }
    HostName {
        full,
        prefix: full,
        num: None,
    }
}

/// Compares strings "naturally": runs of digits compare by value (`rack2` < `rack10`).
fn natural_cmp(a: &str, b: &str) -> Ordering {
    let (ab, bb) = (a.as_bytes(), b.as_bytes());
    let (mut i, mut j) = (0usize, 0usize);
    while i < ab.len() && j < bb.len() {
        if ab[i].is_ascii_digit() && bb[j].is_ascii_digit() {
            let si = i;
            while i < ab.len() && ab[i].is_ascii_digit() {
                i += 1;
            }
            let sj = j;
            while j < bb.len() && bb[j].is_ascii_digit() {
                j += 1;
            }
            let da = a[si..i].trim_start_matches('0');
            let db = b[sj..j].trim_start_matches('0');
            let ord = da.len().cmp(&db.len()).then_with(|| da.cmp(db));
            if ord != Ordering::Equal {
                return ord;
            }
        } else {
            let ord = ab[i].cmp(&bb[j]);
            if ord != Ordering::Equal {
                return ord;
            }
            i += 1;
            j += 1;
        }
    }
    (ab.len() - i).cmp(&(bb.len() - j)).then_with(|| a.cmp(b))
}

fn host_cmp(a: &HostName<'_>, b: &HostName<'_>) -> Ordering {
    natural_cmp(a.prefix, b.prefix)
        .then_with(|| match (a.num, b.num) {
            (None, None) => Ordering::Equal,
            (None, Some(_)) => Ordering::Less,
            (Some(_), None) => Ordering::Greater,
            (Some((va, da)), Some((vb, db))) => va.cmp(&vb).then_with(|| da.len().cmp(&db.len())),
        })
        .then_with(|| a.full.cmp(b.full))
}

/// Sorts host names as Slurm sorts a hostlist (prefix, then numeric suffix) and removes
/// duplicates. `expand(&compress(x))` equals `sort_hosts(x)`.
pub fn sort_hosts<S: AsRef<str>>(names: &[S]) -> Vec<String> {
    let mut parsed: Vec<HostName<'_>> = names.iter().map(|n| split_name(n.as_ref())).collect();
    parsed.sort_by(host_cmp);
    parsed.dedup_by(|a, b| a.full == b.full);
    parsed.into_iter().map(|h| h.full.to_string()).collect()
}

struct Range<'a> {
    prefix: &'a str,
    lo: u64,
    hi: u64,
    width: usize,
}

fn compress_impl(names: &[&str]) -> String {
    let mut parsed: Vec<HostName<'_>> = names.iter().map(|n| split_name(n)).collect();
    parsed.sort_by(host_cmp);
    parsed.dedup_by(|a, b| a.full == b.full);

    // Entries: either a bare name or a numeric range.
    enum Entry<'a> {
        Bare(&'a str),
        Range(Range<'a>),
    }
    let mut entries: Vec<Entry<'_>> = Vec::new();
    for h in &parsed {
        match h.num {
            None => entries.push(Entry::Bare(h.full)),
            Some((v, digits)) => {
                if let Some(Entry::Range(r)) = entries.last_mut() {
                    if r.prefix == h.prefix
                        && r.hi.checked_add(1) == Some(v)
                        && format_num(v, r.width) == digits
                    {
                        r.hi = v;
                        continue;
                    }
                }
                entries.push(Entry::Range(Range {
                    prefix: h.prefix,
                    lo: v,
                    hi: v,
                    width: digits.len(),
                }));
            }
        }
    }

    let mut out: Vec<String> = Vec::new();
    let mut i = 0;
    while i < entries.len() {
        match &entries[i] {
            Entry::Bare(s) => {
                out.push((*s).to_string());
                i += 1;
            }
            Entry::Range(first) => {
                let mut j = i + 1;
                while j < entries.len() {
                    match &entries[j] {
                        Entry::Range(r) if r.prefix == first.prefix => j += 1,
                        _ => break,
                    }
                }
                let group: Vec<&Range<'_>> = entries[i..j]
                    .iter()
                    .filter_map(|e| match e {
                        Entry::Range(r) => Some(r),
                        Entry::Bare(_) => None,
                    })
                    .collect();
                if group.len() == 1 && first.lo == first.hi {
                    out.push(format!(
                        "{}{}",
                        first.prefix,
                        format_num(first.lo, first.width)
                    ));
                } else {
                    let inner: Vec<String> = group
                        .iter()
                        .map(|r| {
                            if r.lo == r.hi {
                                format_num(r.lo, r.width)
                            } else {
                                format!(
                                    "{}-{}",
                                    format_num(r.lo, r.width),
                                    format_num(r.hi, r.width)
                                )
                            }
                        })
                        .collect();
                    out.push(format!("{}[{}]", first.prefix, inner.join(",")));
                }
                i = j;
            }
        }
    }
    out.join(",")
}

/// Compresses host names into a hostlist expression as Slurm prints a NODELIST:
/// sorted, de-duplicated, `["n3","n1","n2"]` → `n[1-3]`, `["a1","b2","b3"]` → `a1,b[2-3]`.
pub fn compress<S: AsRef<str>>(names: &[S]) -> String {
    let refs: Vec<&str> = names.iter().map(|s| s.as_ref()).collect();
    compress_impl(&refs)
}

/// [`compress`] for a slice of `&str`.
pub fn compress_str(names: &[&str]) -> String {
    compress_impl(names)
}

/// Number of names an expression expands to (duplicates counted).
/// The first host `expr` names (`None`: none, or not a hostlist).
pub fn first(expr: &str) -> Option<String> {
    expand(expr).ok().and_then(|v| v.into_iter().next())
}

pub fn count(expr: &str) -> Result<usize, HostlistError> {
    expand(expr).map(|v| v.len())
}

/// Writes per-node counts as Slurm does: `[2,2,2,1]` → `2(x3),1`.
pub fn compress_counts(counts: &[u32]) -> String {
    let mut out: Vec<String> = Vec::new();
    let mut i = 0;
    while i < counts.len() {
        let v = counts[i];
        let mut j = i + 1;
        while j < counts.len() && counts[j] == v {
            j += 1;
        }
        let n = j - i;
        if n >= 2 {
            out.push(format!("{v}(x{n})"));
        } else {
            out.push(v.to_string());
        }
        i = j;
    }
    out.join(",")
}

/// Reads the `2(x3),1` notation back into per-node counts: `[2,2,2,1]`.
pub fn expand_counts(s: &str) -> Result<Vec<u32>, HostlistError> {
    let mut out = Vec::new();
    let trimmed = s.trim();
    if trimmed.is_empty() {
        return Ok(out);
    }
    for piece in trimmed.split(',') {
        let piece = piece.trim();
        let (val_s, rep) = match piece.find('(') {
            None => (piece, 1u64),
            Some(open) => {
                let inner = piece[open + 1..]
                    .strip_suffix(')')
                    .ok_or_else(|| HostlistError::new(s, format!("missing ')' in '{piece}'")))?;
                let n_s = inner
                    .strip_prefix('x')
                    .or_else(|| inner.strip_prefix('X'))
                    .ok_or_else(|| {
                        HostlistError::new(s, format!("expected '(xN)' in '{piece}'"))
                    })?;
                let n = n_s
                    .parse::<u64>()
                    .ok()
                    .filter(|n| *n >= 1 && n_s.bytes().all(|b| b.is_ascii_digit()))
                    .ok_or_else(|| {
                        HostlistError::new(s, format!("bad repeat count in '{piece}'"))
                    })?;
                (&piece[..open], n)
            }
        };
        if val_s.is_empty() || !val_s.bytes().all(|b| b.is_ascii_digit()) {
            return Err(HostlistError::new(s, format!("bad count '{piece}'")));
        }
        let v = val_s
            .parse::<u32>()
            .map_err(|_| HostlistError::new(s, format!("count '{val_s}' out of range")))?;
        if (out.len() as u64).saturating_add(rep) > MAX_HOSTS as u64 {
            return Err(HostlistError::new(
                s,
                format!("expands to more than {MAX_HOSTS} counts"),
            ));
        }
        for _ in 0..rep {
            out.push(v);
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn v(names: &[&str]) -> Vec<String> {
        names.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn expand_basic() {
        assert_eq!(expand("").unwrap(), Vec::<String>::new());
        assert_eq!(expand("n1").unwrap(), v(&["n1"]));
        assert_eq!(expand("n1,n2").unwrap(), v(&["n1", "n2"]));
        assert_eq!(expand("n[1-3]").unwrap(), v(&["n1", "n2", "n3"]));
        assert_eq!(
            expand("n[001-003,7]").unwrap(),
            v(&["n001", "n002", "n003", "n7"])
        );
        assert_eq!(
            expand("n[001-003,007]").unwrap(),
            v(&["n001", "n002", "n003", "n007"])
        );
        assert_eq!(
            expand("n[098-101]").unwrap(),
            v(&["n098", "n099", "n100", "n101"])
        );
        assert_eq!(expand("n[9-11]").unwrap(), v(&["n9", "n10", "n11"]));
        assert_eq!(
            expand("rack[1-2]-n[1-2]").unwrap(),
            v(&["rack1-n1", "rack1-n2", "rack2-n1", "rack2-n2"])
        );
        assert_eq!(
            expand("login,n[1-2],gpu[01,03]").unwrap(),
            v(&["login", "n1", "n2", "gpu01", "gpu03"])
        );
        // Order as written, duplicates kept.
        assert_eq!(expand("n[3,1,1]").unwrap(), v(&["n3", "n1", "n1"]));
        // Whitespace and stray commas separate too.
        assert_eq!(expand(" n1 ,, n2 ").unwrap(), v(&["n1", "n2"]));
        // Bracket group with no prefix.
        assert_eq!(expand("[1-2]x").unwrap(), v(&["1x", "2x"]));
        assert_eq!(count("n[1-10],m").unwrap(), 11);
    }

    #[test]
    fn expand_errors() {
        for bad in [
            "n[1-3", "n1-3]", "n[1-3]]", "n[[1-2]]", "n[5-3]", "n[a-b]", "n[1-x]", "n[]",
            "n[1,,2]", "n[-3]", "n[1-]",
        ] {
            let err = expand(bad).expect_err(bad);
            assert_eq!(err.expr, bad);
            assert!(err.to_string().contains(bad), "{err}");
        }
        let err = expand("n[5-3]").unwrap_err();
        assert!(err.reason.contains("reversed"), "{err}");
        let err = expand("n[0-999999],m[0-1]").unwrap_err();
        assert!(err.reason.contains("more than"), "{err}");
        let err = expand("a[0-999]b[0-999]c[0-9]").unwrap_err();
        assert!(err.reason.contains("more than"), "{err}");
        assert!(expand("n[0-999999]").is_ok());
        assert!(expand("n[0-99999999999999999999]").is_err());
    }

    #[test]
    fn compress_basic() {
        assert_eq!(compress::<&str>(&[]), "");
        assert_eq!(compress(&["n1"]), "n1");
        assert_eq!(compress(&["n3", "n1", "n2"]), "n[1-3]");
        assert_eq!(compress(&["n1", "n2", "n3", "n5"]), "n[1-3,5]");
        assert_eq!(compress(&["a1", "b2", "b3"]), "a1,b[2-3]");
        assert_eq!(compress(&["n001", "n002", "n003"]), "n[001-003]");
        assert_eq!(compress(&["n1", "n3"]), "n[1,3]");
        assert_eq!(compress(&["n1", "n1", "n2"]), "n[1-2]");
        assert_eq!(compress(&["n9", "n10", "n11"]), "n[9-11]");
        assert_eq!(compress(&["n098", "n099", "n100"]), "n[098-100]");
        assert_eq!(compress(&["login", "n2", "n1"]), "login,n[1-2]");
        assert_eq!(compress(&["n", "n1"]), "n,n1");
        assert_eq!(compress(&["n1", "n01", "n2"]), "n[1,01,2]");
        assert_eq!(compress(&["rack10-n1", "rack2-n1"]), "rack2-n1,rack10-n1");
        assert_eq!(
            compress(&["rack1-n1", "rack1-n2", "rack2-n1", "rack2-n2"]),
            "rack1-n[1-2],rack2-n[1-2]"
        );
        assert_eq!(compress_str(&["cn003", "cn001", "cn002"]), "cn[001-003]");
        let owned = vec!["n2".to_string(), "n1".to_string()];
        assert_eq!(compress(&owned), "n[1-2]");
    }

    #[test]
    fn round_trips() {
        for expr in [
            "n[1-3]",
            "n[001-003,007]",
            "a1,b[2-3]",
            "login,n[1-2]",
            "n[098-100]",
            "cn[001-128],gpu[01-04]",
        ] {
            assert_eq!(compress(&expand(expr).unwrap()), expr);
        }
    }

    #[test]
    fn counts() {
        assert_eq!(compress_counts(&[]), "");
        assert_eq!(compress_counts(&[2, 2, 2, 1]), "2(x3),1");
        assert_eq!(compress_counts(&[4]), "4");
        assert_eq!(compress_counts(&[1, 2, 1]), "1,2,1");
        assert_eq!(compress_counts(&[3, 3]), "3(x2)");
        assert_eq!(expand_counts("2(x3),1").unwrap(), vec![2, 2, 2, 1]);
        assert_eq!(expand_counts("4").unwrap(), vec![4]);
        assert_eq!(expand_counts("").unwrap(), Vec::<u32>::new());
        for bad in [
            "a", "2(x0)", "2(3)", "2(x3", "(x3)", "2(xa)", ",", "-1", "2(x-1)",
        ] {
            let err = expand_counts(bad).expect_err(bad);
            assert_eq!(err.expr, bad);
        }
        assert!(expand_counts("1(x2000000)").is_err());
    }

    fn node_set() -> impl Strategy<Value = Vec<String>> {
        let name = (
            prop::sample::select(vec!["n", "cn", "gpu", "rack1-n", "rack10-n", "login"]),
            prop::option::of(0u64..400),
            prop::sample::select(vec![0usize, 2, 3]),
        )
            .prop_map(|(p, num, w)| match num {
                None => p.to_string(),
                Some(n) => format!("{p}{n:0w$}"),
            });
        prop::collection::vec(name, 0..60)
    }

    proptest! {
        #[test]
        fn expand_compress_is_sorted_dedup(names in node_set()) {
            let compressed = compress(&names);
            let expanded = expand(&compressed).unwrap();
            prop_assert_eq!(&expanded, &sort_hosts(&names));
            prop_assert_eq!(compress(&expanded), compressed);
        }

        #[test]
        fn counts_round_trip(counts in prop::collection::vec(0u32..4, 0..40)) {
            prop_assert_eq!(expand_counts(&compress_counts(&counts)).unwrap(), counts);
        }

        #[test]
        fn expand_never_panics(s in "[a-z0-9\\[\\],\\- ]{0,20}") {
            let _ = expand(&s);
            let _ = expand_counts(&s);
        }
    }
}
