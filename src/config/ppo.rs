//! PPO hyper-parameters (`[ppo]`). Every value comes from here (and from the config file through it); the trainer
//! has no constants of its own.

use super::checker::Invalid;
use crate::onnx::Activation;
use serde::{Deserialize, Serialize};

/// The `[ppo]` section: proximal policy optimisation's hyper-parameters, checked by `validate`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct PpoConfig {
    /// Hidden layer sizes of both the actor and the critic.
    pub hidden: Vec<i64>,
    /// The hidden layers' activation (`tanh` or `relu`).
    pub activation: Activation,
    /// Rollout length per environment per update.
    pub n_steps: usize,
    /// Minibatch size of the update, in transitions (of the `n_steps × env.n_envs` of a rollout).
    pub batch_size: usize,
    /// Passes over each rollout per update.
    pub n_epochs: usize,
    /// Adam's learning rate (annealed to 0 when `anneal_lr`).
    pub learning_rate: f64,
    /// Linear annealing of the learning rate to 0 over the run.
    pub anneal_lr: bool,
    /// The discount factor per bar (0 to 1).
    pub gamma: f64,
    /// The λ of generalised advantage estimation (0: one-step TD, 1: Monte Carlo).
    pub gae_lambda: f64,
    /// The clip of the probability ratio in the policy loss (0.2: within 1 ± 0.2).
    pub clip_range: f64,
    /// Clipping of the value update around the rollout's values; `None` disables it.
    pub clip_range_vf: Option<f64>,
    /// The weight of the entropy bonus in the loss.
    pub ent_coef: f64,
    /// The weight of the value loss in the loss.
    pub vf_coef: f64,
    /// The gradients' global norm is clipped to this before each step.
    pub max_grad_norm: f64,
    /// Stop an update's epochs early when the approximate KL exceeds 1.5 × this.
    pub target_kl: Option<f64>,
    /// The state-independent log standard deviation of the actions at the start.
    pub log_std_init: f64,
    /// Bounds on the state-independent log standard deviation (they bound the entropy bonus's reach).
    pub log_std_min: f64,
    /// Upper bound on the log standard deviation.
    pub log_std_max: f64,
    /// Running mean/variance normalisation of the observations (frozen into the exported graph).
    pub normalize_obs: bool,
    /// Normalised observations are clipped to ± this.
    pub obs_clip: f64,
    /// Seeds the weights and the trainer's draws (action noise, minibatch order): on a CPU the same seed gives the same
    /// run.
    pub normalize_advantage: bool,
    /// Seeds the weights, the actions' noise and the minibatch order: the same seed gives the same run.
    pub seed: u64,
    /// Mixed precision (bf16 autocast) for the forward passes on CUDA; ignored on CPU.
    pub mixed_precision: bool,
    /// How the trainer runs on the CPU: `native` (the rollout and the update in plain Rust over the
    /// same weights, no per-op dispatch) or `libtorch` (the tch code that CUDA runs). Ignored on CUDA.
    pub cpu_backend: CpuBackend,
}

/// The PPO trainer's CPU implementation (`ppo.cpu_backend`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize, clap::ValueEnum)]
#[serde(rename_all = "lowercase")]
#[value(rename_all = "lowercase")]
pub enum CpuBackend {
    /// Plain Rust: small matrices through `ndarray`'s GEMM, hand-written backward, Adam in place.
    #[default]
    Native,
    /// libtorch through tch, the same code as on CUDA.
    Libtorch,
}

impl Default for PpoConfig {
    fn default() -> Self {
        PpoConfig {
            hidden: vec![256, 256],
            activation: Activation::Tanh,
            n_steps: 256,
            batch_size: 256,
            n_epochs: 10,
            learning_rate: 3e-4,
            anneal_lr: true,
            gamma: 0.99,
            gae_lambda: 0.95,
            clip_range: 0.2,
            clip_range_vf: Some(0.2),
            ent_coef: 0.0,
            vf_coef: 0.5,
            max_grad_norm: 0.5,
            target_kl: None,
            log_std_init: 0.0,
            log_std_min: -5.0,
            log_std_max: 2.0,
            normalize_obs: true,
            obs_clip: 10.0,
            normalize_advantage: true,
            seed: 0,
            mixed_precision: false,
            cpu_backend: CpuBackend::Native,
        }
    }
}

