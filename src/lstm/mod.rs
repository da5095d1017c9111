//! The LSTM direction classifier (behind the `train` feature): a device-resident dataset gathered by
//! index (`dataset`), the model (`model`), its metrics (`metrics`) and the training loop (`train`):
//! class-weighted cross-entropy, AdamW, per-epoch validation loss, accuracy, macro-F1 and MCC, early
//! stopping on validation MCC with patience, the best weights kept, checkpoints and resume; on the CPU each
//! minibatch's gradient in parts, one thread each (`parts`), their LSTM layers run natively (`native`).
//! `omp` makes libtorch's threads sleep, not spin, while they wait in the LSTM's training processes.

pub(crate) mod dataset;
pub(crate) mod metrics;
pub(crate) mod model;
mod native;
pub(crate) mod omp;
pub(crate) mod parts;
pub(crate) mod train;

pub(crate) use crate::config::LstmConfig;

#[cfg(test)]
pub(crate) mod tests;
