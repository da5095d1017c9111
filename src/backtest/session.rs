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
#[cfg(test)]
use super::sim::SimRun;
use super::sim::{SimRunError, SimVenue, moments};
use crate::broker::SimBroker;
use crate::config::Config;
use crate::domain::Bar;
use crate::engine::drive::{self, Flow, Hooks, Moment};
use crate::engine::{Command, Engine, EngineConfig, EngineRisk, ManualClock, StrategyMode};
use crate::oms::{Oms, OmsConfig};
use crate::risk::RiskChecks;
use crate::store::Store;
use chrono::{DateTime, Utc};
use rust_decimal::prelude::ToPrimitive;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

pub(crate) use crate::engine::Models;

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
pub(crate) enum SessionError {
    #[error("opening the risk checks: {0}")]
    Risk(String),
    #[error("opening the order manager: {0}")]
    Oms(String),
    #[error("building the engine: {0}")]
    Engine(String),
}

/// The simulated account's starting cash: `broker.initial_cash` (what the replay's SimBroker starts
/// with), else `env.initial_cash`.
pub(crate) fn initial_cash(config: &Config) -> f64 {
    config.broker.initial_cash.to_f64().filter(|c| *c > 0.0).unwrap_or(config.env.initial_cash)
}

/// The index of the first bar the engine can trade on with strategy `mode`: its features need `warmup`
/// bars, and an LSTM (`lstm`, `ensemble`) full fast and slow windows (`windows::first_ready_bar`).
pub(crate) fn first_traded_bar(config: &Config, mode: StrategyMode) -> usize {
    let features = config.features.warmup().saturating_sub(1);
    match mode {
        StrategyMode::Lstm | StrategyMode::Ensemble => {
            features.max(crate::features::windows::first_ready_bar(&config.features, &config.lstm.window_spec()))
        }
        StrategyMode::Ppo | StrategyMode::Scripted => features,
    }
}

pub(crate) struct SimSession {
    engine: Engine,
    clock: ManualClock,
    sim: SimBroker,
    /// The fills' activity (the exposure is the recorder's).
    fills: Activity,
    rec: Recorder,
}

/// What a session records as the loop runs: the curve from the first tradable bar, the exposure, the
/// refusals.
struct Recorder {
    record_from: usize,
    curve: Vec<EquityPoint>,
    exposure_sum: f64,
    refusals: BTreeMap<&'static str, usize>,
}

/// What the owner of a session sees of its loop (`engine::drive::Hooks`), and each order risk refused.
pub(crate) trait SessionHooks<'a>: Hooks<Engine, SimVenue<'a>> {
    fn refused(&mut self, _code: &'static str) {}
}

impl SessionHooks<'_> for () {}

/// The recorder's hooks, then the owner's.
struct Recording<'r, H> {
    rec: &'r mut Recorder,
    buy_hold: &'r [f64],
    owner: &'r mut H,
}

impl<'a, H: SessionHooks<'a>> Hooks<Engine, SimVenue<'a>> for Recording<'_, H> {
    fn on_close(&mut self, core: &mut Engine, venue: &SimVenue<'a>, m: &Moment) {
        let rec = &mut *self.rec;
        if m.index >= rec.record_from {
            let (equity, cash) = (venue.sim.equity(), venue.sim.cash());
            if equity > 0.0 {
                rec.exposure_sum += (equity - cash) / equity;
            }
            let buy_hold = buy_hold_at(self.buy_hold, rec.record_from, m.index);
            let (trades, fees) = (venue.activity.trades, venue.activity.fees);
            rec.curve.push(EquityPoint { t: m.t, equity, cash, buy_hold, trades, fees });
        }
        self.owner.on_close(core, venue, m);
    }

    fn on_bar(&mut self, core: &mut Engine, bar: &Bar, orders: usize, took: std::time::Duration) {
        for (_, code) in core.take_refusals() {
            *self.rec.refusals.entry(code).or_default() += 1;
            self.owner.refused(code);
        }
        self.owner.on_bar(core, bar, orders, took);
    }

    fn after_moment(&mut self, core: &mut Engine, venue: &SimVenue<'a>, m: &Moment) -> (Vec<Command>, Flow) {
        self.owner.after_moment(core, venue, m)
    }
}

/// Buy-and-hold's equity at bar `d`, from its curve `bh` (which starts at bar `from`). Before that bar:
/// not a number (nothing is recorded there).
fn buy_hold_at(bh: &[f64], from: usize, d: usize) -> f64 {
    bh.get(d.saturating_sub(from)).copied().unwrap_or(f64::NAN)
}

