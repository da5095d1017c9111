//! The exchange calendar for the live daemon: a year of Alpaca's `/v2/calendar` (a week back, a year on),
//! read at start and kept in the store's `kv` tree; when Alpaca cannot be reached the stored copy is used,
//! and without one the shipped table (`crate::calendar`). Each source is said once at start.

use crate::alpaca::rest::{GetCalendar, RestClient};
use crate::calendar::{Calendar, Hours};
use crate::store::{Store, TreeName, TypedTree};
use chrono::{DateTime, Duration, NaiveDate, Utc};
use chrono_tz::America::New_York;
use serde::{Deserialize, Serialize};

/// Where the last calendar read from Alpaca is kept.
pub(crate) const CALENDAR_KEY: &[u8] = b"calendar.alpaca";

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
struct StoredCalendar {
    fetched_at: DateTime<Utc>,
    from: NaiveDate,
    to: NaiveDate,
    days: Vec<(NaiveDate, Hours)>,
}

/// How often the daemon reads Alpaca's calendar again (on the process's clock).
pub(crate) const REFRESH_EVERY: Duration = Duration::days(1);
/// After a failed refresh, the next try (the calendar in use stays).
pub(crate) const RETRY_EVERY: Duration = Duration::hours(1);

/// A year of Alpaca's calendar around `now` (a week back), stored in the `kv` tree.
async fn fetch(
    rest: &RestClient,
    store: &Store,
    now: DateTime<Utc>,
) -> Result<Calendar, crate::alpaca::rest::RestError> {
    let today = now.with_timezone(&New_York).date_naive();
    let span = (today - Duration::days(7), today + Duration::days(366));
    let days = rest.issue::<GetCalendar>(&span).await?;
    let calendar = Calendar::from_days(
        span,
        days.into_iter().map(|d| {
            let (open, close) = (d.open.with_timezone(&New_York).time(), d.close.with_timezone(&New_York).time());
            (d.date, Hours { open, close })
        }),
    );
    let stored = StoredCalendar { fetched_at: now, from: span.0, to: span.1, days: calendar.days().collect() };
    if let Err(e) = tree(store).and_then(|t| t.insert(CALENDAR_KEY, &stored)) {
        log::warn!("calendar: cannot keep it in the store ({e}); it is used all the same");
    }
    Ok(calendar)
}

/// Alpaca's calendar around `now`, stored; or the stored one; or the shipped table.
pub(crate) async fn load(rest: &RestClient, store: &Store, now: DateTime<Utc>) -> Calendar {
    match fetch(rest, store, now).await {
        Ok(calendar) => {
            let (n, span) = (calendar.days().count(), calendar.span().unwrap_or_default());
            log::info!("calendar: {n} trading days from Alpaca, {} to {}", span.0, span.1);
            calendar
        }
        Err(e) => match tree(store).and_then(|t| t.get(CALENDAR_KEY)) {
            Ok(Some(s)) => {
                log::warn!(
                    "calendar: Alpaca's calendar cannot be read ({e}); using the copy read on {} ({} to {})",
                    s.fetched_at.date_naive(),
                    s.from,
                    s.to
                );
                Calendar::from_days((s.from, s.to), s.days)
            }
            other => {
                if let Err(se) = other {
                    log::warn!("calendar: the stored copy cannot be read: {se}");
                }
                log::warn!(
                    "calendar: Alpaca's calendar cannot be read ({e}) and none is stored; using the shipped NYSE holiday table"
                );
                Calendar::shipped()
            }
        },
    }
}

/// The days on which two calendars disagree within both spans (a closure added, hours changed).
fn changed_days(old: &Calendar, new: &Calendar) -> Vec<NaiveDate> {
    let Some((from, to)) = new.span() else { return Vec::new() };
    from.iter_days().take_while(|d| *d <= to).filter(|d| old.hours(*d) != new.hours(*d)).collect()
}

/// Where a refreshed calendar waits for the engine (taken on its next tick).
pub(crate) type CalendarSlot = std::sync::Arc<std::sync::Mutex<Option<Calendar>>>;

/// Reads Alpaca's calendar again every `every` (wall time: `REFRESH_EVERY` on the process's clock), and
/// `retry` after a failure, keeping the one in use, until `stop`; a calendar that changed is put in `slot`
/// for the engine (the changed days said once at INFO).
pub(crate) async fn refresh_daily(
    rest: RestClient,
    store: Store,
    mut current: Calendar,
    slot: CalendarSlot,
    (every, retry): (std::time::Duration, std::time::Duration),
    stop: tokio_util::sync::CancellationToken,
) {
    let mut wait = every;
    loop {
        tokio::select! {
            _ = stop.cancelled() => return,
            _ = tokio::time::sleep(wait) => {}
        }
        match fetch(&rest, &store, crate::clock::now()).await {
            Ok(fresh) => {
                wait = every;
                let changed = changed_days(&current, &fresh);
                if changed.is_empty() {
                    log::debug!("calendar: refreshed from Alpaca, unchanged");
                    continue;
                }
                let days: Vec<String> = changed.iter().take(5).map(|d| d.to_string()).collect();
                log::info!(
                    "calendar: Alpaca's calendar changed on {} day(s) ({}); now in use",
                    changed.len(),
                    days.join(", ")
                );
                current = fresh.clone();
                *slot.lock().unwrap_or_else(|p| p.into_inner()) = Some(fresh);
            }
            Err(e) => {
                wait = retry;
                log::warn!(
                    "calendar: the daily refresh failed ({e}); keeping the calendar in use, retrying in an hour"
                );
            }
        }
    }
}

