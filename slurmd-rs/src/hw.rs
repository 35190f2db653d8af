//! Hardware detection: sockets, cores, threads, NUMA nodes, CPUs and memory,
//! as `slurmd -C` prints them and registration reports them.
//!
//! The topology comes from hwloc (Debian's libhwloc, through `hwlocality`)
//! when the `hwloc` feature is built and the probe is of the real machine;
//! otherwise, or when hwloc fails, from `<root>/sys/devices/system/cpu`
//! (`online`, `cpuN/topology/{physical_package_id,die_id,core_id}`), then
//! from `<root>/proc/cpuinfo`, then from `sysconf` (one core per CPU). Every
//! probe takes the root directory it reads under, so tests give fake trees.
//! Nothing here panics on a missing or malformed file; a probe that cannot
//! make sense of what it reads gives way to the next.

use crate::sysinfo::Hardware;
use slurm_common::conf::NodeConf;
use std::collections::BTreeMap;
use std::path::Path;
use std::sync::OnceLock;

/// One logical CPU (hwloc's PU): its kernel id and where it sits.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct Pu {
    /// Socket index on the node, 0-based in discovery order.
    pub socket: u32,
    /// Core index within the socket, 0-based.
    pub core: u32,
    /// The kernel's CPU number (what cpusets and `taskset` use).
    pub id: u32,
}

/// Where a topology came from (for the log).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Source {
    Hwloc,
    Sysfs,
    CpuInfo,
    Sysconf,
}

/// The CPU topology of a node.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Topology {
    /// Ordered by (socket, core, id): the order CPUs are handed to jobs.
    pub pus: Vec<Pu>,
    pub numa_nodes: u32,
    pub source: Source,
}

impl Topology {
    /// From unordered (socket key, core key, cpu id) triples: keys become
    /// dense indices in ascending key order.
    pub fn from_keys(mut raw: Vec<(i64, i64, u32)>, numa_nodes: u32, source: Source) -> Topology {
        raw.sort_unstable();
        raw.dedup_by_key(|r| r.2);
        let mut sockets: BTreeMap<i64, u32> = BTreeMap::new();
        let mut cores: BTreeMap<(i64, i64), u32> = BTreeMap::new();
        let mut per_socket: BTreeMap<u32, u32> = BTreeMap::new();
        let mut pus = Vec::with_capacity(raw.len());
        for (s, c, id) in raw {
            let next = sockets.len() as u32;
            let socket = *sockets.entry(s).or_insert(next);
            let core = match cores.get(&(s, c)) {
                Some(&k) => k,
                None => {
                    let n = per_socket.entry(socket).or_insert(0);
                    let k = *n;
                    *n += 1;
                    cores.insert((s, c), k);
                    k
                }
            };
            pus.push(Pu { socket, core, id });
        }
        pus.sort_unstable();
        Topology {
            pus,
            numa_nodes: numa_nodes.max(1),
            source,
        }
    }

    pub fn cpus(&self) -> u32 {
        (self.pus.len() as u32).max(1)
    }

    pub fn sockets(&self) -> u32 {
        let mut s: Vec<u32> = self.pus.iter().map(|p| p.socket).collect();
        s.dedup();
        (s.len() as u32).max(1)
    }

    /// Cores on the whole node.
    pub fn cores(&self) -> u32 {
        let mut c: Vec<(u32, u32)> = self.pus.iter().map(|p| (p.socket, p.core)).collect();
        c.dedup();
        (c.len() as u32).max(1)
    }

    pub fn cores_per_socket(&self) -> u32 {
        (self.cores() / self.sockets()).max(1)
    }

    pub fn threads_per_core(&self) -> u32 {
        (self.cpus() / self.cores()).max(1)
    }

    /// Kernel CPU ids in allocation order (socket, core, thread).
    pub fn cpu_ids(&self) -> Vec<u32> {
        self.pus.iter().map(|p| p.id).collect()
    }

    /// Kernel CPU ids of Slurm's abstract core indices (socket-major).
    pub fn cpus_of_cores(&self, cores: &[u32]) -> Vec<u32> {
        let cps = self.cores_per_socket();
        let mut out: Vec<u32> = self
            .pus
            .iter()
            .filter(|p| cores.contains(&(p.socket * cps + p.core)))
            .map(|p| p.id)
            .collect();
        out.sort_unstable();
        out
    }
}

