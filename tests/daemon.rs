//! `tradebot run` on a replay, end to end with the real binary: the shipped models, the engine, the
//! simulated broker, a scheduled retrain in simulated time whose training child is the same binary, the
//! promotion gate and the hot swap; then the daemon kept running (`--linger`) under a systemd-style
//! notify socket, scraped on `/metrics`, its dashboard loaded in headless Chromium and compared with
//! `tradebot status --json`, and stopped with SIGTERM.

mod common;

use common::{command, demo_config, root, text, tradebot, write_config};

use nix::sys::signal::Signal;
use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// The demo config with its state under `dir`, the web server on `web` (or off), and `edits` applied
/// (each `(from, to)` must match once).
fn config_in(dir: &Path, web: Option<u16>, edits: &[(&str, &str)]) -> PathBuf {
    let mut t = demo_config(dir);
    let web_line = "enabled = true\nlisten = \"127.0.0.1:9187\"";
    assert!(t.contains(web_line));
    t = match web {
        Some(port) => t.replace(web_line, &format!("enabled = true\nlisten = \"127.0.0.1:{port}\"")),
        None => t.replace(web_line, "enabled = false\nlisten = \"127.0.0.1:9187\""),
    };
    for (a, b) in edits {
        assert_eq!(t.matches(a).count(), 1, "{a:?} in the demo config");
        t = t.replace(a, b);
    }
    write_config(dir, &t)
}

/// The demo's schedule crosses two retrains (2012-03-01 and 2012-07-01); tests about one retrain keep
/// only the second.
const ONE_RETRAIN: (&str, &str) = ("schedule = \"0 2 1 3,7 *\"", "schedule = \"0 2 1 7 *\"  ");

/// The summary's retrain line of `kind` at simulated 2012-07-02: `(outcome, rest)`.
fn retrain_line<'a>(out: &'a str, kind: &str) -> (&'a str, &'a str) {
    retrain_line_on(out, kind, "2012-07-02")
}

fn retrain_line_on<'a>(out: &'a str, kind: &str, day: &str) -> (&'a str, &'a str) {
    let prefix = format!("  {kind} at simulated {day}: ");
    let line = out.lines().find(|l| l.starts_with(&prefix)).unwrap_or_else(|| panic!("no {kind} retrain in:\n{out}"));
    line[prefix.len()..].split_once(" — ").unwrap_or_else(|| panic!("{line}"))
}

fn final_ppo(out: &str) -> String {
    let line = out.lines().find(|l| l.starts_with("models at the end: ppo ")).unwrap_or_else(|| panic!("{out}"));
    line["models at the end: ppo ".len()..].split(',').next().unwrap().to_string()
}

/// The shipped PPO model's id: the one `ppo-*` directory under `models/`.
fn shipped_ppo() -> String {
    let ids: Vec<String> = std::fs::read_dir(root().join("models"))
        .unwrap()
        .filter_map(|e| e.ok()?.file_name().into_string().ok())
        .filter(|n| n.starts_with("ppo-"))
        .collect();
    assert_eq!(ids.len(), 1, "one shipped PPO model: {ids:?}");
    ids[0].clone()
}

/// The demo's replay window (`[feed] from`, `to`) and the trading days it holds in the shipped data:
/// AAPL's rows in that window, counted from the CSV. Every replay of the demo must report that many bars.
const DEMO_WINDOW: (&str, &str) = ("2011-09-01", "2013-03-01");
fn demo_replay_days() -> usize {
    let gz = std::fs::File::open(root().join("data/stocks-daily-2000-2013.csv.gz")).unwrap();
    let mut rdr = csv::Reader::from_reader(flate2::read::GzDecoder::new(gz));
    let (from, to) = DEMO_WINDOW;
    rdr.records().map(|r| r.unwrap()).filter(|r| &r[0] == "AAPL" && &r[1] >= from && &r[1] <= to).count()
}

fn replay_finished() -> String {
    format!("replay finished: {} bars, {} to {}", demo_replay_days(), DEMO_WINDOW.0, DEMO_WINDOW.1)
}

