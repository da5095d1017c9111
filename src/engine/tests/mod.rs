//! The engine on synthetic bars: no order before reconciliation, PPO orders through the OMS with
//! deterministic ids, decisions stored, pause / resume / flatten / shutdown, the LSTM and ensemble modes
//! over a fake probability source.

use super::*;
use crate::domain::{Bar, OrderRequest, Side, Symbol, Timeframe};
use crate::env::EnvConfig;
use crate::exec::ExecParams;
use crate::features::FeatureSpec;
use crate::models::Registry;
use crate::oms::{Oms, OmsConfig};
use crate::onnx::Dense;
use crate::onnx::mlp::{MlpPolicy, Squash};
use crate::policy::tests::{pipeline, register_ppo};
use crate::policy::{ModelSel, PolicyError, PpoPolicy, SessionOptions};
use crate::store::{Store, TreeName};
use chrono::{DateTime, Utc};

mod money;
mod protect;
mod tif;
mod warm;

/// A constant policy: action +1 on the first symbol, -1 on the second.
fn constant_policy(obs_dim: usize) -> MlpPolicy {
    MlpPolicy {
        norm: None,
        hidden: vec![],
        activation: crate::onnx::Activation::Tanh,
        head: Dense { in_dim: obs_dim, out_dim: 2, weight: vec![0.0; 2 * obs_dim], bias: vec![1.0, -1.0] },
        squash: Squash::Clip(1.0),
    }
}

struct FakeProbs(Vec<[f32; 3]>, Vec<Symbol>);

impl ProbSource for FakeProbs {
    fn on_bar(&mut self, _bar: &Bar) {}
    fn probs(&mut self, symbol: &Symbol) -> Option<Result<[f32; 3], PolicyError>> {
        self.1.iter().position(|s| s == symbol).map(|k| Ok(self.0[k]))
    }
    fn model_id(&self) -> String {
        "lstm-fake".into()
    }
}

fn bars(symbols: &[Symbol], n: usize) -> Vec<Vec<Bar>> {
    symbols
        .iter()
        .enumerate()
        .map(|(k, s)| {
            (0..n)
                .map(|i| {
                    let c = 50.0 + 10.0 * k as f64 + (i as f64 * 0.3).sin() * 3.0 + i as f64 * 0.05;
                    Bar {
                        symbol: s.clone(),
                        timeframe: Timeframe::DAY1,
                        t: DateTime::from_timestamp(1_000_000_000 + i as i64 * 86_400, 0).unwrap(),
                        o: c,
                        h: c * 1.01,
                        l: c * 0.99,
                        c,
                        v: 1000.0 + i as f64,
                    }
                })
                .collect()
        })
        .collect()
}

pub(super) struct Rig {
    pub(super) _dir: tempfile::TempDir,
    pub(super) store: Store,
    pub(super) engine: Engine,
    pub(super) bars: Vec<Vec<Bar>>,
    /// The engine's clock, at the first bar; tests move it.
    pub(super) clock: ManualClock,
}

pub(super) fn rig(mode: StrategyMode, probs: Option<Vec<[f32; 3]>>) -> Rig {
    rig_with(mode, probs, true)
}

fn rig_with(mode: StrategyMode, probs: Option<Vec<[f32; 3]>>, with_policy: bool) -> Rig {
    rig_on(mode, probs, with_policy, false)
}

