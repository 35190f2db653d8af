//! UTC calendar arithmetic for rollup periods and purge cut-offs (no time
//! zone database: periods are UTC hours, days and months).

/// Days since 1970-01-01 → (year, month 1-12, day 1-31).
fn civil_from_days(z: i64) -> (i64, u32, u32) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let y = yoe + era * 400;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    (if m <= 2 { y + 1 } else { y }, m, d)
}

/// (year, month 1-12, day 1-31) → days since 1970-01-01.
fn days_from_civil(y: i64, m: u32, d: u32) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y.rem_euclid(400);
    let m = i64::from(m);
    let doy = (153 * (if m > 2 { m - 3 } else { m + 9 }) + 2) / 5 + i64::from(d) - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

fn days_in_month(y: i64, m: u32) -> u32 {
    let (ny, nm) = if m == 12 { (y + 1, 1) } else { (y, m + 1) };
    (days_from_civil(ny, nm, 1) - days_from_civil(y, m, 1)) as u32
}

pub fn floor_hour(t: i64) -> i64 {
    t - t.rem_euclid(3600)
}

pub fn floor_day(t: i64) -> i64 {
    t - t.rem_euclid(86_400)
}

pub fn floor_month(t: i64) -> i64 {
    let (y, m, _) = civil_from_days(t.div_euclid(86_400));
    days_from_civil(y, m, 1) * 86_400
}

/// The first second of the month after the one holding `t`.
pub fn next_month(t: i64) -> i64 {
    add_months(floor_month(t), 1)
}

/// `t` moved by `n` calendar months (the day clamped to the month's length).
pub fn add_months(t: i64, n: i32) -> i64 {
    let days = t.div_euclid(86_400);
    let secs = t.rem_euclid(86_400);
    let (y, m, d) = civil_from_days(days);
    let idx = y * 12 + i64::from(m) - 1 + i64::from(n);
    let (ny, nm) = (idx.div_euclid(12), (idx.rem_euclid(12) + 1) as u32);
    let nd = d.min(days_in_month(ny, nm));
    days_from_civil(ny, nm, nd) * 86_400 + secs
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn calendar() {
        // 2024-02-29 12:34:56 UTC
        let t = 1_709_210_096;
        assert_eq!(floor_hour(t), 1_709_208_000);
        assert_eq!(floor_day(t), 1_709_164_800);
        assert_eq!(floor_month(t), 1_706_745_600); // 2024-02-01
        assert_eq!(next_month(t), 1_709_251_200); // 2024-03-01
        assert_eq!(add_months(t, 12), 1_740_746_096); // 2025-02-28 12:34:56
        assert_eq!(add_months(0, -1), -31 * 86_400);
        for d in [-800_000i64, -1, 0, 1, 59, 60, 365, 10_000, 20_000, 30_000] {
            let (y, m, dd) = civil_from_days(d);
            assert_eq!(days_from_civil(y, m, dd), d);
        }
    }
}
