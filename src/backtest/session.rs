//! The one evaluator: a model (PPO, LSTM or ensemble) trading a window of stored bars through the
//! `Engine` with the full `RiskChecks` (position, exposure and order limits, the daily-loss kill switch,
//! trailing stops and cooldown, asset rules) and the `SimBroker`. `tradebot backtest`, the replay daemon
//! (`tradebot run` on a replay feed) and the promotion gate's walk-forward folds all step a `SimSession`,
//! so they trade by the same rules and the same timing:
//!
//! ```text
//!  bar d:  fill(d)   orders decided on bar d-1 fill at bar d's close (the SimBroker's execution rule);
//!                    the broker's view (fills, positions, cash) reaches the engine; equity recorded
//!          decide(d) each symbol's bar d through the engine; its orders wait for bar d+1
//! ```
//!
//! Bars before the feature warm-up go through the engine as well (features, LSTM windows, the account's
//! reconciliation); the engine cannot decide before its features are ready, so the curve starts at the
//! first bar it can trade on (`warm-up - 1`).

use super::metrics::Activity;
use super::sim::{SimRunError, deliver, fill_pending};
use crate::broker::SimBroker;
use crate::config::Config;
use crate::domain::{Bar, OrderStatus, Symbol};
use crate::engine::Core;
use crate::engine::{Command, Engine, EngineConfig, EngineRisk, Event, ManualClock, ProbSource, StrategyMode};
use crate::oms::{Oms, OmsConfig};
use crate::policy::PpoPolicy;
use crate::risk::RiskChecks;
use crate::store::Store;
use chrono::{DateTime, Utc};
use rust_decimal::prelude::ToPrimitive;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// The models a session trades with: the PPO policy (`ppo`, `ensemble`) and the LSTM probabilities
/// (`lstm`, `ensemble`).
pub type Models = (Option<PpoPolicy>, Option<Box<dyn ProbSource>>);

/// One recorded bar of a session: the account after the bar's fills, buy-and-hold's equity, and the
/// running count of fills and fees.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct EquityPoint {
    pub t: DateTime<Utc>,
    pub equity: f64,
    pub cash: f64,
    pub buy_hold: f64,
    #[serde(default)]
    pub trades: usize,
    #[serde(default)]
    pub fees: f64,
}

#[derive(Debug, thiserror::Error)]
pub enum SessionError {
    #[error("opening the risk checks: {0}")]
    Risk(String),
    #[error("opening the order manager: {0}")]
    Oms(String),
    #[error("building the engine: {0}")]
    Engine(String),
}

/// The simulated account's starting cash: `broker.initial_cash` (what the replay's SimBroker starts
/// with), else `env.initial_cash`.
pub fn initial_cash(config: &Config) -> f64 {
    config.broker.initial_cash.to_f64().filter(|c| *c > 0.0).unwrap_or(config.env.initial_cash)
}

/// The index of the first bar the engine can trade on with strategy `mode`: its features need `warmup`
/// bars, and an LSTM (`lstm`, `ensemble`) full fast and slow windows (`windows::first_ready_bar`).
pub fn first_traded_bar(config: &Config, mode: StrategyMode) -> usize {
    let features = config.features.warmup().saturating_sub(1);
    match mode {
        StrategyMode::Lstm | StrategyMode::Ensemble => {
            features.max(crate::features::windows::first_ready_bar(&config.features, &config.lstm.window_spec()))
        }
        StrategyMode::Ppo | StrategyMode::Scripted => features,
    }
}

pub struct SimSession {
    engine: Engine,
    clock: ManualClock,
    sim: SimBroker,
    activity: Activity,
    record_from: usize,
    curve: Vec<EquityPoint>,
    refusals: BTreeMap<&'static str, usize>,
    fresh_refusals: Vec<&'static str>,
}

impl SimSession {
    /// The engine (strategy `mode`, the config's features, limits and execution rule) on a fresh account
    /// in `account` (its OMS, kill switch and decisions), the clock at `first_bar`.
    pub fn open(
        config: &Config,
        mode: StrategyMode,
        account: &Store,
        models: Models,
        first_bar: DateTime<Utc>,
    ) -> Result<SimSession, SessionError> {
        let env = &config.env;
        let clock = ManualClock::new(first_bar);
        let oms = Oms::open(account, Box::new(clock.clone()), OmsConfig::default())
            .map_err(|e| SessionError::Oms(e.to_string()))?;
        let checks =
            RiskChecks::open(&config.risk, &env.exec, account).map_err(|e| SessionError::Risk(e.to_string()))?;
        let cfg = EngineConfig {
            strategy: crate::engine::StrategyConfig { mode, ..config.strategy.clone() },
            symbols: config.market.symbols.clone(),
            features: config.features.clone(),
            initial_cash: env.initial_cash,
            exec: env.exec,
            max_order_notional: config.risk.max_order_notional,
            reconcile_every: 0,
        };
        let risk = EngineRisk {
            checks,
            clock: Box::new(clock.clone()),
            timeframe: config.market.timeframe,
            assets: Default::default(),
        };
        let engine = Engine::new(cfg, account, oms, models.0, models.1)
            .map_err(|e| SessionError::Engine(e.to_string()))?
            .with_risk(risk);
        Ok(SimSession {
            engine,
            clock,
            sim: SimBroker::new(initial_cash(config), env.exec),
            activity: Activity::default(),
            record_from: first_traded_bar(config, mode),
            curve: Vec::new(),
            refusals: BTreeMap::new(),
            fresh_refusals: Vec::new(),
        })
    }