/// A rig whose engine's store is on disk (a live engine's) or in memory (an evaluation's).
fn rig_on(mode: StrategyMode, probs: Option<Vec<[f32; 3]>>, with_policy: bool, in_memory: bool) -> Rig {
    let dir = tempfile::tempdir().unwrap();
    let store = if in_memory { Store::in_memory().unwrap() } else { Store::open(&dir.path().join("state")).unwrap() };
    let reg = Registry::open(&dir.path().join("models")).unwrap();
    let pl = pipeline(&["AAPL", "MSFT"]);
    let mlp = constant_policy(PpoPolicy::obs_dim_for(&pl));
    register_ppo(&reg, &pl, &mlp, &EnvConfig::default());
    let policy = PpoPolicy::load(&reg, &ModelSel::Champion, &pl, SessionOptions::default()).unwrap();
    let clock = ManualClock::new(DateTime::from_timestamp(1_000_000_000, 0).unwrap());
    let oms = Oms::open(&store, Box::new(clock), OmsConfig::default()).unwrap();
    let spec = FeatureSpec::default();
    let bars = bars(&pl.symbols, spec.warmup() + 3);
    let clock = ManualClock::new(bars[0][0].t);
    let cfg = EngineConfig {
        strategy: StrategyConfig { mode, lstm_position_pct: 0.004, ..Default::default() },
        symbols: pl.symbols.clone(),
        features: spec.clone(),
        initial_cash: 100_000.0,
        exec: ExecParams { max_trade: 20.0, ..ExecParams::default() },
        max_order_notional: rust_decimal::Decimal::from(1_000_000),
        reconcile_every: 0,
    };
    let probs = probs.map(|p| Box::new(FakeProbs(p, pl.symbols.clone())) as Box<dyn ProbSource>);
    let engine =
        Engine::new(cfg, &store, oms, (with_policy.then_some(policy), probs), Box::new(clock.clone())).unwrap();
    Rig { _dir: dir, store, engine, bars, clock }
}

pub(super) fn feed(e: &mut Engine, bars: &[Vec<Bar>], d: usize) -> Vec<Command> {
    bars.iter().flat_map(|b| e.process(Event::Bar(b[d].clone()))).collect()
}

pub(super) fn submits(cmds: &[Command]) -> Vec<(String, Side, String)> {
    cmds.iter()
        .filter_map(|c| match c {
            Command::Submit(o) => Some((o.symbol.to_string(), o.side, o.qty.get().to_string())),
            _ => None,
        })
        .collect()
}

pub(super) fn snapshot(cash: i64) -> Event {
    Event::Reconciled(Box::new(BrokerSnapshot { cash: cash.into(), equity: cash.into(), ..Default::default() }))
}

#[test]
fn ppo_orders_only_after_reconciliation_and_controls_stop_them() {
    let mut r = rig(StrategyMode::Ppo, None);
    let w = FeatureSpec::default().warmup();
    for d in 0..w {
        assert!(feed(&mut r.engine, &r.bars, d).is_empty(), "bar {d}: not reconciled, or features not ready");
    }
    r.engine.process(snapshot(100_000));
    let cmds = feed(&mut r.engine, &r.bars, w);
    // Action +1 on AAPL buys max_trade units; -1 on MSFT sells nothing (flat).
    assert_eq!(submits(&cmds), vec![("AAPL".to_string(), Side::Buy, "20".to_string())]);
    let Command::Submit(o) = &cmds[0] else { unreachable!() };
    assert_eq!(o.client_order_id, crate::domain::ClientOrderId::derive("engine", &o.symbol, r.bars[0][w].t, 0));
    let decisions = r.store.tree::<DecisionRecord>(TreeName::Decisions).unwrap().scan_prefix(b"").unwrap();
    let last = &decisions.last().unwrap().1;
    assert!(last.model_id.as_deref().is_some_and(|m| m.starts_with("ppo-")));
    assert_eq!(last.actions, vec![1.0, -1.0]);
    assert_eq!(last.orders.len(), 1);
    // The same decision again (a replayed bar) gives no second order.
    let again = r.engine.process(Event::Bar(r.bars[0][w].clone()));
    assert!(submits(&again).is_empty());

    r.engine.process(Event::Control(Control::Pause));
    assert!(submits(&feed(&mut r.engine, &r.bars, w + 1)).is_empty(), "paused");
    // The first buy fills (an unfilled one would block the next buy of AAPL).
    for ev in fill_events(o.get(), 50, r.bars[0][w].t) {
        r.engine.process(ev);
    }
    r.engine.process(Event::Control(Control::Resume));
    assert_eq!(submits(&feed(&mut r.engine, &r.bars, w + 2)).len(), 1, "resumed");
    r.engine.process(Event::Control(Control::Shutdown));
}