#[test]
fn the_demo_replay_retrains_twice_keeps_the_champion_when_the_gate_says_so_and_summarises() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = config_in(dir.path(), None, &[]);
    let o = tradebot(&["run", "--config", cfg.to_str().unwrap()]);
    let out = text(&o);
    assert!(o.status.success(), "{out}");
    assert!(out.contains(&replay_finished()), "{out}");
    // Logs are for people (issue 19): a few lines for the whole replay, not one per bar, and no Debug
    // formatting in them.
    let lines: Vec<&str> = out.lines().filter(|l| l.contains(" INFO ") || l.contains(" WARN ")).collect();
    let bars = demo_replay_days();
    assert!(lines.len() * 4 < bars, "{} INFO and WARN lines for {bars} bars:\n{}", lines.len(), lines.join("\n"));
    // Numbers for people: no figure with more than 8 decimals (a 28-digit Decimal, an f64's full digits).
    for l in &lines {
        let (mut digits_after_point, mut in_fraction, mut prev_digit) = (0, false, false);
        for c in l.chars() {
            if c.is_ascii_digit() {
                digits_after_point += usize::from(in_fraction);
                assert!(digits_after_point <= 8, "a number with more than 8 decimals: {l}");
            } else {
                in_fraction = c == '.' && prev_digit;
                digits_after_point = 0;
            }
            prev_digit = c.is_ascii_digit();
        }
    }
    for leak in ["Symbol(\"", "Some(", "[\"", "[Ppo", "strategy Ppo"] {
        let bad: Vec<&&str> = lines.iter().filter(|l| l.contains(leak)).collect();
        assert!(bad.is_empty(), "Debug formatting ({leak}) in log lines: {bad:#?}");
    }
    for row in ["total return", "Sharpe", "max drawdown", "trades"] {
        let line = out.lines().find(|l| l.starts_with(row)).unwrap_or_else(|| panic!("no {row} row:\n{out}"));
        // tradebot, buy-and-hold and cash.
        assert_eq!(line.split_whitespace().count(), row.split(' ').count() + 3, "{line}");
    }
    assert!(out.contains("bars without a decision after warm-up: 0"), "{out}");
    assert!(out.contains("retrains: 4"), "{out}");
    // Two scheduled retrains. The demo's PPO candidates (seeded by their day, deterministic) start from the
    // shipped champion's training state (retrain.warm_start) and are judged against it; neither beats it
    // clearly enough: both are kept, and the shipped PPO trades on.
    let warm = "    candidate warm-started from the champion ppo-fee6be4c55483f7a";
    assert_eq!(out.lines().filter(|l| *l == warm).count(), 2, "{out}");
    for day in ["2012-03-02", "2012-07-02"] {
        let (outcome, reason) = retrain_line_on(&out, "ppo", day);
        assert_eq!(outcome, "kept", "{reason}\n{out}");
        assert!(reason.contains("champion"), "{reason}");
        let (outcome, reason) = retrain_line_on(&out, "lstm", day);
        assert_eq!(outcome, "kept", "{reason}\n{out}");
        assert!(!reason.is_empty(), "lstm: the gate decision has no reason");
    }
    // Each decision's numbers follow its line: the PPO candidates' beside the champion's and
    // buy-and-hold's, with the candidate's fold returns.
    let gates: Vec<&str> = out.lines().filter(|l| l.starts_with("    gate: ")).collect();
    assert_eq!(gates.len(), 4, "{out}");
    for g in gates.iter().step_by(2) {
        for part in ["candidate ", "champion ", "buy-and-hold ", "candidate's folds "] {
            assert!(g.contains(part), "{part:?} missing in {g}");
        }
    }
    assert_eq!(final_ppo(&out), shipped_ppo(), "a kept candidate must not trade:\n{out}");
    readme_agrees_with_the_demo_replay(&out);
    // The two PPO retrains trained on different data (the rolling window moved) with different seeds.
    let store = tradebot::store::Store::open(&dir.path().join("state")).unwrap();
    let runs: Vec<_> = tradebot::retrain::record::list(&store)
        .unwrap()
        .into_iter()
        .filter(|r| r.kind == tradebot::models::ModelKind::Ppo)
        .collect();
    assert_eq!(runs.len(), 2);
    let (a, b) = (&runs[0], &runs[1]);
    assert!(a.seed.is_some() && b.seed.is_some() && a.seed != b.seed, "{:?} {:?}", a.seed, b.seed);
    let (sa, sb) = (a.snapshot.as_ref().unwrap(), b.snapshot.as_ref().unwrap());
    assert!(sa.first_bar != sb.first_bar && sa.last_bar != sb.last_bar, "{sa:?} {sb:?}");
    drop(store);
    // The records outlive the daemon: the offline status reads the last one, with the gate's numbers.
    let s = tradebot(&["status", "--config", cfg.to_str().unwrap(), "--json"]);
    assert!(s.status.success(), "{}", text(&s));
    let v: serde_json::Value = serde_json::from_slice(&s.stdout).unwrap();
    assert_eq!(v["daemon_running"], false);
    let last = &v["models"]["last_retrain"];
    assert_eq!(last["outcome"], retrain_line(&out, "lstm").0, "{v}");
    assert!(!last["reason"].as_str().unwrap().is_empty(), "{v}");
}

/// The README quotes this run (issue 36: it said "retrains once" and "fires once" of a replay that
/// retrains four times): its summary block is the summary printed here, line for line (a retrained
/// candidate's figures, which the README says may differ on another CPU, by kind, day and outcome), and
/// its words for the number of retrains are the run's.
fn readme_agrees_with_the_demo_replay(out: &str) {
    let readme = std::fs::read_to_string(root().join("README.md")).unwrap();
    let start = readme.find("```text\nreplay finished:").expect("the README quotes the demo replay's summary");
    let block: Vec<&str> = readme[start + "```text\n".len()..].split("\n```").next().unwrap().lines().collect();
    let summary: Vec<&str> = out.lines().skip_while(|l| !l.starts_with("replay finished:")).collect();
    let retrained = |l: &str| l.starts_with("    gate: ") || l.contains(" at simulated ");
    let shape = |l: &str| {
        if l.starts_with("    gate: ") {
            "    gate: …".to_string()
        } else {
            l.split(" — ").next().unwrap().to_string()
        }
    };
    for (i, want) in block.iter().enumerate() {
        let got = summary.get(i).copied().unwrap_or("(no line)");
        if retrained(want) {
            assert_eq!(shape(got), shape(want), "README.md's demo summary, line {}:\n{out}", i + 1);
        } else {
            assert_eq!(got, *want, "README.md's demo summary, line {}: the run printed {got:?}", i + 1);
        }
    }
    // The summary ends where the block does (stderr's log lines, stamped, follow stdout's in `out`).
    let after = summary.get(block.len()).copied().unwrap_or("");
    assert!(after.is_empty() || after.starts_with("20"), "the summary goes on past README.md's block: {after:?}");
    let n = out.lines().find_map(|l| l.strip_prefix("retrains: ")).and_then(|n| n.parse::<usize>().ok()).unwrap();
    let words = ["no", "once", "twice", "three times", "four times", "five times", "six times"];
    let claim = format!("make run    # the daemon on the embedded replay data: trades, retrains {},", words[n]);
    assert!(readme.contains(&claim), "README.md should say {claim:?} (the demo replay retrained {n} times)");
}

