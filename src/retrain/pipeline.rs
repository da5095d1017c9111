//! One retrain run, end to end: snapshot the training window from the store (safetensors), run
//! `tradebot train <kind> --config F --json` (the same binary) as a supervised child with the `[retrain]`
//! budgets, stream its progress to the caller, then check and backtest the candidate and the champion on
//! the holdout (through an `Evaluator`, the engine's backtest), apply the promotion gate, and promote or
//! keep. Every ending, failures included, becomes a `RunRecord` in the store's `runs` tree and a log line.
//! Nothing but a gate pass touches the registry's champion.
//!
//! The child cannot open the store (the daemon holds its lock), so it is told where the snapshot is by
//! `TRADEBOT_TRAIN_SNAPSHOT`, and its GPU memory budget by `TRADEBOT_GPU_MEMORY_MB`.

use super::child::{self, ChildFailure, ChildOutcome, ChildSpec};
use super::gate::{self, GateInput};
use super::record::{self, Failure, RunOutcome, RunRecord, SnapshotInfo};
use super::study;
use crate::config::{Config, RetrainConfig, TrainConfig};
use crate::data::snapshot::Snapshot;
use crate::domain::{Symbol, Timeframe};
use crate::models::{Algorithm, ModelKind, Registry};
use crate::store::Store;
use chrono::{DateTime, Utc};
use std::collections::BTreeMap;
use std::ffi::OsString;
use std::path::PathBuf;
use std::sync::Arc;
use tokio_util::sync::CancellationToken;

/// The environment variable naming the dataset snapshot the training child reads.
pub const SNAPSHOT_ENV: &str = "TRADEBOT_TRAIN_SNAPSHOT";
/// The share of `retrain.time_budget` a search (`retrain.tune`) may spend training; the rest is for
/// exporting and registering its best trial before the child's budget runs out.
pub const TUNE_SHARE_OF_BUDGET: f64 = 0.8;
/// The environment variable carrying the child's GPU memory budget in MiB (absent = no cap).
pub const GPU_MEMORY_ENV: &str = "TRADEBOT_GPU_MEMORY_MB";
/// libtorch's CUDA allocator settings, read by the child's libtorch at its first allocation.
pub const ALLOC_CONF_ENV: &str = "PYTORCH_CUDA_ALLOC_CONF";

/// The CUDA device the training child runs on: `--device auto` is `cuda:0` of the child, which inherits
/// this process's `CUDA_VISIBLE_DEVICES` and `CUDA_DEVICE_ORDER`, so it is this process's `cuda:0` too.
#[cfg(feature = "train")]
const CHILD_CUDA_ORDINAL: usize = 0;

/// The child's libtorch held to `budget_mb` of its GPU (its per-process memory fraction, from the total of
/// the NVML GPU that is the child's CUDA device, `crate::gpu::nvml_index`), so that the trainer fails its own allocation past the budget rather than filling the
/// GPU; `None` where there is no GPU to cap (the `nvidia-smi` watch in `child` stays as the backstop).
fn gpu_alloc_conf(budget_mb: u64) -> Option<String> {
    #[cfg(feature = "train")]
    match crate::gpu::total_memory_mb(CHILD_CUDA_ORDINAL) {
        Ok(total) => {
            let existing = std::env::var(ALLOC_CONF_ENV).ok();
            let conf = crate::gpu::alloc_conf(budget_mb, total, existing.as_deref());
            log::debug!("retrain: the child's GPU memory is capped at {budget_mb} of {total} MiB ({conf})");
            Some(conf)
        }
        Err(e) => {
            log::debug!("retrain: no GPU memory cap for the child: {e}");
            None
        }
    }
    #[cfg(not(feature = "train"))]
    {
        let _ = budget_mb;
        None
    }
}

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

