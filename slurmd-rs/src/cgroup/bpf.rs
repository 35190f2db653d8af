//! Device confinement on cgroup v2 (ConstrainDevices=yes). v2 has no
//! `devices.deny` file: the kernel asks a `BPF_PROG_TYPE_CGROUP_DEVICE`
//! program attached to the cgroup about every device a process opens
//! (`mknod` too). The program here is a deny list of character devices (the
//! node's GPUs that were not given to the job), built from raw eBPF
//! instructions and loaded with the `bpf` system call; everything else is
//! allowed, as with v1's `devices.deny`. It is attached with
//! `BPF_F_ALLOW_MULTI`, so a program a parent cgroup holds (systemd's
//! DevicePolicy) still applies, and it goes away with the cgroup.

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::path::Path;

/// One eBPF instruction, as `struct bpf_insn`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Insn {
    code: u8,
    regs: u8,
    off: i16,
    imm: i32,
}

const fn insn(code: u8, dst: u8, src: u8, off: i16, imm: i32) -> Insn {
    Insn {
        code,
        regs: (src << 4) | dst,
        off,
        imm,
    }
}

// Opcodes (linux/bpf.h, linux/bpf_common.h).
const LDX_MEM_W: u8 = 0x61; // BPF_LDX | BPF_MEM | BPF_W
const ALU64_AND_K: u8 = 0x57; // BPF_ALU64 | BPF_AND | BPF_K
const JMP_JNE_K: u8 = 0x55; // BPF_JMP | BPF_JNE | BPF_K
const ALU64_MOV_K: u8 = 0xb7; // BPF_ALU64 | BPF_MOV | BPF_K
const EXIT: u8 = 0x95; // BPF_JMP | BPF_EXIT
/// `BPF_DEVCG_DEV_CHAR`.
const DEV_CHAR: i32 = 2;

/// A program that refuses every access to the character devices `deny`
/// (major, minor) and allows any other. The context
/// (`struct bpf_cgroup_dev_ctx`) holds `access_type` (type in the low 16
/// bits), `major` and `minor`, as 32-bit words.
pub fn deny_program(deny: &[(u32, u32)]) -> Vec<Insn> {
    let mut p = vec![
        insn(LDX_MEM_W, 2, 1, 0, 0),        // r2 = ctx->access_type
        insn(ALU64_AND_K, 2, 0, 0, 0xffff), // r2 &= 0xffff (the type)
        insn(LDX_MEM_W, 3, 1, 4, 0),        // r3 = ctx->major
        insn(LDX_MEM_W, 4, 1, 8, 0),        // r4 = ctx->minor
    ];
    for &(major, minor) in deny {
        // Not this device: skip to the next rule (4 instructions on).
        p.push(insn(JMP_JNE_K, 2, 0, 4, DEV_CHAR));
        p.push(insn(JMP_JNE_K, 3, 0, 3, major as i32));
        p.push(insn(JMP_JNE_K, 4, 0, 2, minor as i32));
        p.push(insn(ALU64_MOV_K, 0, 0, 0, 0)); // refuse
        p.push(insn(EXIT, 0, 0, 0, 0));
    }
    p.push(insn(ALU64_MOV_K, 0, 0, 0, 1)); // allow
    p.push(insn(EXIT, 0, 0, 0, 0));
    p
}

fn encode(p: &[Insn]) -> Vec<u8> {
    let mut b = Vec::with_capacity(p.len() * 8);
    for i in p {
        b.push(i.code);
        b.push(i.regs);
        b.extend_from_slice(&i.off.to_le_bytes());
        b.extend_from_slice(&i.imm.to_le_bytes());
    }
    b
}

const BPF_PROG_LOAD: libc::c_long = 5;
const BPF_PROG_ATTACH: libc::c_long = 8;
const BPF_PROG_TYPE_CGROUP_DEVICE: u32 = 15;
const BPF_CGROUP_DEVICE: u32 = 6;
const BPF_F_ALLOW_MULTI: u32 = 2;

/// `union bpf_attr` is 128 bytes at most for what is used here.
#[repr(C, align(8))]
struct Attr([u8; 128]);

fn bpf(cmd: libc::c_long, attr: &mut Attr) -> io::Result<libc::c_long> {
    // SAFETY: attr is a valid, large enough bpf_attr for `cmd`; the
    // pointers inside it point to buffers that outlive the call.
    let r = unsafe {
        libc::syscall(
            libc::SYS_bpf,
            cmd,
            attr as *mut Attr,
            std::mem::size_of::<Attr>(),
        )
    };
    if r < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(r)
    }
}

/// Load `p` as a cgroup device program. The first try asks for no
/// verifier log (a log that does not fit its buffer fails the load); only
/// a refused program is loaded again with a log, for the error message.
pub fn load(p: &[Insn]) -> io::Result<OwnedFd> {
    match load_with_log(p, 0) {
        Ok(fd) => Ok(fd),
        Err(e) => match load_with_log(p, 1 << 20) {
            Ok(fd) => Ok(fd),
            Err(logged) if logged.to_string().len() > e.to_string().len() => Err(logged),
            Err(_) => Err(e),
        },
    }
}

