//! The OpenAPI document we serve at `GET /openapi/v3`: Slurm's v0.0.44
//! document (embedded at build time) cut down to the paths and methods this
//! daemon answers, with only the schemas they reach.
//!
//! One correction is applied: Slurm's document lists some nested required
//! fields as slash paths (`"required": ["nodes/count"]`), which JSON Schema
//! reads as a property literally named `nodes/count`. We move each into the
//! `required` list of the nested object, which is what Slurm's own output
//! has.

use serde_json::{Map, Value};
use std::collections::{BTreeSet, VecDeque};
use std::sync::OnceLock;

/// Slurm 25.11's document, as published.
pub const REFERENCE: &str = include_str!("../openapi/slurm-v0.0.44.json");

/// Every path we serve and its methods.
pub const SERVED: &[(&str, &[&str])] = &[
    ("/slurm/v0.0.44/ping/", &["get"]),
    ("/slurm/v0.0.44/diag/", &["get"]),
    ("/slurm/v0.0.44/reconfigure/", &["get"]),
    ("/slurm/v0.0.44/licenses/", &["get"]),
    ("/slurm/v0.0.44/shares", &["get"]),
    ("/slurm/v0.0.44/jobs/", &["get", "delete"]),
    ("/slurm/v0.0.44/jobs/state/", &["get"]),
    ("/slurm/v0.0.44/job/submit", &["post"]),
    ("/slurm/v0.0.44/job/allocate", &["post"]),
    ("/slurm/v0.0.44/job/{job_id}", &["get", "post", "delete"]),
    ("/slurm/v0.0.44/resources/{job_id}", &["get"]),
    ("/slurm/v0.0.44/nodes/", &["get", "post"]),
    (
        "/slurm/v0.0.44/node/{node_name}",
        &["get", "post", "delete"],
    ),
    ("/slurm/v0.0.44/new/node/", &["post"]),
    ("/slurm/v0.0.44/partitions/", &["get"]),
    ("/slurm/v0.0.44/partition/{partition_name}", &["get"]),
    ("/slurm/v0.0.44/reservations/", &["get", "post"]),
    ("/slurm/v0.0.44/reservation", &["post"]),
    (
        "/slurm/v0.0.44/reservation/{reservation_name}",
        &["get", "delete"],
    ),
    ("/slurmdb/v0.0.44/ping/", &["get"]),
    ("/slurmdb/v0.0.44/diag/", &["get"]),
    ("/slurmdb/v0.0.44/jobs/", &["get"]),
    ("/slurmdb/v0.0.44/job/{job_id}", &["get"]),
    ("/slurmdb/v0.0.44/accounts/", &["get", "post"]),
    (
        "/slurmdb/v0.0.44/account/{account_name}",
        &["get", "delete"],
    ),
    ("/slurmdb/v0.0.44/users/", &["get", "post"]),
    ("/slurmdb/v0.0.44/user/{name}", &["get", "delete"]),
    ("/slurmdb/v0.0.44/associations/", &["get", "post", "delete"]),
    ("/slurmdb/v0.0.44/association/", &["get", "delete"]),
    ("/slurmdb/v0.0.44/qos/", &["get", "post"]),
    ("/slurmdb/v0.0.44/qos/{qos}", &["get", "delete"]),
    ("/slurmdb/v0.0.44/clusters/", &["get", "post"]),
    (
        "/slurmdb/v0.0.44/cluster/{cluster_name}",
        &["get", "delete"],
    ),
    ("/slurmdb/v0.0.44/tres/", &["get"]),
    ("/slurmdb/v0.0.44/config", &["get"]),
];

/// The reference document, parsed.
pub fn reference() -> &'static Value {
    static R: OnceLock<Value> = OnceLock::new();
    R.get_or_init(|| serde_json::from_str(REFERENCE).unwrap_or(Value::Null))
}

