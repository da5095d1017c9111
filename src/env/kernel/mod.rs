//! The environment step as one kernel: `env_step.c` holds the whole step of one env (the orders of either
//! action space, share counts or target weights with a no-trade band, under the rule of [`crate::exec`]
//! for all assets; equity and every reward of [`crate::env::Reward`]; episode end and seeded reset; the
//! next observation in [`super::VecEnv::observe`]'s layout). The same source is
//!
//! - compiled for the CPU by build.rs (the `cc` crate, no FMA contraction) and run here by
//!   [`CpuKernelEnv`], env ranges spread over a rayon pool; CI checks it bit for bit against `VecEnv`;
//! - written to compile for CUDA as well (one thread per env, plain C with no host calls), for an NVRTC
//!   build on the GPU ([`cuda`]: compiled and checked in CI without a GPU);
//! - run on the raw pointers of tch tensors by [`TensorKernelEnv`] (feature `train`): launched on a CUDA
//!   device, or the CPU build over CPU tensors, so the trainer's device path runs in CI too.
//!
//! Episode starts follow `VecEnv`'s seeded stream: SplitMix64 is a counter, and since every env resets on
//! the same step, env `i`'s `r`-th start is draw `r * E + i` of that stream, which each thread computes
//! on its own. Only `Accounting::Standard` exists in the kernel (FinRL's NumPy accounting stays in
//! `VecEnv`, for the parity test and the FinRL peer). The CPU build equals `VecEnv` bit for bit with
//! either action space and every reward (the same libm `exp`, `log` and `pow`); on CUDA those three are
//! the device's own and may differ in the last bits, which only the weights space and the log-return
//! rewards use.
// The kernel is C (shared with the CUDA build): calling it passes raw pointers to buffers we own and size.
#![allow(unsafe_code)]

#[cfg(feature = "train")]
mod buffer;
#[cfg(feature = "train")]
pub mod cuda;
#[cfg(feature = "train")]
mod error;
#[cfg(feature = "train")]
mod module_cache;
#[cfg(feature = "train")]
pub mod nvrtc;
#[cfg(feature = "train")]
mod population;
#[cfg(feature = "train")]
pub mod probe;
mod state;
#[cfg(feature = "train")]
mod tensor;
#[cfg(feature = "train")]
pub(crate) use buffer::check_buffer;
#[cfg(feature = "train")]
pub use cuda::KernelEnvError;
#[cfg(feature = "train")]
pub use error::CompileError;
pub use state::Buffers;
#[cfg(feature = "train")]
pub use tensor::TensorKernelEnv;

use super::config::{Accounting, EnvConfig, EnvError};
use super::panel::Panel;
use super::reward::{Benchmark, Reward};
use super::vec_env::StepOutcome;
use crate::exec::ActionSpace;
use std::sync::Arc;

/// The kernel source, for NVRTC.
pub const SOURCE: &str = include_str!("env_step.c");