fn load_with_log(p: &[Insn], log_size: usize) -> io::Result<OwnedFd> {
    let code = encode(p);
    let license = b"Apache-2.0\0";
    let mut log = vec![0u8; log_size];
    let mut a = Attr([0; 128]);
    let put32 = |a: &mut Attr, at: usize, v: u32| a.0[at..at + 4].copy_from_slice(&v.to_le_bytes());
    let put64 = |a: &mut Attr, at: usize, v: u64| a.0[at..at + 8].copy_from_slice(&v.to_le_bytes());
    // prog_type, insn_cnt, insns, license, log_level, log_size, log_buf.
    put32(&mut a, 0, BPF_PROG_TYPE_CGROUP_DEVICE);
    put32(&mut a, 4, p.len() as u32);
    put64(&mut a, 8, code.as_ptr() as u64);
    put64(&mut a, 16, license.as_ptr() as u64);
    if log_size > 0 {
        put32(&mut a, 24, 1);
        put32(&mut a, 28, log.len() as u32);
        put64(&mut a, 32, log.as_mut_ptr() as u64);
    }
    match bpf(BPF_PROG_LOAD, &mut a) {
        // SAFETY: the kernel returned a new file descriptor we now own.
        Ok(fd) => Ok(unsafe { OwnedFd::from_raw_fd(fd as i32) }),
        Err(e) => {
            let msg = String::from_utf8_lossy(&log);
            let msg = msg.trim_end_matches('\0').trim();
            Err(if msg.is_empty() {
                e
            } else {
                io::Error::new(e.kind(), format!("{e}: {msg}"))
            })
        }
    }
}

/// Attach a loaded device program to the cgroup directory `dir`.
pub fn attach(prog: &OwnedFd, dir: &Path) -> io::Result<()> {
    let cg = std::fs::File::open(dir)?;
    let mut a = Attr([0; 128]);
    // target_fd, attach_bpf_fd, attach_type, attach_flags.
    a.0[0..4].copy_from_slice(&(cg.as_raw_fd() as u32).to_le_bytes());
    a.0[4..8].copy_from_slice(&(prog.as_raw_fd() as u32).to_le_bytes());
    a.0[8..12].copy_from_slice(&BPF_CGROUP_DEVICE.to_le_bytes());
    a.0[12..16].copy_from_slice(&BPF_F_ALLOW_MULTI.to_le_bytes());
    bpf(BPF_PROG_ATTACH, &mut a).map(|_| ())
}

/// Refuse the character devices `deny` to every process in `dir`.
pub fn deny_devices(dir: &Path, deny: &[(u32, u32)]) -> io::Result<()> {
    let prog = load(&deny_program(deny))?;
    attach(&prog, dir)
}

/// Whether this kernel lets us load device programs (a trivial one).
pub fn available() -> io::Result<()> {
    load(&deny_program(&[])).map(drop)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn program_shape() {
        let p = deny_program(&[(195, 0), (195, 2)]);
        assert_eq!(p.len(), 4 + 2 * 5 + 2);
        // Each rule's jumps land on the next rule.
        assert_eq!(p[4], insn(JMP_JNE_K, 2, 0, 4, 2));
        assert_eq!(p[5], insn(JMP_JNE_K, 3, 0, 3, 195));
        assert_eq!(p[6], insn(JMP_JNE_K, 4, 0, 2, 0));
        assert_eq!(p[11], insn(JMP_JNE_K, 4, 0, 2, 2));
        assert_eq!(*p.last().unwrap(), insn(EXIT, 0, 0, 0, 0));
        assert_eq!(encode(&p[..1]), vec![0x61, 0x12, 0, 0, 0, 0, 0, 0]);
    }

    /// On a real cgroup v2 file system (mounted here for the test; this
    /// machine's hierarchies are v1): a process in the cgroup cannot open
    /// a denied device and can open the others.
    #[test]
    fn denied_devices_cannot_be_opened() {
        let d = tempfile::tempdir().unwrap();
        let mnt = d.path().join("cg2");
        std::fs::create_dir(&mnt).unwrap();
        let mounted = std::process::Command::new("mount")
            .args(["-t", "cgroup2", "none"])
            .arg(&mnt)
            .status()
            .unwrap()
            .success();
        let on_v2 = Path::new("/sys/fs/cgroup/cgroup.controllers").exists();
        let root = if mounted {
            mnt.clone()
        } else {
            assert!(on_v2, "neither a cgroup2 mount nor a v2 host");
            std::path::PathBuf::from("/sys/fs/cgroup")
        };
        let cg = root.join(format!("bpf-test-{}", std::process::id()));
        std::fs::create_dir(&cg).unwrap();
        // /dev/null is 1:3; /dev/zero 1:5 stays allowed. Many rules, as
        // on a node with many GPUs (a verifier log would not fit a small
        // buffer).
        let mut deny: Vec<(u32, u32)> = (0..64).map(|m| (195, m)).collect();
        deny.push((1, 3));
        deny_devices(&cg, &deny).unwrap();
        let procs = std::ffi::CString::new(cg.join("cgroup.procs").to_str().unwrap()).unwrap();
        let run = |what: &str| {
            use std::os::unix::process::CommandExt;
            let procs = procs.clone();
            let mut c = std::process::Command::new("/bin/sh");
            c.arg("-c").arg(what);
            // SAFETY: only open/write/close between fork and exec.
            unsafe {
                c.pre_exec(move || {
                    let fd = libc::open(procs.as_ptr(), libc::O_WRONLY);
                    if fd < 0 || libc::write(fd, b"0".as_ptr().cast(), 1) != 1 {
                        return Err(io::Error::last_os_error());
                    }
                    libc::close(fd);
                    Ok(())
                });
            }
            c.status().unwrap().success()
        };
        let null = run("exec 3</dev/null");
        let zero = run("exec 3</dev/zero");
        let _ = std::fs::remove_dir(&cg);
        if mounted {
            let _ = std::process::Command::new("umount").arg(&mnt).status();
        }
        assert!(!null, "a denied device was opened");
        assert!(zero, "an allowed device was refused");
    }
}
