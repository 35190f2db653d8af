//! The variables a job's processes are told of its job record that only
//! the controller knows (its place in an array, its restarts, and what it
//! asked for that Slurm repeats to it): for a batch script (the controller
//! sends them with its launch) and for salloc's command.

use crate::{ArrayInfo, JobRecord};

/// Every name [`job_env`] may set.
pub const JOB_ENV_VARS: &[&str] = &[
    "SLURM_ARRAY_JOB_ID",
    "SLURM_ARRAY_TASK_ID",
    "SLURM_ARRAY_TASK_COUNT",
    "SLURM_ARRAY_TASK_MIN",
    "SLURM_ARRAY_TASK_MAX",
    "SLURM_ARRAY_TASK_STEP",
    "SLURM_RESTART_COUNT",
    "SLURM_JOB_DEPENDENCY",
    "SLURM_JOB_LICENSES",
    "SLURM_JOB_RESERVATION",
    "SLURM_GPUS",
    "SLURM_GPUS_PER_NODE",
    "SLURM_GPUS_PER_TASK",
    "SLURM_GPU_BIND",
    "SLURM_CPUS_PER_TASK",
    "SLURM_TRES_PER_TASK",
    "SLURM_CPUS_PER_GPU",
    "SLURM_MEM_PER_GPU",
    "SLURM_NTASKS_PER_SOCKET",
    "SLURM_NTASKS_PER_CORE",
    "SLURM_NTASKS_PER_GPU",
    "SLURM_THREADS_PER_CORE",
    "SLURM_JOB_SEGMENT_SIZE",
];

/// The variables a batch script gets from its job record beside those its
/// node daemon sets (`SLURM_JOB_DEPENDENCY=...`): its place in an array, its
/// restarts, and what it asked for that Slurm repeats to the script.
pub fn job_env(j: &JobRecord) -> Vec<String> {
    let mut env = j.array.as_ref().map(array_env).unwrap_or_default();
    if j.restarts > 0 {
        env.push(format!("SLURM_RESTART_COUNT={}", j.restarts));
    }
    let d = &j.desc;
    let given: [(&str, Option<String>); 16] = [
        ("SLURM_JOB_DEPENDENCY", d.dependency.clone()),
        ("SLURM_JOB_LICENSES", d.licenses.clone()),
        ("SLURM_JOB_RESERVATION", d.reservation.clone()),
        ("SLURM_GPUS", d.gpus.clone()),
        ("SLURM_GPUS_PER_NODE", d.gpus_per_node.clone()),
        ("SLURM_GPUS_PER_TASK", d.gpus_per_task.clone()),
        ("SLURM_GPU_BIND", d.gpu_bind.clone()),
        // Only CPUs per task the job asked for (not those the controller
        // derived from --cpus-per-gpu): its steps read them.
        (
            "SLURM_CPUS_PER_TASK",
            d.cpus_per_task
                .filter(|_| d.cpus_per_gpu.is_none())
                .map(|n| n.to_string()),
        ),
        ("SLURM_TRES_PER_TASK", job_tres_per_task(d)),
        ("SLURM_CPUS_PER_GPU", d.cpus_per_gpu.map(|n| n.to_string())),
        ("SLURM_MEM_PER_GPU", d.mem_per_gpu.map(|n| n.to_string())),
        (
            "SLURM_NTASKS_PER_SOCKET",
            d.ntasks_per_socket.map(|n| n.to_string()),
        ),
        (
            "SLURM_NTASKS_PER_CORE",
            d.ntasks_per_core.map(|n| n.to_string()),
        ),
        (
            "SLURM_NTASKS_PER_GPU",
            d.ntasks_per_gpu.map(|n| n.to_string()),
        ),
        (
            "SLURM_THREADS_PER_CORE",
            d.threads_per_core.map(|n| n.to_string()),
        ),
        ("SLURM_JOB_SEGMENT_SIZE", d.segment.map(|n| n.to_string())),
    ];
    for (k, v) in given {
        if let Some(v) = v.filter(|v| !v.is_empty()) {
            env.push(format!("{k}={v}"));
        }
    }
    env
}

