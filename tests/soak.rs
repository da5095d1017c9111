//! The live loop's soak tests: the real binary in paper mode against the fake Alpaca's synthetic market on
//! a simulated clock (`TRADEBOT_SIM_CLOCK`), one after the other.
//!
//! - Two trading weeks of minute bars on the 15Min timeframe (160 simulated minutes per second) with a
//!   PPO trained on the fake's history, the weekend retrain on the simulated Saturday, and faults along
//!   the way: dropped market and trade_updates sockets, a half-dead market socket, a window of 429s, a 500
//!   on an order POST that the fake carried out, and three SIGKILLs with restarts. It ends with: every
//!   minute the fake published stored exactly once, each 15-minute bar built from the stream equal to the
//!   fake's REST bar, decisions only at 15-minute closes and once each, no client_order_id sent twice, the
//!   stored positions equal to the fake's, and the retrain's data ending at the last bar stored before it.
//! - A week of day bars with the shipped models: one decision per session, at its close.
//! - Two sessions of 15-minute bars with a quiet symbol: never an order for a symbol without a bar.

mod common;

use chrono::{DateTime, NaiveDate, TimeZone, Utc};
use chrono_tz::America::New_York;
use common::{SHIPPED_PPO_ENV, command, text, tradebot_env};
use nix::sys::signal::Signal;
use std::collections::{BTreeMap, BTreeSet, HashSet};
use std::path::{Path, PathBuf};
use std::process::{Child, Output, Stdio};
use std::time::{Duration, Instant};
use tradebot::SimClock;
use tradebot::alpaca::fake::{FakeAlpaca, Fault, KEY_ID, MarketSpec, SECRET_KEY};
use tradebot::domain::{Bar, Symbol, Timeframe};
use tradebot::engine::DecisionRecord;
use tradebot::store::Store;

/// The soaks run one after the other: each drives a fast simulated clock that wants the CPU.
static SERIAL: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn ny(d: (i32, u32, u32), h: u32, m: u32) -> DateTime<Utc> {
    New_York.with_ymd_and_hms(d.0, d.1, d.2, h, m, 0).single().unwrap().to_utc()
}

fn m15() -> Timeframe {
    Timeframe::parse("15Min").unwrap()
}

/// A fake market on a simulated clock, a state directory and a paper config pointed at both.
struct Soak {
    rt: tokio::runtime::Runtime,
    fake: FakeAlpaca,
    clock: SimClock,
    dir: tempfile::TempDir,
    cfg: String,
    names: Vec<String>,
    /// What `anew` needs to start the same market again: its simulated start, speed, spec and timeframe.
    start: DateTime<Utc>,
    speed: f64,
    spec: MarketSpec,
    timeframe: String,
}

impl Soak {
    fn new(start: DateTime<Utc>, speed: f64, symbols: &[(&str, f64)], quiet: &[(&str, f64)], timeframe: &str) -> Soak {
        let spec = MarketSpec {
            seed: 11,
            symbols: symbols.iter().map(|(s, p)| (s.to_string(), *p)).collect(),
            history_days: 200,
            quiet: quiet.iter().map(|(s, p)| (s.to_string(), *p)).collect(),
        };
        Soak::over(tempfile::tempdir().unwrap(), start, speed, spec, timeframe)
    }

    /// A fake market started now on a simulated clock at `start`, and a paper config in `dir` pointed at it.
    fn over(dir: tempfile::TempDir, start: DateTime<Utc>, speed: f64, spec: MarketSpec, timeframe: &str) -> Soak {
        let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
        let fake = rt.block_on(FakeAlpaca::start(0)).unwrap();
        let clock = SimClock::starting(start, speed).unwrap();
        {
            let _rt = rt.enter();
            fake.run_market(spec.clone(), Some(clock));
        }
        let names: Vec<String> = spec.symbols.iter().map(|(s, _)| s.clone()).collect();
        let cfg = config(dir.path(), &fake, &names, timeframe);
        Soak { rt, fake, clock, dir, cfg, names, start, speed, spec, timeframe: timeframe.into() }
    }

