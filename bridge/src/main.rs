//! `slurm-bridge`: see the crate documentation.

use anyhow::Context;
use slurm_bridge::run::Settings;
use std::time::Duration;

const USAGE: &str = "\
Usage: slurm-bridge [OPTIONS]

Schedules Kubernetes pods whose schedulerName is the bridge's as
placeholder jobs in the Slurm queue, and mirrors labelled Kubernetes nodes
as external nodes.

Options:
  --kubeconfig=PATH       kubeconfig to use (default: $KUBECONFIG, then
                          ~/.kube/config, then the in-cluster service account)
  --scheduler-name=NAME   pods with this schedulerName are scheduled
                          (default: slurm-bridge-scheduler)
  --node-label=KEY[=VAL]  Kubernetes nodes with this label become external
                          nodes (default: slinky.slurm.net/slurm-bridge)
  --partition=NAME        partition of the pods' jobs and bridged nodes
                          (default: the cluster's default partition)
  --release-after=SECS    remove a pod whose kubelet has not confirmed its
                          deletion this long after its grace period (10)
  --trusted-annotations=LIST
                          slurmjob.slinky.slurm.net/ annotations honoured
                          (default: job-name,timelimit,constraints,licenses;
                          also: partition,account,qos,reservation, which the
                          bridge grants with its own administrator rights)
  -v, --verbose           more logging
  -h, --help              this text
  -V, --version           the version

slurm.conf is read from $SLURM_CONF (default /etc/slurm/slurm.conf).
";

fn parse(args: &[String]) -> Result<(Settings, Option<String>, u32), String> {
    let mut s = Settings::default();
    let mut kubeconfig = None;
    let mut verbose = 0;
    let mut i = 0;
    while i < args.len() {
        let a = &args[i];
        let (name, inline) = match a.split_once('=') {
            Some((n, v)) if n.starts_with("--") => (n.to_string(), Some(v.to_string())),
            _ => (a.clone(), None),
        };
        let mut value = |what: &str| -> Result<String, String> {
            if let Some(v) = inline.clone() {
                return Ok(v);
            }
            i += 1;
            args.get(i)
                .cloned()
                .ok_or_else(|| format!("option '{what}' requires an argument"))
        };
        match name.as_str() {
            "--kubeconfig" => kubeconfig = Some(value("--kubeconfig")?),
            "--scheduler-name" => s.scheduler_name = value("--scheduler-name")?,
            "--node-label" => {
                let v = value("--node-label")?;
                s.node_label = match v.split_once('=') {
                    Some((k, v)) => (k.to_string(), Some(v.to_string())),
                    None => (v, None),
                };
                if s.node_label.0.is_empty() {
                    return Err("--node-label: an empty label key".into());
                }
            }
            "--partition" => s.partition = Some(value("--partition")?),
            "--release-after" => {
                let v = value("--release-after")?;
                let secs: u64 = v
                    .parse()
                    .map_err(|_| format!("--release-after: invalid number of seconds {v:?}"))?;
                s.release_after = Duration::from_secs(secs);
            }
            "--trusted-annotations" => {
                let v = value("--trusted-annotations")?;
                let list: Vec<String> = v
                    .split(',')
                    .map(str::trim)
                    .filter(|x| !x.is_empty())
                    .map(str::to_string)
                    .collect();
                if let Some(bad) = list
                    .iter()
                    .find(|x| !slurm_bridge::plan::ANNOTATIONS.contains(&x.as_str()))
                {
                    return Err(format!(
                        "--trusted-annotations: unknown annotation '{bad}' (known: {})",
                        slurm_bridge::plan::ANNOTATIONS.join(",")
                    ));
                }
                s.trusted_annotations = list;
            }
            "-v" | "--verbose" => verbose += 1,
            "-vv" => verbose += 2,
            other => return Err(format!("unrecognized option '{other}'")),
        }
        i += 1;
    }
    Ok((s, kubeconfig, verbose))
}

async fn kube_client(path: Option<String>) -> anyhow::Result<kube::Client> {
    let config = match path {
        Some(p) => {
            let kc = kube::config::Kubeconfig::read_from(&p)
                .with_context(|| format!("cannot read kubeconfig {p}"))?;
            kube::Config::from_custom_kubeconfig(kc, &kube::config::KubeConfigOptions::default())
                .await
                .with_context(|| format!("kubeconfig {p}"))?
        }
        None => kube::Config::infer()
            .await
            .context("no Kubernetes configuration (give --kubeconfig)")?,
    };
    kube::Client::try_from(config).context("cannot make a Kubernetes client")
}

fn main() -> std::process::ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.iter().any(|a| a == "-h" || a == "--help") {
        print!("{USAGE}");
        return std::process::ExitCode::SUCCESS;
    }
    if args.iter().any(|a| a == "-V" || a == "--version") {
        println!("slurm-bridge {}", slurm_proto::SLURM_VERSION);
        return std::process::ExitCode::SUCCESS;
    }
    let (settings, kubeconfig, verbose) = match parse(&args) {
        Ok(x) => x,
        Err(e) => {
            eprintln!("slurm-bridge: {e}\nTry \"slurm-bridge --help\" for more information");
            return std::process::ExitCode::from(1);
        }
    };
    match run(settings, kubeconfig, verbose) {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("slurm-bridge: error: {e:#}");
            std::process::ExitCode::from(1)
        }
    }
}

