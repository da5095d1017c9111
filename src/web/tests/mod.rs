use super::*;
use crate::control::StatusReport;
use crate::control::report::{PositionStatus, RiskStatus, StaleSymbol};
use crate::web::data::{ChartPoint, TrainingView};
use chrono::{TimeZone, Utc};
use std::os::unix::fs::PermissionsExt;

mod api;
mod reports;

pub(super) const TOKEN: &str = "0123456789abcdef0123456789abcdef";

pub(super) fn data() -> DashboardData {
    let t0 = Utc.with_ymd_and_hms(2010, 1, 4, 21, 0, 0).unwrap();
    DashboardData {
        status: StatusReport {
            mode: "paper".into(),
            equity: 123_456.78,
            cash: 1_000.5,
            positions: vec![PositionStatus { symbol: "AAPL".into(), qty: 12.0, price: 200.0, value: 2400.0 }],
            risk: RiskStatus { kill_switch: false, ..Default::default() },
            ..Default::default()
        },
        equity: (0..30)
            .map(|i| ChartPoint {
                t: t0 + chrono::Duration::days(i),
                equity: 100_000.0 + 500.0 * (i as f64).sin(),
                buy_hold: 100_000.0 + 100.0 * i as f64,
            })
            .collect(),
        training: vec![TrainingView {
            id: "r1".into(),
            kind: "ppo".into(),
            started_at: t0,
            outcome: "running".into(),
            curves: [("return".to_string(), vec![0.0, 0.1, 0.2])].into_iter().collect(),
            progress: Some(data::TrainingProgress {
                done: 50.0,
                total: 100.0,
                steps_per_s: 12_345.0,
                eta_secs: 4.0,
                gpu: Some(data::GpuNow { busy_pct: 97.0, memory_mb: 5222.4, power_w: Some(310.0) }),
            }),
            metrics: Default::default(),
            gate: None,
        }],
        ..Default::default()
    }
}

pub(super) async fn start(loopback: bool) -> (String, CancellationToken) {
    let state =
        WebState::new(Arc::new(Metrics::new()), Arc::new(SharedData::new(data())), Secret::new(TOKEN), loopback);
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    let stop = CancellationToken::new();
    tokio::spawn(serve(listener, state, listen::Limits::default(), stop.clone()));
    (url, stop)
}

pub(super) fn client() -> reqwest::Client {
    reqwest::Client::builder().redirect(reqwest::redirect::Policy::none()).build().unwrap()
}

