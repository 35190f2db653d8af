//! How this node is doing (load, free memory, boot time, processes), read
//! from the kernel; the hardware itself is detected in [`crate::hw`]. Every
//! reader returns a safe default when a file is missing or malformed.

use std::ffi::CStr;

/// Hardware as reported at registration.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Hardware {
    pub cpus: u32,
    pub boards: u32,
    pub sockets: u32,
    pub cores_per_socket: u32,
    pub threads_per_core: u32,
    /// MiB.
    pub real_memory: u64,
    /// MiB.
    pub tmp_disk: u64,
}

/// This machine's hardware (see [`crate::hw`]), without `TmpDisk`.
pub fn detect_hardware() -> Hardware {
    crate::hw::host().hardware(0)
}

pub fn online_cpus() -> u32 {
    // SAFETY: sysconf has no preconditions.
    let n = unsafe { libc::sysconf(libc::_SC_NPROCESSORS_ONLN) };
    if n < 1 {
        1
    } else {
        u32::try_from(n).unwrap_or(u32::MAX)
    }
}

fn read(path: &str) -> String {
    std::fs::read_to_string(path).unwrap_or_default()
}

/// A `/proc/meminfo` field (`MemTotal`, `MemAvailable`) in MiB.
pub fn meminfo_mib(meminfo: &str, field: &str) -> Option<u64> {
    meminfo.lines().find_map(|l| {
        let (k, v) = l.split_once(':')?;
        if k.trim() != field {
            return None;
        }
        let kib: u64 = v.split_whitespace().next()?.parse().ok()?;
        Some(kib / 1024)
    })
}

/// Free memory in MiB (`MemAvailable`).
pub fn free_mem() -> u64 {
    meminfo_mib(&read("/proc/meminfo"), "MemAvailable").unwrap_or(0)
}

/// `btime` from a `/proc/stat` text.
pub fn parse_btime(stat: &str) -> Option<i64> {
    stat.lines()
        .find_map(|l| l.strip_prefix("btime ")?.trim().parse().ok())
}

/// When the machine booted (Unix seconds; 0 when unknown).
pub fn boot_time() -> i64 {
    parse_btime(&read("/proc/stat")).unwrap_or(0)
}

/// One-minute load average from a `/proc/loadavg` text.
pub fn parse_loadavg(s: &str) -> Option<f64> {
    s.split_whitespace().next()?.parse().ok()
}

pub fn cpu_load() -> f64 {
    parse_loadavg(&read("/proc/loadavg")).unwrap_or(0.0)
}

/// `uname`: (OS string "sysname release version", machine).
pub fn uname() -> (String, String) {
    // SAFETY: utsname is plain data; uname fills it with NUL-terminated strings.
    let mut u: libc::utsname = unsafe { std::mem::zeroed() };
    if unsafe { libc::uname(&mut u) } != 0 {
        return ("Linux".into(), "unknown".into());
    }
    let field = |f: &[libc::c_char]| {
        if !f.contains(&0) {
            return String::new();
        }
        // SAFETY: the array holds a NUL (checked above).
        unsafe { CStr::from_ptr(f.as_ptr()) }
            .to_string_lossy()
            .into_owned()
    };
    let os = format!(
        "{} {} {}",
        field(&u.sysname),
        field(&u.release),
        field(&u.version)
    );
    (os, field(&u.machine))
}

/// Start time of a process in clock ticks since boot (field 22 of
/// `/proc/PID/stat`), and its state letter. `None` when it does not exist.
pub fn proc_start(pid: i32) -> Option<(u64, char)> {
    let s = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    parse_proc_stat(&s).map(|(_, state, start)| (start, state))
}

/// From a `/proc/PID/stat` line: (process group, state, start time).
pub fn parse_proc_stat(s: &str) -> Option<(i32, char, u64)> {
    // The command name is in parentheses and may hold anything; fields
    // resume after the last ')'.
    let rest = &s[s.rfind(')')? + 1..];
    let f: Vec<&str> = rest.split_whitespace().collect();
    // rest starts at field 3 (state); pgrp is field 5, starttime field 22.
    let state = f.first()?.chars().next()?;
    let pgrp = f.get(2)?.parse().ok()?;
    let start = f.get(19)?.parse().ok()?;
    Some((pgrp, state, start))
}

/// The real uid a process runs as (`Uid:` of `/proc/PID/status`).
pub fn proc_uid(pid: i32) -> Option<u32> {
    let s = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    s.lines()
        .find_map(|l| l.strip_prefix("Uid:"))?
        .split_whitespace()
        .next()?
        .parse()
        .ok()
}

/// When a process started, in seconds since the epoch (whole seconds:
/// the boot time is known to the second).
pub fn proc_start_secs(ticks: u64) -> i64 {
    // SAFETY: sysconf has no preconditions.
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) }.max(1) as u64;
    boot_time() + (ticks / hz) as i64
}

/// Live (non-zombie) processes whose process group is `pgid`.
pub fn group_members(pgid: i32) -> Vec<i32> {
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    let mut out = Vec::new();
    for e in dir.flatten() {
        let Some(pid) = e.file_name().to_str().and_then(|n| n.parse::<i32>().ok()) else {
            continue;
        };
        let Ok(s) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
            continue;
        };
        if let Some((pg, state, _)) = parse_proc_stat(&s) {
            if pg == pgid && state != 'Z' && state != 'X' {
                out.push(pid);
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn proc_parsers() {
        let mi = "MemTotal:       16303448 kB\nMemFree:  100 kB\nMemAvailable:   8000000 kB\n";
        assert_eq!(meminfo_mib(mi, "MemTotal"), Some(15921));
        assert_eq!(meminfo_mib(mi, "MemAvailable"), Some(7812));
        assert_eq!(meminfo_mib(mi, "Nope"), None);
        assert_eq!(
            parse_btime("cpu 1 2 3\nbtime 1700000000\n"),
            Some(1_700_000_000)
        );
        assert_eq!(parse_btime("garbage"), None);
        assert_eq!(parse_loadavg("0.52 0.58 0.59 1/467 12345\n"), Some(0.52));
        assert_eq!(parse_loadavg(""), None);
        let stat = "1234 (we ird) name) S 1 1234 1234 0 -1 4194560 100 0 0 0 1 2 0 0 20 0 1 0 98765 1000 10";
        assert_eq!(parse_proc_stat(stat), Some((1234, 'S', 98765)));
        assert_eq!(parse_proc_stat("nonsense"), None);
    }

    #[test]
    fn live_values_are_sane() {
        let hw = detect_hardware();
        assert!(hw.cpus >= 1);
        assert_eq!(
            hw.sockets * hw.cores_per_socket * hw.threads_per_core,
            hw.cpus
        );
        assert!(hw.real_memory > 0);
        assert!(boot_time() > 0);
        let (os, arch) = uname();
        assert!(os.starts_with("Linux "), "{os}");
        assert!(!arch.is_empty());
        let me = std::process::id() as i32;
        assert!(proc_start(me).is_some());
    }
}
