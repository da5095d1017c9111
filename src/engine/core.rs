//! `Engine`: the trading core. Closed bars update the streaming features per symbol; when every
//! configured symbol has its bar for a timestamp, the strategy decides (PPO observation built exactly as
//! `env::VecEnv::observe`, cash from the broker's last snapshot moved by the fills since, holdings from
//! the OMS), orders pass risk and go out through the OMS with deterministic client order ids, sells before
//! buys. Every decision is stored in the `decisions` tree. No order leaves before the OMS has reconciled,
//! while paused, or after shutdown. This file holds the state, the bars and the decision (`config` holds
//! what an engine is built from, `record` the stored decision); `orders` takes a wanted trade to the OMS,
//! `events` answers every other event (`Core::process`), `account` holds the cash and working-order
//! arithmetic.

use super::Command;
use super::config::{EngineConfig, EngineError, EngineRisk};
use super::record::DecisionRecord;
use super::strategy::{Cutoffs, ProbSource, StrategyMode, Want, from_action, from_probs, from_weights, vetoed};
use crate::domain::{Bar, Side, Symbol};
use crate::features::FeatureState;
use crate::models::ModelKind;
use crate::oms::Oms;
use crate::policy::PpoPolicy;
use crate::risk::{Holding, RiskChecks};
use crate::store::{Store, TreeName, TypedTree};
use chrono::{DateTime, Utc};
use rust_decimal::Decimal;
use rust_decimal::prelude::ToPrimitive;
use std::collections::BTreeMap;

/// The trading core: `process(Event) -> Vec<Command>`, the same for live, paper, replay and backtest. It holds the
/// features, the models, the OMS and the risk checks, and stores every decision.
pub struct Engine {
    pub(super) cfg: EngineConfig,
    pub(super) oms: Oms,
    pub(super) policy: Option<PpoPolicy>,
    pub(super) probs: Option<Box<dyn ProbSource>>,
    pub(super) states: Vec<FeatureState>,
    pub(super) rows: Vec<Vec<f32>>,
    pub(super) ready: Vec<bool>,
    pub(super) last: Vec<Option<Bar>>,
    pub(super) obs: Vec<f32>,
    pub(super) actions: Vec<f32>,
    pub(super) cash: f64,
    /// The broker's equity beyond cash and the configured symbols' positions at their last closes, as of
    /// the last snapshot: holdings outside the configured symbols (0 when there are none).
    pub(super) outside_value: f64,
    pub(super) decisions: TypedTree<DecisionRecord>,
    /// The account's store: each event's critical writes are one group commit (`Store::group`).
    pub(super) store: Store,
    pub(super) paused: bool,
    pub(super) halted: bool,
    pub(super) ticks: u64,
    pub(super) risk: Option<EngineRisk>,
    pub(super) refusals: Vec<(Symbol, &'static str)>,
    /// Symbols paused after a price gap that looks like a split (see `PRICE_GAP`), until `Resume`.
    pub(super) gapped: Vec<bool>,
    /// Whether price gaps pause a symbol (live bars; stored bars are split-adjusted and may hold real
    /// crashes, which backtests must trade through as the env does).
    pub(super) gap_guard: bool,
    /// Bars carried at the last close per symbol since its last own bar (`Event::NoBar`); a stale symbol
    /// is never traded.
    pub(super) stale: Vec<u32>,
    /// Past this many carried bars a symbol is reported down (`market.max_stale_bars`).
    pub(super) max_stale_bars: u32,
    /// Whether "no model yet" was logged (once, until a model arrives).
    pub(super) said_no_model: bool,
    /// The last minute bar per symbol between two bars of the timeframe (`Event::Mark`, live).
    pub(super) marks: Vec<Option<Bar>>,
    /// Protective sells waiting for the cancel of our working buy of their symbol (`protect`).
    pub(super) pending: BTreeMap<Symbol, (crate::domain::OrderWhy, DateTime<Utc>)>,
    pub(super) kill_retry: super::protect_state::KillRetry,
    pub(super) flatten_outcome: Option<super::protect_state::FlattenOutcome>,
    pub(super) protect_failures: super::protect_state::ProtectFailures,
    /// Whether each new fill is logged at INFO (the audit trail of a live run).
    pub(super) audit: bool,
    /// The engine's time, given when it is built: the wall clock live, the bar clock (moved by the
    /// session's loop) in replays, backtests and tests. There is no other source of "now".
    pub(super) clock: Box<dyn super::EngineClock>,
}

/// A bar opening below 0.55 or above 1.8 times the previous close: almost always a split, a reverse split
/// or a bad price, not a market move. Trading on it (a stop firing on a 2:1 split's "-50%") would lose
/// money for nothing, so the symbol is paused and the log says why.
pub(super) const PRICE_GAP: (f64, f64) = (0.55, 1.8);

impl Engine {
    /// The engine on its account `store` and `oms`, with its models and its `clock` (the only time it
    /// reads: the wall clock live, a `ManualClock` the session moves bar by bar elsewhere).
    pub fn new(
        cfg: EngineConfig,
        store: &Store,
        oms: Oms,
        (policy, probs): super::Models,
        clock: Box<dyn super::EngineClock>,
    ) -> Result<Engine, EngineError> {
        let mode = cfg.strategy.mode;
        if mode == StrategyMode::Scripted {
            return Err(EngineError::Missing {
                mode,
                what: "a model strategy (ppo, lstm or ensemble); scripted is the live runner's order-path harness",
            });
        }
        let (a, f) = (cfg.symbols.len(), cfg.features.n_cols());
        Ok(Engine {
            states: (0..a).map(|_| FeatureState::new(cfg.features.clone())).collect(),
            rows: vec![vec![0.0; f]; a],
            ready: vec![false; a],
            last: vec![None; a],
            obs: vec![0.0; 1 + a * (1 + f)],
            actions: vec![0.0; a],
            cash: cfg.initial_cash,
            outside_value: 0.0,
            decisions: store.tree(TreeName::Decisions)?,
            store: store.clone(),
            paused: false,
            halted: false,
            ticks: 0,
            risk: None,
            refusals: Vec::new(),
            gapped: vec![false; a],
            gap_guard: false,
            stale: vec![0; a],
            max_stale_bars: 3,
            said_no_model: false,
            marks: vec![None; a],
            pending: BTreeMap::new(),
            kill_retry: Default::default(),
            flatten_outcome: None,
            protect_failures: Default::default(),
            audit: false,
            clock,
            cfg,
            oms,
            policy,
            probs,
        })
    }

