//! The daemon kept running after a replay (`--linger`): READY on a notify socket, `/metrics`, the API and
//! the dashboard in headless Chromium against `tradebot status --json`, its controls, SIGHUP's reload, and
//! SIGTERM flushing the store.

use super::common::{self, command, root, text, tradebot};
use super::{NO_SEARCH, ONE_RETRAIN, config_in, demo_replay_days, free_port, get, replay_finished};
use nix::sys::signal::Signal;
use std::io::{Read, Write};
use std::process::Command;
use std::time::{Duration, Instant};

/// Equal JSON, numbers compared by value (so 759 and 759.0 are equal).
fn same_json(a: &serde_json::Value, b: &serde_json::Value) -> bool {
    use serde_json::Value;
    match (a, b) {
        (Value::Number(x), Value::Number(y)) => x.as_f64() == y.as_f64(),
        (Value::Array(x), Value::Array(y)) => x.len() == y.len() && x.iter().zip(y).all(|(p, q)| same_json(p, q)),
        (Value::Object(x), Value::Object(y)) => {
            x.len() == y.len() && x.iter().all(|(k, v)| y.get(k).is_some_and(|w| same_json(v, w)))
        }
        _ => a == b,
    }
}

/// GET `path` with the dashboard token as a bearer: (status code, body).
fn get_with(port: u16, path: &str, token: &str) -> (u16, String) {
    let mut s = std::net::TcpStream::connect(("127.0.0.1", port)).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
    write!(s, "GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer {token}\r\nConnection: close\r\n\r\n")
        .unwrap();
    let mut raw = String::new();
    s.read_to_string(&mut raw).unwrap();
    let code = raw.split_whitespace().nth(1).and_then(|c| c.parse().ok()).unwrap_or(0);
    let body = raw.split_once("\r\n\r\n").map(|(_, b)| b.to_string()).unwrap_or_default();
    (code, body)
}

/// The `data-value` of the element with `id`, or of the `td.{class}` in the row of `symbol`.
fn data_value(dom: &str, anchor: &str) -> f64 {
    let at = dom.find(anchor).unwrap_or_else(|| panic!("{anchor} not in the DOM"));
    let rest = &dom[at..];
    let v = &rest[rest.find("data-value=\"").unwrap() + 12..];
    v[..v.find('"').unwrap()].parse().unwrap()
}

fn close(a: f64, b: f64) -> bool {
    (a - b).abs() <= 1e-9 * a.abs().max(b.abs()).max(1.0)
}

