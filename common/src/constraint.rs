//! `--constraint` expressions over node features: `a`, `a&b`, `a|b`,
//! parentheses, `[a|b|c]` (every node of the job with the same one of them)
//! and `a*N` (N of the job's nodes with `a`).

/// A parsed expression.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Constraint {
    Feature(String),
    /// `name*count`: at least `count` of the job's nodes have it.
    Count(String, u32),
    And(Vec<Constraint>),
    Or(Vec<Constraint>),
    /// `[a|b]`: all nodes share one of these.
    OneOf(Vec<String>),
}

fn bad(s: &str) -> String {
    format!("Invalid feature specification: {s}")
}

struct P<'a> {
    s: &'a str,
    chars: Vec<char>,
    i: usize,
}

impl P<'_> {
    fn peek(&self) -> Option<char> {
        self.chars.get(self.i).copied()
    }

    fn or(&mut self) -> Result<Constraint, String> {
        let mut v = vec![self.and()?];
        while self.peek() == Some('|') {
            self.i += 1;
            v.push(self.and()?);
        }
        Ok(if v.len() == 1 {
            v.remove(0)
        } else {
            Constraint::Or(v)
        })
    }

    fn and(&mut self) -> Result<Constraint, String> {
        let mut v = vec![self.atom()?];
        while matches!(self.peek(), Some('&' | ',')) {
            self.i += 1;
            v.push(self.atom()?);
        }
        Ok(if v.len() == 1 {
            v.remove(0)
        } else {
            Constraint::And(v)
        })
    }

    fn name(&mut self) -> Result<String, String> {
        let start = self.i;
        while self
            .peek()
            .is_some_and(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.' | ':' | '='))
        {
            self.i += 1;
        }
        if start == self.i {
            return Err(bad(self.s));
        }
        Ok(self.chars[start..self.i].iter().collect())
    }

    fn atom(&mut self) -> Result<Constraint, String> {
        match self.peek() {
            Some('(') => {
                self.i += 1;
                let e = self.or()?;
                if self.peek() != Some(')') {
                    return Err(bad(self.s));
                }
                self.i += 1;
                Ok(e)
            }
            Some('[') => {
                self.i += 1;
                let mut v = vec![self.name()?];
                while self.peek() == Some('|') {
                    self.i += 1;
                    v.push(self.name()?);
                }
                if self.peek() != Some(']') {
                    return Err(bad(self.s));
                }
                self.i += 1;
                Ok(Constraint::OneOf(v))
            }
            _ => {
                let n = self.name()?;
                if self.peek() == Some('*') {
                    self.i += 1;
                    let start = self.i;
                    while self.peek().is_some_and(|c| c.is_ascii_digit()) {
                        self.i += 1;
                    }
                    let count: String = self.chars[start..self.i].iter().collect();
                    let count = count.parse::<u32>().map_err(|_| bad(self.s))?;
                    return Ok(Constraint::Count(n, count));
                }
                Ok(Constraint::Feature(n))
            }
        }
    }
}

impl Constraint {
    pub fn parse(s: &str) -> Result<Constraint, String> {
        let t: String = s.chars().filter(|c| !c.is_whitespace()).collect();
        let mut p = P {
            s,
            chars: t.chars().collect(),
            i: 0,
        };
        let e = p.or()?;
        if p.i != p.chars.len() {
            return Err(bad(s));
        }
        Ok(e)
    }

    /// Every feature the expression names.
    pub fn features(&self) -> Vec<&str> {
        match self {
            Constraint::Feature(f) | Constraint::Count(f, _) => vec![f.as_str()],
            Constraint::And(v) | Constraint::Or(v) => v.iter().flat_map(|c| c.features()).collect(),
            Constraint::OneOf(v) => v.iter().map(String::as_str).collect(),
        }
    }

    /// Whether one node may be part of the job. `choice` picks the
    /// alternative of every `[a|b]` (its index); counts are checked on the
    /// whole allocation by [`Constraint::counts`].
    pub fn node_ok(&self, features: &[String], choice: usize) -> bool {
        let has = |f: &str| features.iter().any(|x| x == f);
        match self {
            Constraint::Feature(f) => has(f),
            Constraint::Count(_, _) => true,
            Constraint::And(v) => v.iter().all(|c| c.node_ok(features, choice)),
            Constraint::Or(v) => v.iter().any(|c| c.node_ok(features, choice)),
            Constraint::OneOf(v) => v.get(choice).is_some_and(|f| has(f)),
        }
    }

    /// How many alternatives `[a|b|c]` offers (1 without brackets).
    pub fn choices(&self) -> usize {
        match self {
            Constraint::OneOf(v) => v.len(),
            Constraint::And(v) | Constraint::Or(v) => {
                v.iter().map(|c| c.choices()).max().unwrap_or(1)
            }
            _ => 1,
        }
    }

    /// `name*count` terms (that must hold on the allocation as a whole).
    pub fn counts(&self) -> Vec<(&str, u32)> {
        match self {
            Constraint::Count(f, n) => vec![(f.as_str(), *n)],
            Constraint::And(v) => v.iter().flat_map(|c| c.counts()).collect(),
            _ => Vec::new(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn f(v: &[&str]) -> Vec<String> {
        v.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn expressions() {
        let c = Constraint::parse("intel&(ib|opa)").unwrap();
        assert!(c.node_ok(&f(&["intel", "opa"]), 0));
        assert!(!c.node_ok(&f(&["amd", "ib"]), 0));
        assert_eq!(c.features(), vec!["intel", "ib", "opa"]);
        let c = Constraint::parse("[rack1|rack2]&gpu").unwrap();
        assert_eq!(c.choices(), 2);
        assert!(c.node_ok(&f(&["rack2", "gpu"]), 1));
        assert!(!c.node_ok(&f(&["rack2", "gpu"]), 0));
        let c = Constraint::parse("gpu*2&intel").unwrap();
        assert_eq!(c.counts(), vec![("gpu", 2)]);
        assert!(c.node_ok(&f(&["intel"]), 0));
        for bad in ["", "a&", "(a|b", "[a|b", "a*x", "a b c!"] {
            assert!(Constraint::parse(bad).is_err(), "{bad}");
        }
    }
}