/// `tb_params` in `env_step.c`, field for field.
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Params {
    /// `ExecParams::max_trade`: units traded at |action| = 1.
    pub max_trade: f64,
    /// `ExecParams::min_order`: requested trades of fewer units are dropped.
    pub min_order: f64,
    /// Fees as a fraction of notional (`fee_bps × 1e-4`).
    pub fee_rate: f64,
    /// Slippage as a fraction of the price (`slippage_bps × 1e-4`).
    pub slip_rate: f64,
    /// `ExecParams::trailing_stop`: fraction below the high-water mark that stops out (0: off).
    pub trailing_stop: f64,
    /// Each env's starting cash, in dollars.
    pub initial_cash: f64,
    /// `EnvConfig::reward_scale`.
    pub reward_scale: f64,
    /// `EnvConfig::turnover_penalty`: the equity reward's penalty per dollar traded.
    pub turnover_penalty: f64,
    /// Sell everything and buy nothing on days whose turbulence exceeds this (read only when `has_turbulence`).
    pub turbulence_threshold: f64,
    /// The weights action space's no-trade band and cap per asset (0 and 1 for share counts).
    pub band: f64,
    /// The weights action space's cap per asset, a fraction of equity.
    pub max_weight: f64,
    /// The vs-benchmark and differential-Sharpe rewards' turnover penalty in basis points.
    pub turnover_bps: f64,
    /// The differential-Sharpe reward's moment rate.
    pub sharpe_eta: f64,
    /// The seed of the episode starts' SplitMix64 stream (`EnvConfig::seed`).
    pub seed: u64,
    /// Bars after a stop-out during which the asset takes no buys.
    pub cooldown_bars: u32,
    /// Envs stepped per launch (one GPU thread each).
    pub n_envs: i32,
    /// Assets of the panel.
    pub n_assets: i32,
    /// Features per asset and day.
    pub n_features: i32,
    /// Days (time steps) of the panel.
    pub n_days: i32,
    /// Steps per episode.
    pub episode_len: i32,
    /// 1: whole units only (quantities truncated toward zero).
    pub integer_units: i32,
    /// 1: buys capped at `floor(cash / price)`, fees not included (FinRL's rule).
    pub cash_cap_ignores_fees: i32,
    /// 1: every episode starts at day 0.
    pub fixed_start: i32,
    /// 1: the panel has turbulence and a threshold is set.
    pub has_turbulence: i32,
    /// 1 for target weights with a no-trade band, 0 for share counts.
    pub action_weights: i32,
    /// `TB_REWARD_*` in `env_step.c`: [`REWARD_EQUITY`], [`REWARD_VS_BENCHMARK`], [`REWARD_DIFFERENTIAL_SHARPE`].
    pub reward_kind: i32,
    /// vs-benchmark: 1 when the benchmark is the panel's index series, 0 for equal-weight buy-and-hold.
    pub bench_symbol: i32,
    /// Position arrays are indexed `env * env_stride + asset * asset_stride`: `n_assets` env-major (the CPU), 1
    /// asset-major (the GPU).
    pub env_stride: i32,
    /// 1 env-major (the CPU), `n_envs` asset-major (the GPU).
    pub asset_stride: i32,
    /// Floats per observation row, at least `1 + n_assets × (1 + n_features)`.
    pub obs_stride: i32,
    /// In a population (`Buffers::trials` set): envs per trial.
    pub trial_envs: i32,
}

/// `Params::reward_kind` of [`Reward::Equity`].
pub const REWARD_EQUITY: i32 = 0;
/// `Params::reward_kind` of [`Reward::VsBenchmark`].
pub const REWARD_VS_BENCHMARK: i32 = 1;
/// `Params::reward_kind` of [`Reward::DifferentialSharpe`].
pub const REWARD_DIFFERENTIAL_SHARPE: i32 = 2;

/// `tb_trial` in `env_step.c`: one trial's own values in a population (what a search tunes in the env,
/// and the trial's seed).
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct TrialEnv {
    /// The trial's trailing stop (as `Params::trailing_stop`).
    pub trailing_stop: f64,
    /// The trial's reward scale (as `Params::reward_scale`).
    pub reward_scale: f64,
    /// The seed of the trial's own stream of episode starts.
    pub seed: u64,
    /// The trial's cooldown after a stop-out, in bars.
    pub cooldown_bars: u32,
    /// Padding to the C struct's size (always 0).
    pub pad: u32,
}

impl TrialEnv {
    /// The values of `p` (one trial's env parameters).
    pub fn of(p: &Params) -> TrialEnv {
        TrialEnv {
            trailing_stop: p.trailing_stop,
            reward_scale: p.reward_scale,
            seed: p.seed,
            cooldown_bars: p.cooldown_bars,
            pad: 0,
        }
    }
}

unsafe extern "C" {
    fn tb_env_init(p: *const Params, b: *const Buffers, lo: i32, hi: i32);
    fn tb_env_step(p: *const Params, b: *const Buffers, lo: i32, hi: i32);
}

