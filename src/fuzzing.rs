//! The fuzz targets' entry points, shared by `fuzz/` (cargo-fuzz, nightly: `cd fuzz && cargo +nightly fuzz
//! run frames|rest|config`) and by the regression run in `make test` (the tests below: every file of the
//! committed seeds: the wire fixtures, the shipped configs and `fuzz/seeds/<target>`, then a fixed-seed
//! mutation run over them). Each takes any
//! bytes and must return, never panic.

use crate::alpaca::parse::{market_frame, updates_frame};
use crate::alpaca::rest::{self as rest, BarsQuery, Endpoint};
use crate::domain::{ClientOrderId, OrderId, Symbol, Timeframe};
use chrono::{NaiveDate, TimeZone, Utc};
use reqwest::StatusCode;
use reqwest::header::{HeaderMap, HeaderValue};

/// A market-data frame and a trade_updates frame.
pub fn frames(data: &[u8]) {
    let _ = market_frame(data);
    let _ = updates_frame(data);
}

/// Every REST response parser on `data` as a 2xx body, and the error classifier on it as the body of
/// each refusal status (with rate-limit headers).
pub fn rest(data: &[u8]) {
    let (Ok(sym), Ok(coid), Ok(oid)) = (Symbol::new("AAPL"), ClientOrderId::new("tb-fuzz-1"), OrderId::new("o-1"))
    else {
        return;
    };
    let day = NaiveDate::from_ymd_opt(2024, 5, 6).unwrap_or_default();
    let _ = rest::GetAccount::parse(&(), data);
    let _ = rest::GetClock::parse(&(), data);
    let _ = rest::GetCalendar::parse(&(day, day), data);
    let _ = rest::ListAssets::parse(&"us_equity".to_string(), data);
    let _ = rest::GetAsset::parse(&sym, data);
    let _ = rest::GetOrder::parse(&oid, data);
    let _ = rest::GetOrderByClientId::parse(&coid, data);
    let list = rest::ListOrdersQuery {
        status: rest::OrderFilter::All,
        limit: 500,
        after: None,
        symbols: Vec::new(),
        oldest_first: true,
    };
    let _ = rest::ListOrders::parse(&list, data);
    let _ = rest::CancelOrder::parse(&oid, data);
    let _ = rest::CancelAllOrders::parse(&(), data);
    let _ = rest::ListPositions::parse(&(), data);
    let _ = rest::GetPosition::parse(&sym, data);
    let _ = rest::ClosePosition::parse(&(sym.clone(), None), data);
    let _ = rest::CloseAllPositions::parse(&(), data);
    let bars = BarsQuery {
        symbols: vec![sym],
        timeframe: Timeframe::Minutes(1),
        start: Utc.timestamp_opt(0, 0).single().unwrap_or_default(),
        end: Utc.timestamp_opt(60, 0).single().unwrap_or_default(),
        limit: 1000,
        feed: None,
        page_token: None,
    };
    let _ = rest::GetBars::parse(&bars, data);
    let mut headers = HeaderMap::new();
    if let Ok(v) = HeaderValue::from_bytes(&data[..data.len().min(32)]) {
        headers.insert("retry-after", v.clone());
        headers.insert("x-ratelimit-reset", v);
    }
    for code in [400, 401, 403, 404, 422, 429, 500, 503] {
        if let Ok(status) = StatusCode::from_u16(code) {
            let _ = rest::classify::classify("GET /fuzz", status, &headers, data, Some("tb-fuzz-1"));
        }
    }
}

/// A config file's text.
pub fn config(data: &[u8]) {
    if let Ok(text) = std::str::from_utf8(data) {
        let _ = crate::config::Config::parse(std::path::Path::new("fuzz.toml"), text);
    }
}

#[cfg(test)]
mod tests;
