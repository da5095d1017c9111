//! One trial in training: its config, trainer and environment, trained a rung at a time and judged at each
//! rung by the engine's backtest over the validation days (`validate`).

use super::space::{self, Params};
use crate::backtest;
use crate::config::{Config, StrategyMode, TuneMetric};
use crate::domain::Bar;
use crate::env::Panel;
use crate::env::kernel::TensorKernelEnv;
use crate::policy::{Pipeline, PpoPolicy, SessionOptions};
use crate::retrain::study::{RungValue, TrialRecord, TrialState};
use crate::rl::BatchEnv;
use crate::rl::ppo::{Ppo, UpdateStats};
use crate::training;
use crate::training::device::DeviceRequest;
use chrono::NaiveDate;
use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Instant;
use tch::Device;

/// What every trial shares: the training panel and its dates, the validation bars, the metric.
pub struct Shared {
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
pub enum TrialFailure {
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
pub struct Trial {
    pub rec: TrialRecord,
    pub config: Config,
    pub ppo: Ppo,
    /// `VecEnv` on the host, or on CUDA the env kernel on the device (`training::ppo::training_env`);
    /// `None` for a trial of a population, whose env is part of the population's (`super::population`).
    env: Option<Box<dyn BatchEnv + Send>>,
    /// The update counts of the rungs (`rungs` in steps, rounded up to whole updates).
    pub rung_updates: Vec<u64>,
    pub next_rung: usize,
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
    pub fn new(
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
        let built = space::apply(base, &params, rec.seed).map_err(TrialFailure::Refused).and_then(|mut config| {
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
                    let (env, _, _) =
                        training::ppo::training_env(&config.env, shared.panel.clone(), shared.device, exact)
                            .map_err(|e| TrialFailure::Env(format!("{e:#}")))?;
                    let dims = (env.obs_dim(), env.act_dim(), env.num_envs());
                    (Some(env), dims)
                }
            };
            let ppo = Ppo::new(config.ppo.clone(), dims.0, dims.1, shared.device)
                .map_err(|e| TrialFailure::Trainer(e.to_string()))?;
            Ok((config, env, kernel, ppo, dims.2))
        });
        match built {
            Ok((config, env, kernel, ppo, n_envs)) => {
                let per_update = (config.ppo.n_steps * n_envs) as u64;
                let rung_updates = rungs.iter().map(|r| r.div_ceil(per_update).max(1)).collect();
                let t = Trial {
                    rec,
                    config,
                    ppo,
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

    /// Trains to the next rung and backtests there; `outcome` says how it went. Past the deadline the
    /// training stops where it is and nothing is judged (`outcome` stays `None`).
    pub fn advance(&mut self, shared: &Shared) {
        let started = Instant::now();
        self.outcome = None;
        if shared.deadline.is_some_and(|d| started >= d) {
            return;
        }
        let (Some(&stop_at), Some(&end)) = (self.rung_updates.get(self.next_rung), self.rung_updates.last()) else {
            return;
        };
        // Two rungs that round to the same update count: the value there is already known.
        if self.ppo.updates >= stop_at
            && let Some(r) = self.rec.curve.last().filter(|r| r.steps == self.ppo.env_steps)
        {
            self.outcome = Some(Ok(r.value));
            return;
        }
        let Some(env) = self.env.as_mut() else {
            self.outcome = Some(Err(TrialFailure::NotAlone));
            return;
        };
        let mut last = None;
        let mut late = false;
        let trained = if self.ppo.updates < stop_at {
            self.ppo.train_until(&mut **env, 0, end, |_, s| {
                last = Some(s.clone());
                late = shared.deadline.is_some_and(|d| Instant::now() >= d);
                s.update < stop_at && !late
            })
        } else {
            Ok(())
        };
        if last.is_some() {
            self.last = last;
        }
        self.seconds += started.elapsed().as_secs_f64();
        if let Err(e) = trained {
            self.outcome = Some(Err(TrialFailure::Training(e.to_string())));
            return;
        }
        if late && self.ppo.updates < stop_at {
            return;
        }
        self.outcome = Some(self.validate(shared).map_err(|e| TrialFailure::Validation(format!("{e:#}"))));
    }

    /// The engine's backtest of the policy as it is now over the validation days.
    pub(super) fn validate(&mut self, shared: &Shared) -> anyhow::Result<f64> {
        let policy = self.ppo.export_policy(Some(1.0))?;
        let bytes = policy.to_onnx("obs", "action", &[("producer", "tradebot tune")])?;
        let mut m = training::ppo::draft(&self.config, &self.ppo, shared.dates, self.last.as_ref(), self.seconds)?;
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
        let steps = self.ppo.env_steps;
        self.rec.curve.push(RungValue { steps, value });
        let m = &mut self.rec.metrics;
        m.insert("sharpe".into(), s.sharpe);
        m.insert("total_return".into(), s.total_return);
        m.insert("max_drawdown".into(), s.max_drawdown);
        m.insert("trades".into(), s.trades as f64);
        m.insert("buy_hold_return".into(), ev.buy_hold.total_return);
        m.insert("env_steps".into(), steps as f64);
        m.insert("train_seconds".into(), self.seconds);
        if let Some(r) = self.last.as_ref().and_then(|l| l.mean_return) {
            m.insert("mean_return".into(), r);
        }
        Ok(value)
    }
}