#[test]
fn dashboard_in_chromium_matches_status_and_sigterm_flushes() {
    let chromium = ["chromium", "chromium-browser"]
        .into_iter()
        .find(|c| Command::new(c).arg("--version").output().is_ok_and(|o| o.status.success()))
        .expect("headless Chromium is needed (Debian's chromium package; `make test` installs it)");
    let dir = tempfile::tempdir().unwrap();
    let port = free_port();
    let cfg = config_in(dir.path(), Some(port), &[ONE_RETRAIN, NO_SEARCH]);
    let cfg_s = cfg.to_str().unwrap();
    let token = "test-token-0123456789abcdef";
    // A notify socket like systemd's, to see READY=1.
    let notify_path = dir.path().join("notify.sock");
    let notify = std::os::unix::net::UnixDatagram::bind(&notify_path).unwrap();
    notify.set_read_timeout(Some(Duration::from_millis(200))).unwrap();
    let log = std::fs::File::create(dir.path().join("run.log")).unwrap();
    let out_path = dir.path().join("run.out");
    let out_text = || std::fs::read_to_string(&out_path).unwrap_or_default();
    let mut child = common::Reaped(
        command(&["run", "--config", cfg_s, "--linger"])
            .env("TRADEBOT_WEB_TOKEN", token)
            .env("NOTIFY_SOCKET", &notify_path)
            .stdout(std::fs::File::create(&out_path).unwrap())
            .stderr(log)
            .spawn()
            .unwrap(),
    );
    let log_text = || std::fs::read_to_string(dir.path().join("run.log")).unwrap_or_default();

    // Ready, then finished (the daemon stays up with --linger).
    let deadline = Instant::now() + Duration::from_secs(240);
    let mut notes = String::new();
    let status = loop {
        let mut buf = [0u8; 4096];
        while let Ok(n) = notify.recv(&mut buf) {
            notes.push_str(&String::from_utf8_lossy(&buf[..n]));
            notes.push('\n');
        }
        let o = tradebot(&["status", "--config", cfg_s, "--json"]);
        if o.status.success() {
            let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
            if v["daemon_running"] == true && v["activity"] == "replay finished" {
                break v;
            }
        }
        assert!(child.try_wait().unwrap().is_none(), "the daemon exited early:\n{}", log_text());
        assert!(Instant::now() < deadline, "the replay did not finish in time:\n{}", log_text());
        std::thread::sleep(Duration::from_millis(300));
    };
    assert!(notes.contains("READY=1"), "no READY=1 on the notify socket: {notes:?}");
    // --linger prints the summary when the replay ends, while the daemon keeps serving.
    let deadline = Instant::now() + Duration::from_secs(10);
    while !out_text().contains(&replay_finished()) {
        assert!(Instant::now() < deadline, "no summary while lingering:\n{}", out_text());
        std::thread::sleep(Duration::from_millis(100));
    }
    // Every bar of the window, of each of the demo's three symbols.
    let received = 3 * demo_replay_days() as u64;
    assert_eq!(status["feed"]["bars_received"].as_u64().unwrap(), received, "{status}");

    // /metrics parses and agrees with the status.
    let (code, body) = get(port, "/metrics");
    assert_eq!(code, 200);
    let lines = body.lines().filter(|l| *l != "# EOF").map(|l| Ok(l.to_string()));
    let scrape = prometheus_parse::Scrape::parse(lines).unwrap();
    let value = |name: &str| {
        scrape.samples.iter().find(|s| s.metric == name).map(|s| match s.value {
            prometheus_parse::Value::Gauge(v)
            | prometheus_parse::Value::Counter(v)
            | prometheus_parse::Value::Untyped(v) => v,
            _ => f64::NAN,
        })
    };
    assert!(close(value("tradebot_equity").unwrap(), status["equity"].as_f64().unwrap()), "{body}");
    let bars: f64 = scrape
        .samples
        .iter()
        .filter(|s| s.metric == "tradebot_bars_received_total")
        .map(|s| match s.value {
            prometheus_parse::Value::Counter(v) | prometheus_parse::Value::Untyped(v) => v,
            _ => f64::NAN,
        })
        .sum();
    assert_eq!(bars, received as f64, "{body}");
    assert!(body.contains("tradebot_retrain_runs_total{"), "{body}");
    // The retrain's children reported their throughput (PPO steps/s, LSTM samples/s and epoch times).
    for needle in [
        "tradebot_train_steps_per_second{kind=\"ppo\"}",
        "tradebot_train_steps_per_second{kind=\"lstm\"}",
        "tradebot_train_epoch_seconds{kind=\"lstm\"}",
    ] {
        assert!(body.contains(needle), "{needle} missing:\n{body}");
    }

    // A replay's feed is connected, in /metrics as in the status.
    assert_eq!(status["feed"]["connected"], true, "{status}");
    assert_eq!(value("tradebot_feed_connected"), Some(1.0), "{body}");

    // No token, no dashboard; the API refuses in JSON.
    assert_eq!(get(port, "/").0, 401);
    assert_eq!(get(port, "/?token=wrong-token-wrong-token").0, 401);
    let (code, refusal) = get(port, "/api/v1/status");
    assert_eq!(code, 401);
    let refusal: serde_json::Value = serde_json::from_str(&refusal).expect("a JSON refusal");
    assert_eq!(refusal["status"], 401, "{refusal}");
    // The API's figures are the status's (`?token=` works on the API too).
    let (code, api) = get(port, &format!("/api/v1/status?token={token}"));
    assert_eq!(code, 200, "{api}");
    let api: serde_json::Value = serde_json::from_str(&api).unwrap();
    let now = tradebot(&["status", "--config", cfg_s, "--json"]);
    let now: serde_json::Value = serde_json::from_slice(&now.stdout).unwrap();
    assert_eq!(api, now, "the API's status is not `tradebot status --json`'s");

    // The dashboard in a real browser: its numbers are the status's.
    let url = format!("http://127.0.0.1:{port}/?token={token}");
    let profile = dir.path().join("chromium");
    let browser = |extra: &[&str]| {
        let mut c = Command::new(chromium);
        c.args(["--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--no-first-run"])
            .arg(format!("--user-data-dir={}", profile.display()))
            .args(extra)
            .arg(&url);
        c.output().unwrap()
    };
    let dom = browser(&["--dump-dom"]);
    let dom = String::from_utf8_lossy(&dom.stdout).to_string();
    assert!(dom.contains("<h1>tradebot</h1>"), "no dashboard in the DOM:\n{dom}");
    assert!(!dom.contains("http-equiv=\"refresh\""), "the page reloads itself");
    for (id, key) in [("id=\"equity\"", "equity"), ("id=\"cash\"", "cash"), ("id=\"pnl-today\"", "pnl_today")] {
        assert!(
            close(data_value(&dom, id), status[key].as_f64().unwrap()),
            "{key}: DOM {} vs status {}",
            data_value(&dom, id),
            status[key]
        );
    }
    let positions = status["positions"].as_array().unwrap();
    assert!(!positions.is_empty(), "the demo ends holding something: {status}");
    for p in positions {
        let row = format!("data-symbol=\"{}\"", p["symbol"].as_str().unwrap());
        let at = dom.find(&row).unwrap_or_else(|| panic!("{row} not in the DOM"));
        let row_html = &dom[at..];
        assert!(close(data_value(row_html, "class=\"qty\""), p["qty"].as_f64().unwrap()), "{p}");
        assert!(close(data_value(row_html, "class=\"value\""), p["value"].as_f64().unwrap()), "{p}");
    }
    let champion = status["models"]["ppo"].as_str().unwrap();
    assert!(dom.contains(&format!("<code id=\"champion-ppo\">{champion}</code>")), "champion {champion} not shown");
    assert!(dom.contains("id=\"equity-chart\"") && dom.contains("id=\"drawdown-chart\""), "charts missing");
    assert!(dom.contains("class=\"outcome\""), "no training run shown");
    // The retrain's runs: labelled curves per update (PPO) and epoch (LSTM), with the gate's numbers.
    for needle in ["<h4>return by update</h4>", "<h4>loss by epoch</h4>", "<p class=\"gate\">gate: "] {
        assert!(dom.contains(needle), "{needle} not on the page");
    }
    // The book: what the fills hold (first in, first out) is what the order manager holds, at an entry
    // price whose unrealised P&L the row shows; closed trades.
    let by_symbol = &dom[dom.find("id=\"by-symbol\"").expect("no per-symbol table")..];
    for p in positions {
        let row = format!("data-symbol=\"{}\"", p["symbol"].as_str().unwrap());
        let held = &by_symbol[by_symbol.find(&row).unwrap_or_else(|| panic!("{row} not in the per-symbol table"))..];
        assert!(close(data_value(held, "class=\"qty\""), p["qty"].as_f64().unwrap()), "{p}");
        let pos = &dom[dom.find(&row).unwrap()..];
        let (entry, unrealised) = (data_value(pos, "class=\"entry\""), data_value(pos, "class=\"unrealised"));
        let want = (p["price"].as_f64().unwrap() - entry) * p["qty"].as_f64().unwrap();
        assert!(entry > 0.0 && (unrealised - want).abs() < 1e-6 * want.abs().max(1.0), "{p}: {entry} {unrealised}");
    }
    let trades = &dom[dom.find("id=\"trades\"").expect("no closed trades")..];
    assert!(trades.contains("class=\"pnl"), "no closed trade listed");

    // The page in a browser driven over DevTools: it is never reloaded (a marker set in it survives), and
    // a half-filled Promote form survives three updates from the event stream.
    let cdp = common::cdp::Browser::open(chromium, &dir.path().join("chromium-cdp"), &url);
    let ready = "new Promise(done => { const go = () => { const sel = document.querySelector('#control-promote select'); \
        if (window.tradebot && window.tradebot.updates > 0 && sel && sel.options.length > 1) { \
        window.__marker = 'set before the updates'; \
        const opts = Array.from(sel.options).slice(1); sel.value = (opts.find(o => o.text.includes('(candidate)')) || opts[0]).value; \
        done(JSON.stringify({ id: sel.value, updates: window.tradebot.updates })); } else { setTimeout(go, 100); } }; go(); })";
    let first: serde_json::Value = serde_json::from_str(cdp.eval(ready).as_str().unwrap()).unwrap();
    let chosen = first["id"].as_str().unwrap().to_string();
    let wait = format!(
        "new Promise(done => {{ const go = () => {{ if (window.tradebot.updates >= {} + 3) {{ \
        const sel = document.querySelector('#control-promote select'); \
        done(JSON.stringify({{ marker: window.__marker || null, id: sel.value, updates: window.tradebot.updates }})); \
        }} else {{ setTimeout(go, 100); }} }}; go(); }})",
        first["updates"]
    );
    let after: serde_json::Value = serde_json::from_str(cdp.eval(&wait).as_str().unwrap()).unwrap();
    assert_eq!(after["marker"], "set before the updates", "the page was reloaded: {after}");
    assert_eq!(after["id"], chosen.as_str(), "the update changed the Promote form's choice: {after}");
    // Its figures are still the status's, pushed by the stream.
    let pushed = cdp.eval("JSON.stringify(window.tradebot.data.status)");
    let pushed: serde_json::Value = serde_json::from_str(pushed.as_str().unwrap()).unwrap();
    let now = tradebot(&["status", "--config", cfg_s, "--json"]);
    let now: serde_json::Value = serde_json::from_slice(&now.stdout).unwrap();
    for key in ["equity", "cash", "pnl_today", "positions", "open_orders", "risk", "feed"] {
        // JavaScript writes 759.0 as 759: numbers are compared as numbers.
        assert!(
            same_json(&pushed[key], &now[key]),
            "{key}: pushed to the page {} vs `status --json` {}",
            pushed[key],
            now[key]
        );
    }
    // Every chart has its data: candles with volume per symbol, a marker for each of the store's fills
    // on it (each with its order's reason), the equity and drawdown lines, the training curves.
    let drawn = cdp.eval(
        "JSON.stringify(Object.fromEntries(Object.entries(window.tradebot.charts).map(([k, v]) => \
         [k, { points: v.points, ohlc: v.ohlc, volume: v.volume, markers: v.markers, reasons: v.reasons }])))",
    );
    let drawn: serde_json::Value = serde_json::from_str(drawn.as_str().unwrap()).unwrap();
    let (code, book) = get_with(port, "/api/v1/dashboard", token);
    assert_eq!(code, 200);
    let book: serde_json::Value = serde_json::from_str(&book).unwrap();
    assert!(drawn["equity-chart"]["points"].as_u64().unwrap() > 10, "{drawn}");
    assert!(drawn["drawdown-chart"]["points"].as_u64().unwrap() > 10, "{drawn}");
    // No blank band beside a curve: a line chart nobody zoomed shows from its first point to its last.
    for id in ["equity-chart", "drawdown-chart"] {
        let js = format!("JSON.stringify(window.tradebot.charts['{id}'].chart.timeScale().getVisibleLogicalRange())");
        let r: serde_json::Value = serde_json::from_str(cdp.eval(&js).as_str().unwrap()).unwrap();
        let n = drawn[id]["points"].as_f64().unwrap();
        let (from, to) = (r["from"].as_f64().unwrap(), r["to"].as_f64().unwrap());
        assert!(from > -1.0 && to < n, "{id}: {from}..{to} shown of {n} points: a blank band beside the curve");
    }
    let mut markers = 0;
    for p in book["prices"].as_array().unwrap() {
        let s = p["symbol"].as_str().unwrap();
        let c = &drawn[format!("price-{s}")];
        let bars = p["t"].as_array().unwrap().len() as u64;
        assert!(bars > 10 && c["points"] == bars && c["ohlc"] == true && c["volume"] == bars, "{s}: {c}");
        let fills = p["fills"].as_array().unwrap().len() as u64;
        assert_eq!(c["markers"], fills, "{s}: a marker per fill");
        assert_eq!(c["reasons"], fills, "{s}: every marker says why");
        markers += fills;
    }
    assert!(markers > 0, "no fill marked on any chart: {drawn}");
    assert!(
        drawn.as_object().unwrap().iter().any(|(k, v)| k.starts_with("train-") && v["points"].as_u64() >= Some(2)),
        "no training curve drawn: {drawn}"
    );
    // Then the form is completed and promotes: the answer is shown in the page, which is still the same.
    let promote = "new Promise(done => { const f = document.getElementById('control-promote'); \
        f.querySelector('input[name=confirm]').checked = true; f.querySelector('button').click(); \
        const go = () => { const o = f.querySelector('.outcome'); \
        if (o.textContent && o.textContent !== '…') { done(JSON.stringify({ text: o.textContent, ok: o.classList.contains('ok'), marker: window.__marker })); } \
        else { setTimeout(go, 100); } }; go(); })";
    let promoted: serde_json::Value = serde_json::from_str(cdp.eval(promote).as_str().unwrap()).unwrap();
    assert_eq!(promoted["ok"], true, "{promoted}");
    assert!(promoted["text"].as_str().unwrap().starts_with(&format!("{chosen} is the ")), "{promoted}");
    assert_eq!(promoted["marker"], "set before the updates", "the promote reloaded the page");
    assert!(log_text().contains("audit: dashboard promote"), "no audit line:\n{}", log_text());
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let state = cdp.eval(&format!(
            "(() => {{ const r = document.querySelector('#models tr[data-id=\"{chosen}\"] .state'); return r ? r.textContent : ''; }})()"
        ));
        if state == "champion" {
            break;
        }
        assert!(Instant::now() < deadline, "{chosen} is not shown as champion: {state}");
        std::thread::sleep(Duration::from_millis(200));
    }
    // Screenshots at a desktop's width and a phone's, kept as artifacts; into docs/ (README.md and
    // docs/DASHBOARD.md show them) only when asked with TRADEBOT_UPDATE_DOCS=1, so that a test run leaves the
    // checkout as it was.
    let update_docs = std::env::var("TRADEBOT_UPDATE_DOCS").is_ok_and(|v| v == "1");
    let shots = root().join("target/artifacts");
    std::fs::create_dir_all(&shots).unwrap();
    for width in [1400, 420] {
        let png = cdp.screenshot(width, 9000);
        assert!(png.len() > 10_000 && png.starts_with(b"\x89PNG"), "not a screenshot: {} bytes", png.len());
        std::fs::write(shots.join(format!("dashboard-{width}.png")), &png).unwrap();
        if update_docs {
            std::fs::write(root().join(format!("docs/dashboard-{width}.png")), &png).unwrap();
        }
    }
    drop(cdp);

    // A control clicked in the browser changes the daemon's state: Pause, through the page's form (posted
    // by the page's script; the script answers first and clicks a moment later).
    assert!(dom.contains("id=\"control-pause\"") && dom.contains("id=\"control-flatten\""), "no controls");
    let cdp = common::cdp::Browser::open(chromium, &dir.path().join("chromium-cdp2"), &url);
    let click = "new Promise(done => { const go = () => { const b = document.querySelector('#control-pause button'); \
        if (b) { setTimeout(() => b.click(), 50); done('clicked'); } else { setTimeout(go, 100); } }; go(); })";
    assert_eq!(cdp.eval(click), "clicked");
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let o = tradebot(&["status", "--config", cfg_s, "--json"]);
        let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap_or_default();
        if v["risk"]["paused"] == true {
            break;
        }
        assert!(Instant::now() < deadline, "the click did not pause the daemon:\n{}", log_text());
        std::thread::sleep(Duration::from_millis(200));
    }
    drop(cdp);
    assert!(log_text().contains("audit: dashboard pause: paused"), "no audit line:\n{}", log_text());
    // A POST without the CSRF token is refused, though it carries the dashboard's token.
    let mut s = std::net::TcpStream::connect(("127.0.0.1", port)).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
    write!(
        s,
        "POST /control/resume HTTP/1.1\r\nHost: 127.0.0.1\r\nCookie: tradebot_token={token}\r\nContent-Type: application/x-www-form-urlencoded\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
    )
    .unwrap();
    let mut raw = String::new();
    s.read_to_string(&mut raw).unwrap();
    assert!(raw.starts_with("HTTP/1.1 403"), "{raw}");
    let o = tradebot(&["status", "--config", cfg_s, "--json"]);
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["risk"]["paused"], true, "the refused POST resumed the daemon");
    // The refusal is a warning, which the dashboard lists.
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let mut s = std::net::TcpStream::connect(("127.0.0.1", port)).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
        write!(s, "GET /api/v1/dashboard HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer {token}\r\nConnection: close\r\n\r\n").unwrap();
        let mut raw = String::new();
        s.read_to_string(&mut raw).unwrap();
        if raw.contains("audit: dashboard resume refused: the form's CSRF token is missing or wrong") {
            break;
        }
        assert!(Instant::now() < deadline, "the refusal is not among the dashboard's warnings:\n{raw}");
        std::thread::sleep(Duration::from_millis(200));
    }

    // SIGHUP: the risk limits reload; a change to the traded symbols is refused, named, and kept out.
    let pid = child.id();
    let edited = std::fs::read_to_string(&cfg)
        .unwrap()
        .replace("max_position_pct = 0.4", "max_position_pct = 0.3")
        .replace("symbols = [\"AAPL\", \"MSFT\", \"IBM\"]", "symbols = [\"AAPL\", \"MSFT\"]");
    std::fs::write(&cfg, edited).unwrap();
    common::signal(pid, Signal::SIGHUP);
    let deadline = Instant::now() + Duration::from_secs(20);
    while !log_text().contains("SIGHUP: reloaded risk limits") {
        assert!(Instant::now() < deadline, "no reload logged:\n{}", log_text());
        std::thread::sleep(Duration::from_millis(100));
    }
    let log = log_text();
    assert!(log.contains("SIGHUP: [market] changed in") && log.contains("restart the daemon"), "{log}");
    let o = tradebot(&["status", "--config", cfg_s, "--json"]);
    assert!(o.status.success(), "the daemon stopped answering after SIGHUP:\n{}", log_text());

    // SIGTERM: a clean exit, the store flushed and released.
    common::signal(pid, Signal::SIGTERM);
    let exit = common::wait_exit(&mut child, Duration::from_secs(30), "no exit within 30 s of SIGTERM", log_text);
    assert!(exit.success(), "{exit}:\n{}", log_text());
    assert!(log_text().contains("SIGTERM: shutting down"), "{}", log_text());
    assert_eq!(out_text().matches("replay finished:").count(), 1, "the summary once:\n{}", out_text());
    let after = tradebot(&["status", "--config", cfg_s, "--json"]);
    assert!(after.status.success(), "the store is still held:\n{}", text(&after));
    let v: serde_json::Value = serde_json::from_slice(&after.stdout).unwrap();
    assert_eq!(v["daemon_running"], false);
    assert!(v["models"]["last_retrain"]["outcome"].is_string(), "the retrain record was not kept: {v}");
}
