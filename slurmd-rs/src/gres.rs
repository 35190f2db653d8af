//! Generic resources of this node: `gres.conf` (beside slurm.conf) and GPU
//! auto-detection.
//!
//! `gres.conf` lines either set `AutoDetect=` for every node (a line with
//! nothing else) or describe resources (`Name=gpu Type=a100
//! File=/dev/nvidia[0-3] Cores=0-3`), for every node or only for those in
//! `NodeName=`. [`GresConf::parse`] keeps the lines that concern one node.
//!
//! Auto-detection: `AutoDetect=nvml` asks NVIDIA's NVML library (opened at
//! run time; a node without it falls back to the driver's files);
//! `AutoDetect=nvidia` reads the NVIDIA driver's files:
//! `<root>/proc/driver/nvidia/gpus/<bus>/information` (`Model`, `Bus
//! Location`, `Device Minor`) and `<root>/sys/bus/pci/drivers/nvidia/<bus>/
//! local_cpulist`. Detected GPUs take the `Type` and `Cores` of the
//! configured line naming their device file; others get the model as type
//! (`NVIDIA A100-SXM4-40GB` → `nvidia_a100-sxm4-40gb`).

use crate::auxconf::{self, AuxConfError};
use std::path::{Path, PathBuf};

/// `AutoDetect=` values.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AutoDetect {
    Off,
    Nvml,
    Nvidia,
    Rsmi,
    OneApi,
    Nrt,
}

impl AutoDetect {
    fn parse(v: &str) -> Option<AutoDetect> {
        Some(match v.to_ascii_lowercase().as_str() {
            "off" => AutoDetect::Off,
            "nvml" => AutoDetect::Nvml,
            "nvidia" => AutoDetect::Nvidia,
            "rsmi" => AutoDetect::Rsmi,
            "oneapi" => AutoDetect::OneApi,
            "nrt" => AutoDetect::Nrt,
            _ => return None,
        })
    }
}

/// One resource line of gres.conf that applies to this node.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GresLine {
    pub name: String,
    pub gtype: Option<String>,
    /// Device files, expanded (`/dev/nvidia[0-1]` → two).
    pub files: Vec<String>,
    pub count: Option<u64>,
    /// Slurm core indices (socket-major) the devices are close to.
    pub cores: Option<Vec<u32>>,
    pub links: Option<String>,
    pub flags: Vec<String>,
    pub line: usize,
}

impl GresLine {
    /// How many units the line describes.
    pub fn units(&self) -> u64 {
        match self.count {
            Some(c) => c,
            None if !self.files.is_empty() => self.files.len() as u64,
            None => 1,
        }
    }
}

/// gres.conf as it concerns one node.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct GresConf {
    pub path: PathBuf,
    /// The node's `AutoDetect` (its own lines' last, else the global one).
    pub autodetect: Option<AutoDetect>,
    pub lines: Vec<GresLine>,
    /// Things ignored, with file:line.
    pub warnings: Vec<String>,
}

const KEYS: &[&str] = &[
    "AutoDetect",
    "Count",
    "Cores",
    "File",
    "Files",
    "Flags",
    "Links",
    "MultipleFiles",
    "Name",
    "NodeName",
    "Type",
];

/// `Count=` with an optional K/M/G/T suffix (powers of 1024).
fn parse_count(v: &str) -> Option<u64> {
    let v = v.trim();
    let (num, mult) = match v.chars().last()?.to_ascii_uppercase() {
        'K' => (&v[..v.len() - 1], 1u64 << 10),
        'M' => (&v[..v.len() - 1], 1 << 20),
        'G' => (&v[..v.len() - 1], 1 << 30),
        'T' => (&v[..v.len() - 1], 1 << 40),
        _ => (v, 1),
    };
    num.parse::<u64>().ok()?.checked_mul(mult)
}

