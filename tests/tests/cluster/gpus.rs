//! GPUs as generic resources: the controller gives each job distinct device
//! indices and the node daemon hands them to the job.

use super::write_script;
use slurm_proto::{JobReason, JobState};
use slurm_tests::*;

fn gpu_env(t: &TestCluster, id: u32) -> String {
    let out = t.work.join(format!("slurm-{id}.out"));
    std::fs::read_to_string(&out).unwrap_or_default()
}

#[test]
fn gpu_jobs_get_their_own_device_indices() {
    let t = TestCluster::start(2, |s| {
        s.node_gres = Some("gpu:a100:2,gpu:v100:2".into());
    });
    let show = write_script(
        &t,
        "gpus.sh",
        "#!/bin/sh\necho \"CUDA=$CUDA_VISIBLE_DEVICES JOB_GPUS=$SLURM_JOB_GPUS ORD=$GPU_DEVICE_ORDINAL ON=$SLURM_GPUS_ON_NODE\"\nsleep 3\n",
    );
    // Two A100s, then one more GPU of any type: all on n1 (-w), never shared.
    let a = t.sbatch(&["-w", "n1", "--gres=gpu:a100:2", &show]);
    let b = t.sbatch(&["-w", "n1", "--gpus-per-node=1", &show]);
    let c = t.sbatch(&["-w", "n1", "--gpus=v100:1", &show]);
    for id in [a, b, c] {
        t.wait_done(id, 60);
    }
    assert_eq!(gpu_env(&t, a), "CUDA=0,1 JOB_GPUS=0,1 ORD=0,1 ON=2\n");
    // The A100s were busy: the V100s (2-3) are what was left.
    assert_eq!(gpu_env(&t, b), "CUDA=2 JOB_GPUS=2 ORD=2 ON=1\n");
    assert_eq!(gpu_env(&t, c), "CUDA=3 JOB_GPUS=3 ORD=3 ON=1\n");
    let jb = t.job(b).unwrap();
    assert_eq!(jb.alloc.gres[0][0].describe(), "gpu:v100:1(IDX:2)");

    // More than n1 has waits for Resources; more than any node has is refused.
    let hog = t.sbatch(&["-w", "n1", "--gres=gpu:4", "--wrap", "sleep 30"]);
    t.wait_job(hog, 30, "running", |j| j.state == JobState::Running);
    // Its TRES name the GPUs, in all and by type, as Slurm's do.
    let detail = stdout(&t.run("scontrol", &["show", "job", &hog.to_string()]));
    assert!(
        detail.contains(",billing=1,gres/gpu=4,gres/gpu:a100=2,gres/gpu:v100=2\n"),
        "{detail}"
    );
    let wait = t.sbatch(&["-w", "n1", "--gres=gpu:1", &show]);
    t.wait_job(wait, 30, "pending on resources", |j| {
        j.reason == JobReason::Resources
    });
    let free = t.sbatch(&["--wrap", "true"]);
    let jf = t.wait_done(free, 30);
    assert_eq!(jf.state, JobState::Completed, "CPU jobs still run beside");
    assert!(t.run("scancel", &[&hog.to_string()]).status.success());
    t.wait_done(wait, 60);
    assert_eq!(gpu_env(&t, wait), "CUDA=0 JOB_GPUS=0 ORD=0 ON=1\n");
    let out = t.run("sbatch", &["--gres=gpu:5", "--wrap", "true"]);
    assert!(!out.status.success());
    assert!(
        String::from_utf8_lossy(&out.stderr)
            .contains("Requested node configuration is not available"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // CPUs and memory that come with each GPU.
    let id = t.sbatch(&[
        "-w",
        "n2",
        "--gpus-per-node=2",
        "--cpus-per-gpu=2",
        "--mem-per-gpu=100",
        "--wrap",
        "true",
    ]);
    let j = t.wait_done(id, 30);
    assert_eq!(
        (j.alloc.cpus.clone(), j.alloc.mem.clone()),
        (vec![4], vec![200])
    );
    let out = t.run(
        "sbatch",
        &["--gpus=1", "--cpus-per-gpu=1", "-c", "2", "--wrap", "true"],
    );
    assert!(!out.status.success(), "--cpus-per-gpu with -c was accepted");
    let out = t.run("sbatch", &["--cpus-per-gpu=1", "--wrap", "true"]);
    assert!(!out.status.success());

    // srun makes its own allocation with GPUs; its tasks see them.
    let out = t.run(
        "srun",
        &[
            "-w",
            "n2",
            "--gpus-per-node=v100:2",
            "printenv",
            "CUDA_VISIBLE_DEVICES",
        ],
    );
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        "2,3\n",
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // srun --cpus-per-gpu/--mem-per-gpu: the allocation and its task get
    // the CPUs and memory of their GPUs (its task is not told
    // SLURM_CPUS_PER_TASK: it asked none per task, as Slurm's).
    let out = t.run(
        "srun",
        &[
            "-w",
            "n2",
            "--gpus=2",
            "--cpus-per-gpu=2",
            "--mem-per-gpu=64",
            "sh",
            "-c",
            "echo ${SLURM_CPUS_PER_TASK-unset} $SLURM_JOB_ID",
        ],
    );
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    let mut w = text.split_whitespace();
    assert_eq!(
        w.next(),
        Some("unset"),
        "{text}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let jid: u32 = w.next().and_then(|x| x.parse().ok()).expect("job id");
    let j = t.job(jid).unwrap();
    assert_eq!(
        (j.alloc.cpus.clone(), j.alloc.mem.clone()),
        (vec![4], vec![128])
    );
    let out = t.run("srun", &["--cpus-per-gpu=0", "true"]);
    assert!(!out.status.success());
    let out = t.run("sbatch", &["--gres=fpga:1", "--wrap", "true"]);
    assert!(
        String::from_utf8_lossy(&out.stderr)
            .contains("Invalid generic resource (gres) specification"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn constraint_picks_nodes_by_feature() {
    let mut t = TestCluster::start(3, |s| {
        s.node_features = vec!["intel,ib".into(), "amd,ib".into(), "intel,opa,rack2".into()];
    });
    let host = |args: &[&str]| {
        let id = t.sbatch(args);
        let j = t.wait_done(id, 30);
        assert_eq!(j.state, JobState::Completed, "{args:?}");
        j.alloc.nodes.join(",")
    };
    assert_eq!(host(&["-C", "amd", "--wrap", "true"]), "n2");
    assert_eq!(host(&["-C", "intel&opa", "--wrap", "true"]), "n3");
    assert_eq!(
        host(&["--constraint=opa|amd", "-N2", "--wrap", "true"]),
        "n2,n3"
    );
    assert_eq!(
        host(&["-C", "[rack2|ib]", "-N2", "--wrap", "true"]),
        "n1,n2"
    );
    // Counts: two of the three nodes must be intel (n1, n3).
    assert_eq!(host(&["-C", "intel*2", "-N2", "--wrap", "true"]), "n1,n3");
    assert_eq!(
        host(&["-C", "intel*1&ib", "-N2", "--wrap", "true"]),
        "n1,n2"
    );
    let out = t.run("sbatch", &["-v", "-C", "intel*3", "-N2", "--wrap", "true"]);
    assert!(!out.status.success());
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("intel*3"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let j = t.sbatch(&["-C", "intel&ib", "--wrap", "true"]);
    let show = t.run("scontrol", &["show", "job", &j.to_string()]);
    assert!(String::from_utf8_lossy(&show.stdout).contains("Features=intel&ib DelayBoot"));
    // A feature no node has is refused; so is a malformed expression.
    for bad in [
        &["-C", "arm", "--wrap", "true"][..],
        &["-C", "intel&", "--wrap", "true"][..],
    ] {
        let out = t.run("sbatch", bad);
        assert!(!out.status.success());
        assert!(
            String::from_utf8_lossy(&out.stderr).contains("Invalid feature specification"),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    // Impossible together: never starts, refused at submission.
    let out = t.run("sbatch", &["-C", "amd&opa", "--wrap", "true"]);
    assert!(
        !out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // Features change at run time and outlive a controller restart.
    let out = t.run(
        "scontrol",
        &["update", "nodename=n2", "AvailableFeatures=fpga,ib"],
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    t.c.kill_ctld(libc::SIGKILL);
    t.c.start_ctld().expect("controller restarts");
    let id = t.sbatch(&["-C", "fpga", "--wrap", "true"]);
    assert_eq!(t.wait_done(id, 30).alloc.nodes, vec!["n2"]);
    let show = t.run("scontrol", &["show", "node", "n2"]);
    assert!(String::from_utf8_lossy(&show.stdout).contains("AvailableFeatures=fpga,ib"));
}

#[test]
fn licenses_are_counted_and_jobs_wait_for_them() {
    let t = TestCluster::start(1, |s| s.extra_conf = "Licenses=matlab:2,abaqus\n".into());
    let ids: Vec<u32> = (0..3)
        .map(|_| t.sbatch(&["-L", "matlab", "--wrap", "sleep 3"]))
        .collect();
    t.wait_job(ids[0], 30, "running", |j| j.state == JobState::Running);
    t.wait_job(ids[1], 30, "running", |j| j.state == JobState::Running);
    let j = t.wait_job(ids[2], 30, "waiting for a license", |j| {
        j.reason == JobReason::Other("Licenses".into())
    });
    assert_eq!(j.state, JobState::Pending);
    let out = t.run("scontrol", &["show", "licenses"]);
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        "LicenseName=matlab\n    Total=2 Used=2 Free=0 Reserved=0 Remote=no\n\
         LicenseName=abaqus\n    Total=1 Used=0 Free=1 Reserved=0 Remote=no\n"
    );
    // --json: slurmrestd's licenses body.
    let out = t.run("scontrol", &["show", "licenses", "matlab", "--json"]);
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["licenses"].as_array().map(Vec::len), Some(1), "{v}");
    assert_eq!(v["licenses"][0]["LicenseName"], "matlab");
    assert_eq!(v["licenses"][0]["Used"], 2);
    assert_eq!(v["licenses"][0]["Free"], 0);
    // A job needing another license runs beside them.
    let other = t.sbatch(&["-L", "abaqus:1", "--wrap", "true"]);
    assert_eq!(t.wait_done(other, 30).state, JobState::Completed);
    assert_eq!(t.wait_done(ids[2], 60).state, JobState::Completed);
    for bad in ["nosuch", "matlab:3", "matlab:x"] {
        let out = t.run("sbatch", &["-L", bad, "--wrap", "true"]);
        assert!(!out.status.success(), "{bad}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(
            err.contains("Invalid license specification"),
            "{bad}: {err}"
        );
    }
}

/// `--ntasks-per-gpu` as Slurm's controller reads it: with GPUs asked for,
/// that many tasks for each (the task count follows), with a task count one
/// GPU per that many tasks; the job and its steps are told
/// (`SLURM_NTASKS_PER_GPU`, `scontrol show job`'s `NtasksPerTRES`), and what
/// cannot go together is refused with Slurm's words.
#[test]
fn ntasks_per_gpu_gives_tasks_for_gpus_and_gpus_for_tasks() {
    let t = TestCluster::start(2, |s| {
        s.node_gres = Some("gpu:a100:2,gpu:v100:2".into());
    });
    let show = write_script(
        &t,
        "per_gpu.sh",
        "#!/bin/sh\necho \"$SLURM_NTASKS $SLURM_NTASKS_PER_GPU $SLURM_GPUS_ON_NODE\"\nsrun sh -c 'echo $SLURM_PROCID' | sort | tr '\\n' ' '\necho\n",
    );
    // Two GPUs on one node, two tasks each: four tasks.
    let a = t.sbatch(&["-N1", "--gpus-per-node=2", "--ntasks-per-gpu=2", &show]);
    // Three tasks, one GPU per task... of three: three GPUs.
    let b = t.sbatch(&["-n3", "--ntasks-per-gpu=1", "-w", "n2", &show]);
    for id in [a, b] {
        let j = t.wait_done(id, 60);
        assert_eq!(j.state, JobState::Completed, "{:?}\n{}", j.reason, t.logs());
    }
    assert_eq!(gpu_env(&t, a), "4 2 2\n0 1 2 3 \n");
    assert_eq!(gpu_env(&t, b), "3 1 3\n0 1 2 \n");
    let detail = stdout(&t.run("scontrol", &["show", "job", &a.to_string()]));
    assert!(detail.contains("\n   NtasksPerTRES=2\n"), "{detail}");
    // A task count that is not a multiple, no GPUs and no count at all
    // (Slurm's sbatch says only the error's name), and the options Slurm
    // will not take with it.
    let gres =
        "sbatch: error: Batch job submission failed: Invalid generic resource (gres) specification";
    for (args, want) in [
        (vec!["-n3", "--ntasks-per-gpu=2"], gres),
        (vec!["-N1-2", "--ntasks-per-gpu=2"], gres),
        // Two GPUs for three nodes (Slurm's: fewer GPUs than nodes).
        (vec!["-N3", "-n6", "--ntasks-per-gpu=3"], gres),
        // More GPUs than can be counted.
        (
            vec!["--gres=gpu:18446744073709551615,gpu:1", "--ntasks-per-gpu=1"],
            gres,
        ),
        (
            vec!["--gpus-per-task=1", "--ntasks-per-gpu=2"],
            "sbatch: fatal: --gpus-per-task is mutually exclusive with --ntasks-per-gpu and SLURM_NTASKS_PER_GPU",
        ),
        (
            vec!["--ntasks-per-node=2", "--ntasks-per-gpu=2"],
            "sbatch: fatal: --ntasks-per-node is mutually exclusive with --ntasks-per-gpu",
        ),
        (
            vec!["--ntasks-per-gpu=0"],
            "Invalid numeric value \"0\" for --ntasks-per-gpu.",
        ),
    ] {
        let mut argv = args.clone();
        argv.extend(["--wrap", "true"]);
        let out = t.run("sbatch", &argv);
        assert!(!out.status.success(), "{args:?}: {}", stdout(&out));
        assert!(stderr(&out).contains(want), "{args:?}: {}", stderr(&out));
    }
    // srun makes its own allocation the same way.
    let out = t.run(
        "srun",
        &[
            "-N1",
            "--gpus=1",
            "--ntasks-per-gpu=3",
            "sh",
            "-c",
            "echo $SLURM_PROCID",
        ],
    );
    assert!(out.status.success(), "{}", stderr(&out));
    let mut ids: Vec<String> = stdout(&out).lines().map(str::to_string).collect();
    ids.sort();
    assert_eq!(ids, ["0", "1", "2"]);
}

/// Steps get GPUs of their own, as Slurm's: `srun --gpus=1` steps of a
/// four-GPU job run at once, each with a GPU none of the others has; a
/// fifth waits for one; a type names which; a step asking none has every
/// GPU of its job, `--gres=none` none; more than the job has is refused.
#[test]
fn steps_get_gpus_of_their_own() {
    use std::time::{Duration, Instant};
    let t = TestCluster::start(1, |s| {
        s.node_gres = Some("gpu:a100:2,gpu:v100:2".into());
    });
    let job = t.sbatch(&["--gres=gpu:4", "-n4", "-t", "5", "--wrap", "sleep 300"]);
    t.wait_job(job, 30, "running", |j| j.state == JobState::Running);
    let id = job.to_string();
    let step = |args: &[&str]| t.spawn_step(job, args);
    let show = "echo $SLURM_STEP_GPUS $CUDA_VISIBLE_DEVICES $SLURM_JOB_GPUS; sleep 2";
    let begun = Instant::now();
    let four: Vec<_> = (0..4)
        .map(|_| step(&["-n1", "--gpus=1", "--exact", "sh", "-c", show]))
        .collect();
    std::thread::sleep(Duration::from_millis(800));
    let fifth = step(&["-n1", "--gpus=1", "--exact", "printenv", "SLURM_STEP_GPUS"]);
    let mut seen: Vec<String> = four
        .into_iter()
        .map(|c| {
            let o = c.wait_with_output().unwrap();
            assert!(o.status.success(), "{}", stderr(&o));
            stdout(&o).trim().to_string()
        })
        .collect();
    seen.sort();
    assert_eq!(
        seen,
        ["0 0 0,1,2,3", "1 1 0,1,2,3", "2 2 0,1,2,3", "3 3 0,1,2,3"]
    );
    assert!(
        begun.elapsed() < Duration::from_millis(3900),
        "the four steps ran one after another"
    );
    let f = fifth.wait_with_output().unwrap();
    assert!(f.status.success(), "{}", stderr(&f));
    assert!(
        begun.elapsed() >= Duration::from_secs(2),
        "the fifth did not wait"
    );
    assert!(
        stderr(&f).contains("Step created for StepId="),
        "{}",
        stderr(&f)
    );
    let run = |args: &[&str]| {
        let mut a = vec!["--jobid", id.as_str()];
        a.extend_from_slice(args);
        t.run("srun", &a)
    };
    // A type: the first free of it.
    let o = run(&[
        "-n1",
        "--exact",
        "--gpus=v100:1",
        "printenv",
        "SLURM_STEP_GPUS",
    ]);
    assert_eq!(stdout(&o), "2\n", "{}", stderr(&o));
    // None asked: the job's; --gres=none: none.
    let o = run(&["-n1", "printenv", "SLURM_STEP_GPUS"]);
    assert_eq!(stdout(&o), "0,1,2,3\n", "{}", stderr(&o));
    let o = run(&[
        "-n1",
        "--gres=none",
        "sh",
        "-c",
        "echo ${CUDA_VISIBLE_DEVICES-none} ${SLURM_STEP_GPUS-none}",
    ]);
    assert_eq!(stdout(&o), "none none\n", "{}", stderr(&o));
    // More than the job has: refused at once.
    let o = run(&["-n1", "--gpus=5", "true"]);
    assert!(!o.status.success());
    assert!(
        stderr(&o).contains("Invalid generic resource (gres) specification"),
        "{}",
        stderr(&o)
    );
    t.run("scancel", &[&id]);
}

/// `--gpus-per-task` binds each task to GPUs of its own (Slurm's implied
/// `--gpu-bind=per_task:N`); `--gpu-bind` says otherwise.
#[test]
fn tasks_are_bound_to_their_gpus() {
    let t = TestCluster::start(1, |s| {
        s.node_gres = Some("gpu:4".into());
    });
    let job = t.sbatch(&["--gres=gpu:4", "-n4", "-t", "5", "--wrap", "sleep 300"]);
    t.wait_job(job, 30, "running", |j| j.state == JobState::Running);
    let id = job.to_string();
    let each = |args: &[&str]| {
        let mut a = vec!["--jobid", id.as_str(), "-n4"];
        a.extend_from_slice(args);
        a.extend_from_slice(&["sh", "-c", "echo $SLURM_LOCALID $CUDA_VISIBLE_DEVICES"]);
        let o = t.run("srun", &a);
        assert!(o.status.success(), "{}", stderr(&o));
        let mut lines: Vec<String> = stdout(&o).lines().map(str::to_string).collect();
        lines.sort();
        lines
    };
    assert_eq!(each(&["--gpus-per-task=1"]), ["0 0", "1 1", "2 2", "3 3"]);
    assert_eq!(
        each(&["--gpus=2", "--gpu-bind=single:2"]),
        ["0 0", "1 0", "2 1", "3 1"]
    );
    assert_eq!(
        each(&["--gpus-per-task=1", "--gpu-bind=none"]),
        ["0 0,1,2,3", "1 0,1,2,3", "2 0,1,2,3", "3 0,1,2,3"]
    );
    assert_eq!(
        each(&["--gpu-bind=map_gpu:3,2"]),
        ["0 3", "1 2", "2 3", "3 2"]
    );
    // --ntasks-per-gpu=2: two GPUs for four tasks, two tasks a GPU.
    assert_eq!(
        each(&["--ntasks-per-gpu=2", "--exact"]),
        ["0 0", "1 0", "2 1", "3 1"]
    );
    let o = t.run("srun", &["--jobid", &id, "--gpu-bind=rank", "true"]);
    assert!(!o.status.success());
    assert!(
        stderr(&o).contains("Invalid --gpu-bind argument: rank"),
        "{}",
        stderr(&o)
    );
    t.run("scancel", &[&id]);
}

/// `sbatch --gpu-bind` reaches the job's steps (SLURM_GPU_BIND, which srun
/// reads), and a bad one is refused with Slurm's words.
#[test]
fn a_jobs_gpu_bind_reaches_its_steps() {
    let t = TestCluster::start(1, |s| {
        s.node_gres = Some("gpu:2".into());
    });
    let out = t.work.join("bind.out");
    let job = t.sbatch(&[
        "--gres=gpu:2",
        "-n4",
        "--gpu-bind=single:2",
        "-o",
        out.to_str().unwrap(),
        "--wrap",
        "echo bind=$SLURM_GPU_BIND; srun sh -c 'echo $SLURM_LOCALID $CUDA_VISIBLE_DEVICES' | sort",
    ]);
    let j = t.wait_done(job, 60);
    assert_eq!(j.state, JobState::Completed, "{}", t.logs());
    assert_eq!(
        std::fs::read_to_string(&out).unwrap(),
        "bind=single:2\n0 0\n1 0\n2 1\n3 1\n"
    );
    let o = t.run("sbatch", &["--gpu-bind=rank", "--wrap", "true"]);
    assert!(!o.status.success());
    assert!(
        stderr(&o).contains("Invalid --gpu-bind argument: rank"),
        "{}",
        stderr(&o)
    );
}