#[test]
fn a_retrain_that_passes_the_gate_is_swapped_in_without_a_missed_bar() {
    let dir = tempfile::tempdir().unwrap();
    // A gate every candidate passes: any Sharpe (margin -10), any drawdown, no minimum of trades, no
    // confidence asked for, any shortfall against buy-and-hold.
    let cfg = config_in(
        dir.path(),
        None,
        &[
            ("min_sharpe_margin = 0.05", "min_sharpe_margin = -10"),
            ("max_drawdown = 0.3 ", "max_drawdown = 1.0 "),
            ("min_trades = 5 ", "min_trades = 0 "),
            ("# confidence = 0.9 ", "confidence = 0.0 "),
            ("# max_buy_hold_shortfall = 0.05 ", "max_buy_hold_shortfall = 10.0 "),
            ONE_RETRAIN,
        ],
    );
    let o = tradebot(&["run", "--config", cfg.to_str().unwrap()]);
    let out = text(&o);
    assert!(o.status.success(), "{out}");
    assert_eq!(retrain_line(&out, "ppo").0, "promoted", "{out}");
    let new = final_ppo(&out);
    assert!(new.starts_with("ppo-") && new != shipped_ppo(), "the engine still trades {new}:\n{out}");
    assert!(out.contains(&format!("engine: PPO model {} → {new}", shipped_ppo())), "no hot swap logged:\n{out}");
    assert!(out.contains("bars without a decision after warm-up: 0"), "{out}");
    assert!(out.contains(&replay_finished()), "{out}");
    let reg = tradebot::models::Registry::open(&dir.path().join("state/models")).unwrap();
    assert_eq!(reg.champion(tradebot::models::ModelKind::Ppo).unwrap().unwrap().id, new);
}

#[test]
fn a_retrain_whose_child_fails_leaves_the_champion_trading() {
    let dir = tempfile::tempdir().unwrap();
    // One second is not enough to train: the child is killed on its time budget.
    let cfg = config_in(dir.path(), None, &[("time_budget_secs = 600", "time_budget_secs = 1"), ONE_RETRAIN]);
    let o = tradebot(&["run", "--config", cfg.to_str().unwrap()]);
    let out = text(&o);
    assert!(o.status.success(), "{out}");
    let (outcome, reason) = retrain_line(&out, "ppo");
    assert_eq!(outcome, "failed", "{out}");
    assert!(reason.contains("train failed (timeout)"), "{reason}");
    assert_eq!(final_ppo(&out), shipped_ppo());
    assert!(out.contains("bars without a decision after warm-up: 0"), "{out}");
    assert!(out.contains(&replay_finished()), "{out}");
}

#[test]
fn without_a_replay_window_every_stored_bar_is_replayed() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = config_in(
        dir.path(),
        None,
        &[
            ("\nfrom = \"2011-09-01\"", "\n"),
            ("\nto = \"2013-03-01\"", "\n"),
            ("\nenabled = true\n# The default", "\nenabled = false\n# The default"),
        ],
    );
    let o = tradebot(&["run", "--config", cfg.to_str().unwrap()]);
    let out = text(&o);
    assert!(o.status.success(), "{out}");
    assert!(out.contains("bars, 2000-03-01 to 2013-03-01"), "{out}");
    assert!(out.contains("retrains: none"), "{out}");
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

/// A plain HTTP/1.1 GET; returns (status code, body).
fn get(port: u16, path: &str) -> (u16, String) {
    let mut s = std::net::TcpStream::connect(("127.0.0.1", port)).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
    write!(s, "GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n").unwrap();
    let mut raw = String::new();
    s.read_to_string(&mut raw).unwrap();
    let code = raw.split_whitespace().nth(1).and_then(|c| c.parse().ok()).unwrap_or(0);
    let body = raw.split_once("\r\n\r\n").map(|(_, b)| b.to_string()).unwrap_or_default();
    (code, body)
}

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
    let cfg = config_in(dir.path(), Some(port), &[ONE_RETRAIN]);
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
    let deadline = Instant::now() + Duration::from_secs(30);
    let exit = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break s;
        }
        assert!(Instant::now() < deadline, "no exit within 30 s of SIGTERM:\n{}", log_text());
        std::thread::sleep(Duration::from_millis(100));
    };
    assert!(exit.success(), "{exit}:\n{}", log_text());
    assert!(log_text().contains("SIGTERM: shutting down"), "{}", log_text());
    assert_eq!(out_text().matches("replay finished:").count(), 1, "the summary once:\n{}", out_text());
    let after = tradebot(&["status", "--config", cfg_s, "--json"]);
    assert!(after.status.success(), "the store is still held:\n{}", text(&after));
    let v: serde_json::Value = serde_json::from_slice(&after.stdout).unwrap();
    assert_eq!(v["daemon_running"], false);
    assert!(v["models"]["last_retrain"]["outcome"].is_string(), "the retrain record was not kept: {v}");
}