impl GresConf {
    /// The lines of `text` that concern `node`.
    pub fn parse(text: &str, path: &Path, node: &str) -> Result<GresConf, AuxConfError> {
        let err = |line: usize, message: String| AuxConfError {
            file: path.to_path_buf(),
            line,
            message,
        };
        let mut out = GresConf {
            path: path.to_path_buf(),
            ..GresConf::default()
        };
        let mut global_auto = None;
        let mut node_auto = None;
        for l in auxconf::lex(text, path)? {
            let line = l.line;
            for (k, _) in &l.words {
                if !KEYS.iter().any(|known| known.eq_ignore_ascii_case(k)) {
                    out.warnings.push(format!(
                        "{}:{line}: unknown parameter {k} ignored",
                        path.display()
                    ));
                }
            }
            let applies = match l.get("NodeName") {
                None => true,
                Some(expr) => slurm_common::hostlist::expand(expr)
                    .map_err(|e| err(line, format!("bad NodeName: {e}")))?
                    .iter()
                    .any(|n| n == node),
            };
            let auto = match l.get("AutoDetect") {
                Some(v) => Some(AutoDetect::parse(v).ok_or_else(|| {
                    err(
                        line,
                        format!(
                            "invalid AutoDetect `{v}' (nvml, nvidia, rsmi, oneapi, nrt or off)"
                        ),
                    )
                })?),
                None => None,
            };
            let Some(name) = l.get("Name") else {
                if let Some(a) = auto {
                    if l.get("NodeName").is_some() {
                        if applies {
                            node_auto = Some(a);
                        }
                    } else {
                        global_auto = Some(a);
                    }
                    continue;
                }
                return Err(err(line, "a resource line needs Name=".into()));
            };
            if !applies {
                continue;
            }
            if let Some(a) = auto {
                node_auto = Some(a);
            }
            let files = match l.get("File").or_else(|| l.get("Files")) {
                Some(f) => slurm_common::hostlist::expand(f)
                    .map_err(|e| err(line, format!("bad File `{f}': {e}")))?,
                None => Vec::new(),
            };
            let count = match l.get("Count") {
                Some(c) => {
                    Some(parse_count(c).ok_or_else(|| err(line, format!("invalid Count `{c}'")))?)
                }
                None => None,
            };
            let cores = match l.get("Cores") {
                Some(c) => Some(
                    crate::hw::parse_cpu_list(c)
                        .ok_or_else(|| err(line, format!("invalid Cores `{c}'")))?,
                ),
                None => None,
            };
            out.lines.push(GresLine {
                name: name.to_string(),
                gtype: l.get("Type").filter(|t| !t.is_empty()).map(str::to_string),
                files,
                count,
                cores,
                links: l.get("Links").map(str::to_string),
                flags: l
                    .get("Flags")
                    .map(|f| f.split(',').map(str::to_string).collect())
                    .unwrap_or_default(),
                line,
            });
        }
        out.autodetect = node_auto.or(global_auto);
        Ok(out)
    }

    /// `gres.conf` in `conf_dir`, for `node`; empty when there is none.
    pub fn load(conf_dir: &Path, node: &str) -> Result<GresConf, AuxConfError> {
        let path = conf_dir.join("gres.conf");
        match auxconf::read_optional(&path)? {
            Some(text) => GresConf::parse(&text, &path, node),
            None => Ok(GresConf {
                path,
                ..GresConf::default()
            }),
        }
    }
}

/// A GPU the NVIDIA driver reports.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GpuInfo {
    pub model: String,
    /// PCI address, `0000:07:00.0`.
    pub bus: String,
    /// `/dev/nvidia<minor>`.
    pub minor: u32,
    /// CPUs close to the device (kernel ids), when the driver says.
    pub local_cpus: Option<Vec<u32>>,
}

impl GpuInfo {
    pub fn device_file(&self) -> String {
        format!("/dev/nvidia{}", self.minor)
    }

    /// The type Slurm gives a detected GPU: the model, lower case, spaces
    /// as underscores.
    pub fn type_name(&self) -> String {
        self.model
            .trim()
            .to_ascii_lowercase()
            .split_whitespace()
            .collect::<Vec<_>>()
            .join("_")
    }
}