impl SimSession {
    /// The engine (strategy `mode`, the config's features, limits and execution rule) on a fresh account
    /// in `account` (its OMS, kill switch and decisions), the clock at `first_bar`.
    pub(crate) fn open(
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
        let cfg = EngineConfig::from_config(config, mode, 0);
        let risk = EngineRisk { checks, timeframe: config.market.timeframe, assets: Default::default() };
        let engine = Engine::new(cfg, account, oms, models, Box::new(clock.clone()))
            .map_err(|e| SessionError::Engine(e.to_string()))?
            .with_risk(risk);
        let sim = SimBroker::new(initial_cash(config), env.exec);
        Ok(SimSession::with(engine, clock, sim, first_traded_bar(config, mode)))
    }

    /// A session over a built `engine` (on `clock`) and broker, recording from bar `record_from`.
    fn with(engine: Engine, clock: ManualClock, sim: SimBroker, record_from: usize) -> SimSession {
        let rec = Recorder { record_from, curve: Vec::new(), exposure_sum: 0.0, refusals: BTreeMap::new() };
        SimSession { engine, clock, sim, fills: Activity::default(), rec }
    }

    /// Every bar of `bars` (one aligned vector per symbol, the config's order) through the one run loop
    /// (`engine::drive::run`) with the simulated broker: at each bar the orders of the bar before fill at its
    /// closes and the broker's view reaches the engine, the account is recorded from the first tradable
    /// bar on beside `buy_hold` (buy-and-hold's curve from that bar), then the bars go through the engine.
    /// `hooks` see every step and have their turn between bars. Returns `Flow::Stop` when they stopped it.
    pub(crate) fn drive<'s, H: SessionHooks<'s>>(
        &'s mut self,
        bars: &[Vec<Bar>],
        buy_hold: &[f64],
        hooks: &mut H,
    ) -> Result<Flow, SimRunError> {
        let mut venue = SimVenue { sim: &mut self.sim, activity: &mut self.fills, statuses: Vec::new() };
        let mut recording = Recording { rec: &mut self.rec, buy_hold, owner: hooks };
        drive::run(&mut self.engine, &self.clock, &mut venue, moments(bars), &mut recording)
    }

    /// Orders risk refused since the session began, by reason code.
    pub(crate) fn refusals(&self) -> &BTreeMap<&'static str, usize> {
        &self.rec.refusals
    }

    /// `cmds` (the core's answer to the owner's control calls) to the simulated broker, through the run
    /// loop's command handling. Returns how many orders it took.
    pub(crate) fn submit(&mut self, cmds: Vec<Command>) -> usize {
        let mut venue = SimVenue { sim: &mut self.sim, activity: &mut self.fills, statuses: Vec::new() };
        drive::dispatch(&mut self.engine, cmds, &mut venue)
    }

    /// Every bar of `bars` through the loop (`drive`), with no hooks of the owner's; `bh` is
    /// buy-and-hold's curve from the first tradable bar on.
    pub(crate) fn run(&mut self, bars: &[Vec<Bar>], bh: &[f64]) -> Result<(), SimRunError> {
        self.drive(bars, bh, &mut ()).map(|_| ())
    }

    pub(crate) fn engine(&self) -> &Engine {
        &self.engine
    }

    pub(crate) fn engine_mut(&mut self) -> &mut Engine {
        &mut self.engine
    }

    pub(crate) fn clock(&self) -> &ManualClock {
        &self.clock
    }

    /// The simulated account's equity and cash now.
    pub(crate) fn account(&self) -> (f64, f64) {
        (self.sim.equity(), self.sim.cash())
    }

    /// The fills' activity, and the exposure summed over the recorded bars.
    pub(crate) fn activity(&self) -> Activity {
        Activity { exposure_sum: self.rec.exposure_sum, ..self.fills }
    }

    pub(crate) fn curve(&self) -> &[EquityPoint] {
        &self.rec.curve
    }

    /// The recorded curve as (time, equity), for `metrics`.
    pub(crate) fn equity_curve(&self) -> Vec<(DateTime<Utc>, f64)> {
        self.rec.curve.iter().map(|p| (p.t, p.equity)).collect()
    }

    /// The first bar recorded (the first the engine can trade on).
    pub(crate) fn record_from(&self) -> usize {
        self.rec.record_from
    }
}

/// `engine` (built on `clock`) over `bars` with the simulated broker `sim`, through the same loop as every
/// session, recording the curve from bar `start` on (the env parity check builds its own engine).
#[cfg(test)]
pub(crate) fn simulate(
    engine: Engine,
    clock: &ManualClock,
    sim: SimBroker,
    bars: &[Vec<Bar>],
    start: usize,
) -> Result<(SimRun, Engine), SimRunError> {
    let mut session = SimSession::with(engine, clock.clone(), sim, start);
    session.run(bars, &[])?;
    let curve = session.rec.curve.iter().map(|p| (p.t, p.equity)).collect();
    Ok((SimRun { curve, activity: session.activity() }, session.engine))
}