fn run(settings: Settings, kubeconfig: Option<String>, verbose: u32) -> anyhow::Result<()> {
    let path = slurm_common::conf::default_conf_path();
    let conf = slurm_common::conf::SlurmConf::load(&path).map_err(anyhow::Error::msg)?;
    let level = slurm_common::logging::level(None, verbose);
    let time = slurm_common::logging::TimeFormat::parse(conf.get("LogTimeFormat"))
        .map_err(anyhow::Error::msg)?;
    slurm_common::logging::init("SLURM_BRIDGE_LOG", level, None, time)
        .map_err(anyhow::Error::msg)?;
    slurm_common::tls::setup(&conf, &slurm_common::tls::Role::Command)
        .map_err(|e| anyhow::anyhow!("{e}"))?;
    let slurm = slurm_bridge::ctld::Ctld::from_conf(&conf);
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?;
    rt.block_on(async move {
        let kube = kube_client(kubeconfig).await?;
        slurm_bridge::run::run(settings, kube, slurm).await
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(a: &[&str]) -> Vec<String> {
        a.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn options_parse_and_bad_ones_are_named() {
        let (s, k, v) = parse(&args(&[
            "--partition=kube",
            "--node-label",
            "role=k8s",
            "--kubeconfig=/x",
            "-v",
        ]))
        .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(s.partition.as_deref(), Some("kube"));
        assert_eq!(s.node_label, ("role".into(), Some("k8s".into())));
        assert_eq!(k.as_deref(), Some("/x"));
        assert_eq!(v, 1);
        let e = parse(&args(&["--frobnicate"])).err().unwrap_or_default();
        assert!(e.contains("--frobnicate"), "{e}");
        let e = parse(&args(&["--release-after=soon"]))
            .err()
            .unwrap_or_default();
        assert!(e.contains("soon"), "{e}");
        let e = parse(&args(&["--trusted-annotations=qos,root"]))
            .err()
            .unwrap_or_default();
        assert!(e.contains("'root'"), "{e}");
        let (s, _, _) =
            parse(&args(&["--trusted-annotations=qos,account"])).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(
            s.trusted_annotations,
            vec!["qos".to_string(), "account".to_string()]
        );
        let e = parse(&args(&["--partition"])).err().unwrap_or_default();
        assert!(e.contains("requires an argument"), "{e}");
    }
}