#[test]
fn live_daemon_against_the_fake_alpaca_is_ready_trades_and_stops_cleanly_on_sigterm() {
    use tradebot::alpaca::fake::{FakeAlpaca, KEY_ID, SECRET_KEY};
    use tradebot::alpaca::wire::market as wm;
    let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
    let fake = rt.block_on(FakeAlpaca::start(0)).unwrap();
    // The last stored closes of the shipped data (split-adjusted), 2013-03-01.
    let closes = [("AAPL", 56.14), ("MSFT", 24.68), ("IBM", 175.27)];
    for (s, p) in closes {
        fake.set_price(s, rust_decimal::Decimal::from_f64_retain(p).unwrap());
    }
    let dir = tempfile::tempdir().unwrap();
    let port = free_port();
    let cfg = dir.path().join("live.toml");
    std::fs::write(
        &cfg,
        format!(
            r#"mode = "paper"
state_dir = {state:?}
log_level = "info"
{alpaca}[market]
symbols = ["AAPL", "MSFT", "IBM"]
timeframe = "1Day"
[feed]
kind = "alpaca"
[broker]
kind = "alpaca"
cancel_on_shutdown = true
[risk]
# The streamed sessions below are up to four weeks old.
max_bar_age_secs = 3000000
[env]
{env}[web]
enabled = true
listen = "127.0.0.1:{port}"
"#,
            state = dir.path().join("state").display().to_string(),
            alpaca = fake.alpaca_section("v2/iex"),
            env = common::SHIPPED_PPO_ENV,
            port = port,
        ),
    )
    .unwrap();
    let cfg_s = cfg.to_str().unwrap();
    let o = tradebot(&[
        "data",
        "import",
        "data/stocks-daily-2000-2013.csv.gz",
        "--symbols",
        "AAPL,MSFT,IBM",
        "--config",
        cfg_s,
    ]);
    assert!(o.status.success(), "{}", text(&o));

    let notify_path = dir.path().join("notify.sock");
    let notify = std::os::unix::net::UnixDatagram::bind(&notify_path).unwrap();
    notify.set_read_timeout(Some(Duration::from_millis(100))).unwrap();
    let log_path = dir.path().join("run.log");
    let mut child = common::Reaped(
        command(&["run", "--config", cfg_s])
            .env("APCA_API_KEY_ID", KEY_ID)
            .env("APCA_API_SECRET_KEY", SECRET_KEY)
            .env("NOTIFY_SOCKET", &notify_path)
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(&log_path).unwrap())
            .spawn()
            .unwrap(),
    );
    let log_text = || std::fs::read_to_string(&log_path).unwrap_or_default();
    let subscribed = || fake.lock().market_received.iter().any(|m| m.contains("\"subscribe\""));
    let deadline = Instant::now() + Duration::from_secs(60);
    let mut notes = String::new();
    while !(notes.contains("READY=1") && subscribed()) {
        let mut buf = [0u8; 4096];
        if let Ok(n) = notify.recv(&mut buf) {
            notes.push_str(&String::from_utf8_lossy(&buf[..n]));
        }
        assert!(child.try_wait().unwrap().is_none(), "the daemon exited:\n{}", log_text());
        assert!(Instant::now() < deadline, "not ready: {notes:?}\n{}", log_text());
    }
    let log = log_text();
    assert!(log.contains("trading the Alpaca paper account"), "the account is not logged:\n{log}");
    // Warmed up on the same number of stored days of each of the three symbols (however many it takes).
    let warmed: Option<u64> = log
        .split("engine: warmed up on ")
        .nth(1)
        .and_then(|rest| rest.split_whitespace().next())
        .and_then(|n| n.parse().ok());
    assert!(warmed.is_some_and(|n| n > 0 && n % 3 == 0), "warmed up on {warmed:?} bars:\n{log}");

    // The stream sends minute bars; with `timeframe = "1Day"` the engine sees a day when its session
    // closes. Each round streams the 15:59 minute of one past session for every symbol, which closes that
    // day: the PPO champion decides on each complete day. The fake keeps orders open (as with the market
    // closed), so that shutdown has something to cancel.
    fake.lock().book.hold_orders = true;
    let today = chrono::Utc::now().with_timezone(&chrono_tz::America::New_York).date_naive();
    // Full sessions only (the fake serves the NYSE calendar: an early close ends a day before 15:59).
    let calendar = tradebot::Calendar::shipped();
    let full = |d: chrono::NaiveDate| calendar.hours(d).is_some_and(|h| h.close == tradebot::REGULAR_CLOSE);
    let sessions: Vec<chrono::NaiveDate> =
        (1..=40).rev().map(|n| today - chrono::Duration::days(n)).filter(|d| full(*d)).collect();
    let mut bars = 0;
    while fake.lock().book.orders.is_empty() && bars < 20 {
        let day = sessions[sessions.len() - 20 + bars];
        let local = day.and_hms_opt(15, 59, 0).unwrap().and_local_timezone(chrono_tz::America::New_York);
        let t = local.earliest().unwrap().to_utc();
        for (k, (s, p)) in closes.iter().enumerate() {
            let p = p * (1.0 + 0.01 * ((bars as f64) * 0.7 + k as f64).sin());
            let bar = wm::Bar {
                symbol: None,
                o: p,
                h: p * 1.01,
                l: p * 0.99,
                c: p,
                v: 1e6,
                t: t.to_rfc3339_opts(chrono::SecondsFormat::Secs, true),
                n: None,
                vw: None,
            };
            fake.publish_bar(s, bar);
        }
        bars += 1;
        std::thread::sleep(Duration::from_millis(300));
    }
    let deadline = Instant::now() + Duration::from_secs(10);
    while fake.lock().book.orders.is_empty() {
        assert!(Instant::now() < deadline, "no order after {bars} bars:\n{}", log_text());
        std::thread::sleep(Duration::from_millis(50));
    }
    let sent: Vec<String> = fake.lock().book.orders.iter().map(|o| o.client_order_id.clone()).collect();
    assert!(sent.iter().all(|id| id.starts_with("tb-engine-")), "{sent:?}");

    // The daemon answers status over its control socket and serves /metrics. The engine counts a bar
    // when it has handled it, after the decision and the orders of the bar before, so on a loaded
    // machine the last round can still be in its queue: ask until every streamed bar is counted.
    let deadline = Instant::now() + Duration::from_secs(30);
    let v = loop {
        let o = tradebot(&["status", "--config", cfg_s, "--json"]);
        assert!(o.status.success(), "{}", text(&o));
        let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
        if v["feed"]["bars_received"].as_u64() == Some(3 * bars as u64) || Instant::now() > deadline {
            break v;
        }
        std::thread::sleep(Duration::from_millis(250));
    };
    assert_eq!(v["daemon_running"], true, "{v}");
    assert_eq!(v["models"]["ppo"], shipped_ppo(), "{v}");
    assert_eq!(v["feed"]["bars_received"].as_u64().unwrap(), 3 * bars as u64, "{v}");
    assert_eq!(v["feed"]["connected"], true, "the stream is up: {v}");
    assert_eq!(v["activity"], "trading", "{v}");
    let (code, body) = get(port, "/metrics");
    assert_eq!(code, 200);
    assert!(body.contains("tradebot_bars_received_total{symbol=\"IBM\"}"), "{body}");
    assert!(body.contains("tradebot_orders_total{status=\"new\"}"), "{body}");
    assert!(body.contains("tradebot_feed_connected 1"), "{body}");

    common::signal(child.id(), Signal::SIGTERM);
    let deadline = Instant::now() + Duration::from_secs(30);
    let exit = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break s;
        }
        assert!(Instant::now() < deadline, "no exit within 30 s of SIGTERM:\n{}", log_text());
        std::thread::sleep(Duration::from_millis(100));
    };
    assert!(exit.success(), "{exit}:\n{}", log_text());
    assert!(log_text().contains("stopped cleanly"), "{}", log_text());
    // broker.cancel_on_shutdown: every order left open was canceled at the broker.
    let statuses: Vec<String> = fake.lock().book.orders.iter().map(|o| format!("{:?}", o.status)).collect();
    assert!(statuses.iter().all(|s| s == "Canceled"), "{statuses:?}\n{}", log_text());
    // The store is released and holds every order the broker received.
    let store = tradebot::store::Store::open(&dir.path().join("state")).unwrap();
    let clock = tradebot::engine::ManualClock::new(chrono::Utc::now());
    let oms = tradebot::oms::Oms::open(&store, Box::new(clock), tradebot::oms::OmsConfig::default()).unwrap();
    for id in &sent {
        let id = tradebot::domain::ClientOrderId::new(id).unwrap();
        assert!(oms.order(&id).is_some(), "{id} was sent but not stored");
    }
    // Every streamed minute is stored, and every day it closed, stamped as Alpaca stamps daily bars.
    let (day_tf, minute_tf) = (tradebot::domain::Timeframe::DAY1, tradebot::domain::Timeframe::MIN1);
    for (s, _) in &closes {
        let sym = tradebot::domain::Symbol::new(s).unwrap();
        assert_eq!(store.bar_count(&sym, minute_tf).unwrap(), bars, "{s}: minutes stored");
        let last = store.last_bar_time(&sym, day_tf).unwrap().unwrap();
        let want = sessions[sessions.len() - 20 + bars - 1].and_hms_opt(0, 0, 0).unwrap();
        let want = want.and_local_timezone(chrono_tz::America::New_York).earliest().unwrap().to_utc();
        assert_eq!(last, want, "{s}: the last streamed session is stored as a day bar");
    }
    drop(oms);
    drop(store);

    // A fatal stream error (the subscription refused, 409) stops the daemon with EX_TEMPFAIL (75), so that
    // systemd restarts it (it used to exit 0, which Restart=on-failure ignores, leaving it down).
    let subscribes = || fake.lock().market_received.iter().filter(|m| m.contains("\"subscribe\"")).count();
    let before = subscribes();
    let log2 = dir.path().join("run2.log");
    let mut child = common::Reaped(
        command(&["run", "--config", cfg_s])
            .env("APCA_API_KEY_ID", KEY_ID)
            .env("APCA_API_SECRET_KEY", SECRET_KEY)
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(&log2).unwrap())
            .spawn()
            .unwrap(),
    );
    let log2_text = || std::fs::read_to_string(&log2).unwrap_or_default();
    let deadline = Instant::now() + Duration::from_secs(60);
    while subscribes() == before {
        assert!(child.try_wait().unwrap().is_none(), "the daemon exited:\n{}", log2_text());
        assert!(Instant::now() < deadline, "no subscription:\n{}", log2_text());
        std::thread::sleep(Duration::from_millis(50));
    }
    fake.send_market_raw(r#"[{"T":"error","code":409,"msg":"insufficient subscription"}]"#);
    let deadline = Instant::now() + Duration::from_secs(30);
    let exit = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break s;
        }
        assert!(Instant::now() < deadline, "still running after a fatal stream error:\n{}", log2_text());
        std::thread::sleep(Duration::from_millis(100));
    };
    assert_eq!(exit.code(), Some(75), "{exit}:\n{}", log2_text());
    assert!(log2_text().contains("stopped on a fatal error: market feed"), "{}", log2_text());
}