    /// Bar `d` of `bars` (one aligned vector per symbol, the config's order): the clock moves to it, the
    /// orders of bar `d-1` fill at its closes, and the broker's view reaches the engine. Records the
    /// account from the first tradable bar on, beside `buy_hold` (its equity at this bar). Returns the
    /// broker's answer to each order (for metrics).
    pub fn fill(&mut self, bars: &[Vec<Bar>], d: usize, buy_hold: f64) -> Result<Vec<OrderStatus>, SimRunError> {
        let days = bars.first().map_or(0, |b| b.len());
        let t = bars[0][d].t;
        for b in bars {
            if b.len() != days || b[d].t != t {
                let got = b.get(d).map_or(t, |x| x.t);
                let (symbol, first) = (b[0].symbol.clone(), bars[0][0].symbol.clone());
                return Err(SimRunError::Misaligned { day: d, symbol, got, first, want: t });
            }
        }
        self.clock.set(t);
        let prices: Vec<(Symbol, f64)> = bars.iter().map(|b| (b[d].symbol.clone(), f64::from(b[d].c as f32))).collect();
        let snap = fill_pending(&mut self.sim, &prices, t, &mut self.activity)?;
        let statuses = snap.orders.iter().map(|o| o.status).collect();
        deliver(&mut self.engine, snap, t);
        if d >= self.record_from {
            let (equity, cash) = (self.sim.equity(), self.sim.cash());
            if equity > 0.0 {
                self.activity.exposure_sum += (equity - cash) / equity;
            }
            self.curve.push(EquityPoint {
                t,
                equity,
                cash,
                buy_hold,
                trades: self.activity.trades,
                fees: self.activity.fees,
            });
        }
        Ok(statuses)
    }

    /// Bar `d` of one symbol through the engine; its orders wait for the next bar. Returns how many.
    pub fn decide(&mut self, bar: &Bar) -> usize {
        let cmds = self.engine.process(Event::Bar(bar.clone()));
        for (_, code) in self.engine.take_refusals() {
            *self.refusals.entry(code).or_default() += 1;
            self.fresh_refusals.push(code);
        }
        self.submit(cmds)
    }

    /// Orders risk refused since the session began, by reason code.
    pub fn refusals(&self) -> &BTreeMap<&'static str, usize> {
        &self.refusals
    }

    /// The refusals since the last call (for the daemon's metrics).
    pub fn take_fresh_refusals(&mut self) -> Vec<&'static str> {
        std::mem::take(&mut self.fresh_refusals)
    }

    /// Orders among `cmds` go to the simulated broker for the next bar. Returns how many.
    pub fn submit(&mut self, cmds: Vec<Command>) -> usize {
        let before = self.sim.pending();
        for c in cmds {
            if let Command::Submit(o) = c {
                self.sim.queue(o);
            }
        }
        self.sim.pending() - before
    }

    /// Buy-and-hold's equity at bar `d`, from its curve `bh` (which starts at the first tradable bar).
    /// Before that bar: its first value (flat).
    pub fn buy_hold_at(&self, bh: &[f64], d: usize) -> f64 {
        bh.get(d.saturating_sub(self.record_from)).copied().unwrap_or(f64::NAN)
    }

    /// Every bar of `bars` through `fill` and `decide`; `bh` is buy-and-hold's curve from the first
    /// tradable bar on.
    pub fn run(&mut self, bars: &[Vec<Bar>], bh: &[f64]) -> Result<(), SimRunError> {
        let days = bars.first().map_or(0, |b| b.len());
        for d in 0..days {
            let b = self.buy_hold_at(bh, d);
            self.fill(bars, d, b)?;
            for b in bars {
                self.decide(&b[d]);
            }
        }
        Ok(())
    }

    pub fn engine(&self) -> &Engine {
        &self.engine
    }

    pub fn engine_mut(&mut self) -> &mut Engine {
        &mut self.engine
    }

    pub fn clock(&self) -> &ManualClock {
        &self.clock
    }

    /// The simulated account's equity and cash now.
    pub fn account(&self) -> (f64, f64) {
        (self.sim.equity(), self.sim.cash())
    }

    pub fn activity(&self) -> Activity {
        self.activity
    }

    pub fn curve(&self) -> &[EquityPoint] {
        &self.curve
    }

    /// The recorded curve as (time, equity), for `metrics`.
    pub fn equity_curve(&self) -> Vec<(DateTime<Utc>, f64)> {
        self.curve.iter().map(|p| (p.t, p.equity)).collect()
    }

    pub fn into_curve(self) -> Vec<EquityPoint> {
        self.curve
    }

    /// The first bar recorded (the first the engine can trade on).
    pub fn record_from(&self) -> usize {
        self.record_from
    }
}
