//! `cgroup.conf` (beside slurm.conf): which cgroup interface to use and what
//! `task/cgroup` constrains, with the memory arithmetic of its RAM and swap
//! settings.

use crate::auxconf::{self, parse_bool, AuxConfError};
use std::path::{Path, PathBuf};

/// `CgroupPlugin=`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PluginChoice {
    Autodetect,
    V1,
    V2,
    Disabled,
}

/// The settings of `cgroup.conf` (defaults when the file is absent).
#[derive(Debug, Clone, PartialEq)]
pub struct CgroupConf {
    pub path: PathBuf,
    pub plugin: PluginChoice,
    pub mountpoint: PathBuf,
    pub constrain_cores: bool,
    pub constrain_devices: bool,
    pub constrain_ram_space: bool,
    /// Percent of the allocated memory.
    pub allowed_ram_space: f64,
    /// Percent of the node's RealMemory, an upper bound of the RAM limit.
    pub max_ram_percent: f64,
    /// MiB, a lower bound of the RAM limit.
    pub min_ram_space: u64,
    pub constrain_swap_space: bool,
    /// Percent of the allocated memory, on top of the RAM limit.
    pub allowed_swap_space: f64,
    /// Percent of the node's RealMemory, an upper bound of RAM + swap.
    pub max_swap_percent: f64,
    pub memory_swappiness: Option<u64>,
    /// Signals other than SIGKILL reach every process of the job, not only
    /// the batch script's process group.
    pub signal_children_processes: bool,
    /// Parameters ignored, with file:line.
    pub warnings: Vec<String>,
}

impl Default for CgroupConf {
    fn default() -> Self {
        CgroupConf {
            path: PathBuf::new(),
            plugin: PluginChoice::Autodetect,
            mountpoint: PathBuf::from("/sys/fs/cgroup"),
            constrain_cores: false,
            constrain_devices: false,
            constrain_ram_space: false,
            allowed_ram_space: 100.0,
            max_ram_percent: 100.0,
            min_ram_space: 30,
            constrain_swap_space: false,
            allowed_swap_space: 0.0,
            max_swap_percent: 100.0,
            memory_swappiness: None,
            signal_children_processes: false,
            warnings: Vec::new(),
        }
    }
}

/// Parameters of earlier Slurm versions, accepted with a warning.
const OBSOLETE: &[&str] = &[
    "CgroupAutomount",
    "CgroupReleaseAgentDir",
    "TaskAffinity",
    "ConstrainKmemSpace",
    "AllowedKmemSpace",
    "MaxKmemPercent",
    "MinKmemSpace",
    "AllowedDevicesFile",
];

/// Parameters about systemd, which this daemon never asks for a scope (it
/// behaves as with `IgnoreSystemd=yes`), or about controllers it enables
/// itself: accepted.
const ACCEPTED: &[&str] = &[
    "IgnoreSystemd",
    "IgnoreSystemdOnFailure",
    "SystemdTimeout",
    "EnableControllers",
];

const MIB: f64 = 1024.0 * 1024.0;

