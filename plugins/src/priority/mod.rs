//! `priority/basic`: jobs are ordered by submission. The first job of a
//! controller's life gets [`BASIC_TOP`]; each later one one less, so the
//! number sorts the queue first-in first-out and never reaches zero (zero
//! means "held" in Slurm).
//!
//! `priority/multifactor`: [`params`] reads its `slurm.conf` settings,
//! [`mod@multifactor`] weighs a job's factors (with fair share from
//! [`crate::fairshare`]) into a priority and the breakdown `sprio` shows.

pub mod multifactor;
pub mod params;

pub use multifactor::{
    multifactor, multifactor_with_fairshare, Multifactor, NormFactors, PriorityContext,
    PriorityFactors, PriorityInput,
};
pub use params::{PriorityConfigError, PriorityFlags, PriorityParams};

pub const BASIC_TOP: u32 = 0xFFFF_0000;

/// Priority of the job submitted `seq`-th (0-based) under priority/basic.
pub fn basic(seq: u64) -> u32 {
    let p = BASIC_TOP as u64 - seq.min(BASIC_TOP as u64 - 1);
    p as u32
}

#[cfg(test)]
mod tests {
    #[test]
    fn decreasing_and_never_zero() {
        assert!(super::basic(0) > super::basic(1));
        assert_eq!(super::basic(u64::MAX), 1);
    }
}

#[cfg(test)]
mod multifactor_tests;
