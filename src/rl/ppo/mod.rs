//! PPO on a `BatchEnv`, with the rollout buffers on the training device.
//!
//! Per update: roll out `n_steps` × E transitions under `no_grad` (observations normalised with running
//! statistics, Gaussian actions sampled on the device); compute GAE(λ) advantages backwards in time;
//! then `n_epochs` passes of shuffled minibatches minimising the clipped surrogate, the (optionally
//! clipped) value loss and the negative entropy bonus, with advantage normalisation per minibatch,
//! global gradient-norm clipping and Adam with linear learning-rate annealing; an optional target-KL
//! check ends the epochs early. On CPU a run is deterministic for a given seed.
//!
//! On libtorch (CUDA, and the CPU with `ppo.cpu_backend = "libtorch"`) a run is a population of one
//! (`population::Population::single`): one implementation of the rollout and update for single runs and
//! searches. On the CPU the same algorithm runs in plain Rust by default (`native`, `ppo.cpu_backend`):
//! libtorch's per-operation dispatch dominates small networks there. The weights, the observation statistics and
//! Adam's moments live in the `VarStore` either way (copied back after every update), so checkpoints,
//! export and `act_deterministic` do not depend on the backend.

mod fma_gemm;
mod gae;
mod lanes;
pub mod model;
mod native;
mod net;
pub mod normalizer;
pub mod population;
mod stats;

pub use crate::config::{CpuBackend, PpoConfig, PpoShape, PpoTuned};
pub use model::ActorCritic;
pub use normalizer::RunningNorm;
use population::{OneEnv, Population};
pub use stats::UpdateStats;
use stats::update_stats;

use super::BatchEnv;
use crate::onnx::mlp::{MlpPolicy, Squash};
use std::collections::VecDeque;
use std::time::Instant;
use tch::{Device, Kind, Tensor, nn};