/// What the trials of one population must share (`rl::ppo::population`): the network, the rollout, the
/// minibatches and the options a search does not tune. Trials with equal shapes (and env counts) train as
/// one; `PpoConfig::split` names every field of `PpoConfig` without `..`, so a new field does not compile
/// until it is put here or in `PpoTuned`.
#[derive(Debug, Clone, PartialEq)]
pub struct PpoShape {
    /// As `PpoConfig::hidden`: hidden layer sizes of both the actor and the critic.
    pub hidden: Vec<i64>,
    /// As `PpoConfig::activation`: the hidden layers' activation (`tanh` or `relu`).
    pub activation: Activation,
    /// As `PpoConfig::n_steps`: rollout length per environment per update.
    pub n_steps: usize,
    /// As `PpoConfig::batch_size`: minibatch size of the update, in transitions (of the `n_steps × env.n_envs` of a
    /// rollout).
    pub batch_size: usize,
    /// As `PpoConfig::n_epochs`: passes over each rollout per update.
    pub n_epochs: usize,
    /// As `PpoConfig::anneal_lr`: linear annealing of the learning rate to 0 over the run.
    pub anneal_lr: bool,
    /// As `PpoConfig::clip_range_vf`: clipping of the value update around the rollout's values; `None` disables it.
    pub clip_range_vf: Option<f64>,
    /// As `PpoConfig::target_kl`: stop an update's epochs early when the approximate KL exceeds 1.5 × this; `None`:
    /// never.
    pub target_kl: Option<f64>,
    /// As `PpoConfig::log_std_init`: the state-independent log standard deviation of the actions at the start.
    pub log_std_init: f64,
    /// As `PpoConfig::log_std_min`: lower bound on the log standard deviation.
    pub log_std_min: f64,
    /// As `PpoConfig::log_std_max`: upper bound on the log standard deviation.
    pub log_std_max: f64,
    /// As `PpoConfig::normalize_obs`: running mean/variance normalisation of the observations (frozen into the exported
    /// graph).
    pub normalize_obs: bool,
    /// As `PpoConfig::obs_clip`: normalised observations are clipped to ± this.
    pub obs_clip: f64,
    /// As `PpoConfig::normalize_advantage`: standardise the advantages of each minibatch (mean 0, standard deviation
    /// 1).
    pub normalize_advantage: bool,
    /// As `PpoConfig::mixed_precision`: mixed precision (bf16 autocast) for the forward passes on CUDA; ignored on CPU.
    pub mixed_precision: bool,
}

/// The values each trial of a population keeps as its own (a search tunes them; the seed is each trial's).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct PpoTuned {
    /// As `PpoConfig::learning_rate`: Adam's learning rate (annealed to 0 when `anneal_lr`).
    pub learning_rate: f64,
    /// As `PpoConfig::gamma`: the discount factor per bar (0 to 1).
    pub gamma: f64,
    /// As `PpoConfig::gae_lambda`: the λ of generalised advantage estimation (0: one-step TD, 1: Monte Carlo).
    pub gae_lambda: f64,
    /// As `PpoConfig::clip_range`: the clip of the probability ratio in the policy loss (0.2: within 1 ± 0.2).
    pub clip_range: f64,
    /// As `PpoConfig::ent_coef`: the weight of the entropy bonus in the loss.
    pub ent_coef: f64,
    /// As `PpoConfig::vf_coef`: the weight of the value loss in the loss.
    pub vf_coef: f64,
    /// As `PpoConfig::max_grad_norm`: the gradients' global norm is clipped to this before each step.
    pub max_grad_norm: f64,
    /// As `PpoConfig::seed`: the trial's own seed (weights, action noise, minibatch order).
    pub seed: u64,
}

impl PpoConfig {
    /// The network size the reports this project grew from used: [2048, 1024, 512].
    pub fn large() -> Self {
        PpoConfig { hidden: vec![2048, 1024, 512], ..Default::default() }
    }

