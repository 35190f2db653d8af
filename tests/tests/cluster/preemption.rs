//! Preemption: jobs in a higher PriorityTier partition displace running
//! jobs of lower ones, by the victims' PreemptMode.

use slurm_proto::JobState;
use slurm_tests::*;

#[test]
fn preemptor_displaces_lower_tier_jobs_by_their_mode() {
    let t = TestCluster::start(1, |s| {
        s.extra_conf = "PreemptType=preempt/partition_prio\nPreemptMode=REQUEUE\n\
PartitionName=low Nodes=n1 PriorityTier=1\n\
PartitionName=lowc Nodes=n1 PriorityTier=1 PreemptMode=CANCEL\n\
PartitionName=high Nodes=n1 PriorityTier=10\n"
            .into();
    });
    // REQUEUE: the victim goes back to the queue and runs again later.
    let low = t.sbatch(&["-p", "low", "-n", "4", "--wrap", "sleep 300"]);
    t.wait_job(low, 30, "running", |j| j.state == JobState::Running);
    let high = t.sbatch(&["-p", "high", "-n", "4", "--wrap", "sleep 2"]);
    t.wait_job(high, 30, "running", |j| j.state == JobState::Running);
    let l = t.job(low).unwrap();
    assert_eq!(
        (l.state, l.restarts),
        (JobState::Pending, 1),
        "{:?}",
        l.reason
    );
    t.wait_done(high, 30);
    t.wait_job(low, 30, "running again", |j| j.state == JobState::Running);
    assert!(t.run("scancel", &[&low.to_string()]).status.success());
    t.wait_done(low, 30);

    // CANCEL: the victim ends PREEMPTED.
    let lowc = t.sbatch(&["-p", "lowc", "-n", "4", "--wrap", "sleep 300"]);
    t.wait_job(lowc, 30, "running", |j| j.state == JobState::Running);
    let high = t.sbatch(&["-p", "high", "-n", "2", "--wrap", "sleep 1"]);
    let v = t.wait_done(lowc, 30);
    assert_eq!(v.state, JobState::Preempted);
    assert_eq!(t.wait_done(high, 30).state, JobState::Completed);
    let sq = t.run(
        "squeue",
        &["-t", "all", "-h", "-j", &lowc.to_string(), "-o", "%T"],
    );
    assert_eq!(String::from_utf8_lossy(&sq.stdout).trim(), "PREEMPTED");

    // Same tier: no preemption, the job waits.
    let a = t.sbatch(&["-p", "low", "-n", "4", "--wrap", "sleep 300"]);
    t.wait_job(a, 30, "running", |j| j.state == JobState::Running);
    let b = t.sbatch(&["-p", "lowc", "-n", "4", "--wrap", "true"]);
    std::thread::sleep(std::time::Duration::from_secs(2));
    assert_eq!(t.job(a).unwrap().state, JobState::Running);
    assert_eq!(t.job(b).unwrap().state, JobState::Pending);
}

#[test]
fn qos_preemption_uses_slurmdbd_qos_lists() {
    let t = TestCluster::start(1, |s| {
        s.accounting = true;
        s.extra_conf = "PreemptType=preempt/qos\nPreemptMode=CANCEL\n".into();
    });
    for args in [
        &["-i", "add", "qos", "scavenger"][..],
        &[
            "-i",
            "add",
            "qos",
            "urgent",
            "Preempt=scavenger",
            "Priority=100",
        ][..],
    ] {
        let o = t.run("sacctmgr", args);
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    }
    // The controller learns the QOS at once (slurmdbd tells it).
    let victim = t.sbatch(&["--qos=scavenger", "-n", "4", "--wrap", "sleep 300"]);
    t.wait_job(victim, 30, "running", |j| j.state == JobState::Running);
    let other = t.sbatch(&["--qos=normal", "-n", "4", "--wrap", "true"]);
    let urgent = t.sbatch(&["--qos=urgent", "-n", "4", "--wrap", "true"]);
    assert_eq!(t.wait_done(victim, 30).state, JobState::Preempted);
    assert_eq!(t.wait_done(urgent, 30).state, JobState::Completed);
    // normal may not preempt: it just waited its turn.
    assert_eq!(t.wait_done(other, 30).state, JobState::Completed);
}
