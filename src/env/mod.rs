//! The trading environment PPO trains in: E envs x A assets stepped together over a shared [`Panel`].
//!
//! Each asset trades under the one execution rule of [`crate::exec`] (sells before buys, caps, fees,
//! slippage, trailing stop, cooldown), which the simulated broker, risk and the engine apply too.

//! - [`VecEnv`]: the plain-Rust CPU environment, state in flat arrays, seeded random episode starts,
//!   fixed-length episodes, auto-reset, chunks of envs stepped on all cores.
//! - [`finrl`]: FinRL 0.3.7's NumPy mixed-precision accounting, for the parity test and the speed peer.
//! - [`kernel`]: the whole step as one C/CUDA kernel (`kernel/env_step.c`): its CPU build, its CUDA build
//!   compiled with NVRTC at run time, and `TensorKernelEnv`, its state in tensors on the training device,
//!   which PPO trains on with CUDA (feature `train`).
//! - [`panel`]: prices, feature rows and turbulence, time-major.
//! - The action spaces (FinRL's share counts, or target weights with a no-trade band) are the trading
//!   core's: `crate::exec::weights`, which sizes the env's trades and the engine's orders alike.
//! - [`reward`]: the rewards (equity change, log return against a benchmark, differential Sharpe) and
//!   what the gate counts as better with each.

mod config;
pub mod finrl;
pub mod kernel;
mod one_env;
pub mod panel;
pub mod reward;
pub mod rng;
mod vec_env;

pub use config::{Accounting, EnvConfig, EnvError};
pub use panel::{Panel, PanelError};
pub use reward::{Benchmark, Objective, Reward};
pub use vec_env::{StepOutcome, VecEnv};

#[cfg(test)]
pub(crate) mod tests;
