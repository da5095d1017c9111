//! `tradebot train ppo|sac|lstm`: the arguments, turned into a training job (`crate::training`). With `--json`
//! the job speaks the retrain child's JSON lines (`retrain::child`), a config error included.

use super::load_config;
use crate::training::device::DeviceRequest;
use crate::training::{self, LstmJob, PpoJob, SacJob};
use std::path::PathBuf;
use std::process::ExitCode;

#[derive(Debug, Clone, clap::Args)]
pub struct PpoArgs {
    /// The configuration file (default: $TRADEBOT_CONFIG, ./config/tradebot.toml, /etc/tradebot/tradebot.toml).
    #[arg(long, short)]
    pub config: Option<PathBuf>,
    /// auto (CUDA when usable, else CPU) | cpu | cuda
    #[arg(long, default_value = "auto", value_parser = DeviceRequest::parse_arg)]
    pub device: DeviceRequest,
    /// Environment steps to train for (default: retrain.ppo_steps, else 200000).
    #[arg(long)]
    pub steps: Option<u64>,
    /// Continue from the latest checkpoint under state_dir/checkpoints/ppo.
    #[arg(long)]
    pub resume: bool,
    /// Start from the training state of this registered PPO model (e.g. the champion) instead of a fresh
    /// network; where it cannot (another network or contract, no state kept), train from scratch and say why.
    #[arg(long, value_name = "MODEL_ID", conflicts_with = "resume")]
    pub warm_start: Option<String>,
    /// Train on a dataset snapshot (safetensors, written by the daemon's retrain) instead of the store.
    #[arg(long)]
    pub data: Option<PathBuf>,
    /// JSON lines on stdout: progress, then done (or error).
    #[arg(long)]
    pub json: bool,
    /// CPU threads for the env, the trainer and libtorch (default: every core). Any count trains the
    /// same model, bit for bit.
    #[arg(long)]
    pub threads: Option<usize>,
}

#[derive(Debug, Clone, clap::Args)]
pub struct SacArgs {
    /// The configuration file (default: $TRADEBOT_CONFIG, ./config/tradebot.toml, /etc/tradebot/tradebot.toml).
    #[arg(long, short)]
    pub config: Option<PathBuf>,
    /// auto (CUDA when usable, else CPU) | cpu | cuda: where the networks and the replay buffer live
    #[arg(long, default_value = "auto", value_parser = DeviceRequest::parse_arg)]
    pub device: DeviceRequest,
    /// Environment steps to train for (default: retrain.sac_steps, else 100000).
    #[arg(long)]
    pub steps: Option<u64>,
    /// Start from the training state of this registered SAC policy (e.g. the champion) instead of fresh
    /// networks; where it cannot (not a SAC policy, another network or contract, no state kept), train from
    /// scratch and say why.
    #[arg(long, value_name = "MODEL_ID")]
    pub warm_start: Option<String>,
    /// Train on a dataset snapshot (safetensors, written by the daemon's retrain) instead of the store.
    #[arg(long)]
    pub data: Option<PathBuf>,
    /// JSON lines on stdout: progress, then done (or error).
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Clone, clap::Args)]
pub struct LstmArgs {
    /// The configuration file (default: $TRADEBOT_CONFIG, ./config/tradebot.toml, /etc/tradebot/tradebot.toml).
    #[arg(long, short)]
    pub config: Option<PathBuf>,
    /// auto (CUDA when usable) | cpu | cuda
    #[arg(long, default_value = "auto", value_parser = DeviceRequest::parse_arg)]
    pub device: DeviceRequest,
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

/// The config, or (with `--json`) its error also as the child protocol's error line.
fn config(path: Option<PathBuf>, json: bool) -> anyhow::Result<crate::config::Config> {
    load_config(path).map_err(|e| {
        let e = anyhow::Error::from(e);
        if json {
            training::emit_error(&e);
        }
        e
    })
}

pub(super) fn ppo(a: PpoArgs) -> anyhow::Result<ExitCode> {
    let config = config(a.config, a.json)?;
    let job = PpoJob {
        config,
        device: a.device,
        steps: a.steps,
        resume: a.resume,
        warm_start: a.warm_start,
        data: a.data,
        json: a.json,
        threads: a.threads,
    };
    training::train_ppo(job)?;
    Ok(ExitCode::SUCCESS)
}

pub(super) fn sac(a: SacArgs) -> anyhow::Result<ExitCode> {
    let config = config(a.config, a.json)?;
    let job = SacJob { config, device: a.device, steps: a.steps, warm_start: a.warm_start, data: a.data, json: a.json };
    training::train_sac(job)?;
    Ok(ExitCode::SUCCESS)
}

pub(super) fn lstm(a: LstmArgs) -> anyhow::Result<ExitCode> {
    let config = config(a.config, a.json)?;
    let job = LstmJob { config, device: a.device, epochs: a.epochs, resume: a.resume, json: a.json };
    training::train_lstm(job)?;
    Ok(ExitCode::SUCCESS)
}
