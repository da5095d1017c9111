//! The record of one retrain run, as stored in the store's `runs` tree (JSON, keyed by start time so the
//! tree scans in time order): when it ran, what started it, how it ended (promoted, kept by the gate, or
//! failed and why), the candidate's and the champion's holdout figures and the gate's decision.

use super::gate::{GateDecision, GateInput};
use crate::control::report::RetrainStatus;
use crate::models::{Algorithm, ModelKind};
use crate::store::{Store, StoreError, TreeName, keys};
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// How a retrain run ended (or that it is under way); lower-case in the stored JSON.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum RunOutcome {
    /// The candidate passed the gate and is the champion now.
    Promoted,
    /// The candidate failed the gate; the champion stays.
    Kept,
    /// The run failed before a decision (snapshot, training, registry, evaluation); the champion stays.
    Failed,
    /// Not trained: the data holds too few samples for the model (the failure says how many, and the fix);
    /// the champion stays.
    Skipped,
    /// Under way (stored at its start, replaced at its end).
    Running,
    /// Stopped before its end: a signal to the process running it, or that process killed (found
    /// `Running` at the next start). The training child was killed with it; the champion stays.
    Interrupted,
}

impl RunOutcome {
    /// The outcome's lower-case name, as stored and shown in the status report.
    pub fn as_str(self) -> &'static str {
        match self {
            RunOutcome::Promoted => "promoted",
            RunOutcome::Kept => "kept",
            RunOutcome::Failed => "failed",
            RunOutcome::Running => "running",
            RunOutcome::Interrupted => "interrupted",
            RunOutcome::Skipped => "skipped",
        }
    }
}

/// How the LSTM's training says it has too little data (`training::lstm_sizing::NotEnoughData`): a
/// child's error starting so makes the run `Skipped`, not `Failed`.
pub const NOT_ENOUGH_DATA: &str = "not enough data for the LSTM";
/// The failure code of such a run.
pub const NOT_ENOUGH_DATA_CODE: &str = "not_enough_data";

/// Why a run failed: the stage, a stable code, and the message.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Failure {
    /// "snapshot", "train", "registry", "evaluate", "promote".
    pub stage: String,
    /// "crash", "timeout", "memory", "gpu_memory", "reported" (e.g. a NaN loss), "spawn", "no_model", or the stage.
    pub code: String,
    /// The error's text, for people.
    pub message: String,
}

/// The training window written for the child.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SnapshotInfo {
    /// The snapshot file's path (under the state directory).
    pub path: String,
    /// How many bars it holds, all symbols together.
    pub bars: usize,
    /// The window asked for.
    pub from: Option<DateTime<Utc>>,
    /// The end of the window asked for (`None`: up to the newest stored bar).
    pub to: Option<DateTime<Utc>>,
    /// The first and last bar the snapshot holds: the data the candidate learned from.
    #[serde(default)]
    pub first_bar: Option<DateTime<Utc>>,
    /// The last bar the snapshot holds.
    #[serde(default)]
    pub last_bar: Option<DateTime<Utc>>,
    /// The newest stored bar of the holdout the gate judged on: where the run's data ends (with a rolling
    /// `[train]` window, the last bar stored before the run).
    #[serde(default)]
    pub holdout_last_bar: Option<DateTime<Utc>>,
}

/// The device and env a training child actually ran on (`training::device::Ran`): `cpu` / `VecEnv`,
/// `cuda:0` / `kernel`; and what it was asked for (`auto`, `cuda:0`, `cpu`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TrainedOn {
    /// The device it trained on: `cpu`, `cuda:0`, ...
    pub device: String,
    /// The environment it stepped: `VecEnv` (on the CPU) or `kernel` (the GPU one).
    pub env: String,
    /// The device asked for (`auto`, `cuda:0`, `cpu`); empty in older records.
    #[serde(default)]
    pub requested: String,
}

impl TrainedOn {
    /// From a child's `done` line (`device`, `env`, `device_requested`), where it names them.
    pub fn of_line(line: &serde_json::Value) -> Option<TrainedOn> {
        let s = |k: &str| line.get(k).and_then(|v| v.as_str()).map(str::to_string);
        Some(TrainedOn { device: s("device")?, env: s("env")?, requested: s("device_requested").unwrap_or_default() })
    }
}

/// How a PPO candidate began (`retrain.warm_start`): from the champion's training state, or from scratch
/// and why. The training child says so in its `done` line (`warm_start`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct WarmStart {
    /// The champion it was asked to start from (`None`: there was no PPO champion).
    pub champion: Option<String>,
    /// It started from the champion's weights.
    pub warm: bool,
    /// Why it trained from scratch instead (`None` when it did not).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
}