/// Parse a kernel CPU list (`0-3,8,10-11`; empty = none). `None` when malformed.
pub fn parse_cpu_list(s: &str) -> Option<Vec<u32>> {
    let s = s.trim();
    let mut out = Vec::new();
    if s.is_empty() {
        return Some(out);
    }
    for part in s.split(',') {
        let part = part.trim();
        match part.split_once('-') {
            Some((a, b)) => {
                let (a, b): (u32, u32) = (a.trim().parse().ok()?, b.trim().parse().ok()?);
                if b < a || b - a > 65_536 {
                    return None;
                }
                out.extend(a..=b);
            }
            None => out.push(part.parse().ok()?),
        }
    }
    out.sort_unstable();
    out.dedup();
    Some(out)
}

/// A kernel CPU list (`0-3,8`) of ids, in ranges.
pub fn format_cpu_list(ids: &[u32]) -> String {
    let mut v = ids.to_vec();
    v.sort_unstable();
    v.dedup();
    let mut out = String::new();
    let mut i = 0;
    while i < v.len() {
        let start = v[i];
        let mut end = start;
        while i + 1 < v.len() && v[i + 1] == end + 1 {
            i += 1;
            end = v[i];
        }
        if !out.is_empty() {
            out.push(',');
        }
        if start == end {
            out.push_str(&start.to_string());
        } else {
            out.push_str(&format!("{start}-{end}"));
        }
        i += 1;
    }
    out
}

fn read(root: &Path, rel: &str) -> Option<String> {
    std::fs::read_to_string(root.join(rel.trim_start_matches('/'))).ok()
}

fn numa_nodes(root: &Path) -> u32 {
    let Ok(rd) = std::fs::read_dir(root.join("sys/devices/system/node")) else {
        return 1;
    };
    let n = rd
        .flatten()
        .filter(|e| {
            e.file_name()
                .to_str()
                .and_then(|n| n.strip_prefix("node"))
                .is_some_and(|d| !d.is_empty() && d.bytes().all(|b| b.is_ascii_digit()))
        })
        .count();
    (n as u32).max(1)
}

/// The topology from `<root>/sys/devices/system/cpu`.
pub fn sysfs_topology(root: &Path) -> Option<Topology> {
    let base = root.join("sys/devices/system/cpu");
    let online = match read(root, "sys/devices/system/cpu/online") {
        Some(s) => parse_cpu_list(&s)?,
        None => {
            let mut ids: Vec<u32> = std::fs::read_dir(&base)
                .ok()?
                .flatten()
                .filter_map(|e| e.file_name().to_str()?.strip_prefix("cpu")?.parse().ok())
                .collect();
            ids.sort_unstable();
            ids
        }
    };
    if online.is_empty() {
        return None;
    }
    let num = |id: u32, f: &str| -> Option<i64> {
        std::fs::read_to_string(base.join(format!("cpu{id}/topology/{f}")))
            .ok()?
            .trim()
            .parse()
            .ok()
    };
    let mut raw = Vec::with_capacity(online.len());
    for id in online {
        let pkg = num(id, "physical_package_id")?.max(0);
        let core = num(id, "core_id")?;
        let die = num(id, "die_id").unwrap_or(0).max(0);
        raw.push((pkg, (die << 32) | (core & 0xffff_ffff), id));
    }
    Some(Topology::from_keys(raw, numa_nodes(root), Source::Sysfs))
}

/// The topology from `<root>/proc/cpuinfo` (`processor`, `physical id`,
/// `core id`; a CPU without them is a core of socket 0).
pub fn cpuinfo_topology(root: &Path) -> Option<Topology> {
    let text = read(root, "proc/cpuinfo")?;
    let mut raw = Vec::new();
    let mut cur: (Option<u32>, i64, Option<i64>) = (None, 0, None);
    let mut flush = |cur: &mut (Option<u32>, i64, Option<i64>)| {
        if let Some(id) = cur.0 {
            raw.push((cur.1, cur.2.unwrap_or(i64::from(id)), id));
        }
        *cur = (None, 0, None);
    };
    for line in text.lines() {
        let Some((k, v)) = line.split_once(':') else {
            if line.trim().is_empty() {
                flush(&mut cur);
            }
            continue;
        };
        let v = v.trim();
        match k.trim() {
            "processor" => {
                if cur.0.is_some() {
                    flush(&mut cur);
                }
                cur.0 = v.parse().ok();
            }
            "physical id" => cur.1 = v.parse().unwrap_or(0),
            "core id" => cur.2 = v.parse().ok(),
            _ => {}
        }
    }
    flush(&mut cur);
    if raw.is_empty() {
        return None;
    }
    Some(Topology::from_keys(raw, numa_nodes(root), Source::CpuInfo))
}