/// The fields of one `information` file.
pub fn parse_nvidia_information(text: &str) -> Option<(String, String, u32)> {
    let mut model = None;
    let mut bus = None;
    let mut minor = None;
    for line in text.lines() {
        let Some((k, v)) = line.split_once(':') else {
            continue;
        };
        let v = v.trim();
        match k.trim() {
            "Model" => model = Some(v.to_string()),
            "Bus Location" => bus = Some(v.to_string()),
            "Device Minor" => minor = v.parse().ok(),
            _ => {}
        }
    }
    Some((model?, bus?, minor?))
}

/// GPUs as NVML reports them (model, PCI bus, device minor); their nearby
/// CPUs from `<root>/sys`. `Err` when NVML cannot be loaded or answers an
/// error (no NVIDIA driver on this node).
#[cfg(feature = "nvml")]
pub fn probe_nvml(root: &Path) -> Result<Vec<GpuInfo>, String> {
    let nvml = nvml_wrapper::Nvml::init().map_err(|e| e.to_string())?;
    let n = nvml.device_count().map_err(|e| e.to_string())?;
    let mut out = Vec::new();
    for i in 0..n {
        let d = nvml.device_by_index(i).map_err(|e| e.to_string())?;
        let model = d.name().map_err(|e| e.to_string())?;
        let minor = d.minor_number().map_err(|e| e.to_string())?;
        let bus_id = d.pci_info().map_err(|e| e.to_string())?.bus_id;
        // NVML writes an 8-digit domain (`00000000:07:00.0`); sysfs has 4.
        let bus = bus_id
            .to_ascii_lowercase()
            .rsplit_once(':')
            .map(|(head, f)| {
                let parts: Vec<&str> = head.split(':').collect();
                let dom = parts.first().map_or("0", |d| d.trim_start_matches('0'));
                let rest = parts[1..].join(":");
                format!("{:0>4}:{rest}:{f}", if dom.is_empty() { "0" } else { dom })
            })
            .unwrap_or(bus_id.to_ascii_lowercase());
        let local_cpus = local_cpus(root, &bus);
        out.push(GpuInfo {
            model,
            bus,
            minor,
            local_cpus,
        });
    }
    out.sort_by_key(|g| g.minor);
    Ok(out)
}

/// Without the `nvml` feature NVML is never there.
#[cfg(not(feature = "nvml"))]
pub fn probe_nvml(_root: &Path) -> Result<Vec<GpuInfo>, String> {
    Err("this slurmd is built without NVML".into())
}

/// The CPUs the driver lists as close to the GPU on PCI bus `bus`.
fn local_cpus(root: &Path, bus: &str) -> Option<Vec<u32>> {
    let p = root.join(format!(
        "sys/bus/pci/drivers/nvidia/{}/local_cpulist",
        bus.to_ascii_lowercase()
    ));
    crate::hw::parse_cpu_list(&std::fs::read_to_string(p).ok()?)
}

/// GPUs under `<root>/proc/driver/nvidia/gpus`, by device minor.
pub fn probe_nvidia(root: &Path) -> Vec<GpuInfo> {
    let Ok(rd) = std::fs::read_dir(root.join("proc/driver/nvidia/gpus")) else {
        return Vec::new();
    };
    let mut out = Vec::new();
    for e in rd.flatten() {
        let Ok(text) = std::fs::read_to_string(e.path().join("information")) else {
            continue;
        };
        let Some((model, bus, minor)) = parse_nvidia_information(&text) else {
            continue;
        };
        let dir_bus = e.file_name().to_string_lossy().into_owned();
        let local_cpus = [&bus, &dir_bus].iter().find_map(|b| local_cpus(root, b));
        out.push(GpuInfo {
            model,
            bus,
            minor,
            local_cpus,
        });
    }
    out.sort_by_key(|g| g.minor);
    out
}

/// One device of the node (a unit with a file), for `ConstrainDevices`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GresDevice {
    pub name: String,
    pub gtype: Option<String>,
    /// Index among the node's devices of that name (what `--gres` hands out).
    pub index: u32,
    pub file: String,
    /// Character device numbers, when known.
    pub dev: Option<(u32, u32)>,
    /// Kernel CPU ids close to the device.
    pub cpus: Option<Vec<u32>>,
}

