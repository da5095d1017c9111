//! LSTM classifier hyper-parameters (`[lstm]`): always built, so that a config parses without the `train` feature.

use super::TrainConfig;
use super::checker::Invalid;
use crate::onnx::Activation;
use chrono::NaiveDate;
use serde::{Deserialize, Serialize};

/// What the LSTM strategy's probability cut-offs maximise on the validation split (`lstm.cutoff_metric`,
/// `engine::cutoffs`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "snake_case")]
pub enum CutoffMetric {
    /// Mean over standard deviation of the per-bar returns of the equal-weighted symbols.
    #[default]
    Sharpe,
    /// The summed per-bar return.
    Return,
}

impl std::fmt::Display for CutoffMetric {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            CutoffMetric::Sharpe => "sharpe",
            CutoffMetric::Return => "return",
        })
    }
}

/// The `[lstm]` section: the direction classifier's architecture, training and cut-off choice.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct LstmConfig {
    /// Hidden size of the LSTM over the fast window (the last bars themselves).
    pub fast_hidden: i64,
    /// Hidden size of the LSTM over the slow window (bars aggregated `slow_factor` at a time).
    pub slow_hidden: i64,
    /// Hidden layer sizes of the dense branch over the context vector (empty: the context goes to the head as it is).
    pub context_hidden: Vec<i64>,
    /// Hidden layer sizes of the head, before its 3 logits (down, flat, up).
    pub head_hidden: Vec<i64>,
    /// The dense layers' activation (`tanh` or `relu`).
    pub activation: Activation,
    /// Samples per gradient step.
    pub batch_size: usize,
    /// The most epochs to train (fewer when `patience` stops it).
    pub max_epochs: usize,
    /// AdamW's learning rate.
    pub learning_rate: f64,
    /// AdamW's decoupled weight decay.
    pub weight_decay: f64,
    /// Epochs without a better validation MCC before stopping.
    pub patience: usize,
    /// Write a checkpoint every this many epochs (when a checkpoint directory is given).
    pub checkpoint_every: usize,
    /// Weight the loss by inverse class frequency in the training split.
    pub class_weighted: bool,
    /// Seeds the weights and the batch order: the same seed gives the same model.
    pub seed: u64,
    /// bf16 autocast on CUDA; ignored on CPU.
    pub mixed_precision: bool,
    /// Bars in the fast window (`x_fast`).
    pub fast_len: usize,
    /// Slow bars in the slow window (`x_slow`).
    pub slow_len: usize,
    /// Fast bars aggregated into one slow bar.
    pub slow_factor: usize,
    /// Bars ahead for the label's log return; also the gap between train, validation and test.
    pub horizon: usize,
    /// Label up above this forward log return.
    pub up_threshold: f64,
    /// Label down below this forward log return (negative).
    pub down_threshold: f64,
    /// What the strategy's probability cut-offs, chosen on the validation split, maximise.
    pub cutoff_metric: CutoffMetric,
    /// Fewest entries into a position a cut-off pair needs on the validation split to be chosen (at most:
    /// a small validation split asks for one entry per `ENTRY_PER_SAMPLES` of its samples, at least 1).
    pub cutoff_min_entries: usize,
    /// Days of stored bars before the end of a rolling `[train]` window the LSTM may learn from: its range
    /// is the window's, reaching back this far when that is longer (as far as the store holds bars).
    /// Fixed `[train]` dates are kept as they are.
    pub history_days: u32,
    /// Pooled labelled samples the LSTM's window is sized for: with fewer at the configured window,
    /// `slow_len`, then `slow_factor`, then `horizon` are shrunk step by step (to their `min_` bounds)
    /// until the samples reach this or the bounds are hit.
    pub target_samples: usize,
    /// The smallest `slow_len` the sizing may shrink to (the configured `slow_len` when that is smaller).
    pub min_slow_len: usize,
    /// The smallest `slow_factor` the sizing may shrink to.
    pub min_slow_factor: usize,
    /// The smallest `horizon` the sizing may shrink to.
    pub min_horizon: usize,
}

/// A validation split asks for at most one entry per this many of its samples (`cutoff_min_entries` caps it).
pub(crate) const ENTRY_PER_SAMPLES: usize = 50;

impl Default for LstmConfig {
    fn default() -> Self {
        LstmConfig {
            fast_hidden: 32,
            slow_hidden: 16,
            context_hidden: vec![16],
            head_hidden: vec![32],
            activation: Activation::Relu,
            batch_size: 3072,
            max_epochs: 500,
            learning_rate: 1e-3,
            weight_decay: 1e-2,
            patience: 50,
            checkpoint_every: 10,
            class_weighted: true,
            seed: 0,
            mixed_precision: false,
            fast_len: 30,
            slow_len: 10,
            slow_factor: 5,
            horizon: 5,
            up_threshold: 0.02,
            down_threshold: -0.02,
            cutoff_metric: CutoffMetric::Sharpe,
            cutoff_min_entries: 20,
            history_days: 3650,
            target_samples: 1500,
            min_slow_len: 2,
            min_slow_factor: 2,
            min_horizon: 2,
        }
    }
}

