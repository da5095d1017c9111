//! `VecEnv`: E accounts trading the same A assets, stepped together on the CPU in plain Rust, chunks of
//! envs on all cores (or `with_threads` of them). State lives in flat arrays indexed `env * A + asset`;
//! the panel is shared. Episodes have a fixed length and start at
//! a random day (seeded); a finished env resets itself within the same `step`.
//!
//! Timing (as FinRL's): the observation is taken at day `t`; `step` moves to `t + 1`, trades at that day's
//! prices and rewards the change in equity marked at them.

use super::config::{Accounting, EnvConfig, EnvError};
use super::finrl::Kind;
use super::one_env::EnvMut;
use super::panel::Panel;
use super::reward::{Benchmark, Reward};
use crate::exec::ActionSpace;
use crate::exec::Position;
use std::sync::Arc;

/// What one `step` of the trading env leaves, per env, in host buffers the caller keeps and passes again
/// (`VecEnv`, the env kernel); the observations go to a buffer of their own. `rl::TensorStep` and `rl::HostStep`
/// are a `BatchEnv`'s step, with the observations.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct StepOutcome {
    /// The reward of the step, per env (see `Reward`).
    pub reward: Vec<f32>,
    /// The env finished its episode on this step (and has already been reset).
    pub done: Vec<bool>,
    /// Equity at the end of the finished step (before any reset).
    pub equity: Vec<f64>,
}

/// The vectorized trading environment on the CPU: `n_envs` accounts stepping over one shared panel, observations laid
/// out as the engine builds them.
pub struct VecEnv {
    cfg: EnvConfig,
    panel: Arc<Panel>,
    /// Steps on this pool (`with_threads`), or rayon's global one (all cores) when `None`.
    pool: Option<Arc<rayon::ThreadPool>>,
    cash: Vec<f64>,
    cash_kind: Vec<Kind>,
    pos: Vec<Position>,
    day: Vec<usize>,
    steps: Vec<usize>,
    equity: Vec<f64>,
    /// The differential Sharpe ratio's moving moments (A, B) per env (`Reward::DifferentialSharpe`).
    moments: Vec<[f64; 2]>,
    /// Each env's next draw in the seeded SplitMix64 stream: env `i` makes draws `i`, `i + E`, ... All
    /// envs reset on the same step, so this is the shared stream drawn env by env, computed in parallel.
    draws: Vec<u64>,
}

/// Envs per rayon task (fewer envs than this step on the calling thread).
const CHUNK: usize = 64;

/// A pool of `threads` threads, or `None` (rayon's global pool, one thread per core) for 0.
pub(crate) fn pool(threads: usize) -> Result<Option<Arc<rayon::ThreadPool>>, EnvError> {
    if threads == 0 {
        return Ok(None);
    }
    rayon::ThreadPoolBuilder::new()
        .num_threads(threads)
        .thread_name(|i| format!("env-{i}"))
        .build()
        .map(|p| Some(Arc::new(p)))
        .map_err(|_| EnvError::Unsupported("could not start the env's worker threads"))
}

/// What `VecEnv` refuses of a configuration it could step (the other envs refuse more).
fn check_modes(cfg: &EnvConfig, panel: &Panel) -> Result<(), EnvError> {
    if matches!(cfg.action, ActionSpace::Weights { .. }) && cfg.accounting != Accounting::Standard {
        return Err(EnvError::Unsupported(
            "env.action_space = weights needs env.accounting = standard (FinRL's accounting has share counts only)",
        ));
    }
    if let Reward::VsBenchmark { benchmark: Benchmark::Symbol(s), .. } = &cfg.reward
        && panel.benchmark.is_none()
    {
        return Err(EnvError::NoBenchmark { symbol: s.clone() });
    }
    Ok(())
}

