//! Training jobs, as `tradebot train ppo|lstm` and the retrain child (`retrain::child`) run them: the
//! data from the store or a dataset snapshot, training with checkpoints and progress, the ONNX export
//! checked against tch through ONNX Runtime, and registration as a candidate.
//!
//! - [`ppo`]: PPO on the trading environment over the `[train]` range.
//! - [`sac`]: SAC on the same env, registered as a policy beside PPO's (`algorithm = sac`).
//! - [`lstm`]: the LSTM direction classifier on pooled windows of every symbol.
//! - [`checkpoint`]: PPO checkpoints (the LSTM trainer keeps its own, `lstm::train`).
//! - [`progress`]: a bar on a terminal, one line per step otherwise, JSON lines for the retrain child.
//! - [`device`]: `--device` (cpu, cuda[:N], auto) and what actually ran (device and env).
//!
//! The jobs take plain structs ([`PpoJob`], [`LstmJob`]) with a loaded `Config`; the command line builds
//! them. A build without the `train` feature (no libtorch) keeps the jobs and refuses them with the reason:
//! there the jobs are built but never run, so dead code is expected in that build only.
#![cfg_attr(not(feature = "train"), allow(dead_code))]

#[cfg(feature = "train")]
pub(crate) mod checkpoint;
pub(crate) mod device;
#[cfg(feature = "train")]
pub(crate) mod lstm;
#[cfg(feature = "train")]
pub(crate) mod lstm_sizing;
#[cfg(feature = "train")]
pub(crate) mod ppo;
#[cfg(feature = "train")]
pub(crate) mod ppo_warm;
#[cfg(feature = "train")]
pub(crate) mod progress;
#[cfg(feature = "train")]
pub(crate) mod sac;

use crate::config::Config;
#[cfg(feature = "train")]
use std::path::Path;
use std::path::PathBuf;

#[cfg(feature = "train")]
/// A training job's config with `[train]`'s rolling window resolved to dates (on the retrain's day,
/// `$TRADEBOT_TRAIN_AS_OF`, before a replay, or today), and the retrain's seed when it passes one
/// (`$TRADEBOT_TRAIN_SEED`), for the job to put in place of its own.
pub(crate) fn dated_config(config: &Config) -> anyhow::Result<(Config, Option<u64>)> {
    let mut config = config.clone();
    config.train = config.train_dates().map_err(anyhow::Error::msg)?;
    let seed = crate::config::seed_from_env().map_err(anyhow::Error::msg)?;
    Ok((config, seed))
}

#[cfg(feature = "train")]
/// The dataset snapshot a job trains on: `--data`, else the one the daemon's retrain names in the
/// environment (it holds the store's lock), else none (the store).
pub(crate) fn snapshot_path(data: Option<&Path>) -> Option<PathBuf> {
    data.map(Path::to_path_buf).or_else(|| std::env::var_os(crate::retrain::pipeline::SNAPSHOT_ENV).map(PathBuf::from))
}

/// `steps` rounded up to whole PPO updates of `n_envs` × `n_steps` steps each: the updates, the steps
/// they train, and a sentence saying so when that is more than asked (`None` when it is exact).
pub(crate) fn whole_updates(steps: u64, n_envs: usize, n_steps: usize) -> (u64, u64, Option<String>) {
    use crate::domain::count;
    let per_update = (n_envs * n_steps).max(1) as u64;
    let updates = steps.div_ceil(per_update).max(1);
    let trained = updates * per_update;
    let note = (trained != steps).then(|| {
        format!(
            "{} steps round up to {updates} whole update{} of {} ({n_envs} envs × {n_steps} steps, ppo.n_steps): {} steps",
            count(steps),
            if updates == 1 { "" } else { "s" },
            count(per_update),
            count(trained)
        )
    });
    (updates, trained, note)
}

/// `tradebot train ppo`.
#[derive(Debug, Clone)]
pub(crate) struct PpoJob {
    pub config: Config,
    /// auto (CUDA when usable, else the CPU, said once) | cpu | cuda[:N] (the env kernel on that GPU, or an error)
    pub device: device::DeviceRequest,
    /// Environment steps to train for (default: retrain.ppo_steps, else `ppo::DEFAULT_STEPS`).
    pub steps: Option<u64>,
    /// Continue from the latest checkpoint under state_dir/checkpoints/ppo.
    pub resume: bool,
    /// Start from this registered model's training state (the retrain's champion, `retrain.warm_start`),
    /// or from scratch with the reason logged and recorded where it cannot (`ppo_warm`).
    pub warm_start: Option<String>,
    /// A dataset snapshot (safetensors, written by the daemon's retrain) instead of the store.
    pub data: Option<PathBuf>,
    /// JSON lines on stdout: progress, then done (or error).
    pub json: bool,
    /// CPU threads for the env, the native trainer's GEMMs and libtorch (default: every core).
    pub threads: Option<usize>,
}

/// `tradebot train sac`.
#[derive(Debug, Clone)]
pub(crate) struct SacJob {
    pub config: Config,
    /// auto (CUDA when usable, else the CPU, said once) | cpu | cuda[:N]: where the networks and the replay
    /// buffer live (the env steps on the CPU).
    pub device: device::DeviceRequest,
    /// Environment steps to train for (default: retrain.sac_steps, else `sac::DEFAULT_STEPS`).
    pub steps: Option<u64>,
    /// Start from this registered SAC policy's training state (the retrain's SAC champion), or from scratch
    /// with the reason logged and recorded where it cannot (`sac_warm`).
    pub warm_start: Option<String>,
    /// A dataset snapshot (safetensors, written by the daemon's retrain) instead of the store.
    pub data: Option<PathBuf>,
    /// JSON lines on stdout: progress, then done (or error).
    pub json: bool,
}