/// One core per online CPU, ids 0..n.
pub fn sysconf_topology() -> Topology {
    let n = crate::sysinfo::online_cpus();
    let raw = (0..n).map(|i| (0, i64::from(i), i)).collect();
    Topology::from_keys(raw, 1, Source::Sysconf)
}

#[cfg(feature = "hwloc")]
fn hwloc_topology() -> Option<Topology> {
    use hwlocality::object::types::ObjectType;
    // hwlocality asserts its own invariants; a broken libhwloc must not take
    // the daemon down with it.
    std::panic::catch_unwind(|| {
        let topo = hwlocality::Topology::new().ok()?;
        let mut raw = Vec::new();
        for pu in topo.objects_with_type(ObjectType::PU) {
            let id = u32::try_from(pu.os_index()?).ok()?;
            let core = pu
                .first_ancestor_with_type(ObjectType::Core)
                .map_or(i64::from(id), |c| c.logical_index() as i64);
            let socket = pu
                .first_ancestor_with_type(ObjectType::Package)
                .map_or(0, |p| p.logical_index() as i64);
            raw.push((socket, core, id));
        }
        if raw.is_empty() {
            return None;
        }
        let numa = topo.objects_with_type(ObjectType::NUMANode).count() as u32;
        Some(Topology::from_keys(raw, numa, Source::Hwloc))
    })
    .ok()
    .flatten()
}

#[cfg(not(feature = "hwloc"))]
fn hwloc_topology() -> Option<Topology> {
    None
}

/// The topology of the machine under `root` (`/` = this one, through hwloc
/// first when built with it).
pub fn detect_topology(root: &Path) -> Topology {
    if root == Path::new("/") {
        if let Some(t) = hwloc_topology() {
            return t;
        }
    }
    sysfs_topology(root)
        .or_else(|| cpuinfo_topology(root))
        .unwrap_or_else(sysconf_topology)
}

/// `MemTotal` of `<root>/proc/meminfo`, MiB.
pub fn real_memory(root: &Path) -> u64 {
    read(root, "proc/meminfo")
        .and_then(|m| crate::sysinfo::meminfo_mib(&m, "MemTotal"))
        .unwrap_or(1)
        .max(1)
}

/// Size of the file system holding `path` (Slurm's `TmpFS`), MiB; 0 when unknown.
pub fn tmp_disk(path: &str) -> u64 {
    let Ok(c) = std::ffi::CString::new(path) else {
        return 0;
    };
    // SAFETY: statvfs fills the zeroed struct; the path is NUL-terminated.
    let mut st: libc::statvfs = unsafe { std::mem::zeroed() };
    if unsafe { libc::statvfs(c.as_ptr(), &mut st) } != 0 {
        return 0;
    }
    (st.f_blocks as u64).saturating_mul(st.f_frsize as u64) / (1024 * 1024)
}

/// Seconds since boot from `<root>/proc/uptime`.
pub fn uptime(root: &Path) -> Option<u64> {
    let s = read(root, "proc/uptime")?;
    let first = s.split_whitespace().next()?;
    let secs = first.split('.').next()?.parse().ok()?;
    Some(secs)
}

/// `D-HH:MM:SS`, as `slurmd -C` prints the uptime.
pub fn format_uptime(secs: u64) -> String {
    let (d, r) = (secs / 86_400, secs % 86_400);
    format!("{d}-{:02}:{:02}:{:02}", r / 3600, (r % 3600) / 60, r % 60)
}

/// What detection found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Detected {
    pub topology: Topology,
    /// MiB.
    pub real_memory: u64,
}

impl Detected {
    /// As registration reports it (`tmp_disk` in MiB).
    pub fn hardware(&self, tmp_disk: u64) -> Hardware {
        let t = &self.topology;
        Hardware {
            cpus: t.cpus(),
            boards: 1,
            sockets: t.sockets(),
            cores_per_socket: t.cores_per_socket(),
            threads_per_core: t.threads_per_core(),
            real_memory: self.real_memory,
            tmp_disk,
        }
    }
}

