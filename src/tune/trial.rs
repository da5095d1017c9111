//! One trial in training: its config, trainer (PPO or SAC, `learner`) and environment, trained a rung at a
//! time and judged at each rung by the engine's backtest over the validation days (`validate`).

use super::learner::{Learner, SacLearner};
use super::space::{self, Params};
use crate::backtest;
use crate::config::{Config, StrategyMode, TuneMetric};
use crate::domain::Bar;
use crate::env::Panel;
use crate::env::kernel::TensorKernelEnv;
use crate::models::Algorithm;
use crate::policy::{Pipeline, PpoPolicy, SessionOptions};
use crate::retrain::study_record::{RungValue, TrialRecord, TrialState};
use crate::rl::BatchEnv;
use crate::rl::ppo::{Ppo, UpdateStats};
use crate::rl::sac::Sac;
use crate::rl::trading::TradingEnv;
use crate::training;
use crate::training::device::DeviceRequest;
use chrono::NaiveDate;
use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Instant;
use tch::Device;

/// What every trial shares: the training panel and its dates, the validation bars, the metric.
pub(super) struct Shared {
    pub panel: Arc<Panel>,
    pub dates: (NaiveDate, NaiveDate),
    /// The validation days with the features' warm-up before them, aligned.
    pub val_bars: Vec<Vec<Bar>>,
    pub metric: TuneMetric,
    pub device: Device,
    pub deadline: Option<Instant>,
}

/// Why a trial failed at a rung (its record keeps the message).
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub(super) enum TrialFailure {
    /// Its parameters make no valid configuration.
    #[error(transparent)]
    Refused(crate::config::Invalid),
    /// Its environment could not start.
    #[error("{0}")]
    Env(String),
    /// Its trainer could not be built.
    #[error("{0}")]
    Trainer(String),
    #[error("the rung's value was never judged")]
    NeverJudged,
    #[error("a trial of a population cannot train on its own")]
    NotAlone,
    #[error("training failed: {0}")]
    Training(String),
    #[error("the population's training failed: {0}")]
    Population(String),
    #[error("copying the trial out of its population failed: {0}")]
    WriteBack(String),
    #[error("validation backtest failed: {0}")]
    Validation(String),
}

/// A trial in training.
pub(super) struct Trial {
    pub rec: TrialRecord,
    pub config: Config,
    pub learner: Learner,
    /// `VecEnv` on the host, or on CUDA the env kernel on the device (`training::ppo::training_env`; a SAC
    /// trial's is always `VecEnv`); `None` for a trial of a population, whose env is part of the
    /// population's (`super::population`).
    env: Option<Box<dyn BatchEnv + Send>>,
    /// Where a PPO trial's rungs are: their update counts (`rungs` in steps, rounded up to whole updates);
    /// a SAC trial's are its env steps (`rungs` as they are).
    pub rung_updates: Vec<u64>,
    pub next_rung: usize,
    /// A PPO trial's last update's statistics (a SAC trial's are in its learner).
    pub last: Option<UpdateStats>,
    pub seconds: f64,
    /// The outcome of the last `advance`: the rung's value, or why the trial failed.
    pub outcome: Option<Result<f64, TrialFailure>>,
}

impl Trial {
    /// Trial `number` with `params` on `base`: its config, environment and freshly seeded trainer. With
    /// `pooled`, the environment is the env kernel's on the shared device, returned for a population to
    /// stack (where it cannot be built, the trial gets its own env, and `None` comes back). A trial whose
    /// parameters are refused comes back as its failed record.
    pub(super) fn new(
        base: &Config,
        shared: &Shared,
        rungs: &[u64],
        seed: u64,
        number: usize,
        params: Params,
        pooled: bool,
    ) -> Result<(Trial, Option<TensorKernelEnv>), Box<TrialRecord>> {
        let mut rec = TrialRecord {
            number,
            state: TrialState::Running,
            params: params.clone(),
            seed: space::trial_seed(seed, number),
            curve: Vec::new(),
            metrics: BTreeMap::new(),
            started_at: crate::clock::now(),
            ended_at: None,
            error: None,
        };
        let built = space::apply(base, &params, rec.seed)
            .and_then(|c| Ok((space::algorithm(&base.tune, &params)?, c)))
            .map_err(TrialFailure::Refused)
            .and_then(|(algorithm, config)| match algorithm {
                Algorithm::Ppo => ppo_parts(config, shared, number, pooled),
                Algorithm::Sac => sac_parts(config, shared, rungs.last().copied().unwrap_or(0)),
            });
        match built {
            Ok((config, env, kernel, learner, per_update)) => {
                let rung_updates = rungs.iter().map(|r| r.div_ceil(per_update).max(1)).collect();
                let t = Trial {
                    rec,
                    config,
                    learner,
                    env,
                    rung_updates,
                    next_rung: 0,
                    last: None,
                    seconds: 0.0,
                    outcome: None,
                };
                Ok((t, kernel))
            }
            Err(e) => {
                rec.state = TrialState::Failed;
                rec.error = Some(e.to_string());
                rec.ended_at = Some(crate::clock::now());
                Err(Box::new(rec))
            }
        }
    }

