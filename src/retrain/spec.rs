//! What a retrain run needs besides the store and the evaluator, read from the configuration once.

use crate::config::{Config, RetrainConfig, TrainConfig};
use crate::domain::{Symbol, Timeframe};
use std::ffi::OsString;
use std::path::PathBuf;

/// Everything a run needs besides the store and the evaluator.
#[derive(Debug, Clone)]
pub struct PipelineSpec {
    /// The `tradebot` binary (`std::env::current_exe()`), or a stand-in in tests.
    pub program: PathBuf,
    /// Arguments before `train ...` (empty for the binary itself; a wrapper's or a test script's).
    pub program_args: Vec<OsString>,
    /// The configuration file, absolute: the child reads the same one (`train --config`).
    pub config_file: PathBuf,
    /// The daemon's state directory (`state_dir`): the store, snapshots and models live under it.
    pub state_dir: PathBuf,
    /// `market.symbols`: the symbols a policy trains on.
    pub symbols: Vec<Symbol>,
    /// `market.timeframe`: the bar size the models train on.
    pub timeframe: Timeframe,
    /// The `[train]` settings: the training window and the holdout (fixed dates or rolling).
    pub train: TrainConfig,
    /// The `[retrain]` settings (budgets, the gate, the algorithms, warm start).
    pub retrain: RetrainConfig,
    /// `lstm.history_days`: how far before the training end an LSTM retrain's snapshot reaches.
    pub lstm_history_days: u32,
}

impl PipelineSpec {
    /// Reads the spec from the checked config; the program is this process's executable. Fails only if the config
    /// file's path or the executable cannot be resolved.
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
            lstm_history_days: c.lstm.history_days,
        })
    }
}
