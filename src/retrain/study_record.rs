//! The record of a hyper-parameter search (`tradebot tune`, or a weekend retrain with `retrain.tune`), as
//! stored in the store's `studies` tree (JSON, one value per study, its trials inside, keyed by the study's
//! name, which starts with its start time so the tree scans in time order).

use crate::config::Dist;
use crate::store::{Store, StoreError, TreeName};
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// Where a trial of a search stands; lower-case in the stored JSON.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum TrialState {
    /// Still training.
    Running,
    /// Trained to the full budget.
    Complete,
    /// Stopped early by successive halving at a rung.
    Pruned,
    /// Its parameters were refused or its training failed (the error says which).
    Failed,
    /// Still training when the search's time budget ran out.
    Stopped,
}

impl TrialState {
    /// The state's lower-case name, as stored and shown.
    pub fn as_str(self) -> &'static str {
        match self {
            TrialState::Running => "running",
            TrialState::Complete => "complete",
            TrialState::Pruned => "pruned",
            TrialState::Failed => "failed",
            TrialState::Stopped => "stopped",
        }
    }
}

/// The validation metric of a trial after `steps` environment steps (at a rung).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct RungValue {
    /// The environment steps trained when the metric was taken (the rung).
    pub steps: u64,
    /// The validation metric there (higher is better).
    pub value: f64,
}

/// One trial of a search: its parameters, its seed, how far it got and its figures.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TrialRecord {
    /// The trial's number in its study, from 0 in the order proposed.
    pub number: usize,
    /// Where it stands.
    pub state: TrialState,
    /// The sampled values, by parameter name (whole numbers for `int` ranges).
    pub params: BTreeMap<String, f64>,
    /// The trial's own seed (PPO's and the env's).
    pub seed: u64,
    /// The validation metric at each rung reached.
    pub curve: Vec<RungValue>,
    /// The last backtest's figures (sharpe, total_return, max_drawdown, trades) and training's
    /// (mean_return, env_steps, train_seconds).
    #[serde(serialize_with = "crate::domain::number::whole_as_int")]
    pub metrics: BTreeMap<String, f64>,
    /// When it started training (UTC).
    pub started_at: DateTime<Utc>,
    /// When it ended (`None`: still running).
    pub ended_at: Option<DateTime<Utc>>,
    /// Why it failed (`None` unless it failed).
    pub error: Option<String>,
}

impl TrialRecord {
    /// The metric at the last rung reached.
    pub fn value(&self) -> Option<f64> {
        self.curve.last().map(|r| r.value)
    }

    /// How trials rank: further along first, then by value (NaN last).
    pub fn rank_key(&self) -> (usize, f64) {
        (self.curve.len(), self.value().filter(|v| v.is_finite()).unwrap_or(f64::NEG_INFINITY))
    }
}

/// One hyper-parameter search, as stored in the `studies` tree: its settings, its trials and the best one.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StudyRecord {
    /// `tune-<start time to the millisecond>`, unique per store.
    pub name: String,
    /// "command line", "retrain <run id>".
    pub trigger: String,
    /// `tune.sampler`: how the next trial's parameters are proposed (`tpe`, `random`, ...).
    pub sampler: String,
    /// `tune.seed`: seeds the sampler and every trial's seed.
    pub seed: u64,
    /// The validation metric, higher is better.
    pub metric: String,
    /// The search space: each parameter's distribution (`[tune.space]`).
    pub space: BTreeMap<String, Dist>,
    /// The environment steps where trials are judged for early stopping, ascending.
    pub rungs: Vec<u64>,
    /// `tune.reduction`: at each rung only the best 1/`reduction` go on (1: no early stopping).
    pub reduction: u64,
    /// `tune.parallel`: trials training at once.
    pub parallel: usize,
    /// `tune.trials`: how many trials the search may run.
    pub trials_planned: usize,
    /// The days the trials were ranked on.
    pub validation_from: Option<DateTime<Utc>>,
    /// The end of the validation days (`validation_from` is their start).
    pub validation_to: Option<DateTime<Utc>>,
    /// When the search started (UTC).
    pub started_at: DateTime<Utc>,
    /// When it ended (`None`: still running, or its process died).
    pub ended_at: Option<DateTime<Utc>>,
    /// Every trial so far, in the order proposed.
    pub trials: Vec<TrialRecord>,
    /// The best trial's number and the candidate registered from it.
    pub best: Option<usize>,
    /// The registry id of the candidate registered from the best trial (`None`: none yet, or registration failed).
    pub model_id: Option<String>,
    /// Why the search failed (`None` unless it failed).
    pub error: Option<String>,
}

impl StudyRecord {
    /// The best trial so far: the furthest along, then the highest value; failed trials never.
    pub fn best_trial(&self) -> Option<&TrialRecord> {
        self.trials.iter().filter(|t| t.state != TrialState::Failed && !t.curve.is_empty()).max_by(|a, b| {
            let (ka, kb) = (a.rank_key(), b.rank_key());
            ka.0.cmp(&kb.0).then(ka.1.total_cmp(&kb.1)).then(b.number.cmp(&a.number))
        })
    }

    /// The best value among the trials ended by each trial's end, in trial order (the search's progress).
    pub fn best_so_far(&self) -> Vec<(usize, f64)> {
        let mut best = f64::NEG_INFINITY;
        let mut out = Vec::new();
        for t in &self.trials {
            if let Some(v) = t.value().filter(|v| v.is_finite() && t.state != TrialState::Running) {
                best = best.max(v);
            }
            if best.is_finite() {
                out.push((t.number, best));
            }
        }
        out
    }
}

/// Stores a study (replacing the one of the same name).
pub fn save(store: &Store, s: &StudyRecord) -> Result<(), StoreError> {
    store.tree::<StudyRecord>(TreeName::Studies)?.insert(s.name.as_bytes(), s)?;
    store.flush()
}

/// Every stored study, most recent first.
pub fn list(store: &Store) -> Result<Vec<StudyRecord>, StoreError> {
    let mut all: Vec<StudyRecord> =
        store.tree::<StudyRecord>(TreeName::Studies)?.scan_prefix(b"")?.into_iter().map(|(_, s)| s).collect();
    all.reverse();
    Ok(all)
}

/// The `n` most recent studies, most recent first.
pub fn recent(store: &Store, n: usize) -> Result<Vec<StudyRecord>, StoreError> {
    Ok(store.tree::<StudyRecord>(TreeName::Studies)?.last_n(n)?.into_iter().map(|(_, s)| s).collect())
}

/// One study by name (`latest`: the most recent).
pub fn find(store: &Store, name: &str) -> Result<Option<StudyRecord>, StoreError> {
    let tree = store.tree::<StudyRecord>(TreeName::Studies)?;
    if name == "latest" {
        return Ok(tree.last()?.map(|(_, s)| s));
    }
    tree.get(name.as_bytes())
}
