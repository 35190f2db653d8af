//! A small mutation fuzzer on the stable toolchain, driven by proptest:
//! each case takes a checked-in seed (`tests/fuzz/seeds/<target>/`) and
//! applies a list of random edits (bit flips, inserted and deleted runs,
//! duplicated ranges, tokens parsers care about). proptest draws the
//! edits, so a failure shrinks to a short list of them and is replayed
//! from `tests/tests/cluster/fuzz.proptest-regressions`.
//!
//! `FUZZ_CASES` sets the cases per target (the test suite runs a few
//! hundred; `scripts/fuzz` runs many more).

use proptest::prelude::*;
use std::path::PathBuf;

/// Cases per target: `FUZZ_CASES`, else `default`.
pub fn cases(default: u32) -> u32 {
    std::env::var("FUZZ_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// The seeds of one target, sorted by file name.
pub fn seeds(target: &str) -> Vec<Vec<u8>> {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("fuzz/seeds")
        .join(target);
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|e| e.expect("dir entry").path())
        .collect();
    files.sort();
    files
        .iter()
        .map(|p| std::fs::read(p).expect("seed"))
        .collect()
}

/// Tokens that tend to sit on a parser's edges.
const TOKENS: &[&[u8]] = &[
    b"[",
    b"]",
    b"-",
    b",",
    b"=",
    b":",
    b"%",
    b"_",
    b"\n",
    b"#SBATCH ",
    b"#",
    b"{",
    b"}",
    b"\"",
    b"(",
    b")",
    b"&",
    b"|",
    b"?",
    b"+",
    b"*",
    b"@",
    b"\\",
    b"'",
    b" ",
    b"\t",
    b"\r\n",
    b"0",
    b"-1",
    b"99999999999999999999",
    b"4294967296",
    b"18446744073709551616",
    b"1e309",
    b"null",
    b"[]",
    b"{}",
    b"true",
    b"\0",
    b"\xff",
    b"\xc3",
    "é✓".as_bytes(),
    b"NodeName=",
    b"PartitionName=",
    b"Nodes=",
    b"ALL",
    b"INFINITE",
    b"UNLIMITED",
    b"now+",
    b"T",
    b"x3",
];

/// One edit: (kind, position, length or token index, bytes).
pub type Edit = (u8, u16, u16, Vec<u8>);

pub fn edits() -> impl Strategy<Value = Vec<Edit>> {
    prop::collection::vec(
        (
            any::<u8>(),
            any::<u16>(),
            any::<u16>(),
            prop::collection::vec(any::<u8>(), 0..8),
        ),
        0..12,
    )
}

/// Apply `edits` to `seed`.
pub fn mutate(seed: &[u8], edits: &[Edit]) -> Vec<u8> {
    let mut b = seed.to_vec();
    for (kind, pos, len, data) in edits {
        let at = if b.is_empty() {
            0
        } else {
            *pos as usize % (b.len() + 1)
        };
        let n = (*len as usize % 16) + 1;
        match kind % 8 {
            0 if at < b.len() => b[at] ^= 1 << (len % 8),
            1 => {
                b.splice(at..at, data.iter().copied());
            }
            2 => {
                let end = (at + n).min(b.len());
                b.drain(at..end);
            }
            3 => {
                let t = TOKENS[*len as usize % TOKENS.len()];
                b.splice(at..at, t.iter().copied());
            }
            4 => {
                let end = (at + n * 4).min(b.len());
                let copy = b[at..end].to_vec();
                b.splice(at..at, copy);
            }
            5 => b.truncate(at),
            6 if at < b.len() => {
                let t = TOKENS[*len as usize % TOKENS.len()];
                let end = (at + n).min(b.len());
                b.splice(at..end, t.iter().copied());
            }
            _ => {
                for (k, d) in data.iter().enumerate() {
                    if let Some(x) = b.get_mut(at + k) {
                        *x = *d;
                    }
                }
            }
        }
        if b.len() > 1 << 16 {
            b.truncate(1 << 16);
        }
    }
    b
}

/// A seed (chosen by `pick`) with `edits` applied.
pub fn input(seeds: &[Vec<u8>], pick: usize, edits: &[Edit]) -> Vec<u8> {
    mutate(&seeds[pick % seeds.len()], edits)
}

/// Any JSON value, a few levels deep (numbers at the edges of their types).
pub fn json_value() -> impl Strategy<Value = serde_json::Value> {
    use serde_json::{json, Value};
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(|n| json!(n)),
        any::<u64>().prop_map(|n| json!(n)),
        any::<f64>().prop_map(|f| json!(f)),
        "[ -~]{0,16}".prop_map(Value::String),
        Just(json!({"set": true, "infinite": false, "number": -1})),
        Just(json!({"set": true, "number": 18446744073709551615u64})),
    ];
    leaf.prop_recursive(3, 24, 4, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..4).prop_map(serde_json::Value::Array),
            prop::collection::btree_map("[a-z_]{1,8}", inner, 0..4)
                .prop_map(|m| serde_json::Value::Object(m.into_iter().collect())),
        ]
    })
}

/// Replace the value at the `k`-th place of `v` (places counted depth
/// first over object members and array items) with `new`, for each edit.
pub fn json_mutate(v: &mut serde_json::Value, edits: &[(u16, serde_json::Value)]) {
    use serde_json::Value;
    fn count(v: &Value) -> usize {
        match v {
            Value::Object(m) => m.values().map(|x| 1 + count(x)).sum(),
            Value::Array(a) => a.iter().map(|x| 1 + count(x)).sum(),
            _ => 0,
        }
    }
    /// Replace the `n`-th place (counting down); true once done.
    fn replace(v: &mut Value, n: &mut usize, new: &Value) -> bool {
        let children: Vec<&mut Value> = match v {
            Value::Object(m) => m.values_mut().collect(),
            Value::Array(a) => a.iter_mut().collect(),
            _ => return false,
        };
        for x in children {
            if *n == 0 {
                *x = new.clone();
                return true;
            }
            *n -= 1;
            if replace(x, n, new) {
                return true;
            }
        }
        false
    }
    for (k, new) in edits {
        match count(v) {
            0 => *v = new.clone(),
            places => {
                let mut n = *k as usize % places;
                replace(v, &mut n, new);
            }
        }
    }
}
