//! PPO on a `BatchEnv`, with the rollout buffers on the training device.
//!
//! Per update: roll out `n_steps` × E transitions under `no_grad` (observations normalised with running
//! statistics, Gaussian actions sampled on the device); compute GAE(λ) advantages backwards in time;
//! then `n_epochs` passes of shuffled minibatches minimising the clipped surrogate, the (optionally
//! clipped) value loss and the negative entropy bonus, with advantage normalisation per minibatch,
//! global gradient-norm clipping and Adam with linear learning-rate annealing; an optional target-KL
//! check ends the epochs early. On CPU a run is deterministic for a given seed.
//!
//! On the CPU the same algorithm runs in plain Rust by default (`native`, `ppo.cpu_backend`): libtorch's
//! per-operation dispatch dominates small networks there. The weights, the observation statistics and
//! Adam's moments live in the `VarStore` either way (copied back after every update), so checkpoints,
//! export and `act_deterministic` do not depend on the backend.

mod gae;
pub mod model;
mod native;
mod net;
pub mod normalizer;
pub mod population;

pub use crate::config::{CpuBackend, PpoConfig};
pub use model::ActorCritic;
pub use normalizer::RunningNorm;

use super::BatchEnv;
use crate::onnx::mlp::{MlpPolicy, ObsNorm};
use std::collections::VecDeque;
use std::time::Instant;
use tch::{Device, Kind, Tensor, nn};

