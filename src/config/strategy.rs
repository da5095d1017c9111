//! The `[strategy]` section: which strategy turns model outputs into trades (`engine::strategy` does the
//! turning), its thresholds and its name in client order ids.

use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "lowercase")]
pub enum StrategyMode {
    #[default]
    Ppo,
    Lstm,
    Ensemble,
    /// Not a strategy: the live runner's order-path harness (buys one unit of each symbol on each bar),
    /// for checking a paper account end to end. Refused in live mode and by the engine, replays and
    /// backtests.
    Scripted,
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
    pub mode: StrategyMode,
    /// Name in client order ids (first 8 alphanumerics).
    pub name: String,
    pub up_threshold: f32,
    pub down_threshold: f32,
    /// Ensemble: a PPO buy is vetoed when P(down) is at least this.
    pub veto_down: f32,
    /// LSTM mode: units held when long.
    pub lstm_qty: f64,
}

impl Default for StrategyConfig {
    fn default() -> Self {
        StrategyConfig {
            mode: StrategyMode::Ppo,
            name: "engine".into(),
            up_threshold: 0.5,
            down_threshold: 0.5,
            veto_down: 0.5,
            lstm_qty: 10.0,
        }
    }
}

impl StrategyConfig {
    /// Thresholds are probabilities in (0, 1]; the LSTM size is finite and positive; the name is usable
    /// in a client order id.
    pub fn validate(&self) -> Result<(), String> {
        for (k, v) in [
            ("up_threshold", self.up_threshold),
            ("down_threshold", self.down_threshold),
            ("veto_down", self.veto_down),
        ] {
            if !(v > 0.0 && v <= 1.0) {
                return Err(format!("strategy.{k} = {v}: use a probability in (0, 1], e.g. 0.5"));
            }
        }
        if !(self.lstm_qty.is_finite() && self.lstm_qty > 0.0) {
            return Err(format!("strategy.lstm_qty = {}: use a positive number of units", self.lstm_qty));
        }
        if !self.name.chars().any(|c| c.is_ascii_alphanumeric()) {
            return Err(format!(
                "strategy.name = {:?}: use letters or digits (it goes into client order ids)",
                self.name
            ));
        }
        Ok(())
    }
}
