//! The record the engine stores for every decision (the `decisions` tree): what it decided on and what it
//! sent.

use super::strategy::StrategyMode;
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

/// One stored decision.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DecisionRecord {
    /// The open time of the bars decided on (UTC).
    pub t: DateTime<Utc>,
    /// The strategy that decided.
    pub mode: StrategyMode,
    /// The PPO model traded with (`None`: none loaded, or the strategy uses none).
    pub model_id: Option<String>,
    /// The LSTM model traded with (`None`: none loaded, or the strategy uses none).
    pub lstm_model_id: Option<String>,
    /// Inputs, summarised: cash, holdings, closes, and the observation's length, min, max and mean.
    pub cash: f64,
    /// Each symbol's position in shares, in the configured order.
    pub holdings: Vec<f64>,
    /// Each symbol's close in dollars, in the configured order.
    pub closes: Vec<f64>,
    /// The observation's [length, min, max, mean].
    pub obs_summary: [f64; 4],
    /// The PPO policy's action per symbol (empty when it did not act).
    pub actions: Vec<f32>,
    /// The LSTM's [P(down), P(flat), P(up)] per symbol (`None` while its windows are not full; empty without an LSTM).
    pub probs: Vec<Option<[f32; 3]>>,
    /// (symbol, side, qty) sent to the OMS.
    pub orders: Vec<(String, String, f64)>,
    /// Why nothing or less was traded: the kill switch, a refusal by risk (symbol, side, reason code), ...
    pub note: Option<String>,
}
