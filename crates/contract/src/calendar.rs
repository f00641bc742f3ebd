//! The one calendar of the workspace: proleptic Gregorian dates to and from days since
//! 1970-01-01 (Howard Hinnant's algorithms). Every reader and writer of dates uses it — the
//! journal's times (`closedloop_link::clock`), `closedloop audit --since`, the OTLP export and an
//! MQTT payload's own time (`closedloop_mqtt::payload_time`) — rather than a copy.

/// A proleptic Gregorian date to days since 1970-01-01 (Howard Hinnant's algorithm), `None` for
/// a month outside 1–12 or a day the month lacks.
pub fn days_from_civil(y: i64, m: u32, d: u32) -> Option<i64> {
    if !(1..=12).contains(&m) {
        return None;
    }
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y.rem_euclid(400);
    let mp = (m + 9) % 12;
    let doy = (153 * mp as i64 + 2) / 5 + d as i64 - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    let days = era * 146_097 + doe - 719_468;
    let back = civil_from_days(days);
    (d >= 1 && back.1 == m && back.2 == d).then_some(days)
}

/// Days since 1970-01-01 to a proleptic Gregorian date (Howard Hinnant's algorithm).
pub fn civil_from_days(z: i64) -> (i64, u32, u32) {
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn days_from_civil_counts_from_the_epoch_and_refuses_days_that_do_not_exist() {
        assert_eq!(days_from_civil(1970, 1, 1), Some(0));
        assert_eq!(days_from_civil(1969, 12, 31), Some(-1));
        assert_eq!(days_from_civil(2000, 2, 29), Some(11_016));
        for (y, m, d) in [
            (2026, 2, 29),
            (2026, 4, 31),
            (2026, 13, 1),
            (2026, 0, 1),
            (2026, 1, 0),
        ] {
            assert_eq!(days_from_civil(y, m, d), None, "{y}-{m}-{d}");
        }
    }

    #[test]
    fn every_day_of_four_centuries_goes_there_and_back() {
        for z in -146_097..2 * 146_097 {
            let (y, m, d) = civil_from_days(z);
            assert_eq!(days_from_civil(y, m, d), Some(z), "{y}-{m}-{d}");
        }
    }
}
