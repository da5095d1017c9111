//! The retraining schedule: a cron expression read in a time zone (default `0 2 * * Sat` in
//! America/New_York: Saturdays at 02:00 New York time), asked by the engine's clock. Because the question is
//! "did a fire time pass between the last check and now", a replay crosses weekends and retrains in
//! simulated time exactly as the daemon does in real time.
//!
//! Expressions are the usual five fields, `minute hour day-of-month month day-of-week`, with day-of-week
//! 0-7 (0 and 7 = Sunday) or names (`Sat`, `Mon-Fri`); parsing is the `cron` crate's.

use chrono::{DateTime, Utc};
use chrono_tz::Tz;
use std::str::FromStr;

#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum ScheduleError {
    #[error(
        "schedule {spec:?}: {reason}; write five fields, minute hour day-of-month month day-of-week, e.g. \"0 2 * * Sat\""
    )]
    Cron { spec: String, reason: String },
    #[error("time zone {0:?} is not an IANA zone name such as \"America/New_York\"")]
    Zone(String),
    #[error("day of week {0} is out of range 0-7")]
    DayOfWeek(usize),
}

#[derive(Debug, Clone)]
pub struct Schedule {
    spec: String,
    tz: Tz,
    cron: cron::Schedule,
}

impl PartialEq for Schedule {
    fn eq(&self, other: &Self) -> bool {
        self.spec == other.spec && self.tz == other.tz
    }
}

impl Schedule {
    pub const DEFAULT_SPEC: &'static str = "0 2 * * Sat";
    pub const DEFAULT_ZONE: &'static str = "America/New_York";

    pub fn parse(spec: &str, zone: &str) -> Result<Schedule, ScheduleError> {
        let tz = Tz::from_str(zone).map_err(|_| ScheduleError::Zone(zone.to_string()))?;
        let fields: Vec<&str> = spec.split_whitespace().collect();
        let err = |reason: String| ScheduleError::Cron { spec: spec.to_string(), reason };
        if fields.len() != 5 {
            return Err(err(format!("{} fields", fields.len())));
        }
        let dow = day_of_week_names(fields[4]).map_err(|e| err(e.to_string()))?;
        // The crate's form: seconds first, year last.
        let full = format!("0 {} {} {} {} {dow} *", fields[0], fields[1], fields[2], fields[3]);
        let cron = cron::Schedule::from_str(&full).map_err(|e| err(e.to_string()))?;
        Ok(Schedule { spec: spec.to_string(), tz, cron })
    }

    pub fn spec(&self) -> &str {
        &self.spec
    }

    pub fn zone(&self) -> Tz {
        self.tz
    }

    /// The first fire time strictly after `t`.
    pub fn next_after(&self, t: DateTime<Utc>) -> Option<DateTime<Utc>> {
        self.cron.after(&t.with_timezone(&self.tz)).next().map(|d| d.with_timezone(&Utc))
    }

    /// The latest fire time in `(since, now]`, if any: the question the engine asks at every bar.
    pub fn fired_between(&self, since: DateTime<Utc>, now: DateTime<Utc>) -> Option<DateTime<Utc>> {
        let mut last = None;
        let mut t = since;
        while let Some(next) = self.next_after(t) {
            if next > now {
                break;
            }
            last = Some(next);
            t = next;
        }
        last
    }
}

