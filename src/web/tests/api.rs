//! The versioned API, its event stream, one authentication for every address, and JSON errors.

use super::{TOKEN, client, csrf_of, data, start, start_with_control};
use crate::control::StatusReport;
use crate::web::*;
use chrono::{TimeZone, Utc};

#[tokio::test]
async fn the_token_once_on_any_address_sets_the_cookie_for_every_page_and_api() {
    let (url, stop) = start(true).await;
    let c = client();
    // A page: the cookie, and the same address without the token (other parameters kept).
    let r = c.get(format!("{url}/search?token={TOKEN}&x=1")).send().await.unwrap();
    assert_eq!(r.status(), 303);
    assert_eq!(r.headers()["location"], "/search?x=1");
    let cookie = r.headers()["set-cookie"].to_str().unwrap().to_string();
    assert!(cookie.contains("HttpOnly") && cookie.contains("SameSite=Strict"), "{cookie}");
    let pair = cookie.split(';').next().unwrap().to_string();
    // The API answers at once with the token in the address, and sets the cookie too.
    let r = c.get(format!("{url}/api/v1/status?token={TOKEN}")).send().await.unwrap();
    assert_eq!(r.status(), 200);
    assert!(r.headers().contains_key("set-cookie"));
    assert_eq!(r.json::<StatusReport>().await.unwrap(), data().status);
    // The cookie opens every page and API.
    for path in ["/", "/search", "/api/v1/status", "/api/v1/dashboard"] {
        let r = c.get(format!("{url}{path}")).header("Cookie", &pair).send().await.unwrap();
        assert_eq!(r.status(), 200, "{path}");
    }
    let d: DashboardData =
        c.get(format!("{url}/api/v1/dashboard")).header("Cookie", &pair).send().await.unwrap().json().await.unwrap();
    assert_eq!(d, data());
    stop.cancel();
}

#[tokio::test]
async fn api_errors_are_json_with_what_to_do() {
    let (url, stop, _calls) = start_with_control().await;
    let c = client();
    let json_of = |r: reqwest::Response| async move {
        let ct = r.headers()["content-type"].to_str().unwrap().to_string();
        assert!(ct.starts_with("application/json"), "not JSON: {ct}");
        r.json::<serde_json::Value>().await.unwrap()
    };
    // No token, a wrong token: 401 in JSON, naming where the token is.
    for req in [
        c.get(format!("{url}/api/v1/status")),
        c.get(format!("{url}/api/v1/status?token=wrong-token-wrong-token")),
        c.post(format!("{url}/control/pause")),
    ] {
        let r = req.send().await.unwrap();
        assert_eq!(r.status(), 401);
        let v = json_of(r).await;
        assert_eq!(v["status"], 401);
        assert!(v["error"].as_str().unwrap().contains("?token=TOKEN"), "{v}");
    }
    // A POST that is not a form: 415 in JSON, saying what to send (never the framework's text).
    let r = c.post(format!("{url}/control/pause")).bearer_auth(TOKEN).send().await.unwrap();
    assert_eq!(r.status(), 415);
    let v = json_of(r).await;
    assert!(v["error"].as_str().unwrap().contains("application/x-www-form-urlencoded"), "{v}");
    // A refused form: 400 in JSON, on both addresses of the controls.
    let html = c.get(format!("{url}/")).bearer_auth(TOKEN).send().await.unwrap().text().await.unwrap();
    let csrf = csrf_of(&html);
    let r = c
        .post(format!("{url}/api/v1/control/flatten"))
        .bearer_auth(TOKEN)
        .header("content-type", "application/x-www-form-urlencoded")
        .body(format!("csrf={csrf}"))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 400);
    assert!(json_of(r).await["error"].as_str().unwrap().contains("tick the confirmation box"));
    // An unknown endpoint.
    let r = c.get(format!("{url}/api/v1/nothing")).bearer_auth(TOKEN).send().await.unwrap();
    assert_eq!(r.status(), 404);
    assert!(json_of(r).await["error"].as_str().unwrap().contains("/api/v1/status"));
    stop.cancel();
}

/// The first `update` event of the stream at `url`, parsed.
async fn first_update(url: &str) -> serde_json::Value {
    let mut r = client().get(format!("{url}/api/v1/events")).bearer_auth(TOKEN).send().await.unwrap();
    assert_eq!(r.status(), 200);
    assert!(r.headers()["content-type"].to_str().unwrap().starts_with("text/event-stream"));
    let mut text = String::new();
    let deadline = std::time::Duration::from_secs(10);
    while !text.contains("\n\n") {
        let chunk = tokio::time::timeout(deadline, r.chunk()).await.expect("no event in time").unwrap().unwrap();
        text.push_str(&String::from_utf8_lossy(&chunk));
    }
    assert!(text.starts_with("event: update\n"), "{text}");
    let data = text.lines().find_map(|l| l.strip_prefix("data: ")).expect("a data line");
    serde_json::from_str(data).unwrap()
}