impl CgroupConf {
    pub fn parse(text: &str, path: &Path) -> Result<CgroupConf, AuxConfError> {
        let mut c = CgroupConf {
            path: path.to_path_buf(),
            ..CgroupConf::default()
        };
        for l in auxconf::lex(text, path)? {
            for (key, value) in &l.words {
                let err = |what: &str| AuxConfError {
                    file: path.to_path_buf(),
                    line: l.line,
                    message: format!("invalid {key} `{value}': {what}"),
                };
                let boolean = || parse_bool(value).ok_or_else(|| err("expected yes or no"));
                let percent = || {
                    value
                        .trim()
                        .trim_end_matches('%')
                        .parse::<f64>()
                        .ok()
                        .filter(|p| p.is_finite() && *p >= 0.0)
                        .ok_or_else(|| err("expected a percentage"))
                };
                let k = key.to_ascii_lowercase();
                match k.as_str() {
                    "cgroupplugin" => {
                        c.plugin = match value.to_ascii_lowercase().as_str() {
                            "autodetect" => PluginChoice::Autodetect,
                            "cgroup/v1" => PluginChoice::V1,
                            "cgroup/v2" => PluginChoice::V2,
                            "disabled" => PluginChoice::Disabled,
                            _ => {
                                return Err(err(
                                    "expected cgroup/v1, cgroup/v2, autodetect or disabled",
                                ))
                            }
                        }
                    }
                    "cgroupmountpoint" => {
                        if !value.starts_with('/') {
                            return Err(err("expected an absolute path"));
                        }
                        c.mountpoint = PathBuf::from(value);
                    }
                    "constraincores" => c.constrain_cores = boolean()?,
                    "constraindevices" => c.constrain_devices = boolean()?,
                    "constrainramspace" => c.constrain_ram_space = boolean()?,
                    "constrainswapspace" => c.constrain_swap_space = boolean()?,
                    "allowedramspace" => c.allowed_ram_space = percent()?,
                    "allowedswapspace" => c.allowed_swap_space = percent()?,
                    "maxrampercent" => c.max_ram_percent = percent()?,
                    "maxswappercent" => c.max_swap_percent = percent()?,
                    "minramspace" => {
                        c.min_ram_space = value
                            .trim()
                            .parse()
                            .map_err(|_| err("expected a number of megabytes"))?
                    }
                    "memoryswappiness" => {
                        let v: u64 = value
                            .trim()
                            .parse()
                            .ok()
                            .filter(|v| *v <= 100)
                            .ok_or_else(|| err("expected 0 to 100"))?;
                        c.memory_swappiness = Some(v);
                    }
                    "signalchildrenprocesses" => c.signal_children_processes = boolean()?,
                    _ if OBSOLETE.iter().any(|o| o.eq_ignore_ascii_case(key)) => {
                        c.warnings.push(format!(
                            "{}:{}: {key} is obsolete and ignored",
                            path.display(),
                            l.line
                        ))
                    }
                    _ if ACCEPTED.iter().any(|o| o.eq_ignore_ascii_case(key)) => {}
                    _ => c.warnings.push(format!(
                        "{}:{}: {key} is not supported and ignored",
                        path.display(),
                        l.line
                    )),
                }
            }
        }
        Ok(c)
    }

    /// `cgroup.conf` in `conf_dir`; defaults when there is none.
    pub fn load(conf_dir: &Path) -> Result<CgroupConf, AuxConfError> {
        let path = conf_dir.join("cgroup.conf");
        match auxconf::read_optional(&path)? {
            Some(text) => CgroupConf::parse(&text, &path),
            None => Ok(CgroupConf {
                path,
                ..CgroupConf::default()
            }),
        }
    }

    /// The RAM limit (bytes) of a job given `alloc_mib` (0 = no memory in
    /// the allocation: the node's) on a node of `node_mib`; `None` when RAM
    /// is not constrained.
    pub fn ram_limit(&self, alloc_mib: u64, node_mib: u64) -> Option<u64> {
        if !self.constrain_ram_space {
            return None;
        }
        Some(self.ram_bytes(alloc_mib, node_mib))
    }

    fn ram_bytes(&self, alloc_mib: u64, node_mib: u64) -> u64 {
        let base = if alloc_mib == 0 { node_mib } else { alloc_mib } as f64;
        let max = node_mib as f64 * self.max_ram_percent / 100.0;
        let mib = (base * self.allowed_ram_space / 100.0)
            .min(max)
            .max(self.min_ram_space as f64);
        (mib * MIB) as u64
    }