/// Standard cron numbers the days 0-7 from Sunday; the crate numbers them 1-7. Numbers become names.
fn day_of_week_names(field: &str) -> Result<String, ScheduleError> {
    const NAMES: [&str; 8] = ["Sun", "Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun"];
    let (body, step) = match field.split_once('/') {
        Some((b, s)) => (b, Some(s)),
        None => (field, None),
    };
    let mut out = String::new();
    for (i, item) in body.split(',').enumerate() {
        if i > 0 {
            out.push(',');
        }
        for (j, part) in item.split('-').enumerate() {
            if j > 0 {
                out.push('-');
            }
            match part.parse::<usize>() {
                Ok(n) if n < NAMES.len() => out.push_str(NAMES[n]),
                Ok(n) => return Err(ScheduleError::DayOfWeek(n)),
                Err(_) => out.push_str(part),
            }
        }
    }
    if let Some(s) = step {
        out.push('/');
        out.push_str(s);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::{Datelike, TimeZone, Timelike, Weekday};

    fn utc(y: i32, m: u32, d: u32, h: u32, min: u32) -> DateTime<Utc> {
        Utc.with_ymd_and_hms(y, m, d, h, min, 0).single().unwrap()
    }

    #[test]
    fn default_is_saturday_two_am_new_york_across_dst() {
        let s = Schedule::parse(Schedule::DEFAULT_SPEC, Schedule::DEFAULT_ZONE).unwrap();
        // Winter (EST, UTC-5): Saturday 2026-01-10 02:00 New York = 07:00 UTC.
        let n = s.next_after(utc(2026, 1, 7, 12, 0)).unwrap();
        assert_eq!(n, utc(2026, 1, 10, 7, 0));
        // Summer (EDT, UTC-4): Saturday 2026-07-11 02:00 New York = 06:00 UTC.
        let n = s.next_after(utc(2026, 7, 8, 12, 0)).unwrap();
        assert_eq!(n, utc(2026, 7, 11, 6, 0));
        let ny = n.with_timezone(&s.zone());
        assert_eq!((ny.weekday(), ny.hour(), ny.minute()), (Weekday::Sat, 2, 0));
    }

    #[test]
    fn numeric_days_follow_standard_cron() {
        for (spec, day) in [("0 2 * * 6", Weekday::Sat), ("0 2 * * 0", Weekday::Sun), ("0 2 * * 7", Weekday::Sun)] {
            let s = Schedule::parse(spec, "UTC").unwrap();
            assert_eq!(s.next_after(utc(2026, 3, 2, 0, 0)).unwrap().weekday(), day, "{spec}");
        }
        let weekdays = Schedule::parse("30 17 * * 1-5", "UTC").unwrap();
        let fri = weekdays.next_after(utc(2026, 3, 6, 12, 0)).unwrap();
        assert_eq!(fri, utc(2026, 3, 6, 17, 30));
        assert_eq!(weekdays.next_after(fri).unwrap(), utc(2026, 3, 9, 17, 30), "skips the weekend");
    }

    #[test]
    fn fired_between_sees_a_weekend_crossed_by_a_replay() {
        let s = Schedule::parse(Schedule::DEFAULT_SPEC, Schedule::DEFAULT_ZONE).unwrap();
        // Friday's close to Monday's close of daily bars: one retrain, at Saturday 07:00 UTC.
        assert_eq!(s.fired_between(utc(2026, 1, 9, 21, 0), utc(2026, 1, 12, 21, 0)), Some(utc(2026, 1, 10, 7, 0)));
        assert_eq!(s.fired_between(utc(2026, 1, 12, 21, 0), utc(2026, 1, 13, 21, 0)), None);
        // A gap of three weeks reports the latest fire time only.
        assert_eq!(s.fired_between(utc(2026, 1, 1, 0, 0), utc(2026, 1, 22, 0, 0)), Some(utc(2026, 1, 17, 7, 0)));
    }

    #[test]
    fn bad_expressions_and_zones_are_named() {
        let e = Schedule::parse("0 2 * *", "UTC").unwrap_err().to_string();
        assert!(e.contains("\"0 2 * *\": 4 fields") && e.contains("minute hour"), "{e}");
        assert!(Schedule::parse("0 25 * * Sat", "UTC").is_err());
        assert!(Schedule::parse("0 2 * * 9", "UTC").unwrap_err().to_string().contains("out of range 0-7"));
        let e = Schedule::parse("0 2 * * Sat", "Mars/Olympus").unwrap_err().to_string();
        assert!(e.contains("Mars/Olympus"), "{e}");
    }
}