#[test]
fn shipped_models_are_found_through_the_environment_and_their_absence_is_a_clear_error() {
    let dir = tempfile::tempdir().unwrap();
    let data = root().join("data/stocks-daily-2000-2013.csv.gz");
    let cfg = config_in(
        dir.path(),
        None,
        &[
            ("file = \"data/stocks-daily-2000-2013.csv.gz\"", &format!("file = {:?}", data.display().to_string())),
            ("\nenabled = true\n# The default", "\nenabled = false\n# The default"),
        ],
    );
    let cfg_s = cfg.to_str().unwrap();
    // Started elsewhere than a checkout: no ./models, so no model to trade: the daemon runs, trades
    // nothing, and says how to get a model.
    let o = command(&["run", "--config", cfg_s]).current_dir(dir.path()).output().unwrap();
    let t = text(&o);
    assert!(o.status.success(), "{t}");
    assert!(t.contains("no ppo champion fits this config") && t.contains("tradebot models seed"), "{t}");
    assert!(t.contains("models at the end: ppo -"), "{t}");
    // With $TRADEBOT_MODELS_DIR the shipped models are seeded and trade.
    let o = command(&["run", "--config", cfg_s])
        .current_dir(dir.path())
        .env("TRADEBOT_MODELS_DIR", root().join("models"))
        .output()
        .unwrap();
    let out = text(&o);
    assert!(o.status.success(), "{out}");
    assert_eq!(final_ppo(&out), shipped_ppo(), "{out}");
}