impl WarmStart {
    /// Trained from scratch because of `reason`, though asked to start from `champion`.
    pub fn scratch(champion: Option<String>, reason: impl Into<String>) -> WarmStart {
        WarmStart { champion, warm: false, reason: Some(reason.into()) }
    }

    /// From a child's `done` line, where it says.
    pub fn of_line(line: &serde_json::Value) -> Option<WarmStart> {
        serde_json::from_value(line.get("warm_start")?.clone()).ok()
    }

    /// One phrase for logs: "warm-started from ppo-…" or "trained from scratch: why".
    pub fn describe(&self) -> String {
        match (&self.champion, self.warm, &self.reason) {
            (Some(c), true, _) => format!("warm-started from the champion {c}"),
            (_, _, Some(why)) => format!("trained from scratch: {why}"),
            _ => "trained from scratch".to_string(),
        }
    }
}

/// One retrain run, as stored in the `runs` tree: its trigger, its times, its outcome, the candidates and the gate's
/// decision.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RunRecord {
    /// `<kind>-<start time to the millisecond, UTC>`, e.g. `ppo-20260105T020000.000Z`.
    pub id: String,
    /// The model retrained (PPO policy, LSTM, ...).
    pub kind: ModelKind,
    /// "schedule", "control socket", "command line", ...
    pub trigger: String,
    /// The engine's clock when the run was asked for (simulated time in a replay).
    pub clock_time: DateTime<Utc>,
    /// When the run started (the process's clock: the simulated one under a simulated clock).
    pub started_at: DateTime<Utc>,
    /// When it ended; equal to `started_at` while it is `Running`.
    pub ended_at: DateTime<Utc>,
    /// How it ended.
    pub outcome: RunOutcome,
    /// Why it failed, was skipped or was interrupted (`None` when a decision was made).
    pub failure: Option<Failure>,
    /// The training window written for the child (`None`: the run failed before it).
    pub snapshot: Option<SnapshotInfo>,
    /// The registry id of the model it trained (the promoted candidate's, else the best one's).
    pub candidate: Option<String>,
    /// The champion when the run started (`None`: there was none).
    pub champion_before: Option<String>,
    /// The champion when it ended: the candidate if promoted, else `champion_before`.
    pub champion_after: Option<String>,
    /// The seed the candidate trained with (`config::retrain_seed` of the run's clock day).
    #[serde(default)]
    pub seed: Option<u64>,
    /// What the child reported in its `done` line.
    #[serde(serialize_with = "crate::domain::number::whole_as_int")]
    pub train_metrics: BTreeMap<String, f64>,
    /// Where the candidate trained, as the child's `done` line says (absent from older records and children).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub trained_on: Option<TrainedOn>,
    /// The child's progress by update or epoch (`add_to_curves`): "return", "policy_loss", "loss",
    /// "val_mcc".
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub curves: BTreeMap<String, Vec<f64>>,
    /// The candidate's holdout figures, as the gate read them (without the per-bar series).
    pub candidate_metrics: Option<GateInput>,
    /// The champion's holdout figures in the same backtest (`None`: no champion).
    pub champion_metrics: Option<GateInput>,
    /// The gate's decision on the candidate (`None`: the run ended before the gate).
    pub decision: Option<GateDecision>,
    /// Every candidate the run trained (one per `retrain.algorithms` entry for the policy), with its
    /// holdout figures and the gate's decision, or why it has none. The run's `candidate`, `decision` and
    /// figures above are the promoted one's (else the best one's by holdout Sharpe).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub candidates: Vec<CandidateRecord>,
}

/// One candidate of a run: what trained it, its model, its holdout figures and the gate's decision (or
/// the failure that left it without one), and whether it was the one promoted.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CandidateRecord {
    /// The training algorithm (`ppo`, `sac`, ...).
    pub algorithm: Algorithm,
    /// The registry id of the model it trained (`None`: training failed).
    pub model_id: Option<String>,
    /// What its training child reported in its `done` line.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub train_metrics: BTreeMap<String, f64>,
    /// Its holdout figures (`None`: not evaluated).
    pub metrics: Option<GateInput>,
    /// The gate's decision on it (`None`: not evaluated).
    pub decision: Option<GateDecision>,
    /// Why it has no decision (training or evaluation failed).
    pub failure: Option<Failure>,
    /// The one promoted (the best by holdout Sharpe among those the gate passed).
    #[serde(default)]
    pub promoted: bool,
    /// A PPO candidate with `retrain.warm_start`: whether it started from the champion, or why not.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub warm_start: Option<WarmStart>,
}