    /// The shape the trials of a population share and the values each keeps as its own. Every field is
    /// named (no `..`): a new one must be put in one of the two, or here beside `cpu_backend` (how a run
    /// computes, which decides no result).
    pub fn split(&self) -> (PpoShape, PpoTuned) {
        let PpoConfig {
            hidden,
            activation,
            n_steps,
            batch_size,
            n_epochs,
            learning_rate,
            anneal_lr,
            gamma,
            gae_lambda,
            clip_range,
            clip_range_vf,
            ent_coef,
            vf_coef,
            max_grad_norm,
            target_kl,
            log_std_init,
            log_std_min,
            log_std_max,
            normalize_obs,
            obs_clip,
            normalize_advantage,
            seed,
            mixed_precision,
            cpu_backend: _,
        } = self.clone();
        let shape = PpoShape {
            hidden,
            activation,
            n_steps,
            batch_size,
            n_epochs,
            anneal_lr,
            clip_range_vf,
            target_kl,
            log_std_init,
            log_std_min,
            log_std_max,
            normalize_obs,
            obs_clip,
            normalize_advantage,
            mixed_precision,
        };
        let tuned = PpoTuned { learning_rate, gamma, gae_lambda, clip_range, ent_coef, vf_coef, max_grad_norm, seed };
        (shape, tuned)
    }

    /// The config of `shape`, `tuned` and `cpu_backend` (`split`'s inverse; every field named here too).
    pub fn from_parts(shape: PpoShape, tuned: PpoTuned, cpu_backend: CpuBackend) -> PpoConfig {
        let PpoShape {
            hidden,
            activation,
            n_steps,
            batch_size,
            n_epochs,
            anneal_lr,
            clip_range_vf,
            target_kl,
            log_std_init,
            log_std_min,
            log_std_max,
            normalize_obs,
            obs_clip,
            normalize_advantage,
            mixed_precision,
        } = shape;
        let PpoTuned { learning_rate, gamma, gae_lambda, clip_range, ent_coef, vf_coef, max_grad_norm, seed } = tuned;
        PpoConfig {
            hidden,
            activation,
            n_steps,
            batch_size,
            n_epochs,
            learning_rate,
            anneal_lr,
            gamma,
            gae_lambda,
            clip_range,
            clip_range_vf,
            ent_coef,
            vf_coef,
            max_grad_norm,
            target_kl,
            log_std_init,
            log_std_min,
            log_std_max,
            normalize_obs,
            obs_clip,
            normalize_advantage,
            seed,
            mixed_precision,
            cpu_backend,
        }
    }

    /// The shape the trials of a population share (`split`).
    pub fn shape(&self) -> PpoShape {
        self.split().0
    }

    /// The values a trial of a population keeps as its own (`split`).
    pub fn tuned(&self) -> PpoTuned {
        self.split().1
    }

    /// Checks ranges; the message names the key.
    pub fn validate(&self) -> Result<(), Invalid> {
        let checks: [(&str, bool); 12] = [
            ("ppo.hidden: every size must be at least 1", self.hidden.iter().all(|h| *h >= 1)),
            ("ppo.n_steps must be at least 1", self.n_steps >= 1),
            ("ppo.batch_size must be at least 2", self.batch_size >= 2),
            ("ppo.n_epochs must be at least 1", self.n_epochs >= 1),
            ("ppo.learning_rate must be in (0, 1)", self.learning_rate > 0.0 && self.learning_rate < 1.0),
            ("ppo.gamma must be in (0, 1]", self.gamma > 0.0 && self.gamma <= 1.0),
            ("ppo.gae_lambda must be in [0, 1]", (0.0..=1.0).contains(&self.gae_lambda)),
            ("ppo.clip_range must be in (0, 1)", self.clip_range > 0.0 && self.clip_range < 1.0),
            ("ppo.max_grad_norm must be above 0", self.max_grad_norm > 0.0),
            ("ppo.log_std_min must be below ppo.log_std_max", self.log_std_min < self.log_std_max),
            ("ppo.ent_coef and ppo.vf_coef must not be negative", self.ent_coef >= 0.0 && self.vf_coef >= 0.0),
            ("ppo.obs_clip must be above 0", self.obs_clip > 0.0),
        ];
        if let Some((msg, _)) = checks.iter().find(|(_, ok)| !ok) {
            return Err(Invalid::Value(msg.to_string()));
        }
        // Sizes: a network, a rollout and a batch that fit a machine.
        let width = self.hidden.iter().copied().max().unwrap_or(1).max(1) as u64;
        super::within("ppo.hidden (widest layer)", width, 1, 65_536)?;
        super::within("ppo.hidden (layers)", self.hidden.len() as u64, 0, 16)?;
        super::within("ppo.n_steps", self.n_steps as u64, 1, 1 << 20)?;
        super::within("ppo.batch_size", self.batch_size as u64, 2, 1 << 24)?;
        super::within("ppo.n_epochs", self.n_epochs as u64, 1, 1_000)
    }
}
