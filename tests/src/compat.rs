//! The compatibility matrix (`docs/compat.md`) and its summary
//! (`scripts/compat-report`): every option, input and output environment
//! variable and command word of Slurm 25.11's man pages
//! (`cli/compat/slurm-25.11/*.txt`, names only), set beside what our
//! parsers' tables accept ([`slurm_cli::compat`]) and the variables our
//! launch code sets (read by calling it).

use slurm_cli::compat::{self, Support};
use std::collections::BTreeSet;
use std::fmt::Write;
use std::path::Path;

/// One man page's names.
#[derive(Debug, Default, Clone)]
pub struct ManPage {
    pub command: String,
    /// (short, long) as the man page gives them.
    pub options: Vec<(Option<char>, Option<String>)>,
    /// (variable, the option it stands for).
    pub env_in: Vec<(String, Option<String>)>,
    pub env_out: Vec<String>,
    /// `cmd x`, `entity show x`, `report cluster x`.
    pub words: Vec<String>,
}

/// Reads `DIR/<command>.txt` for every command of [`compat::commands`].
pub fn load(dir: &Path) -> Result<Vec<ManPage>, String> {
    let mut pages = Vec::new();
    for c in compat::commands() {
        let path = dir.join(format!("{}.txt", c.name));
        let text = std::fs::read_to_string(&path)
            .map_err(|e| format!("cannot read {}: {e}", path.display()))?;
        let mut p = ManPage {
            command: c.name.to_string(),
            ..Default::default()
        };
        for (n, line) in text.lines().enumerate() {
            let line = line.trim();
            if line.is_empty() || line.starts_with('#') {
                continue;
            }
            let mut w = line.split_whitespace();
            let kind = w.next().unwrap_or_default();
            let rest: Vec<&str> = w.collect();
            let bad = || format!("{}:{}: cannot read '{line}'", path.display(), n + 1);
            match kind {
                "opt" => {
                    let mut short = None;
                    let mut long = None;
                    for r in &rest {
                        if let Some(l) = r.strip_prefix("--") {
                            long = Some(l.to_string());
                        } else if let Some(s) = r.strip_prefix('-') {
                            short = s.chars().next();
                        } else {
                            return Err(bad());
                        }
                    }
                    if short.is_none() && long.is_none() {
                        return Err(bad());
                    }
                    // `--json=list` and its kin are one option to a parser.
                    let long = long.map(|l| l.split('=').next().unwrap_or_default().to_string());
                    if !p.options.contains(&(short, long.clone())) {
                        p.options.push((short, long));
                    }
                }
                "env-in" => {
                    let var = rest.first().ok_or_else(bad)?.to_string();
                    let opt = rest.get(1).map(|o| o.trim_start_matches('-').to_string());
                    p.env_in.push((var, opt));
                }
                "env-out" => p.env_out.push(rest.first().ok_or_else(bad)?.to_string()),
                "cmd" | "entity" | "report" => p.words.push(line.to_ascii_lowercase()),
                _ => return Err(bad()),
            }
        }
        pages.push(p);
    }
    Ok(pages)
}

/// Every option a job may ask for that the controller repeats to its
/// processes (`slurm_proto::jobenv`).
fn ask_everything(d: &mut slurm_proto::JobDesc) {
    d.licenses = Some("l".into());
    d.reservation = Some("r".into());
    d.gpus = Some("1".into());
    d.gpus_per_node = Some("1".into());
    d.gpus_per_task = Some("1".into());
    d.gpu_bind = Some("none".into());
    d.cpus_per_gpu = Some(1);
    d.mem_per_gpu = Some(1);
    d.ntasks_per_socket = Some(1);
    d.ntasks_per_core = Some(1);
    d.ntasks_per_gpu = Some(1);
    d.threads_per_core = Some(1);
    d.segment = Some(1);
}

