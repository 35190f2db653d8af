//! Slurm's time formats.
//!
//! - Time limits are minutes (`u32`), `None` meaning unlimited: [`parse_time_limit`],
//!   [`format_limit_scontrol`] (`00:30:00`, `1-00:00:00`), [`format_limit_squeue`]
//!   (`30:00`, `1:00:00`, `1-00:00:00`), [`format_limit_sinfo`] (`infinite`).
//! - Durations in seconds: [`format_elapsed`] (squeue TIME, compact) and
//!   [`format_duration_hms`] (scontrol RunTime, `HH:MM:SS`).
//! - Timestamps are Unix seconds (`i64`) shown in local time: [`format_timestamp`]
//!   (`2026-11-22T05:37:34`) and parsed by [`parse_timestamp`] (`--begin`, `scontrol`).
//!   A command that calls [`use_env_time_format`] prints them as
//!   `SLURM_TIME_FORMAT` says: `standard`, `relative` or a strftime format.

use chrono::{Datelike, Duration, Local, LocalResult, NaiveDate, NaiveDateTime, TimeZone};

/// The variable that sets how commands print timestamps.
pub const TIME_FORMAT_ENV: &str = "SLURM_TIME_FORMAT";

static USER_FORMAT: std::sync::OnceLock<Option<String>> = std::sync::OnceLock::new();

/// Commands: take `SLURM_TIME_FORMAT` (read once) for [`format_timestamp`].
/// A strftime format chrono cannot read counts as `standard`.
pub fn use_env_time_format() {
    USER_FORMAT.get_or_init(|| {
        let v = std::env::var(TIME_FORMAT_ENV).ok()?;
        checked_format(&v)
    });
}

/// `v` as a format to keep: `None` for the standard one.
fn checked_format(v: &str) -> Option<String> {
    use chrono::format::{Item, StrftimeItems};
    match v {
        "" | "standard" => None,
        "relative" => Some(v.to_string()),
        f if StrftimeItems::new(f).any(|i| matches!(i, Item::Error)) => None,
        f => Some(f.to_string()),
    }
}

/// `t` in `format` (`relative` or strftime), as of `now`, local time.
pub fn format_timestamp_as(t: i64, format: &str, now: i64) -> String {
    let (Some(dt), Some(today)) = (
        Local.timestamp_opt(t, 0).earliest(),
        Local.timestamp_opt(now, 0).earliest(),
    ) else {
        return "Unknown".to_string();
    };
    if format != "relative" {
        return dt.format(format).to_string();
    }
    if dt.year() != today.year() {
        return dt.format("%-d %b %Y").to_string();
    }
    let days = (dt.date_naive() - today.date_naive()).num_days();
    match days {
        0 => dt.format("%H:%M:%S").to_string(),
        1 => dt.format("Tomorr %H:%M").to_string(),
        -1 => dt.format("Ystday %H:%M").to_string(),
        2..=6 => dt.format("%a %H:%M").to_string(),
        _ => dt.format("%-d %b %H:%M").to_string(),
    }
}

/// A time string that could not be parsed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid time '{input}': {reason}")]
pub struct TimeError {
    /// The input as given.
    pub input: String,
    /// What was wrong with it.
    pub reason: String,
}

impl TimeError {
    fn new(input: &str, reason: impl Into<String>) -> Self {
        TimeError {
            input: input.to_string(),
            reason: reason.into(),
        }
    }
}

fn is_unlimited_word(s: &str) -> bool {
    s.eq_ignore_ascii_case("unlimited") || s.eq_ignore_ascii_case("infinite") || s == "-1"
}

fn parse_field(input: &str, field: &str) -> Result<u64, TimeError> {
    if field.is_empty() {
        return Err(TimeError::new(input, "empty field"));
    }
    if !field.bytes().all(|b| b.is_ascii_digit()) {
        return Err(TimeError::new(input, format!("'{field}' is not a number")));
    }
    field
        .parse::<u64>()
        .ok()
        .filter(|v| *v <= u64::from(u32::MAX))
        .ok_or_else(|| TimeError::new(input, format!("'{field}' is too large")))
}

