//! Network topology: topology/block from topology.yaml, `--segment`.

use slurm_proto::JobState;
use slurm_tests::*;

fn nodes_of(t: &TestCluster, id: slurm_proto::JobId) -> Vec<String> {
    t.job(id).unwrap().alloc.nodes
}

#[test]
fn segment_job_is_placed_inside_blocks() {
    let t = TestCluster::start(6, |s| {
        s.conf_files.push((
            "topology.yaml".into(),
            "- topology: nvl\n  cluster_default: true\n  block:\n    block_sizes: [3]\n    blocks:\n      - block: b1\n        nodes: n[1-3]\n      - block: b2\n        nodes: n[4-6]\n"
                .into(),
        ));
    });
    let show = t.run("scontrol", &["show", "topology"]);
    assert_eq!(
        String::from_utf8_lossy(&show.stdout),
        "BlockName=b1 BlockIndex=0 Nodes=n[1-3] BlockSize=3\nBlockName=b2 BlockIndex=1 Nodes=n[4-6] BlockSize=3\n"
    );
    let show = t.run("scontrol", &["show", "topology", "n5"]);
    assert_eq!(
        String::from_utf8_lossy(&show.stdout),
        "BlockName=b2 BlockIndex=1 Nodes=n[4-6] BlockSize=3\n"
    );
    // `show topoconf` (at least `topoc`): the file as the controller read
    // it, to anyone; `show top` is still the topology.
    let conf = t.run_as_user("scontrol", &["show", "topoc"]);
    assert!(conf.status.success(), "{}", stderr(&conf));
    assert!(
        String::from_utf8_lossy(&conf.stdout)
            .starts_with("- topology: nvl\n  cluster_default: true\n"),
        "{}",
        String::from_utf8_lossy(&conf.stdout)
    );
    let top = t.run("scontrol", &["show", "top"]);
    assert!(String::from_utf8_lossy(&top.stdout).starts_with("BlockName=b1 "));
    // b1 keeps two nodes free, b2 three.
    let a = t.sbatch(&["-N1", "-w", "n1", "--exclusive", "--wrap", "sleep 300"]);
    t.wait_job(a, 30, "running", |j| j.state == JobState::Running);
    // Four nodes in segments of two: a pair from each block (without
    // segments the job would take b2 whole and one node of b1).
    let b = t.sbatch(&["-N4", "--segment=2", "--exclusive", "--wrap", "sleep 300"]);
    t.wait_job(b, 30, "running", |j| j.state == JobState::Running);
    assert_eq!(nodes_of(&t, b), ["n2", "n3", "n4", "n5"]);
    // Two nodes must share a base block: only n6 is free, so it waits.
    let c = t.sbatch(&["-N2", "--exclusive", "--wrap", "true"]);
    t.wait_passes(2);
    let cj = t.job(c).unwrap();
    assert_eq!(cj.state, JobState::Pending, "{:?}", cj.alloc.nodes);
    // Once a frees n1, c waits on: b1 has only n1 free and b2 only n6.
    assert!(t.run("scancel", &[&a.to_string()]).status.success());
    t.wait_done(a, 30);
    t.wait_passes(2);
    assert_eq!(t.job(c).unwrap().state, JobState::Pending);
    // When b ends, c gets a whole pair inside one block.
    assert!(t.run("scancel", &[&b.to_string()]).status.success());
    t.wait_done(b, 30);
    let cj = t.wait_done(c, 30);
    assert_eq!(cj.state, JobState::Completed);
    let n = cj.alloc.nodes;
    let block = |x: &str| x[1..].parse::<u32>().unwrap() <= 3;
    assert_eq!(n.len(), 2);
    assert_eq!(block(&n[0]), block(&n[1]), "{n:?}");
    // A segment that does not divide the node count is refused.
    let out = t.run("sbatch", &["-v", "-N3", "--segment=2", "--wrap", "true"]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{err}");
    assert!(err.contains("segment"), "{err}");
}

/// Whole cores (CR_Core, the default): with two threads per core a
/// one-CPU job gets both threads of a core; with CR_CPU one thread.
#[test]
fn jobs_get_whole_cores() {
    let t = TestCluster::start(1, |s| {
        s.cpus = 4;
        s.threads_per_core = Some(2);
    });
    let id = t.sbatch(&["-n1", "--wrap", "true"]);
    assert_eq!(t.wait_done(id, 30).alloc.cpus, vec![2]);
    let id = t.sbatch(&["-n3", "--wrap", "true"]);
    assert_eq!(t.wait_done(id, 30).alloc.cpus, vec![4]);
    let t = TestCluster::start(1, |s| {
        s.cpus = 4;
        s.threads_per_core = Some(2);
        s.extra_conf = "SelectTypeParameters=CR_CPU_Memory\n".into();
    });
    let id = t.sbatch(&["-n1", "--wrap", "true"]);
    assert_eq!(t.wait_done(id, 30).alloc.cpus, vec![1]);
}

/// `--ntasks-per-core=1` on two threads a core: each task a whole core,
/// in the job (both cores for two tasks) and in its steps; more tasks than
/// cores is refused; the job is told (`SLURM_NTASKS_PER_CORE`) and
/// `scontrol show job` shows it. A step's `SLURM_CPUS_PER_TASK` is what it
/// asked (none: unset), not the whole core its layout gives each task.
#[test]
fn ntasks_per_core_gives_each_task_a_core() {
    let t = TestCluster::start(1, |s| {
        s.cpus = 4;
        s.threads_per_core = Some(2);
    });
    let id = t.sbatch(&[
        "-n2",
        "--ntasks-per-core=1",
        "-o",
        "npc.out",
        "--wrap",
        "echo job $SLURM_NTASKS_PER_CORE; srun sh -c 'echo step ${SLURM_CPUS_PER_TASK-unset}'; \
         srun -c1 sh -c 'echo one $SLURM_CPUS_PER_TASK'",
    ]);
    let j = t.wait_done(id, 30);
    assert_eq!(j.state, JobState::Completed, "{}", t.logs());
    assert_eq!(j.alloc.cpus, vec![4]);
    let out = std::fs::read_to_string(t.work.join("npc.out")).unwrap();
    let mut lines: Vec<&str> = out.lines().collect();
    lines.sort_unstable();
    assert_eq!(
        lines,
        ["job 1", "one 1", "one 1", "step unset", "step unset"],
        "{out}"
    );
    let show = t.run("scontrol", &["show", "job", &id.to_string()]);
    let show = String::from_utf8_lossy(&show.stdout);
    assert!(show.contains("NtasksPerN:B:S:C=0:0:*:1 "), "{show}");
    // Without it both tasks share one core.
    let id = t.sbatch(&["-n2", "--wrap", "true"]);
    assert_eq!(t.wait_done(id, 30).alloc.cpus, vec![2]);
    let out = t.run("sbatch", &["-n3", "--ntasks-per-core=1", "--wrap", "true"]);
    assert!(!out.status.success());
    assert!(
        String::from_utf8_lossy(&out.stderr)
            .contains("Requested node configuration is not available"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// Sockets: --sockets-per-node and friends pick nodes, --ntasks-per-socket
/// caps the tasks a node takes.
#[test]
fn socket_options_pick_nodes_and_cap_tasks() {
    let t = TestCluster::start(1, |s| {
        s.cpus = 4;
        s.sockets = Some(2);
    });
    let ok = |args: &[&str]| {
        let mut a = args.to_vec();
        a.extend(["--wrap", "true"]);
        let id = t.sbatch(&a);
        let j = t.wait_done(id, 30);
        assert_eq!(j.state, JobState::Completed, "{args:?}");
        j
    };
    ok(&["--sockets-per-node=2"]);
    ok(&["-B", "2:2"]);
    assert_eq!(ok(&["-n2", "--ntasks-per-socket=1"]).alloc.tasks, vec![2]);
    for bad in [
        vec!["--sockets-per-node=4"],
        vec!["--cores-per-socket=3"],
        vec!["--threads-per-core=2"],
        vec!["-n3", "--ntasks-per-socket=1"],
    ] {
        let mut a = bad.clone();
        a.extend(["--wrap", "true"]);
        let out = t.run("sbatch", &a);
        assert!(!out.status.success(), "{bad:?} was accepted");
        assert!(
            String::from_utf8_lossy(&out.stderr)
                .contains("Requested node configuration is not available"),
            "{bad:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
}