/// What the pipeline reports while it runs.
#[derive(Debug, Clone, PartialEq)]
pub enum Progress {
    Snapshot {
        kind: ModelKind,
        bars: usize,
    },
    /// A JSON line of the child (`progress`, `epoch`, `done`, `error`).
    Training {
        kind: ModelKind,
        line: serde_json::Value,
    },
    Evaluating {
        kind: ModelKind,
        candidate: String,
    },
    Finished(Box<RunRecord>),
}

/// Everything a run needs besides the store and the evaluator.
#[derive(Debug, Clone)]
pub struct PipelineSpec {
    /// The `tradebot` binary (`std::env::current_exe()`), or a stand-in in tests.
    pub program: PathBuf,
    /// Arguments before `train ...` (empty for the binary itself; a wrapper's or a test script's).
    pub program_args: Vec<OsString>,
    pub config_file: PathBuf,
    pub state_dir: PathBuf,
    pub symbols: Vec<Symbol>,
    pub timeframe: Timeframe,
    pub train: TrainConfig,
    pub retrain: RetrainConfig,
}

impl PipelineSpec {
    pub fn from_config(c: &Config) -> std::io::Result<PipelineSpec> {
        let config_file = std::path::absolute(&c.source)?;
        Ok(PipelineSpec {
            program: std::env::current_exe()?,
            program_args: Vec::new(),
            config_file,
            state_dir: c.state_dir.clone(),
            symbols: c.market.symbols.clone(),
            timeframe: c.market.timeframe,
            train: c.train.clone(),
            retrain: c.retrain.clone(),
        })
    }

    /// The policy algorithms a retrain of `kind` trains a candidate of (`retrain.algorithms` for the
    /// policy; the LSTM is one model).
    fn algorithms(&self, kind: ModelKind) -> Vec<Algorithm> {
        match kind {
            ModelKind::Ppo if !self.retrain.algorithms.is_empty() => self.retrain.algorithms.clone(),
            _ => vec![Algorithm::Ppo],
        }
    }

    fn child_spec(
        &self,
        kind: ModelKind,
        algorithm: Algorithm,
        snapshot: &std::path::Path,
        as_of: DateTime<Utc>,
        seed: u64,
    ) -> ChildSpec {
        let mut args = self.program_args.clone();
        let sac = kind == ModelKind::Ppo && algorithm == Algorithm::Sac;
        let search = kind == ModelKind::Ppo && self.retrain.tune && !sac;
        let name = if sac { algorithm.as_str() } else { kind.as_str() };
        args.extend([if search { "tune" } else { "train" }.into(), name.into(), "--config".into()]);
        args.push(self.config_file.clone().into_os_string());
        args.push("--json".into());
        match kind {
            ModelKind::Ppo if sac => {
                if let Some(n) = self.retrain.sac_steps {
                    args.extend(["--steps".into(), n.to_string().into()]);
                }
            }
            ModelKind::Ppo if search => {
                // The search stops with time to spare for registering its best trial before the child's
                // budget kills it; each trial trains at most ppo_steps (else tune.budget_steps).
                let secs = (self.retrain.time_budget.as_secs_f64() * TUNE_SHARE_OF_BUDGET).max(1.0);
                args.extend(["--device".into(), "auto".into(), "--time-budget".into(), format!("{secs:.0}s").into()]);
                if let Some(n) = self.retrain.ppo_steps {
                    args.extend(["--budget-steps".into(), n.to_string().into()]);
                }
            }
            ModelKind::Ppo => {
                if let Some(n) = self.retrain.ppo_steps {
                    args.extend(["--steps".into(), n.to_string().into()]);
                }
            }
            ModelKind::Lstm => {
                if let Some(n) = self.retrain.lstm_epochs {
                    args.extend(["--epochs".into(), n.to_string().into()]);
                }
            }
        }
        let mut env = vec![
            (OsString::from(SNAPSHOT_ENV), snapshot.as_os_str().to_owned()),
            // A rolling `[train]` window resolves on the engine's day, in the child as here.
            (OsString::from(crate::config::AS_OF_ENV), as_of.date_naive().to_string().into()),
            (OsString::from(crate::config::SEED_ENV), seed.to_string().into()),
        ];
        if self.retrain.gpu_memory_mb > 0 {
            env.push((GPU_MEMORY_ENV.into(), self.retrain.gpu_memory_mb.to_string().into()));
            if let Some(conf) = gpu_alloc_conf(self.retrain.gpu_memory_mb) {
                env.push((ALLOC_CONF_ENV.into(), conf.into()));
            }
        }
        let memory_mb = self.retrain.memory_mb.or_else(crate::retrain::memory::default_budget_mb).unwrap_or(0);
        if memory_mb > 0 {
            env.push((crate::retrain::memory::MEMORY_ENV.into(), memory_mb.to_string().into()));
        }
        ChildSpec {
            program: self.program.clone(),
            args,
            time_budget: self.retrain.time_budget,
            gpu_memory_mb: self.retrain.gpu_memory_mb,
            memory_mb,
            env,
        }
    }