    /// Every order from here on passes the full risk checks, and each complete bar's equity goes to the
    /// daily loss limit (kill switch).
    pub fn with_risk(mut self, risk: EngineRisk) -> Self {
        self.risk = Some(risk);
        self
    }

    /// Live bars: a price gap the size of a split pauses its symbol (`PRICE_GAP`) until `Resume`.
    pub fn with_gap_guard(mut self) -> Self {
        self.gap_guard = true;
        self
    }

    /// Live: every new fill is logged at INFO (quantity, price, the fee counted), the audit trail beside
    /// the runner's line per order sent.
    pub fn with_audit(mut self) -> Self {
        self.audit = true;
        self
    }

    /// The order manager: orders, fills and positions as the engine knows them.
    pub fn oms(&self) -> &Oms {
        &self.oms
    }

    /// The full risk checks (`None`: only the order notional is checked, as in backtests).
    pub fn risk(&self) -> Option<&RiskChecks> {
        self.risk.as_ref().map(|r| &r.checks)
    }

    /// The full risk checks, to trip or clear the kill switch (`None`: there are none).
    pub fn risk_mut(&mut self) -> Option<&mut RiskChecks> {
        self.risk.as_mut().map(|r| &mut r.checks)
    }

    /// Orders refused by risk since the last call: (symbol, stable reason code).
    pub fn take_refusals(&mut self) -> Vec<(Symbol, &'static str)> {
        std::mem::take(&mut self.refusals)
    }

    /// Whether a person (or a flatten) paused trading: no new orders until `Resume`.
    pub fn is_paused(&self) -> bool {
        self.paused
    }

