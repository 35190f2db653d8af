//! Fake v1 and v2 trees in temporary directories (what gets written where),
//! and, as root with a writable cgroup file system, real cgroups: a
//! double-forked process dies with its job, and a memory hog under a
//! 64 MiB limit is OOM-killed and seen to be.

use super::*;
use crate::gres::GresDevice;
use std::ffi::CString;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::process::CommandExt;
use std::process::Command;

fn put(p: &Path, text: &str) {
    std::fs::create_dir_all(p.parent().unwrap()).unwrap();
    std::fs::write(p, text).unwrap();
}

fn get(p: &Path) -> String {
    std::fs::read_to_string(p).unwrap_or_else(|e| panic!("{}: {e}", p.display()))
}

fn fake_v1() -> tempfile::TempDir {
    let d = tempfile::tempdir().unwrap();
    for c in V1_CONTROLLERS {
        put(&d.path().join(c).join("cgroup.procs"), "");
    }
    put(&d.path().join("cpuset/cpuset.cpus"), "0-7\n");
    put(&d.path().join("cpuset/cpuset.mems"), "0\n");
    d
}

fn fake_v2() -> tempfile::TempDir {
    let d = tempfile::tempdir().unwrap();
    put(
        &d.path().join("cgroup.controllers"),
        "cpuset cpu io memory hugetlb pids rdma\n",
    );
    put(&d.path().join("cgroup.procs"), "");
    d
}

fn gpu(index: u32) -> GresDevice {
    GresDevice {
        name: "gpu".into(),
        gtype: Some("a100".into()),
        index,
        file: format!("/dev/nvidia{index}"),
        dev: Some((195, index)),
        cpus: None,
    }
}

fn constraining(mount: &Path) -> CgroupConf {
    CgroupConf {
        mountpoint: mount.to_path_buf(),
        constrain_cores: true,
        constrain_ram_space: true,
        allowed_ram_space: 50.0,
        constrain_swap_space: true,
        constrain_devices: true,
        ..CgroupConf::default()
    }
}

fn opts<'a>(conf: CgroupConf, node: &'a str) -> ManagerOpts<'a> {
    ManagerOpts {
        conf,
        node,
        constrain: true,
        cpu_order: vec![0, 4, 1, 5, 2, 6, 3, 7],
        node_mem_mib: 4000,
        devices: vec![gpu(0), gpu(1)],
        prefer: None,
    }
}

fn spec(job_id: JobId, cpus: u32, mem_mib: u64) -> JobSpec {
    JobSpec {
        job_id,
        uid: 1000,
        cpus,
        mem_mib,
        gpus: Some(vec![1]),
    }
}

/// Start `sh -c script`, which joins `procs` before it execs.
fn run_joined(procs: &[PathBuf], script: &str) -> std::process::Child {
    let paths: Vec<CString> = procs
        .iter()
        .map(|p| CString::new(p.as_os_str().as_bytes()).unwrap())
        .collect();
    let mut cmd = Command::new("/bin/sh");
    cmd.arg("-c").arg(script);
    // SAFETY: join_cgroups is async-signal-safe and uses prepared paths.
    unsafe {
        cmd.pre_exec(move || {
            crate::launch::exec::join_cgroups(&paths).map_err(io::Error::from_raw_os_error)
        });
    }
    cmd.spawn().unwrap()
}