/// Durability (issue 39 item 2): on disk, a bar's order record is stored and flushed before its
/// `Command::Submit` is handed back to be sent; over a store in memory (an evaluation) the engine sends
/// the same order with its record stored, and flushes nothing.
#[test]
fn an_order_is_flushed_before_it_is_sent_on_disk_and_never_in_memory() {
    let w = FeatureSpec::default().warmup();
    let mut sent = Vec::new();
    for in_memory in [false, true] {
        let mut r = rig_on(StrategyMode::Ppo, None, true, in_memory);
        assert_eq!(r.store.is_in_memory(), in_memory);
        for d in 0..w {
            feed(&mut r.engine, &r.bars, d);
        }
        r.engine.process(snapshot(100_000));
        let before = r.store.durable_flushes();
        let cmds = feed(&mut r.engine, &r.bars, w);
        let Some(Command::Submit(o)) = cmds.first() else { panic!("no order at bar {w}") };
        let orders = r.store.tree::<serde_json::Value>(TreeName::Orders).unwrap();
        let key = o.client_order_id.as_str().as_bytes();
        assert!(orders.get(key).unwrap().is_some(), "the order's record is stored before it is sent");
        if in_memory {
            assert_eq!(r.store.durable_flushes(), 0, "a store in memory flushed");
        } else {
            assert!(r.store.durable_flushes() > before, "the order was handed back before any flush");
        }
        sent.push(submits(&cmds));
    }
    assert_eq!(sent[0], sent[1], "the same orders on disk and in memory");
}

/// Group commit (issue 39 item 1): a bar that sends two orders writes both records with ONE durable
/// flush, made before the orders are handed back; both records are on disk then.
#[test]
fn a_bar_with_two_orders_makes_one_flush_before_they_are_sent() {
    let w = FeatureSpec::default().warmup();
    // LSTM, both symbols up: a buy of each at the same close.
    let mut r = rig(StrategyMode::Lstm, Some(vec![[0.1, 0.1, 0.8], [0.1, 0.1, 0.8]]));
    r.engine.process(snapshot(100_000));
    for d in 0..w - 1 {
        feed(&mut r.engine, &r.bars, d);
    }
    let before = r.store.durable_flushes();
    let cmds = feed(&mut r.engine, &r.bars, w - 1);
    assert_eq!(submits(&cmds).len(), 2, "two orders at one close: {:?}", submits(&cmds));
    assert_eq!(r.store.durable_flushes() - before, 1, "one flush for the bar's order records");
    let orders = r.store.tree::<serde_json::Value>(TreeName::Orders).unwrap();
    for c in &cmds {
        if let Command::Submit(o) = c {
            assert!(orders.get(o.client_order_id.as_str().as_bytes()).unwrap().is_some());
        }
    }
}

#[test]
fn lstm_and_ensemble_modes_follow_the_probabilities() {
    let w = FeatureSpec::default().warmup();
    // LSTM: AAPL up (buy 0.4 % of the 100,000 equity in whole units at the close), MSFT down but flat
    // already (nothing).
    let mut r = rig(StrategyMode::Lstm, Some(vec![[0.1, 0.1, 0.8], [0.8, 0.1, 0.1]]));
    r.engine.process(snapshot(100_000));
    for d in 0..w - 1 {
        feed(&mut r.engine, &r.bars, d);
    }
    let cmds = feed(&mut r.engine, &r.bars, w - 1);
    let close = f64::from(r.bars[0][w - 1].c as f32);
    let units = (0.004 * 100_000.0 / close).trunc();
    assert!(units >= 5.0, "the test's prices give a few units: {units}");
    assert_eq!(submits(&cmds), vec![("AAPL".to_string(), Side::Buy, units.to_string())]);
    // Ensemble: the PPO buy of AAPL is vetoed by a high P(down).
    let mut r = rig(StrategyMode::Ensemble, Some(vec![[0.9, 0.05, 0.05], [0.1, 0.1, 0.8]]));
    r.engine.process(snapshot(100_000));
    for d in 0..w - 1 {
        feed(&mut r.engine, &r.bars, d);
    }
    assert!(submits(&feed(&mut r.engine, &r.bars, w - 1)).is_empty(), "the buy is vetoed");
    // The order-path harness is not a strategy the engine runs.
    let e = Engine::new(
        EngineConfig {
            strategy: StrategyConfig { mode: StrategyMode::Scripted, ..Default::default() },
            symbols: vec![],
            features: FeatureSpec::default(),
            initial_cash: 1.0,
            exec: ExecParams::default(),
            max_order_notional: 1.into(),
            reconcile_every: 0,
        },
        &r.store,
        Oms::open(&r.store, Box::new(ProcessClock), OmsConfig::default()).unwrap(),
        (None, None),
        Box::new(ProcessClock),
    );
    assert!(matches!(e, Err(EngineError::Missing { .. })));
}

