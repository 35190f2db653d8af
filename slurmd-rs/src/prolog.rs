//! `Prolog` and `Epilog` from slurm.conf: run as root on the node before a
//! job's first process starts here and after its last one is gone, with
//! Slurm's environment (`SLURM_JOB_ID`, `SLURM_JOB_USER`, `SLURM_JOB_UID`,
//! `SLURM_SCRIPT_CONTEXT=prolog_slurmd`, ...). A prolog that fails (non-zero,
//! killed, or over `PrologEpilogTimeout`) stops the launch; the controller
//! then drains the node ("Prolog error") and requeues the job held. A failing
//! epilog drains the node ("Epilog error").

use std::path::Path;
use std::process::Stdio;
use std::time::Duration;

/// What a prolog or epilog is told about the job.
#[derive(Debug, Clone, Default)]
pub struct ScriptEnv {
    pub job_id: u32,
    pub uid: Option<u32>,
    pub gid: Option<u32>,
    pub user: Option<String>,
    pub partition: Option<String>,
    pub account: Option<String>,
    pub nodelist: Option<String>,
    pub node: String,
    pub cluster: String,
    pub conf_path: String,
}

/// Which script.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Prolog,
    Epilog,
}

impl Kind {
    fn context(self) -> &'static str {
        match self {
            Kind::Prolog => "prolog_slurmd",
            Kind::Epilog => "epilog_slurmd",
        }
    }
}

/// Run the script at `path` (a file, or every file a glob names, in order)
/// and wait at most `timeout` (zero: no limit). `Err` says what failed.
pub async fn run(kind: Kind, path: &str, env: &ScriptEnv, timeout: Duration) -> Result<(), String> {
    let mut scripts: Vec<String> = if path.contains(['*', '?', '[']) {
        let dir = Path::new(path).parent().unwrap_or(Path::new("/"));
        let pat = Path::new(path)
            .file_name()
            .map(|f| f.to_string_lossy().into_owned())
            .unwrap_or_default();
        let mut v: Vec<String> = std::fs::read_dir(dir)
            .map_err(|e| format!("{}: {e}", dir.display()))?
            .flatten()
            .filter(|e| glob_match(&pat, &e.file_name().to_string_lossy()))
            .map(|e| e.path().display().to_string())
            .collect();
        v.sort();
        v
    } else {
        vec![path.to_string()]
    };
    scripts.retain(|s| !s.is_empty());
    for s in scripts {
        run_one(kind, &s, env, timeout).await?;
    }
    Ok(())
}

async fn run_one(kind: Kind, path: &str, env: &ScriptEnv, timeout: Duration) -> Result<(), String> {
    let mut cmd = tokio::process::Command::new(path);
    cmd.env_clear()
        .env(
            "PATH",
            "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
        )
        .env("SLURM_SCRIPT_CONTEXT", kind.context())
        .env("SLURM_JOB_ID", env.job_id.to_string())
        .env("SLURM_JOBID", env.job_id.to_string())
        .env("SLURMD_NODENAME", &env.node)
        .env("SLURM_CLUSTER_NAME", &env.cluster)
        .env("SLURM_CONF", &env.conf_path)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .kill_on_drop(true);
    let opt = [
        ("SLURM_JOB_UID", env.uid.map(|v| v.to_string())),
        ("SLURM_UID", env.uid.map(|v| v.to_string())),
        ("SLURM_JOB_GID", env.gid.map(|v| v.to_string())),
        ("SLURM_JOB_USER", env.user.clone()),
        ("SLURM_JOB_PARTITION", env.partition.clone()),
        ("SLURM_JOB_ACCOUNT", env.account.clone()),
        ("SLURM_JOB_NODELIST", env.nodelist.clone()),
    ];
    for (k, v) in opt {
        if let Some(v) = v {
            cmd.env(k, v);
        }
    }
    let name = match kind {
        Kind::Prolog => "prolog",
        Kind::Epilog => "epilog",
    };
    let mut child = cmd.spawn().map_err(|e| format!("{name} {path}: {e}"))?;
    let status = if timeout.is_zero() {
        child.wait().await
    } else {
        match tokio::time::timeout(timeout, child.wait()).await {
            Ok(s) => s,
            Err(_) => {
                let _ = child.kill().await;
                return Err(format!("{name} {path} timed out after {timeout:?}"));
            }
        }
    }
    .map_err(|e| format!("{name} {path}: {e}"))?;
    if status.success() {
        Ok(())
    } else {
        Err(format!("{name} {path} failed: {status}"))
    }
}

/// `*`, `?` and `[...]` against one file name.
fn glob_match(pat: &str, name: &str) -> bool {
    fn go(p: &[char], n: &[char]) -> bool {
        match p.first() {
            None => n.is_empty(),
            Some('*') => (0..=n.len()).any(|i| go(&p[1..], &n[i..])),
            Some('?') => !n.is_empty() && go(&p[1..], &n[1..]),
            Some('[') => {
                let Some(end) = p.iter().position(|&c| c == ']') else {
                    return false;
                };
                let set = &p[1..end];
                !n.is_empty() && set.contains(&n[0]) && go(&p[end + 1..], &n[1..])
            }
            Some(&c) => n.first() == Some(&c) && go(&p[1..], &n[1..]),
        }
    }
    let p: Vec<char> = pat.chars().collect();
    let n: Vec<char> = name.chars().collect();
    go(&p, &n)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn scripts_see_the_job_and_failures_are_reported() {
        let d = tempfile::tempdir().unwrap();
        let out = d.path().join("seen");
        let ok = d.path().join("10-ok.sh");
        std::fs::write(
            &ok,
            format!(
                "#!/bin/sh\necho \"$SLURM_SCRIPT_CONTEXT $SLURM_JOB_ID $SLURM_JOB_USER $SLURMD_NODENAME\" >> {}\n",
                out.display()
            ),
        )
        .unwrap();
        let bad = d.path().join("20-bad.sh");
        std::fs::write(&bad, "#!/bin/sh\nexit 3\n").unwrap();
        use std::os::unix::fs::PermissionsExt;
        for p in [&ok, &bad] {
            std::fs::set_permissions(p, std::fs::Permissions::from_mode(0o755)).unwrap();
        }
        let env = ScriptEnv {
            job_id: 7,
            user: Some("alice".into()),
            node: "n1".into(),
            ..Default::default()
        };
        let t = Duration::from_secs(10);
        run(Kind::Prolog, &ok.display().to_string(), &env, t)
            .await
            .unwrap();
        assert_eq!(
            std::fs::read_to_string(&out).unwrap(),
            "prolog_slurmd 7 alice n1\n"
        );
        let all = format!("{}/*.sh", d.path().display());
        let e = run(Kind::Epilog, &all, &env, t).await.unwrap_err();
        assert!(e.contains("20-bad.sh failed"), "{e}");
        assert!(std::fs::read_to_string(&out)
            .unwrap()
            .ends_with("epilog_slurmd 7 alice n1\n"));
        let slow = d.path().join("slow");
        std::fs::write(&slow, "#!/bin/sh\nsleep 30\n").unwrap();
        std::fs::set_permissions(&slow, std::fs::Permissions::from_mode(0o755)).unwrap();
        let e = run(
            Kind::Prolog,
            &slow.display().to_string(),
            &env,
            Duration::from_millis(200),
        )
        .await
        .unwrap_err();
        assert!(e.contains("timed out"), "{e}");
        assert!(glob_match("*.sh", "a.sh") && !glob_match("*.sh", "a.py"));
        assert!(glob_match("p[0-9]?", "p1x") || glob_match("p[01]?", "p1x"));
    }
}