/// The node's generic resources: devices, and counts per (name, type).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct NodeGres {
    pub devices: Vec<GresDevice>,
    pub counts: Vec<(String, Option<String>, u64)>,
    /// What detection said worth logging.
    pub notes: Vec<String>,
}

impl NodeGres {
    /// `gpu:a100:2,gpu:v100:1`, as slurm.conf's `Gres=` and `slurmd -C` write it.
    pub fn to_gres_string(&self) -> String {
        self.counts
            .iter()
            .map(|(n, t, c)| match t {
                Some(t) => format!("{n}:{t}:{c}"),
                None => format!("{n}:{c}"),
            })
            .collect::<Vec<_>>()
            .join(",")
    }

    fn add(&mut self, name: &str, gtype: Option<&str>, n: u64) {
        match self
            .counts
            .iter_mut()
            .find(|(cn, ct, _)| cn == name && ct.as_deref() == gtype)
        {
            Some(slot) => slot.2 += n,
            None => self
                .counts
                .push((name.to_string(), gtype.map(str::to_string), n)),
        }
    }
}

/// Character device numbers of `<root><file>`; for `/dev/nvidiaN` that do
/// not exist (yet), the NVIDIA driver's fixed major 195.
fn device_numbers(root: &Path, file: &str) -> Option<(u32, u32)> {
    use std::os::unix::fs::{FileTypeExt, MetadataExt};
    let p = root.join(file.trim_start_matches('/'));
    if let Ok(m) = std::fs::metadata(&p) {
        if m.file_type().is_char_device() || m.file_type().is_block_device() {
            let rdev = m.rdev();
            return Some((libc::major(rdev), libc::minor(rdev)));
        }
    }
    let minor = file.strip_prefix("/dev/nvidia")?.parse().ok()?;
    Some((195, minor))
}

