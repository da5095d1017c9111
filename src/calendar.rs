//! The US stock exchange calendar: which New York dates are trading days and when each session opens and
//! closes, early closes included. Two sources:
//! - **Alpaca's** `GET /v2/calendar` (the daemon reads a year of it at start, keeps it in the store and uses
//!   the stored copy when Alpaca cannot be reached): authoritative for the dates it covers;
//! - **the shipped table** below, for any date outside that span (replays, backtests, a daemon that has
//!   never reached Alpaca): weekdays, less the NYSE holidays of 2024-2027, with the NYSE's 13:00 early
//!   closes. Dates are facts from the NYSE's published holiday schedule (nyse.com, "Holidays & Trading
//!   Hours"); past 2027 only weekends are known, said once when such a date is first asked for.
//!
//! Times are New York wall-clock times. The regular session is 09:30 to its close (16:00, or 13:00 on an
//! early close); the extended session of a trading day runs 04:00 to 20:00 (to 17:00 on an early close).

use chrono::{DateTime, Datelike, NaiveDate, NaiveTime, TimeZone, Timelike, Utc, Weekday};
use chrono_tz::America::New_York;
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};

/// Which session window applies to stock orders.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Session {
    Regular,
    Extended,
}

impl Session {
    pub fn name(self) -> &'static str {
        match self {
            Session::Regular => "regular",
            Session::Extended => "extended",
        }
    }
}

/// One trading day's regular session, New York times.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Hours {
    pub open: NaiveTime,
    pub close: NaiveTime,
}

const fn hm(h: u32, m: u32) -> NaiveTime {
    match NaiveTime::from_hms_opt(h, m, 0) {
        Some(t) => t,
        None => NaiveTime::MIN,
    }
}

pub(crate) const REGULAR_OPEN: NaiveTime = hm(9, 30);
/// The regular session's close, New York time (an early close is 13:00).
pub const REGULAR_CLOSE: NaiveTime = hm(16, 0);
const EARLY_CLOSE: NaiveTime = hm(13, 0);
const EXTENDED_OPEN: NaiveTime = hm(4, 0);
const EXTENDED_CLOSE: NaiveTime = hm(20, 0);
/// After an early close the extended session ends four hours later (17:00), as on a regular day.
const EXTENDED_AFTER_CLOSE: chrono::Duration = chrono::Duration::hours(4);

/// NYSE full-day closures, 2024-2027 (weekdays only).
const HOLIDAYS: &[(i32, u32, u32)] = &[
    (2024, 1, 1),
    (2024, 1, 15),
    (2024, 2, 19),
    (2024, 3, 29),
    (2024, 5, 27),
    (2024, 6, 19),
    (2024, 7, 4),
    (2024, 9, 2),
    (2024, 11, 28),
    (2024, 12, 25),
    (2025, 1, 1),
    (2025, 1, 9),
    (2025, 1, 20),
    (2025, 2, 17),
    (2025, 4, 18),
    (2025, 5, 26),
    (2025, 6, 19),
    (2025, 7, 4),
    (2025, 9, 1),
    (2025, 11, 27),
    (2025, 12, 25),
    (2026, 1, 1),
    (2026, 1, 19),
    (2026, 2, 16),
    (2026, 4, 3),
    (2026, 5, 25),
    (2026, 6, 19),
    (2026, 7, 3),
    (2026, 9, 7),
    (2026, 11, 26),
    (2026, 12, 25),
    (2027, 1, 1),
    (2027, 1, 18),
    (2027, 2, 15),
    (2027, 3, 26),
    (2027, 5, 31),
    (2027, 6, 18),
    (2027, 7, 5),
    (2027, 9, 6),
    (2027, 11, 25),
    (2027, 12, 24),
];

/// NYSE 13:00 early closes, 2024-2027.
const EARLY_CLOSES: &[(i32, u32, u32)] = &[
    (2024, 7, 3),
    (2024, 11, 29),
    (2024, 12, 24),
    (2025, 7, 3),
    (2025, 11, 28),
    (2025, 12, 24),
    (2026, 11, 27),
    (2026, 12, 24),
    (2027, 11, 26),
];

/// The last year the shipped table knows.
const TABLE_LAST_YEAR: i32 = 2027;

fn date(&(y, m, d): &(i32, u32, u32)) -> Option<NaiveDate> {
    NaiveDate::from_ymd_opt(y, m, d)
}

static PAST_TABLE_SAID: AtomicBool = AtomicBool::new(false);

