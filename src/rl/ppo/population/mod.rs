//! PPO for a population: P trials of one network shape trained as one, their weights stacked along a trial
//! dimension so that a rollout step is one batched forward for all of them and an update one batched
//! forward and backward (`bmm`), their environments one env kernel launch (`TensorKernelEnv::stack`).
//! On a GPU, P small trials fill the device as one big one.
//!
//! Each trial keeps its own hyper-parameters (learning rate, clip range, entropy and value coefficients,
//! γ, λ, gradient-norm limit), its own Adam moments and step count, its own observation statistics and its
//! own random streams (`draws`: counter-based, seeded by the trial), and each trial's loss only reaches its
//! own weights. So a trial trains to the same weights alone or among any others (tested on the CPU, bit
//! for bit). What the trials must share is the shape: network, activation, env count, rollout length,
//! minibatch size and epochs, and the options that are not tuned (`PpoShape`; each trial's own values are
//! its `PpoTuned`).
//!
//! A single run is a population of one (`Population::single`, what `Ppo::train` runs on libtorch): its
//! rollout steps any `BatchEnv`, it may end its epochs early at `ppo.target_kl`, and on CUDA it computes
//! GAE as one kernel launch and its forward passes in bfloat16 where `ppo.mixed_precision` asks. A population
//! of several trains in float32, GAE as tensor ops with each trial's γ and λ (the kernel's factors are scalars).
//!
//! The trials come from and go back to ordinary `Ppo` trainers (`new` stacks them, `write_back` copies a
//! trial back for export, validation and registration), so checkpoints and ONNX export are unchanged.

mod draws;
mod rollout;
#[cfg(test)]
mod tests;

pub(in crate::rl::ppo) use rollout::OneEnv;
#[cfg(test)]
pub(in crate::rl::ppo) use rollout::Rollout;
pub use train::MemberResult;

use super::gae::GaeKernel;
use super::{Ppo, PpoError, PpoShape, PpoTuned};
use crate::onnx::Activation;
use tch::{Device, Kind, Tensor};

/// P PPO trials of one shape trained as one: weights stacked along a trial dimension, each trial with its own
/// hyper-parameters, optimiser state, statistics and random streams.
pub struct Population {
    /// What the trials share, and each trial's own values.
    shape: PpoShape,
    tuned: Vec<PpoTuned>,
    device: Device,
    obs_dim: i64,
    act_dim: i64,
    depth: usize,
    /// `ActorCritic::parameters()` stacked: each weight `[P, out, in]`, each bias `[P, out]`, log-std `[P, A]`.
    params: Vec<Tensor>,
    /// Adam's moments, shaped as `params`; each trial's step count, on the host and on the device (f64 `[P]`).
    m: Vec<Tensor>,
    v: Vec<Tensor>,
    adam_steps: Vec<u64>,
    adam_t: Tensor,
    /// The trials' own hyper-parameters on the device, uploaded when the population changes (a copy from the
    /// host waits for the device: none is made per minibatch).
    consts: Consts,
    /// Observation statistics: mean and variance `[P, obs]`, count `[P, 1]`.
    norm_mean: Tensor,
    norm_var: Tensor,
    norm_count: Tensor,
    /// Per trial: `[P]` i64 seeds; the rollout's step counter `[P]` (the noise stream's position).
    seeds: Tensor,
    /// Updates done so far, per trial.
    pub updates: Vec<u64>,
    /// Environment steps trained on so far, per trial (all its envs counted).
    pub env_steps: Vec<u64>,
    /// The last rollout's final observations `[P, E, obs]`, normalised: the next rollout starts there.
    next_obs: Option<Tensor>,
    /// A single run's forward passes in bfloat16 (`ppo.mixed_precision` on CUDA).
    amp: bool,
    /// A single run's GAE kernel (on CUDA).
    gae: Option<GaeKernel>,
}

/// Per-trial constants as tensors `[P, 1]` (f32) on the device.
fn per_trial(tuned: &[PpoTuned], device: Device, f: impl Fn(&PpoTuned) -> f64) -> Tensor {
    let v: Vec<f32> = tuned.iter().map(|c| f(c) as f32).collect();
    Tensor::from_slice(&v).to_device(device).unsqueeze(1)
}