#[test]
fn a_daily_model_is_refused_at_start_by_a_15_minute_config_naming_both_and_the_fix() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = config_in(
        dir.path(),
        None,
        &[
            ("timeframe = \"1Day\"", "timeframe = \"15Min\""),
            ONE_RETRAIN,
            ("time_budget_secs = 600", "time_budget_secs = 1"),
        ],
    );
    let cfg = cfg.to_str().unwrap();
    // A fresh state directory: the shipped daily models are imported but not crowned for a 15Min config,
    // and the daemon runs without a model, trading nothing and saying so (once) and when the next retrain
    // is; the retrains (cut short here by a 1-second budget) are what would give it one.
    let o = tradebot(&["run", "--config", cfg]);
    let t = text(&o);
    assert!(o.status.success(), "{t}");
    assert!(t.contains("not made champion: model ppo-"), "{t}");
    assert!(t.contains("was trained on 1Day bars, the config trades 15Min bars"), "{t}");
    assert!(t.contains("tradebot retrain --config"), "{t}");
    assert!(
        t.contains("no ppo champion fits this config: the engine trades nothing until a retrain promotes one (the next scheduled retrain is at 2012-07-01 06:00:00 UTC"),
        "{t}"
    );
    assert_eq!(t.matches("not traded: no PPO model fits this config yet").count(), 1, "said once:\n{t}");
    assert!(!t.contains("no decision stored for the bar"), "{t}");
    let trades = t.lines().find(|l| l.starts_with("trades ")).unwrap_or_else(|| panic!("{t}"));
    assert_eq!(trades.split_whitespace().nth(1), Some("0"), "{trades}");
    assert!(t.contains("models at the end: ppo -"), "{t}");
    let s = tradebot(&["status", "--config", cfg, "--json"]);
    let v: serde_json::Value = serde_json::from_slice(&s.stdout).unwrap_or_else(|e| panic!("{e}: {}", text(&s)));
    let activity = v["activity"].as_str().unwrap_or_default();
    assert!(activity.contains(tradebot::control::report::NO_MODEL) && activity.contains("no ppo champion"), "{v}");
    assert!(v["models"]["ppo"].is_null(), "{v}");
    // `models seed` asks the config as the daemon does: the shipped model is not crowned, and why is said.
    let o = tradebot(&["models", "seed", "--config", cfg]);
    let t = text(&o);
    assert_eq!(o.status.code(), Some(1), "{t}");
    assert!(t.contains("new champions: none") && t.contains("15Min"), "{t}");
    let ids: Vec<String> =
        t.split("not made champion: ").skip(1).filter_map(|r| r.split_whitespace().next()).map(String::from).collect();
    assert_eq!(ids.len(), 2, "the shipped ppo and lstm models: {t}");
    // Crowned by hand anyway (`models promote` does not ask the config): refused at load, naming both values.
    for id in &ids {
        let o = tradebot(&["models", "promote", id, "--config", cfg]);
        assert!(o.status.success(), "{}", text(&o));
    }
    let o = tradebot(&["run", "--config", cfg]);
    let t = text(&o);
    assert!(!o.status.success(), "{t}");
    assert!(t.contains("was trained on 1Day bars, the config trades 15Min bars"), "{t}");
    assert!(t.contains("set market.timeframe = \"1Day\""), "{t}");
    assert_eq!(t.matches("trained on 1Day bars, the config").count(), 1, "said once:\n{t}");
}

/// One request over the control socket at `sock`, answered within 10 s, or why not.
fn control_status(sock: &Path) -> Result<serde_json::Value, String> {
    use std::io::BufRead;
    let mut s = std::os::unix::net::UnixStream::connect(sock).map_err(|e| format!("connect: {e}"))?;
    s.set_read_timeout(Some(Duration::from_secs(10))).map_err(|e| e.to_string())?;
    s.write_all(b"{\"cmd\":\"status\"}\n").map_err(|e| format!("write: {e}"))?;
    let mut line = String::new();
    std::io::BufReader::new(&s).read_line(&mut line).map_err(|e| format!("no answer: {e}"))?;
    serde_json::from_str(&line).map_err(|e| format!("{e}: {line:?}"))
}

#[test]
fn eleven_hundred_idle_dashboard_connections_leave_the_control_socket_and_the_dashboard_working() {
    use nix::sys::resource::{Resource, getrlimit, setrlimit};
    const IDLE: usize = 1_100;
    // The test holds the idle connections itself: its own soft limit goes up to its hard one.
    let (soft, hard) = getrlimit(Resource::RLIMIT_NOFILE).unwrap();
    assert!(
        hard >= 2 * IDLE as u64,
        "this test opens {IDLE} connections: it needs `ulimit -Hn` of 2200 or more, not {hard}"
    );
    if soft < hard.min(1 << 20) {
        setrlimit(Resource::RLIMIT_NOFILE, hard.min(1 << 20), hard).unwrap();
    }
    let dir = tempfile::tempdir().unwrap();
    let port = free_port();
    let no_retrain = (
        "(so a replay retrains in simulated time).\nenabled = true",
        "(so a replay retrains in simulated time).\nenabled = false",
    );
    let cfg = config_in(dir.path(), Some(port), &[no_retrain]);
    let token = "test-token-0123456789abcdef";
    let log_path = dir.path().join("run.log");
    // At most 1024 open files for the daemon (a common hard limit; 1,100 connections held would leave none
    // for the control socket and the store), starting from a soft limit of 256 that it raises at start.
    let args = ["run", "--config", cfg.to_str().unwrap(), "--linger"];
    let mut child = common::Reaped(
        common::command_with_open_files((256, 1024), &args)
            .env("TRADEBOT_WEB_TOKEN", token)
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(&log_path).unwrap())
            .spawn()
            .unwrap(),
    );
    let log_text = || std::fs::read_to_string(&log_path).unwrap_or_default();
    let sock = dir.path().join("state/control.sock");
    let deadline = Instant::now() + Duration::from_secs(120);
    while control_status(&sock).is_err() {
        assert!(child.try_wait().unwrap().is_none(), "the daemon exited:\n{}", log_text());
        assert!(Instant::now() < deadline, "the control socket never answered:\n{}", log_text());
        std::thread::sleep(Duration::from_millis(200));
    }

    let addr: std::net::SocketAddr = format!("127.0.0.1:{port}").parse().unwrap();
    let idle: Vec<std::net::TcpStream> = (0..IDLE)
        .map(|i| {
            std::net::TcpStream::connect_timeout(&addr, Duration::from_secs(5))
                .unwrap_or_else(|e| panic!("connection {i}: {e}"))
        })
        .collect();
    std::thread::sleep(Duration::from_millis(500));
    let st = control_status(&sock).unwrap_or_else(|e| panic!("the control socket is starved: {e}\n{}", log_text()));
    assert_eq!(st["ok"], true, "{st}");
    assert!(st["status"]["mode"].is_string(), "{st}");
    // The served ones are closed when their request head does not come (web.header_timeout_secs = 10).
    let mut first = idle[0].try_clone().unwrap();
    first.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
    let started = Instant::now();
    let mut buf = [0u8; 64];
    match first.read(&mut buf) {
        Ok(0) => {}
        Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => {}
        other => panic!("an idle connection was not closed within 20 s: {other:?}"),
    }
    assert!(started.elapsed() < Duration::from_secs(15), "closed after {:?}", started.elapsed());
    drop(first);
    drop(idle);

    // With the idle ones gone, a real request is answered.
    let deadline = Instant::now() + Duration::from_secs(10);
    let (code, body) = loop {
        let mut s = std::net::TcpStream::connect(addr).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        write!(
            s,
            "GET /api/v1/status HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer {token}\r\nConnection: close\r\n\r\n"
        )
        .unwrap();
        let mut raw = String::new();
        let _ = s.read_to_string(&mut raw);
        let code: u16 = raw.split_whitespace().nth(1).and_then(|c| c.parse().ok()).unwrap_or(0);
        if code == 200 || Instant::now() > deadline {
            break (code, raw);
        }
        std::thread::sleep(Duration::from_millis(100));
    };
    assert_eq!(code, 200, "{body}\n{}", log_text());
    assert!(body.contains("\"mode\""), "{body}");
    let log = log_text();
    assert!(log.contains("open files: limit raised from 256 to 1024 (the hard limit)"), "{log}");
    assert!(log.contains("connections are open (web.max_connections): closed"), "no refusal logged:\n{log}");
    assert!(child.try_wait().unwrap().is_none(), "the daemon exited:\n{log}");
    common::signal(child.id(), Signal::SIGTERM);
    let status = child.wait().unwrap();
    assert!(status.success(), "{status}:\n{}", log_text());
}