#[test]
fn v1_fake_tree_gets_limits_steps_and_pids() {
    let d = fake_v1();
    let m = d.path();
    let mgr = Manager::new(opts(constraining(m), "n1")).unwrap().unwrap();
    assert_eq!(mgr.version, Version::V1);
    assert!(mgr.constrains());
    assert_eq!(mgr.top(), m.join("freezer/slurm_n1"));
    // The top directory got the root's CPUs and memory nodes.
    assert_eq!(get(&m.join("cpuset/slurm_n1/cpuset.cpus")), "0-7");

    let jc = mgr.create_job(&spec(7, 2, 1000)).unwrap();
    let job = |c: &str| m.join(c).join("slurm_n1/uid_1000/job_7");
    assert_eq!(jc.dirs.len(), 5);
    assert_eq!(jc.dirs[0], ("freezer".to_string(), job("freezer")));
    assert_eq!(jc.cpus, vec![0, 4]);
    assert_eq!(get(&job("cpuset").join("cpuset.cpus")), "0,4");
    assert_eq!(get(&job("cpuset").join("cpuset.mems")), "0");
    assert_eq!(
        get(&job("memory").join("memory.limit_in_bytes")),
        (500u64 << 20).to_string()
    );
    // ConstrainSwapSpace with AllowedSwapSpace=0: RAM + swap = RAM.
    assert_eq!(
        get(&job("memory").join("memory.memsw.limit_in_bytes")),
        (500u64 << 20).to_string()
    );
    // GPU 1 is the job's; GPU 0 is denied.
    assert_eq!(get(&job("devices").join("devices.deny")), "c 195:0 rwm");

    let procs = jc.create_step("step_batch").unwrap();
    assert_eq!(procs.len(), 5);
    assert_eq!(procs[1], job("cpuset").join("step_batch/cgroup.procs"));
    assert_eq!(get(&job("cpuset").join("step_batch/cpuset.cpus")), "0,4");
    let mut child = run_joined(&procs, "exit 0");
    let pid = child.id();
    assert!(child.wait().unwrap().success());
    for p in &procs {
        assert_eq!(get(p), format!("{pid}\n"), "{}", p.display());
    }

    // The next job gets the next CPUs; a job's CPUs come back when it goes.
    let jc2 = mgr.create_job(&spec(8, 3, 0)).unwrap();
    assert_eq!(jc2.cpus, vec![1, 2, 5]);
    // No memory in the allocation: the node's RealMemory × AllowedRAMSpace.
    assert_eq!(jc2.mem_limit, Some(2000 << 20));
    mgr.remove_job(&jc).unwrap();
    assert!(!job("freezer").exists() && !job("cpuset").exists());
    assert!(mgr.cpus_of(7).is_empty());
    assert_eq!(mgr.create_job(&spec(9, 2, 100)).unwrap().cpus, vec![0, 4]);

    // Usage and OOM as the kernel's files give them.
    let jc7 = mgr.create_job(&spec(7, 1, 10)).unwrap();
    jc7.create_step("step_batch").unwrap();
    put(&job("cpuacct").join("cpuacct.usage"), "2500000000\n");
    put(
        &job("cpuacct").join("cpuacct.stat"),
        "user 150\nsystem 50\n",
    );
    put(
        &job("memory").join("memory.max_usage_in_bytes"),
        "1048576\n",
    );
    put(
        &job("memory").join("step_batch/memory.oom_control"),
        "oom_kill_disable 0\nunder_oom 0\noom_kill 1\n",
    );
    let u = jc7.usage();
    // SAFETY: sysconf has no preconditions.
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) } as u64;
    assert_eq!(u.cpu_usec, 2_500_000);
    assert_eq!(u.user_usec, 150 * 1_000_000 / hz);
    assert_eq!(u.max_rss_bytes, 1 << 20);
    assert_eq!(jc7.oom_kills(), 1);
}