/// The variables our code gives a job's processes, by the command that
/// starts them: found by running the launch code on a request with every
/// optional part set.
pub fn env_out(command: &str) -> BTreeSet<String> {
    use slurm_proto::{
        Allocation, ArrayInfo, BatchLaunch, GresAlloc, JobRecord, StepCred, StepLayout, TaskLaunch,
    };
    let gpus = vec![vec![GresAlloc {
        name: "gpu".into(),
        kind: None,
        indices: vec![0],
    }]];
    let alloc = Allocation {
        nodes: vec!["n1".into()],
        cpus: vec![2],
        mem: vec![100],
        tasks: vec![1],
        gres: gpus.clone(),
    };
    let names = |env: Vec<(String, String)>| -> BTreeSet<String> {
        env.into_iter().map(|(k, _)| k).collect()
    };
    let task_pid = String::from_utf8_lossy(slurmd::launch::exec::TASK_PID_PREFIX)
        .trim_end_matches('=')
        .to_string();
    match command {
        "sbatch" => {
            let array = ArrayInfo {
                job_id: 1,
                task_id: 1,
                task_count: 2,
                task_min: 1,
                task_max: 3,
                task_step: Some(2),
                max_running: None,
            };
            let mut job = JobRecord {
                restarts: 1,
                array: Some(array),
                ..Default::default()
            };
            {
                let d = std::sync::Arc::make_mut(&mut job.desc);
                d.dependency = Some("afterok:1".into());
                ask_everything(d);
            }
            let launch = BatchLaunch {
                job_id: 1,
                job_name: "j".into(),
                uid: 1000,
                gid: 1000,
                user_name: "u".into(),
                account: "a".into(),
                qos: "normal".into(),
                partition: "p".into(),
                cluster_name: "c".into(),
                alloc,
                num_tasks: 1,
                cpus_per_task: 2,
                ntasks_per_node: Some(1),
                mem_per_node: Some(100),
                mem_per_cpu: None,
                time_limit: Some(10),
                work_dir: "/".into(),
                std_out: None,
                std_err: None,
                std_in: None,
                script: String::new(),
                argv: vec![],
                environment: slurmctld::state::job_env(&job),
                submit_host: "h".into(),
                ctld_host: "h".into(),
                ctld_port: 6817,
                start_time: 1,
                append_output: false,
            };
            let params = slurmd::launch::env::EnvParams {
                node: "n1",
                conf_path: "/etc/slurm/slurm.conf",
                start_time: 1,
                renumber_gpus: true,
            };
            let mut v = names(slurmd::launch::env::batch_env(&launch, &params).0);
            // Memory per CPU is set instead of per node when asked for.
            let per_cpu = BatchLaunch {
                mem_per_node: None,
                mem_per_cpu: Some(10),
                ..launch
            };
            v.extend(names(slurmd::launch::env::batch_env(&per_cpu, &params).0));
            // CPUs per task asked (not derived from --cpus-per-gpu).
            let mut cpt = JobRecord::default();
            std::sync::Arc::make_mut(&mut cpt.desc).cpus_per_task = Some(2);
            v.extend(
                slurmctld::state::job_env(&cpt)
                    .iter()
                    .filter_map(|kv| kv.split_once('=').map(|(k, _)| k.to_string())),
            );
            // What sbatch's own options put in the job's environment.
            let o = slurm_cli::sbatch::Options {
                export: Some("ALL".into()),
                distribution: Some("block".into()),
                overcommit: Some(true),
                ..Default::default()
            };
            v.extend(
                slurm_cli::sbatch::option_env(&o)
                    .into_iter()
                    .map(|(k, _)| k.to_string()),
            );
            v.insert(task_pid);
            v
        }
        "srun" => {
            let t = TaskLaunch {
                layout: StepLayout {
                    job_id: 1,
                    step_id: 0,
                    nodes: vec!["n1".into()],
                    addrs: vec!["127.0.0.1:6818".into()],
                    tasks: vec![vec![0]],
                    cpus_per_task: 2,
                    job_cpus: vec![2],
                    cred: StepCred::default(),
                },
                node_index: 0,
                argv: vec!["true".into()],
                environment: vec![],
                cwd: "/".into(),
                job_name: "j".into(),
                partition: "p".into(),
                account: "a".into(),
                cluster_name: "c".into(),
                job_nodes: vec!["n1".into()],
                job_cpus: vec![2],
                job_tasks: vec![1],
                job_gres: gpus,
                cpu_bind: Some("cores".into()),
                distribution: Some("block".into()),
                job_start: Some(1),
                job_mem: vec![100],
                pty: Some((24, 80)),
                task_prolog: None,
                task_epilog: None,
                preserve_env: false,
                bcast: None,
                gpu_bind: None,
            };
            let mut v = names(slurmd::steps::task_env(
                &t,
                "127.0.0.1:4000",
                "n1",
                "/etc/slurm/slurm.conf",
                0,
                0,
                true,
            ));
            v.insert(task_pid);
            // The binding the node daemon made, and what srun adds.
            v.extend(names(slurmd::steps::cpu_bind_env(&[Some(vec![0])], false)));
            let mut job = JobRecord {
                start_time: Some(1),
                end_time: Some(61),
                ..Default::default()
            };
            {
                let d = std::sync::Arc::make_mut(&mut job.desc);
                d.dependency = Some("afterok:1".into());
                ask_everything(d);
            }
            let o = slurm_cli::srun::AllocOpts {
                overcommit: true,
                cpus_per_task: Some(2),
                ..Default::default()
            };
            v.extend(names(slurm_cli::srun::step_vars(&job, &o, &|_| None)));
            v
        }
        "salloc" => {
            let mut j = JobRecord {
                alloc,
                start_time: Some(1),
                end_time: Some(61),
                ..Default::default()
            };
            {
                let d = std::sync::Arc::make_mut(&mut j.desc);
                ask_everything(d);
                d.mem_per_node = Some(100);
            }
            let o = slurm_cli::srun::AllocOpts {
                ntasks: Some(1),
                overcommit: true,
                cpus_per_task: Some(2),
                ntasks_per_node: Some(1),
                distribution: Some("block".into()),
                ..Default::default()
            };
            let conf = slurm_common::conf::SlurmConf::parse_str(
                "ClusterName=c\nSlurmctldHost=h\nNodeName=n1 CPUs=2\nPartitionName=p Nodes=n1\n",
                Path::new("/etc/slurm/slurm.conf"),
            )
            .expect("a minimal slurm.conf");
            let mut v = names(slurm_cli::srun::alloc_env(&j, &conf, &o));
            // Memory per CPU is set instead of per node when asked for.
            std::sync::Arc::make_mut(&mut j.desc).mem_per_cpu = Some(10);
            v.extend(names(slurm_cli::srun::alloc_env(&j, &conf, &o)));
            // CPUs per task asked (not derived from --cpus-per-gpu).
            {
                let d = std::sync::Arc::make_mut(&mut j.desc);
                d.cpus_per_gpu = None;
                d.cpus_per_task = Some(2);
            }
            v.extend(names(slurm_cli::srun::alloc_env(&j, &conf, &o)));
            v
        }
        _ => BTreeSet::new(),
    }
}

