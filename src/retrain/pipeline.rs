//! One retrain run, end to end: snapshot the training window from the store (safetensors), run
//! `tradebot train <kind> --config F --json` (the same binary) as a supervised child with the `[retrain]`
//! budgets, stream its progress to the caller, then check and backtest the candidate and the champion on
//! the holdout (through an `Evaluator`, the engine's backtest), apply the promotion gate, and promote or
//! keep. Every ending, failures included, becomes a `RunRecord` in the store's `runs` tree and a log line.
//! Nothing but a gate pass touches the registry's champion.
//!
//! The child cannot open the store (the daemon holds its lock), so it is told where the snapshot is by
//! `TRADEBOT_TRAIN_SNAPSHOT`, and its GPU memory budget by `TRADEBOT_GPU_MEMORY_MB`.

use super::child::{self, ChildOutcome};
use super::dataset;
use super::gate::{self, GateInput};
use super::record::{self, Failure, RunOutcome, RunRecord};
use super::study_record;
use crate::models::{Algorithm, ModelKind, Registry};
use crate::store::Store;
use chrono::{DateTime, Utc};
use std::collections::BTreeMap;
use std::sync::Arc;
use tokio_util::sync::CancellationToken;

pub use super::launch::{ALLOC_CONF_ENV, GPU_MEMORY_ENV, SNAPSHOT_ENV, TUNE_SHARE_OF_BUDGET};
pub use super::spec::PipelineSpec;

/// A backtest failure or a candidate that does not load.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("{0}")]
pub struct EvalError(pub String);

/// Holdout backtests of a model, by id (the engine's backtest implements it). Called off the async
/// reactor (`spawn_blocking`).
pub trait Evaluator: Send + Sync + 'static {
    /// Checks that the candidate loads and that its ONNX export agrees with its reference (parity).
    fn check(&self, _model_id: &str) -> Result<(), EvalError> {
        Ok(())
    }
    /// The model's holdout figures: Sharpe, max drawdown, trades, total return.
    fn evaluate(&self, model_id: &str) -> Result<GateInput, EvalError>;
    /// The same, with the holdout as of the engine's clock (a rolling `[train]` window).
    fn evaluate_at(&self, model_id: &str, _as_of: DateTime<Utc>) -> Result<GateInput, EvalError> {
        self.evaluate(model_id)
    }
}

/// What the pipeline reports while it runs: the run's stages (a training child's own counts, read from its
/// lines, are `web::data::TrainingProgress`).
#[derive(Debug, Clone, PartialEq)]
pub enum RetrainProgress {
    /// The training window is being written for the child.
    Snapshot {
        /// The model being retrained.
        kind: ModelKind,
        /// How many bars the snapshot holds.
        bars: usize,
    },
    /// A JSON line of the child (`progress`, `epoch`, `done`, `error`).
    Training {
        /// The model being retrained.
        kind: ModelKind,
        /// The line as the child wrote it.
        line: serde_json::Value,
    },
    /// The gate is backtesting a candidate on the holdout.
    Evaluating {
        /// The model being retrained.
        kind: ModelKind,
        /// The candidate's registry id.
        candidate: String,
    },
    /// The run has ended; its record, as stored.
    Finished(Box<RunRecord>),
}

/// Why a run was started, and when by the engine's clock.
#[derive(Debug, Clone, PartialEq)]
pub struct Trigger {
    /// Who asked for it: "schedule", "control socket", "command line", ... (the record's `trigger`).
    pub reason: String,
    /// The engine's clock when it was asked for (simulated time in a replay): it picks the training window and the
    /// seed.
    pub clock_time: DateTime<Utc>,
}

/// Records a run as interrupted when dropped armed (`run` is `Some`): its future was dropped mid-run.
struct InterruptGuard {
    store: Store,
    run: Option<RunRecord>,
}

impl Drop for InterruptGuard {
    fn drop(&mut self) {
        let Some(mut r) = self.run.take() else { return };
        r.ended_at = crate::clock::now();
        r.outcome = RunOutcome::Interrupted;
        r.champion_after = r.champion_before.clone();
        r.failure = Some(record::interrupted_at(r.ended_at));
        log::warn!("retrain {}: {}; the champion keeps trading", r.id, r.reason());
        if let Err(e) = record::save(&self.store, &r) {
            log::error!("retrain {}: cannot store that it was interrupted: {e}", r.id);
        }
    }
}

/// Runs retrains: a training snapshot, the training child, the gate's backtests, then promotion or not, each run
/// recorded in the store.
pub struct RetrainPipeline {
    spec: PipelineSpec,
    store: Store,
    evaluator: Arc<dyn Evaluator>,
}

impl RetrainPipeline {
    /// Runs stored as under way by an earlier process that died are recorded as interrupted here.
    pub fn new(spec: PipelineSpec, store: Store, evaluator: Arc<dyn Evaluator>) -> RetrainPipeline {
        if let Err(e) = record::interrupt_stale(&store) {
            log::warn!("retrain: cannot check the stored runs for unfinished ones: {e}");
        }
        RetrainPipeline { spec, store, evaluator }
    }

    /// What the runs are made of: the program, the symbols, the `[train]` and `[retrain]` settings.
    pub fn spec(&self) -> &PipelineSpec {
        &self.spec
    }