/// The parameters of `cfg` on `panel`, positions laid out env-major (`asset_major` = false) or
/// asset-major. Fails where the kernel cannot run the configuration.
pub fn params(cfg: &EnvConfig, panel: &Panel, asset_major: bool) -> Result<Params, EnvError> {
    if cfg.n_envs == 0 {
        return Err(EnvError::NoEnvs);
    }
    if cfg.episode_len == 0 || cfg.episode_len >= panel.n_days {
        return Err(EnvError::EpisodeTooLong { len: cfg.episode_len, days: panel.n_days });
    }
    if cfg.accounting != Accounting::Standard {
        return Err(EnvError::Unsupported(
            "env.accounting = \"finrl-numpy\": the env kernel has the standard f64 accounting only; use accounting = \"standard\", or train on the CPU env (`--device cpu`)",
        ));
    }
    let (band, max_weight) = match cfg.action {
        ActionSpace::Shares => (0.0, 1.0),
        ActionSpace::Weights { band, max_weight } => (band, max_weight),
    };
    let (reward_kind, turnover_bps, sharpe_eta, bench_symbol) = match &cfg.reward {
        Reward::Equity => (REWARD_EQUITY, 0.0, 0.0, false),
        Reward::VsBenchmark { benchmark, turnover_bps } => {
            let symbol = match benchmark {
                Benchmark::EqualWeight => false,
                Benchmark::Symbol(s) if panel.benchmark.is_none() => {
                    return Err(EnvError::NoBenchmark { symbol: s.clone() });
                }
                Benchmark::Symbol(_) => true,
            };
            (REWARD_VS_BENCHMARK, *turnover_bps, 0.0, symbol)
        }
        Reward::DifferentialSharpe { eta, turnover_bps } => (REWARD_DIFFERENTIAL_SHARPE, *turnover_bps, *eta, false),
    };
    let fits = |n: usize| i32::try_from(n).is_ok();
    let obs = 1 + panel.n_assets * (1 + panel.n_features);
    if !fits(cfg.n_envs * panel.n_assets.max(obs)) || !fits(panel.n_days * panel.n_assets * panel.n_features) {
        return Err(EnvError::Unsupported("the kernel env indexes with 32-bit integers: too many envs or days"));
    }
    let (e, a) = (cfg.n_envs as i32, panel.n_assets as i32);
    let p = &cfg.exec;
    let turbulence = cfg.turbulence_threshold.filter(|_| panel.turbulence.is_some());
    Ok(Params {
        max_trade: p.max_trade,
        min_order: p.min_order,
        fee_rate: p.fee_bps * 1e-4,
        slip_rate: p.slippage_bps * 1e-4,
        trailing_stop: p.trailing_stop,
        initial_cash: cfg.initial_cash,
        reward_scale: cfg.reward_scale,
        turnover_penalty: cfg.turnover_penalty,
        turbulence_threshold: turbulence.unwrap_or(0.0),
        band,
        max_weight,
        turnover_bps,
        sharpe_eta,
        seed: cfg.seed,
        cooldown_bars: p.cooldown_bars,
        n_envs: e,
        n_assets: a,
        n_features: panel.n_features as i32,
        n_days: panel.n_days as i32,
        episode_len: cfg.episode_len as i32,
        integer_units: i32::from(p.integer_units),
        cash_cap_ignores_fees: i32::from(p.cash_cap_ignores_fees),
        fixed_start: i32::from(cfg.fixed_start),
        has_turbulence: i32::from(turbulence.is_some()),
        action_weights: i32::from(matches!(cfg.action, ActionSpace::Weights { .. })),
        reward_kind,
        bench_symbol: i32::from(bench_symbol),
        env_stride: if asset_major { 1 } else { a },
        asset_stride: if asset_major { e } else { 1 },
        obs_stride: obs as i32,
        trial_envs: e,
    })
}

/// The kernel's CPU build over host arrays: the same env as `VecEnv` (standard accounting), stepped by
/// the C code that CUDA runs.
pub struct CpuKernelEnv {
    params: Params,
    panel: Arc<Panel>,
    pool: Option<Arc<rayon::ThreadPool>>,
    state: state::HostState,
}

/// Envs per rayon task: enough work to hide the scheduling, small enough to balance two cores.
const CHUNK: usize = 64;

impl CpuKernelEnv {
    /// An env over `panel` with `cfg` (standard accounting only), positions env-major, reset and ready to step.
    pub fn new(cfg: &EnvConfig, panel: Arc<Panel>) -> Result<Self, EnvError> {
        Self::with_layout(cfg, panel, false)
    }

    /// As `new`, with the positions asset-major (the GPU's layout) when `asset_major`; `holdings` then
    /// returns them in that layout.
    pub fn with_layout(cfg: &EnvConfig, panel: Arc<Panel>, asset_major: bool) -> Result<Self, EnvError> {
        let params = params(cfg, &panel, asset_major)?;
        let dims = state::Dims { envs: cfg.n_envs, assets: panel.n_assets, obs: params.obs_stride as usize };
        let mut env = CpuKernelEnv { params, pool: None, state: state::HostState::zeros(dims), panel };
        env.run(Entry::Init);
        Ok(env)
    }

    /// Steps on at most `threads` threads of a pool of its own (0 = rayon's global pool, all cores).
    pub fn with_threads(mut self, threads: usize) -> Result<Self, EnvError> {
        self.pool = super::vec_env::pool(threads)?;
        Ok(self)
    }

