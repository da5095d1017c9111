//! Reinforcement learning on vectorized environments with tch (behind the `train` feature).
//!
//! - `BatchEnv`: E environments stepped together; observations, rewards and done flags are batched tensors
//!   on the environment's device (or, for a CPU trainer, host arrays: `HostStep`).
//! - `trading`: the trading environment behind this trait: `env::VecEnv` on the host (the CPU trainers), or
//!   the env kernel on the training device (`KernelTradingEnv`: PPO on CUDA), whose state, observations,
//!   rewards and episode returns never leave the device inside a rollout.
//! - `host_batch`: E copies of a small control environment stepped together in plain Rust (reset,
//!   automatic reset, episode returns), the scaffolding `cartpole` and `pendulum` share.
//! - `cartpole`: gymnasium's CartPole-v1, vectorized in Rust: the proof that `ppo` learns.
//! - `ppo`: clipped-surrogate PPO with GAE, value clipping, entropy bonus, advantage normalisation,
//!   gradient clipping, learning-rate annealing, optional target-KL stop and running observation
//!   normalisation, all on the training device.
//! - `pendulum`: gymnasium's Pendulum-v1, vectorized in Rust: the proof that `sac` learns.
//! - `sac`: soft actor-critic with a replay buffer on the device, twin critics with Polyak targets, a
//!   tanh-squashed Gaussian actor and an automatically tuned entropy temperature.

pub mod cartpole;
pub mod host_batch;
pub mod pendulum;
pub mod ppo;
pub mod sac;
pub mod trading;

use tch::{Device, TchError, Tensor};

/// Why a step of the environments failed; the trainer stops with it.
#[derive(Debug, thiserror::Error)]
pub enum StepError {
    /// The policy gave a number of actions other than `num_envs × act_dim`.
    #[error("the policy gave {got} actions; the env takes {want} ({envs} envs × {act_dim})")]
    ActionCount {
        /// Actions given.
        got: usize,
        /// `envs × act_dim`.
        want: usize,
        /// The environments stepped.
        envs: usize,
        /// Values per action.
        act_dim: usize,
    },
    /// The policy's actions tensor is not `[num_envs, act_dim]`.
    #[error("the policy gave actions of shape {got:?}; the env takes {want:?}")]
    ActionShape {
        /// The shape given.
        got: Vec<i64>,
        /// `[num_envs, act_dim]`.
        want: [i64; 2],
    },
    /// The trading env refused the step (`EnvError`).
    #[error("the trading env's step failed: {0}")]
    Env(#[from] crate::env::EnvError),
    /// The actions could not be copied into the env kernel's action tensor.
    #[error("the env kernel could not take the policy's actions: {0}")]
    SetActions(crate::env::kernel::KernelEnvError),
    /// The env kernel's launch failed.
    #[error("the env kernel's step failed: {0}")]
    Kernel(crate::env::kernel::KernelEnvError),
    /// The finished episodes' returns could not be read back from the device.
    #[error("could not read the episode returns back from the device: {0}")]
    Returns(crate::env::kernel::KernelEnvError),
    /// A tensor operation failed in libtorch.
    #[error(transparent)]
    Torch(#[from] TchError),
}

/// One step of all environments as tensors on the environment's device (`BatchEnv::step`; `HostStep` is the same
/// in host memory).
pub struct TensorStep {
    /// `[E, obs_dim]` observations after the step (after an automatic reset where an episode ended).
    pub obs: Tensor,
    /// `[E]` rewards.
    pub reward: Tensor,
    /// `[E]` 1.0 where the episode ended at this step (terminated or truncated), else 0.0.
    pub done: Tensor,
    /// Returns of the episodes that ended at this step (for progress reporting).
    pub finished: Vec<f64>,
}

/// One step of all environments in host memory, for a trainer that runs on the CPU (no tensor per step).
#[derive(Debug, Default)]
pub struct HostStep {
    /// `[E * obs_dim]` observations after the step (after an automatic reset where an episode ended).
    pub obs: Vec<f32>,
    /// `[E]` rewards.
    pub reward: Vec<f32>,
    /// `[E]` 1.0 where the episode ended at this step, else 0.0.
    pub done: Vec<f32>,
    /// Returns of the episodes that ended at this step.
    pub finished: Vec<f64>,
}

/// E environments stepped together, with automatic reset.
pub trait BatchEnv {
    /// E: how many environments step together.
    fn num_envs(&self) -> usize;
    /// Values per observation.
    fn obs_dim(&self) -> usize;
    /// Values per action (one per asset for the trading env).
    fn act_dim(&self) -> usize;
    /// Where the observations, rewards and done flags live.
    fn device(&self) -> Device;
    /// Resets every environment; returns `[E, obs_dim]`.
    fn reset(&mut self) -> Tensor;
    /// Applies `actions` `[E, act_dim]` (unbounded; the environment clips or maps them). Actions of
    /// another count or shape are an error, as is a step the environment could not take.
    fn step(&mut self, actions: &Tensor) -> Result<TensorStep, StepError>;

    /// Environments that sum their finished episodes' returns on the device (reporting none in
    /// `TensorStep::finished`) return `(sum, count)` since the last call, one read, once per rollout.
    fn take_returns(&mut self) -> Result<Option<(f64, f64)>, StepError> {
        Ok(None)
    }

    /// `reset` into host memory `[E * obs_dim]`. Host environments override it to skip the tensor.
    /// Fails where the observations cannot be read back (a device fault, named).
    fn reset_host(&mut self, obs: &mut Vec<f32>) -> Result<(), TchError> {
        *obs = crate::ml::readback::f32s(&self.reset())?;
        Ok(())
    }

    /// `step` with host memory in and out: `actions` is `[E * act_dim]`. Host environments override it
    /// to skip the tensors. Fails as `step` does, and where the step's tensors cannot be read back (a
    /// device fault, named).
    fn step_host(&mut self, actions: &[f32], out: &mut HostStep) -> Result<(), StepError> {
        let (envs, act_dim) = (self.num_envs(), self.act_dim());
        if actions.len() != envs * act_dim {
            return Err(StepError::ActionCount { got: actions.len(), want: envs * act_dim, envs, act_dim });
        }
        let shape = [envs as i64, act_dim as i64];
        let step = self.step(&Tensor::f_from_slice(actions)?.f_view(shape)?.f_to_device(self.device())?)?;
        out.obs = crate::ml::readback::f32s(&step.obs)?;
        out.reward = crate::ml::readback::f32s(&step.reward)?;
        out.done = crate::ml::readback::f32s(&step.done)?;
        out.finished = step.finished;
        Ok(())
    }
}