/// The calendar: Alpaca's days over the span they cover, the shipped table elsewhere.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Calendar {
    /// Trading days of the covered span; a date of the span absent here is a closed day.
    days: BTreeMap<NaiveDate, Hours>,
    span: Option<(NaiveDate, NaiveDate)>,
}

impl Calendar {
    /// The shipped table only.
    pub fn shipped() -> Self {
        Calendar::default()
    }

    /// Alpaca's trading days over `span` (inclusive), the shipped table outside it.
    pub fn from_days(span: (NaiveDate, NaiveDate), days: impl IntoIterator<Item = (NaiveDate, Hours)>) -> Self {
        let days = days.into_iter().filter(|(d, _)| (span.0..=span.1).contains(d)).collect();
        Calendar { days, span: Some(span) }
    }

    /// The span Alpaca's days cover, if any.
    pub fn span(&self) -> Option<(NaiveDate, NaiveDate)> {
        self.span
    }

    /// The covered days, for storing.
    pub fn days(&self) -> impl Iterator<Item = (NaiveDate, Hours)> + '_ {
        self.days.iter().map(|(d, h)| (*d, *h))
    }

    /// The regular session of a New York date, or `None` when the exchange is closed that day.
    pub fn hours(&self, day: NaiveDate) -> Option<Hours> {
        if let Some((from, to)) = self.span
            && (from..=to).contains(&day)
        {
            return self.days.get(&day).copied();
        }
        shipped_hours(day)
    }

    /// Whether a stock order may be sent at `now` in `session` (open inclusive, close exclusive).
    pub fn is_open(&self, now: DateTime<Utc>, session: Session) -> bool {
        let ny = now.with_timezone(&New_York);
        let Some(h) = self.hours(ny.date_naive()) else { return false };
        let (open, close) = match session {
            Session::Regular => (h.open, h.close),
            Session::Extended => (EXTENDED_OPEN, (h.close + EXTENDED_AFTER_CLOSE).min(EXTENDED_CLOSE)),
        };
        let t = NaiveTime::from_hms_opt(ny.hour(), ny.minute(), ny.second()).unwrap_or(NaiveTime::MIN);
        t >= open && t < close
    }

    /// The regular session (open, close, UTC) in progress at `t` or the next one after it; `None` when
    /// no session starts within three weeks (past what the table knows).
    pub fn session_at_or_after(&self, t: DateTime<Utc>) -> Option<(DateTime<Utc>, DateTime<Utc>)> {
        let first = t.with_timezone(&New_York).date_naive();
        first.iter_days().take(21).find_map(|day| {
            let h = self.hours(day)?;
            let at = |time: NaiveTime| New_York.from_local_datetime(&day.and_time(time)).earliest().map(|d| d.to_utc());
            let (open, close) = (at(h.open)?, at(h.close)?);
            (close > t).then_some((open, close))
        })
    }

    /// The sessions closing before 16:00 among `from..=to` (where a stock's daily bar closes early).
    pub fn early_closes(&self, from: NaiveDate, to: NaiveDate) -> BTreeMap<NaiveDate, NaiveTime> {
        from.iter_days()
            .take_while(|d| *d <= to)
            .filter_map(|d| self.hours(d).filter(|h| h.close < REGULAR_CLOSE).map(|h| (d, h.close)))
            .collect()
    }
}