/// `tradebot train lstm`.
#[derive(Debug, Clone)]
pub(crate) struct LstmJob {
    pub config: Config,
    /// auto (CUDA when usable, else the CPU, said once) | cpu | cuda[:N] (that GPU, or an error)
    pub device: device::DeviceRequest,
    /// Overrides lstm.max_epochs.
    pub epochs: Option<usize>,
    /// Continue from the checkpoint in state_dir/checkpoints/lstm/.
    pub resume: bool,
    /// JSON lines on stdout: epoch events, then done (model id, metrics) or error.
    pub json: bool,
}

/// Trains PPO and registers the model as a candidate; returns its id. With `json`, an error is also
/// reported as an `{"event": "error"}` line (the retrain child's protocol).
pub(crate) fn train_ppo(job: PpoJob) -> anyhow::Result<String> {
    let json = job.json;
    let result = train_ppo_inner(job);
    if json && let Err(e) = &result {
        emit_error(e);
    }
    result
}

/// Trains SAC and registers its policy as a candidate; returns its id. With `json`, an error is also
/// reported as an `{"event": "error"}` line.
pub(crate) fn train_sac(job: SacJob) -> anyhow::Result<String> {
    let json = job.json;
    let result = train_sac_inner(job);
    if json && let Err(e) = &result {
        emit_error(e);
    }
    result
}

/// Trains the LSTM classifier and registers the model as a candidate; returns its id. With `json`, an
/// error is also reported as an `{"event": "error"}` line.
pub(crate) fn train_lstm(job: LstmJob) -> anyhow::Result<String> {
    let json = job.json;
    let result = train_lstm_inner(job);
    if json && let Err(e) = &result {
        emit_error(e);
    }
    result
}

#[cfg(feature = "train")]
fn train_ppo_inner(job: PpoJob) -> anyhow::Result<String> {
    let Some(threads) = job.threads else { return ppo::run(job) };
    if threads == 0 {
        anyhow::bail!("--threads 0: give at least 1 (or leave it out for every core)");
    }
    tch::set_num_threads(threads as i32);
    let pool = rayon::ThreadPoolBuilder::new()
        .num_threads(threads)
        .thread_name(|i| format!("train-{i}"))
        .build()
        .map_err(|e| anyhow::anyhow!("cannot start {threads} training threads: {e}"))?;
    // The env's chunks and the native trainer's GEMM blocks run on the current rayon pool: this one.
    pool.install(|| ppo::run(job))
}

#[cfg(feature = "train")]
fn train_lstm_inner(job: LstmJob) -> anyhow::Result<String> {
    lstm::run(job)
}

#[cfg(not(feature = "train"))]
fn train_ppo_inner(_: PpoJob) -> anyhow::Result<String> {
    anyhow::bail!(
        "this tradebot was built without training (the `train` cargo feature, which links libtorch): rebuild with default features (`make build`) to train"
    )
}

#[cfg(feature = "train")]
fn train_sac_inner(job: SacJob) -> anyhow::Result<String> {
    sac::run(job)
}

#[cfg(not(feature = "train"))]
fn train_sac_inner(_: SacJob) -> anyhow::Result<String> {
    anyhow::bail!("tradebot train sac needs a build with the `train` feature (libtorch)")
}

#[cfg(not(feature = "train"))]
fn train_lstm_inner(_: LstmJob) -> anyhow::Result<String> {
    anyhow::bail!("tradebot train lstm needs a build with the `train` feature (libtorch)")
}

/// Prints one JSON line on stdout (the child protocol), flushed at once so the parent sees it live.
pub(crate) fn emit(v: &serde_json::Value) {
    use std::io::Write;
    let mut out = std::io::stdout().lock();
    let _ = writeln!(out, "{v}");
    let _ = out.flush();
}

pub(crate) fn emit_error(e: &anyhow::Error) {
    let message = e.chain().map(|c| c.to_string()).collect::<Vec<_>>().join(": ");
    emit(&serde_json::json!({ "event": "error", "message": message }));
}

/// A torch device as the config and the command line name it: `cpu`, `cuda:0`, ...
#[cfg(feature = "train")]
pub(crate) fn device_name(d: tch::Device) -> String {
    match d {
        tch::Device::Cpu => "cpu".into(),
        tch::Device::Cuda(i) => format!("cuda:{i}"),
        tch::Device::Mps => "mps".into(),
        tch::Device::Vulkan => "vulkan".into(),
    }
}

/// The torch device a job asks for (`device::DeviceRequest`: `cpu`, `cuda[:N]`, refused with the reason
/// when that CUDA device is not usable, or `auto`, which falls back to the CPU with one WARN).
#[cfg(feature = "train")]
pub(crate) fn pick_device(request: &device::DeviceRequest) -> anyhow::Result<tch::Device> {
    device::resolve(*request)
}

#[cfg(test)]
mod tests {
    /// `train ppo --steps 20000` on the default 64 envs × 256 steps trains 2 updates, 32,768 steps, and
    /// says so.
    #[test]
    fn steps_round_up_to_whole_updates_and_the_rounding_is_said() {
        let (updates, steps, note) = super::whole_updates(20_000, 64, 256);
        assert_eq!((updates, steps), (2, 32_768));
        assert_eq!(
            note.as_deref(),
            Some("20,000 steps round up to 2 whole updates of 16,384 (64 envs × 256 steps, ppo.n_steps): 32,768 steps")
        );
        assert_eq!(super::whole_updates(20_000, 64, 64).1, 20_480);
        assert_eq!(super::whole_updates(32_768, 64, 256), (2, 32_768, None));
        assert_eq!(super::whole_updates(1, 64, 256).0, 1);
    }
}