fn support_text(s: &Support) -> String {
    match s {
        Support::Works => "works".into(),
        Support::Differs(why) => format!("differs: {why}"),
        Support::NotYet(why) => format!("not yet: {why}"),
    }
}

fn option_name(short: Option<char>, long: Option<&str>) -> String {
    match (short, long) {
        (Some(s), Some(l)) => format!("`-{s}, --{l}`"),
        (Some(s), None) => format!("`-{s}`"),
        (None, Some(l)) => format!("`--{l}`"),
        (None, None) => String::new(),
    }
}

/// Counts for one command.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Tally {
    pub works: usize,
    pub differs: usize,
    pub not_yet: usize,
}

impl Tally {
    fn add(&mut self, s: &Support) {
        match s {
            Support::Works => self.works += 1,
            Support::Differs(_) => self.differs += 1,
            Support::NotYet(_) => self.not_yet += 1,
        }
    }
    pub fn total(&self) -> usize {
        self.works + self.differs + self.not_yet
    }
}

/// One command's rows: (kind, name, support).
fn rows(page: &ManPage, cmd: &compat::Command) -> Vec<(&'static str, String, Support)> {
    let mut out = Vec::new();
    for (short, long) in &page.options {
        let s = match cmd.lookup(*short, long.as_deref()) {
            Some(k) => k.support.clone(),
            None => Support::NotYet("not implemented yet"),
        };
        out.push(("option", option_name(*short, long.as_deref()), s));
    }
    let outs = env_out(&page.command);
    for (var, opt) in &page.env_in {
        let s = if !cmd.env_in.contains(var) {
            Support::NotYet("not read yet")
        } else {
            match opt
                .as_deref()
                .and_then(|o| cmd.lookup(None, Some(o)))
                .map(|k| k.support.clone())
            {
                Some(s) => s,
                None => Support::Works,
            }
        };
        out.push(("input variable", format!("`{var}`"), s));
    }
    for var in &page.env_out {
        let s = if outs.contains(var) {
            Support::Works
        } else {
            Support::NotYet("not set yet")
        };
        out.push(("output variable", format!("`{var}`"), s));
    }
    for w in &page.words {
        let s = if cmd.words.iter().any(|x| x.eq_ignore_ascii_case(w)) {
            Support::Works
        } else {
            Support::NotYet("not implemented yet")
        };
        out.push(("command word", format!("`{w}`"), s));
    }
    out
}