#[test]
fn without_its_model_the_engine_trades_nothing_until_one_arrives() {
    let w = FeatureSpec::default().warmup();
    let mut r = rig_with(StrategyMode::Ppo, None, false);
    assert_eq!(r.engine.missing_model(), Some("PPO"));
    r.engine.process(snapshot(100_000));
    for d in 0..=w + 1 {
        assert!(submits(&feed(&mut r.engine, &r.bars, d)).is_empty(), "bar {d}: no model, no order");
    }
    let decisions = r.store.tree::<DecisionRecord>(TreeName::Decisions).unwrap().scan_prefix(b"").unwrap();
    assert!(decisions.is_empty(), "no decision is stored without a model");
    // A promoted model arrives between two bars: the next bar trades.
    let with = rig(StrategyMode::Ppo, None);
    let reg = Registry::open(&with._dir.path().join("models")).unwrap();
    let pl = pipeline(&["AAPL", "MSFT"]);
    r.engine.set_policy(PpoPolicy::load(&reg, &ModelSel::Champion, &pl, SessionOptions::default()).unwrap());
    assert_eq!(r.engine.missing_model(), None);
    assert_eq!(submits(&feed(&mut r.engine, &r.bars, w + 2)), vec![("AAPL".to_string(), Side::Buy, "20".to_string())]);
    // LSTM mode without a probability source waits the same way.
    let mut l = rig_with(StrategyMode::Lstm, None, true);
    assert_eq!(l.engine.missing_model(), Some("LSTM"));
    l.engine.process(snapshot(100_000));
    for d in 0..=w {
        assert!(submits(&feed(&mut l.engine, &l.bars, d)).is_empty());
    }
}

pub(super) fn risk_cfg(max_order_notional: &str) -> crate::config::RiskConfig {
    crate::config::RiskConfig {
        max_position_pct: 0.5,
        max_gross_exposure_pct: 1.0,
        max_order_notional: max_order_notional.parse().unwrap(),
        daily_loss_limit_pct: 0.05,
        kill_switch: crate::config::KillSwitchAction::Halt,
        max_bar_age: std::time::Duration::from_secs(4 * 86_400),
        extended_hours: false,
        max_working_orders: 1,
    }
}

/// The rig's engine with the full risk checks, on the rig's clock (at the first bar; the test moves it).
pub(super) fn with_risk(r: Rig, cfg: &crate::config::RiskConfig, exec: &ExecParams) -> (Rig, ManualClock) {
    let checks = crate::risk::RiskChecks::open(cfg, exec, &r.store).unwrap();
    let Rig { _dir, store, engine, bars, clock } = r;
    let risk = EngineRisk { checks, timeframe: Timeframe::DAY1, assets: Default::default() };
    (Rig { _dir, store, engine: engine.with_risk(risk), bars, clock: clock.clone() }, clock)
}