#[test]
fn v1_busy_job_directories_and_second_daemons() {
    let d = fake_v1();
    let m = d.path();
    let a = Manager::new(opts(constraining(m), "n1")).unwrap().unwrap();
    // A second daemon for the same node name on this host takes another top.
    let b = Manager::new(opts(constraining(m), "n1")).unwrap().unwrap();
    assert_eq!(b.top(), m.join("freezer/slurm_n1.1"));
    assert!(b.notes[0].contains("slurm_n1.1"), "{:?}", b.notes);
    // Restarted, the second takes its own top back, not the first free.
    drop(a);
    drop(b);
    let mut again = opts(constraining(m), "n1");
    again.prefer = Some("slurm_n1.1".into());
    let b = Manager::new(again).unwrap().unwrap();
    assert_eq!(b.top(), m.join("freezer/slurm_n1.1"));
    assert!(b.notes.is_empty(), "{:?}", b.notes);
    // A remembered name that is not this node's is never used.
    for bad in ["slurm_n2", "../slurm_n1", "slurm_n1.64", "slurm_n1.x"] {
        let mut o = opts(constraining(m), "n1");
        o.prefer = Some(bad.into());
        let c = Manager::new(o).unwrap().unwrap();
        assert_eq!(c.top(), m.join("freezer/slurm_n1"), "{bad}");
    }
    drop(b);
    let c = Manager::new(opts(constraining(m), "n1")).unwrap().unwrap();
    assert_eq!(c.top(), m.join("freezer/slurm_n1"));
    // A job directory with live processes is not taken over.
    let mut sleeper = Command::new("sleep").arg("30").spawn().unwrap();
    put(
        &m.join("freezer/slurm_n1/uid_1000/job_5/cgroup.procs"),
        &format!("{}\n", sleeper.id()),
    );
    assert!(matches!(
        c.create_job(&spec(5, 1, 0)),
        Err(CgroupError::Busy(_))
    ));
    assert!(c.cpus_of(5).is_empty());
    let _ = sleeper.kill();
    let _ = sleeper.wait();
    // Once they are gone, it is reused.
    assert!(c.create_job(&spec(5, 1, 0)).is_ok());
}

#[test]
fn a_killed_daemons_running_jobs_keep_its_hierarchy_for_it() {
    let d = fake_v1();
    let m = d.path();
    // A daemon (known by slurm_n1.1) was killed while its job runs.
    let first = Manager::new(opts(constraining(m), "n1")).unwrap().unwrap();
    let killed = Manager::new(opts(constraining(m), "n1")).unwrap().unwrap();
    assert_eq!(killed.top(), m.join("freezer/slurm_n1.1"));
    put(
        &m.join("freezer/slurm_n1.1/uid_1000/job_7/cgroup.procs"),
        &format!("{}\n", std::process::id()),
    );
    drop(killed);
    // Another daemon of the same node name starting meanwhile passes it by.
    let other = Manager::new(opts(constraining(m), "n1")).unwrap().unwrap();
    assert_eq!(other.top(), m.join("freezer/slurm_n1.2"));
    drop(other);
    // The killed one, back, takes its own again and finds its job.
    let mut again = opts(constraining(m), "n1");
    again.prefer = Some("slurm_n1.1".into());
    let back = Manager::new(again).unwrap().unwrap();
    assert_eq!(back.top(), m.join("freezer/slurm_n1.1"));
    assert!(m.join("freezer/slurm_n1.1/uid_1000/job_7").is_dir());
    drop(first);
}

