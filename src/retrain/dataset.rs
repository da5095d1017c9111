//! The data a retrain starts from: a backup of the store first, then the training window (cut at the
//! engine's clock; an LSTM's reaching back `lstm.history_days`) written as a safetensors snapshot for the
//! child, which cannot open the store.

use super::record::{Failure, RunRecord, SnapshotInfo};
use super::spec::PipelineSpec;
use crate::data::snapshot::{Snapshot, SnapshotError};
use crate::models::ModelKind;
use crate::store::{Store, StoreError};
use chrono::{DateTime, Utc};
use std::path::PathBuf;

/// Why the store could not be backed up or the snapshot written (shown as the failure's message).
#[derive(Debug, thiserror::Error)]
pub(crate) enum BackupError {
    #[error("{}: {source}", dir.display())]
    Dir { dir: PathBuf, source: std::io::Error },
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error(transparent)]
    Prune(std::io::Error),
    #[error(transparent)]
    Snapshot(#[from] SnapshotError),
    #[error(transparent)]
    Join(#[from] tokio::task::JoinError),
}

impl PipelineSpec {
    /// The training window: `[train.from, train end]`, cut at the clock's now (a replay never trains on
    /// bars after its simulated present).
    pub(super) fn window(&self, now: DateTime<Utc>) -> (DateTime<Utc>, DateTime<Utc>) {
        let train = self.train.resolve(now.date_naive());
        let (from, end) = crate::data::day_window(train.from, train.train_end());
        (from, if train.train_end().is_some() { end.min(now) } else { now })
    }

    /// The data a `kind` retrain's child gets: the training window, for the LSTM reaching back
    /// `lstm.history_days` before its end (`LstmConfig::history_from`, the rule the child applies too).
    pub(super) fn data_window(&self, kind: ModelKind, now: DateTime<Utc>) -> (DateTime<Utc>, DateTime<Utc>) {
        let (from, to) = self.window(now);
        if kind != ModelKind::Lstm {
            return (from, to);
        }
        let train = self.train.resolve(now.date_naive());
        let lstm = crate::config::LstmConfig { history_days: self.lstm_history_days, ..Default::default() };
        (crate::data::day_window(lstm.history_from(&self.train, &train), None).0.min(from), to)
    }
}

/// A backup of the store before the retrain (`Store::backup`), the newest `backup::KEEP` kept. A
/// failed backup is logged and does not stop the retrain.
pub(super) async fn backup_store(store: &Store, run: &str) {
    let store = store.clone();
    let job = move || -> Result<(crate::store::backup::Summary, usize), BackupError> {
        let s = store.backup()?;
        let pruned =
            crate::store::backup::prune(store.dir(), crate::store::backup::KEEP).map_err(BackupError::Prune)?;
        Ok((s, pruned))
    };
    match tokio::task::spawn_blocking(job).await.map_err(BackupError::from).and_then(|x| x) {
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

/// Writes the training window to `state_dir/retrain/<run id>.safetensors`, off the reactor.
pub(super) async fn snapshot(spec: &PipelineSpec, store: &Store, r: &RunRecord) -> Result<SnapshotInfo, Failure> {
    let (from, to) = spec.data_window(r.kind, r.clock_time);
    // The holdout the gate judges on (a rolling window's ends at the clock): its newest stored bar is
    // recorded, the end of the data this run used.
    let train = spec.train.resolve(r.clock_time.date_naive());
    let holdout = train.holdout_to.is_some().then(|| {
        let (a, b) = crate::data::day_window(train.holdout_from, train.holdout_to);
        (a, b.min(r.clock_time))
    });
    let dir = spec.state_dir.join("retrain");
    let path = dir.join(format!("{}.safetensors", r.id));
    let (store, symbols, tf) = (store.clone(), spec.symbols.clone(), spec.timeframe);
    let write = move || -> Result<SnapshotInfo, BackupError> {
        std::fs::create_dir_all(&dir).map_err(|source| BackupError::Dir { dir: dir.clone(), source })?;
        let mut series = Vec::new();
        for s in symbols {
            let bars = store.bars(&s, tf, from, to)?;
            series.push((s, bars));
        }
        let bars = series.iter().map(|(_, b)| b.len()).sum();
        let first_bar = series.iter().filter_map(|(_, b)| b.first().map(|b| b.t)).min();
        let last_bar = series.iter().filter_map(|(_, b)| b.last().map(|b| b.t)).max();
        let mut holdout_last_bar = None;
        if let Some((a, b)) = holdout {
            for (s, _) in &series {
                let last = store.bars(s, tf, a, b)?.last().map(|b| b.t);
                holdout_last_bar = holdout_last_bar.max(last);
            }
        }
        Snapshot { timeframe: tf, series }.write(&path)?;
        let path = path.display().to_string();
        Ok(SnapshotInfo { path, bars, from: Some(from), to: Some(to), first_bar, last_bar, holdout_last_bar })
    };
    tokio::task::spawn_blocking(write).await.map_err(BackupError::from).and_then(|x| x).map_err(|e| Failure {
        stage: "snapshot".into(),
        code: "snapshot".into(),
        message: e.to_string(),
    })
}