/// Each trial's hyper-parameters as device tensors.
struct Consts {
    /// `[P, 1]`: clip range, γ, γλ.
    clip: Tensor,
    gamma: Tensor,
    gamma_lambda: Tensor,
    /// `[P]`: value and entropy coefficients (f32), gradient-norm limit (f64).
    vf: Tensor,
    ent: Tensor,
    max_grad_norm: Tensor,
}

impl Consts {
    fn new(tuned: &[PpoTuned], device: Device) -> Consts {
        let col = |f: fn(&PpoTuned) -> f64| per_trial(tuned, device, f);
        let max: Vec<f64> = tuned.iter().map(|c| c.max_grad_norm).collect();
        Consts {
            clip: col(|c| c.clip_range),
            gamma: col(|c| c.gamma),
            gamma_lambda: col(|c| c.gamma * c.gae_lambda),
            vf: col(|c| c.vf_coef).squeeze_dim(1),
            ent: col(|c| c.ent_coef).squeeze_dim(1),
            max_grad_norm: Tensor::from_slice(&max).to_device(device),
        }
    }
}

/// Adam step counts as an f64 `[P]` tensor on the device.
fn steps_tensor(steps: &[u64], device: Device) -> Tensor {
    Tensor::from_slice(&steps.iter().map(|&s| s as f64).collect::<Vec<_>>()).to_device(device)
}

impl Population {
    /// The trials of `members` (their weights, Adam state, observation statistics and counts) stacked.
    pub fn new(members: &[&Ppo]) -> Result<Population, PpoError> {
        let Some(first) = members.first() else {
            return Err(PpoError::Config("a population needs at least one trial".into()));
        };
        let shape = first.cfg.shape();
        for m in members {
            if m.cfg.shape() != shape || m.obs_dim != first.obs_dim || m.act_dim != first.act_dim {
                return Err(PpoError::Config(
                    "a population's trials must share the network, rollout, minibatches and untuned options".into(),
                ));
            }
            if m.device() != first.device() {
                return Err(PpoError::Config("a population's trials must be on one device".into()));
            }
        }
        if shape.target_kl.is_some() && members.len() > 1 {
            return Err(PpoError::Config(
                "ppo.target_kl ends a trial's epochs early, which trials trained in step cannot do: unset it".into(),
            ));
        }
        let device = first.device();
        let stack = |f: &dyn Fn(&Ppo) -> Vec<Tensor>| -> Vec<Tensor> {
            let each: Vec<Vec<Tensor>> = members.iter().map(|m| f(m)).collect();
            (0..each[0].len())
                .map(|i| Tensor::stack(&each.iter().map(|t| t[i].detach().copy()).collect::<Vec<_>>(), 0))
                .collect()
        };
        let params: Vec<Tensor> =
            stack(&|m| m.model.parameters()).into_iter().map(|t| t.set_requires_grad(true)).collect();
        let moments = |flat: &dyn Fn(&Ppo) -> &Tensor| {
            stack(&|m| {
                let mut off = 0;
                m.model
                    .parameters()
                    .iter()
                    .map(|p| {
                        let n = p.numel() as i64;
                        let t = flat(m).narrow(0, off, n).view(p.size().as_slice());
                        off += n;
                        t
                    })
                    .collect()
            })
        };
        let m = moments(&|p| &p.adam.flat_m);
        let v = moments(&|p| &p.adam.flat_v);
        let norm =
            stack(&|m| vec![m.norm.mean.shallow_clone(), m.norm.var.shallow_clone(), m.norm.count.shallow_clone()]);
        let tuned: Vec<PpoTuned> = members.iter().map(|m| m.cfg.tuned()).collect();
        let seeds: Vec<i64> = tuned.iter().map(|t| t.seed as i64).collect();
        let adam_steps: Vec<u64> = members.iter().map(|m| m.adam.steps).collect();
        Ok(Population {
            consts: Consts::new(&tuned, device),
            adam_t: steps_tensor(&adam_steps, device),
            shape,
            tuned,
            device,
            obs_dim: first.obs_dim as i64,
            act_dim: first.act_dim as i64,
            depth: first.cfg.hidden.len(),
            params,
            m,
            v,
            adam_steps,
            norm_mean: norm[0].shallow_clone(),
            norm_var: norm[1].shallow_clone(),
            norm_count: norm[2].shallow_clone(),
            seeds: draws::column(&seeds, device),
            updates: members.iter().map(|m| m.updates).collect(),
            env_steps: members.iter().map(|m| m.env_steps).collect(),
            next_obs: None,
            amp: false,
            gae: None,
        })
    }

