//! The time in force of the engine's orders per asset class (`risk::tif_for`): a crypto pair's buy, its
//! trailing stop's sell and a flatten's sell go out `gtc` (Alpaca refuses `day` for crypto), a stock's
//! order `day`.

use super::{Rig, feed, fill_events, rig, risk_cfg, snapshot, with_risk};
use crate::domain::{OrderRequest, OrderTif, Side};
use crate::engine::*;
use crate::env::EnvConfig;
use crate::exec::ExecParams;
use crate::features::FeatureSpec;
use crate::models::Registry;
use crate::oms::{Oms, OmsConfig};
use crate::onnx::Dense;
use crate::onnx::mlp::{MlpPolicy, Squash};
use crate::policy::tests::{pipeline, register_ppo};
use crate::policy::{ModelSel, PpoPolicy, SessionOptions};
use crate::store::Store;
use chrono::DateTime;

/// The engine on two crypto pairs with a constant policy: buy the first, sell the second.
fn crypto_rig() -> Rig {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(&dir.path().join("state")).unwrap();
    let reg = Registry::open(&dir.path().join("models")).unwrap();
    let pl = pipeline(&["BTC/USD", "ETH/USD"]);
    let obs = PpoPolicy::obs_dim_for(&pl);
    let mlp = MlpPolicy {
        norm: None,
        hidden: vec![],
        activation: crate::onnx::Activation::Tanh,
        head: Dense { in_dim: obs, out_dim: 2, weight: vec![0.0; 2 * obs], bias: vec![1.0, -1.0] },
        squash: Squash::Clip(1.0),
    };
    register_ppo(&reg, &pl, &mlp, &EnvConfig::default());
    let policy = PpoPolicy::load(&reg, &ModelSel::Champion, &pl, SessionOptions::default()).unwrap();
    let clock = ManualClock::new(DateTime::from_timestamp(1_000_000_000, 0).unwrap());
    let oms = Oms::open(&store, Box::new(clock), OmsConfig::default()).unwrap();
    let cfg = EngineConfig {
        strategy: StrategyConfig { mode: StrategyMode::Ppo, ..Default::default() },
        symbols: pl.symbols.clone(),
        features: FeatureSpec::default(),
        initial_cash: 100_000.0,
        exec: ExecParams { max_trade: 20.0, ..ExecParams::default() },
        max_order_notional: rust_decimal::Decimal::from(1_000_000),
        reconcile_every: 0,
    };
    // The rig's clock, set to its first bar below (as `with_risk` expects).
    let bar_clock = ManualClock::new(DateTime::from_timestamp(1_000_000_000, 0).unwrap());
    let engine = Engine::new(cfg, &store, oms, (Some(policy), None), Box::new(bar_clock.clone())).unwrap();
    // The stock rig's bars, renamed: the same prices and times.
    let bars: Vec<Vec<crate::domain::Bar>> = rig(StrategyMode::Ppo, None)
        .bars
        .into_iter()
        .zip(&pl.symbols)
        .map(|(v, s)| v.into_iter().map(|b| crate::domain::Bar { symbol: s.clone(), ..b }).collect())
        .collect();
    bar_clock.set(bars[0][0].t);
    Rig { _dir: dir, store, engine, bars, clock: bar_clock }
}

/// Warms `r` up, reconciles, and returns the first decision's orders (the clock on each bar).
fn first_orders(r: &mut Rig, clock: &ManualClock) -> Vec<OrderRequest> {
    let w = FeatureSpec::default().warmup();
    for d in 0..w {
        clock.set(r.bars[0][d].t);
        feed(&mut r.engine, &r.bars, d);
    }
    r.engine.process(snapshot(100_000));
    clock.set(r.bars[0][w].t);
    orders(&feed(&mut r.engine, &r.bars, w))
}

fn orders(cmds: &[Command]) -> Vec<OrderRequest> {
    cmds.iter()
        .filter_map(|c| match c {
            Command::Submit(o) => Some(o.get().clone()),
            _ => None,
        })
        .collect()
}

#[test]
fn crypto_buys_stops_and_flattens_go_out_gtc_and_stock_orders_day() {
    let exec = ExecParams { max_trade: 20.0, trailing_stop: 0.05, cooldown_bars: 3, ..ExecParams::default() };
    let w = FeatureSpec::default().warmup();

    let (mut r, clock) = with_risk(rig(StrategyMode::Ppo, None), &risk_cfg("1000000"), &exec);
    let stock = first_orders(&mut r, &clock);
    assert_eq!(stock.iter().map(|o| (o.symbol.as_str(), o.tif)).collect::<Vec<_>>(), vec![("AAPL", OrderTif::Day)]);

    // Crypto: the buy, then (filled) the trailing stop's sell on a 20% drop.
    let (mut r, clock) = with_risk(crypto_rig(), &risk_cfg("1000000"), &exec);
    let buy = first_orders(&mut r, &clock);
    assert_eq!(
        buy.iter().map(|o| (o.symbol.as_str(), o.side, o.tif)).collect::<Vec<_>>(),
        vec![("BTC/USD", Side::Buy, OrderTif::Gtc)]
    );
    for ev in fill_events(&buy[0], 50, r.bars[0][w].t) {
        r.engine.process(ev);
    }
    let mut crash = r.bars[0][w + 1].clone();
    crash.c = 40.0;
    clock.set(crash.t);
    let stop = orders(&r.engine.process(Event::Bar(crash)));
    assert_eq!(
        stop.iter().map(|o| (o.symbol.as_str(), o.side, o.tif)).collect::<Vec<_>>(),
        vec![("BTC/USD", Side::Sell, OrderTif::Gtc)]
    );

    // Crypto: the buy (filled), then a flatten's sell.
    let (mut r, clock) = with_risk(crypto_rig(), &risk_cfg("1000000"), &exec);
    let buy = first_orders(&mut r, &clock);
    for ev in fill_events(&buy[0], 50, r.bars[0][w].t) {
        r.engine.process(ev);
    }
    let flat = orders(&r.engine.process(Event::Control(Control::Flatten)));
    assert_eq!(
        flat.iter().map(|o| (o.symbol.as_str(), o.side, o.tif)).collect::<Vec<_>>(),
        vec![("BTC/USD", Side::Sell, OrderTif::Gtc)]
    );
}