impl VecEnv {
    /// The envs over `panel`, reset to their first episodes; refuses settings that do not fit the panel.
    pub fn new(cfg: EnvConfig, panel: Arc<Panel>) -> Result<Self, EnvError> {
        if cfg.n_envs == 0 {
            return Err(EnvError::NoEnvs);
        }
        check_modes(&cfg, &panel)?;
        if cfg.episode_len == 0 || cfg.episode_len >= panel.n_days {
            return Err(EnvError::EpisodeTooLong { len: cfg.episode_len, days: panel.n_days });
        }
        let (e, a) = (cfg.n_envs, panel.n_assets);
        let mut env = VecEnv {
            pool: None,
            cash: vec![0.0; e],
            cash_kind: vec![Kind::Weak; e],
            pos: vec![Position::default(); e * a],
            day: vec![0; e],
            steps: vec![0; e],
            equity: vec![0.0; e],
            moments: vec![[0.0; 2]; e],
            draws: (0..e as u64).collect(),
            cfg,
            panel,
        };
        let (cfg, n_days) = (env.cfg.clone(), env.panel.n_days);
        for i in 0..e {
            env.env_mut(i).reset(&cfg, n_days);
        }
        Ok(env)
    }

    /// Steps on at most `threads` threads of a pool of its own (0 = rayon's global pool, all cores). The
    /// results do not depend on the thread count: every env is stepped on its own state alone.
    pub fn with_threads(mut self, threads: usize) -> Result<Self, EnvError> {
        self.pool = pool(threads)?;
        Ok(self)
    }

    fn env_mut(&mut self, i: usize) -> EnvMut<'_> {
        let a = self.panel.n_assets;
        EnvMut {
            cash: &mut self.cash[i],
            cash_kind: &mut self.cash_kind[i],
            pos: &mut self.pos[i * a..(i + 1) * a],
            day: &mut self.day[i],
            steps: &mut self.steps[i],
            equity: &mut self.equity[i],
            moments: &mut self.moments[i],
            draws: &mut self.draws[i],
        }
    }

    /// How many envs step together.
    pub fn n_envs(&self) -> usize {
        self.cfg.n_envs
    }

    /// Assets of the panel.
    pub fn n_assets(&self) -> usize {
        self.panel.n_assets
    }

    /// Each env's cash, in dollars.
    pub fn cash(&self) -> &[f64] {
        &self.cash
    }

    /// Each env's position per asset, env-major (`env * n_assets + asset`).
    pub fn positions(&self) -> &[Position] {
        &self.pos
    }

    /// Each env's current day in the panel.
    pub fn days(&self) -> &[usize] {
        &self.day
    }

    /// Each env's equity as of its last step (cash plus positions), in dollars.
    pub fn equity(&self) -> &[f64] {
        &self.equity
    }

    /// Observation width per env: cash, then per asset (holding value, features).
    pub fn obs_dim(&self) -> usize {
        1 + self.panel.n_assets * (1 + self.panel.n_features)
    }

    /// Writes every env's observation at its current day, scaled by the initial cash.
    pub fn observe(&self, out: &mut [f32]) {
        let d = self.obs_dim();
        let rows = out.chunks_exact_mut(d).take(self.cfg.n_envs);
        if self.cfg.n_envs <= CHUNK {
            rows.enumerate().for_each(|(i, o)| self.observe_env(i, o));
            return;
        }
        let go = || {
            use rayon::prelude::*;
            let rows: Vec<_> = rows.collect();
            rows.into_par_iter().enumerate().with_min_len(CHUNK).for_each(|(i, o)| self.observe_env(i, o));
        };
        match &self.pool {
            Some(pool) => pool.install(go),
            None => go(),
        }
    }

    fn observe_env(&self, i: usize, o: &mut [f32]) {
        let (a, f) = (self.panel.n_assets, self.panel.n_features);
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

    /// Steps every env with `actions` (`n_envs x n_assets`, each in [-1, 1]; NaN counts as 0), chunks of
    /// envs in parallel on the env's pool.
    pub fn step(&mut self, actions: &[f32], out: &mut StepOutcome) -> Result<(), EnvError> {
        let (e, a) = (self.cfg.n_envs, self.panel.n_assets);
        if actions.len() != e * a {
            return Err(EnvError::ActionShape { got: actions.len(), want: e * a });
        }
        out.reward.resize(e, 0.0);
        out.done.resize(e, false);
        out.equity.resize(e, 0.0);
        let (cfg, panel) = (&self.cfg, &*self.panel);
        // One chunk of envs: its slice of every array, stepped in order on one thread.
        let run = |lo: usize, envs: EnvSlices<'_>| {
            let (mut scratch, mut ws) = (Vec::with_capacity(a), Vec::new());
            let EnvSlices { cash, cash_kind, pos, day, steps, equity, moments, draws, reward, done, equity_out } = envs;
            for j in 0..cash.len() {
                let mut env = EnvMut {
                    cash: &mut cash[j],
                    cash_kind: &mut cash_kind[j],
                    pos: &mut pos[j * a..(j + 1) * a],
                    day: &mut day[j],
                    steps: &mut steps[j],
                    equity: &mut equity[j],
                    moments: &mut moments[j],
                    draws: &mut draws[j],
                };
                let i = lo + j;
                let (r, eq) = env.step(cfg, panel, &actions[i * a..(i + 1) * a], &mut scratch, &mut ws);
                reward[j] = r;
                equity_out[j] = eq;
                done[j] = *env.steps == cfg.episode_len;
                if done[j] {
                    env.reset(cfg, panel.n_days);
                }
            }
        };
        let slices = EnvSlices {
            cash: &mut self.cash,
            cash_kind: &mut self.cash_kind,
            pos: &mut self.pos,
            day: &mut self.day,
            steps: &mut self.steps,
            equity: &mut self.equity,
            moments: &mut self.moments,
            draws: &mut self.draws,
            reward: &mut out.reward,
            done: &mut out.done,
            equity_out: &mut out.equity,
        };
        if e <= CHUNK {
            run(0, slices);
            return Ok(());
        }
        let chunks = slices.split(CHUNK, a);
        let go = || {
            use rayon::prelude::*;
            chunks.into_par_iter().enumerate().for_each(|(c, s)| run(c * CHUNK, s));
        };
        match &self.pool {
            Some(pool) => pool.install(go),
            None => go(),
        }
        Ok(())
    }
}