/// Parses a time limit as `--time`, `MaxTime=` and `DefaultTime=` accept it:
/// `minutes`, `minutes:seconds`, `hours:minutes:seconds`, `days-hours`,
/// `days-hours:minutes`, `days-hours:minutes:seconds`, or `UNLIMITED`/`INFINITE`/`-1`
/// (any case) for `None`. Seconds round up to the next minute (`0:30` → 1).
pub fn parse_time_limit(s: &str) -> Result<Option<u32>, TimeError> {
    let t = s.trim();
    if t.is_empty() {
        return Err(TimeError::new(s, "empty time limit"));
    }
    if is_unlimited_word(t) {
        return Ok(None);
    }
    if let Some(bad) = t
        .chars()
        .find(|c| !(c.is_ascii_digit() || *c == '-' || *c == ':'))
    {
        return Err(TimeError::new(s, format!("unexpected character '{bad}'")));
    }
    let (days, hours, minutes, seconds) = match t.split_once('-') {
        Some((d, rest)) => {
            if rest.contains('-') {
                return Err(TimeError::new(s, "more than one '-'"));
            }
            let days = parse_field(s, d)?;
            let parts: Vec<&str> = rest.split(':').collect();
            match parts.as_slice() {
                [h] => (days, parse_field(s, h)?, 0, 0),
                [h, m] => (days, parse_field(s, h)?, parse_field(s, m)?, 0),
                [h, m, sec] => (
                    days,
                    parse_field(s, h)?,
                    parse_field(s, m)?,
                    parse_field(s, sec)?,
                ),
                _ => return Err(TimeError::new(s, "too many ':' fields")),
            }
        }
        None => {
            let parts: Vec<&str> = t.split(':').collect();
            match parts.as_slice() {
                [m] => (0, 0, parse_field(s, m)?, 0),
                [m, sec] => (0, 0, parse_field(s, m)?, parse_field(s, sec)?),
                [h, m, sec] => (
                    0,
                    parse_field(s, h)?,
                    parse_field(s, m)?,
                    parse_field(s, sec)?,
                ),
                _ => return Err(TimeError::new(s, "too many ':' fields")),
            }
        }
    };
    let secs = days
        .checked_mul(86_400)
        .and_then(|d| hours.checked_mul(3600).and_then(|h| d.checked_add(h)))
        .and_then(|x| minutes.checked_mul(60).and_then(|m| x.checked_add(m)))
        .and_then(|x| x.checked_add(seconds))
        .ok_or_else(|| TimeError::new(s, "time limit is too large"))?;
    let mins = secs.div_ceil(60);
    // u32::MAX is Slurm's INFINITE marker; keep real limits below it.
    if mins >= u64::from(u32::MAX) {
        return Err(TimeError::new(s, "time limit is too large"));
    }
    Ok(Some(mins as u32))
}

/// `[D-]HH:MM:SS` with zero-padded hours (scontrol); negative → `INVALID`.
pub fn format_duration_hms(secs: i64) -> String {
    if secs < 0 {
        return "INVALID".to_string();
    }
    let (days, h, m, s) = split_secs(secs);
    if days > 0 {
        format!("{days}-{h:02}:{m:02}:{s:02}")
    } else {
        format!("{h:02}:{m:02}:{s:02}")
    }
}

fn split_secs(secs: i64) -> (i64, i64, i64, i64) {
    (
        secs / 86_400,
        (secs / 3600) % 24,
        (secs / 60) % 60,
        secs % 60,
    )
}

/// The compact form of squeue's TIME column: `0:05`, `1:05`, `1:02:03`, `1-02:03:04`.
/// Negative durations show as `0:00`.
pub fn format_elapsed(secs: i64) -> String {
    let secs = secs.max(0);
    let (days, h, m, s) = split_secs(secs);
    if days > 0 {
        format!("{days}-{h:02}:{m:02}:{s:02}")
    } else if h > 0 {
        format!("{h}:{m:02}:{s:02}")
    } else {
        format!("{m}:{s:02}")
    }
}

/// A time limit as `scontrol show` prints TimeLimit/MaxTime: `00:30:00`, `1-00:00:00`,
/// `UNLIMITED`.
pub fn format_limit_scontrol(limit: Option<u32>) -> String {
    match limit {
        None => "UNLIMITED".to_string(),
        Some(m) => format_duration_hms(i64::from(m) * 60),
    }
}

/// Same as [`format_limit_scontrol`].
pub fn format_time_limit(limit: Option<u32>) -> String {
    format_limit_scontrol(limit)
}

/// A time limit as squeue prints TIME_LIMIT (`%l`): `30:00`, `1:00:00`, `1-00:00:00`,
/// `UNLIMITED`.
pub fn format_limit_squeue(limit: Option<u32>) -> String {
    match limit {
        None => "UNLIMITED".to_string(),
        Some(m) => format_elapsed(i64::from(m) * 60),
    }
}

/// A time limit as sinfo prints TIMELIMIT: `infinite`, else the compact form.
pub fn format_limit_sinfo(limit: Option<u32>) -> String {
    match limit {
        None => "infinite".to_string(),
        Some(m) => format_elapsed(i64::from(m) * 60),
    }
}

