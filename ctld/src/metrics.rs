//! `MetricsType=metrics/openmetrics`: OpenMetrics text rendered from a
//! snapshot. Served by [`crate::http`] on the controller's port.
//!
//! Only `GET /metrics` (the index of endpoints) is served so far; the
//! per-entity endpoints answer 404 until they carry Slurm 25.11's metric
//! names.

use crate::state::Snapshot;

/// The endpoints Slurm 25.11 documents.
pub const ENDPOINTS: &[&str] = &[
    "/metrics/jobs",
    "/metrics/jobs-users-accts",
    "/metrics/nodes",
    "/metrics/partitions",
    "/metrics/scheduler",
];

/// Render `path`; `None` for an endpoint we do not serve.
pub fn render(path: &str, _snap: &Snapshot) -> Option<String> {
    match path {
        "/metrics" | "/metrics/" => {
            let mut s = String::new();
            for e in ENDPOINTS {
                s.push_str(e);
                s.push('\n');
            }
            Some(s)
        }
        _ => None,
    }
}
