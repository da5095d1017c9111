//! The fake's data REST API: stored minute bars, folded into the requested timeframe on New York's clock,
//! paged with `next_page_token`.

use super::{App, error};
use crate::alpaca::wire::market as wm;
use crate::alpaca::wire::rest as w;
use axum::Json;
use axum::extract::{Query, State};
use axum::response::{IntoResponse, Response};
use chrono::{DateTime, Utc};
use std::collections::HashMap;

type Q = Query<HashMap<String, String>>;

/// A `timeframe` query value the fake does not serve (Alpaca's 422 message).
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("invalid timeframe {0:?}")]
struct BadTimeframe(String);

/// A `timeframe` query value: minutes per bar, or a New York day (`None`).
fn period(tf: &str) -> Result<Option<i64>, BadTimeframe> {
    let num = |n: &str| n.parse::<i64>().ok().filter(|n| *n > 0);
    let bad = || BadTimeframe(tf.to_string());
    if let Some(n) = tf.strip_suffix("Min").or_else(|| tf.strip_suffix('T')) {
        return num(n).filter(|n| *n <= 59).map(Some).ok_or_else(bad);
    }
    if let Some(n) = tf.strip_suffix("Hour").or_else(|| tf.strip_suffix('H')) {
        return num(n).filter(|n| *n <= 23).map(|n| Some(n * 60)).ok_or_else(bad);
    }
    match tf {
        "1Day" | "1D" => Ok(None),
        _ => Err(bad()),
    }
}

/// The start of the bar of `minutes` (a New York day when `None`) that a minute starting at `t` falls in:
/// buckets are whole multiples of the period since New York midnight; a day is stamped at its midnight.
fn bucket(t: DateTime<Utc>, minutes: Option<i64>) -> DateTime<Utc> {
    use chrono::{TimeZone, Timelike};
    let ny = t.with_timezone(&chrono_tz::America::New_York);
    let midnight = chrono_tz::America::New_York
        .from_local_datetime(&ny.date_naive().and_time(chrono::NaiveTime::MIN))
        .earliest()
        .map_or(t, |d| d.to_utc());
    match minutes {
        None => midnight,
        Some(n) => {
            let of_day = i64::from(ny.hour() * 60 + ny.minute());
            midnight + chrono::Duration::minutes(of_day - of_day % n)
        }
    }
}

/// Minute bars folded into bars of `minutes`: open of the first, high and low over all, close of the last,
/// volumes and trade counts summed, the VWAP weighted by volume.
fn fold(minutes_bars: &[wm::Bar], minutes: Option<i64>) -> Vec<wm::Bar> {
    let mut out: Vec<(DateTime<Utc>, wm::Bar)> = Vec::new();
    for b in minutes_bars {
        let Ok(t) = DateTime::parse_from_rfc3339(&b.t) else { continue };
        let start = bucket(t.to_utc(), minutes);
        match out.last_mut() {
            Some((s, agg)) if *s == start => {
                let (v0, v1) = (agg.v, b.v);
                agg.h = agg.h.max(b.h);
                agg.l = agg.l.min(b.l);
                agg.c = b.c;
                agg.v += b.v;
                agg.n = Some(agg.n.unwrap_or(0) + b.n.unwrap_or(0));
                agg.vw = match (agg.vw, b.vw) {
                    (Some(a), Some(x)) if v0 + v1 > 0.0 => Some((a * v0 + x * v1) / (v0 + v1)),
                    _ => None,
                };
            }
            _ => {
                out.push((start, wm::Bar { t: start.to_rfc3339_opts(chrono::SecondsFormat::Secs, true), ..b.clone() }))
            }
        }
    }
    out.into_iter().map(|(_, b)| b).collect()
}

