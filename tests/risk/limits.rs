//! The limits on `1Day` end to end: `tradebot run` (feed and broker "alpaca") against the in-process
//! fake Alpaca, trading one stock on daily bars. Minute bars mid-session reach the risk checks: a -6%
//! minute trips the daily loss limit within the minute and the kill switch's flatten sells the holding;
//! `tradebot flatten` mid-session sells although the last day bar is days old.

use super::tradebot;
use rust_decimal::Decimal;
use std::fs::File;
use std::path::{Path, PathBuf};
use std::process::{Child, Stdio};
use std::time::{Duration, Instant};
use tradebot::alpaca::fake::{FakeAlpaca, KEY_ID, SECRET_KEY};
use tradebot::alpaca::wire::market as wm;
use tradebot::domain::{Bar, Symbol, Timeframe};
use tradebot::store::Store;

struct Daily {
    fake: FakeAlpaca,
    _rt: tokio::runtime::Runtime,
    dir: tempfile::TempDir,
    config: PathBuf,
    child: Option<Child>,
}

impl Daily {
    /// The fake's account holds `qty` AAPL at 100 beside `cash`; the daemon trades AAPL on `1Day` with a
    /// 5% daily loss limit under `flatten`; its store holds one AAPL day bar from two days ago.
    fn start(qty: i64, cash: i64) -> Daily {
        Daily::setup(qty, cash).run()
    }

    /// The account, the store and the config, without the daemon yet.
    fn setup(qty: i64, cash: i64) -> Daily {
        let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
        let fake = rt.block_on(FakeAlpaca::start(0)).unwrap();
        fake.set_price("AAPL", Decimal::from(100));
        {
            let mut f = fake.lock();
            f.book.cash = Decimal::from(cash);
            f.book.positions.insert("AAPL".into(), (Decimal::from(qty), Decimal::from(100)));
        }
        let dir = tempfile::tempdir().unwrap();
        let state = dir.path().join("state");
        let store = Store::open(&state).unwrap();
        let day = chrono::Utc::now() - chrono::Duration::days(2);
        let bar =
            Bar::new(Symbol::new("AAPL").unwrap(), Timeframe::DAY1, day, 100.0, 100.0, 100.0, 100.0, 1e6).unwrap();
        store.put_bars(&[bar]).unwrap();
        drop(store);
        let config = dir.path().join("daily.toml");
        let text = format!(
            r#"mode = "paper"
state_dir = {state:?}
log_level = "info"
{alpaca}[market]
symbols = ["AAPL"]
timeframe = "1Day"
[feed]
kind = "alpaca"
[broker]
kind = "alpaca"
[strategy]
mode = "ppo"
[retrain]
enabled = false
[risk]
max_bar_age_secs = 3600
daily_loss_limit_pct = 0.05
kill_switch = "flatten"
[web]
enabled = false
"#,
            state = state.display().to_string(),
            alpaca = fake.alpaca_section("v2/iex"),
        );
        std::fs::write(&config, text).unwrap();
        Daily { fake, _rt: rt, dir, config, child: None }
    }

    /// Starts the daemon and waits until it has reconciled and subscribed.
    fn run(mut self) -> Daily {
        let d = &mut self;
        let log = d.log();
        let child = tradebot(
            &["run", "--config", d.config.to_str().unwrap()],
            &[("APCA_API_KEY_ID", KEY_ID), ("APCA_API_SECRET_KEY", SECRET_KEY)],
        )
        .stdout(Stdio::null())
        .stderr(File::create(&log).unwrap())
        .spawn()
        .unwrap();
        d.child = Some(child);
        d.wait_for(|d| {
            let text = std::fs::read_to_string(d.log()).unwrap_or_default();
            text.contains("tradebot run: ready: reconciled with the broker")
                && d.fake.lock().market_received.iter().any(|m| m.contains("\"subscribe\""))
        });
        self
    }

    /// A market buy of `qty` AAPL placed at the broker with one of our client order ids (from a decision
    /// of an earlier run), left working (`hold_orders`).
    fn working_buy(&self, client_order_id: &str, qty: &str) {
        self.fake.lock().book.hold_orders = true;
        let url = self.fake.http_url().join("v2/orders").unwrap();
        let body = serde_json::json!({
            "symbol": "AAPL", "qty": qty, "side": "buy", "type": "market", "time_in_force": "day",
            "client_order_id": client_order_id,
        });
        let sent = self._rt.block_on(async {
            reqwest::Client::new()
                .post(url)
                .header("APCA-API-KEY-ID", KEY_ID)
                .header("APCA-API-SECRET-KEY", SECRET_KEY)
                .json(&body)
                .send()
                .await
                .map(|r| r.status())
        });
        assert_eq!(sent.unwrap(), 200, "the fake took the buy");
    }

    fn log(&self) -> PathBuf {
        self.dir.path().join("run.log")
    }

    fn text(&self) -> String {
        std::fs::read_to_string(self.log()).unwrap_or_default()
    }

