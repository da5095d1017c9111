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
pub const CALENDAR_KEY: &[u8] = b"calendar.alpaca";

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
struct StoredCalendar {
    fetched_at: DateTime<Utc>,
    from: NaiveDate,
    to: NaiveDate,
    days: Vec<(NaiveDate, Hours)>,
}

/// Alpaca's calendar around `now`, stored; or the stored one; or the shipped table.
pub async fn load(rest: &RestClient, store: &Store, now: DateTime<Utc>) -> Calendar {
    let today = now.with_timezone(&New_York).date_naive();
    let span = (today - Duration::days(7), today + Duration::days(366));
    match rest.issue::<GetCalendar>(&span).await {
        Ok(days) => {
            let calendar = Calendar::from_days(
                span,
                days.into_iter().map(|d| {
                    let (open, close) =
                        (d.open.with_timezone(&New_York).time(), d.close.with_timezone(&New_York).time());
                    (d.date, Hours { open, close })
                }),
            );
            let days: Vec<(NaiveDate, Hours)> = calendar.days().collect();
            log::info!("calendar: {} trading days from Alpaca, {} to {}", days.len(), span.0, span.1);
            let stored = StoredCalendar { fetched_at: now, from: span.0, to: span.1, days };
            if let Err(e) = tree(store).and_then(|t| t.insert(CALENDAR_KEY, &stored)) {
                log::warn!("calendar: cannot keep it in the store ({e}); it is used all the same");
            }
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

fn tree(store: &Store) -> Result<TypedTree<StoredCalendar>, crate::store::StoreError> {
    store.tree(TreeName::Kv)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::alpaca::fake::FakeAlpaca;
    use crate::alpaca::rest::{RestConfig, RetryPolicy};
    use crate::calendar::Session;
    use chrono::TimeZone;

    fn ny(y: i32, mo: u32, d: u32, h: u32) -> DateTime<Utc> {
        New_York.with_ymd_and_hms(y, mo, d, h, 0, 0).single().unwrap().to_utc()
    }

    #[tokio::test]
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
        let cfg = RestConfig {
            trading_url: "http://127.0.0.1:9".parse().unwrap(),
            retry: RetryPolicy { trading_deadline: std::time::Duration::from_millis(300), ..RetryPolicy::default() },
            ..fake.rest_config()
        };
        let gone = RestClient::new(cfg).unwrap();
        assert_eq!(load(&gone, &store, now + Duration::days(1)).await, cal);
        // Nothing stored: the shipped table (no Alpaca span), which knows the same holiday.
        let empty = Store::open(tempfile::tempdir().unwrap().path()).unwrap();
        let shipped = load(&gone, &empty, now).await;
        assert_eq!(shipped.span(), None);
        assert!(!shipped.is_open(ny(2026, 11, 26, 11), Session::Regular));
    }
}