    /// The kind of model the strategy needs and lacks ("PPO", "LSTM"): the engine trades nothing until
    /// it gets one (`set_policy`, `set_probs`).
    pub fn missing_model(&self) -> Option<&'static str> {
        let mode = self.cfg.strategy.mode;
        if mode.uses(ModelKind::Ppo) && self.policy.is_none() {
            Some("PPO")
        } else if mode.uses(ModelKind::Lstm) && self.probs.is_none() {
            Some("LSTM")
        } else {
            None
        }
    }

    /// The PPO model in use.
    pub fn policy_id(&self) -> Option<&str> {
        self.policy.as_ref().map(|p| p.id())
    }

    /// The LSTM probability source in use.
    pub fn probs_id(&self) -> Option<String> {
        self.probs.as_ref().map(|p| p.model_id())
    }

    /// Hot swap between two bars: the next decision uses `policy`. The caller loaded and checked it
    /// (`PpoPolicy::load` refuses a mismatched manifest), so a failed load never reaches here.
    pub fn set_policy(&mut self, policy: PpoPolicy) {
        log::info!("engine: PPO model {} → {}", self.policy_id().unwrap_or("none"), policy.id());
        self.policy = Some(policy);
        self.said_no_model = false;
    }

    /// The LSTM probability source for an engine that had none (one that has a source swaps its model
    /// with `ProbSource::set_lstm`, keeping the windows).
    pub fn set_probs(&mut self, probs: Box<dyn ProbSource>) {
        log::info!("engine: LSTM model none → {}", probs.model_id());
        self.probs = Some(probs);
        self.said_no_model = false;
    }

    /// The LSTM probability source, to swap its model or read its windows (`None`: there is none).
    pub fn probs_mut(&mut self) -> Option<&mut (dyn ProbSource + 'static)> {
        self.probs.as_deref_mut()
    }

    /// The freshest price of each symbol (0 before its first bar), in the configured order: its last
    /// bar's close, or a later minute's (`Event::Mark`, live on a longer timeframe).
    pub fn last_closes(&self) -> Vec<(Symbol, f64)> {
        self.cfg.symbols.iter().enumerate().map(|(k, s)| (s.clone(), self.fresh_price(k))).collect()
    }

    /// Cash plus every configured symbol's position at its freshest price, plus what the broker's last
    /// snapshot valued the holdings outside the configured symbols at.
    pub fn equity(&self) -> f64 {
        self.cash + self.configured_value() + self.outside_value
    }

    pub(super) fn configured_value(&self) -> f64 {
        self.last_closes().iter().map(|(s, c)| self.oms.position(s).to_f64().unwrap_or(0.0) * c).sum::<f64>()
    }

    pub(super) fn holdings(&self) -> BTreeMap<Symbol, Holding> {
        self.last_closes()
            .into_iter()
            .filter_map(|(s, price)| {
                let qty = self.oms.position(&s);
                (qty != Decimal::ZERO).then_some((s, Holding { qty, price }))
            })
            .collect()
    }

    /// The observation of the last decision (the PPO policy's input), for `bench infer`'s export.
    pub fn observation(&self) -> &[f32] {
        &self.obs
    }

    /// The PPO policy in use, to run it outside a decision (`bench infer`); `None` before the first model.
    pub fn policy_mut(&mut self) -> Option<&mut PpoPolicy> {
        self.policy.as_mut()
    }

    /// The engine's cash in dollars: the broker's last snapshot's, moved by the fills since.
    pub fn cash(&self) -> f64 {
        self.cash
    }

    /// A stored bar before trading starts: features and LSTM windows only, no decision.
    pub fn warm_up(&mut self, bar: &Bar) {
        let Some(k) = self.index_of(&bar.symbol) else { return };
        self.take_features(k, bar);
        self.last[k] = Some(bar.clone());
    }

    fn index_of(&self, symbol: &Symbol) -> Option<usize> {
        self.cfg.symbols.iter().position(|s| s == symbol)
    }

    /// The symbol's features and LSTM windows take the bar (at warm-up as when trading).
    fn take_features(&mut self, k: usize, bar: &Bar) {
        self.ready[k] = self.states[k].update_into(bar.o, bar.h, bar.l, bar.c, bar.v, &mut self.rows[k]);
        if let Some(p) = self.probs.as_mut() {
            p.on_bar(bar);
        }
    }