    /// A single run as a population of one: `ppo`'s state stacked, with its mixed precision and its GAE
    /// kernel (on CUDA).
    pub(in crate::rl::ppo) fn single(ppo: &Ppo) -> Result<Population, PpoError> {
        let mut pop = Population::new(&[ppo])?;
        pop.amp = ppo.amp();
        pop.gae = ppo.gae.clone();
        Ok(pop)
    }

    /// How many trials it trains.
    pub fn len(&self) -> usize {
        self.tuned.len()
    }

    /// Whether it has no trial.
    pub fn is_empty(&self) -> bool {
        self.tuned.is_empty()
    }

    /// Keeps the trials at positions `keep` (ascending), as `TensorKernelEnv::keep` does for their envs.
    pub fn keep(&mut self, keep: &[usize]) -> Result<(), PpoError> {
        if keep.is_empty() || keep.windows(2).any(|w| w[0] >= w[1]) || keep.iter().any(|&k| k >= self.len()) {
            return Err(PpoError::Config("keep: the trials to keep must be ascending positions, at least one".into()));
        }
        let idx = Tensor::from_slice(&keep.iter().map(|&k| k as i64).collect::<Vec<_>>()).to_device(self.device);
        let pick = |t: &Tensor| t.detach().index_select(0, &idx);
        self.params = self.params.iter().map(|t| pick(t).set_requires_grad(true)).collect();
        self.m = self.m.iter().map(pick).collect();
        self.v = self.v.iter().map(pick).collect();
        for t in [&mut self.norm_mean, &mut self.norm_var, &mut self.norm_count, &mut self.seeds] {
            *t = pick(t);
        }
        self.next_obs = self.next_obs.as_ref().map(pick);
        let select = |v: &[u64]| keep.iter().map(|&k| v[k]).collect::<Vec<_>>();
        self.adam_steps = select(&self.adam_steps);
        self.updates = select(&self.updates);
        self.env_steps = select(&self.env_steps);
        self.tuned = keep.iter().map(|&k| self.tuned[k]).collect();
        self.consts = Consts::new(&self.tuned, self.device);
        self.adam_t = steps_tensor(&self.adam_steps, self.device);
        Ok(())
    }

    /// Copies trial `k` (weights, observation statistics, Adam's moments and steps, counts) into `ppo`,
    /// the trainer it came from: export, validation and checkpoints then see the trial as it is now.
    pub fn write_back(&self, k: usize, ppo: &mut Ppo) -> Result<(), PpoError> {
        let k = k as i64;
        tch::no_grad(|| -> Result<(), PpoError> {
            let mut off = 0;
            for (i, mut p) in ppo.model.parameters().into_iter().enumerate() {
                let src = self.params[i].get(k);
                if src.size() != p.size() {
                    return Err(PpoError::Config(format!(
                        "write_back: trial {k}'s parameter {i} is {:?}, the trainer's {:?}",
                        src.size(),
                        p.size()
                    )));
                }
                p.copy_(&src);
                let n = p.numel() as i64;
                ppo.adam.flat_m.narrow(0, off, n).copy_(&self.m[i].get(k).reshape([-1]));
                ppo.adam.flat_v.narrow(0, off, n).copy_(&self.v[i].get(k).reshape([-1]));
                off += n;
            }
            ppo.norm.mean.copy_(&self.norm_mean.get(k));
            ppo.norm.var.copy_(&self.norm_var.get(k));
            ppo.norm.count.copy_(&self.norm_count.get(k));
            Ok(())
        })?;
        let k = k as usize;
        ppo.adam.steps = self.adam_steps[k];
        ppo.adam.store_steps();
        ppo.updates = self.updates[k];
        ppo.env_steps = self.env_steps[k];
        ppo.pull_native()
    }

    fn shape(&self) -> &PpoShape {
        &self.shape
    }

