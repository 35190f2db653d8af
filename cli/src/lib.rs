//! The user and admin commands. Each binary in `src/bin/` is a thin `main`
//! calling `run` in its module here, so tests can drive the commands'
//! parsing and formatting without processes.
//!
//! Map:
//! - [`common`]: configuration loading, the controller client, error printing.
//! - [`squeue`], [`sinfo`], [`scontrol`]: queries and their text layouts.
//! - [`sbatch`], [`scancel`]: submission and cancellation.
//! - [`sacct`]: job and step records from slurmdbd.
//! - [`sacctmgr`]: clusters, accounts, users, associations and QOS in slurmdbd.
//! - [`sacctmgr_file`]: `sacctmgr dump`/`load`, Slurm's flat file of a cluster's associations.
//! - [`sreport`]: usage reports from slurmdbd's rollups.
//! - [`sdiag`]: the controller's scheduling counters.
//! - [`shares`]: `sprio` and `sshare` (multifactor priority, fair share).
//! - [`srun`]: `srun` (job steps, with or without an allocation) and `salloc`.
//! - [`jsonout`]: `--json` bodies, as slurmrestd's responses.
//! - [`compat`]: what each command's parser accepts, for the compatibility matrix.

pub mod common;
pub mod compat;
pub mod fmt;
pub mod getopt;
pub mod help;
pub mod jsonout;
pub mod sacct;
pub mod sacctmgr;
pub mod sacctmgr_file;
pub mod sbatch;
pub mod scancel;
pub mod scontrol;
pub mod sdiag;
pub mod shares;
pub mod sinfo;
pub mod squeue;
pub mod sreport;
pub mod srun;