    pub(super) fn on_bar(&mut self, bar: Bar) -> Vec<Command> {
        let Some(k) = self.index_of(&bar.symbol) else {
            return Vec::new();
        };
        if let Some(prev) = self.last[k].as_ref().filter(|p| p.t < bar.t).map(|p| p.c) {
            self.check_gap(k, &bar, prev);
        }
        if self.stale[k] > 0 {
            log::info!("engine: {} has bars again after {} carried; trading it again", bar.symbol, self.stale[k]);
            self.stale[k] = 0;
        }
        self.take_features(k, &bar);
        let t = bar.t;
        // The trailing stop (the env's rule): a stop-out sells the holding now, and starts the cooldown.
        let before = self.risk.as_ref().map(|r| r.checks.stops().position(&bar.symbol));
        let stop =
            if self.gapped[k] { None } else { self.risk.as_mut().and_then(|r| r.checks.on_bar(&bar.symbol, bar.c)) };
        self.last[k] = Some(bar);
        let stop_cmds = match stop {
            Some(s) => self.stop_out(s, t, before),
            None => Vec::new(),
        };
        if !stop_cmds.is_empty() {
            return stop_cmds;
        }
        self.decide_if_complete(t)
    }

    /// Decides at `t` once every symbol's last bar (its own or carried) is at `t` and the features are warm.
    pub(super) fn decide_if_complete(&mut self, t: DateTime<Utc>) -> Vec<Command> {
        let complete = self.last.iter().all(|b| b.as_ref().is_some_and(|b| b.t == t));
        if !complete || !self.ready.iter().all(|r| *r) {
            return Vec::new();
        }
        self.decide(t)
    }

    /// The observation of `env::VecEnv::observe`, at the env's f32 prices.
    pub(super) fn observe(&mut self) -> (Vec<f64>, Vec<f64>) {
        let f = self.cfg.features.n_cols();
        let ic = self.cfg.initial_cash;
        self.obs[0] = (self.cash / ic) as f32;
        let (mut holdings, mut closes) = (Vec::new(), Vec::new());
        for (k, sym) in self.cfg.symbols.iter().enumerate() {
            let price = f64::from(self.last[k].as_ref().map_or(0.0, |b| b.c) as f32);
            let holding = self.oms.position(sym).to_f64().unwrap_or(0.0);
            let base = 1 + k * (1 + f);
            self.obs[base] = ((holding * price) / ic) as f32;
            self.obs[base + 1..base + 1 + f].copy_from_slice(&self.rows[k]);
            holdings.push(holding);
            closes.push(price);
        }
        (holdings, closes)
    }

    pub(super) fn decide(&mut self, t: DateTime<Utc>) -> Vec<Command> {
        if self.halted || self.paused {
            return Vec::new();
        }
        if !self.oms.ready() {
            log::info!("engine: bar {t} not traded: the OMS has not reconciled yet");
            return Vec::new();
        }
        let cmds = self.on_equity(t);
        if let Some(what) = self.missing_model() {
            if !self.said_no_model {
                log::warn!(
                    "engine: bar {t} not traded: no {what} model fits this config yet; trading starts when a retrain promotes one"
                );
                self.said_no_model = true;
            }
            return cmds;
        }
        let tripped = self.risk().and_then(|r| r.kill_switch()).map(|k| (k.tripped_at, k.reason.clone()));
        let mut cmds = cmds;
        let (holdings, closes) = self.observe();
        let o = &self.obs;
        let (lo, hi) = o.iter().fold((f32::MAX, f32::MIN), |(l, h), v| (l.min(*v), h.max(*v)));
        let mean = o.iter().map(|v| f64::from(*v)).sum::<f64>() / o.len() as f64;
        let mut rec = DecisionRecord {
            t,
            mode: self.cfg.strategy.mode,
            model_id: self.policy.as_ref().map(|p| p.id().to_string()),
            lstm_model_id: self.probs.as_ref().map(|p| p.model_id()),
            cash: self.cash,
            holdings: holdings.clone(),
            closes: closes.clone(),
            obs_summary: [o.len() as f64, f64::from(lo), f64::from(hi), mean],
            actions: Vec::new(),
            probs: Vec::new(),
            orders: Vec::new(),
            note: None,
        };
        // Tripped: no model call, no order; the bar's decision says why (the record, and the dashboard's
        // prices, go on to the last bar).
        if let Some((at, why)) = tripped {
            log::debug!("engine: bar {t} not traded: the kill switch is tripped ({why})");
            rec.note = Some(format!("not traded: the kill switch tripped at {at} ({why})"));
            self.store_decision(&rec);
            return cmds;
        }
        let wants = match self.wants(&holdings, &mut rec) {
            Ok(w) => w,
            Err(why) => {
                log::error!("engine: no trade at {t}: {why}");
                rec.note = Some(why.to_string());
                self.store_decision(&rec);
                return cmds;
            }
        };
        for side in [Side::Sell, Side::Buy] {
            for (k, w) in wants.iter().enumerate() {
                if let Some(w) = w.filter(|w| w.side == side) {
                    cmds.extend(self.order(k, w, t, closes[k], &mut rec));
                }
            }
        }
        self.store_decision(&rec);
        cmds
    }

