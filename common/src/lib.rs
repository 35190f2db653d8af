//! Pieces every process shares.
//!
//! Map:
//! - [`conf`]: `slurm.conf` (parse → default → validate; errors carry file:line).
//! - [`hostlist`]: hostlist expressions (`n[001-003,7]`) and count lists (`2(x3),1`).
//! - [`jobspec`]: job array (`--array`) and dependency (`--dependency`) syntax.
//! - [`timefmt`]: Slurm's time formats (limits, elapsed, timestamps, `--begin`).
//! - [`auth`]: HMAC-signed credentials (`auth/slurm` semantics) and the local
//!   credential socket (SACK-like) that hands them to unprivileged commands.
//! - [`constraint`]: `--constraint` expressions over node features.
//! - [`cpubind`]: `srun --cpu-bind` (which CPUs each task gets).
//! - [`dbd`]: a one-request client for slurmdbd.
//! - [`jwt`]: HS256 tokens as Slurm's `auth/jwt` (minted by `scontrol token`,
//!   checked by the controller and slurmdbd).
//! - [`gres`]: generic resource specifications (`gpu:a100:2`).
//! - [`logging`]: the daemons' log level, log file (reopened on SIGUSR2)
//!   and systemd readiness (`NOTIFY_SOCKET`).
//! - [`licenses`]: license lists (`matlab:2,abaqus`).
//! - [`net`]: the RPC framing (length-prefixed JSON) and a blocking client.
//! - [`grpc`]: the gRPC transport (tonic over our TLS): kept channels,
//!   signed calls to node daemons, and a server's accepted connections.
//! - [`tls`]: TLS between the processes (`TLSType`, `TLSParameters`) and
//!   who a caller's certificate names.
//! - [`private`]: `PrivateData` (what users may not see of one another).
//! - [`rlimits`]: resource limits carried from the submitting shell to a
//!   job's processes (`PropagateResourceLimits`, `--propagate`).
//! - [`stepio`]: the I/O stream between a step's node daemons and `srun`.
//! - [`users`]: uid/gid ⇄ name look-ups.
//!
//! Invariant: nothing here panics on external input; every parse returns an error
//! naming what was wrong.

pub mod auth;
pub mod conf;
pub mod constraint;
pub mod cpubind;
pub mod dbd;
pub mod debugflags;
pub mod gres;
pub mod grpc;
pub mod hostlist;
pub mod jobcomp;
pub mod jobspec;
pub mod jwt;
pub mod licenses;
pub mod logging;
pub mod mail;
pub mod net;
pub mod private;
pub mod rlimits;
pub mod signal;
pub mod stepio;
pub mod timefmt;
pub mod tls;
pub mod topologies;
pub mod topology;
pub mod tres;
pub mod users;