/// The document we serve.
pub fn document() -> &'static Value {
    static D: OnceLock<Value> = OnceLock::new();
    D.get_or_init(|| derive(reference()))
}

/// `document()` serialized once.
pub fn document_bytes() -> &'static [u8] {
    static B: OnceLock<Vec<u8>> = OnceLock::new();
    B.get_or_init(|| serde_json::to_vec_pretty(document()).unwrap_or_default())
}

fn collect_refs(v: &Value, out: &mut Vec<String>) {
    match v {
        Value::Object(m) => {
            if let Some(Value::String(r)) = m.get("$ref") {
                if let Some(name) = r.strip_prefix("#/components/schemas/") {
                    out.push(name.to_string());
                }
            }
            for x in m.values() {
                collect_refs(x, out);
            }
        }
        Value::Array(a) => a.iter().for_each(|x| collect_refs(x, out)),
        _ => {}
    }
}

/// Move `a/b` required entries into the nested object `a`.
fn fix_required(schema: &mut Value) {
    match schema {
        Value::Object(m) => {
            if let Some(Value::Array(req)) = m.get("required").cloned() {
                let mut top: Vec<Value> = Vec::new();
                let mut nested: Vec<(String, String)> = Vec::new();
                for r in req {
                    match r.as_str().and_then(|s| s.split_once('/')) {
                        Some((a, b)) => {
                            nested.push((a.to_string(), b.to_string()));
                            if !top.iter().any(|t| t.as_str() == Some(a)) {
                                top.push(Value::String(a.to_string()));
                            }
                        }
                        None => {
                            if !top.contains(&r) {
                                top.push(r)
                            }
                        }
                    }
                }
                for (a, b) in nested {
                    if let Some(Value::Object(prop)) =
                        m.get_mut("properties").and_then(|p| p.get_mut(&a))
                    {
                        // Only inline objects can take the nested list; a
                        // `$ref` keeps just the top-level requirement.
                        if prop.contains_key("properties") {
                            let list = prop
                                .entry("required")
                                .or_insert_with(|| Value::Array(Vec::new()));
                            if let Value::Array(l) = list {
                                let b = Value::String(b);
                                if !l.contains(&b) {
                                    l.push(b);
                                }
                            }
                        }
                    }
                }
                m.insert("required".into(), Value::Array(top));
            }
            for x in m.values_mut() {
                fix_required(x);
            }
        }
        Value::Array(a) => a.iter_mut().for_each(fix_required),
        _ => {}
    }
}

