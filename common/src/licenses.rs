//! License lists: slurm.conf's `Licenses=matlab:4,abaqus` and a job's
//! `--licenses=matlab:2` (a bare name is one; `name*N` is accepted too).

/// `(name, count)` pairs; a name given twice adds up.
pub fn parse(s: &str) -> Result<Vec<(String, u32)>, String> {
    let mut out: Vec<(String, u32)> = Vec::new();
    for item in s.split(',').map(str::trim).filter(|x| !x.is_empty()) {
        let (name, n) = match item.split_once([':', '*']) {
            Some((n, c)) => (
                n.trim(),
                c.trim()
                    .parse::<u32>()
                    .map_err(|_| format!("Invalid license specification: {item}"))?,
            ),
            None => (item, 1),
        };
        if name.is_empty()
            || !name
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.' | '@'))
        {
            return Err(format!("Invalid license specification: {item}"));
        }
        match out.iter_mut().find(|(x, _)| x == name) {
            Some(e) => e.1 += n,
            None => out.push((name.to_string(), n)),
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lists() {
        assert_eq!(
            parse("matlab:4, abaqus,matlab*1").unwrap(),
            vec![("matlab".to_string(), 5), ("abaqus".to_string(), 1)]
        );
        assert!(parse("x:y").is_err());
        assert!(parse("a b").is_err());
        assert!(parse("").unwrap().is_empty());
    }
}