/// Per command: (name, options, input variables, output variables, words).
pub fn tallies(pages: &[ManPage]) -> Vec<(String, [Tally; 4])> {
    let cmds = compat::commands();
    pages
        .iter()
        .filter_map(|p| {
            let cmd = cmds.iter().find(|c| c.name == p.command)?;
            let mut t = [Tally::default(); 4];
            for (kind, _, s) in rows(p, cmd) {
                let i = match kind {
                    "option" => 0,
                    "input variable" => 1,
                    "output variable" => 2,
                    _ => 3,
                };
                t[i].add(&s);
            }
            Some((p.command.clone(), t))
        })
        .collect()
}

/// The summary `scripts/compat-report` prints (and the README quotes).
pub fn summary(pages: &[ManPage]) -> String {
    let mut s = String::new();
    let cell = |t: &Tally| {
        if t.total() == 0 {
            "-".to_string()
        } else {
            format!("{}+{}/{}", t.works, t.differs, t.total())
        }
    };
    let _ = writeln!(
        s,
        "{:<10} {:>12} {:>14} {:>14} {:>12}",
        "command", "options", "env in", "env out", "words"
    );
    let mut all = [Tally::default(); 4];
    for (name, t) in tallies(pages) {
        let _ = writeln!(
            s,
            "{:<10} {:>12} {:>14} {:>14} {:>12}",
            name,
            cell(&t[0]),
            cell(&t[1]),
            cell(&t[2]),
            cell(&t[3])
        );
        for i in 0..4 {
            all[i].works += t[i].works;
            all[i].differs += t[i].differs;
            all[i].not_yet += t[i].not_yet;
        }
    }
    let _ = writeln!(
        s,
        "{:<10} {:>12} {:>14} {:>14} {:>12}",
        "all",
        cell(&all[0]),
        cell(&all[1]),
        cell(&all[2]),
        cell(&all[3])
    );
    let _ = writeln!(
        s,
        "\nEach cell: works + differs / in Slurm 25.11's man page (the rest: not yet)."
    );
    s
}

/// `text` (the README) with its `<!-- compat-report -->` block holding
/// [`summary`]; `None` without such a block.
pub fn with_summary(text: &str, pages: &[ManPage]) -> Option<String> {
    const OPEN: &str = "<!-- compat-report -->\n";
    const CLOSE: &str = "<!-- /compat-report -->\n";
    let i = text.find(OPEN)? + OPEN.len();
    let j = i + text[i..].find(CLOSE)?;
    Some(format!(
        "{}```\n{}```\n{}",
        &text[..i],
        summary(pages),
        &text[j..]
    ))
}

/// `docs/compat.md`.
pub fn markdown(pages: &[ManPage]) -> String {
    let cmds = compat::commands();
    let mut s = String::new();
    s.push_str(
        "# Compatibility with Slurm 25.11's commands\n\n\
         Generated by `scripts/compat-report --write` from the commands' own option \
         tables (`cli/src/compat.rs`), the variables our launch code sets, and the names \
         in Slurm 25.11's man pages (`cli/compat/slurm-25.11/`). A test fails when this \
         file is not what the code gives, so it cannot drift. Do not edit by hand.\n\n\
         - **works**: accepted and acts as Slurm's does.\n\
         - **differs**: accepted; how it differs is said.\n\
         - **not yet**: refused with an error (an option the parser knows) or unknown to \
         the parser (`unrecognized option`), never silently ignored; a variable not read or \
         not set.\n\n## Summary\n\n```\n",
    );
    s.push_str(&summary(pages));
    s.push_str("```\n");
    for p in pages {
        let Some(cmd) = cmds.iter().find(|c| c.name == p.command) else {
            continue;
        };
        let _ = write!(
            s,
            "\n## {}\n\n| kind | name | ours |\n|---|---|---|\n",
            p.command
        );
        for (kind, name, sup) in rows(p, cmd) {
            let _ = writeln!(s, "| {kind} | {name} | {} |", support_text(&sup));
        }
        let extra: Vec<String> = cmd
            .options
            .iter()
            .filter(|k| {
                !p.options.iter().any(|(ms, ml)| match (ml, k.long) {
                    (Some(ml), Some(l)) => ml == l,
                    _ => ms.is_some() && *ms == k.short && ml.is_none(),
                })
            })
            .map(|k| option_name(k.short, k.long))
            .collect();
        if !extra.is_empty() {
            let _ = writeln!(
                s,
                "\nAccepted beyond the man page (aliases and older spellings): {}",
                extra.join(", ")
            );
        }
    }
    s
}
