//! Python formatting that DeerFlow's observable strings depend on.

use std::time::{SystemTime, UNIX_EPOCH};

/// `datetime.now(UTC).isoformat()`: `2026-01-02T03:04:05.123456+00:00`, no fraction when the
/// microseconds are zero.
pub fn utc_isoformat(t: SystemTime) -> String {
    let d = t.duration_since(UNIX_EPOCH).unwrap_or_default();
    let secs = d.as_secs() as i64;
    let (days, rem) = (secs.div_euclid(86_400), secs.rem_euclid(86_400));
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
    let micros = d.subsec_micros();
    let frac = if micros == 0 { String::new() } else { format!(".{micros:06}") };
    format!("{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}{frac}+00:00", rem / 3600, rem % 3600 / 60, rem % 60)
}