/// Bars of the requested symbols and `timeframe` (minute bars folded, default 1Min) starting within
/// [start, end], ordered by symbol then time, `limit` per page; the page token is the offset of the next.
pub(super) async fn bars(State(app): State<App>, q: Q) -> Response {
    let time = |k: &str| q.get(k).and_then(|t| DateTime::parse_from_rfc3339(t).ok()).map(|t| t.to_utc());
    let start = time("start").unwrap_or(DateTime::<Utc>::MIN_UTC);
    let end = time("end").unwrap_or(DateTime::<Utc>::MAX_UTC);
    let limit = q.get("limit").and_then(|l| l.parse::<usize>().ok()).unwrap_or(1000).clamp(1, 10_000);
    let offset = match q.get("page_token").map(|t| t.parse::<usize>()) {
        None => 0,
        Some(Ok(o)) => o,
        Some(Err(_)) => return error(400, None, "invalid page_token"),
    };
    let minutes = match period(q.get("timeframe").map_or("1Min", String::as_str)) {
        Ok(m) => m,
        Err(e) => return error(422, None, &e.to_string()),
    };
    let mut symbols: Vec<&str> = q.get("symbols").map(|s| s.split(',').collect()).unwrap_or_default();
    symbols.sort_unstable();
    let s = app.lock();
    let all: Vec<(&str, wm::Bar)> = symbols
        .iter()
        .flat_map(|sym| {
            let stored = s.bars.get(*sym).map_or(&[][..], Vec::as_slice);
            let bars = if minutes == Some(1) { stored.to_vec() } else { fold(stored, minutes) };
            bars.into_iter().map(move |b| (*sym, b))
        })
        .filter(|(_, b)| DateTime::parse_from_rfc3339(&b.t).is_ok_and(|t| t >= start && t <= end))
        .collect();
    drop(s);
    let mut page = w::BarsPage::default();
    for (sym, b) in all.iter().skip(offset).take(limit) {
        page.bars.entry((*sym).into()).or_default().push(b.clone());
    }
    page.next_page_token = (offset + limit < all.len()).then(|| (offset + limit).to_string());
    Json(page).into_response()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bar(t: &str, o: f64, c: f64, v: f64) -> wm::Bar {
        wm::Bar {
            symbol: None,
            o,
            h: o.max(c) + 1.0,
            l: o.min(c) - 1.0,
            c,
            v,
            t: t.into(),
            n: Some(2),
            vw: Some((o + c) / 2.0),
        }
    }

    #[test]
    fn minute_bars_fold_into_new_york_aligned_periods() {
        assert_eq!(period("15Min"), Ok(Some(15)));
        assert_eq!(period("1Hour"), Ok(Some(60)));
        assert_eq!(period("1Day"), Ok(None));
        assert!(period("0Min").is_err() && period("1Week").is_err() && period("abc").is_err());
        // 09:30-09:46 New York (EST, UTC-5): a 15-minute bar at 09:30 with 15 minutes, one at 09:45 with 2.
        let minutes: Vec<wm::Bar> = (0..17)
            .map(|i| bar(&format!("2025-12-01T14:{:02}:00Z", 30 + i), 100.0 + f64::from(i), 101.0 + f64::from(i), 10.0))
            .collect();
        let q = fold(&minutes, Some(15));
        assert_eq!(q.len(), 2);
        assert_eq!(
            (q[0].t.as_str(), q[0].o, q[0].c, q[0].h, q[0].l, q[0].v),
            ("2025-12-01T14:30:00Z", 100.0, 115.0, 116.0, 99.0, 150.0)
        );
        assert_eq!(
            (q[1].t.as_str(), q[1].o, q[1].c, q[1].v, q[1].n),
            ("2025-12-01T14:45:00Z", 115.0, 117.0, 20.0, Some(4))
        );
        // The hour bar of a session's first half hour starts at 09:00; the day at New York midnight.
        assert_eq!(fold(&minutes[..5], Some(60))[0].t, "2025-12-01T14:00:00Z");
        assert_eq!(fold(&minutes, None)[0].t, "2025-12-01T05:00:00Z");
        assert_eq!(fold(&minutes, None)[0].v, 170.0);
    }
}
