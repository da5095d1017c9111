//! The environment's settings (`[env]`, or built by hand for tests and benchmarks) and what can be wrong
//! with them.

use super::reward::Reward;
use crate::exec::ActionSpace;
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
    /// How many envs step together (each its own account and episode over the shared panel); at least 1.
    pub n_envs: usize,
    /// Steps per episode; the start day is drawn so that the episode fits the panel.
    pub episode_len: usize,
    /// Each env's cash at the start of an episode, in dollars (also the observation's scale).
    pub initial_cash: f64,
    /// The execution rule: trade size, minimum order, fees, slippage, stops and cooldown.
    pub exec: ExecParams,
    /// Reward (`Reward::Equity`) = reward_scale * (equity change - turnover_penalty * traded notional);
    /// the other rewards, see `reward`.
    pub reward_scale: f64,
    /// `Reward::Equity`'s penalty per dollar of notional traded.
    pub turnover_penalty: f64,
    /// What an action asks for: share counts (FinRL's) or target weights with a no-trade band.
    pub action: ActionSpace,
    /// The training reward (`env.reward`): equity change, vs a benchmark, or differential Sharpe.
    pub reward: Reward,
    /// Sell everything and buy nothing on days whose turbulence exceeds this (needs panel turbulence).
    pub turbulence_threshold: Option<f64>,
    /// Start every episode at day 0 instead of a random day.
    pub fixed_start: bool,
    /// Seeds the episode starts: the same seed gives the same episodes.
    pub seed: u64,
    /// How cash is computed: our f64 rule, or FinRL's NumPy types for the parity test.
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

/// Why an env cannot be built or stepped with these settings.
#[derive(Debug, thiserror::Error, PartialEq)]
pub enum EnvError {
    /// `episode_len` is 0 or leaves no room in the panel (an episode needs `len + 1` days).
    #[error("episode_len = {len}: the panel has {days} days, so at most {} steps fit", days - 1)]
    EpisodeTooLong {
        /// `episode_len` as configured.
        len: usize,
        /// Days (time steps) the panel holds.
        days: usize,
    },
    /// `n_envs` is 0.
    #[error("n_envs = 0: need at least one env")]
    NoEnvs,
    /// `step` was given another number of actions than `n_envs × n_assets`.
    #[error("actions has {got} values, expected n_envs x n_assets = {want}")]
    ActionShape {
        /// Actions given.
        got: usize,
        /// `n_envs × n_assets`.
        want: usize,
    },
    /// Settings this env cannot run, or could not start; the message says which and the fix.
    #[error("{0}")]
    Unsupported(&'static str),
    /// The `vs-benchmark` reward names an index symbol the panel holds no prices of.
    #[error(
        "env.reward = vs-benchmark with benchmark {symbol}: the panel has no prices of {symbol}; add its bars or use benchmark = \"equal-weight\""
    )]
    NoBenchmark {
        /// The benchmark symbol (`env.benchmark`).
        symbol: String,
    },
}
