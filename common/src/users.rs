//! uid/gid ⇄ name look-ups through the C library (NSS), without panics.

use std::ffi::{CStr, CString};

/// A passwd entry, the parts we use.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct User {
    pub name: String,
    pub uid: u32,
    pub gid: u32,
    pub home: String,
    pub shell: String,
    /// The GECOS field (the user's full name first).
    pub gecos: String,
}

fn buf_len() -> usize {
    // SAFETY: sysconf has no preconditions.
    let n = unsafe { libc::sysconf(libc::_SC_GETPW_R_SIZE_MAX) };
    if n <= 0 {
        16384
    } else {
        n as usize
    }
}

unsafe fn user_from(pw: &libc::passwd) -> User {
    User {
        name: CStr::from_ptr(pw.pw_name).to_string_lossy().into_owned(),
        uid: pw.pw_uid,
        gid: pw.pw_gid,
        home: CStr::from_ptr(pw.pw_dir).to_string_lossy().into_owned(),
        shell: CStr::from_ptr(pw.pw_shell).to_string_lossy().into_owned(),
        gecos: if pw.pw_gecos.is_null() {
            String::new()
        } else {
            CStr::from_ptr(pw.pw_gecos).to_string_lossy().into_owned()
        },
    }
}

pub fn user_by_uid(uid: u32) -> Option<User> {
    let mut len = buf_len();
    loop {
        let mut buf = vec![0 as libc::c_char; len];
        let mut pw: libc::passwd = unsafe { std::mem::zeroed() };
        let mut out: *mut libc::passwd = std::ptr::null_mut();
        // SAFETY: all pointers are valid for the call; buf outlives the use of pw.
        let rc = unsafe { libc::getpwuid_r(uid, &mut pw, buf.as_mut_ptr(), len, &mut out) };
        if rc == libc::ERANGE && len < 1 << 20 {
            len *= 2;
            continue;
        }
        if rc != 0 || out.is_null() {
            return None;
        }
        // SAFETY: getpwuid_r succeeded, so pw's strings point into buf.
        return Some(unsafe { user_from(&pw) });
    }
}

pub fn user_by_name(name: &str) -> Option<User> {
    let cname = CString::new(name).ok()?;
    let mut len = buf_len();
    loop {
        let mut buf = vec![0 as libc::c_char; len];
        let mut pw: libc::passwd = unsafe { std::mem::zeroed() };
        let mut out: *mut libc::passwd = std::ptr::null_mut();
        // SAFETY: as above.
        let rc =
            unsafe { libc::getpwnam_r(cname.as_ptr(), &mut pw, buf.as_mut_ptr(), len, &mut out) };
        if rc == libc::ERANGE && len < 1 << 20 {
            len *= 2;
            continue;
        }
        if rc != 0 || out.is_null() {
            return None;
        }
        // SAFETY: as above.
        return Some(unsafe { user_from(&pw) });
    }
}

pub fn group_name(gid: u32) -> Option<String> {
    let mut len = buf_len();
    loop {
        let mut buf = vec![0 as libc::c_char; len];
        let mut gr: libc::group = unsafe { std::mem::zeroed() };
        let mut out: *mut libc::group = std::ptr::null_mut();
        // SAFETY: as above.
        let rc = unsafe { libc::getgrgid_r(gid, &mut gr, buf.as_mut_ptr(), len, &mut out) };
        if rc == libc::ERANGE && len < 1 << 20 {
            len *= 2;
            continue;
        }
        if rc != 0 || out.is_null() {
            return None;
        }
        // SAFETY: gr_name points into buf.
        return Some(
            unsafe { CStr::from_ptr(gr.gr_name) }
                .to_string_lossy()
                .into_owned(),
        );
    }
}