    /// The PPO trainer of a PPO trial (`None` for a SAC trial).
    pub(super) fn ppo(&self) -> Option<&Ppo> {
        match &self.learner {
            Learner::Ppo(p) => Some(&**p),
            Learner::Sac(_) => None,
        }
    }

    pub(super) fn ppo_mut(&mut self) -> Option<&mut Ppo> {
        match &mut self.learner {
            Learner::Ppo(p) => Some(&mut **p),
            Learner::Sac(_) => None,
        }
    }

    /// The trial's model exported, checked and registered in `config.state_dir`'s registry.
    pub(super) fn register(
        &self,
        config: &Config,
        shared: &Shared,
        ran: &training::device::Ran,
    ) -> anyhow::Result<crate::models::Manifest> {
        self.learner.register(config, shared.dates, self.last.as_ref(), self.seconds, ran)
    }

    /// Trains to the next rung and backtests there; `outcome` says how it went. Past the deadline the
    /// training stops where it is and nothing is judged (`outcome` stays `None`).
    pub(super) fn advance(&mut self, shared: &Shared) {
        let started = Instant::now();
        self.outcome = None;
        if shared.deadline.is_some_and(|d| started >= d) {
            return;
        }
        let (Some(&stop_at), Some(&end)) = (self.rung_updates.get(self.next_rung), self.rung_updates.last()) else {
            return;
        };
        // Two rungs that round to the same update count: the value there is already known.
        let (done, steps) = match &self.learner {
            Learner::Ppo(p) => (p.updates, p.env_steps),
            Learner::Sac(l) => (l.sac.env_steps, l.sac.env_steps),
        };
        if done >= stop_at
            && let Some(r) = self.rec.curve.last().filter(|r| r.steps == steps)
        {
            self.outcome = Some(Ok(r.value));
            return;
        }
        let Some(env) = self.env.as_mut() else {
            self.outcome = Some(Err(TrialFailure::NotAlone));
            return;
        };
        let mut late = false;
        let deadline = || shared.deadline.is_some_and(|d| Instant::now() >= d);
        let trained = match &mut self.learner {
            Learner::Ppo(p) if p.updates < stop_at => {
                let mut last = None;
                let r = p.train_until(&mut **env, 0, end, |_, s| {
                    last = Some(s.clone());
                    late = deadline();
                    s.update < stop_at && !late
                });
                if last.is_some() {
                    self.last = last;
                }
                r.map_err(|e| e.to_string())
            }
            Learner::Sac(l) if l.sac.env_steps < stop_at => {
                let steps = stop_at - l.sac.env_steps;
                // Reports (and deadline checks) about 8 times a rung.
                let every = (steps / 8).max(env.num_envs() as u64);
                l.sac
                    .train(&mut **env, steps, every, |s| {
                        l.last = Some(s.clone());
                        late = deadline();
                        !late
                    })
                    .map_err(|e| e.to_string())
            }
            _ => Ok(()),
        };
        self.seconds += started.elapsed().as_secs_f64();
        if let Err(e) = trained {
            self.outcome = Some(Err(TrialFailure::Training(e)));
            return;
        }
        let reached = match &self.learner {
            Learner::Ppo(p) => p.updates >= stop_at,
            Learner::Sac(l) => l.sac.env_steps >= stop_at,
        };
        if late && !reached {
            return;
        }
        self.outcome = Some(self.validate(shared).map_err(|e| TrialFailure::Validation(format!("{e:#}"))));
    }