/// The curves a training child's progress lines draw: (curve, the line's key).
pub const CURVES: [(&str, &str); 4] =
    [("return", "mean_return"), ("policy_loss", "policy_loss"), ("loss", "train_loss"), ("val_mcc", "val_mcc")];

/// Adds a progress line's values to `curves` (a line without a curve's key adds nothing to it).
pub fn add_to_curves(curves: &mut BTreeMap<String, Vec<f64>>, line: &serde_json::Value) {
    for (name, key) in CURVES {
        if let Some(x) = line.get(key).and_then(|x| x.as_f64()) {
            curves.entry(name.to_string()).or_default().push(x);
        }
    }
}

impl RunRecord {
    /// One line for logs and the command line.
    pub fn reason(&self) -> String {
        match (&self.failure, &self.decision) {
            (Some(f), _) if self.outcome == RunOutcome::Skipped => format!("skipped: {}", f.message),
            (Some(f), _) => format!("{} failed ({}): {}", f.stage, f.code, f.message),
            (None, Some(d)) => d.reason.clone(),
            (None, None) => String::new(),
        }
    }

    /// A promotion: the new champion's id.
    pub fn new_champion(&self) -> Option<&str> {
        (self.outcome == RunOutcome::Promoted).then_some(self.champion_after.as_deref()).flatten()
    }

    /// The record as the status report's `retrain` section shows it: outcome, reason, gate numbers and the data's span.
    pub fn to_status(&self) -> RetrainStatus {
        RetrainStatus {
            started_at: Some(self.started_at),
            outcome: self.outcome.as_str().to_string(),
            reason: self.reason(),
            candidate: self.candidate.clone(),
            numbers: self.decision.as_ref().map(|d| d.numbers.clone()).unwrap_or_default(),
            data_from: self.snapshot.as_ref().and_then(|s| s.first_bar),
            data_to: self.snapshot.as_ref().and_then(|s| s.last_bar),
        }
    }

    fn key(&self) -> Vec<u8> {
        let mut k = keys::time_key(self.started_at).to_vec();
        k.extend_from_slice(self.id.as_bytes());
        k
    }
}

/// Stores a run record (replacing one with the same start time and id).
pub fn save(store: &Store, r: &RunRecord) -> Result<(), StoreError> {
    store.tree::<RunRecord>(TreeName::Runs)?.insert(&r.key(), r)
}

/// Every stored run, most recent first.
pub fn list(store: &Store) -> Result<Vec<RunRecord>, StoreError> {
    let mut runs: Vec<RunRecord> =
        store.tree::<RunRecord>(TreeName::Runs)?.scan_prefix(b"")?.into_iter().map(|(_, r)| r).collect();
    runs.reverse();
    Ok(runs)
}

/// Marks runs stored as `Running` (their process ended without finishing them) as interrupted; returns
/// how many. Called when a pipeline is made, before it can start a run of its own.
pub fn interrupt_stale(store: &Store) -> Result<usize, StoreError> {
    let tree = store.tree::<RunRecord>(TreeName::Runs)?;
    let mut n = 0;
    for (k, mut r) in tree.scan_prefix(b"")? {
        if r.outcome == RunOutcome::Running {
            r.outcome = RunOutcome::Interrupted;
            r.failure = Some(Failure {
                stage: "train".into(),
                code: "interrupted".into(),
                message: "the process running it ended before it finished (killed or crashed)".into(),
            });
            tree.insert(&k, &r)?;
            log::warn!("retrain {}: found unfinished from an earlier process; recorded as interrupted", r.id);
            n += 1;
        }
    }
    Ok(n)
}

/// The failure of a run stopped at `at` because the process running it shut down (the daemon under
/// SIGTERM or SIGINT): the training child was killed with it.
pub fn interrupted_at(at: DateTime<Utc>) -> Failure {
    Failure {
        stage: "train".into(),
        code: "interrupted".into(),
        message: format!(
            "stopped at {} when the process running it shut down; the training child was killed",
            at.format("%Y-%m-%d %H:%M:%S UTC")
        ),
    }
}

/// The most recent run, if any.
pub fn last(store: &Store) -> Result<Option<RunRecord>, StoreError> {
    Ok(store.tree::<RunRecord>(TreeName::Runs)?.last()?.map(|(_, r)| r))
}
