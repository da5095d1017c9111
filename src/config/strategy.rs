//! The `[strategy]` section: which strategy turns model outputs into trades (`engine::strategy` does the
//! turning), its thresholds and its name in client order ids.

use super::checker::Invalid;
use serde::{Deserialize, Serialize};

/// Which strategy the engine trades with (`strategy.mode`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "lowercase")]
pub enum StrategyMode {
    /// A PPO policy: each symbol's action becomes a buy or a sell of that many units under the execution rule
    /// (long-only).
    #[default]
    Ppo,
    /// The LSTM classifier: long `lstm_position_pct` of equity when P(up) passes `up_threshold`, flat when P(down)
    /// passes `down_threshold`.
    Lstm,
    /// The PPO policy's trades, with buys vetoed when the LSTM's P(down) is at least `veto_down`.
    Ensemble,
    /// Not a strategy: the live runner's order-path harness (buys one unit of each symbol on each bar),
    /// for checking a paper account end to end. Refused in live mode and by the engine, replays and
    /// backtests.
    Scripted,
}

impl StrategyMode {
    /// Whether the strategy trades with a model of `kind` (`ppo` and `ensemble` a PPO policy, `lstm` and
    /// `ensemble` an LSTM classifier).
    pub fn uses(self, kind: crate::models::ModelKind) -> bool {
        use crate::models::ModelKind;
        match kind {
            ModelKind::Ppo => matches!(self, StrategyMode::Ppo | StrategyMode::Ensemble),
            ModelKind::Lstm => matches!(self, StrategyMode::Lstm | StrategyMode::Ensemble),
        }
    }
}

/// The name the config uses (`ppo`, `lstm`, `ensemble`, `scripted`).
impl std::fmt::Display for StrategyMode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            StrategyMode::Ppo => "ppo",
            StrategyMode::Lstm => "lstm",
            StrategyMode::Ensemble => "ensemble",
            StrategyMode::Scripted => "scripted",
        })
    }
}

/// The `[strategy]` section.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct StrategyConfig {
    /// `strategy.mode`: which strategy trades.
    pub mode: StrategyMode,
    /// Name in client order ids (first 8 alphanumerics).
    pub name: String,
    /// LSTM: go long when P(up) is at least this. Unset: the cut-off the model chose on its validation
    /// split (manifest `prob_up_cutoff`), or 0.5 for a model without one.
    pub up_threshold: Option<f32>,
    /// LSTM: go flat when P(down) is at least this. Unset: as `up_threshold`, from `prob_down_cutoff`.
    pub down_threshold: Option<f32>,
    /// Ensemble: a PPO buy is vetoed when P(down) is at least this.
    pub veto_down: f32,
    /// LSTM mode: the position held when long, as a fraction of equity per symbol (within the risk
    /// limits).
    pub lstm_position_pct: f64,
    /// Replaced by `lstm_position_pct`; kept only to name the fix when an old config has it.
    #[serde(default, skip_serializing)]
    pub lstm_qty: Option<f64>,
}

/// The cut-offs used when neither the config nor the model names one.
pub(crate) const DEFAULT_CUTOFF: f32 = 0.5;

impl Default for StrategyConfig {
    fn default() -> Self {
        StrategyConfig {
            mode: StrategyMode::Ppo,
            name: "engine".into(),
            up_threshold: None,
            down_threshold: None,
            veto_down: 0.5,
            lstm_position_pct: 0.25,
            lstm_qty: None,
        }
    }
}

impl StrategyConfig {
    /// Thresholds are probabilities in (0, 1]; the LSTM size is finite and positive; the name is usable
    /// in a client order id.
    pub fn validate(&self) -> Result<(), Invalid> {
        for (k, v) in [
            ("up_threshold", self.up_threshold),
            ("down_threshold", self.down_threshold),
            ("veto_down", Some(self.veto_down)),
        ] {
            if let Some(v) = v
                && !(v > 0.0 && v <= 1.0)
            {
                return Err(Invalid::Value(format!("strategy.{k} = {v}: use a probability in (0, 1], e.g. 0.5")));
            }
        }
        if let Some(q) = self.lstm_qty {
            return Err(Invalid::Value(format!(
                "strategy.lstm_qty = {q}: the LSTM now sizes by notional; replace it with lstm_position_pct (the fraction of equity held per symbol when long, e.g. 0.25)"
            )));
        }
        if !(self.lstm_position_pct.is_finite() && self.lstm_position_pct > 0.0 && self.lstm_position_pct <= 1.0) {
            return Err(Invalid::Value(format!(
                "strategy.lstm_position_pct = {}: use a fraction of equity in (0, 1], e.g. 0.25",
                self.lstm_position_pct
            )));
        }
        if !self.name.chars().any(|c| c.is_ascii_alphanumeric()) {
            return Err(Invalid::Value(format!(
                "strategy.name = {:?}: use letters or digits (it goes into client order ids)",
                self.name
            )));
        }
        Ok(())
    }
}
