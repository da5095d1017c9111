//! The live loop's soak test: the real binary in paper mode against the fake Alpaca's synthetic market on
//! a simulated clock (`TRADEBOT_SIM_CLOCK`, 160 simulated minutes per second), two trading weeks of minute
//! bars on the 1Day timeframe with the shipped models, the weekend retrain on the simulated Saturday, and
//! faults along the way: dropped market and trade_updates sockets, a half-dead market socket, a window of
//! 429s, a 500 on an order POST that the fake carried out, and three SIGKILLs with restarts.
//!
//! It ends with: every minute the fake published stored exactly once, each day bar built from the stream
//! equal to the fake's REST day bar, one decision per session and only at session closes, no
//! client_order_id sent twice, the stored positions equal to the fake's, and the retrain's data ending at
//! the last day bar stored before it.

mod common;

use chrono::{DateTime, NaiveDate, TimeZone, Utc};
use chrono_tz::America::New_York;
use common::{command, text, tradebot_env};
use nix::sys::signal::Signal;
use std::collections::{BTreeMap, BTreeSet, HashSet};
use std::path::Path;
use std::process::{Child, Stdio};
use std::time::{Duration, Instant};
use tradebot::alpaca::fake::{FakeAlpaca, Fault, KEY_ID, MarketSpec, SECRET_KEY};
use tradebot::clock::SimClock;
use tradebot::domain::{Symbol, Timeframe};

const SPEED: f64 = 160.0;
const SYMBOLS: [(&str, f64); 3] = [("AAPL", 190.0), ("MSFT", 420.0), ("IBM", 210.0)];

fn ny(d: (i32, u32, u32), h: u32, m: u32) -> DateTime<Utc> {
    New_York.with_ymd_and_hms(d.0, d.1, d.2, h, m, 0).single().unwrap().to_utc()
}

/// The paper config against `fake`: `symbols`, `timeframe`, and `extra` lines at the end.
fn config(dir: &Path, fake: &FakeAlpaca, symbols: &[&str], timeframe: &str, extra: &str) -> String {
    let text = format!(
        r#"mode = "paper"
state_dir = {state:?}
log_level = "info"
[alpaca]
trading_url = "{http}"
data_url = "{http}"
stream_url = "{market}"
trade_updates_url = "{updates}"
request_timeout_secs = 2
data_retry_secs = 30
trading_retry_secs = 10
order_retry_secs = 5
[market]
symbols = {symbols:?}
timeframe = "{timeframe}"
[feed]
kind = "alpaca"
[broker]
kind = "alpaca"
cancel_on_shutdown = false
# Simulated seconds: a broker round trip of 100 ms is 16 of them here.
lost_after_secs = 3600
[risk]
max_position_pct = 0.2
max_gross_exposure_pct = 1.0
max_order_notional = "10000"
daily_loss_limit_pct = 0.05
kill_switch = "halt"
max_bar_age_secs = 7200
[train]
window_days = 150
holdout_days = 30
[env]
episode_len = 40
[retrain]
enabled = true
time_budget_secs = 300
ppo_steps = 2048
lstm_epochs = 2
[web]
enabled = false
{extra}
"#,
        state = dir.join("state").display().to_string(),
        http = fake.http_url(),
        market = fake.ws_url("v2/iex"),
        updates = fake.ws_url("stream"),
    );
    let path = dir.join("soak.toml");
    std::fs::write(&path, text).unwrap();
    path.display().to_string()
}

struct Daemon {
    child: Child,
    log: std::path::PathBuf,
}

fn start(cfg: &str, clock: &SimClock, dir: &Path, n: usize) -> Daemon {
    let log = dir.join(format!("run{n}.log"));
    let child = command(&["run", "--config", cfg])
        .env("APCA_API_KEY_ID", KEY_ID)
        .env("APCA_API_SECRET_KEY", SECRET_KEY)
        .env(tradebot::clock::ENV, clock.to_string())
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(&log).unwrap())
        .spawn()
        .unwrap();
    Daemon { child, log }
}