impl LstmConfig {
    /// The window lengths, slow timeframe and label thresholds of the dataset.
    pub fn window_spec(&self) -> crate::features::windows::WindowSpec {
        crate::features::windows::WindowSpec {
            fast_len: self.fast_len,
            slow_len: self.slow_len,
            slow_factor: self.slow_factor,
            horizon: self.horizon,
            up_threshold: self.up_threshold,
            down_threshold: self.down_threshold,
        }
    }

    /// The first day the LSTM learns from, for `[train]` as configured and as `resolved` on the day: a
    /// rolling window's start, or `history_days` days before its end when that is earlier; fixed dates'
    /// `from` as it is (`None`: from the first stored bar).
    pub fn history_from(&self, configured: &TrainConfig, resolved: &TrainConfig) -> Option<NaiveDate> {
        let from = resolved.from?;
        let (Some(_), Some(end)) = (configured.rolling, resolved.train_end()) else { return Some(from) };
        let back = end.checked_sub_days(chrono::Days::new(u64::from(self.history_days.saturating_sub(1))));
        Some(back.map_or(from, |b| b.min(from)))
    }

    /// The fewest entries the cut-off search asks of a validation split of `samples` samples:
    /// `cutoff_min_entries`, or one per `ENTRY_PER_SAMPLES` samples when that is fewer, at least 1.
    pub fn min_entries(&self, samples: usize) -> usize {
        self.cutoff_min_entries.min(samples / ENTRY_PER_SAMPLES).max(1)
    }

    /// Checks the values' ranges; the error names the key and its bounds.
    pub fn validate(&self) -> Result<(), Invalid> {
        let checks = [
            (
                "lstm.fast_hidden and lstm.slow_hidden must be at least 1",
                self.fast_hidden >= 1 && self.slow_hidden >= 1,
            ),
            (
                "lstm.context_hidden and lstm.head_hidden sizes must be at least 1",
                self.context_hidden.iter().chain(&self.head_hidden).all(|h| *h >= 1),
            ),
            ("lstm.batch_size must be at least 2", self.batch_size >= 2),
            ("lstm.max_epochs must be at least 1", self.max_epochs >= 1),
            ("lstm.learning_rate must be in (0, 1)", self.learning_rate > 0.0 && self.learning_rate < 1.0),
            ("lstm.weight_decay must not be negative", self.weight_decay >= 0.0),
            ("lstm.patience must be at least 1", self.patience >= 1),
            ("lstm.checkpoint_every must be at least 1", self.checkpoint_every >= 1),
            ("lstm.fast_len must be in [1, 1000]: set a window of that many bars", (1..=1000).contains(&self.fast_len)),
            (
                "lstm.slow_len must be in [1, 1000]: set a window of that many slow bars",
                (1..=1000).contains(&self.slow_len),
            ),
            (
                "lstm.slow_factor must be in [2, 1000]: a slow bar aggregates at least 2 fast bars",
                (2..=1000).contains(&self.slow_factor),
            ),
            (
                "lstm.horizon must be in [1, 1000]: the label looks that many bars ahead",
                (1..=1000).contains(&self.horizon),
            ),
            (
                "lstm.up_threshold must be a finite log return in [0, 1), e.g. 0.02",
                self.up_threshold.is_finite() && (0.0..1.0).contains(&self.up_threshold),
            ),
            (
                "lstm.down_threshold must be a finite log return in (-1, 0], e.g. -0.02",
                self.down_threshold.is_finite() && self.down_threshold > -1.0 && self.down_threshold <= 0.0,
            ),
            (
                "lstm.down_threshold must be below lstm.up_threshold, or no sample is labelled flat",
                self.down_threshold < self.up_threshold,
            ),
            (
                "lstm.history_days must be in [1, 36500]: days of stored bars the LSTM may learn from",
                (1..=36_500).contains(&self.history_days),
            ),
            (
                "lstm.min_slow_len and lstm.min_horizon must be at least 1",
                self.min_slow_len >= 1 && self.min_horizon >= 1,
            ),
            (
                "lstm.min_slow_factor must be at least 2: a slow bar aggregates at least 2 fast bars",
                self.min_slow_factor >= 2,
            ),
        ];
        if let Some((m, _)) = checks.iter().find(|(_, ok)| !ok) {
            return Err(Invalid::Value(m.to_string()));
        }
        let widest = [self.fast_hidden, self.slow_hidden]
            .iter()
            .chain(&self.context_hidden)
            .chain(&self.head_hidden)
            .copied()
            .max()
            .unwrap_or(1)
            .max(1) as u64;
        super::within("lstm hidden sizes (the widest)", widest, 1, 65_536)?;
        super::within("lstm.batch_size", self.batch_size as u64, 2, 1 << 24)?;
        super::within("lstm.max_epochs", self.max_epochs as u64, 1, 100_000)?;
        super::within("lstm.patience", self.patience as u64, 1, 100_000)?;
        super::within("lstm.checkpoint_every", self.checkpoint_every as u64, 1, 1_000_000)?;
        super::within("lstm.target_samples", self.target_samples as u64, 0, 100_000_000)?;
        super::within("lstm.cutoff_min_entries", self.cutoff_min_entries as u64, 0, 1_000_000)
    }
}