/// Why a PPO trainer could not be built or an update failed; training stops with it.
#[derive(Debug, thiserror::Error)]
pub enum PpoError {
    /// The settings do not fit together or with the model (the message says which).
    #[error("invalid PPO configuration: {0}")]
    Config(String),
    /// A `[ppo]` value is out of its range (`PpoConfig::validate`).
    #[error("invalid PPO configuration: {0}")]
    Invalid(crate::config::Invalid),
    /// The environment's observation or action size differs from the policy's.
    #[error("the environment has {env} {what} but the policy expects {policy}")]
    Shape {
        /// `observations` or `actions`.
        what: &'static str,
        /// The environment's size.
        env: usize,
        /// The policy's size.
        policy: usize,
    },
    /// A loss or statistic (named) became NaN or infinite at the update (numbered).
    #[error("training diverged: {0} is not finite at update {1}")]
    Diverged(&'static str, u64),
    /// An update's statistics came back from the device with another count of values.
    #[error("an update's statistics came back as {values} values, not {expected}")]
    Readback {
        /// Values that came back.
        values: usize,
        /// Values expected (eight per trial).
        expected: usize,
    },
    /// The env kernel of a population failed (reading the trials' returns back).
    #[error("the training environment failed: {0}")]
    Env(#[from] crate::env::kernel::KernelEnvError),
    /// The env kernel of a population failed to take the actions or to step.
    #[error("the training environment failed: the env kernel's step failed: {0}")]
    KernelStep(#[source] crate::env::kernel::KernelEnvError),
    /// A step of the environments failed.
    #[error("the training environment failed: {0}")]
    Step(#[from] crate::rl::StepError),
    /// The training device cannot run the trainer (e.g. the GAE kernel does not load on CUDA).
    #[error("{0}; `tradebot doctor` shows the driver, NVRTC and the GPU; or train with --device cpu")]
    Device(String),
    /// A tensor operation failed in libtorch.
    #[error(transparent)]
    Torch(#[from] tch::TchError),
}

/// A PPO trainer: the actor-critic, its optimiser and observation statistics, and the counts of steps and updates;
/// `train` runs it on a `BatchEnv`.
pub struct Ppo {
    /// The `[ppo]` settings it trains with (checked at `new`).
    pub cfg: PpoConfig,
    /// Every variable: the weights, the observation statistics and Adam's state (what a checkpoint saves).
    pub vs: nn::VarStore,
    /// The actor (policy mean and log standard deviation) and the critic (value).
    pub model: ActorCritic,
    /// The running observation statistics (frozen into the exported ONNX graph).
    pub norm: RunningNorm,
    /// Adam's state in the `VarStore` (`adam.m`, `adam.v`, `adam.step`) in `ActorCritic::parameters()` order,
    /// the native trainer's order too; the population of one or the native trainer steps it (`eps` 1e-5) and
    /// writes it back after every update.
    adam: crate::ml::optim::Adam,
    /// The plain-Rust trainer on the CPU (`ppo.cpu_backend = "native"`).
    native: Option<native::Native>,
    /// GAE as one kernel launch, on CUDA (loaded when the trainer is built, so that a kernel that cannot load
    /// refuses the trainer there).
    gae: Option<gae::GaeKernel>,
    obs_dim: usize,
    act_dim: usize,
    /// Environment steps trained on so far, all envs counted.
    pub env_steps: u64,
    /// Updates done so far.
    pub updates: u64,
    recent: VecDeque<f64>,
    /// The mean return of the last update that finished an episode, for environments that sum returns
    /// on the device (`BatchEnv::take_returns`).
    device_mean: Option<f64>,
    episodes: u64,
}

impl Ppo {
    /// A trainer on `device` for observations of `obs_dim` and actions of `act_dim` values, its weights seeded by
    /// `cfg.seed`; refuses an invalid `cfg`, and on CUDA a GAE kernel that does not load.
    pub fn new(cfg: PpoConfig, obs_dim: usize, act_dim: usize, device: Device) -> Result<Ppo, PpoError> {
        cfg.validate().map_err(PpoError::Invalid)?;
        let vs = nn::VarStore::new(device);
        let model = crate::ml::seeded::seeded(cfg.seed, || ActorCritic::new(&vs.root(), obs_dim, act_dim, &cfg));
        let norm = RunningNorm::new(&(vs.root() / "obs_norm"), obs_dim, cfg.obs_clip);
        let adam = crate::ml::optim::Adam::new(&vs.root(), model.parameters(), crate::ml::optim::PPO_EPS, 0.0);
        let native = (device == Device::Cpu && cfg.cpu_backend == CpuBackend::Native).then(|| {
            let layout = native::Layout::new(obs_dim, act_dim, &cfg.hidden);
            native::Native::new(layout, &cfg, Vec::new())
        });
        // On CUDA the GAE kernel loads or the trainer is refused: no quiet fall-back to another path.
        let gae = match device {
            Device::Cuda(i) => Some(
                gae::GaeKernel::new(device)
                    .map_err(|e| PpoError::Device(format!("the GAE kernel cannot load on cuda:{i}: {e}")))?,
            ),
            _ => None,
        };
        let mut ppo = Ppo {
            cfg,
            vs,
            model,
            norm,
            adam,
            native,
            gae,
            obs_dim,
            act_dim,
            env_steps: 0,
            updates: 0,
            recent: VecDeque::new(),
            device_mean: None,
            episodes: 0,
        };
        ppo.pull_native()?;
        Ok(ppo)
    }

    /// Which implementation trains: "native" (plain Rust on the CPU) or "libtorch".
    pub fn backend(&self) -> &'static str {
        if self.native.is_some() { "native" } else { "libtorch" }
    }

    /// Copies the `VarStore` (weights, observation statistics, Adam's state) into the native trainer.
    fn pull_native(&mut self) -> Result<(), PpoError> {
        let Some(nat) = self.native.as_mut() else { return Ok(()) };
        let params = self.model.parameters();
        let shapes: Vec<Vec<i64>> = params.iter().map(Tensor::size).collect();
        if shapes != nat.layout.shapes() {
            return Err(PpoError::Config(format!(
                "the native trainer's layout {:?} does not match the model's parameters {shapes:?}",
                nat.layout.shapes()
            )));
        }
        let host =
            |t: &Tensor| Vec::<f32>::try_from(t.f_to_device(Device::Cpu)?.f_to_kind(Kind::Float)?.f_reshape([-1])?);
        let flat: Vec<Tensor> = params.iter().map(|p| p.reshape([-1])).collect();
        nat.params = host(&Tensor::cat(&flat, 0))?;
        nat.adam_m = host(&self.adam.flat_m)?;
        nat.adam_v = host(&self.adam.flat_v)?;
        let wide = |t: &Tensor| host(t).map(|v| v.into_iter().map(f64::from).collect::<Vec<f64>>());
        nat.norm.mean = wide(&self.norm.mean)?;
        nat.norm.var = wide(&self.norm.var)?;
        nat.norm.count = crate::ml::readback::scalar(&self.norm.count)?;
        self.adam.load_steps()?;
        Ok(())
    }

    /// Copies the native trainer's state back into the `VarStore` (and Adam's step count in both cases).
    fn push_native(&mut self) {
        self.adam.store_steps();
        tch::no_grad(|| {
            let Some(nat) = self.native.as_ref() else { return };
            let device = self.device();
            let from = |v: &[f32], shape: &[i64]| Tensor::from_slice(v).view(shape).to_device(device);
            let mut off = 0;
            for mut p in self.model.parameters() {
                let n = p.numel();
                p.copy_(&from(&nat.params[off..off + n], &p.size()));
                off += n;
            }
            self.adam.flat_m.copy_(&from(&nat.adam_m, &[nat.adam_m.len() as i64]));
            self.adam.flat_v.copy_(&from(&nat.adam_v, &[nat.adam_v.len() as i64]));
            let narrow = |v: &[f64]| v.iter().map(|x| *x as f32).collect::<Vec<f32>>();
            let dim = nat.norm.mean.len() as i64;
            self.norm.mean.copy_(&from(&narrow(&nat.norm.mean), &[dim]));
            self.norm.var.copy_(&from(&narrow(&nat.norm.var), &[dim]));
            let _ = self.norm.count.fill_(nat.norm.count);
        })
    }

    /// The device it trains on.
    pub fn device(&self) -> Device {
        self.vs.device()
    }

    fn amp(&self) -> bool {
        self.cfg.mixed_precision && self.device().is_cuda()
    }

    /// The deterministic action (the mean) for raw observations `[N, obs_dim]`.
    pub fn act_deterministic(&self, raw: &Tensor) -> Tensor {
        tch::no_grad(|| {
            let raw = raw.to_device(self.device()).to_kind(Kind::Float);
            let x = if self.cfg.normalize_obs { self.norm.normalize(&raw) } else { raw };
            self.model.mean(&x)
        })
    }

    /// Trains for `total_steps` environment steps (rounded up to whole updates). `on_update` sees every
    /// update's statistics and returns `false` to stop early.
    pub fn train<E: BatchEnv + ?Sized>(
        &mut self,
        env: &mut E,
        total_steps: u64,
        mut on_update: impl FnMut(&UpdateStats) -> bool,
    ) -> Result<(), PpoError> {
        let per_update = (self.cfg.n_steps * env.num_envs()) as u64;
        let n_updates = total_steps.div_ceil(per_update).max(1);
        let first = self.updates;
        self.train_until(env, first, first + n_updates, |_, s| on_update(s))
    }

    /// Runs updates until `self.updates == end`, the learning rate annealed linearly over the schedule
    /// `first..end` (a resumed run passes the original schedule, so it continues where it stopped).
    /// `on_update` sees the trainer itself (to write a checkpoint) and the update's statistics, and
    /// returns `false` to stop early.
    pub fn train_until<E: BatchEnv + ?Sized>(
        &mut self,
        env: &mut E,
        first: u64,
        end: u64,
        mut on_update: impl FnMut(&Ppo, &UpdateStats) -> bool,
    ) -> Result<(), PpoError> {
        if env.obs_dim() != self.obs_dim {
            return Err(PpoError::Shape { what: "observations", env: env.obs_dim(), policy: self.obs_dim });
        }
        if env.act_dim() != self.act_dim {
            return Err(PpoError::Shape { what: "actions", env: env.act_dim(), policy: self.act_dim });
        }
        let per_update = (self.cfg.n_steps * env.num_envs()) as u64;
        let span = end.saturating_sub(first).max(1) as f64;
        if self.amp() {
            crate::ml::autocast::bfloat16_on_this_thread();
        }
        // The libtorch path is a population of one (built at the first update), written back after every
        // update; the native trainer keeps its own copy the same way.
        let mut pop: Option<Population> = None;
        self.pull_native()?;
        if let Some(nat) = self.native.as_mut() {
            nat.reseed(self.cfg.seed, self.updates);
            nat.reset(&self.cfg, env)?;
        }
        while self.updates < end {
            let started = Instant::now();
            let lr = self.learning_rate(first, span);
            let (updates, env_steps) = (self.updates, self.env_steps);
            let mut stats = match self.native.as_mut() {
                Some(nat) => {
                    nat.collect(&self.cfg, env, &mut self.recent, &mut self.episodes)?;
                    nat.update(&self.cfg, lr, &mut self.adam.steps, self.updates)?
                }
                None => {
                    let pop = match &mut pop {
                        Some(pop) => pop,
                        slot => slot.insert(Population::single(self)?),
                    };
                    let device = self.device();
                    let mut one =
                        OneEnv { env: &mut *env, device, recent: &mut self.recent, episodes: &mut self.episodes };
                    let stats = pop.update_one(&mut one, lr)?;
                    pop.write_back(0, self)?;
                    stats
                }
            };
            if let Some((sum, count)) = env.take_returns()?
                && count > 0.0
            {
                self.device_mean = Some(sum / count);
                self.episodes += count as u64;
            }
            self.push_native();
            self.updates = updates + 1;
            self.env_steps = env_steps + per_update;
            stats.update = self.updates;
            stats.env_steps = self.env_steps;
            stats.learning_rate = lr;
            stats.steps_per_sec = per_update as f64 / started.elapsed().as_secs_f64().max(1e-9);
            stats.mean_return = if self.recent.is_empty() {
                self.device_mean
            } else {
                Some(self.recent.iter().sum::<f64>() / self.recent.len() as f64)
            };
            stats.episodes = self.episodes;
            if !on_update(self, &stats) {
                break;
            }
        }
        Ok(())
    }

    /// The next update's learning rate: annealed linearly over the `span` updates of the schedule that
    /// began at update `first`, or constant.
    fn learning_rate(&self, first: u64, span: f64) -> f64 {
        if self.cfg.anneal_lr {
            self.cfg.learning_rate * (1.0 - self.updates.saturating_sub(first) as f64 / span)
        } else {
            self.cfg.learning_rate
        }
    }

    /// Writes the variables (networks, log-std, observation statistics) to `path`.
    pub fn save_weights(&self, path: &std::path::Path) -> Result<(), PpoError> {
        Ok(self.vs.save(path)?)
    }

    /// Loads variables written by `save_weights` into this trainer (the shapes must match), Adam's moments
    /// and step count included. A checkpoint from before they were saved loads with fresh moments (logged).
    pub fn load_weights(&mut self, path: &std::path::Path) -> Result<(), PpoError> {
        let missing = self.vs.load_partial(path)?;
        if let Some(name) = missing.iter().find(|n| !crate::ml::optim::Adam::is_state(n)) {
            return Err(PpoError::Config(format!(
                "checkpoint {} has no variable {name}: it was written for another network; \
                 train from scratch (without --resume) or point at the matching checkpoint",
                path.display()
            )));
        }
        if !missing.is_empty() {
            log::warn!(
                "checkpoint {} carries no optimizer state (written by an older tradebot): Adam's moments restart",
                path.display()
            );
            self.adam.reset();
        }
        self.adam.load_steps()?;
        self.pull_native()?;
        Ok(())
    }

    /// The deterministic policy as plain weights for the ONNX writer, normalisation included.
    pub fn export_policy(&self, action_clip: Option<f32>) -> Result<MlpPolicy, PpoError> {
        let (hidden, head) = self.model.policy_layers()?;
        let norm = if self.cfg.normalize_obs { Some(self.norm.frozen()?) } else { None };
        let squash = action_clip.map_or(Squash::Identity, Squash::Clip);
        Ok(MlpPolicy { norm, hidden, activation: self.model.activation(), head, squash })
    }
}

#[cfg(test)]
mod tests;