    /// The same market started again at the same simulated instant, over the same state directory: the same
    /// seed gives the same history, so what was fetched and trained stays true of it, and the wall time the
    /// training took is not taken from the sessions that follow (on a slow machine it once ate the first
    /// day's morning).
    fn anew(self) -> Soak {
        let Soak { rt, fake, dir, start, speed, spec, timeframe, .. } = self;
        drop(fake);
        drop(rt);
        Soak::over(dir, start, speed, spec, &timeframe)
    }

    /// `tradebot ARGS --config CFG` with the keys and the simulated clock.
    fn tradebot(&self, args: &[&str]) -> Output {
        let clock = self.clock.to_string();
        let envs =
            [(tradebot::CLOCK_ENV, clock.as_str()), ("APCA_API_KEY_ID", KEY_ID), ("APCA_API_SECRET_KEY", SECRET_KEY)];
        let args: Vec<&str> = args.iter().copied().chain(["--config", &self.cfg]).collect();
        let o = tradebot_env(&args, &envs);
        assert!(o.status.success(), "tradebot {args:?}: {}", text(&o));
        o
    }

    /// Fetches 15-minute history from `from`, trains a PPO on it for this config and makes it champion.
    fn trained_15min_champion(&self, from: &str) -> String {
        let symbols = self.names.join(",");
        self.tradebot(&[
            "data",
            "fetch",
            "--symbols",
            &symbols,
            "--timeframe",
            "15Min",
            "--from",
            from,
            "--to",
            "2027-12-31",
        ]);
        let out = text(&self.tradebot(&["train", "ppo", "--device", "cpu", "--steps", "4096"]));
        let at = out.find("registered candidate ppo-").unwrap_or_else(|| panic!("no model registered:\n{out}"));
        let id: String = out[at + "registered candidate ".len()..]
            .chars()
            .take_while(|c| c.is_ascii_alphanumeric() || *c == '-')
            .collect();
        self.tradebot(&["models", "promote", &id, "--reason", "soak"]);
        id
    }

