//! `tradebot train lstm`: the direction classifier on the stored bars of the `[train]` range. Every
//! configured symbol's samples (`features::windows`) are pooled and split by time (70 % train, 15 %
//! validation, 15 % test, `horizon` bars left out between parts); training runs with early stopping on
//! validation MCC, checkpoints under `state_dir/checkpoints/lstm/`; the best model is exported to ONNX,
//! checked against tch through ONNX Runtime (1e-5) and registered as a candidate. On a terminal a
//! progress bar; with `--json` the training child's JSON lines (`retrain::child`).

use std::path::PathBuf;

#[derive(Debug, Clone, clap::Args)]
pub struct LstmTrainArgs {
    #[arg(long, short)]
    pub config: Option<PathBuf>,
    /// auto (CUDA when usable) | cpu | cuda
    #[arg(long, default_value = "auto")]
    pub device: String,
    /// Overrides lstm.max_epochs.
    #[arg(long)]
    pub epochs: Option<usize>,
    /// Continue from the checkpoint in state_dir/checkpoints/lstm/.
    #[arg(long)]
    pub resume: bool,
    /// JSON lines on stdout: epoch events, then done (model id, metrics) or error.
    #[arg(long)]
    pub json: bool,
}

#[cfg(not(feature = "train"))]
pub fn run(_: LstmTrainArgs) -> anyhow::Result<std::process::ExitCode> {
    anyhow::bail!("tradebot train lstm needs a build with the `train` feature (libtorch)")
}

#[cfg(feature = "train")]
pub use imp::run;

#[cfg(feature = "train")]
#[path = "train_lstm_imp.rs"]
mod imp;