fn tree(store: &Store) -> Result<TypedTree<StoredCalendar>, crate::store::StoreError> {
    store.tree(TreeName::Kv)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::alpaca::fake::FakeAlpaca;
    use crate::alpaca::rest::{RestConfig, RetryPolicy};
    use crate::calendar::Session;
    use chrono::{Datelike, TimeZone};

    fn ny(y: i32, mo: u32, d: u32, h: u32) -> DateTime<Utc> {
        New_York.with_ymd_and_hms(y, mo, d, h, 0, 0).single().unwrap().to_utc()
    }

    /// On paused time: the call to an Alpaca that cannot be reached retries for the REST client's own
    /// trading deadline (30 s) before the stored copy is used.
    #[tokio::test(start_paused = true)]
    async fn alpacas_calendar_is_kept_and_used_when_alpaca_cannot_be_reached() {
        let fake = FakeAlpaca::start(0).await.unwrap();
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path()).unwrap();
        let now = ny(2026, 11, 20, 10);
        let rest = RestClient::new(fake.rest_config()).unwrap();
        let cal = load(&rest, &store, now).await;
        let (from, to) = cal.span().expect("Alpaca's span");
        assert_eq!(
            (from, to),
            (NaiveDate::from_ymd_opt(2026, 11, 13).unwrap(), NaiveDate::from_ymd_opt(2027, 11, 21).unwrap())
        );
        // Thanksgiving closed; the day after closes early; a Monday is open.
        assert!(!cal.is_open(ny(2026, 11, 26, 11), Session::Regular));
        assert!(!cal.is_open(ny(2026, 11, 27, 14), Session::Regular));
        assert!(cal.is_open(ny(2026, 11, 30, 14), Session::Regular));
        // Alpaca gone: the stored copy, the same calendar.
        let cfg = RestConfig { trading_url: "http://127.0.0.1:9".parse().unwrap(), ..fake.rest_config() };
        let gone = RestClient::new(cfg).unwrap();
        let started = tokio::time::Instant::now();
        assert_eq!(load(&gone, &store, now + Duration::days(1)).await, cal);
        assert!(started.elapsed() <= RetryPolicy::default().trading_deadline, "{:?}", started.elapsed());
        // Nothing stored: the shipped table (no Alpaca span), which knows the same holiday.
        let empty = Store::open(tempfile::tempdir().unwrap().path()).unwrap();
        let shipped = load(&gone, &empty, now).await;
        assert_eq!(shipped.span(), None);
        assert!(!shipped.is_open(ny(2026, 11, 26, 11), Session::Regular));
    }

    /// On paused time, with the daemon's own periods: a refresh a day (`REFRESH_EVERY`), an hour after a
    /// failure (`RETRY_EVERY`).
    #[tokio::test(start_paused = true)]
    async fn the_daily_refresh_hands_over_a_calendar_that_changed_and_only_then() {
        let fake = FakeAlpaca::start(0).await.unwrap();
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path()).unwrap();
        let rest = RestClient::new(fake.rest_config()).unwrap();
        let now = crate::clock::now();
        let alpaca = load(&rest, &store, now).await;
        // The calendar in use has a session on a day Alpaca's has none (a closure announced since).
        let span = alpaca.span().unwrap();
        let sunday = span.0.iter_days().find(|d| d.weekday() == chrono::Weekday::Sun).unwrap();
        let extra = Hours { open: crate::calendar::REGULAR_OPEN, close: crate::calendar::REGULAR_CLOSE };
        let in_use = Calendar::from_days(span, alpaca.days().chain([(sunday, extra)]));
        assert_eq!(changed_days(&in_use, &alpaca), [sunday]);
        assert!(changed_days(&alpaca, &alpaca).is_empty());

        let slot = CalendarSlot::default();
        let stop = tokio_util::sync::CancellationToken::new();
        let every = (REFRESH_EVERY.to_std().unwrap(), RETRY_EVERY.to_std().unwrap());
        let minute = std::time::Duration::from_secs(60);
        let started = tokio::time::Instant::now();
        let task = tokio::spawn(refresh_daily(rest.clone(), store.clone(), in_use, slot.clone(), every, stop.clone()));
        let deadline = started + every.0 + minute * 5;
        let fresh = loop {
            if let Some(c) = slot.lock().unwrap().take() {
                break c;
            }
            assert!(tokio::time::Instant::now() < deadline, "no refreshed calendar handed over");
            tokio::time::sleep(minute).await;
        };
        assert!(started.elapsed() >= every.0, "handed over after a day, not before: {:?}", started.elapsed());
        assert_eq!(fresh.hours(sunday), None, "Alpaca's calendar replaces the one in use");
        // Unchanged since: nothing more is handed over, while the refresh keeps reading.
        let reads = fake.count("GET", "/v2/calendar");
        tokio::time::sleep(every.0 * 2 + minute).await;
        assert!(fake.count("GET", "/v2/calendar") > reads, "the refresh goes on");
        assert!(slot.lock().unwrap().is_none(), "an unchanged calendar is not handed over again");
        stop.cancel();
        task.await.unwrap();
    }
}
