//! Hyper-parameter search for the policy (`tradebot tune ppo`, and the weekend retrain with `retrain.tune`):
//! PPO's, or with `tune.algorithms = ["ppo", "sac"]` the algorithm too, a trial training PPO or SAC.
//!
//! - [`space`]: the parameters by name, drawn from `[tune.space]` and applied to `[ppo]` and `[env]`.
//! - [`tpe`]: the TPE sampler (Bergstra et al., 2011); `space::random` is the random one.
//! - [`asha`]: early stopping by successive halving at rungs of the step budget (Li et al., 2020).
//! - `population`: trials of one shape trained as one (`rl::ppo::population`): one env launch, one batched
//!   network; by default on CUDA, where P small trials fill the GPU as one big one.
//! - `trial`, `study`: trials trained side by side and judged by the engine's backtest on the validation
//!   days; the best one's model registered as a candidate (feature `train`).
//! - [`journal`]: the study as an Optuna journal file, for `optuna-dashboard`.
//! - [`optuna_storage`]: a search on Optuna's own storage (its gRPC proxy), beside other workers.
//!
//! The study's record (`retrain::study_record`) is in the store's `studies` tree; `tradebot tune list|show`
//! read it, and the dashboard's search page draws it.
//!
//! Without feature `train` (the inference-only daemon), the search's client side (Optuna's storage, the
//! samplers, the parameter space) is built for `tradebot tune list|show` and the dashboard's search page,
//! but the parts that run trials are never called there: dead code is expected in that build only.
#![cfg_attr(not(feature = "train"), allow(dead_code))]

pub(crate) mod asha;
pub(crate) mod journal;
#[cfg(feature = "train")]
mod learner;
pub(crate) mod optuna_storage;
#[cfg(feature = "train")]
mod population;
#[cfg(feature = "train")]
mod ranking;
pub(crate) mod space;
#[cfg(feature = "train")]
mod study;
#[cfg(test)]
mod tests;
pub(crate) mod tpe;
#[cfg(feature = "train")]
mod trial;
#[cfg(feature = "train")]
mod waves;

use crate::config::Config;
use crate::retrain::study_record::StudyRecord;
use std::path::PathBuf;
use std::time::Duration;

/// Where a worker of a search on Optuna's storage searches.
#[derive(Debug, Clone)]
pub(crate) struct Cluster {
    /// `grpc://host:port`: Optuna's gRPC storage proxy.
    pub url: String,
    pub study: String,
    /// A tradebot worker's running trial whose heartbeat is older than this is failed by the others.
    pub grace: Duration,
}

/// `tradebot tune ppo`.
#[derive(Debug, Clone)]
pub(crate) struct TuneJob {
    pub config: Config,
    /// auto | cpu | cuda[:N] (`training::device`; on CUDA, trials of one shape train as populations; others one
    /// at a time).
    pub device: crate::training::device::DeviceRequest,
    /// Overrides tune.trials, tune.parallel, tune.budget_steps.
    pub trials: Option<usize>,
    pub parallel: Option<usize>,
    pub budget_steps: Option<u64>,
    /// No trial starts, and training stops, after this long.
    pub time_budget: Option<Duration>,
    /// CPU threads (default: the machine's cores, at most `parallel`).
    pub threads: Option<usize>,
    /// Trials of one shape trained as one population (stacked weights, one env launch): `None` = on CUDA.
    pub population: Option<bool>,
    /// A dataset snapshot instead of the store (the daemon's retrain); the study is then only reported.
    pub data: Option<PathBuf>,
    /// JSON lines on stdout (the retrain child's protocol): the study after each wave, then done.
    pub json: bool,
    pub optuna_journal: Option<PathBuf>,
    /// `--storage grpc://host:port --study NAME`: this process is one worker on a study in Optuna's storage.
    pub cluster: Option<Cluster>,
    /// What started it ("command line", "retrain").
    pub trigger: String,
}

/// Runs the search and registers the best trial's model as a candidate; returns the study and its id.
/// With `json`, an error is also reported as an `{"event": "error"}` line.
pub(crate) fn tune_ppo(job: TuneJob) -> anyhow::Result<(StudyRecord, String)> {
    let json = job.json;
    let result = run(job);
    if json && let Err(e) = &result {
        crate::training::emit_error(e);
    }
    result
}

#[cfg(feature = "train")]
fn run(job: TuneJob) -> anyhow::Result<(StudyRecord, String)> {
    let json = job.json;
    let out = match job.cluster.clone() {
        Some(c) => optuna_storage::worker::run(job, &c)?,
        None => study::run(job)?,
    };
    if json {
        let best = out.study.best.and_then(|n| out.study.trials.iter().find(|t| t.number == n));
        let metrics = best.map(|t| t.metrics.clone()).unwrap_or_default();
        let mut done = serde_json::json!({
            "event": "done", "model_id": out.model_id, "metrics": metrics, "study": out.study.name,
        });
        out.ran.tag(&mut done);
        crate::training::emit(&done);
    }
    Ok((out.study, out.model_id))
}

#[cfg(not(feature = "train"))]
fn run(_: TuneJob) -> anyhow::Result<(StudyRecord, String)> {
    anyhow::bail!(
        "this tradebot was built without training (the `train` cargo feature, which links libtorch): rebuild with default features (`make build`) to tune"
    )
}

/// A study as a table for people: one line per trial, best marked.
pub(crate) fn table(s: &StudyRecord) -> String {
    let mut out = format!(
        "study {} ({}): {} sampler, seed {}, {} of {} trials, rungs {}, ranked by validation {}\n",
        s.name,
        s.trigger,
        s.sampler,
        s.seed,
        s.trials.len(),
        s.trials_planned,
        s.rungs.iter().map(u64::to_string).collect::<Vec<_>>().join("/"),
        s.metric
    );
    out.push_str(&format!("{:>5}  {:<9} {:>9} {:>9}  params\n", "trial", "state", "steps", s.metric));
    for t in &s.trials {
        let mark = if s.best == Some(t.number) { "*" } else { " " };
        let steps = t.curve.last().map_or("-".into(), |r| r.steps.to_string());
        let value = t.value().map_or("-".into(), |v| format!("{v:.3}"));
        let params: Vec<String> = t.params.iter().map(|(k, v)| format!("{k}={}", space::show(k, *v))).collect();
        out.push_str(&format!(
            "{mark}{:>4}  {:<9} {steps:>9} {value:>9}  {}\n",
            t.number,
            t.state.as_str(),
            params.join(" ")
        ));
    }
    match (&s.best, &s.model_id, &s.error) {
        (Some(b), Some(m), _) => out.push_str(&format!("best: trial {b}, registered as candidate {m}\n")),
        (_, _, Some(e)) => out.push_str(&format!("no model: {e}\n")),
        _ => out.push_str("under way\n"),
    }
    out
}

/// A number in few characters: whole numbers as they are, small ones in scientific notation.
pub(crate) fn short(v: f64) -> String {
    if v.fract() == 0.0 && v.abs() < 1e9 {
        format!("{v:.0}")
    } else if v.abs() < 0.01 {
        format!("{v:.2e}")
    } else {
        format!("{v:.4}")
    }
}
