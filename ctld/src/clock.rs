//! Noticing steps of the system clock. The controller keeps wall-clock
//! times (job starts and ends, nodes' last contact); when the wall clock
//! jumps (an administrator's `date`, an NTP step), the elapsed times
//! measured with it would jump too: running jobs would reach their limit
//! early or late and every node would look silent for the size of the
//! jump. The writer compares the wall clock with the monotonic clock at
//! every pass; a disagreement beyond [`TOLERANCE_MS`] is a step, and the
//! controller moves those times by it (`Controller::clock_stepped`).
//! Pure: the caller passes both clocks' readings.

use std::time::Instant;

/// Larger disagreements between the clocks are steps (NTP slews far less).
pub const TOLERANCE_MS: i64 = 10_000;

#[derive(Debug, Clone, Copy)]
pub struct StepDetector {
    wall_ms: i64,
    mono: Instant,
}

impl StepDetector {
    pub fn new(wall_ms: i64, mono: Instant) -> StepDetector {
        StepDetector { wall_ms, mono }
    }

    /// The wall clock reads `wall_ms` at `mono`: `Some(seconds)` when it
    /// stepped since the last reading (forward positive), else `None`.
    pub fn observe(&mut self, wall_ms: i64, mono: Instant) -> Option<i64> {
        let passed = mono.saturating_duration_since(self.mono).as_millis() as i64;
        let step = wall_ms - (self.wall_ms + passed);
        self.wall_ms = wall_ms;
        self.mono = mono;
        (step.abs() > TOLERANCE_MS).then(|| (step as f64 / 1000.0).round() as i64)
    }
}

/// The wall clock in milliseconds.
pub fn wall_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as i64)
        .unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn steps_are_told_from_time_passing_and_slewing() {
        let t0 = Instant::now();
        let mut d = StepDetector::new(1_000_000, t0);
        // Time passes on both clocks: no step, however long.
        assert_eq!(
            d.observe(1_000_000 + 3_600_000, t0 + Duration::from_secs(3600)),
            None
        );
        // A little disagreement (slewing, a slow pass): no step.
        assert_eq!(
            d.observe(4_601_000 + 2_000, t0 + Duration::from_secs(3601)),
            None
        );
        // An hour forward in one second, then back.
        let t = t0 + Duration::from_secs(3602);
        assert_eq!(d.observe(4_603_000 + 1_000 + 3_600_000, t), Some(3600));
        let t = t + Duration::from_secs(1);
        assert_eq!(d.observe(4_605_000, t), Some(-3600));
    }
}
