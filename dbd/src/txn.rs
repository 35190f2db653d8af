//! Transactions: each change made through slurmdbd (add, modify or remove
//! a cluster, account, user, association or QOS) recorded with when, by
//! whom, to what and how, as Slurm's `sacctmgr show transaction` lists
//! them. Made here from the request; stored by `Storage::add_txn` once the
//! change is made.

use serde::Serialize;
use serde_json::Value;
use slurm_proto::acct::AcctRequest;

/// What a change is recorded as, before the names it changed are known.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Txn {
    /// Slurm's action name (`Add Users`, `Modify Associations`, ...).
    pub action: &'static str,
    /// The first cluster the request names (empty: none).
    pub cluster: String,
    /// The settings given (`key=value, ...`).
    pub info: String,
}

/// The transaction `body` makes, if it changes anything (`None` for
/// queries, records, roll-ups and runaway fixes).
pub fn describe(body: &AcctRequest) -> Option<Txn> {
    use AcctRequest as R;
    let (action, info): (&'static str, Value) = match body {
        R::AddClusters(v) => ("Add Clusters", json(v)),
        R::DeleteClusters(_) => ("Remove Clusters", Value::Null),
        R::AddAccounts(a) => ("Add Accounts", json(a)),
        R::ModifyAccounts { set, assoc, .. } => ("Modify Accounts", both(set, assoc)),
        R::DeleteAccounts(_) => ("Remove Accounts", Value::Null),
        R::AddUsers(a) => ("Add Users", json(a)),
        R::ModifyUsers { set, assoc, .. } => ("Modify Users", both(set, assoc)),
        R::DeleteUsers(_) => ("Remove Users", Value::Null),
        R::ModifyAssocs { set, .. } => ("Modify Associations", json(set)),
        R::DeleteAssocs(_) => ("Remove Associations", Value::Null),
        R::AddQos(v) => ("Add QOS", json(v)),
        R::ModifyQos { set, .. } => ("Modify QOS", json(set)),
        R::DeleteQos(_) => ("Remove QOS", Value::Null),
        R::AddCoords(c) => ("Add Coordinators", json(&c.accounts)),
        R::RemoveCoords(c) => ("Remove Coordinators", json(&c.accounts)),
        _ => return None,
    };
    let mut pairs = Vec::new();
    flatten("", &info, &mut pairs);
    Some(Txn {
        action,
        cluster: first_cluster(&json(body)).unwrap_or_default(),
        info: pairs.join(", "),
    })
}

/// An add's changed names as Slurm records them: the accounts or users
/// added (the `names` setting left out of the info: they are the Where),
/// then, apart, the associations added with them (`C = c A = a U = u`
/// lines, as `Add Associations`, with the `assoc.` settings).
pub fn split_assocs(t: Txn, names: &[String]) -> Vec<(Txn, Vec<String>)> {
    let (assocs, plain): (Vec<String>, Vec<String>) =
        names.iter().cloned().partition(|n| n.contains(" = "));
    if !t.action.starts_with("Add ") || assocs.is_empty() {
        return vec![(t, names.to_vec())];
    }
    let keep = |p: &&str, assoc: bool| p.starts_with("assoc.") == assoc && !p.starts_with("names=");
    let info = |assoc: bool| -> String {
        t.info
            .split(", ")
            .filter(|p| keep(p, assoc))
            .map(|p| p.strip_prefix("assoc.").unwrap_or(p))
            .collect::<Vec<_>>()
            .join(", ")
    };
    let mut out = Vec::new();
    if !plain.is_empty() {
        out.push((
            Txn {
                info: info(false),
                ..t.clone()
            },
            plain,
        ));
    }
    out.push((
        Txn {
            action: "Add Associations",
            info: info(true),
            ..t
        },
        assocs,
    ));
    out
}

fn json<T: Serialize>(v: &T) -> Value {
    serde_json::to_value(v).unwrap_or(Value::Null)
}

fn both<A: Serialize, B: Serialize>(a: &A, b: &B) -> Value {
    let mut m = serde_json::Map::new();
    for v in [json(a), json(b)] {
        if let Value::Object(o) = v {
            m.extend(o);
        }
    }
    Value::Object(m)
}