/// Local time as Slurm prints timestamps: `2026-11-22T05:37:34`.
pub fn format_timestamp(t: i64) -> String {
    if let Some(Some(f)) = USER_FORMAT.get() {
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_secs() as i64);
        return format_timestamp_as(t, f, now);
    }
    match Local.timestamp_opt(t, 0) {
        LocalResult::Single(dt) | LocalResult::Ambiguous(dt, _) => {
            dt.format("%Y-%m-%dT%H:%M:%S").to_string()
        }
        LocalResult::None => "Unknown".to_string(),
    }
}

/// [`format_timestamp`], or `none` when the time is absent (`None`, or 0 / negative,
/// which Slurm uses for "not set").
pub fn format_opt_timestamp(t: Option<i64>, none: &str) -> String {
    match t {
        Some(t) if t > 0 => format_timestamp(t),
        _ => none.to_string(),
    }
}

fn local_to_ts(input: &str, ndt: NaiveDateTime) -> Result<i64, TimeError> {
    match Local.from_local_datetime(&ndt) {
        LocalResult::Single(dt) | LocalResult::Ambiguous(dt, _) => Ok(dt.timestamp()),
        LocalResult::None => {
            // In a DST gap: the wall-clock time does not exist; move past the gap.
            let later = ndt + Duration::hours(1);
            match Local.from_local_datetime(&later) {
                LocalResult::Single(dt) | LocalResult::Ambiguous(dt, _) => Ok(dt.timestamp()),
                LocalResult::None => Err(TimeError::new(input, "nonexistent local time")),
            }
        }
    }
}

fn num(input: &str, s: &str, what: &str) -> Result<u32, TimeError> {
    if s.is_empty() || s.len() > 4 || !s.bytes().all(|b| b.is_ascii_digit()) {
        return Err(TimeError::new(input, format!("bad {what} '{s}'")));
    }
    s.parse::<u32>()
        .map_err(|_| TimeError::new(input, format!("bad {what} '{s}'")))
}

/// Parses `HH:MM[:SS]` with an optional `am`/`pm` suffix (already lower-cased).
fn parse_clock(input: &str, s: &str) -> Result<Clock, TimeError> {
    let (body, ampm) = if let Some(b) = s.strip_suffix("am") {
        (b, Some(false))
    } else if let Some(b) = s.strip_suffix("pm") {
        (b, Some(true))
    } else {
        (s, None)
    };
    let parts: Vec<&str> = body.split(':').collect();
    let (h, m, sec) = match parts.as_slice() {
        [h] if ampm.is_some() => (num(input, h, "hour")?, 0, 0),
        [h, m] => (num(input, h, "hour")?, num(input, m, "minute")?, 0),
        [h, m, sec] => (
            num(input, h, "hour")?,
            num(input, m, "minute")?,
            num(input, sec, "second")?,
        ),
        _ => return Err(TimeError::new(input, format!("bad time of day '{s}'"))),
    };
    let h = match ampm {
        None => h,
        Some(pm) => {
            if !(1..=12).contains(&h) {
                return Err(TimeError::new(input, format!("bad hour '{h}' for am/pm")));
            }
            (h % 12) + if pm { 12 } else { 0 }
        }
    };
    if h > 23 || m > 59 || sec > 59 {
        return Err(TimeError::new(input, format!("bad time of day '{s}'")));
    }
    Ok((h, m, sec))
}

fn make_date(input: &str, y: i32, m: u32, d: u32) -> Result<NaiveDate, TimeError> {
    NaiveDate::from_ymd_opt(y, m, d)
        .ok_or_else(|| TimeError::new(input, format!("invalid date {y:04}-{m:02}-{d:02}")))
}

fn two_digit_year(input: &str, s: &str) -> Result<i32, TimeError> {
    let y = num(input, s, "year")? as i32;
    match s.len() {
        2 => Ok(2000 + y),
        4 => Ok(y),
        _ => Err(TimeError::new(input, format!("bad year '{s}'"))),
    }
}

/// A date as written: with a year, or month/day only (year to be chosen).
enum DateSpec {
    Full(NaiveDate),
    MonthDay(u32, u32),
}

/// A time of day: (hour, minute, second).
type Clock = (u32, u32, u32);