fn derive(reference: &Value) -> Value {
    let mut doc = Map::new();
    let get = |k: &str| reference.get(k).cloned().unwrap_or(Value::Null);
    doc.insert("openapi".into(), get("openapi"));
    let mut info = get("info");
    if let Value::Object(i) = &mut info {
        i.insert(
            "title".into(),
            Value::String("Slurm REST API (slurmrestd in Rust)".into()),
        );
        i.insert(
            "version".into(),
            Value::String(format!("Slurm-{}", slurm_proto::SLURM_VERSION)),
        );
        i.insert(
            "x-slurm".into(),
            serde_json::json!({
                "data_parsers": [{"plugin": "v0.0.44", "flags": ["NONE"]}],
                "openapi": ["openapi/slurmctld"],
                "release": slurm_proto::SLURM_VERSION,
            }),
        );
    }
    doc.insert("info".into(), info);
    doc.insert("servers".into(), get("servers"));
    doc.insert("security".into(), get("security"));
    let tags: Vec<Value> = reference
        .get("tags")
        .and_then(|t| t.as_array())
        .map(|t| {
            t.iter()
                .filter(|x| {
                    matches!(
                        x.get("name").and_then(|n| n.as_str()),
                        Some("slurm") | Some("openapi")
                    )
                })
                .cloned()
                .collect()
        })
        .unwrap_or_default();
    doc.insert("tags".into(), Value::Array(tags));
    let mut paths = Map::new();
    let mut refs = Vec::new();
    for (path, methods) in SERVED {
        let Some(Value::Object(item)) = reference.get("paths").and_then(|p| p.get(*path)) else {
            continue;
        };
        let mut kept = Map::new();
        for (k, v) in item {
            let is_method = matches!(k.as_str(), "get" | "post" | "put" | "delete" | "patch");
            if !is_method || methods.contains(&k.as_str()) {
                collect_refs(v, &mut refs);
                kept.insert(k.clone(), v.clone());
            }
        }
        paths.insert(path.to_string(), Value::Object(kept));
    }
    doc.insert("paths".into(), Value::Object(paths));
    // Keep only the schemas the kept paths reach.
    let all = reference
        .pointer("/components/schemas")
        .and_then(|s| s.as_object())
        .cloned()
        .unwrap_or_default();
    let mut keep = BTreeSet::new();
    let mut queue: VecDeque<String> = refs.into();
    while let Some(name) = queue.pop_front() {
        if !keep.insert(name.clone()) {
            continue;
        }
        if let Some(s) = all.get(&name) {
            let mut more = Vec::new();
            collect_refs(s, &mut more);
            queue.extend(more);
        }
    }
    let mut schemas = Map::new();
    for name in keep {
        if let Some(s) = all.get(&name) {
            let mut s = s.clone();
            fix_required(&mut s);
            schemas.insert(name, s);
        }
    }
    let mut components = Map::new();
    components.insert("schemas".into(), Value::Object(schemas));
    if let Some(sec) = reference.pointer("/components/securitySchemes") {
        components.insert("securitySchemes".into(), sec.clone());
    }
    doc.insert("components".into(), Value::Object(components));
    Value::Object(doc)
}

/// The response schema of `method path` for `status` (falling back to
/// `default`), as a `$ref` string.
pub fn response_schema_ref(path: &str, method: &str, status: u16) -> Option<String> {
    let op = document().get("paths")?.get(path)?.get(method)?;
    let resp = op.get("responses")?;
    let r = resp
        .get(status.to_string())
        .or_else(|| resp.get("default"))?;
    r.pointer("/content/application~1json/schema/$ref")
        .and_then(|v| v.as_str())
        .map(String::from)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn document_has_exactly_our_paths_and_resolvable_refs() {
        let d = document();
        let paths = d["paths"].as_object().unwrap();
        assert_eq!(paths.len(), SERVED.len());
        for (p, methods) in SERVED {
            let item = paths.get(*p).unwrap_or_else(|| panic!("{p} missing"));
            for m in *methods {
                assert!(item.get(*m).is_some(), "{m} {p}");
            }
        }
        let mut refs = Vec::new();
        collect_refs(d, &mut refs);
        let schemas = d["components"]["schemas"].as_object().unwrap();
        for r in refs {
            assert!(schemas.contains_key(&r), "{r} unresolved");
        }
        // Only what served paths reach (no wckey or instance writes here).
        assert!(!schemas.contains_key("v0.0.44_openapi_wckey_removed_resp"));
        assert!(schemas.contains_key("v0.0.44_openapi_slurmdbd_config_resp"));
        // Slash paths in required lists are gone.
        let job_res = &schemas["v0.0.44_job_res"];
        let req: Vec<&str> = job_res["required"]
            .as_array()
            .unwrap()
            .iter()
            .filter_map(|v| v.as_str())
            .collect();
        assert!(req.contains(&"nodes") && !req.iter().any(|r| r.contains('/')));
        assert!(job_res["properties"]["nodes"]["required"]
            .as_array()
            .unwrap()
            .contains(&Value::String("count".into())));
        assert_eq!(
            response_schema_ref("/slurm/v0.0.44/ping/", "get", 500).as_deref(),
            Some("#/components/schemas/v0.0.44_openapi_ping_array_resp")
        );
    }
}
