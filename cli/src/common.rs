//! What every command shares: the configuration, the controller client, and
//! Slurm's way of reporting errors (`prog: error: message`).

use slurm_common::conf::{default_conf_path, SlurmConf};
use slurm_common::net::Client;
use slurm_proto::{RequestBody, Response, RpcError};

/// Load `$SLURM_CONF` (or /etc/slurm/slurm.conf), printing an error prefixed
/// with `prog` on failure.
/// `--test-only`'s answer, as sbatch and srun print it.
pub fn will_start_line(
    prog: &str,
    job_id: u32,
    start_time: i64,
    cpus: u32,
    nodes: &[String],
    partition: &str,
) -> String {
    format!(
        "{prog}: Job {job_id} to start at {} using {cpus} processors on nodes {} in partition {partition}\n",
        slurm_common::timefmt::format_timestamp(start_time),
        slurm_common::hostlist::compress(nodes)
    )
}

pub fn load_conf(prog: &str) -> Result<SlurmConf, i32> {
    // Every command that prints a time prints it as the user asked.
    slurm_common::timefmt::use_env_time_format();
    let path = default_conf_path();
    let conf = SlurmConf::load(&path).map_err(|e| {
        eprintln!("{prog}: error: {e}");
        1
    })?;
    // TLS on (TLSType): every call checks its server against the CA.
    slurm_common::tls::setup(&conf, &slurm_common::tls::Role::Command).map_err(|e| {
        eprintln!("{prog}: error: {e}");
        1
    })?;
    Ok(conf)
}

/// An error talking to the controller, in the shape the commands report.
#[derive(Debug, thiserror::Error)]
pub enum CallError {
    #[error("Unable to contact slurm controller (connect failure): {0}")]
    Net(#[from] slurm_common::net::NetError),
    #[error("{0}")]
    Rpc(RpcError),
    #[error("unexpected reply from the controller")]
    Unexpected,
}

/// Send one request and turn an `Error` response into `CallError::Rpc`.
pub fn call(client: &Client, body: RequestBody) -> Result<Response, CallError> {
    match client.call(body)? {
        Response::Error(e) => Err(CallError::Rpc(e)),
        r => Ok(r),
    }
}

pub fn client(conf: &SlurmConf) -> Client {
    Client::from_conf(conf)
}

/// Unix seconds now.
pub fn now() -> i64 {
    slurm_common::auth::now()
}

/// Send one request to slurmdbd (AccountingStorageHost:AccountingStoragePort).
pub fn dbd_call(
    conf: &SlurmConf,
    body: slurm_proto::acct::AcctRequest,
) -> Result<slurm_proto::acct::AcctResponse, String> {
    if conf.accounting_storage_type != "accounting_storage/slurmdbd" {
        return Err("Slurm accounting storage is disabled".into());
    }
    let cred = slurm_common::auth::CredSource::from_conf(conf)
        .credential(&slurm_common::dbd::bound(&body))
        .map_err(|e| format!("cannot get a credential: {e}"))?;
    let addr = conf.dbd_address();
    slurm_common::dbd::call_sync(
        &addr,
        conf.dbd_name(),
        &slurm_proto::acct::DbdRequest { cred, body },
        std::time::Duration::from_secs(30),
    )
    .map_err(|e| format!("Problem talking to the database: {e}"))
}