    fn activate(&self, x: Tensor) -> Tensor {
        match self.shape().activation {
            Activation::Tanh => x.tanh(),
            Activation::Relu => x.relu(),
        }
    }

    /// `x [P, N, in]` through the dense layer whose weight is `params[i]` and bias `params[i + 1]`. A layer
    /// of one output (the value head) is a product and a sum over the inputs: libtorch's batched matmul
    /// takes another path for one column depending on the batch count, and a trial's bits would then
    /// depend on how many trials ran beside it.
    fn dense(&self, x: &Tensor, i: usize) -> Tensor {
        let (w, b) = (&self.params[i], self.params[i + 1].unsqueeze(1));
        if w.size()[1] == 1 {
            (x * w).sum_dim_intlist(-1, true, Kind::Float) + b
        } else {
            x.matmul(&w.transpose(1, 2)) + b
        }
    }

    /// The tower starting at parameter `first` (`depth` hidden layers, then the head).
    fn tower(&self, obs: &Tensor, first: usize) -> Tensor {
        let mut x = obs.shallow_clone();
        for l in 0..self.depth {
            x = self.activate(self.dense(&x, first + 2 * l));
        }
        self.dense(&x, first + 2 * self.depth)
    }

    /// Mean actions `[P, N, A]` from normalised observations `[P, N, obs]`.
    fn mean(&self, obs: &Tensor) -> Tensor {
        self.tower(obs, 0)
    }

    /// Values `[P, N]`.
    fn value(&self, obs: &Tensor) -> Tensor {
        self.tower(obs, 2 * self.depth + 2).squeeze_dim(-1)
    }

    /// Mean actions and values, in float32 (the layers under bfloat16 autocast in a mixed-precision run).
    fn forward(&self, obs: &Tensor) -> (Tensor, Tensor) {
        let (mean, value) = tch::autocast(self.amp, || (self.mean(obs), self.value(obs)));
        (mean.to_kind(Kind::Float), value.to_kind(Kind::Float))
    }

    /// Values alone, as `forward`.
    fn values(&self, obs: &Tensor) -> Tensor {
        tch::autocast(self.amp, || self.value(obs)).to_kind(Kind::Float)
    }

    /// Log-std `[P, A]` within the configured bounds.
    fn log_std(&self) -> Tensor {
        let c = self.shape();
        self.params[self.params.len() - 1].clamp(c.log_std_min, c.log_std_max)
    }

    fn log_prob(&self, mean: &Tensor, actions: &Tensor) -> Tensor {
        let log_std = self.log_std().unsqueeze(1);
        let z = (actions - mean) / log_std.exp();
        (z.square() * -0.5 - &log_std - 0.5 * (2.0 * std::f64::consts::PI).ln()).sum_dim_intlist(-1, false, Kind::Float)
    }

    /// Entropy per trial `[P]`.
    fn entropy(&self) -> Tensor {
        (self.log_std() + 0.5 * (2.0 * std::f64::consts::PI * std::f64::consts::E).ln()).sum_dim_intlist(
            -1,
            false,
            Kind::Float,
        )
    }

    /// Folds `raw [P, E, obs]` into each trial's statistics and normalises it (as `RunningNorm`).
    fn observe(&mut self, raw: &Tensor) -> Tensor {
        let raw = raw.to_kind(Kind::Float);
        if !self.shape().normalize_obs {
            // A copy: the env kernel overwrites its observation buffer at the next step.
            return raw.copy();
        }
        tch::no_grad(|| {
            let n = raw.size()[1] as f64;
            let batch_mean = raw.mean_dim(1, false, Kind::Float);
            let batch_var = raw.var_dim(1, false, false);
            let delta = &batch_mean - &self.norm_mean;
            let total = &self.norm_count + n;
            self.norm_mean = &self.norm_mean + &delta * n / &total;
            let m2 = &self.norm_var * &self.norm_count + batch_var * n + delta.square() * &self.norm_count * n / &total;
            self.norm_var = m2 / &total;
            self.norm_count = total;
        });
        let clip = self.shape().obs_clip;
        let std = (&self.norm_var + 1e-8).sqrt().unsqueeze(1);
        ((raw - self.norm_mean.unsqueeze(1)) / std).clamp(-clip, clip)
    }
}

mod train;