#[test]
fn v2_fake_tree() {
    let d = fake_v2();
    let m = d.path();
    // Device programs attach to real cgroups only (bpf.rs tests them on a
    // real cgroup2 mount): no GPUs here.
    let mut o = opts(constraining(m), "n2");
    o.devices.clear();
    let mgr = Manager::new(o).unwrap().unwrap();
    assert_eq!(mgr.version, Version::V2);
    assert!(
        !mgr.notes.iter().any(|n| n.contains("ConstrainDevices")),
        "{:?}",
        mgr.notes
    );
    let jc = mgr.create_job(&spec(3, 1, 64)).unwrap();
    let job = m.join("slurm_n2/uid_1000/job_3");
    assert_eq!(jc.dirs, vec![("unified".to_string(), job.clone())]);
    assert_eq!(get(&job.join("cpuset.cpus")), "0");
    assert_eq!(get(&job.join("memory.max")), (32u64 << 20).to_string());
    assert_eq!(get(&job.join("memory.swap.max")), "0");
    assert!(!job.join("devices.deny").exists());
    // Controllers are enabled on the way down.
    assert_eq!(get(&m.join("cgroup.subtree_control")), "+pids");
    assert!(m.join("slurm_n2/uid_1000/cgroup.subtree_control").exists());
    let procs = jc.create_step("step_batch").unwrap();
    assert_eq!(procs, vec![job.join("step_batch/cgroup.procs")]);
    let mut child = run_joined(&procs, "exit 0");
    let pid = child.id();
    child.wait().unwrap();
    assert_eq!(get(&procs[0]), format!("{pid}\n"));
    put(
        &job.join("cpu.stat"),
        "usage_usec 1500\nuser_usec 1000\nsystem_usec 500\nnr_periods 0\n",
    );
    put(&job.join("memory.peak"), "4096\n");
    put(
        &job.join("memory.events"),
        "low 0\nhigh 0\nmax 3\noom 1\noom_kill 2\noom_group_kill 0\n",
    );
    assert_eq!(
        jc.usage(),
        Usage {
            cpu_usec: 1500,
            user_usec: 1000,
            system_usec: 500,
            max_rss_bytes: 4096
        }
    );
    assert_eq!(jc.oom_kills(), 2);
    mgr.remove_job(&jc).unwrap();
    assert!(!job.exists());
    mgr.tidy();
}

#[test]
fn tracking_only_and_versions() {
    let d = fake_v1();
    let mut o = opts(constraining(d.path()), "n3");
    o.constrain = false;
    let mgr = Manager::new(o).unwrap().unwrap();
    assert!(!mgr.constrains());
    let jc = mgr.create_job(&spec(1, 2, 100)).unwrap();
    assert!(jc.cpus.is_empty() && jc.mem_limit.is_none());
    let job = d.path().join("cpuset/slurm_n3/uid_1000/job_1");
    // The cpuset is the parent's: the whole node.
    assert_eq!(get(&job.join("cpuset.cpus")), "0-7");
    assert!(!d
        .path()
        .join("memory/slurm_n3/uid_1000/job_1/memory.limit_in_bytes")
        .exists());

    let disabled = CgroupConf {
        plugin: PluginChoice::Disabled,
        ..constraining(d.path())
    };
    assert!(Manager::new(opts(disabled, "n3")).unwrap().is_none());
    let v2 = CgroupConf {
        plugin: PluginChoice::V2,
        ..constraining(d.path())
    };
    let e = Manager::new(opts(v2, "n3")).err().unwrap();
    assert!(e.to_string().contains("not a cgroup v2"), "{e}");
    let empty = tempfile::tempdir().unwrap();
    let e = Manager::new(opts(constraining(empty.path()), "n3"))
        .err()
        .unwrap();
    assert!(matches!(e, CgroupError::NotMounted(_)), "{e}");
    assert_eq!(detect_version(d.path()), Some(Version::V1));
    assert_eq!(detect_version(fake_v2().path()), Some(Version::V2));
}

// ---------------------------------------------------------------------------
// Real cgroups.

/// The real mount point when it can be written to (we are root and it is a
/// cgroup file system); `None` (with a message) otherwise.
fn real_mount(which: &str) -> Option<PathBuf> {
    // SAFETY: geteuid cannot fail.
    if unsafe { libc::geteuid() } != 0 {
        eprintln!("skipped: real cgroup tests need root");
        return None;
    }
    let candidates: &[&str] = match which {
        "v2" => &["/sys/fs/cgroup", "/sys/fs/cgroup/unified"],
        _ => &["/sys/fs/cgroup"],
    };
    for c in candidates {
        let p = PathBuf::from(c);
        let want = if which == "v2" {
            Version::V2
        } else {
            Version::V1
        };
        if detect_version(&p) != Some(want) {
            continue;
        }
        let probe = match want {
            Version::V2 => p.join(format!("slurmd-probe-{}", std::process::id())),
            Version::V1 => p
                .join("freezer")
                .join(format!("slurmd-probe-{}", std::process::id())),
        };
        if std::fs::create_dir(&probe).is_ok() {
            let _ = std::fs::remove_dir(&probe);
            return Some(p);
        }
    }
    eprintln!("skipped: no writable cgroup {which} file system here");
    None
}