/// `MM/DD[/YY]`, `MM.DD[.YY]`, `MMDD[YY]`; each optionally followed by `-HH:MM[:SS]`.
fn parse_short_date(
    input: &str,
    tok: &str,
) -> Result<Option<(DateSpec, Option<Clock>)>, TimeError> {
    let (date_part, clock) = match tok.split_once('-') {
        Some((d, c)) => (d, Some(parse_clock(input, c)?)),
        None => (tok, None),
    };
    let fields: Vec<&str> = if date_part.contains('/') {
        date_part.split('/').collect()
    } else if date_part.contains('.') {
        date_part.split('.').collect()
    } else if date_part.bytes().all(|b| b.is_ascii_digit())
        && (date_part.len() == 4 || date_part.len() == 6)
    {
        let (a, rest) = date_part.split_at(2);
        let (b, c) = rest.split_at(2);
        if c.is_empty() {
            vec![a, b]
        } else {
            vec![a, b, c]
        }
    } else {
        return Ok(None);
    };
    let spec = match fields.as_slice() {
        [m, d] => DateSpec::MonthDay(num(input, m, "month")?, num(input, d, "day")?),
        [m, d, y] => DateSpec::Full(make_date(
            input,
            two_digit_year(input, y)?,
            num(input, m, "month")?,
            num(input, d, "day")?,
        )?),
        _ => return Err(TimeError::new(input, format!("bad date '{date_part}'"))),
    };
    if let DateSpec::MonthDay(m, d) = spec {
        // Validate against a leap year so 02/29 is accepted.
        make_date(input, 2000, m, d)?;
    }
    Ok(Some((spec, clock)))
}

fn parse_relative(input: &str, rest: &str, now: i64) -> Result<i64, TimeError> {
    let rest: String = rest.chars().filter(|c| !c.is_whitespace()).collect();
    if rest.is_empty() {
        return Ok(now);
    }
    let (sign, body) = if let Some(b) = rest.strip_prefix('+') {
        (1i64, b)
    } else if let Some(b) = rest.strip_prefix('-') {
        (-1i64, b)
    } else {
        return Err(TimeError::new(input, "expected '+' or '-' after 'now'"));
    };
    let digits_end = body
        .find(|c: char| !c.is_ascii_digit())
        .unwrap_or(body.len());
    let (count_s, unit) = body.split_at(digits_end);
    if count_s.is_empty() {
        return Err(TimeError::new(input, "missing count after 'now'"));
    }
    let count: i64 = count_s
        .parse()
        .ok()
        .filter(|c: &i64| *c <= 1_000_000_000)
        .ok_or_else(|| TimeError::new(input, format!("count '{count_s}' is too large")))?;
    let mult = match unit {
        "" | "s" | "sec" | "secs" | "second" | "seconds" => 1,
        "m" | "min" | "mins" | "minute" | "minutes" => 60,
        "h" | "hr" | "hrs" | "hour" | "hours" => 3600,
        "d" | "day" | "days" => 86_400,
        "w" | "week" | "weeks" => 7 * 86_400,
        other => {
            return Err(TimeError::new(
                input,
                format!("unknown time unit '{other}'"),
            ))
        }
    };
    now.checked_add(sign * count * mult)
        .ok_or_else(|| TimeError::new(input, "time out of range"))
}

