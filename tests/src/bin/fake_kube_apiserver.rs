//! The test kit's stand-in for a Kubernetes API server (see
//! `slurm_tests::k8s`), for the bridge demo (`scripts/kube-demo`) and for
//! trying `kubectl` against it. Not a Kubernetes cluster: objects live in
//! memory and nothing runs containers; `--kubelet NODE,...` plays the
//! kubelets of those nodes (bound pods go Running; Succeeded after their
//! `fake-kubelet/run-seconds` annotation).
//!
//! Usage: `fake-kube-apiserver [--listen IP] [--kubeconfig PATH]
//! [--kubelet NODE,...]`. Prints the server's URL, writes a kubeconfig for
//! it, and serves until killed.

fn main() {
    let mut ip = "127.0.0.1".to_string();
    let mut kubeconfig = None;
    let mut kubelets = Vec::new();
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        let mut value = || {
            args.next().unwrap_or_else(|| {
                eprintln!("fake-kube-apiserver: {a} needs a value");
                std::process::exit(2)
            })
        };
        match a.as_str() {
            "--listen" => ip = value(),
            "--kubeconfig" => kubeconfig = Some(value()),
            "--kubelet" => kubelets = value().split(',').map(str::to_string).collect(),
            other => {
                eprintln!("fake-kube-apiserver: unknown option {other}");
                std::process::exit(2)
            }
        }
    }
    let api = match slurm_tests::k8s::FakeApiServer::start(&ip) {
        Ok(a) => a,
        Err(e) => {
            eprintln!("fake-kube-apiserver: cannot listen on {ip}: {e}");
            std::process::exit(1)
        }
    };
    if let Some(p) = &kubeconfig {
        if let Err(e) = std::fs::write(p, api.kubeconfig()) {
            eprintln!("fake-kube-apiserver: cannot write {p}: {e}");
            std::process::exit(1)
        }
    }
    let _kubelet =
        (!kubelets.is_empty()).then(|| slurm_tests::k8s::FakeKubelet::start(&api, kubelets));
    println!("{}", api.url());
    loop {
        std::thread::park();
    }
}
