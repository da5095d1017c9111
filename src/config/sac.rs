//! SAC hyper-parameters (`[sac]`): soft actor-critic beside PPO on the same vectorized environment. Every
//! value comes from here (and from the config file through it); the trainer has no constants of its own.

use super::checker::Invalid;
use crate::onnx::Activation;
use serde::{Deserialize, Serialize};

/// The `[sac]` section: soft actor-critic's hyper-parameters (`tradebot train sac`, `retrain.algorithms`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct SacConfig {
    /// Hidden layer sizes of the actor and of each of the two critics.
    pub hidden: Vec<i64>,
    /// The hidden layers' activation (`tanh` or `relu`).
    pub activation: Activation,
    /// Adam's learning rate for the actor.
    pub actor_learning_rate: f64,
    /// Adam's learning rate for the two critics.
    pub critic_learning_rate: f64,
    /// The learning rate of the entropy temperature's logarithm (`log alpha`).
    pub alpha_learning_rate: f64,
    /// The temperature at the start; tuned towards the target entropy `-action_dim` from there.
    pub initial_alpha: f64,
    /// Transitions the replay buffer keeps (a ring on the training device; the oldest are overwritten).
    pub buffer_size: usize,
    /// Transitions per gradient step.
    pub batch_size: usize,
    /// Polyak averaging of the target critics: `target = tau * critic + (1 - tau) * target`.
    pub tau: f64,
    /// The discount factor per bar (0 to 1).
    pub gamma: f64,
    /// Environment steps (all envs counted) of uniformly random actions before learning starts.
    pub warmup_steps: u64,
    /// Gradient steps per step of the vectorized environment (one step = `env.n_envs` transitions).
    pub updates_per_step: usize,
    /// Bounds on the actor's log standard deviation.
    pub log_std_min: f64,
    /// Upper bound on the actor's log standard deviation.
    pub log_std_max: f64,
    /// Running observation normalisation (frozen into the exported graph, as PPO's).
    pub normalize_obs: bool,
    /// Normalised observations are clipped to ± this.
    pub obs_clip: f64,
    /// Seeds the weights and the trainer's own draws (warm-up actions, replay sampling): the same seed gives the same
    /// run.
    pub seed: u64,
}

impl Default for SacConfig {
    fn default() -> Self {
        SacConfig {
            hidden: vec![256, 256],
            activation: Activation::Relu,
            actor_learning_rate: 3e-4,
            critic_learning_rate: 3e-4,
            alpha_learning_rate: 3e-4,
            initial_alpha: 1.0,
            buffer_size: 1_000_000,
            batch_size: 256,
            tau: 0.005,
            gamma: 0.99,
            warmup_steps: 10_000,
            updates_per_step: 1,
            log_std_min: -5.0,
            log_std_max: 2.0,
            normalize_obs: true,
            obs_clip: 10.0,
            seed: 0,
        }
    }
}

impl SacConfig {
    /// Checks ranges; the message names the key.
    pub fn validate(&self) -> Result<(), Invalid> {
        let lr = |v: f64| v > 0.0 && v < 1.0;
        let checks: [(&str, bool); 9] = [
            ("sac.hidden: every size must be at least 1", self.hidden.iter().all(|h| *h >= 1)),
            ("sac.actor_learning_rate must be in (0, 1)", lr(self.actor_learning_rate)),
            ("sac.critic_learning_rate must be in (0, 1)", lr(self.critic_learning_rate)),
            ("sac.alpha_learning_rate must be in (0, 1)", lr(self.alpha_learning_rate)),
            ("sac.initial_alpha must be above 0", self.initial_alpha > 0.0 && self.initial_alpha.is_finite()),
            ("sac.tau must be in (0, 1]", self.tau > 0.0 && self.tau <= 1.0),
            ("sac.gamma must be in (0, 1)", self.gamma > 0.0 && self.gamma < 1.0),
            ("sac.log_std_min must be below sac.log_std_max", self.log_std_min < self.log_std_max),
            ("sac.obs_clip must be above 0", self.obs_clip > 0.0),
        ];
        if let Some((msg, _)) = checks.iter().find(|(_, ok)| !ok) {
            return Err(Invalid::Value(msg.to_string()));
        }
        let width = self.hidden.iter().copied().max().unwrap_or(1).max(1) as u64;
        super::within("sac.hidden (widest layer)", width, 1, 65_536)?;
        super::within("sac.hidden (layers)", self.hidden.len() as u64, 0, 16)?;
        super::within("sac.buffer_size", self.buffer_size as u64, 2, 1 << 28)?;
        super::within("sac.batch_size", self.batch_size as u64, 1, 1 << 20)?;
        super::within("sac.updates_per_step", self.updates_per_step as u64, 1, 1_000)?;
        if self.batch_size > self.buffer_size {
            return Err(Invalid::Value(format!(
                "sac.batch_size = {} is above sac.buffer_size = {}: a batch is drawn from the buffer; lower it or grow the buffer",
                self.batch_size, self.buffer_size
            )));
        }
        Ok(())
    }
}