#[tokio::test]
async fn the_page_loads_once_and_the_event_stream_pushes_the_data_and_its_sections() {
    let (url, stop) = start(true).await;
    let html = client().get(format!("{url}/")).bearer_auth(TOKEN).send().await.unwrap().text().await.unwrap();
    assert!(!html.contains("http-equiv=\"refresh\""), "the page must not reload itself");
    assert!(html.contains("new EventSource(\"/api/v1/events\")"), "the page listens to the stream");
    let u = first_update(&url).await;
    assert_eq!(u["version"], 1);
    let d: DashboardData = serde_json::from_value(u["data"].clone()).unwrap();
    assert_eq!(d, data());
    // The sections are the page's own rendering of the same data; the controls are not among them.
    let sections: Vec<(String, String)> = serde_json::from_value(u["sections"].clone()).unwrap();
    let names: Vec<&str> = sections.iter().map(|(n, _)| n.as_str()).collect();
    assert!(names.contains(&"head") && names.contains(&"positions") && !names.contains(&"controls"), "{names:?}");
    for (name, part) in &sections {
        assert!(html.contains(&format!(r#"<div id="sec-{name}" class="sec">{part}</div>"#)), "{name} differs");
    }
    stop.cancel();
}

#[tokio::test]
async fn the_charting_library_is_served_from_the_binary_or_the_page_says_how_to_get_it() {
    let (url, stop) = start(true).await;
    let html = client().get(format!("{url}/")).bearer_auth(TOKEN).send().await.unwrap().text().await.unwrap();
    let r = client().get(format!("{url}/assets/lightweight-charts.js")).send().await.unwrap();
    if assets::charts_bundled() {
        assert_eq!(r.status(), 200);
        assert!(r.text().await.unwrap().contains("TradingView Lightweight Charts"));
        assert!(html.contains(r#"<script src="/assets/lightweight-charts.js"></script>"#));
        assert!(!html.contains("charts-missing"));
    } else {
        assert_eq!(r.status(), 404);
        assert!(html.contains(r#"id="charts-missing""#) && html.contains("make chart-assets"), "{html}");
    }
    stop.cancel();
}

#[test]
fn fills_carry_their_orders_reason() {
    for (id, want) in [
        ("tb-stop-AAPL-1357160400-0", "trailing stop"),
        ("tb-killsw-AAPL-1357160400-0", "kill switch"),
        ("tb-flatten-AAPL-1357160400-0", "flatten"),
        ("tb-sell-AAPL-1357160400-1", "protective sell"),
        ("tb-ppo-AAPL-1357160400-0", "model"),
        ("tb-engine-AAPL-1357160400-2", "model"),
        ("x-8f2c", "adopted from the broker"),
        ("by-hand-1", "placed outside tradebot"),
    ] {
        assert_eq!(data::order_reason(id), want, "{id}");
    }
}

#[test]
fn the_price_views_take_the_stored_bars_ohlcv() {
    use crate::domain::{Bar, Symbol, Timeframe};
    let t0 = Utc.with_ymd_and_hms(2013, 1, 2, 21, 0, 0).unwrap();
    let day = chrono::Duration::days(1);
    let mut p = data::PriceView {
        symbol: "AAPL".into(),
        t: vec![t0, t0 + day, t0 + day * 2],
        close: vec![10.0, 11.0, 12.0],
        ..Default::default()
    };
    let bar = |t, o, h, l, c, v| Bar {
        symbol: Symbol::new("AAPL").unwrap(),
        timeframe: Timeframe::Days(1),
        t,
        o,
        h,
        l,
        c,
        v,
    };
    // The middle bar is missing from the store: its close stands for its OHLC, with no volume.
    p.add_bars(&[bar(t0 + day * 2, 11.5, 12.5, 11.0, 12.0, 900.0), bar(t0, 9.5, 10.5, 9.0, 10.0, 700.0)]);
    assert_eq!(p.open, vec![9.5, 11.0, 11.5]);
    assert_eq!(p.high, vec![10.5, 11.0, 12.5]);
    assert_eq!(p.low, vec![9.0, 11.0, 11.0]);
    assert_eq!(p.volume, vec![700.0, 0.0, 900.0]);
}
