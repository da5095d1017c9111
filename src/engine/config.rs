//! What an engine is built from: its configuration, the full risk checks it may take, and why building
//! one can fail.

use super::strategy::{StrategyConfig, StrategyMode};
use crate::domain::{Symbol, Timeframe};
use crate::exec::ExecParams;
use crate::features::FeatureSpec;
use crate::risk::{AssetRules, RiskChecks};
use rust_decimal::Decimal;
use std::collections::HashMap;

/// The models an engine trades with: the PPO policy (`ppo`, `ensemble`) and the LSTM probabilities
/// (`lstm`, `ensemble`); a kind the strategy does not use is `None`.
pub type Models = (Option<crate::policy::PpoPolicy>, Option<Box<dyn super::strategy::ProbSource>>);

/// What the engine needs besides its models.
#[derive(Debug, Clone, PartialEq)]
pub struct EngineConfig {
    /// `[strategy]`: which strategy trades, its thresholds and its name in client order ids.
    pub strategy: StrategyConfig,
    /// The symbols traded, in the order of the policy's observation and actions (`market.symbols`).
    pub symbols: Vec<Symbol>,
    /// The feature set the models were trained on; the streaming features per symbol follow it.
    pub features: FeatureSpec,
    /// The observation's scale (the env's `initial_cash`).
    pub initial_cash: f64,
    /// Sizing: `max_trade`, `min_order`, `integer_units`.
    pub exec: ExecParams,
    /// The largest notional one order may have, in dollars (`risk.max_order_notional`); checked even without the full
    /// risk checks.
    pub max_order_notional: Decimal,
    /// Ask for a reconciliation every this many ticks (0: never).
    pub reconcile_every: u64,
}

impl EngineConfig {
    /// The engine `config` describes, trading strategy `mode`: its symbols, features, the env's cash scale
    /// and execution rule, the order cap; a reconciliation asked for every `reconcile_every` ticks (0: never,
    /// as against the simulated broker). The live driver and the simulated sessions build theirs here.
    pub(crate) fn from_config(config: &crate::config::Config, mode: StrategyMode, reconcile_every: u64) -> Self {
        EngineConfig {
            strategy: StrategyConfig { mode, ..config.strategy.clone() },
            symbols: config.market.symbols.clone(),
            features: config.features.clone(),
            initial_cash: config.env.initial_cash,
            exec: config.env.exec,
            max_order_notional: config.risk.max_order_notional,
            reconcile_every,
        }
    }
}

/// The full risk checks (`risk::RiskChecks`) and what they need from outside the engine: the timeframe
/// and the broker's asset rules (stale bars and market hours are judged on the engine's clock) (symbols absent from the map
/// are assumed tradable, fractionable, no minimum). Without them the engine checks only the order
/// notional, the execution rule of the env (backtests, where parity with the env is the point).
pub struct EngineRisk {
    /// The checks every order passes (limits, kill switch, trailing stops, cooldown).
    pub checks: RiskChecks,
    /// `market.timeframe`: a bar closes at its open plus this, for the stale-data and market-hours checks.
    pub timeframe: Timeframe,
    /// The broker's rules per symbol (tradable, fractionable, minimum order).
    pub assets: HashMap<Symbol, AssetRules>,
}

/// Why an engine could not be built.
#[derive(Debug, thiserror::Error)]
pub enum EngineError {
    /// The configured strategy is not one the engine trades (`scripted`: the live runner's order-path harness).
    #[error("strategy {mode} needs {what}")]
    Missing {
        /// The configured strategy (`strategy.mode`).
        mode: StrategyMode,
        /// What it would take instead.
        what: &'static str,
    },
    /// The store could not be read or written (the decisions tree, the OMS's or risk's state).
    #[error(transparent)]
    Store(#[from] crate::store::StoreError),
}
