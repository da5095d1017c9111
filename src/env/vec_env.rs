//! `VecEnv`: E accounts trading the same A assets, stepped together on the CPU in plain Rust. State lives
//! in flat arrays indexed `env * A + asset`; the panel is shared. Episodes have a fixed length and start at
//! a random day (seeded); a finished env resets itself within the same `step`.
//!
//! Timing (as FinRL's): the observation is taken at day `t`; `step` moves to `t + 1`, trades at that day's
//! prices and rewards the change in equity marked at them.

use super::exec::{ExecParams, Position, buy_phase, liquidate, sell_phase};
use super::finrl::{self, Kind, Np};
use super::panel::Panel;
use super::rng::SplitMix64;
use std::sync::Arc;

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
    /// Reward = reward_scale * (equity change - turnover_penalty * traded notional).
    pub reward_scale: f64,
    pub turnover_penalty: f64,
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
}

/// What one `step` returns, per env.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Step {
    pub reward: Vec<f32>,
    /// The env finished its episode on this step (and has already been reset).
    pub done: Vec<bool>,
    /// Equity at the end of the finished step (before any reset).
    pub equity: Vec<f64>,
}

pub struct VecEnv {
    cfg: EnvConfig,
    panel: Arc<Panel>,
    rng: SplitMix64,
    cash: Vec<f64>,
    cash_kind: Vec<Kind>,
    pos: Vec<Position>,
    day: Vec<usize>,
    steps: Vec<usize>,
    equity: Vec<f64>,
    /// Reused by the FinRL accounting's float32 sums.
    scratch: Vec<f32>,
}

impl VecEnv {
    pub fn new(cfg: EnvConfig, panel: Arc<Panel>) -> Result<Self, EnvError> {
        if cfg.n_envs == 0 {
            return Err(EnvError::NoEnvs);
        }
        if cfg.episode_len == 0 || cfg.episode_len >= panel.n_days {
            return Err(EnvError::EpisodeTooLong { len: cfg.episode_len, days: panel.n_days });
        }
        let (e, a) = (cfg.n_envs, panel.n_assets);
        let mut env = VecEnv {
            rng: SplitMix64::new(cfg.seed),
            cash: vec![0.0; e],
            cash_kind: vec![Kind::Weak; e],
            pos: vec![Position::default(); e * a],
            day: vec![0; e],
            steps: vec![0; e],
            equity: vec![0.0; e],
            scratch: Vec::with_capacity(a),
            cfg,
            panel,
        };
        for i in 0..e {
            env.reset_env(i);
        }
        Ok(env)
    }

    pub fn n_envs(&self) -> usize {
        self.cfg.n_envs
    }

    pub fn n_assets(&self) -> usize {
        self.panel.n_assets
    }

    pub fn cash(&self) -> &[f64] {
        &self.cash
    }

    pub fn positions(&self) -> &[Position] {
        &self.pos
    }

    pub fn days(&self) -> &[usize] {
        &self.day
    }

    pub fn equity(&self) -> &[f64] {
        &self.equity
    }

    fn reset_env(&mut self, i: usize) {
        let a = self.panel.n_assets;
        let span = self.panel.n_days - self.cfg.episode_len;
        self.day[i] = if self.cfg.fixed_start { 0 } else { self.rng.below(span) };
        self.steps[i] = 0;
        self.cash[i] = self.cfg.initial_cash;
        self.cash_kind[i] = Kind::Weak;
        self.pos[i * a..(i + 1) * a].fill(Position::default());
        self.equity[i] = self.cfg.initial_cash;
    }

    /// Observation width per env: cash, then per asset (holding value, features).
    pub fn obs_dim(&self) -> usize {
        1 + self.panel.n_assets * (1 + self.panel.n_features)
    }

    /// Writes every env's observation at its current day, scaled by the initial cash.
    pub fn observe(&self, out: &mut [f32]) {
        let (a, f, d) = (self.panel.n_assets, self.panel.n_features, self.obs_dim());
        for (i, o) in out.chunks_exact_mut(d).take(self.cfg.n_envs).enumerate() {
            let day = self.day[i];
            o[0] = (self.cash[i] / self.cfg.initial_cash) as f32;
            for k in 0..a {
                let value = self.pos[i * a + k].holding * f64::from(self.panel.price(day, k));
                let base = 1 + k * (1 + f);
                o[base] = (value / self.cfg.initial_cash) as f32;
                let src = (day * a + k) * f;
                o[base + 1..base + 1 + f].copy_from_slice(&self.panel.features[src..src + f]);
            }
        }
    }

    /// Steps every env with `actions` (`n_envs x n_assets`, each in [-1, 1]; NaN counts as 0).
    pub fn step(&mut self, actions: &[f32], out: &mut Step) -> Result<(), EnvError> {
        let (e, a) = (self.cfg.n_envs, self.panel.n_assets);
        if actions.len() != e * a {
            return Err(EnvError::ActionShape { got: actions.len(), want: e * a });
        }
        out.reward.resize(e, 0.0);
        out.done.resize(e, false);
        out.equity.resize(e, 0.0);
        for i in 0..e {
            let (reward, equity) = self.step_env(i, &actions[i * a..(i + 1) * a]);
            out.reward[i] = reward;
            out.equity[i] = equity;
            out.done[i] = self.steps[i] == self.cfg.episode_len;
            if out.done[i] {
                self.reset_env(i);
            }
        }
        Ok(())
    }

    /// One env, one step: stops and sells for every asset, then buys; returns (reward, equity).
    fn step_env(&mut self, i: usize, actions: &[f32]) -> (f32, f64) {
        let a = self.panel.n_assets;
        self.day[i] += 1;
        self.steps[i] += 1;
        let day = self.day[i];
        let prices = &self.panel.prices[day * a..(day + 1) * a];
        let pos = &mut self.pos[i * a..(i + 1) * a];
        let cash = &mut self.cash[i];
        let p = &self.cfg.exec;
        let act = |k: usize| if actions[k].is_nan() { 0.0 } else { f64::from(actions[k]) };
        let turbulent = match (&self.panel.turbulence, self.cfg.turbulence_threshold) {
            (Some(t), Some(th)) => t[day] > th,
            _ => false,
        };
        let (equity, turnover) = if self.cfg.accounting == Accounting::FinrlNumpy {
            let mut np_cash = Np::new(*cash, self.cash_kind[i]);
            let total = finrl::step(p, pos, &mut np_cash, prices, actions, turbulent, &mut self.scratch);
            (*cash, self.cash_kind[i]) = (np_cash.v, np_cash.kind);
            (total.v, 0.0)
        } else {
            let mut turnover = 0.0;
            if turbulent {
                for k in 0..a {
                    turnover += liquidate(p, &mut pos[k], cash, f64::from(prices[k])).notional;
                }
            } else {
                for k in 0..a {
                    turnover += sell_phase(p, &mut pos[k], cash, f64::from(prices[k]), act(k)).notional;
                }
                for k in 0..a {
                    turnover += buy_phase(p, &mut pos[k], cash, f64::from(prices[k]), act(k)).notional;
                }
            }
            let mut equity = *cash;
            for k in 0..a {
                equity += pos[k].holding * f64::from(prices[k]);
            }
            (equity, turnover)
        };
        let change = equity - self.equity[i];
        self.equity[i] = equity;
        let reward = self.cfg.reward_scale * (change - self.cfg.turnover_penalty * turnover);
        (reward as f32, equity)
    }
}