    fn start(&self, n: usize) -> Daemon {
        let log = self.dir.path().join(format!("run{n}.log"));
        let child = command(&["run", "--config", &self.cfg])
            .env("APCA_API_KEY_ID", KEY_ID)
            .env("APCA_API_SECRET_KEY", SECRET_KEY)
            .env(tradebot::CLOCK_ENV, self.clock.to_string())
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(&log).unwrap())
            .spawn()
            .unwrap();
        let mut d = Daemon { child, log };
        d.wait_ready();
        d
    }

    /// Waits on the wall clock until the simulated clock shows `t`.
    fn until(&self, t: DateTime<Utc>, d: &mut Daemon) {
        loop {
            let now = self.clock.at(Utc::now());
            if now >= t {
                return;
            }
            assert!(d.child.try_wait().unwrap().is_none(), "the daemon exited before {t}:\n{}", d.log());
            std::thread::sleep(self.clock.wall_span(t - now).min(Duration::from_millis(100)));
        }
    }

    fn store(&self) -> Store {
        Store::open(&self.dir.path().join("state")).unwrap()
    }

    /// Every minute the fake published in [from, end) is stored, once, with the published close.
    fn assert_minutes_stored(&self, store: &Store, from: DateTime<Utc>, end: DateTime<Utc>) {
        for s in &self.names {
            let stored = store.bars(&Symbol::new(s).unwrap(), Timeframe::MIN1, from, end).unwrap();
            let got: Vec<(DateTime<Utc>, f64)> = stored.iter().filter(|b| b.t < end).map(|b| (b.t, b.c)).collect();
            let published: Vec<(DateTime<Utc>, f64)> = self.fake.lock().bars[s]
                .iter()
                .map(|b| (DateTime::parse_from_rfc3339(&b.t).unwrap().to_utc(), b.c))
                .filter(|(t, _)| *t >= from && *t < end)
                .collect();
            let have: BTreeSet<DateTime<Utc>> = got.iter().map(|(t, _)| *t).collect();
            let missing: Vec<&DateTime<Utc>> = published.iter().map(|(t, _)| t).filter(|t| !have.contains(t)).collect();
            assert!(
                missing.is_empty(),
                "{s}: {} published minutes not stored, from {:?}",
                missing.len(),
                missing.first()
            );
            assert_eq!(got, published, "{s}: the stored minutes are the published ones");
        }
    }

    /// The bars of `tf` the daemon built from the stream in [from, end) equal the fake's REST bars.
    fn assert_bars_equal_rest(
        &self,
        store: &Store,
        tf: Timeframe,
        from: DateTime<Utc>,
        end: DateTime<Utc>,
    ) -> Vec<Bar> {
        let rest = tradebot::alpaca::rest::RestClient::new(self.fake.rest_config()).unwrap();
        let q = tradebot::alpaca::rest::BarsQuery {
            symbols: self.names.iter().map(|s| Symbol::new(s).unwrap()).collect(),
            timeframe: tf,
            start: from,
            end: end - chrono::Duration::seconds(1),
            limit: 10_000,
            feed: None,
            page_token: None,
        };
        let from_rest = self.rt.block_on(rest.fetch_bars(&q, 100)).unwrap();
        let mut all = Vec::new();
        for s in &self.names {
            let sym = Symbol::new(s).unwrap();
            let built = store.bars(&sym, tf, from, end - chrono::Duration::seconds(1)).unwrap();
            let want: Vec<Bar> = from_rest.iter().filter(|b| b.symbol == sym).cloned().collect();
            assert!(!built.is_empty(), "{s}: no {tf} bar built");
            let first_difference = built.iter().zip(&want).position(|(a, b)| a != b);
            assert!(
                built.len() == want.len() && first_difference.is_none(),
                "{s}: stream-built {tf} bars differ from the REST bars ({} built, {} from REST); first difference: {:?} / {:?}",
                built.len(),
                want.len(),
                first_difference.map(|i| &built[i]),
                first_difference.map(|i| &want[i]),
            );
            all.extend(built);
        }
        all
    }

    /// No client_order_id reached the fake twice, and the stored positions are the fake's.
    fn assert_orders_and_positions(&self, store: &Store, at: DateTime<Utc>) {
        let book = &self.fake.lock().book;
        let ids: Vec<&str> = book.orders.iter().map(|o| o.client_order_id.as_str()).collect();
        assert!(!ids.is_empty(), "no order was placed");
        assert_eq!(ids.iter().collect::<HashSet<_>>().len(), ids.len(), "{ids:?}");
        assert!(book.refused.iter().all(|(_, m)| !m.contains("unique")), "{:?}", book.refused);
        let clock = Box::new(tradebot::engine::ManualClock::new(at));
        let oms = tradebot::oms::Oms::open(store, clock, tradebot::oms::OmsConfig::default()).unwrap();
        let ours: BTreeMap<String, rust_decimal::Decimal> =
            oms.positions().into_iter().map(|(s, q)| (s.to_string(), q.normalize())).collect();
        let theirs: BTreeMap<String, rust_decimal::Decimal> =
            book.positions.iter().map(|(s, (q, _))| (s.clone(), q.normalize())).collect();
        assert_eq!(ours, theirs, "stored positions equal the broker's");
    }
}

/// The paper config against `fake` for `symbols` on `timeframe`.
fn config(dir: &Path, fake: &FakeAlpaca, symbols: &[String], timeframe: &str) -> String {
    let text = format!(
        r#"mode = "paper"
state_dir = {state:?}
log_level = "info"
{alpaca}data_retry_secs = 30
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
# Simulated seconds: a broker round trip of 100 ms is 16 of them at 160 minutes per second.
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
"#,
        state = dir.join("state").display().to_string(),
        alpaca = fake.alpaca_section("v2/iex"),
    );
    let path = dir.join("soak.toml");
    std::fs::write(&path, text).unwrap();
    path.display().to_string()
}

