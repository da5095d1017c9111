//! The crash test: `tradebot run` (feed and broker "alpaca") against an in-process fake Alpaca whose
//! account outlives the daemon, killed with SIGKILL at seeded random points and restarted on the same
//! state directory each time: 50 times with the scripted order-path core (one unit of two stocks bought
//! per bar), and 15 times with the real engine (a PPO champion with random weights, features, risk
//! checks, the order manager) trading two crypto pairs on minute bars, buying and selling.
//!
//! Each round either kills early (0-250 ms after the start: during start-up, store open or the first
//! reconciliation) or waits for the daemon to reconcile and subscribe, streams bars (a decision each) for
//! a random 20-420 ms (the engine 300-1,800 ms), and kills it mid-stream; some of those kills are aimed at the order path (0-3 ms
//! after a bar, or 0-0.4 ms after its order reached the broker). Checked:
//! - after every restart, once reconciled, the positions the scripted core logs equal the fake broker's;
//! - after every kill, every order the broker holds is in the store (recorded before it was sent), and
//!   each stored position differs from the broker's only by fills of orders not yet recorded;
//! - never a client_order_id sent twice (the fake records every refusal), never two orders for one
//!   decision (symbol and bar time);
//! - at the end (one more start, reconciliation, SIGTERM): every fill the broker made is in the store, no
//!   fill the broker did not make, and the stored positions equal the broker's (crypto positions, which
//!   Alpaca names `BTCUSD`, under the pair's symbol).
//!
//! Seed: `TRADEBOT_CRASH_SEED` (default fixed), printed on failure.

use super::tradebot;
use rust_decimal::Decimal;
use std::collections::{BTreeMap, HashMap, HashSet};
use std::fs::File;
use std::path::{Path, PathBuf};
use std::process::{Child, Stdio};
use std::time::{Duration, Instant};
use tradebot::FeatureSpec;
use tradebot::alpaca::fake::{FakeAlpaca, KEY_ID, SECRET_KEY};
use tradebot::alpaca::wire::market as wm;
use tradebot::alpaca::wire::rest as wr;
use tradebot::domain::{Bar, ClientOrderId, Symbol, Timeframe};
use tradebot::engine::ManualClock;
use tradebot::env::rng::SplitMix64;
use tradebot::models::{Manifest, ModelKind, Registry, TensorSpec};
use tradebot::oms::{Oms, OmsConfig};
use tradebot::store::Store;
use tradebot::{Activation, Dense};
use tradebot::{MlpPolicy, Squash};
use tradebot::{Pipeline, PpoPolicy};

const KILLS: usize = 50;
/// Monday 2024-03-11 14:30 UTC; bar i opens at T0 + i minutes.
const T0: i64 = 1_710_167_400;
const RECONCILED: &str = "scripted core: reconciled; positions ";
const READY: &str = "tradebot run: ready: reconciled with the broker";

/// What the daemon runs: the scripted order-path core on two stocks, or the real engine (a PPO champion
/// with random weights) on two crypto pairs.
#[derive(Clone, Copy, PartialEq)]
enum Core {
    Scripted,
    Engine,
}