fn alive(pid: i32) -> bool {
    matches!(crate::sysinfo::proc_start(pid), Some((_, s)) if s != 'Z' && s != 'X')
}

fn double_fork_dies_with_its_job(mount: PathBuf, tag: &str) {
    let node = format!("cgtest-{tag}-{}", std::process::id());
    let conf = CgroupConf {
        mountpoint: mount,
        ..CgroupConf::default()
    };
    let mut o = opts(conf, &node);
    o.constrain = false;
    let mgr = Manager::new(o).unwrap().unwrap();
    let jc = mgr.create_job(&spec(41, 1, 0)).unwrap();
    let procs = jc.create_step("step_batch").unwrap();
    let dir = tempfile::tempdir().unwrap();
    let pidfile = dir.path().join("pid");
    let mut child = run_joined(
        &procs,
        &format!(
            "setsid sh -c 'sleep 300 & echo $! > {}'; exec sleep 300",
            pidfile.display()
        ),
    );
    let mut escaped = None;
    for _ in 0..200 {
        if let Some(p) = std::fs::read_to_string(&pidfile)
            .ok()
            .and_then(|s| s.trim().parse::<i32>().ok())
        {
            escaped = Some(p);
            break;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let escaped = escaped.expect("the double-forked sleep started");
    assert!(alive(escaped));
    // It left the script's session and process group, not the cgroup.
    let pids = jc.pids();
    assert!(pids.contains(&escaped), "{pids:?} lacks {escaped}");
    assert!(pids.contains(&(child.id() as i32)), "{pids:?}");
    let left = jc.kill_all(Duration::from_secs(10));
    assert!(left.is_empty(), "survivors {left:?}");
    let _ = child.wait();
    for _ in 0..100 {
        if !alive(escaped) {
            break;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    assert!(!alive(escaped), "the double-forked sleep survived");
    let dirs: Vec<PathBuf> = jc.dirs.iter().map(|(_, d)| d.clone()).collect();
    mgr.remove_job(&jc).unwrap();
    for d in dirs {
        assert!(!d.exists(), "{} remains", d.display());
    }
    mgr.tidy();
    assert!(!mgr.top().exists());
}

#[test]
fn real_v1_kill_reaches_double_forked_processes() {
    if let Some(m) = real_mount("v1") {
        double_fork_dies_with_its_job(m, "v1");
    }
}

#[test]
fn real_v2_kill_reaches_double_forked_processes() {
    if let Some(m) = real_mount("v2") {
        double_fork_dies_with_its_job(m, "v2");
    }
}

#[test]
fn real_memory_hog_is_oom_killed_and_detected() {
    let Some(mount) = real_mount("v1").or_else(|| real_mount("v2")) else {
        return;
    };
    let node = format!("cgtest-oom-{}", std::process::id());
    let conf = CgroupConf {
        mountpoint: mount,
        constrain_ram_space: true,
        constrain_swap_space: true,
        ..CgroupConf::default()
    };
    let mgr = Manager::new(opts(conf, &node)).unwrap().unwrap();
    let jc = mgr.create_job(&spec(42, 1, 64)).unwrap();
    assert_eq!(jc.mem_limit, Some(64 << 20));
    let procs = jc.create_step("step_batch").unwrap();
    // tail keeps the whole newline-free input: 300 MiB.
    let mut child = run_joined(&procs, "head -c 300M /dev/zero | tail > /dev/null");
    let status = child.wait().unwrap();
    assert!(!status.success(), "the hog was not stopped: {status:?}");
    assert!(jc.oom_kills() >= 1, "no OOM kill counted");
    let u = jc.usage();
    assert!(u.max_rss_bytes >= 32 << 20, "{u:?}");
    assert!(u.max_rss_bytes <= 65 << 20, "{u:?}");
    assert!(jc.kill_all(Duration::from_secs(5)).is_empty());
    mgr.remove_job(&jc).unwrap();
    mgr.tidy();
}

#[test]
fn a_daemon_that_died_mid_kill_leaves_nothing_frozen() {
    let d = fake_v1();
    let m = d.path();
    let job = m.join("freezer/slurm_n1/uid_0/job_7");
    let mut sleeper = Command::new("sleep").arg("30").spawn().unwrap();
    put(&job.join("cgroup.procs"), &format!("{}\n", sleeper.id()));
    put(&job.join("freezer.state"), "FROZEN\n");
    // The daemon comes back to its own hierarchy (named in its spool).
    let mut back = opts(constraining(m), "n1");
    back.prefer = Some("slurm_n1".into());
    let _m = Manager::new(back).unwrap().unwrap();
    assert_eq!(get(&job.join("freezer.state")).trim(), "THAWED");
    assert!(job.exists(), "a directory with processes stays");
    let _ = sleeper.kill();
    let _ = sleeper.wait();
}

/// `srun --exact` steps get cpusets of their own within the job's: the
/// CPUs the job's other steps hold least; a step asking for all of the
/// job's (or none) gets the job's, and its tasks' directories take their
/// step's CPUs.
#[test]
fn exact_steps_get_cpusets_of_their_own() {
    let d = fake_v1();
    let m = d.path();
    let mgr = Manager::new(opts(constraining(m), "n1")).unwrap().unwrap();
    let jc = mgr.create_job(&spec(9, 4, 1000)).unwrap();
    assert_eq!(jc.cpus, vec![0, 1, 4, 5]);
    let cpus = |name: &str| {
        get(&m
            .join("cpuset/slurm_n1/uid_1000/job_9")
            .join(name)
            .join("cpuset.cpus"))
    };
    let (_, a) = jc.create_step_holding("step_0", Some(1)).unwrap();
    let (_, b) = jc.create_step_holding("step_1", Some(2)).unwrap();
    assert_eq!((a.clone(), b.clone()), (vec![0], vec![1, 4]));
    assert_eq!((cpus("step_0"), cpus("step_1")), ("0".into(), "1,4".into()));
    // A task's directory takes its step's CPUs, not the job's.
    jc.create_step("step_1/task_0").unwrap();
    assert_eq!(cpus("step_1/task_0"), "1,4");
    // The whole job's (or no count): the job's set, holding none.
    let (_, all) = jc.create_step_holding("step_2", Some(4)).unwrap();
    assert!(all.is_empty());
    assert_eq!(cpus("step_2"), "0-1,4-5");
    let (_, c) = jc.create_step_holding("step_3", Some(1)).unwrap();
    assert_eq!(
        c,
        vec![5],
        "the one free CPU, the full-set step holding none"
    );
    // All held: the least shared, first in the job's order.
    let (_, e) = jc.create_step_holding("step_4", Some(2)).unwrap();
    assert_eq!(e, vec![0, 1]);
    jc.end_step("step_0");
    let (_, f) = jc.create_step_holding("step_5", Some(1)).unwrap();
    // CPU 1 is held twice (steps 1 and 4), the others once: 0 first.
    assert_eq!(f, vec![0]);
    // A step's own memory: its limit, never above the job's.
    let mem = |name: &str| {
        get(&m
            .join("memory/slurm_n1/uid_1000/job_9")
            .join(name)
            .join("memory.limit_in_bytes"))
    };
    jc.limit_step_memory("step_5", 100).unwrap();
    assert_eq!(mem("step_5"), (100u64 << 20).to_string());
    jc.limit_step_memory("step_3", 100_000).unwrap();
    assert_eq!(mem("step_3"), jc.mem_limit.unwrap().to_string());
}
