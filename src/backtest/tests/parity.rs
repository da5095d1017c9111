//! Parity (issue 7 item 7): one PPO model over the same shipped bars gives the same equity curve, within
//! 1e-6 relative at every bar, in an env rollout (`VecEnv`, one env, fixed start, deterministic actions
//! from the ONNX model) and in the backtest (Engine + OMS + SimBroker).

use crate::backtest::*;
use crate::broker::SimBroker;
use crate::data::{ImportOptions, import_csv};
use crate::engine::{Engine, EngineConfig, ManualClock, StrategyConfig};
use crate::env::{EnvConfig, Panel, StepOutcome, VecEnv};
use crate::features::FeatureSpec;
use crate::oms::{Oms, OmsConfig};
use crate::policy::tests::{random_ppo, register_ppo};
use std::sync::Arc;

#[test]
fn env_rollout_and_backtest_give_the_same_equity_curve() {
    let exec = ExecParams { max_trade: 50.0, trailing_stop: 0.08, cooldown_bars: 3, ..ExecParams::default() };
    let trades = parity(crate::exec::ActionSpace::Shares, exec);
    assert!(trades >= 20, "only {trades} fills: the test would not see the execution");
}

/// The weights action space with its no-trade band: the engine sizes its orders as the env does.
#[test]
fn env_rollout_and_backtest_agree_with_target_weights_and_a_band() {
    let weights = crate::exec::ActionSpace::Weights { band: 0.04, max_weight: 0.5 };
    let trades = parity(weights, ExecParams::default());
    assert!(trades >= 10, "only {trades} fills: the test would not see the band's orders");
}

/// Runs both with `action` and `exec`, checks the curves agree; returns the backtest's trade count.
fn parity(action: crate::exec::ActionSpace, exec: ExecParams) -> u64 {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(&dir.path().join("state")).unwrap();
    let csv = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("data/stocks-daily-2000-2013.csv.gz");
    let symbols: Vec<Symbol> = ["AAPL", "IBM", "MSFT"].iter().map(|s| Symbol::new(s).unwrap()).collect();
    import_csv(&store, &csv, &ImportOptions { symbols: symbols.clone(), ..Default::default() }).unwrap();
    let from = crate::data::daily_bar_time(chrono::NaiveDate::from_ymd_opt(2006, 1, 1).unwrap());
    let to = crate::data::daily_bar_time(chrono::NaiveDate::from_ymd_opt(2007, 6, 30).unwrap());
    let bars = aligned_bars(&store, &symbols, Timeframe::DAY1, from, to).unwrap();
    let spec = FeatureSpec::default();
    let panel = Arc::new(Panel::from_bars(&spec, &bars).unwrap());
    let start = spec.warmup() - 1;
    assert_eq!(panel.n_days, bars[0].len() - start);

    let reg = Registry::open(&dir.path().join("models")).unwrap();
    let pl = Pipeline::new(&spec, &symbols, crate::domain::Timeframe::DAY1).with_action(action);
    let env_cfg = EnvConfig {
        action,
        n_envs: 1,
        episode_len: panel.n_days - 1,
        initial_cash: 100_000.0,
        exec,
        fixed_start: true,
        ..EnvConfig::default()
    };
    register_ppo(&reg, &pl, &random_ppo(&pl, 77), &env_cfg);

    // The env rollout.
    let mut policy = PpoPolicy::load(&reg, &ModelSel::Champion, &pl, SessionOptions::default()).unwrap();
    let mut env = VecEnv::new(env_cfg.clone(), panel.clone()).unwrap();
    let mut obs = vec![0.0f32; env.obs_dim()];
    let mut step = StepOutcome::default();
    let mut env_curve = vec![env_cfg.initial_cash];
    for _ in 0..env_cfg.episode_len {
        env.observe(&mut obs);
        let a = policy.act(&obs).unwrap();
        env.step(&a, &mut step).unwrap();
        env_curve.push(step.equity[0]);
    }

    // The backtest.
    let scratch = Store::open(&dir.path().join("scratch")).unwrap();
    let clock = ManualClock::new(bars[0][0].t);
    let oms = Oms::open(&scratch, Box::new(clock.clone()), OmsConfig::default()).unwrap();
    let cfg = EngineConfig {
        strategy: StrategyConfig::default(),
        symbols: symbols.clone(),
        features: spec.clone(),
        initial_cash: env_cfg.initial_cash,
        exec,
        max_order_notional: rust_decimal::Decimal::MAX,
        reconcile_every: 0,
    };
    let policy = PpoPolicy::load(&reg, &ModelSel::Champion, &pl, SessionOptions::default()).unwrap();
    let engine = Engine::new(cfg, &scratch, oms, (Some(policy), None), Box::new(clock.clone())).unwrap();
    let sim = SimBroker::new(env_cfg.initial_cash, exec);
    let (run, engine) = simulate(engine, &clock, sim, &bars, start).unwrap();

    assert_eq!(run.curve.len(), env_curve.len());
    for (i, ((t, bt), en)) in run.curve.iter().zip(&env_curve).enumerate() {
        let rel = (bt - en).abs() / en.abs().max(1e-12);
        assert!(rel <= 1e-6, "bar {i} ({t}): backtest {bt} vs env {en} (relative {rel:e})");
    }
    // The curve really moved.
    let last = env_curve[env_curve.len() - 1];
    assert!((last - env_cfg.initial_cash).abs() > 1.0, "equity never moved");
    assert!(engine.oms().fill_count() > 0);
    run.activity.trades as u64
}