#[test]
fn full_risk_checks_refuse_orders_trip_the_kill_switch_and_stop_out() {
    let w = FeatureSpec::default().warmup();

    // An order above the notional cap is refused, counted by reason, and noted in the decision.
    let (mut r, clock) = with_risk(rig(StrategyMode::Ppo, None), &risk_cfg("500"), &ExecParams::default());
    for d in 0..w {
        clock.set(r.bars[0][d].t);
        feed(&mut r.engine, &r.bars, d);
    }
    r.engine.process(snapshot(100_000));
    clock.set(r.bars[0][w].t);
    assert!(submits(&feed(&mut r.engine, &r.bars, w)).is_empty(), "20 x ~50 is above the 500 cap");
    assert_eq!(r.engine.take_refusals(), vec![(Symbol::new("AAPL").unwrap(), "max_order_notional")]);
    let decisions = r.store.tree::<DecisionRecord>(TreeName::Decisions).unwrap().scan_prefix(b"").unwrap();
    assert!(decisions.last().unwrap().1.note.as_deref().unwrap().contains("refused: max_order_notional"));

    // Equity falls 10% within the day: the kill switch trips, nothing trades, and it is on disk.
    let (mut r, clock) = with_risk(rig(StrategyMode::Ppo, None), &risk_cfg("1000000"), &ExecParams::default());
    for d in 0..w {
        clock.set(r.bars[0][d].t);
        feed(&mut r.engine, &r.bars, d);
    }
    r.engine.process(snapshot(100_000));
    clock.set(r.bars[0][w].t);
    assert_eq!(submits(&feed(&mut r.engine, &r.bars, w)).len(), 1, "the day opens at 100,000 and trades");
    r.engine.process(snapshot(90_000));
    assert!(submits(&feed(&mut r.engine, &r.bars, w)).is_empty(), "tripped: no order");
    assert!(r.engine.risk().unwrap().kill_switch().is_some());
    assert!(submits(&feed(&mut r.engine, &r.bars, w + 1)).is_empty(), "it stays tripped");
    let reopened = crate::risk::RiskChecks::open(&risk_cfg("1000000"), &ExecParams::default(), &r.store).unwrap();
    assert!(reopened.kill_switch().is_some(), "the trip is persisted");

    // A fill, then a close 10% under the high: the trailing stop (5%) sells the holding at once.
    let exec = ExecParams { max_trade: 20.0, trailing_stop: 0.05, cooldown_bars: 3, ..ExecParams::default() };
    let (mut r, clock) = with_risk(rig(StrategyMode::Ppo, None), &risk_cfg("1000000"), &exec);
    for d in 0..w {
        clock.set(r.bars[0][d].t);
        feed(&mut r.engine, &r.bars, d);
    }
    r.engine.process(snapshot(100_000));
    clock.set(r.bars[0][w].t);
    let cmds = feed(&mut r.engine, &r.bars, w);
    let Some(Command::Submit(o)) = cmds.first() else { panic!("no buy: {cmds:?}") };
    let order = crate::domain::BrokerOrder {
        id: crate::domain::OrderId::new("b-1").unwrap(),
        client_order_id: Some(o.client_order_id.clone()),
        raw_client_order_id: o.client_order_id.to_string(),
        symbol: o.symbol.clone(),
        side: Side::Buy,
        qty: Some(o.qty.get()),
        notional: None,
        filled_qty: o.qty.get(),
        filled_avg_price: Some(rust_decimal::Decimal::from(50)),
        limit_price: None,
        status: crate::domain::OrderStatus::Filled,
        broker_status: "filled".into(),
        created_at: None,
    };
    for u in crate::backtest::sim::trade_updates(&order, o.qty.get(), r.bars[0][w].t) {
        r.engine.process(Event::Order(Box::new(u)));
    }
    assert_eq!(r.engine.oms().position(&o.symbol), o.qty.get());
    let mut crash = r.bars[0][w + 1].clone();
    crash.c = 40.0;
    clock.set(crash.t);
    let cmds = r.engine.process(Event::Bar(crash.clone()));
    let sells = submits(&cmds);
    assert_eq!(sells, vec![("AAPL".to_string(), Side::Sell, o.qty.get().to_string())], "{cmds:?}");
    let Command::Submit(s) = &cmds[0] else { unreachable!() };
    assert_eq!(s.client_order_id, crate::domain::ClientOrderId::derive("stop", &crash.symbol, crash.t, 0));
}