    /// The wanted trade per symbol, by mode; `Err` (no trade) on non-finite inputs or a model failure.
    pub(super) fn wants(
        &mut self,
        holdings: &[f64],
        rec: &mut DecisionRecord,
    ) -> Result<Vec<Option<Want>>, NoDecision> {
        if let Some(index) = self.obs.iter().position(|v| !v.is_finite()) {
            return Err(NoDecision::NonFinite { index, value: self.obs[index] });
        }
        let a = self.cfg.symbols.len();
        let mode = self.cfg.strategy.mode;
        if mode.uses(ModelKind::Lstm)
            && let Some(src) = self.probs.as_mut()
        {
            for s in &self.cfg.symbols {
                rec.probs.push(src.probs(s).transpose()?);
            }
        }
        if mode.uses(ModelKind::Ppo)
            && let Some(p) = self.policy.as_mut()
        {
            p.act_into(&self.obs, &mut self.actions)?;
            rec.actions = self.actions.clone();
        }
        let exec = &self.cfg.exec;
        let cut = Cutoffs::resolve(&self.cfg.strategy, self.probs.as_ref().map_or((None, None), |p| p.cutoffs()));
        // The LSTM's target: its share of the equity at this close, in units of each symbol.
        let equity = rec.cash + self.outside_value + holdings.iter().zip(&rec.closes).map(|(h, c)| h * c).sum::<f64>();
        let target = |k: usize| {
            let c = rec.closes[k];
            if c > 0.0 && equity > 0.0 { self.cfg.strategy.lstm_position_pct * equity / c } else { 0.0 }
        };
        // The PPO trades in the model's action space (checked against the config's at load).
        let ppo: Vec<Option<Want>> = match self.policy.as_ref().map(|p| p.action_space()) {
            Some(crate::exec::ActionSpace::Weights { band, max_weight }) if !self.actions.is_empty() => {
                let equity = rec.cash + holdings.iter().zip(&rec.closes).map(|(h, c)| h * c).sum::<f64>();
                from_weights(exec, (band, max_weight), &self.actions, holdings, &rec.closes, equity)
            }
            _ => (0..a).map(|k| from_action(exec, self.actions[k], holdings[k])).collect(),
        };
        Ok((0..a)
            .map(|k| match mode {
                StrategyMode::Ppo => ppo[k],
                StrategyMode::Lstm => rec.probs[k].and_then(|p| from_probs(cut, exec, p, holdings[k], target(k))),
                StrategyMode::Ensemble => ppo[k].filter(|w| !vetoed(&self.cfg.strategy, w, rec.probs[k])),
                StrategyMode::Scripted => None,
            })
            .collect())
    }
}

/// Why a bar's decision trades nothing (logged, and the decision's note).
#[derive(Debug, thiserror::Error)]
pub(super) enum NoDecision {
    /// The observation holds a NaN or an infinity (its index and value): the features or the cash are wrong.
    #[error("observation value {index} is {value}: inputs must be finite")]
    NonFinite {
        /// Its place in the observation.
        index: usize,
        /// What it is.
        value: f32,
    },
    /// The PPO or the LSTM failed on the observation (its message).
    #[error(transparent)]
    Model(#[from] crate::policy::PolicyError),
}