/// Merge gres.conf with what auto-detection finds under `root`; `topo`
/// maps the configured `Cores` to kernel CPUs.
pub fn node_gres(conf: &GresConf, root: &Path, topo: &crate::hw::Topology) -> NodeGres {
    let mut out = NodeGres::default();
    let detected = match conf.autodetect {
        Some(AutoDetect::Nvidia) => probe_nvidia(root),
        Some(AutoDetect::Nvml) => match probe_nvml(root) {
            Ok(v) => v,
            Err(e) => {
                out.notes.push(format!(
                    "AutoDetect=nvml: NVML unavailable ({e}); reading /proc/driver/nvidia instead"
                ));
                probe_nvidia(root)
            }
        },
        Some(a @ (AutoDetect::Rsmi | AutoDetect::OneApi | AutoDetect::Nrt)) => {
            out.notes.push(format!(
                "AutoDetect={a:?} is not supported; using gres.conf only"
            ));
            Vec::new()
        }
        Some(AutoDetect::Off) | None => Vec::new(),
    };
    let mut index_of: Vec<(String, u32)> = Vec::new();
    let mut next_index = |name: &str| -> u32 {
        match index_of.iter_mut().find(|(n, _)| n == name) {
            Some(slot) => {
                slot.1 += 1;
                slot.1 - 1
            }
            None => {
                index_of.push((name.to_string(), 1));
                0
            }
        }
    };
    let mut used = vec![false; detected.len()];
    for l in &conf.lines {
        let cpus = l.cores.as_ref().map(|c| topo.cpus_of_cores(c));
        if l.files.is_empty() {
            out.add(&l.name, l.gtype.as_deref(), l.units());
            continue;
        }
        for f in &l.files {
            let found = detected.iter().position(|g| g.device_file() == *f);
            if let Some(i) = found {
                used[i] = true;
            }
            let gtype = l
                .gtype
                .clone()
                .or_else(|| found.map(|i| detected[i].type_name()));
            let dev_cpus = cpus
                .clone()
                .or_else(|| found.and_then(|i| detected[i].local_cpus.clone()));
            out.devices.push(GresDevice {
                name: l.name.clone(),
                gtype: gtype.clone(),
                index: next_index(&l.name),
                file: f.clone(),
                dev: device_numbers(root, f),
                cpus: dev_cpus,
            });
            out.add(&l.name, gtype.as_deref(), 1);
        }
    }
    for (g, _) in detected.iter().zip(&used).filter(|(_, u)| !**u) {
        let t = g.type_name();
        out.devices.push(GresDevice {
            name: "gpu".into(),
            gtype: Some(t.clone()),
            index: next_index("gpu"),
            file: g.device_file(),
            dev: device_numbers(root, &g.device_file()),
            cpus: g.local_cpus.clone(),
        });
        out.add("gpu", Some(&t), 1);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::hw::tests::{fake_sysfs, put};

    const GRES: &str = "\
# Global default
AutoDetect=off
NodeName=n[1-2] AutoDetect=nvidia
NodeName=n[1-2] Name=gpu Type=a100 File=/dev/nvidia[0-1] Cores=0-1
NodeName=n3 Name=gpu Type=v100 File=/dev/nvidia0
Name=shard Count=8
Name=bandwidth Count=4G Flags=CountOnly Bogus=1
";

    #[test]
    fn lines_are_scoped_by_node_name() {
        let p = Path::new("/etc/slurm/gres.conf");
        let n1 = GresConf::parse(GRES, p, "n1").unwrap();
        assert_eq!(n1.autodetect, Some(AutoDetect::Nvidia));
        assert_eq!(n1.lines.len(), 3);
        assert_eq!(n1.lines[0].gtype.as_deref(), Some("a100"));
        assert_eq!(n1.lines[0].files, vec!["/dev/nvidia0", "/dev/nvidia1"]);
        assert_eq!(n1.lines[0].cores, Some(vec![0, 1]));
        assert_eq!(n1.lines[1].units(), 8);
        assert_eq!(n1.lines[2].count, Some(4 << 30));
        assert_eq!(n1.lines[2].flags, vec!["CountOnly"]);
        assert_eq!(
            n1.warnings,
            vec!["/etc/slurm/gres.conf:7: unknown parameter Bogus ignored"]
        );
        let n3 = GresConf::parse(GRES, p, "n3").unwrap();
        assert_eq!(n3.autodetect, Some(AutoDetect::Off));
        assert_eq!(n3.lines[0].gtype.as_deref(), Some("v100"));
        let n9 = GresConf::parse(GRES, p, "n9").unwrap();
        assert_eq!(n9.lines.len(), 2);
    }

    #[test]
    fn broken_gres_conf_names_the_line() {
        let p = Path::new("/g.conf");
        let e = GresConf::parse("Name=gpu\nAutoDetect=cuda\n", p, "n1").unwrap_err();
        assert_eq!(e.line, 2);
        assert!(e.message.contains("invalid AutoDetect"), "{e}");
        let e = GresConf::parse("Name=gpu Count=lots\n", p, "n1").unwrap_err();
        assert_eq!(e.to_string(), "/g.conf:1: invalid Count `lots'");
        let e = GresConf::parse("Type=a100\n", p, "n1").unwrap_err();
        assert!(e.message.contains("Name="), "{e}");
        let e = GresConf::parse("Name=gpu Cores=3-1\n", p, "n1").unwrap_err();
        assert!(e.message.contains("Cores"), "{e}");
        let d = tempfile::tempdir().unwrap();
        let none = GresConf::load(d.path(), "n1").unwrap();
        assert!(none.lines.is_empty() && none.autodetect.is_none());
    }

    fn fake_gpu(root: &Path, bus: &str, minor: u32, model: &str, cpus: &str) {
        put(
            root,
            &format!("proc/driver/nvidia/gpus/{bus}/information"),
            &format!(
                "Model: \t\t {model}\nIRQ:   \t\t 160\nGPU UUID: \t GPU-0b1c\nVideo BIOS: \t 92.00.19.00.01\nBus Type: \t PCIe\nDMA Size: \t 47 bits\nDMA Mask: \t 0x7fffffffffff\nBus Location: \t {bus}\nDevice Minor: \t {minor}\nGPU Excluded:\t No\n"
            ),
        );
        put(
            root,
            &format!("sys/bus/pci/drivers/nvidia/{bus}/local_cpulist"),
            &format!("{cpus}\n"),
        );
    }

    #[test]
    fn nvidia_probe_reads_the_driver_files() {
        let d = tempfile::tempdir().unwrap();
        fake_gpu(
            d.path(),
            "0000:87:00.0",
            1,
            "NVIDIA A100-SXM4-40GB",
            "2-3,6-7",
        );
        fake_gpu(
            d.path(),
            "0000:07:00.0",
            0,
            "NVIDIA A100-SXM4-40GB",
            "0-1,4-5",
        );
        put(
            d.path(),
            "proc/driver/nvidia/gpus/0000:99:00.0/information",
            "garbage\n",
        );
        let gpus = probe_nvidia(d.path());
        assert_eq!(gpus.len(), 2);
        assert_eq!(gpus[0].bus, "0000:07:00.0");
        assert_eq!(gpus[0].minor, 0);
        assert_eq!(gpus[0].local_cpus, Some(vec![0, 1, 4, 5]));
        assert_eq!(gpus[1].device_file(), "/dev/nvidia1");
        assert_eq!(gpus[0].type_name(), "nvidia_a100-sxm4-40gb");
        assert!(probe_nvidia(Path::new("/nonexistent")).is_empty());
    }

    #[test]
    fn detected_gpus_merge_with_gres_conf() {
        let d = tempfile::tempdir().unwrap();
        fake_sysfs(d.path());
        let topo = crate::hw::sysfs_topology(d.path()).unwrap();
        fake_gpu(
            d.path(),
            "0000:07:00.0",
            0,
            "NVIDIA A100-SXM4-40GB",
            "0-1,4-5",
        );
        fake_gpu(
            d.path(),
            "0000:87:00.0",
            1,
            "NVIDIA A100-SXM4-40GB",
            "2-3,6-7",
        );
        fake_gpu(
            d.path(),
            "0000:88:00.0",
            2,
            "Tesla V100-SXM2-16GB",
            "2-3,6-7",
        );
        let text = "AutoDetect=nvidia\nName=gpu Type=a100 File=/dev/nvidia[0-1] Cores=0\n";
        let conf = GresConf::parse(text, Path::new("/g"), "n1").unwrap();
        let g = node_gres(&conf, d.path(), &topo);
        assert_eq!(g.to_gres_string(), "gpu:a100:2,gpu:tesla_v100-sxm2-16gb:1");
        assert_eq!(g.devices.len(), 3);
        assert_eq!(g.devices[0].dev, Some((195, 0)));
        assert_eq!(g.devices[0].cpus, Some(vec![0, 4]));
        assert_eq!(g.devices[2].index, 2);
        assert_eq!(g.devices[2].cpus, Some(vec![2, 3, 6, 7]));
        // AutoDetect=nvml on a node without NVIDIA's library: the driver's
        // files stand in, and the node says so.
        let conf = GresConf::parse(
            &text.replace("AutoDetect=nvidia", "AutoDetect=nvml"),
            Path::new("/g"),
            "n1",
        )
        .unwrap();
        let nvml_here = probe_nvml(d.path()).is_ok();
        let g = node_gres(&conf, d.path(), &topo);
        if !nvml_here {
            assert_eq!(g.to_gres_string(), "gpu:a100:2,gpu:tesla_v100-sxm2-16gb:1");
            assert!(
                g.notes.iter().any(|n| n.contains("NVML unavailable")),
                "{:?}",
                g.notes
            );
        }
        // Without auto-detection only gres.conf counts.
        let conf = GresConf::parse(
            "Name=gpu File=/dev/nvidia[0-3]\nName=mps Count=200\n",
            Path::new("/g"),
            "n1",
        )
        .unwrap();
        let g = node_gres(&conf, d.path(), &topo);
        assert_eq!(g.to_gres_string(), "gpu:4,mps:200");
        assert!(node_gres(&GresConf::default(), d.path(), &topo)
            .to_gres_string()
            .is_empty());
    }
}