/// The gid of a group name.
pub fn gid_by_name(name: &str) -> Option<u32> {
    let cname = CString::new(name).ok()?;
    let mut len = buf_len();
    loop {
        let mut buf = vec![0 as libc::c_char; len];
        let mut gr: libc::group = unsafe { std::mem::zeroed() };
        let mut out: *mut libc::group = std::ptr::null_mut();
        // SAFETY: as in `group_name`.
        let rc =
            unsafe { libc::getgrnam_r(cname.as_ptr(), &mut gr, buf.as_mut_ptr(), len, &mut out) };
        if rc == libc::ERANGE && len < 1 << 20 {
            len *= 2;
            continue;
        }
        if rc != 0 || out.is_null() {
            return None;
        }
        return Some(gr.gr_gid);
    }
}

/// Slurm's `SLURM_AUTH_NOBODY` (99): the user or group id no job may be
/// given (`--uid`, `--gid`).
pub fn is_nobody(id: u32) -> bool {
    id == 99
}

/// A user named or numbered (`alice`, `1000`) that the system knows: its
/// uid (as Slurm's `uid_from_string`).
pub fn uid_from_string(s: &str) -> Option<u32> {
    match user_by_name(s) {
        Some(u) => Some(u.uid),
        None => s.parse().ok().filter(|&uid| user_by_uid(uid).is_some()),
    }
}

/// A group named or numbered that the system knows: its gid.
pub fn gid_from_string(s: &str) -> Option<u32> {
    match gid_by_name(s) {
        Some(g) => Some(g),
        None => s.parse().ok().filter(|&gid| group_name(gid).is_some()),
    }
}

/// Name for a uid, or the number itself when there is no passwd entry.
pub fn user_name_or_id(uid: u32) -> String {
    user_by_uid(uid)
        .map(|u| u.name)
        .unwrap_or_else(|| uid.to_string())
}

/// Name for a gid, or the number itself.
pub fn group_name_or_id(gid: u32) -> String {
    group_name(gid).unwrap_or_else(|| gid.to_string())
}

/// Supplementary groups of a user (including the primary gid).
pub fn group_list(name: &str, gid: u32) -> Vec<u32> {
    let Ok(cname) = CString::new(name) else {
        return vec![gid];
    };
    let mut n: libc::c_int = 64;
    loop {
        let mut groups = vec![0 as libc::gid_t; n as usize];
        // SAFETY: groups has room for n entries; n is updated on return.
        let rc = unsafe { libc::getgrouplist(cname.as_ptr(), gid, groups.as_mut_ptr(), &mut n) };
        if rc >= 0 {
            groups.truncate(n.max(0) as usize);
            return groups;
        }
        if n > 65536 {
            return vec![gid];
        }
        n = n.max(64) * 2;
    }
}

/// Resolve `name` or a numeric id to a uid.
pub fn parse_user(s: &str) -> Option<u32> {
    if let Ok(n) = s.parse::<u32>() {
        return Some(n);
    }
    user_by_name(s).map(|u| u.uid)
}

/// The local host's short name.
pub fn hostname() -> String {
    let mut buf = [0u8; 256];
    // SAFETY: buf is valid for its length.
    let rc = unsafe { libc::gethostname(buf.as_mut_ptr() as *mut libc::c_char, buf.len()) };
    if rc != 0 {
        return "localhost".into();
    }
    let end = buf.iter().position(|&b| b == 0).unwrap_or(buf.len());
    let full = String::from_utf8_lossy(&buf[..end]).into_owned();
    full.split('.').next().unwrap_or("localhost").to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn root_is_found_both_ways() {
        let r = user_by_uid(0).expect("root");
        assert_eq!(r.name, "root");
        assert_eq!(user_by_name("root").map(|u| u.uid), Some(0));
        assert_eq!(parse_user("0"), Some(0));
        assert_eq!(group_name_or_id(0), "root");
    }

    #[test]
    fn unknown_ids_fall_back_to_numbers() {
        assert_eq!(user_name_or_id(4_000_000_000), "4000000000");
        assert!(user_by_name("no-such-user-here").is_none());
        assert!(user_by_name("bad\0name").is_none());
    }
}