#[tokio::test]
async fn the_dashboard_needs_the_token() {
    let (url, stop) = start(true).await;
    let c = client();
    for req in [
        c.get(format!("{url}/")),
        c.get(format!("{url}/")).bearer_auth("wrong-token-wrong-token"),
        c.get(format!("{url}/")).header("Cookie", "tradebot_token=nope"),
        c.get(format!("{url}/?token=nope")),
        c.get(format!("{url}/api/v1/status")),
        c.get(format!("{url}/api/v1/dashboard")),
        c.get(format!("{url}/api/v1/events")),
        c.get(format!("{url}/search")),
        c.get(format!("{url}/search?token=nope")),
    ] {
        let r = req.send().await.unwrap();
        assert_eq!(r.status(), 401);
        assert!(!r.text().await.unwrap().contains("123456"), "no data leaks on a refusal");
    }
    // ?token= sets the cookie and drops the token from the address.
    let r = c.get(format!("{url}/?token={TOKEN}")).send().await.unwrap();
    assert_eq!(r.status(), 303);
    assert_eq!(r.headers()["location"], "/");
    let cookie = r.headers()["set-cookie"].to_str().unwrap().to_string();
    assert!(cookie.contains("HttpOnly") && cookie.contains("SameSite=Strict"), "{cookie}");
    let pair = cookie.split(';').next().unwrap().to_string();
    let html = c.get(format!("{url}/")).header("Cookie", pair).send().await.unwrap().text().await.unwrap();
    assert!(html.contains(r#"id="equity" data-value="123456.78">$123,456.78<"#), "{html}");
    assert!(
        html.contains(r#"<tr data-symbol="AAPL">"#)
            && html.contains("equity-chart")
            && html.contains("train-r1-return")
    );
    assert!(!html.contains("http://") && !html.contains("https://"), "nothing is loaded from elsewhere");
    // A run training on a GPU shows the GPU's readings beside its progress bar.
    assert!(html.contains(r#"<span class="gpu" data-busy="97">GPU 97% busy · 5.1 GB · 310 W</span>"#), "{html}");
    // The strategy beside buy-and-hold and cash: the returns since the first point, and the three lines.
    let want_bh = (100_000.0 + 100.0 * 29.0) / 100_000.0 - 1.0;
    assert!(html.contains(&format!(r#"id="return-buy-hold" data-value="{want_bh}">2.9%<"#)), "{html}");
    assert!(html.contains(r#"id="return-cash" data-value="0">0.0%<"#) && html.contains(">cash<"), "{html}");
    assert!(html.contains(r#"<a href="/search">"#), "the dashboard links the search page");
    let search = c.get(format!("{url}/search")).bearer_auth(TOKEN).send().await.unwrap().text().await.unwrap();
    assert!(search.contains("Hyper-parameter searches") && search.contains("none yet"), "{search}");
    let st: StatusReport =
        c.get(format!("{url}/api/v1/status")).bearer_auth(TOKEN).send().await.unwrap().json().await.unwrap();
    assert_eq!(st, data().status);
    stop.cancel();
}

#[tokio::test]
async fn metrics_are_open_on_loopback_only() {
    let (url, stop) = start(true).await;
    let r = client().get(format!("{url}/metrics")).send().await.unwrap();
    assert_eq!(r.status(), 200);
    assert!(r.headers()["content-type"].to_str().unwrap().starts_with("application/openmetrics-text"));
    assert!(r.text().await.unwrap().ends_with("# EOF\n"));
    stop.cancel();
    let (url, stop) = start(false).await;
    assert_eq!(client().get(format!("{url}/metrics")).send().await.unwrap().status(), 401);
    let r = client().get(format!("{url}/metrics")).bearer_auth(TOKEN).send().await.unwrap();
    assert_eq!(r.status(), 200);
    stop.cancel();
}

#[test]
fn the_token_comes_from_the_file_env_credentials_or_a_new_private_file() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = |file: Option<std::path::PathBuf>| WebConfig {
        enabled: true,
        listen: "127.0.0.1:0".parse().unwrap(),
        token_file: file,
        allow_remote: false,
        max_connections: 256,
        header_timeout_secs: 10,
    };
    let none = |_: &str| None;
    // A new token, kept private and reused.
    let a = resolve_token(&cfg(None), dir.path(), none).unwrap();
    let mode = std::fs::metadata(dir.path().join("web.token")).unwrap().permissions().mode();
    assert_eq!(mode & 0o777, 0o600);
    assert_eq!(a.expose().len(), 64);
    assert_eq!(resolve_token(&cfg(None), dir.path(), none).unwrap(), a);
    // The environment wins over the state file.
    let env = |k: &str| (k == TOKEN_VAR).then(|| "from-the-environment-123".to_string());
    assert_eq!(resolve_token(&cfg(None), dir.path(), env).unwrap().expose(), "from-the-environment-123");
    // A configured file must exist and be long enough; the error names it.
    let short = dir.path().join("short");
    std::fs::write(&short, "abc").unwrap();
    let e = resolve_token(&cfg(Some(short)), dir.path(), none).unwrap_err().to_string();
    assert!(e.contains("short") && e.contains("fewer than 16"), "{e}");
    let e = resolve_token(&cfg(Some(dir.path().join("missing"))), dir.path(), none).unwrap_err().to_string();
    assert!(e.contains("missing") && e.contains("does not exist"), "{e}");
}

#[test]
fn drawdown_follows_the_running_peak() {
    let dd = page::drawdown(&[100.0, 120.0, 90.0, 130.0]);
    assert_eq!(dd, vec![0.0, 0.0, 0.25, 0.0]);
}

#[test]
fn stale_and_down_symbols_are_shown_and_counted() {
    let mut d = data();
    let stale = |s: &str, bars, down| StaleSymbol { symbol: s.into(), bars, down };
    d.status.feed.stale = vec![stale("IBM", 1, false), stale("QUIET", 5, true)];
    let html = page::render(&d, None);
    assert!(html.contains(r#"id="stale""#) && html.contains("IBM stale (1 bars), QUIET down (5 bars)"), "{html}");
    assert!(!page::render(&data(), None).contains(r#"id="stale""#), "nothing shown when every symbol has bars");
    let m = crate::metrics::Metrics::new();
    m.observe_status(&d.status);
    assert_eq!((m.stale_symbols.get(), m.down_symbols.get()), (2, 1));
}

/// A web server whose controls reach a channel the test answers for the daemon.
pub(super) async fn start_with_control()
-> (String, CancellationToken, tokio::sync::mpsc::Receiver<crate::control::server::Call>) {
    let (tx, rx) = tokio::sync::mpsc::channel(4);
    let state = WebState::new(Arc::new(Metrics::new()), Arc::new(SharedData::new(data())), Secret::new(TOKEN), true)
        .with_control(tx);
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    let stop = CancellationToken::new();
    tokio::spawn(serve(listener, state, listen::Limits::default(), stop.clone()));
    (url, stop, rx)
}

/// The CSRF token in the page's forms.
pub(super) fn csrf_of(html: &str) -> String {
    let at = html.find(r#"name="csrf" value=""#).expect("a form with the CSRF token") + r#"name="csrf" value=""#.len();
    html[at..at + html[at..].find('"').unwrap()].to_string()
}

#[tokio::test]
async fn controls_need_the_token_the_csrf_token_and_for_flatten_a_confirmation() {
    let (url, stop, mut calls) = start_with_control().await;
    let c = client();
    let html = c.get(format!("{url}/")).bearer_auth(TOKEN).send().await.unwrap().text().await.unwrap();
    let csrf = csrf_of(&html);
    let post = |action: &str, body: String| {
        c.post(format!("{url}/control/{action}"))
            .bearer_auth(TOKEN)
            .header("content-type", "application/x-www-form-urlencoded")
            .body(body)
    };
    // The page carries the forms and the CSRF token.
    assert!(html.contains(r#"id="control-pause""#) && csrf.len() == 64, "no controls on the page");
    // Without the dashboard token: 401; without or with a wrong CSRF token: 403; nothing reaches the daemon.
    let r = c.post(format!("{url}/control/pause")).body(format!("csrf={csrf}")).send().await.unwrap();
    assert_eq!(r.status(), 401);
    assert_eq!(post("pause", String::new()).send().await.unwrap().status(), 403);
    assert_eq!(post("pause", "csrf=0000".into()).send().await.unwrap().status(), 403);
    // Flatten and promote without the ticked box: 400.
    assert_eq!(post("flatten", format!("csrf={csrf}")).send().await.unwrap().status(), 400);
    assert_eq!(post("promote", format!("csrf={csrf}&id=ppo-x")).send().await.unwrap().status(), 400);
    assert_eq!(post("explode", format!("csrf={csrf}")).send().await.unwrap().status(), 400);
    assert!(calls.try_recv().is_err(), "a refused form reached the daemon");

    // With both: the request reaches the daemon, whose answer is the page's.
    let answer = tokio::spawn(async move {
        let mut seen = Vec::new();
        for _ in 0..3 {
            let (req, reply) = calls.recv().await.unwrap();
            let ok = !matches!(req, crate::control::Request::Rollback { .. });
            seen.push(req);
            let _ = reply.send(if ok {
                crate::control::Response::done("paused: no new orders until resume")
            } else {
                crate::control::Response::error("no previous lstm champion to roll back to")
            });
        }
        seen
    });
    let r = post("pause", format!("csrf={csrf}")).send().await.unwrap();
    assert_eq!(r.status(), 200);
    let v: serde_json::Value = r.json().await.unwrap();
    assert_eq!(v, serde_json::json!({ "ok": true, "message": "paused: no new orders until resume" }));
    let r = post("promote", format!("csrf={csrf}&id=ppo-abc&confirm=yes")).send().await.unwrap();
    assert_eq!(r.status(), 200);
    let r = post("rollback", format!("csrf={csrf}&kind=lstm")).send().await.unwrap();
    assert_eq!(r.status(), 409);
    let v: serde_json::Value = r.json().await.unwrap();
    assert_eq!(v["status"], 409);
    assert!(v["error"].as_str().unwrap().contains("no previous lstm champion"), "{v}");
    let seen = answer.await.unwrap();
    assert_eq!(seen[0], crate::control::Request::Pause);
    assert_eq!(seen[1], crate::control::Request::Promote { id: "ppo-abc".into(), reason: "dashboard: by hand".into() });
    assert_eq!(
        seen[2],
        crate::control::Request::Rollback { kind: crate::models::ModelKind::Lstm, reason: "dashboard: by hand".into() }
    );
    stop.cancel();
}

#[test]
fn warnings_and_errors_are_listed_most_recent_first() {
    let line = |level: &str, message: &str, s: i64| crate::logging::LogLine {
        at: Utc.with_ymd_and_hms(2026, 11, 25, 14, 0, 0).unwrap() + chrono::Duration::seconds(s),
        level: level.into(),
        target: "tradebot::engine".into(),
        message: message.into(),
    };
    let mut d = data();
    assert!(page::render(&d, None).contains("none since the daemon started"));
    d.logs = vec![
        line("WARN", "market feed lost: reset <by peer>", 0),
        line("ERROR", "the new LSTM champion does not load", 5),
    ];
    let html = page::render(&d, None);
    let (first, second) = (html.find("does not load").unwrap(), html.find("market feed lost").unwrap());
    assert!(first < second, "most recent first");
    assert!(html.contains("reset &lt;by peer&gt;"), "messages are escaped");
    assert!(html.contains("Warnings and errors (2)"));
}

#[test]
fn the_book_shows_entry_prices_unrealised_pnl_trades_and_marked_prices() {
    use crate::web::data::{FillMark, PriceView, SymbolView};
    let t0 = Utc.with_ymd_and_hms(2013, 1, 2, 21, 0, 0).unwrap();
    let mut d = data();
    d.symbols = vec![SymbolView {
        symbol: "AAPL".into(),
        qty: 12.0,
        avg_entry: 150.0,
        last_price: 200.0,
        unrealised: 600.0,
        realised: -25.5,
        fees: 3.25,
        trades: 4,
        wins: 1,
    }];
    d.trades = vec![crate::oms::trades::ClosedTrade {
        symbol: "AAPL".into(),
        entry_time: t0,
        exit_time: t0 + chrono::Duration::days(3),
        qty: 5.0,
        entry_price: 160.0,
        exit_price: 155.0,
        fees: 0.79,
        pnl: -25.79,
    }];
    d.prices = vec![PriceView {
        symbol: "AAPL".into(),
        t: (0..5).map(|i| t0 + chrono::Duration::days(i)).collect(),
        close: vec![160.0, 158.0, 157.0, 155.0, 200.0],
        fills: vec![
            FillMark { t: t0, buy: true, qty: 5.0, price: 160.0, reason: "model".into() },
            FillMark {
                t: t0 + chrono::Duration::days(3),
                buy: false,
                qty: 5.0,
                price: 155.0,
                reason: "trailing stop".into(),
            },
        ],
        ..Default::default()
    }];
    let html = page::render(&d, None);
    // The position row: entry 150, unrealised (200 - 150) × 12.
    let row = &html[html.find(r#"<tr data-symbol="AAPL"><td>AAPL</td><td class="qty""#).unwrap()..];
    assert!(row.contains(r#"class="entry" data-value="150""#) && row.contains(r#"data-value="600">$600.00"#), "{row}");
    assert!(html.contains(r#"id="by-symbol""#) && html.contains(">25.0%<"), "one of four trades won");
    assert!(html.contains(r#"class="pnl bad" data-value="-25.79""#), "the losing trade");
    // The price chart's data goes to the page's script: both fills, with their reasons.
    let first = &html[html.find(r#"<script id="first-data" type="application/json">"#).unwrap()..];
    let json = &first[first.find('>').unwrap() + 1..first.find("</script>").unwrap()];
    let shipped: DashboardData = serde_json::from_str(json).unwrap();
    assert_eq!(shipped.prices, d.prices);
}

#[test]
fn training_runs_are_labelled_curves_with_their_final_numbers_and_the_gate() {
    let mut d = data();
    let mut run = d.training[0].clone();
    run.id = "ppo-run-7".into();
    run.outcome = "kept".into();
    run.progress = None;
    run.curves =
        [("return".to_string(), vec![0.1, 0.2, 0.15]), ("single".to_string(), vec![1.0])].into_iter().collect();
    run.metrics = [("mean_return".to_string(), 0.15), ("updates".to_string(), 13.0)].into_iter().collect();
    run.gate = Some(("no lead over the champion".into(), "candidate +3.1% (Sharpe 0.40)".into()));
    d.training = vec![run];
    let html = page::render(&d, None);
    let run = &html[html.find(r#"data-id="ppo-run-7""#).unwrap()..];
    assert!(run.contains("<h4>return by update</h4>") && run.contains(r#"id="train-ppo-run-7-return""#), "{run}");
    assert!(!run.contains("train-ppo-run-7-single"), "a one-point curve is not drawn");
    assert!(run.contains(">updates</th>") && run.contains(">13<"), "final numbers, integers as integers");
    assert!(run.contains("no lead over the champion") && run.contains("candidate +3.1% (Sharpe 0.40)"), "the gate");
}

#[tokio::test]
async fn each_daemon_session_has_its_own_csrf_token_and_refuses_another_sessions() {
    let (a_url, a_stop, _a_calls) = start_with_control().await;
    let (b_url, b_stop, mut b_calls) = start_with_control().await;
    let c = client();
    let page = |url: String| {
        let c = c.clone();
        async move { c.get(format!("{url}/")).bearer_auth(TOKEN).send().await.unwrap().text().await.unwrap() }
    };
    let (a, b) = (csrf_of(&page(a_url.clone()).await), csrf_of(&page(b_url.clone()).await));
    assert_ne!(a, b, "two sessions with the same dashboard token must not share a CSRF token");
    assert_eq!(a, csrf_of(&page(a_url).await), "one session keeps its token");
    // A form from the first session (an old page, or a token learnt once) is refused by the second.
    let r = c
        .post(format!("{b_url}/control/pause"))
        .bearer_auth(TOKEN)
        .header("content-type", "application/x-www-form-urlencoded")
        .body(format!("csrf={a}"))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 403);
    assert!(b_calls.try_recv().is_err(), "the refused form reached the daemon");
    a_stop.cancel();
    b_stop.cancel();
}

#[tokio::test]
async fn the_cookie_is_secure_behind_a_tls_proxy() {
    let (url, stop) = start(true).await;
    let cookie = |proto: Option<&'static str>| {
        let mut req = client().get(format!("{url}/?token={TOKEN}"));
        if let Some(p) = proto {
            req = req.header("X-Forwarded-Proto", p);
        }
        async move { req.send().await.unwrap().headers()["set-cookie"].to_str().unwrap().to_string() }
    };
    assert!(cookie(Some("https")).await.contains("; Secure"));
    assert!(!cookie(None).await.contains("Secure"), "plain HTTP on loopback: a Secure cookie would never come back");
    stop.cancel();
}

/// A server with `limits`, no controls.
async fn start_limited(limits: listen::Limits) -> (std::net::SocketAddr, CancellationToken) {
    let state = WebState::new(Arc::new(Metrics::new()), Arc::new(SharedData::new(data())), Secret::new(TOKEN), true);
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let stop = CancellationToken::new();
    tokio::spawn(serve(listener, state, limits, stop.clone()));
    (addr, stop)
}

/// Reads until the server closes the connection; how long that took on the runtime's clock (`None`: still
/// open after `limit`).
async fn closed_within(s: &mut tokio::net::TcpStream, limit: std::time::Duration) -> Option<std::time::Duration> {
    use tokio::io::AsyncReadExt;
    let started = tokio::time::Instant::now();
    let mut buf = [0u8; 1024];
    loop {
        match tokio::time::timeout(limit.saturating_sub(started.elapsed()), s.read(&mut buf)).await {
            Err(_) => return None,
            Ok(Ok(0)) | Ok(Err(_)) => return Some(started.elapsed()),
            Ok(Ok(_)) => {}
        }
    }
}

/// On paused time: the server's timeouts are the runtime's timers, so its second passes at once.
#[tokio::test(start_paused = true)]
async fn a_connection_that_sends_no_request_head_in_time_is_closed() {
    use std::time::Duration;
    use tokio::io::AsyncWriteExt;
    let limits = listen::Limits { max_connections: 8, header_timeout: Duration::from_secs(1), ..Default::default() };
    let (addr, stop) = start_limited(limits).await;
    let started = tokio::time::Instant::now();
    let mut silent = tokio::net::TcpStream::connect(addr).await.unwrap();
    // Slowloris: a head started and never finished.
    let mut slow = tokio::net::TcpStream::connect(addr).await.unwrap();
    slow.write_all(b"GET / HTTP/1.1\r\nHost: 127.0.0.1\r\n").await.unwrap();
    for s in [&mut silent, &mut slow] {
        closed_within(s, Duration::from_secs(10)).await.expect("the connection is still open after 10 s");
        let t = started.elapsed();
        assert!(t >= Duration::from_millis(900) && t < Duration::from_secs(5), "closed after {t:?}");
    }
    // A request sent in time is answered.
    let r = client().get(format!("http://{addr}/api/v1/status")).bearer_auth(TOKEN).send().await.unwrap();
    assert_eq!(r.status(), 200);
    stop.cancel();
}

#[tokio::test]
async fn connections_above_the_cap_are_closed_at_once_and_service_resumes_when_they_go() {
    use std::time::Duration;
    let limits = listen::Limits { max_connections: 2, header_timeout: Duration::from_secs(60), ..Default::default() };
    let (addr, stop) = start_limited(limits).await;
    let idle: Vec<tokio::net::TcpStream> =
        vec![tokio::net::TcpStream::connect(addr).await.unwrap(), tokio::net::TcpStream::connect(addr).await.unwrap()];
    // Both are served (so held), the third is closed as it is accepted, long before any timeout.
    tokio::time::sleep(Duration::from_millis(200)).await;
    let mut third = tokio::net::TcpStream::connect(addr).await.unwrap();
    let t = closed_within(&mut third, Duration::from_secs(5)).await.expect("the third connection was queued");
    assert!(t < Duration::from_secs(2), "closed after {t:?}");
    drop(idle);
    // The slots come back as the idle connections go.
    let deadline = std::time::Instant::now() + Duration::from_secs(5);
    loop {
        match client().get(format!("http://{addr}/api/v1/status")).bearer_auth(TOKEN).send().await {
            Ok(r) if r.status() == 200 => break,
            other => assert!(std::time::Instant::now() < deadline, "no answer after the idle ones left: {other:?}"),
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    stop.cancel();
}

/// On paused time: the server's timeouts are the runtime's timers, so its second passes at once.
#[tokio::test(start_paused = true)]
async fn a_request_whose_body_does_not_come_gets_408_and_its_connection_closed() {
    use std::time::Duration;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let limits = listen::Limits { request_timeout: Duration::from_secs(1), ..Default::default() };
    let (addr, stop) = start_limited(limits).await;
    let started = tokio::time::Instant::now();
    let mut s = tokio::net::TcpStream::connect(addr).await.unwrap();
    // A slow POST: the head in time, then 3 of the 100 bytes it announces.
    let head = format!(
        "POST /control/pause HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer {TOKEN}\r\n\
         Content-Type: application/x-www-form-urlencoded\r\nContent-Length: 100\r\n\r\ncsr"
    );
    s.write_all(head.as_bytes()).await.unwrap();
    let mut answer = Vec::new();
    let read = tokio::time::timeout(Duration::from_secs(10), s.read_to_end(&mut answer)).await;
    assert!(read.is_ok(), "the connection is still open after 10 s");
    let answer = String::from_utf8_lossy(&answer);
    assert!(answer.starts_with("HTTP/1.1 408"), "{answer}");
    assert!(started.elapsed() < Duration::from_secs(5), "answered after {:?}", started.elapsed());
    stop.cancel();
}
