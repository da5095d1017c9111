//! `tradebot bench ...`: the benchmarks that check the speed targets (never timed tests), each a job
//! with its own arguments: the vectorized environment (`env`), PPO training end to end (`ppo`), the LSTM's
//! epochs (`lstm`), the daemon's decision latency on its own engine (`infer`), and a search's training
//! work, many trials at once (`tune`). `make bench-*` runs
//! each beside its Python peer on the same work.

pub mod env;
pub mod gpu;
pub mod gpu_peers;
pub mod infer;
pub mod lstm;
pub mod ppo;
#[cfg(feature = "train")]
mod steady;
pub mod tune;
