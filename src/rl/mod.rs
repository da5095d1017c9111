//! Reinforcement learning on vectorized environments with tch (behind the `train` feature).
//!
//! - `VecEnv`: E environments stepped together; observations, rewards and done flags are batched tensors
//!   on the environment's device, so a CUDA environment never sends a step's data to the host.
//! - `trading`: the trading environment (`env::VecEnv`) behind this trait.
//! - `cartpole`: gymnasium's CartPole-v1, vectorized in Rust: the proof that `ppo` learns.
//! - `ppo`: clipped-surrogate PPO with GAE, value clipping, entropy bonus, advantage normalisation,
//!   gradient clipping, learning-rate annealing, optional target-KL stop and running observation
//!   normalisation, all on the training device.

pub mod cartpole;
pub mod ppo;
pub mod trading;

use tch::{Device, Tensor};

/// One step of all environments.
pub struct Step {
    /// `[E, obs_dim]` observations after the step (after an automatic reset where an episode ended).
    pub obs: Tensor,
    /// `[E]` rewards.
    pub reward: Tensor,
    /// `[E]` 1.0 where the episode ended at this step (terminated or truncated), else 0.0.
    pub done: Tensor,
    /// Returns of the episodes that ended at this step (for progress reporting).
    pub finished: Vec<f64>,
}

/// E environments stepped together, with automatic reset.
pub trait VecEnv {
    fn num_envs(&self) -> usize;
    fn obs_dim(&self) -> usize;
    fn act_dim(&self) -> usize;
    fn device(&self) -> Device;
    /// Resets every environment; returns `[E, obs_dim]`.
    fn reset(&mut self) -> Tensor;
    /// Applies `actions` `[E, act_dim]` (unbounded; the environment clips or maps them).
    fn step(&mut self, actions: &Tensor) -> Step;
}
