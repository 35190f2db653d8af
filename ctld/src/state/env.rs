//! What a job's batch script is told of its job record: output file
//! patterns of array tasks here; the variables the controller (not the
//! node) knows are [`slurm_proto::jobenv`]'s (salloc sets them too).

use super::*;
pub use slurm_proto::jobenv::{array_env, job_env, JOB_ENV_VARS};

/// Expand `%A` and `%a` (with optional zero-padding width) in an output
/// pattern for an array task; every other `%` sequence is left for the node.
pub fn expand_array_patterns(pat: &str, a: &ArrayInfo) -> String {
    let mut out = String::with_capacity(pat.len());
    let mut chars = pat.chars().peekable();
    while let Some(c) = chars.next() {
        if c != '%' {
            out.push(c);
            continue;
        }
        let mut width = String::new();
        while let Some(d) = chars.peek().copied().filter(char::is_ascii_digit) {
            width.push(d);
            chars.next();
        }
        match chars.peek().copied() {
            Some(l @ ('A' | 'a')) => {
                chars.next();
                let v = if l == 'A' { a.job_id } else { a.task_id };
                let w: usize = width.parse().unwrap_or(0).min(10);
                out.push_str(&format!("{v:0w$}"));
            }
            Some('%') => {
                chars.next();
                out.push_str("%%");
            }
            _ => {
                out.push('%');
                out.push_str(&width);
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_batch_script_gets_what_its_job_asked_for() {
        let mut j = JobRecord {
            restarts: 2,
            array: Some(ArrayInfo {
                job_id: 7,
                task_id: 3,
                task_count: 4,
                task_min: 1,
                task_max: 7,
                task_step: Some(2),
                max_running: None,
            }),
            ..Default::default()
        };
        let d = Arc::make_mut(&mut j.desc);
        d.dependency = Some("afterok:5".into());
        d.licenses = Some("matlab:2".into());
        d.reservation = Some("maint".into());
        d.gpus = Some("2".into());
        d.gpus_per_node = Some("a100:1".into());
        d.gpus_per_task = Some("1".into());
        d.gpu_bind = Some("single:1".into());
        d.cpus_per_gpu = Some(4);
        d.mem_per_gpu = Some(1024);
        d.ntasks_per_socket = Some(1);
        d.ntasks_per_core = Some(1);
        d.ntasks_per_gpu = Some(2);
        d.threads_per_core = Some(1);
        d.segment = Some(2);
        let env = job_env(&j);
        assert!(env.contains(&"SLURM_JOB_DEPENDENCY=afterok:5".to_string()));
        assert!(env.contains(&"SLURM_RESTART_COUNT=2".to_string()));
        assert!(env.contains(&"SLURM_ARRAY_TASK_STEP=2".to_string()));
        assert!(env.contains(&"SLURM_GPUS_PER_NODE=a100:1".to_string()));
        assert!(env.contains(&"SLURM_GPU_BIND=single:1".to_string()));
        // CPUs derived from --cpus-per-gpu were not asked per task.
        Arc::make_mut(&mut j.desc).cpus_per_task = Some(8);
        let env = job_env(&j);
        assert!(env.contains(&"SLURM_TRES_PER_TASK=gres/gpu=1".to_string()));
        assert!(!env.iter().any(|kv| kv.starts_with("SLURM_CPUS_PER_TASK=")));
        Arc::make_mut(&mut j.desc).cpus_per_gpu = None;
        let env = job_env(&j);
        assert!(env.contains(&"SLURM_TRES_PER_TASK=cpu=8,gres/gpu=1".to_string()));
        assert!(env.contains(&"SLURM_CPUS_PER_TASK=8".to_string()));
        // Every name it sets (SLURM_CPUS_PER_GPU but then) is one a launch
        // strips from an outer job's copy.
        let names: Vec<&str> = env.iter().filter_map(|kv| kv.split('=').next()).collect();
        assert_eq!(names.len() + 1, JOB_ENV_VARS.len());
        assert!(names.iter().all(|n| JOB_ENV_VARS.contains(n)));
        // A first run of a plain job: nothing.
        assert!(job_env(&JobRecord::default()).is_empty());
    }

    #[test]
    fn a_nested_jobs_script_sees_its_own_cpus_per_task() {
        // Submitted from inside a `-c 4` job: the outer job's copies.
        let submitted: Vec<String> = [
            "PATH=/bin",
            "SLURM_CPUS_PER_TASK=4",
            "SLURM_TRES_PER_TASK=cpu=4",
            "SLURM_ARRAY_TASK_ID=3",
        ]
        .map(String::from)
        .to_vec();
        let of = |env: &[String], k: &str| -> Vec<String> {
            env.iter()
                .filter_map(|kv| kv.strip_prefix(&format!("{k}=")).map(String::from))
                .collect()
        };
        // Asking none: 1 (as Slurm's), and no stale TRES nor array place.
        let mut j = JobRecord::default();
        let env = slurm_proto::jobenv::batch_environment(&submitted, &j);
        assert_eq!(of(&env, "SLURM_CPUS_PER_TASK"), ["1"]);
        assert!(of(&env, "SLURM_TRES_PER_TASK").is_empty());
        assert!(of(&env, "SLURM_ARRAY_TASK_ID").is_empty());
        assert_eq!(of(&env, "PATH"), ["/bin"]);
        // Asking 2: its own, once.
        Arc::make_mut(&mut j.desc).cpus_per_task = Some(2);
        let env = slurm_proto::jobenv::batch_environment(&submitted, &j);
        assert_eq!(of(&env, "SLURM_CPUS_PER_TASK"), ["2"]);
        assert_eq!(of(&env, "SLURM_TRES_PER_TASK"), ["cpu=2"]);
        // Derived from --cpus-per-gpu: not asked per task, so 1.
        Arc::make_mut(&mut j.desc).cpus_per_gpu = Some(2);
        let env = slurm_proto::jobenv::batch_environment(&submitted, &j);
        assert_eq!(of(&env, "SLURM_CPUS_PER_TASK"), ["1"]);
        // Submitted outside any job: none set for a job asking none.
        let env = slurm_proto::jobenv::batch_environment(
            &["PATH=/bin".to_string()],
            &JobRecord::default(),
        );
        assert!(of(&env, "SLURM_CPUS_PER_TASK").is_empty());
    }

    #[test]
    fn array_patterns_leave_other_sequences_alone() {
        let a = ArrayInfo {
            job_id: 12,
            task_id: 3,
            task_count: 4,
            task_min: 0,
            task_max: 3,
            task_step: Some(1),
            max_running: None,
        };
        assert_eq!(
            expand_array_patterns("slurm-%A_%a.out", &a),
            "slurm-12_3.out"
        );
        assert_eq!(
            expand_array_patterns("o-%4a-%j-%%A-%x", &a),
            "o-0003-%j-%%A-%x"
        );
    }
}