/// The broker's fill of `o` at `price`, as trade updates.
pub(super) fn fill_events(o: &OrderRequest, price: i64, t: DateTime<Utc>) -> Vec<Event> {
    let order = crate::domain::BrokerOrder {
        id: crate::domain::OrderId::new(&format!("b-{}", o.client_order_id)).unwrap(),
        client_order_id: Some(o.client_order_id.clone()),
        raw_client_order_id: o.client_order_id.to_string(),
        symbol: o.symbol.clone(),
        side: o.side,
        qty: Some(o.qty.get()),
        notional: None,
        filled_qty: o.qty.get(),
        filled_avg_price: Some(rust_decimal::Decimal::from(price)),
        limit_price: None,
        status: crate::domain::OrderStatus::Filled,
        broker_status: "filled".into(),
        created_at: None,
    };
    crate::backtest::sim::trade_updates(&order, o.qty.get(), t).into_iter().map(|u| Event::Order(Box::new(u))).collect()
}

/// Issue 36: "risk refused" is said at INFO once per symbol and reason a day in the whole process, not
/// again by each new engine (a replay's gate ran one per backtest and restarted the count); a gate's
/// backtest says its refusals at DEBUG. Counted in the log lines.
#[test]
fn a_refusal_is_said_at_info_once_a_streak_across_engines_and_at_debug_in_a_gate_backtest() {
    use log::Level::{Debug, Info};
    let w = FeatureSpec::default().warmup();
    let run = || {
        let (mut r, clock) = with_risk(rig(StrategyMode::Ppo, None), &risk_cfg("500"), &ExecParams::default());
        for d in 0..w {
            clock.set(r.bars[0][d].t);
            feed(&mut r.engine, &r.bars, d);
        }
        r.engine.process(snapshot(100_000));
        for d in w..w + 3 {
            clock.set(r.bars[0][d].t);
            feed(&mut r.engine, &r.bars, d);
        }
        r.engine.take_refusals().len()
    };
    let log = crate::logging::capture::this_thread();
    let count = |level: log::Level| {
        log.lines().iter().filter(|(l, m)| *l == level && m.starts_with("engine: risk refused")).count()
    };
    let gate = super::refusals::at_debug(run);
    assert_eq!(gate, 3, "20 x ~50 is above the 500 cap on each of the 3 bars");
    assert_eq!((count(Info), count(Debug)), (0, 3), "a gate's backtest says its refusals at debug");
    let a = run();
    let info_after_a = count(Info);
    let b = run();
    assert_eq!((a, b), (3, 3));
    // AAPL's max_order_notional on the engine clock's 3 days in a row: one refusal going on, once at INFO
    // at most (none when another test said it first), and never again by the second engine on those days.
    assert!(info_after_a <= 1, "{:#?}", log.lines());
    assert_eq!(count(Info), info_after_a, "the second engine repeats none at INFO: {:#?}", log.lines());
    assert_eq!(count(Info) + count(Debug), 9, "{:#?}", log.lines());
}

/// The engine's time is the clock it was built with, with or without the risk checks: a flatten is
/// stamped with the clock's time, not the last bar's, and never the wall clock's.
#[test]
fn the_engine_reads_the_clock_it_was_built_with_not_the_last_bar_or_the_wall() {
    let mut r = rig(StrategyMode::Ppo, None);
    r.engine.process(snapshot(100_000));
    for d in 0..3 {
        feed(&mut r.engine, &r.bars, d);
    }
    let at = r.bars[0][0].t - chrono::Duration::days(400);
    r.clock.set(at);
    r.engine.process(Event::Control(Control::Flatten));
    assert_eq!(r.engine.flatten_outcome().map(|o| o.at), Some(at));
}

#[test]
fn a_decision_on_a_non_finite_observation_says_which_value() {
    let e = super::core::NoDecision::NonFinite { index: 3, value: f32::NAN };
    assert_eq!(e.to_string(), "observation value 3 is NaN: inputs must be finite");
}
