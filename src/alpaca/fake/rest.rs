//! The fake's REST API: trading (`/v2/...`) and data (`/v2/stocks/bars`, crypto bars), behind `gate`.

use super::bars::bars;
use super::{App, Fault, Recorded, UpdCmd, error};
use crate::alpaca::wire::rest as w;
use crate::alpaca::wire::updates as wu;
use axum::extract::{Path, Query, Request, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::{Json, Router};
use chrono::{DateTime, Utc};
use rust_decimal::Decimal;
use std::collections::HashMap;
use std::str::FromStr;

type Q = Query<HashMap<String, String>>;

pub(super) fn router(app: App) -> Router {
    Router::new()
        .route("/v2/account", get(account))
        .route("/v2/clock", get(clock))
        .route("/v2/calendar", get(calendar))
        .route("/v2/assets", get(assets))
        .route("/v2/assets/{symbol}", get(asset))
        .route("/v2/orders", get(list_orders).post(submit).delete(cancel_all))
        .route("/v2/orders/{id}", get(get_order).delete(cancel))
        .route("/v2/orders:by_client_order_id", get(by_client_id))
        .route("/v2/positions", get(positions).delete(close_all))
        .route("/v2/positions/{symbol}", get(position).delete(close))
        .route("/v2/stocks/bars", get(bars))
        .route("/v1beta3/crypto/us/bars", get(bars))
        .route_layer(axum::middleware::from_fn_with_state(app.clone(), gate))
        .with_state(app)
}

/// Logs the request, checks the keys, applies the next queued fault.
async fn gate(State(app): State<App>, headers: HeaderMap, req: Request, next: Next) -> Response {
    let fault = {
        let mut s = app.lock();
        s.requests.push(Recorded {
            method: req.method().to_string(),
            path: req.uri().path().to_string(),
            query: req.uri().query().unwrap_or_default().to_string(),
            at: tokio::time::Instant::now(),
        });
        let h = |n: &str| headers.get(n).and_then(|v| v.to_str().ok()).unwrap_or_default().to_string();
        if (h("apca-api-key-id"), h("apca-api-secret-key")) != s.keys {
            return error(403, Some(40110000), "request is not authorized");
        }
        let now = tokio::time::Instant::now();
        if let Some(until) = s.rate_limited_until.filter(|u| *u > now) {
            // The window's end in Unix seconds, as far ahead of the wall clock as it is of the runtime's.
            let until = Utc::now() + chrono::TimeDelta::from_std(until - now).unwrap_or_default();
            let mut r = error(429, Some(42910000), "rate limit exceeded");
            let h = r.headers_mut();
            h.insert("x-ratelimit-limit", HeaderValue::from(200));
            h.insert("x-ratelimit-remaining", HeaderValue::from(0));
            h.insert("x-ratelimit-reset", HeaderValue::from(until.timestamp() + 1));
            return r;
        }
        let order_post = req.method() == axum::http::Method::POST && req.uri().path() == "/v2/orders";
        match order_post.then(|| s.order_faults.pop_front()).flatten() {
            Some(f) => Some(f),
            None => s.faults.pop_front(),
        }
    };
    match fault {
        None => next.run(req).await,
        Some(Fault::ServerError) => error(500, Some(50010000), "internal server error occurred"),
        Some(Fault::ServerErrorAfterProcessing) => {
            let _ = next.run(req).await;
            error(500, Some(50010000), "internal server error occurred")
        }
        Some(Fault::Slow(d)) => {
            tokio::time::sleep(d).await;
            next.run(req).await
        }
        Some(Fault::FillHeld) => {
            app.lock().book.fill_held();
            next.run(req).await
        }
        Some(Fault::RateLimited { retry_after_secs }) => {
            let mut r = error(429, Some(42910000), "rate limit exceeded");
            let reset = Utc::now().timestamp().saturating_add_unsigned(retry_after_secs);
            let h = r.headers_mut();
            h.insert("retry-after", HeaderValue::from(retry_after_secs));
            h.insert("x-ratelimit-limit", HeaderValue::from(200));
            h.insert("x-ratelimit-remaining", HeaderValue::from(0));
            h.insert("x-ratelimit-reset", HeaderValue::from(reset));
            r
        }
    }
}

async fn account(State(app): State<App>) -> Json<w::Account> {
    Json(app.lock().book.account())
}

/// The market's clock on the fake's own clock (simulated when it runs a market), by the shipped calendar.
async fn clock(State(app): State<App>) -> Json<w::Clock> {
    let now = app.lock().book.now();
    let ny = |d: DateTime<Utc>| d.with_timezone(&chrono_tz::America::New_York).to_rfc3339();
    let table = crate::calendar::Calendar::shipped();
    let session = table.session_at_or_after(now);
    let is_open = session.is_some_and(|(open, _)| open <= now);
    // Inside a session the next open is the following session's.
    let next = if is_open { session.and_then(|(_, close)| table.session_at_or_after(close)) } else { session };
    let far = now + chrono::Duration::days(1);
    Json(w::Clock {
        timestamp: ny(now),
        is_open,
        next_open: ny(next.map_or(far, |(open, _)| open)),
        next_close: ny(session.map_or(far, |(_, close)| close)),
    })
}

async fn calendar(q: Q) -> Response {
    let day = |k: &str| q.get(k).and_then(|d| chrono::NaiveDate::parse_from_str(d, "%Y-%m-%d").ok());
    let (Some(start), Some(end)) = (day("start"), day("end")) else { return error(422, None, "invalid start or end") };
    // The NYSE's days as the shipped table knows them: holidays left out, early closes at 13:00.
    let table = crate::calendar::Calendar::shipped();
    let days: Vec<w::CalendarDay> = start
        .iter_days()
        .take_while(|d| *d <= end)
        .filter_map(|d| table.hours(d).map(|h| (d, h)))
        .take(1000)
        .map(|(d, h)| w::CalendarDay {
            date: d.to_string(),
            open: h.open.format("%H:%M").to_string(),
            close: h.close.format("%H:%M").to_string(),
            session_open: Some("0400".into()),
            session_close: Some("2000".into()),
            settlement_date: None,
        })
        .collect();
    Json(days).into_response()
}

fn asset_of(symbol: &str) -> w::Asset {
    let crypto = symbol.contains('/');
    w::Asset {
        id: format!("asset-{symbol}"),
        class: if crypto { "crypto" } else { "us_equity" }.into(),
        exchange: if crypto { "CRYPTO" } else { "NASDAQ" }.into(),
        symbol: symbol.into(),
        status: "active".into(),
        tradable: true,
        fractionable: true,
        min_order_size: crypto.then(|| super::rules::CRYPTO_MIN_ORDER_SIZE.to_string()),
        min_trade_increment: crypto.then(|| super::rules::CRYPTO_MIN_TRADE_INCREMENT.to_string()),
        price_increment: crypto.then(|| super::rules::CRYPTO_PRICE_INCREMENT.to_string()),
        ..w::Asset::default()
    }
}

/// Active assets, filtered by `asset_class` (`us_equity` or `crypto`) as Alpaca does.
async fn assets(
    State(app): State<App>,
    Query(q): Query<std::collections::HashMap<String, String>>,
) -> Json<Vec<w::Asset>> {
    let class = q.get("asset_class").cloned();
    Json(
        app.lock()
            .book
            .prices
            .keys()
            .map(|s| asset_of(s))
            .filter(|a| class.as_ref().is_none_or(|c| *c == a.class))
            .collect(),
    )
}

async fn asset(State(app): State<App>, Path(symbol): Path<String>) -> Response {
    let known = app.lock().book.prices.keys().find(|s| s.replace('/', "") == symbol.replace('/', "")).cloned();
    match known {
        Some(s) => Json(asset_of(&s)).into_response(),
        None => error(404, Some(40410000), &format!("asset not found for {symbol}")),
    }
}

pub(super) fn update_msg(event: wu::TradeEvent, order: &w::Order) -> String {
    let filled = event == wu::TradeEvent::Fill;
    let msg = wu::UpdatesMsg::TradeUpdate(Box::new(wu::TradeUpdate {
        event,
        order: order.clone(),
        timestamp: order.updated_at.clone().or(order.created_at.clone()),
        price: if filled { order.filled_avg_price.clone() } else { None },
        qty: if filled { order.filled_qty.clone() } else { None },
        position_qty: None,
        execution_id: None,
        at: None,
        event_id: None,
        position_qtys: None,
    }));
    serde_json::to_string(&msg).unwrap_or_default()
}

async fn submit(State(app): State<App>, body: axum::body::Bytes) -> Response {
    let Ok(req) = serde_json::from_slice::<w::OrderRequest>(&body) else {
        return error(422, Some(40010000), "invalid request body");
    };
    let result = app.lock().book.submit(&req);
    match result {
        Ok(o) => {
            let _ = app.updates_tx.send(UpdCmd::Msg(update_msg(wu::TradeEvent::New, &o)));
            if o.status == w::OrderStatus::Filled {
                let _ = app.updates_tx.send(UpdCmd::Msg(update_msg(wu::TradeEvent::Fill, &o)));
            }
            Json(o).into_response()
        }
        Err((status, body)) => error(status, body.code, &body.message),
    }
}

async fn list_orders(State(app): State<App>, q: Q) -> Json<Vec<w::Order>> {
    // Every order that may still execute (`pending_new`, `pending_cancel` ... included), as Alpaca's
    // `status=open` lists them.
    let open = super::rules::is_open;
    let status = q.get("status").map(String::as_str).unwrap_or("open");
    let limit = q.get("limit").and_then(|l| l.parse().ok()).unwrap_or(50usize).min(500);
    let stamp = |t: Option<&String>| t.and_then(|t| chrono::DateTime::parse_from_rfc3339(t).ok());
    // `after` is exclusive, on the submission time, as at Alpaca.
    let after = stamp(q.get("after"));
    let s = app.lock();
    let mut v: Vec<w::Order> = s
        .book
        .orders
        .iter()
        .filter(|o| match status {
            "all" => true,
            "closed" => !open(o),
            _ => open(o),
        })
        .filter(|o| {
            after.is_none_or(|a| stamp(o.submitted_at.as_ref().or(o.created_at.as_ref())).is_some_and(|t| t > a))
        })
        .cloned()
        .collect();
    if q.get("direction").map(String::as_str) != Some("asc") {
        v.reverse();
    }
    v.truncate(limit);
    Json(v)
}

async fn get_order(State(app): State<App>, Path(id): Path<String>) -> Response {
    match app.lock().book.find(&id) {
        Some(o) => Json(o.clone()).into_response(),
        None => error(404, Some(40410000), "order not found"),
    }
}

async fn by_client_id(State(app): State<App>, q: Q) -> Response {
    let coid = q.get("client_order_id").cloned().unwrap_or_default();
    match app.lock().book.find_by_client_id(&coid) {
        Some(o) => Json(o.clone()).into_response(),
        None => error(404, Some(40410000), "order not found"),
    }
}

async fn cancel(State(app): State<App>, Path(id): Path<String>) -> Response {
    let (result, delay) = {
        let mut s = app.lock();
        (s.book.cancel(&id), s.book.cancel_delay)
    };
    match (result, delay) {
        (Ok(o), Some(delay)) => {
            // As Alpaca: accepted now (`pending_cancel`), canceled a moment later.
            let _ = app.updates_tx.send(UpdCmd::Msg(update_msg(wu::TradeEvent::PendingCancel, &o)));
            let app = app.clone();
            let order_id = o.id.clone();
            tokio::spawn(async move {
                tokio::time::sleep(delay).await;
                let done = app.lock().book.finish_cancel(&order_id);
                if let Some(o) = done {
                    let _ = app.updates_tx.send(UpdCmd::Msg(update_msg(wu::TradeEvent::Canceled, &o)));
                }
            });
            StatusCode::NO_CONTENT.into_response()
        }
        (Ok(o), None) => {
            let _ = app.updates_tx.send(UpdCmd::Msg(update_msg(wu::TradeEvent::Canceled, &o)));
            StatusCode::NO_CONTENT.into_response()
        }
        (Err((status, body)), _) => error(status, body.code, &body.message),
    }
}

async fn cancel_all(State(app): State<App>) -> Response {
    let mut s = app.lock();
    let ids: Vec<String> =
        s.book.orders.iter().filter(|o| o.status == w::OrderStatus::New).map(|o| o.id.clone()).collect();
    let out: Vec<w::MultiStatus> = ids
        .into_iter()
        .map(|id| {
            let status = if s.book.cancel(&id).is_ok() { 200 } else { 500 };
            w::MultiStatus { id: Some(id), symbol: None, status, body: None }
        })
        .collect();
    (StatusCode::MULTI_STATUS, Json(out)).into_response()
}

async fn positions(State(app): State<App>) -> Json<Vec<w::Position>> {
    let s = app.lock();
    Json(s.book.positions.keys().filter_map(|sym| s.book.position(sym)).collect())
}

fn find_symbol(app: &App, raw: &str) -> Option<String> {
    app.lock().book.positions.keys().find(|s| s.replace('/', "") == raw.replace('/', "")).cloned()
}

async fn position(State(app): State<App>, Path(symbol): Path<String>) -> Response {
    let p = find_symbol(&app, &symbol).and_then(|s| app.lock().book.position(&s));
    match p {
        Some(p) => Json(p).into_response(),
        None => error(404, Some(40410000), "position does not exist"),
    }
}

fn close_order(app: &App, symbol: &str, qty: Option<Decimal>) -> Result<w::Order, (u16, w::ErrorBody)> {
    let mut s = app.lock();
    let held = s.book.positions.get(symbol).map_or(Decimal::ZERO, |p| p.0);
    let req = w::OrderRequest {
        symbol: symbol.into(),
        qty: Some(qty.unwrap_or(held).to_string()),
        notional: None,
        side: w::Side::Sell,
        kind: w::OrderType::Market,
        time_in_force: super::rules::closing_tif(symbol),
        limit_price: None,
        stop_price: None,
        extended_hours: None,
        client_order_id: None,
    };
    s.book.submit(&req)
}

async fn close(State(app): State<App>, Path(symbol): Path<String>, q: Q) -> Response {
    let Some(sym) = find_symbol(&app, &symbol) else { return error(404, Some(40410000), "position does not exist") };
    let qty = q.get("qty").and_then(|q| Decimal::from_str(q).ok());
    match close_order(&app, &sym, qty) {
        Ok(o) => Json(o).into_response(),
        Err((status, body)) => error(status, body.code, &body.message),
    }
}

async fn close_all(State(app): State<App>) -> Response {
    let symbols: Vec<String> = app.lock().book.positions.keys().cloned().collect();
    let out: Vec<w::MultiStatus> = symbols
        .into_iter()
        .map(|sym| match close_order(&app, &sym, None) {
            Ok(o) => w::MultiStatus { id: None, symbol: Some(sym), status: 200, body: serde_json::to_value(o).ok() },
            Err((status, b)) => {
                w::MultiStatus { id: None, symbol: Some(sym), status, body: serde_json::to_value(b).ok() }
            }
        })
        .collect();
    (StatusCode::MULTI_STATUS, Json(out)).into_response()
}