    /// The training window: `[train.from, train end]`, cut at the clock's now (a replay never trains on
    /// bars after its simulated present).
    fn window(&self, now: DateTime<Utc>) -> (DateTime<Utc>, DateTime<Utc>) {
        let train = self.train.resolve(now.date_naive());
        let (from, end) = crate::data::day_window(train.from, train.train_end());
        (from, if train.train_end().is_some() { end.min(now) } else { now })
    }
}

/// Why a run was started, and when by the engine's clock.
#[derive(Debug, Clone, PartialEq)]
pub struct Trigger {
    pub reason: String,
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
        progress: &mut (dyn FnMut(Progress) + Send),
    ) -> RunRecord {
        self.run_until(kind, trigger, progress, &CancellationToken::new()).await
    }

    /// `run`, stopped when `cancel` fires: the training child is killed and the run recorded as
    /// interrupted (a signal to a foreground `tradebot retrain`).
    pub async fn run_until(
        &self,
        kind: ModelKind,
        trigger: Trigger,
        progress: &mut (dyn FnMut(Progress) + Send),
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
                r.outcome = RunOutcome::Failed;
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
            RunOutcome::Failed | RunOutcome::Interrupted => {
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
        progress(Progress::Finished(Box::new(r.clone())));
        r
    }

    /// A backup of the store before the retrain (`Store::backup`), the newest `backup::KEEP` kept. A
    /// failed backup is logged and does not stop the retrain.
    async fn backup_store(&self, run: &str) {
        let store = self.store.clone();
        let job = move || -> Result<(crate::store::backup::Summary, usize), String> {
            let s = store.backup().map_err(|e| e.to_string())?;
            let pruned =
                crate::store::backup::prune(store.dir(), crate::store::backup::KEEP).map_err(|e| e.to_string())?;
            Ok((s, pruned))
        };
        match tokio::task::spawn_blocking(job).await.map_err(|e| e.to_string()).and_then(|x| x) {
            Ok((s, pruned)) => log::info!(
                "retrain {run}: store backed up first ({} records, write sequence {}) to {}{}",
                s.records,
                s.header.seq,
                s.path.display(),
                if pruned > 0 { format!("; {pruned} older backup(s) removed") } else { String::new() }
            ),
            Err(e) => log::warn!("retrain {run}: the store could not be backed up first ({e}); retraining anyway"),
        }
    }

    async fn stages(&self, r: &mut RunRecord, progress: &mut (dyn FnMut(Progress) + Send)) -> Result<(), Failure> {
        let kind = r.kind;
        let registry = Registry::open(&self.spec.state_dir.join("models")).map_err(fail("registry", "registry"))?;
        r.champion_before = registry.champion(kind).map_err(fail("registry", "registry"))?.map(|m| m.id);
        r.champion_after = r.champion_before.clone();

        self.backup_store(&r.id).await;
        let snap = self.snapshot(r).await?;
        let seed = crate::config::retrain_seed(r.clock_time.date_naive());
        r.seed = Some(seed);
        if let (Some(first), Some(last)) = (snap.first_bar, snap.last_bar) {
            log::info!("retrain {}: training on {} bars, {first} to {last}, seed {seed}", r.id, snap.bars);
        }
        progress(Progress::Snapshot { kind, bars: snap.bars });
        let path = PathBuf::from(&snap.path);
        r.snapshot = Some(snap);
        let mut trained = Vec::new();
        for algorithm in self.spec.algorithms(kind) {
            let t = self.train_one(r, algorithm, &path, seed, &registry, progress).await;
            trained.push((algorithm, t));
        }
        self.judge(r, trained, &registry, progress).await
    }

    /// Writes the training window to `state_dir/retrain/<run id>.safetensors`, off the reactor.
    async fn snapshot(&self, r: &RunRecord) -> Result<SnapshotInfo, Failure> {
        let (from, to) = self.spec.window(r.clock_time);
        // The holdout the gate judges on (a rolling window's ends at the clock): its newest stored bar is
        // recorded, the end of the data this run used.
        let train = self.spec.train.resolve(r.clock_time.date_naive());
        let holdout = train.holdout_to.is_some().then(|| {
            let (a, b) = crate::data::day_window(train.holdout_from, train.holdout_to);
            (a, b.min(r.clock_time))
        });
        let dir = self.spec.state_dir.join("retrain");
        let path = dir.join(format!("{}.safetensors", r.id));
        let (store, symbols, tf) = (self.store.clone(), self.spec.symbols.clone(), self.spec.timeframe);
        let write = move || -> Result<SnapshotInfo, String> {
            std::fs::create_dir_all(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
            let mut series = Vec::new();
            for s in symbols {
                let bars = store.bars(&s, tf, from, to).map_err(|e| e.to_string())?;
                series.push((s, bars));
            }
            let bars = series.iter().map(|(_, b)| b.len()).sum();
            let first_bar = series.iter().filter_map(|(_, b)| b.first().map(|b| b.t)).min();
            let last_bar = series.iter().filter_map(|(_, b)| b.last().map(|b| b.t)).max();
            let mut holdout_last_bar = None;
            if let Some((a, b)) = holdout {
                for (s, _) in &series {
                    let last = store.bars(s, tf, a, b).map_err(|e| e.to_string())?.last().map(|b| b.t);
                    holdout_last_bar = holdout_last_bar.max(last);
                }
            }
            Snapshot { timeframe: tf, series }.write(&path).map_err(|e| e.to_string())?;
            let path = path.display().to_string();
            Ok(SnapshotInfo { path, bars, from: Some(from), to: Some(to), first_bar, last_bar, holdout_last_bar })
        };
        tokio::task::spawn_blocking(write).await.map_err(|e| e.to_string()).and_then(|x| x).map_err(|message| Failure {
            stage: "snapshot".into(),
            code: "snapshot".into(),
            message,
        })
    }
}

fn fail<E: std::fmt::Display>(stage: &'static str, code: &'static str) -> impl FnOnce(E) -> Failure {
    move |e| Failure { stage: stage.into(), code: code.into(), message: e.to_string() }
}

/// The stable code of a child failure, for records and metrics.
pub fn code(f: &ChildFailure) -> &'static str {
    match f {
        ChildFailure::Spawn { .. } => "spawn",
        ChildFailure::Timeout(_) => "timeout",
        ChildFailure::GpuMemory { .. } => "gpu_memory",
        ChildFailure::Memory { .. } => "memory",
        ChildFailure::Reported(_) => "reported",
        ChildFailure::Crashed { .. } => "crash",
        ChildFailure::NoModel => "no_model",
    }
}

#[path = "ensemble.rs"]
mod ensemble;

#[cfg(test)]
#[path = "pipeline_tests.rs"]
mod tests;
