//! The record of a hyper-parameter search (`tradebot tune`, or a weekend retrain with `retrain.tune`), as
//! stored in the store's `studies` tree (JSON, one value per study, its trials inside, keyed by the study's
//! name, which starts with its start time so the tree scans in time order).

use crate::config::Dist;
use crate::store::{Store, StoreError, TreeName};
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum TrialState {
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
    pub steps: u64,
    pub value: f64,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TrialRecord {
    pub number: usize,
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
    pub started_at: DateTime<Utc>,
    pub ended_at: Option<DateTime<Utc>>,
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

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StudyRecord {
    /// `tune-<start time to the millisecond>`, unique per store.
    pub name: String,
    /// "command line", "retrain <run id>".
    pub trigger: String,
    pub sampler: String,
    pub seed: u64,
    /// The validation metric, higher is better.
    pub metric: String,
    pub space: BTreeMap<String, Dist>,
    pub rungs: Vec<u64>,
    pub reduction: u64,
    pub parallel: usize,
    pub trials_planned: usize,
    /// The days the trials were ranked on.
    pub validation_from: Option<DateTime<Utc>>,
    pub validation_to: Option<DateTime<Utc>>,
    pub started_at: DateTime<Utc>,
    pub ended_at: Option<DateTime<Utc>>,
    pub trials: Vec<TrialRecord>,
    /// The best trial's number and the candidate registered from it.
    pub best: Option<usize>,
    pub model_id: Option<String>,
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