#[derive(Debug, thiserror::Error)]
pub enum PpoError {
    #[error("invalid PPO configuration: {0}")]
    Config(String),
    #[error("the environment has {env} {what} but the policy expects {policy}")]
    Shape { what: &'static str, env: usize, policy: usize },
    #[error("training diverged: {0} is not finite at update {1}")]
    Diverged(&'static str, u64),
    #[error("the training environment failed: {0}")]
    Env(String),
    #[error("{0}; `tradebot doctor` shows the driver, NVRTC and the GPU; or train with --device cpu")]
    Device(String),
    #[error(transparent)]
    Torch(#[from] tch::TchError),
}

/// What one update did, for progress bars, JSON lines and tests.
#[derive(Debug, Clone, serde::Serialize)]
pub struct UpdateStats {
    pub update: u64,
    pub env_steps: u64,
    pub steps_per_sec: f64,
    /// Mean return of the last (up to) 20 finished episodes; for an env that sums returns on the device
    /// (the env kernel), of the episodes of the last update that finished any.
    pub mean_return: Option<f64>,
    pub episodes: u64,
    pub approx_kl: f64,
    pub clip_fraction: f64,
    pub explained_variance: f64,
    pub policy_loss: f64,
    pub value_loss: f64,
    pub entropy: f64,
    pub learning_rate: f64,
    pub epochs_run: usize,
}

pub struct Ppo {
    pub cfg: PpoConfig,
    pub vs: nn::VarStore,
    pub model: ActorCritic,
    pub norm: RunningNorm,
    /// Adam (libtorch's formula, `eps` 1e-5), its state in the `VarStore` (`adam.m`, `adam.v`, `adam.step`)
    /// in `ActorCritic::parameters()` order, the native trainer's order too.
    adam: crate::optim::Adam,
    /// The plain-Rust trainer on the CPU (`ppo.cpu_backend = "native"`).
    native: Option<native::Native>,
    /// GAE as one kernel launch, on CUDA.
    gae: Option<gae::GaeKernel>,
    obs_dim: usize,
    act_dim: usize,
    pub env_steps: u64,
    pub updates: u64,
    recent: VecDeque<f64>,
    /// The mean return of the last update that finished an episode, for environments that sum returns
    /// on the device (`BatchEnv::take_returns`).
    device_mean: Option<f64>,
    episodes: u64,
}

/// The rollout of one update, `[T, E, ...]` (a population's `[T, P, E, ...]`), on the training device.
struct Rollout {
    obs: Tensor,
    actions: Tensor,
    log_probs: Tensor,
    values: Tensor,
    rewards: Tensor,
    dones: Tensor,
    last_value: Tensor,
}

use crate::readback::scalar;

/// An update's statistics from the eight values read back after it (the sums over its `batches`
/// minibatches of the loss, policy loss, value loss, approximate KL and clip fraction; the variance of the
/// returns and of their residuals; the entropy); a loss that is not finite is reported as divergence at
/// update `update`.
fn update_stats(v: &[f64], batches: usize, epochs_run: usize, update: u64) -> Result<UpdateStats, PpoError> {
    let [loss, pl, vl, kl, cf, var_ret, var_resid, entropy] = v[..] else {
        return Err(PpoError::Config(format!("the update's statistics came back as {} values, not 8", v.len())));
    };
    if !loss.is_finite() {
        return Err(PpoError::Diverged("loss", update));
    }
    let b = batches.max(1) as f64;
    Ok(UpdateStats {
        update: 0,
        env_steps: 0,
        steps_per_sec: 0.0,
        mean_return: None,
        episodes: 0,
        approx_kl: kl / b,
        clip_fraction: cf / b,
        explained_variance: if var_ret > 0.0 { 1.0 - var_resid / var_ret } else { 0.0 },
        policy_loss: pl / b,
        value_loss: vl / b,
        entropy,
        learning_rate: 0.0,
        epochs_run,
    })
}

impl Ppo {
    pub fn new(cfg: PpoConfig, obs_dim: usize, act_dim: usize, device: Device) -> Result<Ppo, PpoError> {
        cfg.validate().map_err(PpoError::Config)?;
        let vs = nn::VarStore::new(device);
        let model = crate::seeded::seeded(cfg.seed, || ActorCritic::new(&vs.root(), obs_dim, act_dim, &cfg));
        let norm = RunningNorm::new(&(vs.root() / "obs_norm"), obs_dim, cfg.obs_clip);
        let adam = crate::optim::Adam::new(&vs.root(), model.parameters(), native::ADAM_EPS, 0.0);
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
        nat.norm.count = scalar(&self.norm.count)?;
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

    pub fn device(&self) -> Device {
        self.vs.device()
    }

    fn amp(&self) -> bool {
        self.cfg.mixed_precision && self.device().is_cuda()
    }

    fn observe(&mut self, raw: &Tensor) -> Tensor {
        let raw = raw.to_device(self.device()).to_kind(Kind::Float);
        if self.cfg.normalize_obs {
            self.norm.update(&raw);
            self.norm.normalize(&raw)
        } else {
            raw
        }
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
            crate::autocast::bfloat16_on_this_thread();
        }
        // The libtorch path carries its observations as a tensor; the native one inside `Native`.
        let mut obs = None;
        if self.native.is_some() {
            self.pull_native()?;
            if let Some(nat) = self.native.as_mut() {
                nat.reseed(self.cfg.seed, self.updates);
                nat.reset(&self.cfg, env)?;
            }
        } else {
            obs = Some(self.observe(&env.reset()));
        }
        while self.updates < end {
            let started = Instant::now();
            let lr = if self.cfg.anneal_lr {
                self.cfg.learning_rate * (1.0 - self.updates.saturating_sub(first) as f64 / span)
            } else {
                self.cfg.learning_rate
            };
            let mut stats = match (self.native.as_mut(), obs.take()) {
                (Some(nat), _) => {
                    nat.collect(&self.cfg, env, &mut self.recent, &mut self.episodes)?;
                    nat.update(&self.cfg, lr, &mut self.adam.steps, self.updates)?
                }
                (None, Some(o)) => {
                    let (rollout, next_obs) = self.collect(env, o);
                    obs = Some(next_obs);
                    self.update(&rollout, lr)?
                }
                (None, None) => {
                    let o = self.observe(&env.reset());
                    let (rollout, next_obs) = self.collect(env, o);
                    obs = Some(next_obs);
                    self.update(&rollout, lr)?
                }
            };
            if let Some(e) = env.take_error() {
                return Err(PpoError::Env(e));
            }
            if let Some((sum, count)) = env.take_returns()
                && count > 0.0
            {
                self.device_mean = Some(sum / count);
                self.episodes += count as u64;
            }
            self.push_native();
            self.updates += 1;
            self.env_steps += per_update;
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

    /// Writes the variables (networks, log-std, observation statistics) to `path`.
    pub fn save_weights(&self, path: &std::path::Path) -> Result<(), PpoError> {
        Ok(self.vs.save(path)?)
    }

    /// Loads variables written by `save_weights` into this trainer (the shapes must match), Adam's moments
    /// and step count included. A checkpoint from before they were saved loads with fresh moments (logged).
    pub fn load_weights(&mut self, path: &std::path::Path) -> Result<(), PpoError> {
        let missing = self.vs.load_partial(path)?;
        if let Some(name) = missing.iter().find(|n| !crate::optim::Adam::is_state(n)) {
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

    fn collect<E: BatchEnv + ?Sized>(&mut self, env: &mut E, mut obs: Tensor) -> (Rollout, Tensor) {
        let t_len = self.cfg.n_steps;
        let (mut o, mut a, mut lp, mut v, mut r, mut d) = (vec![], vec![], vec![], vec![], vec![], vec![]);
        for _ in 0..t_len {
            let (action, log_prob, value) = tch::no_grad(|| {
                tch::autocast(self.amp(), || {
                    let mean = self.model.mean(&obs).to_kind(Kind::Float);
                    let action = &mean + self.model.log_std().exp() * mean.randn_like();
                    let log_prob = self.model.log_prob(&mean, &action);
                    (action, log_prob, self.model.value(&obs).to_kind(Kind::Float))
                })
            });
            let step = env.step(&action.to_device(env.device()));
            for ret in &step.finished {
                self.recent.push_back(*ret);
                if self.recent.len() > 20 {
                    self.recent.pop_front();
                }
                self.episodes += 1;
            }
            o.push(obs);
            a.push(action);
            lp.push(log_prob);
            v.push(value);
            r.push(step.reward.to_device(self.device()).to_kind(Kind::Float));
            d.push(step.done.to_device(self.device()).to_kind(Kind::Float));
            obs = self.observe(&step.obs);
        }
        let last_value = tch::no_grad(|| self.model.value(&obs).to_kind(Kind::Float));
        let rollout = Rollout {
            obs: Tensor::stack(&o, 0),
            actions: Tensor::stack(&a, 0),
            log_probs: Tensor::stack(&lp, 0),
            values: Tensor::stack(&v, 0),
            rewards: Tensor::stack(&r, 0),
            dones: Tensor::stack(&d, 0),
            last_value,
        };
        (rollout, obs)
    }

    /// GAE(λ): advantages `[T, E]`, computed backwards on the device: one kernel launch on CUDA
    /// (`gae::GaeKernel`; its failure is the update's error), the tensor ops elsewhere.
    fn advantages(&self, ro: &Rollout) -> Result<Tensor, PpoError> {
        let (gamma, lambda) = (self.cfg.gamma, self.cfg.gae_lambda);
        if let Some(k) = &self.gae {
            return k
                .advantages(gamma, lambda, &ro.rewards, &ro.values, &ro.dones, &ro.last_value)
                .map_err(|e| PpoError::Device(format!("the GAE kernel failed: {e}")));
        }
        Ok(gae::gae_ops(gamma, lambda, &ro.rewards, &ro.values, &ro.dones, &ro.last_value))
    }

    /// The epochs of minibatch steps on one rollout. The statistics are summed on the device and read
    /// once at the end (with a target KL, each epoch's mean KL is read too): no host read per minibatch.
    fn update(&mut self, ro: &Rollout, lr: f64) -> Result<UpdateStats, PpoError> {
        let adv = tch::no_grad(|| self.advantages(ro))?;
        let returns = &adv + &ro.values;
        let n = adv.numel() as i64;
        let flat = |t: &Tensor| t.reshape([n, -1]);
        let (obs, actions) = (flat(&ro.obs), flat(&ro.actions));
        let (old_lp, old_v, adv, returns) =
            (ro.log_probs.reshape([n]), ro.values.reshape([n]), adv.reshape([n]), returns.reshape([n]));
        let device = self.device();
        let zero = || Tensor::zeros([] as [i64; 0], (Kind::Double, device));
        // loss, policy loss, value loss, approximate KL, clip fraction: f64 sums, in minibatch order.
        let mut sums: [Tensor; 5] = std::array::from_fn(|_| zero());
        let (mut batches, mut epochs_run) = (0usize, 0);
        let bs = self.cfg.batch_size.min(n as usize) as i64;
        'epochs: for _ in 0..self.cfg.n_epochs {
            epochs_run += 1;
            let perm = Tensor::randperm(n, (Kind::Int64, self.device()));
            let (mut epoch_kl, mut epoch_batches) = (zero(), 0);
            for start in (0..n).step_by(bs as usize) {
                let idx = perm.narrow(0, start, bs.min(n - start));
                let pick = |t: &Tensor| t.index_select(0, &idx);
                let batch = [&obs, &actions, &old_lp, &old_v, &adv, &returns].map(pick);
                let s = self.tch_minibatch(&batch, lr);
                for (sum, x) in sums.iter_mut().zip(&s) {
                    *sum = &*sum + x.to_kind(Kind::Double);
                }
                epoch_kl += s[3].to_kind(Kind::Double);
                batches += 1;
                epoch_batches += 1;
            }
            if let Some(target) = self.cfg.target_kl
                && scalar(&epoch_kl)? / epoch_batches.max(1) as f64 > 1.5 * target
            {
                break 'epochs;
            }
        }
        let tail = tch::no_grad(|| {
            [returns.var(false), (&returns - &old_v).var(false), self.model.entropy()].map(|t| t.to_kind(Kind::Double))
        });
        let all: Vec<Tensor> = sums.iter().chain(&tail).map(Tensor::shallow_clone).collect();
        let v = crate::readback::f64s(&Tensor::stack(&all, 0))?;
        update_stats(&v, batches, epochs_run, self.updates + 1)
    }

    /// One gradient step on a minibatch `[obs, actions, old log-prob, old value, advantage, return]`;
    /// returns the detached loss, policy loss, value loss, approximate KL and clip fraction, on the device.
    fn tch_minibatch(&mut self, b: &[Tensor; 6], lr: f64) -> [Tensor; 5] {
        let [o, a, olp, ov, ad, ret] = b;
        let mut ad = ad.shallow_clone();
        if self.cfg.normalize_advantage && ad.numel() > 1 {
            ad = (&ad - ad.mean(Kind::Float)) / (ad.std(true) + 1e-8);
        }
        let (mean, value) = tch::autocast(self.amp(), || (self.model.mean(o), self.model.value(o)));
        let (mean, value) = (mean.to_kind(Kind::Float), value.to_kind(Kind::Float));
        let log_ratio = self.model.log_prob(&mean, a) - olp;
        let ratio = log_ratio.exp();
        let clip = self.cfg.clip_range;
        let pg = -(&ratio * &ad).min_other(&(ratio.clamp(1.0 - clip, 1.0 + clip) * &ad)).mean(Kind::Float);
        let vl = match self.cfg.clip_range_vf {
            Some(c) => {
                let clipped = ov + (&value - ov).clamp(-c, c);
                (&value - ret).square().max_other(&(clipped - ret).square()).mean(Kind::Float) * 0.5
            }
            None => (&value - ret).square().mean(Kind::Float) * 0.5,
        };
        let entropy = self.model.entropy();
        let loss = &pg + &vl * self.cfg.vf_coef - &entropy * self.cfg.ent_coef;
        self.adam.zero_grad();
        loss.backward();
        self.adam.clip_grad_norm(self.cfg.max_grad_norm);
        self.adam.step(lr);
        tch::no_grad(|| {
            let kl = ((&ratio - 1.0) - &log_ratio).mean(Kind::Float);
            let cf = (&ratio - 1.0).abs().gt(clip).to_kind(Kind::Float).mean(Kind::Float);
            [loss.detach(), pg.detach(), vl.detach(), kl, cf]
        })
    }

    /// The deterministic policy as plain weights for the ONNX writer, normalisation included.
    pub fn export_policy(&self, action_clip: Option<f32>) -> Result<MlpPolicy, PpoError> {
        let (hidden, head) = self.model.policy_layers()?;
        let to_vec = |t: &Tensor| Vec::<f32>::try_from(t.to_device(Device::Cpu).to_kind(Kind::Float).contiguous());
        let norm = if self.cfg.normalize_obs {
            Some(ObsNorm {
                mean: to_vec(&self.norm.mean)?,
                var: to_vec(&self.norm.var)?,
                eps: self.norm.eps as f32,
                clip: self.norm.clip as f32,
            })
        } else {
            None
        };
        Ok(MlpPolicy { norm, hidden, activation: self.model.activation(), head, action_clip })
    }
}

#[cfg(test)]
mod tests;