struct Daemon {
    child: Child,
    log: PathBuf,
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
        let log = self.log.clone();
        let read = || std::fs::read_to_string(&log).unwrap_or_default();
        let exit = common::wait_exit(&mut self.child, Duration::from_secs(60), "no exit within 60 s of SIGTERM", read);
        assert!(exit.success(), "{exit}:\n{}", self.log());
        let log = self.log();
        assert!(log.contains("stopped cleanly"), "{log}");
        log
    }
}

fn decisions(store: &Store, from: DateTime<Utc>, end: DateTime<Utc>) -> Vec<DecisionRecord> {
    let tree = store.tree::<DecisionRecord>(tradebot::store::TreeName::Decisions).unwrap();
    tree.scan_prefix(b"").unwrap().into_iter().map(|(_, r)| r).filter(|r| r.t >= from && r.t < end).collect()
}

fn sessions(from: (i32, u32, u32), to: (i32, u32, u32)) -> Vec<NaiveDate> {
    let cal = tradebot::Calendar::shipped();
    let day = |d: (i32, u32, u32)| NaiveDate::from_ymd_opt(d.0, d.1, d.2).unwrap();
    day(from).iter_days().take_while(|x| *x <= day(to)).filter(|x| cal.hours(*x).is_some()).collect()
}

#[test]
fn two_simulated_weeks_of_15_minute_bars_with_faults_kills_and_a_weekend_retrain() {
    let _serial = SERIAL.lock().unwrap_or_else(|p| p.into_inner());
    // Saturday 2026-10-31 18:00 New York at 160 minutes per second. The champion is trained against a
    // first run of the market, and the daemon meets the same market started anew at the same instant, so
    // the first session opens about fifteen wall seconds after it starts however long the training took
    // (on a busy machine it once took days of the simulated clock, and the start's backfill, seven days
    // at most, then no longer reached the first minutes checked below).
    let symbols = [("AAPL", 190.0), ("MSFT", 420.0), ("IBM", 210.0)];
    let trainer = Soak::new(ny((2026, 10, 31), 18, 0), 160.0, &symbols, &[], "15Min");
    let id = trainer.trained_15min_champion("2026-05-01");
    let soak = trainer.anew();
    let fake = &soak.fake;

    let mut logs = Vec::new();
    let mut d = soak.start(0);
    soak.until(ny((2026, 11, 2), 11, 0), &mut d);
    fake.drop_market_sockets();
    soak.until(ny((2026, 11, 2), 14, 0), &mut d);
    fake.rate_limit_for(Duration::from_millis(1500));
    fake.drop_market_sockets();
    soak.until(ny((2026, 11, 3), 10, 0), &mut d);
    // The next order POST is carried out and answered 500: the OMS must find it, not send it twice.
    fake.push_order_fault(Fault::ServerErrorAfterProcessing);
    fake.drop_update_sockets();
    soak.until(ny((2026, 11, 4), 12, 0), &mut d);
    logs.push(d.kill());
    d = soak.start(1);
    soak.until(ny((2026, 11, 5), 15, 58), &mut d);
    logs.push(d.kill());
    d = soak.start(2);
    // A half-dead socket over the weekend (no bars, no pongs): found by the silence timeout (30 s); the fake
    // holds it, against the one-connection limit, for 40 s. The weekend retrain runs meanwhile.
    soak.until(ny((2026, 11, 6), 16, 5), &mut d);
    fake.silence_market_sockets_for(Duration::from_secs(40));
    soak.until(ny((2026, 11, 10), 13, 0), &mut d);
    logs.push(d.kill());
    d = soak.start(3);
    soak.until(ny((2026, 11, 13), 16, 10), &mut d);
    logs.push(d.stop());
    let all_logs = logs.join("\n");
    assert!(!all_logs.contains("panicked"), "{all_logs}");
    assert!(all_logs.contains(&format!("loaded PPO model {id}")), "{all_logs}");
    assert!(all_logs.contains("retrain: starting"), "no weekend retrain:\n{all_logs}");
    // Each fault was met: the half-dead socket found, the 429s waited out, the ambiguous order POST sent.
    assert!(all_logs.contains("half-dead socket"), "{all_logs}");
    assert!(all_logs.contains("rate limited"), "{all_logs}");
    assert!(fake.lock().order_faults.is_empty(), "no order POST met the 500");
    assert!(all_logs.contains("POST /v2/orders failed"), "{all_logs}");

    let store = soak.store();
    let (first, end) = (ny((2026, 11, 2), 9, 30), ny((2026, 11, 13), 16, 0));
    soak.assert_minutes_stored(&store, ny((2026, 10, 27), 9, 30), end);
    let built = soak.assert_bars_equal_rest(&store, m15(), first, end);
    let periods: BTreeSet<DateTime<Utc>> = built.iter().map(|b| b.t).collect();
    assert_eq!(periods.len(), 10 * 26, "ten sessions of 26 periods");

    // Decisions on 15-minute closes only, once each: every period but the few that closed while the
    // daemon was down or before it had reconciled after a restart.
    let ds = decisions(&store, first, end);
    let mut seen = BTreeSet::new();
    for r in &ds {
        assert!(seen.insert(r.t), "two decisions at {}", r.t);
        assert!(periods.contains(&r.t), "a decision off a 15-minute close: {}", r.t);
    }
    assert!(seen.len() >= periods.len() - 40, "{} decisions of {} periods\n{all_logs}", seen.len(), periods.len());
    soak.assert_orders_and_positions(&store, end);

    // The weekend retrain learned up to the last bar stored before it: Friday 2026-11-06's 15:45 bar.
    let runs = tradebot::retrain::record::list(&store).unwrap();
    let weekend =
        runs.iter().find(|r| r.clock_time >= ny((2026, 11, 7), 2, 0) && r.clock_time < ny((2026, 11, 9), 0, 0));
    let weekend = weekend.unwrap_or_else(|| panic!("no retrain on the simulated weekend: {runs:?}"));
    let snapshot = weekend.snapshot.as_ref().unwrap_or_else(|| panic!("{weekend:?}"));
    assert_eq!(snapshot.holdout_last_bar, Some(ny((2026, 11, 6), 15, 45)), "{weekend:?}");
    assert!(snapshot.last_bar < snapshot.holdout_last_bar, "the candidate never trained on its holdout: {weekend:?}");
}

