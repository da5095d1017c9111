//! How the training child of a retrain is launched: its command line (`tradebot train|tune <kind> --config F
//! --json`, the step, epoch and time budgets of `[retrain]`, and `--warm-start CHAMPION` with
//! `retrain.warm_start`) and its environment (the snapshot, the
//! engine's day, the seed, the GPU and memory budgets).

use super::child::ChildSpec;
use super::spec::PipelineSpec;
use crate::models::{Algorithm, ModelKind};
use chrono::{DateTime, Utc};
use std::ffi::OsString;

/// The environment variable naming the dataset snapshot the training child reads.
pub const SNAPSHOT_ENV: &str = "TRADEBOT_TRAIN_SNAPSHOT";
/// The share of `retrain.time_budget` a search (`retrain.tune`) may spend training; the rest is for
/// exporting and registering its best trial before the child's budget runs out.
pub const TUNE_SHARE_OF_BUDGET: f64 = 0.8;
/// The environment variable carrying the child's GPU memory budget in MiB (absent = no cap).
pub const GPU_MEMORY_ENV: &str = "TRADEBOT_GPU_MEMORY_MB";
/// libtorch's CUDA allocator settings, read by the child's libtorch at its first allocation.
pub const ALLOC_CONF_ENV: &str = "PYTORCH_CUDA_ALLOC_CONF";

/// The CUDA device the training child runs on: `--device auto` is `cuda:0` of the child, which inherits
/// this process's `CUDA_VISIBLE_DEVICES` and `CUDA_DEVICE_ORDER`, so it is this process's `cuda:0` too.
#[cfg(feature = "train")]
const CHILD_CUDA_ORDINAL: usize = 0;

/// The child's libtorch held to `budget_mb` of its GPU (its per-process memory fraction, from the total of
/// the NVML GPU that is the child's CUDA device, `crate::ml::gpu::total_memory_mb`), so that the trainer fails its own allocation past the budget rather than filling the
/// GPU; `None` where there is no GPU to cap (the `nvidia-smi` watch in `child` stays as the backstop).
fn gpu_alloc_conf(budget_mb: u64) -> Option<String> {
    #[cfg(feature = "train")]
    match crate::ml::gpu::total_memory_mb(CHILD_CUDA_ORDINAL) {
        Ok(total) => {
            let existing = std::env::var(ALLOC_CONF_ENV).ok();
            let conf = crate::ml::gpu::alloc_conf(budget_mb, total, existing.as_deref());
            log::debug!("retrain: the child's GPU memory is capped at {budget_mb} of {total} MiB ({conf})");
            Some(conf)
        }
        Err(e) => {
            log::debug!("retrain: no GPU memory cap for the child: {e}");
            None
        }
    }
    #[cfg(not(feature = "train"))]
    {
        let _ = budget_mb;
        None
    }
}

impl PipelineSpec {
    /// The policy algorithms a retrain of `kind` trains a candidate of (`retrain.algorithms` for the
    /// policy; the LSTM is one model).
    pub(super) fn algorithms(&self, kind: ModelKind) -> Vec<Algorithm> {
        match kind {
            ModelKind::Ppo if !self.retrain.algorithms.is_empty() => self.retrain.algorithms.clone(),
            _ => vec![Algorithm::Ppo],
        }
    }

    /// Whether the candidate of `algorithm` in a `kind` retrain starts from the champion
    /// (`retrain.warm_start`): a policy's (PPO or SAC), trained in one run (not a search; SAC never searches).
    pub(super) fn warm_starts(&self, kind: ModelKind, algorithm: Algorithm) -> bool {
        let searched = self.retrain.tune && algorithm == Algorithm::Ppo;
        self.retrain.warm_start && kind == ModelKind::Ppo && !searched
    }

    /// The child of a `kind` retrain training `algorithm` on the snapshot at `snapshot`, as of `as_of`,
    /// seeded with `seed`; told to start from `champion` (`--warm-start`) where `warm_starts`.
    pub(super) fn child_spec(
        &self,
        kind: ModelKind,
        algorithm: Algorithm,
        snapshot: &std::path::Path,
        (as_of, seed): (DateTime<Utc>, u64),
        champion: Option<&str>,
    ) -> ChildSpec {
        let mut args = self.program_args.clone();
        let sac = kind == ModelKind::Ppo && algorithm == Algorithm::Sac;
        let search = kind == ModelKind::Ppo && self.retrain.tune && !sac;
        let name = if sac { algorithm.as_str() } else { kind.as_str() };
        args.extend([if search { "tune" } else { "train" }.into(), name.into(), "--config".into()]);
        args.push(self.config_file.clone().into_os_string());
        args.push("--json".into());
        match kind {
            ModelKind::Ppo if sac => {
                if let Some(n) = self.retrain.sac_steps {
                    args.extend(["--steps".into(), n.to_string().into()]);
                }
                if let Some(id) = champion.filter(|_| self.warm_starts(kind, algorithm)) {
                    args.extend(["--warm-start".into(), id.into()]);
                }
            }
            ModelKind::Ppo if search => {
                // The search stops with time to spare for registering its best trial before the child's
                // budget kills it; each trial trains at most ppo_steps (else tune.budget_steps).
                let secs = (self.retrain.time_budget.as_secs_f64() * TUNE_SHARE_OF_BUDGET).max(1.0);
                args.extend(["--device".into(), "auto".into(), "--time-budget".into(), format!("{secs:.0}s").into()]);
                if let Some(n) = self.retrain.ppo_steps {
                    args.extend(["--budget-steps".into(), n.to_string().into()]);
                }
            }
            ModelKind::Ppo => {
                if let Some(n) = self.retrain.ppo_steps {
                    args.extend(["--steps".into(), n.to_string().into()]);
                }
                if let Some(id) = champion.filter(|_| self.warm_starts(kind, algorithm)) {
                    args.extend(["--warm-start".into(), id.into()]);
                }
            }
            ModelKind::Lstm => {
                if let Some(n) = self.retrain.lstm_epochs {
                    args.extend(["--epochs".into(), n.to_string().into()]);
                }
            }
        }
        let mut env = vec![
            (OsString::from(SNAPSHOT_ENV), snapshot.as_os_str().to_owned()),
            // A rolling `[train]` window resolves on the engine's day, in the child as here.
            (OsString::from(crate::config::AS_OF_ENV), as_of.date_naive().to_string().into()),
            (OsString::from(crate::config::SEED_ENV), seed.to_string().into()),
        ];
        if self.retrain.gpu_memory_mb > 0 {
            env.push((GPU_MEMORY_ENV.into(), self.retrain.gpu_memory_mb.to_string().into()));
            if let Some(conf) = gpu_alloc_conf(self.retrain.gpu_memory_mb) {
                env.push((ALLOC_CONF_ENV.into(), conf.into()));
            }
        }
        let memory_mb = self.retrain.memory_mb.or_else(crate::retrain::memory::default_budget_mb).unwrap_or(0);
        if memory_mb > 0 {
            env.push((crate::retrain::memory::MEMORY_ENV.into(), memory_mb.to_string().into()));
        }
        ChildSpec {
            program: self.program.clone(),
            args,
            time_budget: self.retrain.time_budget,
            gpu_memory_mb: self.retrain.gpu_memory_mb,
            memory_mb,
            env,
        }
    }
}