impl Daemon {
    fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    fn wait_ready(&mut self) {
        let deadline = Instant::now() + Duration::from_secs(60);
        while !self.log().contains("tradebot run: ready") {
            assert!(self.child.try_wait().unwrap().is_none(), "the daemon exited:\n{}", self.log());
            assert!(Instant::now() < deadline, "not ready:\n{}", self.log());
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    fn kill(mut self) -> String {
        common::signal(self.child.id(), Signal::SIGKILL);
        let _ = self.child.wait();
        self.log()
    }

    fn stop(mut self) -> String {
        common::signal(self.child.id(), Signal::SIGTERM);
        let deadline = Instant::now() + Duration::from_secs(60);
        let exit = loop {
            if let Some(s) = self.child.try_wait().unwrap() {
                break s;
            }
            assert!(Instant::now() < deadline, "no exit within 60 s of SIGTERM:\n{}", self.log());
            std::thread::sleep(Duration::from_millis(100));
        };
        assert!(exit.success(), "{exit}:\n{}", self.log());
        self.log()
    }
}

/// Waits on the wall clock until the simulated clock shows `t`.
fn until(clock: &SimClock, t: DateTime<Utc>, d: &mut Daemon) {
    loop {
        let now = clock.at(Utc::now());
        if now >= t {
            return;
        }
        assert!(d.child.try_wait().unwrap().is_none(), "the daemon exited before {t}:\n{}", d.log());
        std::thread::sleep(clock.wall_span(t - now).min(Duration::from_millis(100)));
    }
}

#[test]
fn two_simulated_weeks_of_the_live_loop_with_faults_kills_and_a_weekend_retrain() {
    let _serial = SERIAL.lock().unwrap_or_else(|p| p.into_inner());
    let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
    let fake = rt.block_on(FakeAlpaca::start(0)).unwrap();
    let dir = tempfile::tempdir().unwrap();
    // Monday 2026-11-02 08:00 New York, half an hour before the first session; 200 days of history.
    let clock = SimClock::starting(ny((2026, 11, 2), 8, 0), SPEED).unwrap();
    let spec = MarketSpec {
        seed: 11,
        symbols: SYMBOLS.iter().map(|(s, p)| (s.to_string(), *p)).collect(),
        history_days: 200,
        quiet: Default::default(),
    };
    {
        let _rt = rt.enter();
        fake.run_market(spec, Some(clock));
    }
    let cfg = config(dir.path(), &fake, &["AAPL", "MSFT", "IBM"], "1Day", "");
    let sim_env = [(tradebot::clock::ENV, clock.to_string())];
    let envs: Vec<(&str, &str)> = sim_env.iter().map(|(k, v)| (*k, v.as_str())).collect();
    // The day bars the engine warms up on, from the fake's REST history.
    let o = tradebot_env(
        &[
            "data",
            "fetch",
            "--config",
            &cfg,
            "--symbols",
            "AAPL,MSFT,IBM",
            "--from",
            "2026-04-01",
            "--to",
            "2026-11-01",
        ],
        &[envs.as_slice(), &[("APCA_API_KEY_ID", KEY_ID), ("APCA_API_SECRET_KEY", SECRET_KEY)]].concat(),
    );
    assert!(o.status.success(), "{}", text(&o));

    let mut logs = Vec::new();
    let mut d = start(&cfg, &clock, dir.path(), 0);
    d.wait_ready();
    let sessions = |from: (i32, u32, u32), to: (i32, u32, u32)| -> Vec<NaiveDate> {
        let cal = tradebot::calendar::Calendar::shipped();
        let (a, b) = (
            NaiveDate::from_ymd_opt(from.0, from.1, from.2).unwrap(),
            NaiveDate::from_ymd_opt(to.0, to.1, to.2).unwrap(),
        );
        a.iter_days().take_while(|x| *x <= b).filter(|x| cal.hours(*x).is_some()).collect()
    };

    // Week one.
    until(&clock, ny((2026, 11, 2), 11, 0), &mut d);
    fake.drop_market_sockets();
    until(&clock, ny((2026, 11, 2), 14, 0), &mut d);
    fake.rate_limit_for(Duration::from_millis(1500));
    fake.drop_market_sockets();
    until(&clock, ny((2026, 11, 3), 10, 0), &mut d);
    // The next order POST is carried out and answered 500: the OMS must find it, not send it twice.
    fake.push_order_fault(Fault::ServerErrorAfterProcessing);
    fake.drop_update_sockets();
    until(&clock, ny((2026, 11, 4), 12, 0), &mut d);
    logs.push(d.kill());
    d = start(&cfg, &clock, dir.path(), 1);
    d.wait_ready();
    until(&clock, ny((2026, 11, 5), 15, 58), &mut d);
    logs.push(d.kill());
    d = start(&cfg, &clock, dir.path(), 2);
    d.wait_ready();
    // A half-dead socket over the weekend (no bars, no pongs): found by the silence timeout (30 s); the fake
    // holds it, against the one-connection limit, for 40 s.
    until(&clock, ny((2026, 11, 6), 16, 5), &mut d);
    fake.silence_market_sockets_for(Duration::from_secs(40));
    // The weekend retrain (Saturday 02:00 New York) runs while the socket is dead.
    until(&clock, ny((2026, 11, 10), 13, 0), &mut d);
    logs.push(d.kill());
    d = start(&cfg, &clock, dir.path(), 3);
    d.wait_ready();
    until(&clock, ny((2026, 11, 13), 16, 10), &mut d);
    let last = d.stop();
    logs.push(last.clone());
    assert!(last.contains("stopped cleanly"), "{last}");
    let all_logs = logs.join("\n");
    assert!(!all_logs.contains("panicked"), "{all_logs}");
    assert!(all_logs.contains("retrain: starting"), "no weekend retrain:\n{all_logs}");
    // Each fault was met: the half-dead socket found, the 429s waited out, the ambiguous order POST sent.
    assert!(all_logs.contains("half-dead socket"), "{all_logs}");
    assert!(all_logs.contains("rate limited"), "{all_logs}");
    assert!(all_logs.contains("POST /v2/orders failed"), "{all_logs}");
    assert!(fake.lock().order_faults.is_empty(), "no order POST met the 500");

    let store = tradebot::store::Store::open(&dir.path().join("state")).unwrap();
    let (first, end) = (ny((2026, 10, 26), 0, 0), ny((2026, 11, 13), 16, 0));
    // Every minute the fake published from the first backfilled one is stored, once, as published.
    for (s, _) in SYMBOLS {
        let sym = Symbol::new(s).unwrap();
        let stored = store.bars(&sym, Timeframe::MIN1, first, end).unwrap();
        let from = stored.first().map(|b| b.t).unwrap();
        let published: Vec<(DateTime<Utc>, f64)> = fake.lock().bars[s]
            .iter()
            .map(|b| (DateTime::parse_from_rfc3339(&b.t).unwrap().to_utc(), b.c))
            .filter(|(t, _)| *t >= from && *t < end)
            .collect();
        let got: Vec<(DateTime<Utc>, f64)> = stored.iter().map(|b| (b.t, b.c)).collect();
        let have: BTreeSet<DateTime<Utc>> = got.iter().map(|(t, _)| *t).collect();
        let mut missing: BTreeMap<NaiveDate, (usize, DateTime<Utc>, DateTime<Utc>)> = BTreeMap::new();
        for (t, _) in published.iter().filter(|(t, _)| !have.contains(t)) {
            let e = missing.entry(t.with_timezone(&New_York).date_naive()).or_insert((0, *t, *t));
            e.0 += 1;
            e.2 = *t;
        }
        assert!(
            missing.is_empty(),
            "{s}: published minutes not stored (day: count, first, last): {missing:?}\n{all_logs}"
        );
        assert_eq!(got.len(), published.len(), "{s}: minutes stored from {from}");
        assert_eq!(got, published, "{s}: the stored minutes are the published ones");
        assert!(from <= ny((2026, 11, 2), 9, 30), "{s}: the first start backfilled the week before ({from})");
    }

    // Each day bar the daemon built from the stream equals the fake's REST day bar of that session.
    let rest = tradebot::alpaca::rest::RestClient::new(fake.rest_config()).unwrap();
    let q = tradebot::alpaca::rest::BarsQuery {
        symbols: SYMBOLS.iter().map(|(s, _)| Symbol::new(s).unwrap()).collect(),
        timeframe: Timeframe::DAY1,
        start: ny((2026, 11, 2), 0, 0),
        end,
        limit: 1000,
        feed: None,
        page_token: None,
    };
    let rest_days = rt.block_on(rest.fetch_bars(&q, 10)).unwrap();
    let days = sessions((2026, 11, 2), (2026, 11, 13));
    assert_eq!(days.len(), 10);
    for (s, _) in SYMBOLS {
        let sym = Symbol::new(s).unwrap();
        let built = store.bars(&sym, Timeframe::DAY1, ny((2026, 11, 2), 0, 0), end).unwrap();
        let from_rest: Vec<_> = rest_days.iter().filter(|b| b.symbol == sym).cloned().collect();
        assert_eq!(built.len(), days.len(), "{s}: one day bar per session");
        assert_eq!(built, from_rest, "{s}: stream-built day bars equal the REST day bars");
    }

    // One decision per session, each at a session's close (a day bar stamped New York midnight).
    let decisions = store
        .tree::<tradebot::engine::DecisionRecord>(tradebot::store::TreeName::Decisions)
        .unwrap()
        .scan_prefix(b"")
        .unwrap();
    let mut per_day: BTreeMap<DateTime<Utc>, usize> = BTreeMap::new();
    for (_, r) in decisions.iter().filter(|(_, r)| r.t >= ny((2026, 11, 2), 0, 0)) {
        *per_day.entry(r.t).or_default() += 1;
    }
    let midnight =
        |d: &NaiveDate| New_York.from_local_datetime(&d.and_hms_opt(0, 0, 0).unwrap()).single().unwrap().to_utc();
    // Thursday's session closed while the daemon was down (killed at 15:58): its day bar, rebuilt from the
    // backfill at the restart, came before the reconciliation and was not traded.
    let thursday = NaiveDate::from_ymd_opt(2026, 11, 5).unwrap();
    let want: BTreeSet<DateTime<Utc>> = days.iter().filter(|d| **d != thursday).map(midnight).collect();
    assert!(all_logs.contains("bar 2026-11-05 05:00:00 UTC not traded: the OMS has not reconciled yet"), "{all_logs}");
    assert_eq!(per_day.keys().copied().collect::<BTreeSet<_>>(), want, "decisions at session closes only");
    assert!(per_day.values().all(|n| *n == 1), "one decision per session: {per_day:?}");

    // No client_order_id reached the fake twice, and the stored positions are the fake's.
    let book = &fake.lock().book;
    let ids: Vec<&str> = book.orders.iter().map(|o| o.client_order_id.as_str()).collect();
    assert!(!ids.is_empty(), "the soak placed no order:\n{all_logs}");
    assert_eq!(ids.iter().collect::<HashSet<_>>().len(), ids.len(), "{ids:?}");
    assert!(book.refused.iter().all(|(_, m)| !m.contains("unique")), "{:?}", book.refused);
    let oms = tradebot::oms::Oms::open(
        &store,
        Box::new(tradebot::engine::ManualClock::new(end)),
        tradebot::oms::OmsConfig::default(),
    )
    .unwrap();
    let ours: BTreeMap<String, rust_decimal::Decimal> =
        oms.positions().into_iter().map(|(s, q)| (s.to_string(), q.normalize())).collect();
    let theirs: BTreeMap<String, rust_decimal::Decimal> =
        book.positions.iter().map(|(s, (q, _))| (s.clone(), q.normalize())).collect();
    assert_eq!(ours, theirs, "stored positions equal the broker's");

    // The weekend retrain learned up to the last day bar stored before it (Friday 2026-11-06).
    let runs = tradebot::retrain::record::list(&store).unwrap();
    let weekend =
        runs.iter().find(|r| r.clock_time >= ny((2026, 11, 7), 2, 0) && r.clock_time < ny((2026, 11, 9), 0, 0));
    let weekend = weekend.unwrap_or_else(|| panic!("no retrain on the simulated weekend: {runs:?}"));
    let snapshot = weekend.snapshot.as_ref().unwrap_or_else(|| panic!("{weekend:?}"));
    assert_eq!(snapshot.holdout_last_bar, Some(ny((2026, 11, 6), 0, 0)), "{weekend:?}");
    assert!(snapshot.last_bar < snapshot.holdout_last_bar, "the candidate never trained on its holdout: {weekend:?}");
}

/// The two soaks run one after the other: each drives a fast simulated clock that wants the CPU.
static SERIAL: std::sync::Mutex<()> = std::sync::Mutex::new(());

/// The model id `tradebot train` registered, from its output.
fn trained_id(out: &str) -> String {
    let at = out.find("registered candidate ppo-").unwrap_or_else(|| panic!("no model registered:\n{out}"));
    out[at + "registered candidate ".len()..].chars().take_while(|c| c.is_ascii_alphanumeric() || *c == '-').collect()
}

#[test]
fn two_simulated_days_of_15_minute_decisions_with_a_quiet_symbol_and_a_kill() {
    let _serial = SERIAL.lock().unwrap_or_else(|p| p.into_inner());
    let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
    let fake = rt.block_on(FakeAlpaca::start(0)).unwrap();
    let dir = tempfile::tempdir().unwrap();
    // Monday 2026-11-16 04:00 New York at 30 simulated minutes per second (the history fetch and the
    // training take the night); QUIET trades in one minute of fourteen, so a third of its 15-minute
    // periods have no bar.
    let clock = SimClock::starting(ny((2026, 11, 16), 4, 0), 30.0).unwrap();
    let symbols = [("AAPL", 190.0), ("MSFT", 420.0), ("QUIET", 40.0)];
    let spec = MarketSpec {
        seed: 5,
        symbols: symbols.iter().map(|(s, p)| (s.to_string(), *p)).collect(),
        history_days: 45,
        quiet: [("QUIET".to_string(), 13.0 / 14.0)].into_iter().collect(),
    };
    {
        let _rt = rt.enter();
        fake.run_market(spec, Some(clock));
    }
    let names: Vec<&str> = symbols.iter().map(|(s, _)| *s).collect();
    let cfg = config(dir.path(), &fake, &names, "15Min", "");
    let cfg = cfg.as_str();
    let envs = [
        (tradebot::clock::ENV, clock.to_string()),
        ("APCA_API_KEY_ID", KEY_ID.to_string()),
        ("APCA_API_SECRET_KEY", SECRET_KEY.to_string()),
    ];
    let envs: Vec<(&str, &str)> = envs.iter().map(|(k, v)| (*k, v.as_str())).collect();
    // 15-minute history from the fake, a PPO trained on it for this config, made champion.
    let o = tradebot_env(
        &["data", "fetch", "--config", cfg, "--symbols", "AAPL,MSFT,QUIET", "--timeframe", "15Min"]
            .into_iter()
            .chain(["--from", "2026-09-01", "--to", "2026-11-15"])
            .collect::<Vec<_>>(),
        &envs,
    );
    assert!(o.status.success(), "{}", text(&o));
    let o = tradebot_env(&["train", "ppo", "--config", cfg, "--device", "cpu", "--steps", "4096"], &envs);
    assert!(o.status.success(), "{}", text(&o));
    let id = trained_id(&text(&o));
    let o = tradebot_env(&["models", "promote", &id, "--reason", "soak", "--config", cfg], &envs);
    assert!(o.status.success(), "{}", text(&o));

    let mut d = start(cfg, &clock, dir.path(), 0);
    d.wait_ready();
    until(&clock, ny((2026, 11, 16), 13, 0), &mut d);
    fake.drop_market_sockets();
    until(&clock, ny((2026, 11, 17), 11, 7), &mut d);
    let mut logs = vec![d.kill()];
    d = start(cfg, &clock, dir.path(), 1);
    d.wait_ready();
    until(&clock, ny((2026, 11, 17), 16, 10), &mut d);
    logs.push(d.stop());
    let all_logs = logs.join("\n");
    assert!(!all_logs.contains("panicked"), "{all_logs}");
    assert!(all_logs.contains(&format!("loaded PPO model {id}")), "{all_logs}");

    let store = tradebot::store::Store::open(&dir.path().join("state")).unwrap();
    let (from, end) = (ny((2026, 11, 16), 9, 30), ny((2026, 11, 17), 16, 0));
    let m15 = Timeframe::parse("15Min").unwrap();
    // Every published minute stored once; each stream-built 15-minute bar equal to the fake's REST bar.
    let rest = tradebot::alpaca::rest::RestClient::new(fake.rest_config()).unwrap();
    let q = tradebot::alpaca::rest::BarsQuery {
        symbols: names.iter().map(|s| Symbol::new(s).unwrap()).collect(),
        timeframe: m15,
        start: from,
        end: end - chrono::Duration::minutes(1),
        limit: 10_000,
        feed: None,
        page_token: None,
    };
    let rest_bars = rt.block_on(rest.fetch_bars(&q, 10)).unwrap();
    let mut stored_at: BTreeMap<DateTime<Utc>, BTreeSet<String>> = BTreeMap::new();
    for s in &names {
        let sym = Symbol::new(s).unwrap();
        let minutes: Vec<DateTime<Utc>> =
            store.bars(&sym, Timeframe::MIN1, from, end).unwrap().iter().map(|b| b.t).collect();
        let published: Vec<DateTime<Utc>> = fake.lock().bars[*s]
            .iter()
            .map(|b| DateTime::parse_from_rfc3339(&b.t).unwrap().to_utc())
            .filter(|t| *t >= from && *t < end)
            .collect();
        assert_eq!(minutes, published, "{s}: the stored minutes are the published ones");
        let built = store.bars(&sym, m15, from, end - chrono::Duration::minutes(1)).unwrap();
        let want: Vec<_> = rest_bars.iter().filter(|b| b.symbol == sym).cloned().collect();
        assert_eq!(built, want, "{s}: stream-built 15-minute bars equal the REST bars");
        for b in &built {
            stored_at.entry(b.t).or_default().insert(s.to_string());
        }
    }
    // Decisions on 15-minute closes only, once each, never an order for a symbol without a bar (stale).
    let decisions = store
        .tree::<tradebot::engine::DecisionRecord>(tradebot::store::TreeName::Decisions)
        .unwrap()
        .scan_prefix(b"")
        .unwrap();
    let mut seen = BTreeSet::new();
    let mut stale_decisions = 0;
    for (_, r) in decisions.iter().filter(|(_, r)| r.t >= from && r.t < end) {
        assert!(seen.insert(r.t), "two decisions at {}", r.t);
        assert_eq!(r.t.timestamp() % 900, 0, "a decision off a 15-minute close: {}", r.t);
        let had = stored_at.get(&r.t).cloned().unwrap_or_default();
        if !had.contains("QUIET") {
            stale_decisions += 1;
        }
        for (s, side, qty) in &r.orders {
            assert!(had.contains(s), "an order for {s} ({side} {qty}) at {} where it had no bar", r.t);
        }
    }
    // Two sessions of 26 periods less the few the kill and the restart's reconciliation cost.
    assert!(seen.len() >= 44, "{} decisions: {seen:?}\n{all_logs}", seen.len());
    assert!(stale_decisions > 0, "QUIET was never stale at a decision");
    let book = &fake.lock().book;
    let ids: Vec<&str> = book.orders.iter().map(|o| o.client_order_id.as_str()).collect();
    assert_eq!(ids.iter().collect::<HashSet<_>>().len(), ids.len(), "{ids:?}");
}