#[test]
fn a_week_of_day_bars_decides_once_per_session_at_its_close() {
    let _serial = SERIAL.lock().unwrap_or_else(|p| p.into_inner());
    // Sunday 2026-11-15 12:00 New York at 320 minutes per second, the shipped (daily) models. The history is
    // fetched from a first run of the market and the daemon meets the same market started anew, 28 simulated
    // hours (5 wall seconds) before the first close: on a busy machine the fetch and the daemon's start once
    // took longer than the 2 wall seconds a start at Monday 06:00 left, and the first session had closed.
    let symbols = [("AAPL", 190.0), ("MSFT", 420.0), ("IBM", 210.0)];
    let fetcher = Soak::new(ny((2026, 11, 15), 12, 0), 320.0, &symbols, &[], "1Day");
    fetcher.tradebot(&["data", "fetch", "--symbols", "AAPL,MSFT,IBM", "--from", "2026-04-01", "--to", "2026-11-15"]);
    let soak = fetcher.anew();
    // The shipped PPO model trades target weights: the config says so, or the model is refused at load.
    let cfg = std::fs::read_to_string(&soak.cfg).unwrap().replacen("[env]\n", &format!("[env]\n{SHIPPED_PPO_ENV}"), 1);
    std::fs::write(&soak.cfg, cfg).unwrap();
    let mut d = soak.start(0);
    soak.until(ny((2026, 11, 20), 16, 10), &mut d);
    let log = d.stop();
    assert!(!log.contains("panicked"), "{log}");
    let store = soak.store();
    let (from, end) = (ny((2026, 11, 16), 0, 0), ny((2026, 11, 20), 16, 0));
    soak.assert_minutes_stored(&store, ny((2026, 11, 16), 9, 30), end);
    let days = sessions((2026, 11, 16), (2026, 11, 20));
    let midnight =
        |d: &NaiveDate| New_York.from_local_datetime(&d.and_hms_opt(0, 0, 0).unwrap()).single().unwrap().to_utc();
    let want: Vec<DateTime<Utc>> = days.iter().map(midnight).collect();
    let built = soak.assert_bars_equal_rest(&store, Timeframe::DAY1, from, end);
    assert_eq!(built.len(), 3 * days.len(), "one day bar per symbol and session");
    let got: Vec<DateTime<Utc>> = decisions(&store, from, end).iter().map(|r| r.t).collect();
    assert_eq!(got, want, "one decision per session, at its close (the day bar, stamped New York midnight)");
}