    /// How many envs step together.
    pub fn n_envs(&self) -> usize {
        self.params.n_envs as usize
    }

    /// Floats per observation row.
    pub fn obs_dim(&self) -> usize {
        self.params.obs_stride as usize
    }

    /// The current observations, `n_envs x obs_dim`, as `VecEnv::observe` writes them.
    pub fn obs(&self) -> &[f32] {
        &self.state.obs
    }

    /// Each env's cash, in dollars.
    pub fn cash(&self) -> &[f64] {
        &self.state.cash
    }

    /// Holdings, env-major (`env * n_assets + asset`).
    pub fn holdings(&self) -> &[f64] {
        &self.state.holding
    }

    /// Bars of cooldown left per position (env-major): buys are refused while above 0.
    pub fn cooldowns(&self) -> &[u32] {
        &self.state.cooldown
    }

    /// Each env's current day in the panel.
    pub fn days(&self) -> &[i32] {
        &self.state.day
    }

    /// Finished episodes since the last call: (sum of total returns, count); clears the accumulators.
    pub fn take_returns(&mut self) -> (f64, f64) {
        let (sums, counts) = (&mut self.state.ret_sum, &mut self.state.ret_count);
        let (sum, count) = (sums.iter().sum(), counts.iter().sum());
        sums.fill(0.0);
        counts.fill(0.0);
        (sum, count)
    }

    /// Steps every env with `actions` (`n_envs x n_assets`; NaN counts as 0) and writes the next
    /// observations; `out` as `VecEnv::step` fills it.
    pub fn step(&mut self, actions: &[f32], out: &mut StepOutcome) -> Result<(), EnvError> {
        let want = self.state.actions.len();
        if actions.len() != want {
            return Err(EnvError::ActionShape { got: actions.len(), want });
        }
        self.state.actions.copy_from_slice(actions);
        self.run(Entry::Step);
        out.reward.clone_from(&self.state.reward);
        out.done.clear();
        out.done.extend(self.state.done.iter().map(|d| *d != 0.0));
        out.equity.clone_from(&self.state.equity_out);
        Ok(())
    }

    fn buffers(&mut self) -> Buffers {
        let panel = &self.panel;
        self.state.buffers(state::Inputs {
            prices: panel.prices.as_ptr(),
            features: panel.features.as_ptr(),
            turbulence: panel.turbulence.as_ref().map_or(std::ptr::null(), |t| t.as_ptr()),
            benchmark: panel.benchmark.as_ref().map_or(std::ptr::null(), |b| b.as_ptr()),
            trials: std::ptr::null(),
        })
    }

    /// Runs an entry point over all envs, in chunks of [`CHUNK`] on the pool.
    fn run(&mut self, entry: Entry) {
        let b = self.buffers();
        // SAFETY: every array in `b` has the length `params` promises (built in `with_layout`) and nothing
        // else touches them while the call runs.
        unsafe { run_cpu(entry, &self.params, &b, self.pool.as_deref()) }
    }
}

/// The kernel's entry points, for the CPU build.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Entry {
    Init,
    Step,
}

/// Runs `entry` of the CPU build over all envs, in chunks of [`CHUNK`] on `pool` (rayon's global pool
/// without one).
///
/// # Safety
/// Every pointer in `b` must point to host memory of the length `p` promises, not touched by anything
/// else while the call runs.
pub(crate) unsafe fn run_cpu(entry: Entry, p: &Params, b: &Buffers, pool: Option<&rayon::ThreadPool>) {
    let f = match entry {
        Entry::Init => tb_env_init,
        Entry::Step => tb_env_step,
    };
    let e = p.n_envs;
    let chunk = |lo: i32| {
        let hi = (lo + CHUNK as i32).min(e);
        // SAFETY: the caller's promise on `b`; the kernel writes only env rows in [lo, hi), and the ranges
        // of concurrent calls are disjoint.
        unsafe { f(p, b, lo, hi) };
    };
    if (e as usize) <= CHUNK {
        chunk(0);
        return;
    }
    let starts = (0..e).step_by(CHUNK);
    let go = || {
        use rayon::prelude::*;
        starts.collect::<Vec<_>>().into_par_iter().for_each(chunk);
    };
    match pool {
        Some(pool) => pool.install(go),
        None => go(),
    }
}

#[cfg(test)]
pub(crate) mod tests;