/// Detect the machine under `root`.
pub fn detect(root: &Path) -> Detected {
    Detected {
        topology: detect_topology(root),
        real_memory: real_memory(root),
    }
}

/// This machine, detected once per process (several nodes served by one
/// process share it).
pub fn host() -> &'static Detected {
    static HOST: OnceLock<Detected> = OnceLock::new();
    HOST.get_or_init(|| detect(Path::new("/")))
}

/// The first line of `slurmd -C`: the node as a slurm.conf line.
pub fn config_line(node: &str, hw: &Hardware, gres: &str) -> String {
    let sockets_per_board = (hw.sockets / hw.boards.max(1)).max(1);
    let mut s = format!(
        "NodeName={node} CPUs={} Boards={} SocketsPerBoard={sockets_per_board} CoresPerSocket={} ThreadsPerCore={} RealMemory={}",
        hw.cpus, hw.boards, hw.cores_per_socket, hw.threads_per_core, hw.real_memory
    );
    if !gres.is_empty() {
        s.push_str(" Gres=");
        s.push_str(gres);
    }
    s
}

/// Why the detected hardware falls short of the node's slurm.conf line,
/// in the words the controller uses for the drain reason; `None` when it
/// does not.
pub fn low_hardware(found: &Hardware, conf: &NodeConf) -> Option<String> {
    use slurm_common::conf::HwCounts;
    let f = HwCounts::new(
        found.cpus,
        found.sockets,
        found.cores_per_socket,
        found.real_memory,
        found.tmp_disk,
    );
    let c = HwCounts::new(
        conf.cpus,
        conf.sockets,
        conf.cores_per_socket,
        conf.real_memory,
        conf.tmp_disk,
    );
    slurm_common::conf::low_hardware(&f, &c)
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use std::path::PathBuf;

    pub fn put(root: &Path, rel: &str, text: &str) {
        let p = root.join(rel);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, text).unwrap();
    }

    /// 2 sockets × 2 cores × 2 threads; kernel numbering puts the sibling
    /// threads 4 apart, as on most x86 machines.
    pub fn fake_sysfs(root: &Path) {
        put(root, "sys/devices/system/cpu/online", "0-7\n");
        for id in 0..8u32 {
            let pkg = (id / 2) % 2;
            let core = id % 2 + 10;
            let t = format!("sys/devices/system/cpu/cpu{id}/topology");
            put(
                root,
                &format!("{t}/physical_package_id"),
                &format!("{pkg}\n"),
            );
            put(root, &format!("{t}/core_id"), &format!("{core}\n"));
            put(root, &format!("{t}/die_id"), "0\n");
        }
        put(root, "sys/devices/system/node/node0/cpulist", "0-3\n");
        put(root, "sys/devices/system/node/node1/cpulist", "4-7\n");
        put(root, "sys/devices/system/node/possible", "0-1\n");
        put(
            root,
            "proc/meminfo",
            "MemTotal:       16303448 kB\nMemFree: 1 kB\n",
        );
        put(root, "proc/uptime", "200000.55 12.0\n");
    }

    #[test]
    fn cpu_lists_round_trip() {
        assert_eq!(
            parse_cpu_list("0-3,8,10-11\n"),
            Some(vec![0, 1, 2, 3, 8, 10, 11])
        );
        assert_eq!(parse_cpu_list(""), Some(vec![]));
        assert_eq!(parse_cpu_list("3-1"), None);
        assert_eq!(parse_cpu_list("x"), None);
        assert_eq!(parse_cpu_list("0-99999999"), None);
        assert_eq!(format_cpu_list(&[8, 0, 1, 2, 3, 10, 11]), "0-3,8,10-11");
        assert_eq!(format_cpu_list(&[5]), "5");
        assert_eq!(format_cpu_list(&[]), "");
    }

    #[test]
    fn sysfs_topology_of_a_fake_two_socket_machine() {
        let d = tempfile::tempdir().unwrap();
        fake_sysfs(d.path());
        let t = sysfs_topology(d.path()).unwrap();
        assert_eq!(t.source, Source::Sysfs);
        assert_eq!(
            (
                t.cpus(),
                t.sockets(),
                t.cores_per_socket(),
                t.threads_per_core()
            ),
            (8, 2, 2, 2)
        );
        assert_eq!(t.numa_nodes, 2);
        // Threads of a core are handed out together.
        assert_eq!(t.cpu_ids(), vec![0, 4, 1, 5, 2, 6, 3, 7]);
        assert_eq!(t.cpus_of_cores(&[0, 3]), vec![0, 3, 4, 7]);
        let found = detect(d.path());
        assert_eq!(found.real_memory, 15921);
        let hw = found.hardware(0);
        assert_eq!(
            config_line("n1", &hw, "gpu:a100:2"),
            "NodeName=n1 CPUs=8 Boards=1 SocketsPerBoard=2 CoresPerSocket=2 ThreadsPerCore=2 RealMemory=15921 Gres=gpu:a100:2"
        );
        assert_eq!(uptime(d.path()), Some(200_000));
        assert_eq!(format_uptime(200_000), "2-07:33:20");
        assert_eq!(format_uptime(59), "0-00:00:59");
    }

    #[test]
    fn cpuinfo_is_the_second_choice_and_garbage_the_last() {
        let d = tempfile::tempdir().unwrap();
        put(
            d.path(),
            "proc/cpuinfo",
            "processor\t: 0\nphysical id\t: 0\ncore id\t\t: 0\n\nprocessor\t: 1\nphysical id\t: 0\ncore id\t\t: 0\n\nprocessor\t: 2\nphysical id\t: 0\ncore id\t\t: 1\n\nprocessor\t: 3\nphysical id\t: 0\ncore id\t\t: 1\n",
        );
        let t = detect_topology(d.path());
        assert_eq!(t.source, Source::CpuInfo);
        assert_eq!(
            (
                t.cpus(),
                t.sockets(),
                t.cores_per_socket(),
                t.threads_per_core()
            ),
            (4, 1, 2, 2)
        );
        // ARM style: no physical id / core id.
        put(
            d.path(),
            "proc/cpuinfo",
            "processor : 0\nBogoMIPS : 1\n\nprocessor : 1\n",
        );
        let t = detect_topology(d.path());
        assert_eq!((t.cpus(), t.sockets(), t.threads_per_core()), (2, 1, 1));
        // Malformed sysfs falls through; an empty root gives sysconf's count.
        put(d.path(), "sys/devices/system/cpu/online", "bogus");
        assert_eq!(detect_topology(d.path()).source, Source::CpuInfo);
        let empty = tempfile::tempdir().unwrap();
        let t = detect_topology(empty.path());
        assert_eq!(t.source, Source::Sysconf);
        assert_eq!(real_memory(empty.path()), 1);
        assert_eq!(uptime(empty.path()), None);
    }

    #[test]
    fn the_real_machine_is_consistent() {
        let h = host();
        let t = &h.topology;
        assert!(t.cpus() >= 1);
        assert_eq!(
            t.sockets() * t.cores_per_socket() * t.threads_per_core(),
            t.cpus()
        );
        assert!(h.real_memory > 1);
        // hwloc and sysfs agree on this machine.
        if let Some(s) = sysfs_topology(&PathBuf::from("/")) {
            assert_eq!(s.cpus(), t.cpus());
            assert_eq!(s.sockets(), t.sockets());
        }
        assert!(uptime(Path::new("/")).is_some());
        #[cfg(feature = "hwloc")]
        assert_eq!(h.topology.source, Source::Hwloc);
    }

    fn node(cpus: u32, sockets: u32, cores: u32, mem: u64) -> NodeConf {
        let text = format!(
            "ClusterName=c\nSlurmctldHost=h\nNodeName=n1 CPUs={cpus} Sockets={sockets} CoresPerSocket={cores} RealMemory={mem}\nPartitionName=p Nodes=n1\n"
        );
        let c = slurm_common::conf::SlurmConf::parse_str(&text, Path::new("/x")).unwrap();
        c.node("n1").unwrap().clone()
    }

    #[test]
    fn low_hardware_reasons() {
        let hw = Hardware {
            cpus: 4,
            boards: 1,
            sockets: 1,
            cores_per_socket: 4,
            threads_per_core: 1,
            real_memory: 2000,
            tmp_disk: 0,
        };
        assert_eq!(low_hardware(&hw, &node(4, 1, 4, 2000)), None);
        assert_eq!(low_hardware(&hw, &node(2, 1, 2, 1000)), None);
        assert_eq!(
            low_hardware(&hw, &node(8, 2, 4, 4000)).as_deref(),
            Some("Low CPUs (reported:4 < configured:8), Low RealMemory (reported:2000 < 100.00% of configured:4000)")
        );
    }
}