    /// The engine's backtest of the policy as it is now over the validation days.
    pub(super) fn validate(&mut self, shared: &Shared) -> anyhow::Result<f64> {
        let (bytes, mut m) = self.learner.export(&self.config, shared.dates, self.last.as_ref(), self.seconds)?;
        m.id = format!("trial-{}", self.rec.number);
        let c = &self.config;
        let pipeline = Pipeline::new(&c.features, &c.market.symbols, c.market.timeframe).with_action(c.env.action);
        let p = PpoPolicy::from_parts(m, &bytes, &pipeline, SessionOptions::default())?;
        // A search's backtests, like the gate's, say their refusals at DEBUG.
        let ev = crate::engine::refusals::at_debug(|| {
            backtest::evaluate(c, StrategyMode::Ppo, (Some(p), None), &shared.val_bars)
        })?;
        let s = &ev.strategy;
        let value = match shared.metric {
            TuneMetric::Sharpe => s.sharpe,
            TuneMetric::TotalReturn => s.total_return,
        };
        let steps = self.learner.env_steps();
        self.rec.curve.push(RungValue { steps, value });
        let m = &mut self.rec.metrics;
        m.insert("sharpe".into(), s.sharpe);
        m.insert("total_return".into(), s.total_return);
        m.insert("max_drawdown".into(), s.max_drawdown);
        m.insert("trades".into(), s.trades as f64);
        m.insert("buy_hold_return".into(), ev.buy_hold.total_return);
        m.insert("env_steps".into(), steps as f64);
        m.insert("train_seconds".into(), self.seconds);
        if let Some(r) = self.learner.mean_return(self.last.as_ref()) {
            m.insert("mean_return".into(), r);
        }
        Ok(value)
    }
}

/// What a trial is made of: its config, its own env (or, in a population, `None` and the env kernel
/// returned apart), its learner, and the env steps of one of its updates.
type Parts = (Config, Option<Box<dyn BatchEnv + Send>>, Option<TensorKernelEnv>, Learner, u64);

/// A PPO trial's parts. With `pooled`, the environment is the env kernel's on the shared device, returned
/// for a population to stack (where it cannot be built, the trial gets its own env).
fn ppo_parts(mut config: Config, shared: &Shared, number: usize, pooled: bool) -> Result<Parts, TrialFailure> {
    // Trials train side by side on the CPU: the plain-Rust trainer, whose generator is its own. A
    // population's trial only holds its weights between rungs: no plain-Rust copy of them.
    config.ppo.cpu_backend =
        if pooled { crate::config::CpuBackend::Libtorch } else { crate::config::CpuBackend::Native };
    let kernel = if pooled {
        TensorKernelEnv::new(&config.env, &shared.panel, shared.device)
            .map_err(|e| log::warn!("trial {number} trains on its own, outside the population: {e}"))
            .ok()
    } else {
        None
    };
    let (env, dims) = match &kernel {
        Some(k) => (None, (k.obs_dim(), k.n_assets(), k.n_envs())),
        None => {
            // The study settled the device: the trial holds to it (no fall-back of its own).
            let exact = DeviceRequest::exact(shared.device);
            let (env, _, _) = training::ppo::training_env(&config.env, shared.panel.clone(), shared.device, exact)
                .map_err(|e| TrialFailure::Env(format!("{e:#}")))?;
            let dims = (env.obs_dim(), env.act_dim(), env.num_envs());
            (Some(env), dims)
        }
    };
    let ppo = Ppo::new(config.ppo.clone(), dims.0, dims.1, shared.device)
        .map_err(|e| TrialFailure::Trainer(e.to_string()))?;
    let per_update = (config.ppo.n_steps * dims.2) as u64;
    Ok((config, env, kernel, Learner::Ppo(Box::new(ppo)), per_update))
}

/// A SAC trial's parts: `VecEnv` on the host (the env kernel is PPO's), its networks and replay buffer on
/// the shared device; it trains alone (never in a population), its rungs in env steps. Its buffer holds no
/// more than the `budget` steps it can train (and a step of its envs): `sac.buffer_size` is allocated whole.
fn sac_parts(mut config: Config, shared: &Shared, budget: u64) -> Result<Parts, TrialFailure> {
    let env =
        TradingEnv::new(config.env.clone(), shared.panel.clone()).map_err(|e| TrialFailure::Env(e.to_string()))?;
    let most = usize::try_from(budget).unwrap_or(usize::MAX).saturating_add(env.num_envs());
    config.sac.buffer_size = config.sac.buffer_size.min(most.max(config.sac.batch_size));
    let sac = Sac::new(config.sac.clone(), env.obs_dim(), env.act_dim(), env.num_envs(), shared.device)
        .map_err(|e| TrialFailure::Trainer(e.to_string()))?;
    let learner = Learner::Sac(Box::new(SacLearner { sac, last: None }));
    Ok((config, Some(Box::new(env)), None, learner, 1))
}