/// A range of envs' state and outputs, for one rayon task.
struct EnvSlices<'a> {
    cash: &'a mut [f64],
    cash_kind: &'a mut [Kind],
    pos: &'a mut [Position],
    day: &'a mut [usize],
    steps: &'a mut [usize],
    equity: &'a mut [f64],
    moments: &'a mut [[f64; 2]],
    draws: &'a mut [u64],
    reward: &'a mut [f32],
    done: &'a mut [bool],
    equity_out: &'a mut [f64],
}

impl<'a> EnvSlices<'a> {
    /// Consecutive pieces of `chunk` envs (the last may be shorter); `a` positions per env.
    fn split(mut self, chunk: usize, a: usize) -> Vec<EnvSlices<'a>> {
        let mut out = Vec::with_capacity(self.cash.len().div_ceil(chunk));
        while self.cash.len() > chunk {
            let (head, tail) = self.split_at(chunk, a);
            out.push(head);
            self = tail;
        }
        out.push(self);
        out
    }

    fn split_at(self, n: usize, a: usize) -> (EnvSlices<'a>, EnvSlices<'a>) {
        let (cash, cash_1) = self.cash.split_at_mut(n);
        let (cash_kind, cash_kind_1) = self.cash_kind.split_at_mut(n);
        let (pos, pos_1) = self.pos.split_at_mut(n * a);
        let (day, day_1) = self.day.split_at_mut(n);
        let (steps, steps_1) = self.steps.split_at_mut(n);
        let (equity, equity_1) = self.equity.split_at_mut(n);
        let (moments, moments_1) = self.moments.split_at_mut(n);
        let (draws, draws_1) = self.draws.split_at_mut(n);
        let (reward, reward_1) = self.reward.split_at_mut(n);
        let (done, done_1) = self.done.split_at_mut(n);
        let (equity_out, equity_out_1) = self.equity_out.split_at_mut(n);
        (
            EnvSlices { cash, cash_kind, pos, day, steps, equity, moments, draws, reward, done, equity_out },
            EnvSlices {
                cash: cash_1,
                cash_kind: cash_kind_1,
                pos: pos_1,
                day: day_1,
                steps: steps_1,
                equity: equity_1,
                moments: moments_1,
                draws: draws_1,
                reward: reward_1,
                done: done_1,
                equity_out: equity_out_1,
            },
        )
    }
}
