//! Python formatting that DeerFlow's observable strings depend on.

use std::time::{SystemTime, UNIX_EPOCH};

/// A UTC time's calendar fields, as `datetime.fromtimestamp(t, UTC)` holds them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct UtcFields {
    /// The year.
    pub year: i64,
    /// 1 to 12.
    pub month: i64,
    /// 1 to 31.
    pub day: i64,
    /// 0 to 23.
    pub hour: u64,
    /// 0 to 59.
    pub minute: u64,
    /// 0 to 59.
    pub second: u64,
    /// 0 to 999999.
    pub microsecond: u32,
}

impl UtcFields {
    /// The fields of `t` (a time before the epoch counts as the epoch).
    pub fn of(t: SystemTime) -> Self {
        let d = t.duration_since(UNIX_EPOCH).unwrap_or_default();
        let secs = d.as_secs() as i64;
        let (days, rem) = (secs.div_euclid(86_400), secs.rem_euclid(86_400) as u64);
        // Howard Hinnant's civil_from_days.
        let z = days + 719_468;
        let era = z.div_euclid(146_097);
        let doe = z - era * 146_097;
        let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
        let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
        let mp = (5 * doy + 2) / 153;
        let day = doy - (153 * mp + 2) / 5 + 1;
        let month = if mp < 10 { mp + 3 } else { mp - 9 };
        let year = yoe + era * 400 + i64::from(month <= 2);
        Self {
            year,
            month,
            day,
            hour: rem / 3600,
            minute: rem % 3600 / 60,
            second: rem % 60,
            microsecond: d.subsec_micros(),
        }
    }
}

/// `datetime.now(UTC).isoformat()`: `2026-01-02T03:04:05.123456+00:00`, no fraction when the
/// microseconds are zero.
pub fn utc_isoformat(t: SystemTime) -> String {
    let UtcFields { year, month, day, hour, minute, second, microsecond } = UtcFields::of(t);
    let frac = if microsecond == 0 { String::new() } else { format!(".{microsecond:06}") };
    format!("{year:04}-{month:02}-{day:02}T{hour:02}:{minute:02}:{second:02}{frac}+00:00")
}

/// `t.strftime("%Y%m%d-%H%M%S")` in UTC.
pub fn utc_compact_stamp(t: SystemTime) -> String {
    let UtcFields { year, month, day, hour, minute, second, .. } = UtcFields::of(t);
    format!("{year:04}{month:02}{day:02}-{hour:02}{minute:02}{second:02}")
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    #[test]
    fn formats_follow_python() {
        // datetime(2026, 1, 2, 3, 4, 5, 123456, tzinfo=UTC) and datetime(2000, 2, 29, 23, 59, 59,
        // tzinfo=UTC): .isoformat() and .strftime("%Y%m%d-%H%M%S"), from CPython 3.11.
        let t = UNIX_EPOCH + Duration::from_micros(1_767_323_045_123_456);
        assert_eq!(utc_isoformat(t), "2026-01-02T03:04:05.123456+00:00");
        assert_eq!(utc_compact_stamp(t), "20260102-030405");
        let t = UNIX_EPOCH + Duration::from_secs(951_868_799);
        assert_eq!(utc_isoformat(t), "2000-02-29T23:59:59+00:00");
        assert_eq!(utc_compact_stamp(t), "20000229-235959");
    }
}