fn shipped_hours(day: NaiveDate) -> Option<Hours> {
    if matches!(day.weekday(), Weekday::Sat | Weekday::Sun) {
        return None;
    }
    if day.year() > TABLE_LAST_YEAR && !PAST_TABLE_SAID.swap(true, Ordering::Relaxed) {
        log::warn!(
            "calendar: {day} is past the shipped holiday table (to {TABLE_LAST_YEAR}) and Alpaca's calendar: every weekday counts as a full trading day"
        );
    }
    if HOLIDAYS.iter().filter_map(date).any(|h| h == day) {
        return None;
    }
    let close = if EARLY_CLOSES.iter().filter_map(date).any(|e| e == day) { EARLY_CLOSE } else { REGULAR_CLOSE };
    Some(Hours { open: REGULAR_OPEN, close })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ny(y: i32, mo: u32, d: u32, h: u32, mi: u32) -> DateTime<Utc> {
        New_York.with_ymd_and_hms(y, mo, d, h, mi, 0).single().unwrap().to_utc()
    }

    fn day(y: i32, m: u32, d: u32) -> NaiveDate {
        NaiveDate::from_ymd_opt(y, m, d).unwrap()
    }

    #[test]
    fn the_shipped_table_knows_holidays_early_closes_and_weekends() {
        let c = Calendar::shipped();
        // Thanksgiving 2026 closed, the Friday after closes at 13:00, the Monday after is a full day.
        assert!(!c.is_open(ny(2026, 11, 26, 11, 0), Session::Regular));
        assert!(!c.is_open(ny(2026, 11, 26, 11, 0), Session::Extended));
        assert!(c.is_open(ny(2026, 11, 27, 12, 59), Session::Regular));
        assert!(!c.is_open(ny(2026, 11, 27, 13, 0), Session::Regular));
        assert!(c.is_open(ny(2026, 11, 27, 16, 59), Session::Extended));
        assert!(!c.is_open(ny(2026, 11, 27, 17, 0), Session::Extended));
        assert!(c.is_open(ny(2026, 11, 30, 15, 59), Session::Regular));
        assert!(!c.is_open(ny(2026, 11, 30, 16, 0), Session::Regular));
        assert!(!c.is_open(ny(2026, 11, 28, 12, 0), Session::Regular), "a Saturday");
        // Regular and extended windows on a normal day, in standard and daylight time.
        for (y, m, d) in [(2024, 3, 11), (2024, 1, 8)] {
            assert!(!c.is_open(ny(y, m, d, 9, 29), Session::Regular));
            assert!(c.is_open(ny(y, m, d, 9, 30), Session::Regular));
            assert!(c.is_open(ny(y, m, d, 4, 0), Session::Extended));
            assert!(!c.is_open(ny(y, m, d, 20, 0), Session::Extended));
        }
        assert_eq!(
            c.early_closes(day(2026, 11, 1), day(2026, 12, 31)),
            BTreeMap::from([(day(2026, 11, 27), EARLY_CLOSE), (day(2026, 12, 24), EARLY_CLOSE)])
        );
        // Every listed date is a weekday (a typo landing on a weekend would do nothing).
        for d in HOLIDAYS.iter().chain(EARLY_CLOSES).filter_map(date) {
            assert!(!matches!(d.weekday(), Weekday::Sat | Weekday::Sun), "{d}");
        }
        assert_eq!(HOLIDAYS.iter().filter_map(date).count(), HOLIDAYS.len(), "every listed date exists");
    }

    #[test]
    fn the_session_at_or_after_a_time_skips_nights_weekends_and_holidays() {
        let c = Calendar::shipped();
        // Inside a session: that session.
        assert_eq!(
            c.session_at_or_after(ny(2025, 11, 26, 10, 0)),
            Some((ny(2025, 11, 26, 9, 30), ny(2025, 11, 26, 16, 0)))
        );
        // At its close: the next one, past Thanksgiving to the early close of the Friday.
        assert_eq!(
            c.session_at_or_after(ny(2025, 11, 26, 16, 0)),
            Some((ny(2025, 11, 28, 9, 30), ny(2025, 11, 28, 13, 0)))
        );
        // A Saturday: Monday.
        assert_eq!(
            c.session_at_or_after(ny(2025, 11, 29, 12, 0)),
            Some((ny(2025, 12, 1, 9, 30), ny(2025, 12, 1, 16, 0)))
        );
    }

    #[test]
    fn alpacas_days_win_over_the_span_they_cover() {
        // Alpaca says 2026-11-30 closes at 13:00 and 2026-12-01 is closed (as if a special closure).
        let span = (day(2026, 11, 30), day(2026, 12, 2));
        let c = Calendar::from_days(
            span,
            [
                (day(2026, 11, 30), Hours { open: REGULAR_OPEN, close: EARLY_CLOSE }),
                (day(2026, 12, 2), Hours { open: REGULAR_OPEN, close: REGULAR_CLOSE }),
                (day(2027, 1, 4), Hours { open: REGULAR_OPEN, close: REGULAR_CLOSE }),
            ],
        );
        assert!(!c.is_open(ny(2026, 11, 30, 14, 0), Session::Regular));
        assert!(!c.is_open(ny(2026, 12, 1, 11, 0), Session::Regular), "absent from Alpaca's span: closed");
        assert!(c.is_open(ny(2026, 12, 2, 11, 0), Session::Regular));
        // Outside the span the table answers: Thanksgiving closed, the Friday after early.
        assert_eq!(c.hours(day(2026, 11, 26)), None);
        assert_eq!(c.hours(day(2026, 11, 27)).map(|h| h.close), Some(EARLY_CLOSE));
        assert_eq!(c.days().count(), 2, "days outside the span are dropped");
        assert_eq!(c.span(), Some(span));
    }
}