/// Issue 37: the commands that read the store answer beside a running daemon (here a lingering replay)
/// exactly as they answer with it stopped: the daemon gives each a read snapshot of its store (`report`
/// one of its account store, equal to the fills stored). `train` and `tune` work on such a snapshot;
/// `models promote`, `risk clear` and `data import` go through the daemon, which applies them.
#[test]
fn read_commands_beside_a_running_daemon_answer_as_with_it_stopped_and_promote_goes_through_it() {
    let dir = tempfile::tempdir().unwrap();
    let no_retrain = (
        "# Weekend retraining, driven by the engine's clock (so a replay retrains in simulated time).\nenabled = true",
        "enabled = false",
    );
    // A 2% daily loss limit, which the demo replay trips on 2012-12-05 (2.21% down from the previous
    // close), so that `risk clear` below has something to clear.
    let limit = ("daily_loss_limit_pct = 0.05", "daily_loss_limit_pct = 0.02");
    let cfg = config_in(dir.path(), None, &[no_retrain, limit]);
    // A small search space, for the `tune ppo` below (the replay does not use it).
    let space = "\n[tune.space]\nn_steps = { kind = \"choice\", values = [16, 32] }\n\
                 batch_size = { kind = \"choice\", values = [256, 512] }\nn_epochs = { kind = \"int\", low = 1, high = 2 }\n\
                 width = { kind = \"choice\", values = [16, 32] }\n";
    std::fs::write(&cfg, std::fs::read_to_string(&cfg).unwrap() + space).unwrap();
    let c = cfg.to_str().unwrap();
    let log_path = dir.path().join("run.log");
    let log_text = || std::fs::read_to_string(&log_path).unwrap_or_default();
    let mut child = common::Reaped(
        command(&["run", "--config", c, "--linger"])
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(&log_path).unwrap())
            .spawn()
            .unwrap(),
    );
    let sock = dir.path().join("state/control.sock");
    let deadline = Instant::now() + Duration::from_secs(240);
    while !control_status(&sock).is_ok_and(|v| v["status"]["activity"] == "replay finished") {
        assert!(child.try_wait().unwrap().is_none(), "the daemon exited early:\n{}", log_text());
        assert!(Instant::now() < deadline, "the replay did not finish in time:\n{}", log_text());
        std::thread::sleep(Duration::from_millis(300));
    }
    // A search runs on the daemon's snapshot of the bars too (its study is not stored: the daemon holds
    // the store); its candidate is registered before the reads below.
    let o = tradebot(&["tune", "ppo", "--config", c, "--trials", "2", "--parallel", "2", "--budget-steps", "256"]);
    assert!(o.status.success(), "tune beside the daemon:\n{}", text(&o));
    assert!(text(&o).contains("the study will not be stored"), "{}", text(&o));
    let reads: [&[&str]; 6] = [
        &["data", "show", "AAPL", "--from", "2012-03-01", "--to", "2012-03-09"],
        &["risk", "status"],
        &["tune", "list"],
        &["models", "list", "--json"],
        &["backtest", "--from", "2012-01-03", "--to", "2012-03-30", "--json"],
        &["report", "--json"],
    ];
    let run_all = || -> Vec<String> {
        reads
            .iter()
            .map(|args| {
                let o = tradebot(&[*args, &["--config", c][..]].concat());
                assert!(o.status.success(), "{args:?}:\n{}", text(&o));
                String::from_utf8_lossy(&o.stdout).to_string()
            })
            .collect()
    };
    let beside = run_all();
    // The account's report as a tear sheet and its fills as CSV, beside the daemon: the page embeds the
    // JSON `report --json` prints.
    let (sheet, csv) = (dir.path().join("account.html"), dir.path().join("fills.csv"));
    let args = ["report", "--config", c, "--json"];
    let files = ["--report", sheet.to_str().unwrap(), "--trades", csv.to_str().unwrap()];
    let o = tradebot(&[&args[..], &files[..]].concat());
    assert!(o.status.success(), "report beside the daemon:\n{}", text(&o));
    let report: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let page = std::fs::read_to_string(&sheet).unwrap();
    let open = r#"<script type="application/json" id="report">"#;
    let at = page.find(open).unwrap() + open.len();
    let embedded: serde_json::Value =
        serde_json::from_str(&page[at..at + page[at..].find("</script>").unwrap()]).unwrap();
    assert_eq!(embedded, report, "the tear sheet's numbers are the JSON's");
    let day = |k: &str| report[k].as_str().unwrap()[..10].to_string();
    let heading = format!("<h1>The replay account, {} to {}</h1>", day("from"), day("to"));
    assert!(page.contains(&heading), "{heading} in {}", &page[..page.len().min(900)]);
    let csv_rows = std::fs::read_to_string(&csv).unwrap().lines().count() - 1;
    assert_eq!(csv_rows as u64, report["fills"].as_u64().unwrap(), "a CSV row for each fill");
    assert!(report["fills"].as_u64().unwrap() > 0 && report["bars"].as_u64().unwrap() > 100, "{report}");
    // State changes go through the daemon too: the kill switch (tripped in December 2012, above),
    // cleared by the engine itself (a second clear finds nothing), and an import.
    let o = tradebot(&["risk", "clear", "--config", c]);
    assert!(o.status.success() && text(&o).contains("kill switch cleared by "), "{}", text(&o));
    assert!(
        text(&o).contains("(it tripped at 2012-12-05") && text(&o).contains("(by the running daemon)"),
        "{}",
        text(&o)
    );
    let o = tradebot(&["risk", "clear", "--config", c]);
    assert!(o.status.success() && text(&o).contains("was not tripped; nothing to clear"), "{}", text(&o));
    let bars = dir.path().join("aapl-2030.csv");
    std::fs::write(
        &bars,
        "Date,Open,High,Low,Close,Volume\n2030-01-02,10,11,9,10.5,1000\n2030-01-03,10.5,12,10,11.5,2000\n",
    )
    .unwrap();
    let o = tradebot(&["data", "import", bars.to_str().unwrap(), "--symbol", "AAPL", "--config", c]);
    assert!(o.status.success() && text(&o).contains("2 new bars stored in"), "{}", text(&o));
    assert!(text(&o).contains("(by the running daemon)"), "{}", text(&o));
    let o = tradebot(&["data", "show", "AAPL", "--from", "2030-01-01", "--to", "2030-01-31", "--json", "--config", c]);
    assert_eq!(String::from_utf8_lossy(&o.stdout).lines().count(), 2, "the imported bars, read beside:\n{}", text(&o));
    let log = log_text();
    assert!(log.contains("audit: control socket risk clear: kill switch cleared by "), "{log}");
    assert!(log.contains("risk: kill switch cleared by "), "the engine cleared it:\n{log}");
    assert!(log.contains("audit: control socket data import: 2 new bars"), "{log}");
    // Training reads the bars from a snapshot too, and registers its candidate beside the daemon.
    let o = tradebot(&["train", "ppo", "--config", c, "--device", "cpu", "--steps", "256", "--json"]);
    assert!(o.status.success(), "train beside the daemon:\n{}", text(&o));
    let done: serde_json::Value =
        serde_json::from_str(String::from_utf8_lossy(&o.stdout).lines().last().unwrap()).unwrap();
    let trained = done["model_id"].as_str().unwrap().to_string();
    // The champion changes through the daemon, which trades with it from the next bar.
    let o = tradebot(&["models", "promote", &trained, "--config", c]);
    assert!(o.status.success() && text(&o).contains("(by the running daemon)"), "{}", text(&o));
    let st = control_status(&sock).unwrap();
    assert_eq!(st["status"]["models"]["ppo"], trained.as_str(), "{st}");
    assert!(log_text().contains(&format!("models: {trained} promoted to ppo champion by hand")), "{}", log_text());
    // And back, through the daemon too, so that the backtest below runs the same champion.
    let o = tradebot(&["models", "rollback", "ppo", "--config", c]);
    assert!(o.status.success() && text(&o).contains("(by the running daemon)"), "{}", text(&o));
    let st = control_status(&sock).unwrap();
    assert_ne!(st["status"]["models"]["ppo"], trained.as_str(), "{st}");
    for snapshots in ["state/snapshots", "state/replay/snapshots"] {
        let left = std::fs::read_dir(dir.path().join(snapshots)).map(|d| d.count()).unwrap_or(0);
        assert_eq!(left, 0, "every reader removed its snapshot ({snapshots})");
    }

    common::signal(child.id(), Signal::SIGTERM);
    assert!(child.wait().unwrap().success(), "{}", log_text());
    // The report is the account's fills as stored: their count, notional and fees (at the demo's 10 bps).
    let account = tradebot::store::Store::open_read_only(&dir.path().join("state/replay")).unwrap();
    let fills = account.tree::<tradebot::oms::FillRecord>(tradebot::store::TreeName::Fills).unwrap();
    let fills: Vec<_> = fills.scan_prefix(b"").unwrap().into_iter().map(|(_, f)| f).collect();
    let notional: f64 = fills.iter().map(|f| (f.qty * f.price).to_string().parse::<f64>().unwrap()).sum();
    assert_eq!(report["fills"].as_u64(), Some(fills.len() as u64), "{report}");
    assert!((report["notional"].as_f64().unwrap() - notional).abs() < 1e-6 * notional, "{report} vs {notional}");
    assert!((report["fees"].as_f64().unwrap() - notional * 10.0 / 10_000.0).abs() < 1e-6 * notional, "{report}");
    drop(account);
    let stopped = run_all();
    for ((args, a), b) in reads.iter().zip(&beside).zip(&stopped) {
        // models list differs only by the model trained and promoted in between.
        if args[0] == "models" {
            let (a, b): (serde_json::Value, serde_json::Value) =
                (serde_json::from_str(a).unwrap(), serde_json::from_str(b).unwrap());
            assert_eq!(a.as_array().unwrap().len() + 1, b.as_array().unwrap().len(), "{a}\n{b}");
            continue;
        }
        assert_eq!(a, b, "{args:?}: beside the daemon and with it stopped");
    }
}