/// Parses an absolute time as `sbatch --begin`, `scontrol update StartTime=` and
/// `sacct -S` accept it, in the local time zone, relative to `now` (Unix seconds):
///
/// - `YYYY-MM-DD[THH:MM[:SS]]`
/// - `HH:MM[:SS][am|pm]` (today, or tomorrow if that time has passed)
/// - `MM/DD[/YY]`, `MM.DD[.YY]`, `MMDD[YY]`, each optionally with `-HH:MM[:SS]`
///   (without a year: this year, or next year if already past)
/// - `now[{+|-}count[seconds|minutes|hours|days|weeks]]` (seconds by default; short
///   forms `s`, `min`, `h`, `d`, `w` and singulars accepted)
/// - `midnight`, `noon`, `elevenses` (11:00), `fika` (15:00), `teatime` (16:00): the next
///   such time; `today` and `tomorrow` (00:00 of that day), which combine with a time of
///   day (`tomorrow noon`, `today 16:00`).
pub fn parse_timestamp(s: &str, now: i64) -> Result<i64, TimeError> {
    let lower = s.trim().to_ascii_lowercase();
    if lower.is_empty() {
        return Err(TimeError::new(s, "empty time"));
    }
    if let Some(rest) = lower.strip_prefix("now") {
        return parse_relative(s, rest, now);
    }
    let now_local = match Local.timestamp_opt(now, 0) {
        LocalResult::Single(dt) | LocalResult::Ambiguous(dt, _) => dt.naive_local(),
        LocalResult::None => return Err(TimeError::new(s, "current time out of range")),
    };
    let today = now_local.date();

    let mut date: Option<DateSpec> = None;
    let mut clock: Option<Clock> = None;
    let set_date = |date: &mut Option<DateSpec>, d: DateSpec| {
        if date.is_some() {
            return Err(TimeError::new(s, "more than one date"));
        }
        *date = Some(d);
        Ok(())
    };
    let set_clock = |clock: &mut Option<Clock>, c: Clock| {
        if clock.is_some() {
            return Err(TimeError::new(s, "more than one time of day"));
        }
        *clock = Some(c);
        Ok(())
    };
    let tokens: Vec<&str> = lower.split_whitespace().collect();
    let mut i = 0;
    while i < tokens.len() {
        let tok = tokens[i];
        i += 1;
        match tok {
            "today" => set_date(&mut date, DateSpec::Full(today))?,
            "tomorrow" => set_date(
                &mut date,
                DateSpec::Full(
                    today
                        .succ_opt()
                        .ok_or_else(|| TimeError::new(s, "date out of range"))?,
                ),
            )?,
            "midnight" => set_clock(&mut clock, (0, 0, 0))?,
            "noon" => set_clock(&mut clock, (12, 0, 0))?,
            "elevenses" => set_clock(&mut clock, (11, 0, 0))?,
            "fika" => set_clock(&mut clock, (15, 0, 0))?,
            "teatime" => set_clock(&mut clock, (16, 0, 0))?,
            _ => {
                // A separate "am"/"pm" word after a clock time.
                let mut tok_owned = tok.to_string();
                if (tokens.get(i) == Some(&"am") || tokens.get(i) == Some(&"pm"))
                    && tok.contains(':')
                {
                    tok_owned.push_str(tokens[i]);
                    i += 1;
                }
                let tok = tok_owned.as_str();
                let first_dash = tok.find('-');
                let looks_iso = tok.len() >= 10
                    && tok.as_bytes().get(4) == Some(&b'-')
                    && tok.as_bytes().get(7) == Some(&b'-');
                if looks_iso {
                    let (d, t) = match tok.split_once('t') {
                        Some((d, t)) => (d, Some(t)),
                        None => (tok, None),
                    };
                    let parts: Vec<&str> = d.split('-').collect();
                    let [y, m, dd] = parts.as_slice() else {
                        return Err(TimeError::new(s, format!("bad date '{d}'")));
                    };
                    if y.len() != 4 {
                        return Err(TimeError::new(s, format!("bad year '{y}'")));
                    }
                    let nd = make_date(
                        s,
                        num(s, y, "year")? as i32,
                        num(s, m, "month")?,
                        num(s, dd, "day")?,
                    )?;
                    set_date(&mut date, DateSpec::Full(nd))?;
                    if let Some(t) = t {
                        set_clock(&mut clock, parse_clock(s, t)?)?;
                    }
                } else if (tok.contains(':') && first_dash.is_none())
                    || tok
                        .strip_suffix("am")
                        .or_else(|| tok.strip_suffix("pm"))
                        .is_some_and(|h| !h.is_empty() && h.bytes().all(|b| b.is_ascii_digit()))
                {
                    set_clock(&mut clock, parse_clock(s, tok)?)?;
                } else if let Some((d, c)) = parse_short_date(s, tok)? {
                    set_date(&mut date, d)?;
                    if let Some(c) = c {
                        set_clock(&mut clock, c)?;
                    }
                } else {
                    return Err(TimeError::new(s, format!("unrecognised time '{tok}'")));
                }
            }
        }
    }

    let (h, m, sec) = clock.unwrap_or((0, 0, 0));
    let at = |d: NaiveDate| d.and_hms_opt(h, m, sec);
    let bad = || TimeError::new(s, "invalid time of day");
    let ndt = match date {
        Some(DateSpec::Full(d)) => at(d).ok_or_else(bad)?,
        Some(DateSpec::MonthDay(mo, d)) => {
            let mut found = None;
            // This year if not yet past (and valid, e.g. Feb 29), else the next ones.
            for year in today.year()..today.year().saturating_add(8) {
                if let Some(nd) = NaiveDate::from_ymd_opt(year, mo, d) {
                    let cand = at(nd).ok_or_else(bad)?;
                    if cand >= now_local {
                        found = Some(cand);
                        break;
                    }
                }
            }
            found.ok_or_else(|| TimeError::new(s, "invalid date"))?
        }
        None => {
            let cand = at(today).ok_or_else(bad)?;
            if cand < now_local {
                let next = today
                    .succ_opt()
                    .ok_or_else(|| TimeError::new(s, "date out of range"))?;
                at(next).ok_or_else(bad)?
            } else {
                cand
            }
        }
    };
    local_to_ts(s, ndt)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn local(y: i32, mo: u32, d: u32, h: u32, mi: u32, s: u32) -> i64 {
        let ndt = NaiveDate::from_ymd_opt(y, mo, d)
            .and_then(|d| d.and_hms_opt(h, mi, s))
            .expect("valid test date");
        local_to_ts("test", ndt).expect("valid local time")
    }

    #[test]
    fn slurm_time_format_relative_and_strftime() {
        // A Wednesday (2026-11-25) at noon.
        let now = local(2026, 11, 25, 12, 0, 0);
        let f = |t: i64| format_timestamp_as(t, "relative", now);
        assert_eq!(f(local(2026, 11, 25, 8, 5, 9)), "08:05:09");
        assert_eq!(f(local(2026, 11, 26, 14, 30, 0)), "Tomorr 14:30");
        assert_eq!(f(local(2026, 11, 24, 23, 0, 0)), "Ystday 23:00");
        assert_eq!(f(local(2026, 11, 28, 9, 0, 0)), "Sat 09:00");
        assert_eq!(f(local(2026, 4, 25, 9, 0, 0)), "25 Apr 09:00");
        assert_eq!(f(local(2012, 6, 6, 9, 0, 0)), "6 Jun 2012");
        assert_eq!(
            format_timestamp_as(local(2026, 11, 23, 12, 34, 56), "%a %T", now),
            "Mon 12:34:56"
        );
        assert_eq!(format_timestamp_as(now, "%s", now), now.to_string());
        // What is kept: nothing for standard, and a format chrono cannot
        // read never reaches it (it would fail when printed).
        assert_eq!(checked_format("standard"), None);
        assert_eq!(checked_format(""), None);
        assert_eq!(checked_format("%Q %"), None);
        assert_eq!(checked_format("relative").as_deref(), Some("relative"));
        assert_eq!(checked_format("%F %T").as_deref(), Some("%F %T"));
    }

    #[test]
    fn time_limits() {
        assert_eq!(parse_time_limit("30").unwrap(), Some(30));
        assert_eq!(parse_time_limit("0").unwrap(), Some(0));
        assert_eq!(parse_time_limit("0:30").unwrap(), Some(1));
        assert_eq!(parse_time_limit("5:00").unwrap(), Some(5));
        assert_eq!(parse_time_limit("5:01").unwrap(), Some(6));
        assert_eq!(parse_time_limit("1:00:00").unwrap(), Some(60));
        assert_eq!(parse_time_limit("2:30:30").unwrap(), Some(151));
        assert_eq!(parse_time_limit("1-0").unwrap(), Some(1440));
        assert_eq!(parse_time_limit("1-2").unwrap(), Some(1560));
        assert_eq!(parse_time_limit("1-2:30").unwrap(), Some(1590));
        assert_eq!(parse_time_limit("1-02:03:04").unwrap(), Some(1564));
        assert_eq!(parse_time_limit(" 10 ").unwrap(), Some(10));
        for u in ["UNLIMITED", "unlimited", "Infinite", "INFINITE", "-1"] {
            assert_eq!(parse_time_limit(u).unwrap(), None, "{u}");
        }
    }

    #[test]
    fn time_limit_errors() {
        for bad in [
            "",
            "abc",
            "1:2:3:4",
            "1-2-3",
            "1-2:3:4:5",
            "-5",
            "1:",
            ":1",
            "1.5",
            "1h",
            "99999999999",
            "1-",
        ] {
            let err = parse_time_limit(bad).expect_err(bad);
            assert_eq!(err.input, bad);
            assert!(err.to_string().contains(&format!("'{bad}'")), "{err}");
        }
    }

    #[test]
    fn limit_formats() {
        assert_eq!(format_limit_scontrol(None), "UNLIMITED");
        assert_eq!(format_limit_scontrol(Some(30)), "00:30:00");
        assert_eq!(format_limit_scontrol(Some(60)), "01:00:00");
        assert_eq!(format_limit_scontrol(Some(1440)), "1-00:00:00");
        assert_eq!(format_limit_scontrol(Some(1563)), "1-02:03:00");
        assert_eq!(format_time_limit(Some(30)), "00:30:00");
        assert_eq!(format_limit_squeue(None), "UNLIMITED");
        assert_eq!(format_limit_squeue(Some(30)), "30:00");
        assert_eq!(format_limit_squeue(Some(1)), "1:00");
        assert_eq!(format_limit_squeue(Some(60)), "1:00:00");
        assert_eq!(format_limit_squeue(Some(1440)), "1-00:00:00");
        assert_eq!(format_limit_sinfo(None), "infinite");
        assert_eq!(format_limit_sinfo(Some(30)), "30:00");
        assert_eq!(format_limit_sinfo(Some(2880)), "2-00:00:00");
        assert_eq!(format_limit_sinfo(Some(0)), "0:00");
    }

    #[test]
    fn elapsed_formats() {
        assert_eq!(format_elapsed(0), "0:00");
        assert_eq!(format_elapsed(5), "0:05");
        assert_eq!(format_elapsed(65), "1:05");
        assert_eq!(format_elapsed(600), "10:00");
        assert_eq!(format_elapsed(3723), "1:02:03");
        assert_eq!(format_elapsed(93_784), "1-02:03:04");
        assert_eq!(format_elapsed(-5), "0:00");
        assert_eq!(format_duration_hms(0), "00:00:00");
        assert_eq!(format_duration_hms(5), "00:00:05");
        assert_eq!(format_duration_hms(3723), "01:02:03");
        assert_eq!(format_duration_hms(93_784), "1-02:03:04");
        assert_eq!(format_duration_hms(-1), "INVALID");
    }

    #[test]
    fn timestamps_format() {
        let t = local(2026, 11, 22, 5, 37, 34);
        assert_eq!(format_timestamp(t), "2026-11-22T05:37:34");
        assert_eq!(
            format_opt_timestamp(Some(t), "Unknown"),
            "2026-11-22T05:37:34"
        );
        assert_eq!(format_opt_timestamp(None, "Unknown"), "Unknown");
        assert_eq!(format_opt_timestamp(Some(0), "N/A"), "N/A");
    }

    #[test]
    fn parse_absolute() {
        let now = local(2026, 11, 22, 10, 0, 0);
        assert_eq!(
            parse_timestamp("2027-01-20T12:34:56", now).unwrap(),
            local(2027, 1, 20, 12, 34, 56)
        );
        assert_eq!(
            parse_timestamp("2027-01-20T12:34", now).unwrap(),
            local(2027, 1, 20, 12, 34, 0)
        );
        assert_eq!(
            parse_timestamp("2027-01-20", now).unwrap(),
            local(2027, 1, 20, 0, 0, 0)
        );
        // Past dates are kept as written.
        assert_eq!(
            parse_timestamp("2020-02-29", now).unwrap(),
            local(2020, 2, 29, 0, 0, 0)
        );
    }

    #[test]
    fn parse_time_of_day() {
        let now = local(2026, 11, 22, 10, 0, 0);
        assert_eq!(
            parse_timestamp("16:00", now).unwrap(),
            local(2026, 11, 22, 16, 0, 0)
        );
        assert_eq!(
            parse_timestamp("16:00:30", now).unwrap(),
            local(2026, 11, 22, 16, 0, 30)
        );
        // Already past today → tomorrow.
        assert_eq!(
            parse_timestamp("09:00", now).unwrap(),
            local(2026, 11, 23, 9, 0, 0)
        );
        assert_eq!(
            parse_timestamp("10:00", now).unwrap(),
            local(2026, 11, 22, 10, 0, 0)
        );
        assert_eq!(
            parse_timestamp("4pm", now).unwrap(),
            local(2026, 11, 22, 16, 0, 0)
        );
        assert_eq!(
            parse_timestamp("4:30PM", now).unwrap(),
            local(2026, 11, 22, 16, 30, 0)
        );
        assert_eq!(
            parse_timestamp("9:00 am", now).unwrap(),
            local(2026, 11, 23, 9, 0, 0)
        );
        assert_eq!(
            parse_timestamp("12am", now).unwrap(),
            local(2026, 11, 23, 0, 0, 0)
        );
        assert_eq!(
            parse_timestamp("12pm", now).unwrap(),
            local(2026, 11, 22, 12, 0, 0)
        );
    }

    #[test]
    fn parse_keywords() {
        let now = local(2026, 11, 22, 12, 30, 0);
        assert_eq!(
            parse_timestamp("midnight", now).unwrap(),
            local(2026, 11, 23, 0, 0, 0)
        );
        assert_eq!(
            parse_timestamp("noon", now).unwrap(),
            local(2026, 11, 23, 12, 0, 0)
        );
        assert_eq!(
            parse_timestamp("elevenses", now).unwrap(),
            local(2026, 11, 23, 11, 0, 0)
        );
        assert_eq!(
            parse_timestamp("fika", now).unwrap(),
            local(2026, 11, 22, 15, 0, 0)
        );
        assert_eq!(
            parse_timestamp("TeaTime", now).unwrap(),
            local(2026, 11, 22, 16, 0, 0)
        );
        assert_eq!(
            parse_timestamp("today", now).unwrap(),
            local(2026, 11, 22, 0, 0, 0)
        );
        assert_eq!(
            parse_timestamp("tomorrow", now).unwrap(),
            local(2026, 11, 23, 0, 0, 0)
        );
        assert_eq!(
            parse_timestamp("tomorrow noon", now).unwrap(),
            local(2026, 11, 23, 12, 0, 0)
        );
        assert_eq!(
            parse_timestamp("teatime tomorrow", now).unwrap(),
            local(2026, 11, 23, 16, 0, 0)
        );
        assert_eq!(
            parse_timestamp("today 08:00", now).unwrap(),
            local(2026, 11, 22, 8, 0, 0)
        );
    }

    #[test]
    fn parse_now_relative() {
        let now = 1_800_000_000;
        assert_eq!(parse_timestamp("now", now).unwrap(), now);
        assert_eq!(parse_timestamp("NOW", now).unwrap(), now);
        assert_eq!(parse_timestamp("now+60", now).unwrap(), now + 60);
        assert_eq!(parse_timestamp("now+60seconds", now).unwrap(), now + 60);
        assert_eq!(parse_timestamp("now+1s", now).unwrap(), now + 1);
        assert_eq!(parse_timestamp("now+5minutes", now).unwrap(), now + 300);
        assert_eq!(parse_timestamp("now+5min", now).unwrap(), now + 300);
        assert_eq!(parse_timestamp("now+1hour", now).unwrap(), now + 3600);
        assert_eq!(parse_timestamp("now+2hours", now).unwrap(), now + 7200);
        assert_eq!(parse_timestamp("now+2h", now).unwrap(), now + 7200);
        assert_eq!(parse_timestamp("now+1day", now).unwrap(), now + 86_400);
        assert_eq!(parse_timestamp("now+3d", now).unwrap(), now + 3 * 86_400);
        assert_eq!(parse_timestamp("now+1week", now).unwrap(), now + 7 * 86_400);
        assert_eq!(parse_timestamp("now+2w", now).unwrap(), now + 14 * 86_400);
        assert_eq!(parse_timestamp("now-1hour", now).unwrap(), now - 3600);
        assert_eq!(parse_timestamp("now + 1 hour", now).unwrap(), now + 3600);
    }

    #[test]
    fn parse_short_dates() {
        let now = local(2026, 11, 22, 10, 0, 0);
        assert_eq!(
            parse_timestamp("12/25", now).unwrap(),
            local(2026, 12, 25, 0, 0, 0)
        );
        // Already past this year → next year.
        assert_eq!(
            parse_timestamp("01/15", now).unwrap(),
            local(2027, 1, 15, 0, 0, 0)
        );
        assert_eq!(
            parse_timestamp("01/15/28", now).unwrap(),
            local(2028, 1, 15, 0, 0, 0)
        );
        assert_eq!(
            parse_timestamp("12/25-08:30", now).unwrap(),
            local(2026, 12, 25, 8, 30, 0)
        );
        assert_eq!(
            parse_timestamp("12.25.27", now).unwrap(),
            local(2027, 12, 25, 0, 0, 0)
        );
        assert_eq!(
            parse_timestamp("1225", now).unwrap(),
            local(2026, 12, 25, 0, 0, 0)
        );
        assert_eq!(
            parse_timestamp("122527", now).unwrap(),
            local(2027, 12, 25, 0, 0, 0)
        );
        assert_eq!(
            parse_timestamp("122527-13:00:05", now).unwrap(),
            local(2027, 12, 25, 13, 0, 5)
        );
        assert_eq!(
            parse_timestamp("12/25 08:30", now).unwrap(),
            local(2026, 12, 25, 8, 30, 0)
        );
        // 02/29: next leap year.
        assert_eq!(
            parse_timestamp("02/29", now).unwrap(),
            local(2028, 2, 29, 0, 0, 0)
        );
    }

    #[test]
    fn parse_errors() {
        let now = local(2026, 11, 22, 10, 0, 0);
        for bad in [
            "",
            "garbage",
            "now+",
            "now+abc",
            "now+5parsecs",
            "now*5",
            "25:00",
            "12:60",
            "2026-13-01",
            "2026-02-30",
            "2026-02-03T25:00",
            "13/01",
            "02/30/27",
            "13pm",
            "noon noon",
            "today tomorrow",
            "12/25 01/01",
            "1:2:3:4",
            "12:00xm",
        ] {
            let err = parse_timestamp(bad, now).expect_err(bad);
            assert_eq!(err.input, bad);
        }
    }
}
