//! LSTM classifier hyper-parameters (`[lstm]`): always built, so that a config parses without the `train` feature.

use crate::onnx::Activation;
use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct LstmConfig {
    pub fast_hidden: i64,
    pub slow_hidden: i64,
    pub context_hidden: Vec<i64>,
    pub head_hidden: Vec<i64>,
    pub activation: Activation,
    pub batch_size: usize,
    pub max_epochs: usize,
    pub learning_rate: f64,
    pub weight_decay: f64,
    /// Epochs without a better validation MCC before stopping.
    pub patience: usize,
    /// Write a checkpoint every this many epochs (when a checkpoint directory is given).
    pub checkpoint_every: usize,
    /// Weight the loss by inverse class frequency in the training split.
    pub class_weighted: bool,
    pub seed: u64,
    /// bf16 autocast on CUDA; ignored on CPU.
    pub mixed_precision: bool,
}

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
        }
    }
}

impl LstmConfig {
    pub fn validate(&self) -> Result<(), String> {
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
        ];
        match checks.iter().find(|(_, ok)| !ok) {
            Some((m, _)) => Err(m.to_string()),
            None => Ok(()),
        }
    }
}