struct Rig {
    core: Core,
    /// The symbols streamed and their last prices (a seeded random walk for the engine).
    prices: Vec<(&'static str, f64)>,
    rng: SplitMix64,
    fake: FakeAlpaca,
    /// Runs the fake's server; kept for as long as the fake.
    _rt: tokio::runtime::Runtime,
    dir: tempfile::TempDir,
    config: PathBuf,
    seed: u64,
    next_bar: i64,
}

impl Rig {
    fn with(seed: u64, core: Core) -> Rig {
        let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
        let fake = rt.block_on(FakeAlpaca::start(0)).unwrap();
        let prices = match core {
            Core::Scripted => vec![("AAPL", 10.0), ("MSFT", 20.0)],
            Core::Engine => vec![("BTC/USD", 30.0), ("ETH/USD", 20.0)],
        };
        for (s, p) in &prices {
            fake.set_price(s, Decimal::from_f64_retain(*p).unwrap());
        }
        // A killed daemon's socket may close after its successor connects: no 406 for that.
        fake.lock().max_market_connections = 64;
        let dir = tempfile::tempdir().unwrap();
        let config = dir.path().join("crash.toml");
        let (symbols, stream, strategy) = match core {
            Core::Scripted => (r#"["AAPL", "MSFT"]"#, "v2/iex", "scripted"),
            Core::Engine => (r#"["BTC/USD", "ETH/USD"]"#, "v1beta3/crypto/us", "ppo"),
        };
        let text = format!(
            r#"mode = "paper"
state_dir = {state:?}
log_level = "info"
{alpaca}[market]
symbols = {symbols}
timeframe = "1Min"
[feed]
kind = "alpaca"
[broker]
kind = "alpaca"
# Restarts come faster here than the usual minute's grace: an order a killed daemon recorded but never
# sent is found lost at the next start's reconciliation.
lost_after_secs = 1
[strategy]
mode = "{strategy}"
[retrain]
enabled = false
[risk]
# The bars are from 2024: old, so the runner's stale-at-send check would refuse every order (ten years,
# paper's longest).
max_bar_age_secs = 315360000
# The random walk may lose more than a day's usual limit: the kill switch would stop the buys.
daily_loss_limit_pct = 0.9
"#,
            state = dir.path().join("state").display().to_string(),
            alpaca = fake.alpaca_section(stream),
        );
        std::fs::write(&config, text).unwrap();
        let rig =
            Rig { core, prices, rng: SplitMix64::new(seed ^ 0x5eed), fake, _rt: rt, dir, config, seed, next_bar: 0 };
        if core == Core::Engine {
            rig.seed_engine();
        }
        rig
    }

    /// The engine's state before its first start: a PPO champion with random weights for the two pairs
    /// on minute bars (written with our ONNX writer, loaded by ONNX Runtime in the daemon), and 300 stored
    /// minute bars of each pair before `T0` to warm its features up on.
    fn seed_engine(&self) {
        let symbols: Vec<Symbol> = self.prices.iter().map(|(s, _)| Symbol::new(s).unwrap()).collect();
        let pipeline = Pipeline::new(&FeatureSpec::default(), &symbols, Timeframe::MIN1);
        let mut rng = SplitMix64::new(self.seed);
        let mut dense = |i: usize, o: usize, a: f64| Dense {
            in_dim: i,
            out_dim: o,
            weight: (0..i * o).map(|_| ((rng.next_f64() * 2.0 - 1.0) * a) as f32).collect(),
            bias: (0..o).map(|_| ((rng.next_f64() * 2.0 - 1.0) * a) as f32).collect(),
        };
        let obs = PpoPolicy::obs_dim_for(&pipeline);
        let mlp = MlpPolicy {
            norm: None,
            hidden: vec![dense(obs, 16, 1.0)],
            activation: Activation::Tanh,
            head: dense(16, symbols.len(), 1.5),
            squash: Squash::Clip(1.0),
        };
        let onnx = mlp.to_onnx("obs", "action", &[]).unwrap();
        let env = serde_json::to_value(tradebot::env::EnvConfig::default()).unwrap();
        let draft = Manifest {
            params: BTreeMap::from([("env".to_string(), env)]),
            ..Manifest::draft(
                ModelKind::Ppo,
                pipeline.features.clone(),
                vec![TensorSpec { name: "obs".into(), shape: vec![-1, obs as i64] }],
                vec![TensorSpec { name: "action".into(), shape: vec![-1, symbols.len() as i64] }],
                symbols.clone(),
                Timeframe::MIN1,
            )
        };
        let reg = Registry::open(&self.state().join("models")).unwrap();
        let m = reg.add(&onnx, draft).unwrap();
        reg.promote(&m.id, "crash test").unwrap();
        let store = Store::open(&self.state()).unwrap();
        let mut walk = self.prices.clone();
        let mut bars = Vec::new();
        for i in (1..=300).rev() {
            let t = chrono::DateTime::from_timestamp(T0 - 60 * i, 0).unwrap();
            for (s, p) in walk.iter_mut() {
                *p *= (0.01 * (rng.next_f64() - 0.5)).exp();
                bars.push(Bar::new(Symbol::new(s).unwrap(), Timeframe::MIN1, t, *p, *p, *p, *p, 100.0).unwrap());
            }
        }
        store.put_bars(&bars).unwrap();
    }

    fn state(&self) -> PathBuf {
        self.dir.path().join("state")
    }

    fn start(&self, round: usize) -> (Child, PathBuf) {
        let log = self.dir.path().join(format!("run-{round}.log"));
        let child = tradebot(
            &["run", "--config", self.config.to_str().unwrap()],
            &[("APCA_API_KEY_ID", KEY_ID), ("APCA_API_SECRET_KEY", SECRET_KEY)],
        )
        .stdout(Stdio::null())
        .stderr(File::create(&log).unwrap())
        .spawn()
        .unwrap();
        (child, log)
    }

    /// Waits until the daemon logged its first reconciliation and subscribed to bars; returns the
    /// positions it logged then (the scripted core logs them; the engine says only that it is ready).
    fn wait_ready(&self, child: &mut Child, log: &Path, subscribes_before: usize) -> Option<BTreeMap<String, Decimal>> {
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            let text = std::fs::read_to_string(log).unwrap_or_default();
            let subscribed = self.subscribes() > subscribes_before;
            let marker = if self.core == Core::Scripted { RECONCILED } else { READY };
            if let Some(line) = text.lines().find(|l| l.contains(marker))
                && subscribed
            {
                if self.core == Core::Engine {
                    return None;
                }
                let json = &line[line.find(RECONCILED).unwrap() + RECONCILED.len()..];
                return Some(serde_json::from_str(json.trim()).unwrap_or_else(|e| panic!("{e}: {line}")));
            }
            if let Ok(Some(status)) = child.try_wait() {
                panic!("seed {}: the daemon exited ({status}) before reconciling:\n{text}", self.seed);
            }
            assert!(Instant::now() < deadline, "seed {}: no reconciliation within 30 s:\n{text}", self.seed);
            std::thread::sleep(Duration::from_millis(5));
        }
    }

    fn subscribes(&self) -> usize {
        self.fake.lock().market_received.iter().filter(|m| m.contains("\"subscribe\"")).count()
    }

    /// The fake broker's positions, as the daemon logs them (flat symbols left out).
    fn broker_positions(&self) -> BTreeMap<String, Decimal> {
        self.fake.lock().book.positions.iter().filter(|(_, p)| !p.0.is_zero()).map(|(s, p)| (s.clone(), p.0)).collect()
    }

    /// Streams bars, alternating symbols, one every 40 ms, for `window`. (The daemon's client keeps to
    /// Alpaca's 200 requests a minute with a burst of 10, so faster bars would only queue orders.)
    fn stream_bars(&mut self, window: Duration) {
        let start = Instant::now();
        while start.elapsed() < window {
            self.publish_next();
            std::thread::sleep(Duration::from_millis(40));
        }
    }

    /// Publishes the next bar (a new decision for the daemon): the scripted core decides on each bar, one
    /// symbol after the other; the engine on each minute once both pairs have theirs (their prices walk).
    fn publish_next(&mut self) {
        let i = self.next_bar;
        self.next_bar += 1;
        match self.core {
            Core::Scripted => {
                let (symbol, price) = self.prices[(i % 2) as usize];
                self.publish(symbol, T0 + 60 * (i / 2), price);
            }
            Core::Engine => {
                for k in 0..self.prices.len() {
                    let step = 0.02 * (self.rng.next_f64() - 0.5);
                    self.prices[k].1 *= step.exp();
                    let (symbol, price) = self.prices[k];
                    self.publish(symbol, T0 + 60 * i, price);
                }
            }
        }
    }

    fn publish(&self, symbol: &str, t: i64, price: f64) {
        let t = chrono::DateTime::from_timestamp(t, 0).unwrap();
        let bar = wm::Bar {
            symbol: None,
            o: price,
            h: price,
            l: price,
            c: price,
            v: 100.0,
            t: t.to_rfc3339_opts(chrono::SecondsFormat::Secs, true),
            n: None,
            vw: None,
        };
        self.fake.publish_bar(symbol, bar);
    }

    /// Waits (up to 2 s) until the broker holds more than `n` orders.
    fn wait_orders_above(&self, n: usize) {
        let deadline = Instant::now() + Duration::from_secs(2);
        while self.fake.lock().book.orders.len() <= n && Instant::now() < deadline {
            std::thread::sleep(Duration::from_micros(20));
        }
    }

    /// From the daemons' logs: fills the reconciliations synthesised (a kill between the broker's fill and
    /// its record) and orders found recorded as sent but unknown to the broker (a kill between the record
    /// and the POST).
    fn recoveries(&self, kills: usize) -> (usize, usize) {
        let (mut fills, mut unsent) = (HashSet::new(), HashSet::new());
        for round in 0..=kills {
            let text = std::fs::read_to_string(self.dir.path().join(format!("run-{round}.log"))).unwrap_or_default();
            for line in text.lines() {
                let id = line.split("reconcile ").nth(1).and_then(|r| r.split(':').next()).map(str::to_string);
                match id {
                    Some(id) if line.contains("recording the difference") => _ = fills.insert(id),
                    Some(id) if line.contains("not at the broker yet") => _ = unsent.insert(id),
                    _ => {}
                }
            }
        }
        (fills.len(), unsent.len())
    }

    /// After a kill, the store as the next start loads it: every order the broker holds was recorded
    /// before it was sent, and each stored position differs from the broker's by exactly the fills (buys
    /// up, sells down) of orders the daemon had not recorded yet (the next reconciliation takes those from the broker).
    fn check_after_kill(&self, round: usize) {
        let store = Store::open(&self.state()).unwrap();
        let oms = Oms::open(&store, Box::new(ManualClock::new(chrono::Utc::now())), OmsConfig::default()).unwrap();
        let fake = self.fake.lock();
        let mut expected: BTreeMap<String, Decimal> = BTreeMap::new();
        for o in &fake.book.orders {
            let id = ClientOrderId::new(&o.client_order_id).unwrap();
            let rec = oms
                .order(&id)
                .unwrap_or_else(|| panic!("seed {}, round {round}: broker order {id} is not in the store", self.seed));
            let filled: Decimal = o.filled_qty.as_deref().unwrap_or("0").parse().unwrap();
            assert!(rec.filled_qty <= filled, "seed {}, round {round}: {id} has more fills stored", self.seed);
            let unrecorded = filled - rec.filled_qty;
            let signed = if o.side == wr::Side::Sell { -unrecorded } else { unrecorded };
            *expected.entry(o.symbol.clone()).or_default() += signed;
        }
        let mut symbols: Vec<String> = fake.book.positions.keys().cloned().collect();
        symbols.extend(oms.positions().keys().map(|s| s.to_string()));
        for sym in symbols {
            let broker_qty = fake.book.positions.get(&sym).map_or(Decimal::ZERO, |p| p.0);
            let stored = oms.position(&Symbol::new(&sym).unwrap());
            let unrecorded = expected.get(&sym).copied().unwrap_or_default();
            assert_eq!(stored + unrecorded, broker_qty, "seed {}, round {round}: position {sym}", self.seed);
        }
    }
}

fn kill(child: &mut Child) {
    child.kill().unwrap();
    child.wait().unwrap();
}

#[test]
fn sigkill_at_random_points_never_duplicates_an_order_nor_loses_a_fill() {
    crash_rounds(Core::Scripted, KILLS);
}

/// The same with the real engine (features, a PPO champion in ONNX Runtime, risk checks, the order
/// manager) trading two crypto pairs, whose positions Alpaca names without the slash (`BTCUSD`).
#[test]
fn sigkill_with_the_real_engine_on_crypto_pairs_never_duplicates_an_order_nor_loses_a_fill() {
    crash_rounds(Core::Engine, 15);
}

fn crash_rounds(core: Core, kills: usize) {
    let seed = std::env::var("TRADEBOT_CRASH_SEED").ok().and_then(|s| s.parse().ok()).unwrap_or(7);
    let mut rig = Rig::with(seed, core);
    let mut rng = SplitMix64::new(seed);
    let (mut early, mut reconciled) = (0, 0);
    for round in 0..kills {
        let subscribes = rig.subscribes();
        let (mut child, log) = rig.start(round);
        let mode = rng.below(5);
        if mode == 0 {
            std::thread::sleep(Duration::from_millis(rng.below(250) as u64));
            early += 1;
        } else {
            if let Some(logged) = rig.wait_ready(&mut child, &log, subscribes) {
                assert_eq!(logged, rig.broker_positions(), "seed {seed}, round {round}: positions after reconciling");
            }
            reconciled += 1;
            // The engine's first order waits for the client's rate limit (Alpaca's 200 requests a minute,
            // a burst of 10, mostly spent on the start's snapshot and asset reads): it streams longer.
            let window = if core == Core::Engine { 300 + rng.below(1500) } else { 20 + rng.below(400) };
            rig.stream_bars(Duration::from_millis(window as u64));
            // Aim some kills at the order path: just after a decision's bar, or just after its order
            // reached the broker (before the daemon may have recorded the fill).
            if mode == 3 {
                rig.publish_next();
                std::thread::sleep(Duration::from_micros(rng.below(3000) as u64));
            } else if mode == 4 {
                let n = rig.fake.lock().book.orders.len();
                rig.publish_next();
                rig.wait_orders_above(n);
                std::thread::sleep(Duration::from_micros(rng.below(400) as u64));
            }
        }
        kill(&mut child);
        rig.check_after_kill(round);
    }

    // One more start: it reconciles; then a graceful stop, and the store is compared with the broker.
    let subscribes = rig.subscribes();
    let (mut child, log) = rig.start(kills);
    if let Some(logged) = rig.wait_ready(&mut child, &log, subscribes) {
        assert_eq!(logged, rig.broker_positions(), "seed {seed}: positions after the last restart");
    }
    crate::common::signal(child.id(), nix::sys::signal::Signal::SIGTERM);
    let status = child.wait().unwrap();
    assert!(status.success(), "seed {seed}: {status}\n{}", std::fs::read_to_string(&log).unwrap_or_default());

    let broker_positions = rig.broker_positions();
    let fake = rig.fake.lock();
    let orders = &fake.book.orders;
    let logs = || {
        (0..=kills)
            .map(|r| std::fs::read_to_string(rig.dir.path().join(format!("run-{r}.log"))).unwrap_or_default())
            .collect::<Vec<_>>()
            .join("--- next run ---\n")
    };
    // The client keeps to Alpaca's rate limit (a burst of 10, mostly spent on each start's snapshot, then
    // one request per 300 ms): each start gets a few orders out before its kill, the engine's fewer (it
    // also reads the assets and the calendar).
    let enough = if core == Core::Scripted { kills / 2 } else { 5 };
    assert!(
        orders.len() >= enough,
        "seed {seed}: only {} orders: the test did not trade much:\n{}",
        orders.len(),
        logs()
    );
    assert!(
        fake.book.refused.is_empty(),
        "seed {seed}: the broker refused orders (a client_order_id sent twice?): {:?}",
        fake.book.refused
    );
    let store = Store::open(&rig.state()).unwrap();
    let clock = ManualClock::new(chrono::Utc::now());
    let oms = Oms::open(&store, Box::new(clock), OmsConfig::default()).unwrap();
    // One order per decision: the stored record of each broker order names its decision's bar.
    let mut per_decision: HashMap<(String, i64), usize> = HashMap::new();
    for o in orders {
        let rec = oms.order(&ClientOrderId::new(&o.client_order_id).unwrap()).unwrap();
        assert_eq!(rec.symbol.as_str(), o.symbol, "{}", o.client_order_id);
        let bar = rec.bar_time.unwrap_or_else(|| panic!("seed {seed}: {} has no decision bar", o.client_order_id));
        *per_decision.entry((o.symbol.clone(), bar.timestamp())).or_default() += 1;
    }
    let dup: Vec<_> = per_decision.iter().filter(|(_, n)| **n > 1).collect();
    assert!(dup.is_empty(), "seed {seed}: decisions with more than one order: {dup:?}");
    let mut stored: HashMap<String, Decimal> = HashMap::new();
    for f in oms.fills().unwrap() {
        *stored.entry(f.client_order_id.to_string()).or_default() += f.qty;
    }
    for o in orders {
        let filled: Decimal = o.filled_qty.as_deref().unwrap_or("0").parse().unwrap();
        let ours = stored.remove(&o.client_order_id).unwrap_or_default();
        assert_eq!(ours, filled, "seed {seed}: fills of {} in the store vs at the broker", o.client_order_id);
    }
    assert!(stored.is_empty(), "seed {seed}: fills the broker never made: {stored:?}");
    let positions: BTreeMap<String, Decimal> = oms.positions().into_iter().map(|(s, q)| (s.to_string(), q)).collect();
    assert_eq!(positions, broker_positions, "seed {seed}: stored positions vs the broker's at the end");
    if core == Core::Engine {
        // The pairs were held (not only bought and refused): the reconciliations mapped `BTCUSD` back.
        assert!(!positions.is_empty(), "seed {seed}: the engine holds nothing at the end");
        // The audit trail: an INFO line for each order sent (with why) and for each new fill.
        let all = logs();
        let sent: Vec<&str> = all.lines().filter(|l| l.contains("order sent: ")).collect();
        assert!(!sent.is_empty(), "seed {seed}: no `order sent:` line:\n{all}");
        for l in &sent {
            assert!(l.contains(" INFO ") || l.contains("INFO"), "seed {seed}: not at INFO: {l}");
            assert!(l.contains("why: ") && l.contains("client id tb-"), "seed {seed}: {l}");
            assert!(
                orders.iter().any(|o| l.contains(&format!("client id {},", o.client_order_id))),
                "seed {seed}: a line for an order the broker does not have: {l}"
            );
            // The journal's structured fields (`log`'s key-values, written after the line on stderr).
            let id = l.split("client id ").nth(1).and_then(|r| r.split(',').next()).unwrap_or("");
            assert!(l.contains(&format!(" order_id={id}")) && l.contains(" symbol="), "seed {seed}: no fields: {l}");
        }
        assert!(all.lines().any(|l| l.contains("fill: ") && l.contains(" at ")), "seed {seed}: no fill line:\n{all}");
    }
    let (synthesised, lost) = rig.recoveries(kills);
    eprintln!(
        "crash test (seed {seed}, {}): {kills} SIGKILLs ({early} early, {reconciled} after reconciling), {} broker orders, {} fills stored; restarts recovered {synthesised} fills from the broker and found {lost} orders recorded but never sent",
        if core == Core::Engine { "engine, crypto" } else { "scripted" },
        orders.len(),
        oms.fill_count()
    );
}