#[test]
fn two_simulated_days_of_15_minute_decisions_with_a_quiet_symbol_and_a_kill() {
    let _serial = SERIAL.lock().unwrap_or_else(|p| p.into_inner());
    // Monday 2026-11-16 04:00 New York at 40 simulated minutes per second (the quarter-second close grace is
    // 10 simulated minutes, within a period); QUIET trades in one minute of fourteen, so a third of its
    // 15-minute periods have no bar. The champion is trained against a first run of the market; the daemon
    // meets the same market started anew, so it is ready before the open however long the training took.
    let symbols = [("AAPL", 190.0), ("MSFT", 420.0), ("QUIET", 40.0)];
    let trainer = Soak::new(ny((2026, 11, 16), 4, 0), 40.0, &symbols, &[("QUIET", 13.0 / 14.0)], "15Min");
    let id = trainer.trained_15min_champion("2026-09-01");
    let soak = trainer.anew();
    let mut d = soak.start(0);
    soak.until(ny((2026, 11, 16), 13, 0), &mut d);
    soak.fake.drop_market_sockets();
    soak.until(ny((2026, 11, 17), 11, 7), &mut d);
    let mut logs = vec![d.kill()];
    d = soak.start(1);
    // Past the close and the close grace (10 simulated minutes here), so QUIET's last period has closed.
    soak.until(ny((2026, 11, 17), 16, 25), &mut d);
    logs.push(d.stop());
    let all_logs = logs.join("\n");
    assert!(!all_logs.contains("panicked"), "{all_logs}");
    assert!(all_logs.contains(&format!("loaded PPO model {id}")), "{all_logs}");

    let store = soak.store();
    let (from, end) = (ny((2026, 11, 16), 9, 30), ny((2026, 11, 17), 16, 0));
    soak.assert_minutes_stored(&store, from, end);
    let built = soak.assert_bars_equal_rest(&store, m15(), from, end);
    let mut had: BTreeMap<DateTime<Utc>, BTreeSet<String>> = BTreeMap::new();
    for b in &built {
        had.entry(b.t).or_default().insert(b.symbol.to_string());
    }
    // Decisions on 15-minute closes only, once each, never an order for a symbol without a bar (stale).
    let mut seen = BTreeSet::new();
    let mut stale_decisions = 0;
    for r in decisions(&store, from, end) {
        assert!(seen.insert(r.t), "two decisions at {}", r.t);
        assert_eq!(r.t.timestamp() % 900, 0, "a decision off a 15-minute close: {}", r.t);
        let with_bar = had.get(&r.t).cloned().unwrap_or_default();
        if !with_bar.contains("QUIET") {
            stale_decisions += 1;
        }
        for (s, side, qty) in &r.orders {
            assert!(with_bar.contains(s), "an order for {s} ({side} {qty}) at {} where it had no bar", r.t);
        }
    }
    // Two sessions of 26 periods less the few the kill and the restart's reconciliation cost.
    assert!(seen.len() >= 44, "{} decisions: {seen:?}\n{all_logs}", seen.len());
    assert!(stale_decisions > 0, "QUIET was never stale at a decision");
    let book = &soak.fake.lock().book;
    let ids: Vec<&str> = book.orders.iter().map(|o| o.client_order_id.as_str()).collect();
    assert_eq!(ids.iter().collect::<HashSet<_>>().len(), ids.len(), "{ids:?}");
}