    /// Waits up to 30 s for `done`, failing with the daemon's log.
    fn wait_for(&mut self, done: impl Fn(&Daily) -> bool) {
        let deadline = Instant::now() + Duration::from_secs(30);
        while !done(self) {
            if let Some(Ok(Some(status))) = self.child.as_mut().map(|c| c.try_wait()) {
                panic!("the daemon exited ({status}):\n{}", self.text());
            }
            assert!(Instant::now() < deadline, "not within 30 s:\n{}", self.text());
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// A minute bar of AAPL `ago` minutes back, closing at `price` (the fake fills at it too).
    fn minute(&self, ago: i64, price: f64) {
        let t = chrono::Utc::now() - chrono::Duration::minutes(ago);
        let t = t.to_rfc3339_opts(chrono::SecondsFormat::Secs, true);
        let t = format!("{}:00Z", &t[..16]);
        let bar = wm::Bar { symbol: None, o: price, h: price, l: price, c: price, v: 100.0, t, n: None, vw: None };
        self.fake.set_price("AAPL", Decimal::from_f64_retain(price).unwrap());
        self.fake.publish_bar("AAPL", bar);
    }

    /// The sells of AAPL the broker holds: (client order id, quantity).
    fn sells(&self) -> Vec<(String, String)> {
        let f = self.fake.lock();
        f.book
            .orders
            .iter()
            .filter(|o| o.symbol == "AAPL" && format!("{:?}", o.side).to_lowercase() == "sell")
            .map(|o| (o.client_order_id.clone(), o.qty.clone().unwrap_or_default()))
            .collect()
    }

    fn stop(mut self) {
        if let Some(mut c) = self.child.take() {
            crate::common::signal(c.id(), nix::sys::signal::Signal::SIGTERM);
            let status = c.wait().unwrap();
            assert!(status.success(), "{status}\n{}", self.text());
        }
    }

    /// `tradebot flatten`: exit 0 naming AAPL's sell, which then reaches the broker.
    fn flatten_sells_aapl(&mut self) {
        let out = tradebot(&["flatten", "--config", self.config.to_str().unwrap()], &[]).output().unwrap();
        let said = crate::text(&out);
        assert!(out.status.success(), "{said}\n{}", self.text());
        assert!(said.contains("sells sent: AAPL"), "{said}");
        self.wait_for(|d| !d.sells().is_empty());
    }

    fn config(&self) -> &Path {
        &self.config
    }
}

impl Drop for Daily {
    fn drop(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

#[test]
fn a_minute_crash_on_daily_bars_trips_the_kill_switch_within_the_minute_and_flattens() {
    // 1,000 AAPL at 100 and no cash: equity 100,000, all of it in AAPL.
    let mut d = Daily::start(1000, 0);
    d.minute(3, 100.0);
    d.minute(2, 99.0);
    std::thread::sleep(Duration::from_millis(300));
    assert!(d.sells().is_empty(), "a 1% dip is nothing: {:?}", d.sells());
    let crash = Instant::now();
    d.minute(1, 94.0);
    d.wait_for(|d| !d.sells().is_empty());
    assert!(crash.elapsed() < Duration::from_secs(60), "within the minute");
    let sells = d.sells();
    assert_eq!(sells.len(), 1, "{sells:?}");
    assert!(sells[0].0.starts_with("tb-killsw-AAPL-"), "{sells:?}");
    assert_eq!(sells[0].1.parse::<Decimal>().unwrap(), Decimal::from(1000));
    let text = d.text();
    assert!(text.contains("KILL SWITCH TRIPPED"), "{text}");
    assert!(text.contains("why: kill switch"), "the audit line says why:\n{text}");
    d.stop();
}

#[test]
fn tradebot_flatten_mid_session_on_daily_bars_sells_and_says_so() {
    let mut d = Daily::start(10, 100_000);
    // A price of this session's (the day bar is two days old: older than risk.max_bar_age_secs).
    d.minute(1, 101.0);
    std::thread::sleep(Duration::from_millis(300));
    d.flatten_sells_aapl();
    let sells = d.sells();
    assert!(sells[0].0.starts_with("tb-flatten-AAPL-"), "{sells:?}");
    assert_eq!(sells[0].1.parse::<Decimal>().unwrap(), Decimal::from(10));
    let status = tradebot(&["status", "--config", d.config().to_str().unwrap()], &[]).output().unwrap();
    assert!(crate::text(&status).contains("flattened and paused"), "{}", crate::text(&status));
    d.stop();
}

#[test]
fn a_flatten_while_our_buy_works_cancels_it_first_and_no_sell_is_refused_as_a_wash_trade() {
    let d = Daily::setup(10, 100_000);
    // Our buy of 5 AAPL from an earlier decision still works at the broker, which cancels as Alpaca does
    // (`pending_cancel`, then `canceled` 300 ms later) and refuses a sell against an open buy (403 "potential
    // wash trade detected").
    d.working_buy("tb-engine-AAPL-1764000000-0", "5");
    d.fake.lock().book.cancel_delay = Some(Duration::from_millis(300));
    let mut d = d.run();
    d.minute(1, 101.0);
    std::thread::sleep(Duration::from_millis(300));
    d.flatten_sells_aapl();
    let f = d.fake.lock();
    assert!(f.book.refused.is_empty(), "the broker refused: {:?}", f.book.refused);
    let buy = f.book.orders.iter().find(|o| o.client_order_id == "tb-engine-AAPL-1764000000-0").unwrap();
    assert_eq!(format!("{:?}", buy.status), "Canceled");
    drop(f);
    let sells = d.sells();
    assert_eq!(sells.len(), 1, "{sells:?}");
    assert_eq!(sells[0].1.parse::<Decimal>().unwrap(), Decimal::from(10));
    assert!(d.text().contains("waits for the cancel of our working buy"), "{}", d.text());
    d.stop();
}