    /// The RAM + swap limit (bytes), `None` when swap is not constrained.
    pub fn ram_swap_limit(&self, alloc_mib: u64, node_mib: u64) -> Option<u64> {
        if !self.constrain_swap_space {
            return None;
        }
        let base = if alloc_mib == 0 { node_mib } else { alloc_mib } as f64;
        let ram = self.ram_bytes(alloc_mib, node_mib) as f64;
        let max = node_mib as f64 * self.max_swap_percent / 100.0 * MIB;
        let total = (ram + base * self.allowed_swap_space / 100.0 * MIB)
            .min(max.max(ram))
            .max(self.min_ram_space as f64 * MIB);
        Some(total as u64)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_every_setting_and_warns_about_the_rest() {
        let text = "\
CgroupPlugin=cgroup/v1
CgroupMountpoint=/tmp/cg
ConstrainCores=yes
ConstrainRAMSpace=yes
AllowedRAMSpace=50
ConstrainSwapSpace=yes
AllowedSwapSpace=10%
MaxRAMPercent=90
MinRAMSpace=64
MemorySwappiness=0
ConstrainDevices=yes
SignalChildrenProcesses=yes
IgnoreSystemd=yes
CgroupAutomount=yes
Whatever=1
";
        let c = CgroupConf::parse(text, Path::new("/etc/slurm/cgroup.conf")).unwrap();
        assert_eq!(c.plugin, PluginChoice::V1);
        assert_eq!(c.mountpoint, PathBuf::from("/tmp/cg"));
        assert!(c.constrain_cores && c.constrain_ram_space && c.constrain_swap_space);
        assert!(c.constrain_devices && c.signal_children_processes);
        assert_eq!(c.allowed_ram_space, 50.0);
        assert_eq!(c.allowed_swap_space, 10.0);
        assert_eq!(c.max_ram_percent, 90.0);
        assert_eq!(c.min_ram_space, 64);
        assert_eq!(c.memory_swappiness, Some(0));
        assert_eq!(
            c.warnings,
            vec![
                "/etc/slurm/cgroup.conf:14: CgroupAutomount is obsolete and ignored",
                "/etc/slurm/cgroup.conf:15: Whatever is not supported and ignored",
            ]
        );
        let d = CgroupConf::parse("", Path::new("/c")).unwrap();
        assert_eq!(d.plugin, PluginChoice::Autodetect);
        assert!(!d.constrain_ram_space && !d.constrain_cores);
        assert_eq!(d.mountpoint, PathBuf::from("/sys/fs/cgroup"));
    }

    #[test]
    fn bad_values_name_the_line() {
        let p = Path::new("/etc/slurm/cgroup.conf");
        let e = CgroupConf::parse("ConstrainCores=yes\nConstrainRAMSpace=maybe\n", p).unwrap_err();
        assert_eq!(
            e.to_string(),
            "/etc/slurm/cgroup.conf:2: invalid ConstrainRAMSpace `maybe': expected yes or no"
        );
        let e = CgroupConf::parse("CgroupPlugin=cgroup/v3\n", p).unwrap_err();
        assert!(e.message.contains("cgroup/v2"), "{e}");
        let e = CgroupConf::parse("AllowedRAMSpace=-5\n", p).unwrap_err();
        assert!(e.message.contains("percentage"), "{e}");
        let e = CgroupConf::parse("CgroupMountpoint=relative\n", p).unwrap_err();
        assert!(e.message.contains("absolute"), "{e}");
        let d = tempfile::tempdir().unwrap();
        assert_eq!(
            CgroupConf::load(d.path()).unwrap().plugin,
            PluginChoice::Autodetect
        );
        std::fs::write(d.path().join("cgroup.conf"), "ConstrainCores=yes\n").unwrap();
        assert!(CgroupConf::load(d.path()).unwrap().constrain_cores);
    }

    #[test]
    fn memory_limits() {
        const M: u64 = 1024 * 1024;
        let mut c = CgroupConf::default();
        assert_eq!(c.ram_limit(1000, 4000), None);
        c.constrain_ram_space = true;
        assert_eq!(c.ram_limit(1000, 4000), Some(1000 * M));
        // No memory in the allocation: the node's.
        assert_eq!(c.ram_limit(0, 4000), Some(4000 * M));
        c.allowed_ram_space = 50.0;
        assert_eq!(c.ram_limit(1000, 4000), Some(500 * M));
        // MinRAMSpace and MaxRAMPercent bound it.
        assert_eq!(c.ram_limit(10, 4000), Some(30 * M));
        c.allowed_ram_space = 200.0;
        c.max_ram_percent = 50.0;
        assert_eq!(c.ram_limit(3000, 4000), Some(2000 * M));
        // Swap: RAM plus AllowedSwapSpace of the allocation.
        let mut c = CgroupConf {
            constrain_ram_space: true,
            ..CgroupConf::default()
        };
        assert_eq!(c.ram_swap_limit(1000, 4000), None);
        c.constrain_swap_space = true;
        assert_eq!(c.ram_swap_limit(64, 4000), Some(64 * M));
        c.allowed_swap_space = 10.0;
        assert_eq!(c.ram_swap_limit(1000, 4000), Some(1100 * M));
        c.max_swap_percent = 26.0;
        assert_eq!(c.ram_swap_limit(1000, 4000), Some(1040 * M));
    }
}
