//! The environment's settings (`[env]`, or built by hand for tests and benchmarks) and what can be wrong
//! with them.

use super::reward::Reward;
use super::weights::ActionSpace;
use crate::exec::ExecParams;

/// How cash is computed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Accounting {
    /// f64 cash, the rule in `exec` (stops, cooldown, slippage, cap after fees).
    #[default]
    Standard,
    /// FinRL 0.3.7's numpy env, its float32/float64 mix included (see `finrl`); for the parity test and
    /// for comparing with FinRL on the same work. Ignores slippage, stops and cooldown.
    FinrlNumpy,
}

/// Environment settings; built from config (`[env]`), or by hand for tests and benchmarks.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct EnvConfig {
    pub n_envs: usize,
    /// Steps per episode; the start day is drawn so that the episode fits the panel.
    pub episode_len: usize,
    pub initial_cash: f64,
    pub exec: ExecParams,
    /// Reward (`Reward::Equity`) = reward_scale * (equity change - turnover_penalty * traded notional);
    /// the other rewards, see `reward`.
    pub reward_scale: f64,
    pub turnover_penalty: f64,
    /// What an action asks for: share counts (FinRL's) or target weights with a no-trade band.
    pub action: ActionSpace,
    pub reward: Reward,
    /// Sell everything and buy nothing on days whose turbulence exceeds this (needs panel turbulence).
    pub turbulence_threshold: Option<f64>,
    /// Start every episode at day 0 instead of a random day.
    pub fixed_start: bool,
    pub seed: u64,
    pub accounting: Accounting,
}

impl Default for EnvConfig {
    fn default() -> Self {
        EnvConfig {
            n_envs: 1,
            episode_len: 252,
            initial_cash: 100_000.0,
            exec: ExecParams::default(),
            reward_scale: 1e-4,
            turnover_penalty: 0.0,
            action: ActionSpace::Shares,
            reward: Reward::Equity,
            turbulence_threshold: None,
            fixed_start: false,
            seed: 0,
            accounting: Accounting::Standard,
        }
    }
}

#[derive(Debug, thiserror::Error, PartialEq)]
pub enum EnvError {
    #[error("episode_len = {len}: the panel has {days} days, so at most {} steps fit", days - 1)]
    EpisodeTooLong { len: usize, days: usize },
    #[error("n_envs = 0: need at least one env")]
    NoEnvs,
    #[error("actions has {got} values, expected n_envs x n_assets = {want}")]
    ActionShape { got: usize, want: usize },
    #[error("{0}")]
    Unsupported(&'static str),
    #[error(
        "env.reward = vs-benchmark with benchmark {symbol}: the panel has no prices of {symbol}; add its bars or use benchmark = \"equal-weight\""
    )]
    NoBenchmark { symbol: String },
}