/// `key=value` for every field set (nulls, empty texts and lists, and
/// `false` left out), nested keys dotted, lists of plain values joined by
/// commas. A patch's changes as sacctmgr takes them: `Keep` left out,
/// `Clear` as `-1`, list changes as `=`, `+=`, `-=`.
fn flatten(prefix: &str, v: &Value, out: &mut Vec<String>) {
    match v {
        Value::String(s) if s == "Keep" => return,
        Value::String(s) if s == "Clear" => {
            out.push(format!("{prefix}=-1"));
            return;
        }
        Value::Object(o) if o.len() == 1 => {
            let (tag, x) = o.iter().next().expect("one entry");
            let op = match tag.as_str() {
                "To" | "Replace" => "=",
                "Add" => "+=",
                "Remove" => "-=",
                _ => "",
            };
            if !op.is_empty() {
                let mut inner = Vec::new();
                flatten(prefix, x, &mut inner);
                if inner.is_empty() && op == "=" {
                    // Replaced by nothing.
                    out.push(format!("{prefix}="));
                }
                for p in inner {
                    out.push(p.replacen('=', op, 1));
                }
                return;
            }
        }
        _ => {}
    }
    let key = |k: &str| {
        if prefix.is_empty() {
            k.to_string()
        } else {
            format!("{prefix}.{k}")
        }
    };
    match v {
        Value::Null | Value::Bool(false) => {}
        Value::String(s) if s.is_empty() => {}
        Value::Object(o) => {
            for (k, x) in o {
                flatten(&key(k), x, out);
            }
        }
        Value::Array(a) if a.is_empty() => {}
        Value::Array(a) if a.iter().all(|x| !x.is_object() && !x.is_array()) => {
            let items: Vec<String> = a.iter().map(plain).collect();
            out.push(format!("{prefix}={}", items.join(",")));
        }
        Value::Array(a) => {
            for x in a {
                flatten(prefix, x, out);
            }
        }
        other => out.push(format!("{prefix}={}", plain(other))),
    }
}

fn plain(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

/// The first `cluster` or `clusters` value in `v`, depth first.
fn first_cluster(v: &Value) -> Option<String> {
    match v {
        Value::Object(o) => {
            for (k, x) in o {
                match (k.as_str(), x) {
                    ("cluster", Value::String(s)) if !s.is_empty() => return Some(s.clone()),
                    ("clusters", Value::Array(a)) => {
                        if let Some(Value::String(s)) = a.first() {
                            return Some(s.clone());
                        }
                    }
                    _ => {}
                }
                if let Some(c) = first_cluster(x) {
                    return Some(c);
                }
            }
            None
        }
        Value::Array(a) => a.iter().find_map(first_cluster),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use slurm_proto::acct::*;

    #[test]
    fn changes_are_described_and_queries_are_not() {
        assert_eq!(describe(&AcctRequest::ListTxns(TxnFilter::default())), None);
        assert_eq!(describe(&AcctRequest::Ping), None);
        let t = describe(&AcctRequest::ModifyQos {
            filter: QosFilter::default(),
            set: QosPatch {
                priority: Set::To(10),
                description: Set::To("fast lane".into()),
                ..Default::default()
            },
        })
        .unwrap();
        assert_eq!(t.action, "Modify QOS");
        assert!(t.info.contains("priority=10"), "{}", t.info);
        assert!(t.info.contains("description=fast lane"), "{}", t.info);
        assert!(!t.info.contains("null"), "{}", t.info);
        let t = describe(&AcctRequest::DeleteClusters(ClusterFilter {
            names: vec!["c2".into()],
        }))
        .unwrap();
        assert_eq!((t.action, t.info.as_str()), ("Remove Clusters", ""));
        let mut pairs = Vec::new();
        flatten(
            "",
            &serde_json::json!({"a": {"b": [1, 2]}, "c": "", "d": false, "e": true}),
            &mut pairs,
        );
        assert_eq!(pairs, vec!["a.b=1,2", "e=true"]);
        let mut pairs = Vec::new();
        flatten(
            "",
            &serde_json::json!({"p": "Keep", "q": "Clear", "r": {"Add": ["x", "y"]}, "s": {"To": 3}}),
            &mut pairs,
        );
        assert_eq!(pairs, vec!["q=-1", "r+=x,y", "s=3"]);
        let add = Txn {
            action: "Add Accounts",
            cluster: "c".into(),
            info: "assoc.shares=3, description=Chem, names=chem".into(),
        };
        let names = vec!["chem".to_string(), "C = c A = chem".to_string()];
        let split = split_assocs(add, &names);
        assert_eq!(split.len(), 2);
        assert_eq!(
            (split[0].0.action, split[0].0.info.as_str()),
            ("Add Accounts", "description=Chem")
        );
        assert_eq!(split[0].1, vec!["chem"]);
        assert_eq!(
            (split[1].0.action, split[1].0.info.as_str()),
            ("Add Associations", "shares=3")
        );
        assert_eq!(split[1].1, vec!["C = c A = chem"]);
        assert_eq!(
            first_cluster(&serde_json::json!({"x": [{"clusters": ["west"]}]})),
            Some("west".into())
        );
    }
}
