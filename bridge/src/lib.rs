//! slurm-bridge: a Kubernetes scheduler that gives each group of pods a
//! placeholder job (`EXTERNAL_JOB`) in the controller's queue, binds the
//! pods to the nodes the job was given when it starts, and keeps both sides
//! in step until the end. Kubernetes nodes carrying a label become the
//! cluster's external nodes. See the README ("Kubernetes") and
//! docs/architecture.md.

pub mod ctld;
pub mod plan;
pub mod run;