/// A batch script's environment: the one submitted, less the copies of
/// [`JOB_ENV_VARS`] inherited from a job it was submitted in, plus
/// [`job_env`]. As Slurm's node daemon, an inherited `SLURM_CPUS_PER_TASK`
/// is not dropped but set to this job's CPUs per task (1 when it asked
/// none), so a script reading it sees its own job's. (Slurm also leaves an
/// inherited `SLURM_TRES_PER_TASK` in a job that asked none, where a plain
/// `srun` then dies on the two disagreeing; it is dropped here.)
pub fn batch_environment(submitted: &[String], j: &JobRecord) -> Vec<String> {
    fn name(kv: &str) -> Option<&str> {
        kv.split_once('=').map(|(k, _)| k)
    }
    let had_cpus = submitted
        .iter()
        .any(|kv| name(kv) == Some("SLURM_CPUS_PER_TASK"));
    let mut env: Vec<String> = submitted
        .iter()
        .filter(|kv| !name(kv).is_some_and(|k| JOB_ENV_VARS.contains(&k)))
        .cloned()
        .collect();
    let ours = job_env(j);
    if had_cpus && !ours.iter().any(|kv| kv.starts_with("SLURM_CPUS_PER_TASK=")) {
        env.push("SLURM_CPUS_PER_TASK=1".to_string());
    }
    env.extend(ours);
    env
}

/// Slurm's `SLURM_TRES_PER_TASK` (and `scontrol show job`'s `TresPerTask=`)
/// for CPUs and GPUs asked for each task (`--cpus-per-task`,
/// `--gpus-per-task` as `N` or `type:N`, or `--tres-per-task`): CPUs
/// first, as Slurm's commands write it (`cpu=4,gres/gpu:a100=2`).
pub fn tres_per_task(cpus: Option<u32>, gpus: Option<&str>) -> Option<String> {
    let mut parts = Vec::new();
    if let Some(c) = cpus {
        parts.push(format!("cpu={c}"));
    }
    if let Some(g) = gpus.filter(|g| !g.is_empty()) {
        let (key, n) = gpu_entry(g);
        parts.push(format!("{key}={n}"));
    }
    (!parts.is_empty()).then(|| parts.join(","))
}

/// The `SLURM_TRES_PER_TASK` entry of `--gpus-per-task`'s value (`N` or
/// `kind:N`): its key (`gres/gpu[:kind]`) and count.
pub fn gpu_entry(gpus: &str) -> (String, String) {
    match gpus.rsplit_once(':') {
        Some((kind, n)) => (format!("gres/gpu:{kind}"), n.to_string()),
        None => ("gres/gpu".to_string(), gpus.to_string()),
    }
}

/// What a job asked for each task ([`tres_per_task`]); CPUs the controller
/// derived from `--cpus-per-gpu` were not asked per task.
pub fn job_tres_per_task(d: &crate::JobDesc) -> Option<String> {
    tres_per_task(
        d.cpus_per_task.filter(|_| d.cpus_per_gpu.is_none()),
        d.gpus_per_task.as_deref(),
    )
}

/// The variables an array task's batch script gets beside the others
/// (`SLURM_ARRAY_JOB_ID=...`).
pub fn array_env(a: &ArrayInfo) -> Vec<String> {
    let mut env = vec![
        format!("SLURM_ARRAY_JOB_ID={}", a.job_id),
        format!("SLURM_ARRAY_TASK_ID={}", a.task_id),
        format!("SLURM_ARRAY_TASK_COUNT={}", a.task_count),
        format!("SLURM_ARRAY_TASK_MIN={}", a.task_min),
        format!("SLURM_ARRAY_TASK_MAX={}", a.task_max),
    ];
    if let Some(st) = a.task_step {
        env.push(format!("SLURM_ARRAY_TASK_STEP={st}"));
    }
    env
}