    /// Runs one retrain of `kind` to its end and stores its record. Never fails: every failure is in the
    /// record (a record that cannot be stored is logged). Cancellation-safe in that dropping the future
    /// kills the child and leaves the champion as it was.
    pub async fn run(
        &self,
        kind: ModelKind,
        trigger: Trigger,
        progress: &mut (dyn FnMut(RetrainProgress) + Send),
    ) -> RunRecord {
        self.run_until(kind, trigger, progress, &CancellationToken::new()).await
    }

    /// `run`, stopped when `cancel` fires: the training child is killed and the run recorded as
    /// interrupted (a signal to a foreground `tradebot retrain`).
    pub async fn run_until(
        &self,
        kind: ModelKind,
        trigger: Trigger,
        progress: &mut (dyn FnMut(RetrainProgress) + Send),
        cancel: &CancellationToken,
    ) -> RunRecord {
        let started_at = crate::clock::now();
        let mut r = RunRecord {
            id: format!("{}-{}", kind.as_str(), started_at.format("%Y%m%dT%H%M%S%.3fZ")),
            kind,
            trigger: trigger.reason,
            clock_time: trigger.clock_time,
            started_at,
            ended_at: started_at,
            outcome: RunOutcome::Failed,
            failure: None,
            snapshot: None,
            candidate: None,
            champion_before: None,
            champion_after: None,
            seed: None,
            train_metrics: BTreeMap::new(),
            trained_on: None,
            curves: BTreeMap::new(),
            candidate_metrics: None,
            champion_metrics: None,
            decision: None,
            candidates: Vec::new(),
        };
        log::info!("retrain {}: started ({}, clock {})", r.id, r.trigger, r.clock_time);
        if let Err(e) = record::save(&self.store, &RunRecord { outcome: RunOutcome::Running, ..r.clone() }) {
            log::warn!("retrain {}: cannot store that it started: {e}", r.id);
        }
        // Dropped with this future (the daemon's runtime shutting down under SIGTERM), the guard records
        // the run as interrupted, with when: never left "running" until the next retrain.
        let mut guard = InterruptGuard { store: self.store.clone(), run: Some(r.clone()) };
        let mut working = r.clone();
        let ended = tokio::select! {
            res = self.stages(&mut working, progress) => Some(res),
            _ = cancel.cancelled() => None,
        };
        // The stages' future is dropped by now: a child still running was killed with it.
        match ended {
            Some(Ok(())) => r = working,
            Some(Err(f)) => {
                r = working;
                // Too little data is no fault of the run: skipped, with how much there is and the fix.
                r.outcome =
                    if f.code == record::NOT_ENOUGH_DATA_CODE { RunOutcome::Skipped } else { RunOutcome::Failed };
                r.failure = Some(f);
            }
            None => {
                r = working;
                r.outcome = RunOutcome::Interrupted;
                r.champion_after = r.champion_before.clone();
                r.failure = Some(Failure {
                    stage: "train".into(),
                    code: "interrupted".into(),
                    message: "stopped by a signal; the training child was killed".into(),
                });
            }
        }
        guard.run = None;
        r.ended_at = crate::clock::now();
        match r.outcome {
            RunOutcome::Failed | RunOutcome::Interrupted | RunOutcome::Skipped => {
                log::warn!("retrain {}: {}; the champion keeps trading", r.id, r.reason())
            }
            o => {
                let model = r.candidate.as_deref().unwrap_or("");
                log::info!(model_id = model; "retrain {}: {} ({})", r.id, o.as_str(), r.reason())
            }
        }
        if let Err(e) = record::save(&self.store, &r) {
            log::error!("retrain {}: cannot store its record: {e}", r.id);
        }
        progress(RetrainProgress::Finished(Box::new(r.clone())));
        r
    }

    async fn stages(
        &self,
        r: &mut RunRecord,
        progress: &mut (dyn FnMut(RetrainProgress) + Send),
    ) -> Result<(), Failure> {
        let kind = r.kind;
        let registry = Registry::open(&self.spec.state_dir.join("models")).map_err(fail("registry", "registry"))?;
        r.champion_before = registry.champion(kind).map_err(fail("registry", "registry"))?.map(|m| m.id);
        r.champion_after = r.champion_before.clone();

        dataset::backup_store(&self.store, &r.id).await;
        let snap = dataset::snapshot(&self.spec, &self.store, r).await?;
        let seed = crate::config::retrain_seed(r.clock_time.date_naive());
        r.seed = Some(seed);
        if let (Some(first), Some(last)) = (snap.first_bar, snap.last_bar) {
            log::info!("retrain {}: training on {} bars, {first} to {last}, seed {seed}", r.id, snap.bars);
        }
        progress(RetrainProgress::Snapshot { kind, bars: snap.bars });
        let path = std::path::PathBuf::from(&snap.path);
        r.snapshot = Some(snap);
        let mut trained = Vec::new();
        for algorithm in self.spec.algorithms(kind) {
            let t = self.train_one(r, algorithm, &path, seed, &registry, progress).await;
            trained.push((algorithm, t));
        }
        self.judge(r, trained, &registry, progress).await
    }
}

fn fail<E: std::fmt::Display>(stage: &'static str, code: &'static str) -> impl FnOnce(E) -> Failure {
    move |e| Failure { stage: stage.into(), code: code.into(), message: e.to_string() }
}

#[cfg(test)]
mod tests;

#[path = "ensemble.rs"]
mod ensemble;
