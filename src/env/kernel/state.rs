//! The kernel's state, described once: every buffer `env_step.c` reads or writes per env (name, element
//! type, tch kind, length per env), in `tb_buffers`' order. The one table in this file makes
//!
//! - [`Buffers`], the `#[repr(C)]` mirror of `tb_buffers` (the panel's and the trial table's pointers,
//!   then the table's);
//! - [`HostState`], the CPU build's storage (`Vec`s, for `CpuKernelEnv`);
//! - `TensorState`, the storage of `TensorKernelEnv` (feature `train`): its zeros, the checks before a
//!   launch, a population's join (`stack`) and its selection of trials (`keep`).
//!
//! A buffer added to the kernel is one line here (and its field in `env_step.c`).

use super::TrialEnv;

/// How long a buffer is, and how a population joins and selects it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Per {
    /// One per env: `[n_envs]`.
    Env,
    /// One per env and asset in env-major rows (the policy's actions): `[n_envs, n_assets]`.
    Asset,
    /// One per position in `Params`' layout (env-major on the CPU, asset-major on CUDA): `[n_envs * n_assets]`.
    Position,
    /// One observation row per env: `[n_envs, obs_stride]`.
    Obs,
}

/// The counts a buffer's length depends on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Dims {
    pub(crate) envs: usize,
    pub(crate) assets: usize,
    pub(crate) obs: usize,
}

impl Per {
    pub(crate) fn len(self, d: Dims) -> usize {
        match self {
            Per::Env => d.envs,
            Per::Asset | Per::Position => d.envs * d.assets,
            Per::Obs => d.envs * d.obs,
        }
    }
}

/// What the kernel reads besides its state: the panel (prices `[T, A]`, features `[T, A, F]`, turbulence
/// `[T]` and the benchmark index `[T]`, null where the step does not read them) and, in a population,
/// the trial table (null otherwise).
#[derive(Debug, Clone, Copy)]
pub(crate) struct Inputs {
    pub(crate) prices: *const f32,
    pub(crate) features: *const f32,
    pub(crate) turbulence: *const f64,
    pub(crate) benchmark: *const f32,
    pub(crate) trials: *const TrialEnv,
}

macro_rules! kernel_state {
    ($($(#[doc = $doc:literal])* $name:ident: $ty:ty, $kind:ident, $per:ident;)*) => {
        /// `tb_buffers` in `env_step.c`: host pointers for the CPU build, device pointers for CUDA.
        #[repr(C)]
        #[derive(Debug, Clone, Copy)]
        pub struct Buffers {
            /// `[n_days, n_assets]`: the panel's prices.
            pub prices: *const f32,
            /// `[n_days, n_assets, n_features]`: the panel's feature rows.
            pub features: *const f32,
            /// `[n_days]`: the turbulence index (null unless `Params::has_turbulence`).
            pub turbulence: *const f64,
            /// The index symbol's prices `[n_days]` (null unless `Params::bench_symbol`).
            pub benchmark: *const f32,
            /// Per trial in a population (`Params::trial_envs` envs each); null otherwise.
            pub trials: *const TrialEnv,
            $($(#[doc = $doc])* pub $name: *mut $ty,)*
        }

        /// The kernel's state on the host, for its CPU build.
        pub(crate) struct HostState {
            $(pub(crate) $name: Vec<$ty>,)*
        }

        impl HostState {
            pub(crate) fn zeros(d: Dims) -> Self {
                HostState { $($name: vec![<$ty>::default(); Per::$per.len(d)],)* }
            }

            /// The pointers of `inputs` and of this state.
            pub(crate) fn buffers(&mut self, i: Inputs) -> Buffers {
                Buffers {
                    prices: i.prices,
                    features: i.features,
                    turbulence: i.turbulence,
                    benchmark: i.benchmark,
                    trials: i.trials,
                    $($name: self.$name.as_mut_ptr(),)*
                }
            }
        }

        /// The kernel's state in tch tensors on one device.
        #[cfg(feature = "train")]
        pub(crate) struct TensorState {
            $(pub(crate) $name: tch::Tensor,)*
        }

        #[cfg(feature = "train")]
        impl TensorState {
            pub(crate) fn zeros(d: Dims, device: tch::Device) -> Self {
                TensorState { $($name: tensors::zeros(Per::$per, d, tch::Kind::$kind, device),)* }
            }

            /// Every buffer checked against what a launch over `d` touches on `device` (kind, contiguity,
            /// element count, device), from host metadata only.
            pub(crate) fn check(&self, d: Dims, device: tch::Device) -> Result<(), super::KernelEnvError> {
                $(super::check_buffer(stringify!($name), &self.$name, tch::Kind::$kind, Per::$per.len(d), device)?;)*
                Ok(())
            }

            /// The pointers of `inputs` and of these tensors; taking them reads no memory.
            pub(crate) fn buffers(&self, i: Inputs) -> Buffers {
                Buffers {
                    prices: i.prices,
                    features: i.features,
                    turbulence: i.turbulence,
                    benchmark: i.benchmark,
                    trials: i.trials,
                    $($name: self.$name.data_ptr() as *mut $ty,)*
                }
            }

            /// The states of `parts` joined along the env axis, positions as `asset_major` lays them out.
            pub(crate) fn stack(parts: &[&TensorState], assets: i64, asset_major: bool) -> Result<Self, tch::TchError> {
                Ok(TensorState {
                    $($name: tensors::join(Per::$per, &parts.iter().map(|p| &p.$name).collect::<Vec<_>>(), assets, asset_major)?,)*
                })
            }

            /// Keeps the envs at `rows` (an `Int64` index on the state's device), in that order.
            pub(crate) fn keep(&mut self, rows: &tch::Tensor, assets: i64, asset_major: bool) -> Result<(), tch::TchError> {
                $(self.$name = tensors::select(Per::$per, &self.$name, rows, assets, asset_major)?;)*
                Ok(())
            }
        }
    };
}

kernel_state! {
    /// `[n_envs, n_assets]`: the actions of the next step (the kernel only reads them).
    actions: f32, Float, Asset;
    /// `[n_envs]`: each env's cash, in dollars.
    cash: f64, Double, Env;
    /// `[n_envs]`: each env's equity (cash plus positions), in dollars.
    equity: f64, Double, Env;
    /// The first moment A of the differential Sharpe ratio per env.
    sharpe_a: f64, Double, Env;
    /// The second moment B of the differential Sharpe ratio per env.
    sharpe_b: f64, Double, Env;
    /// Each env's current day in the panel.
    day: i32, Int, Env;
    /// Steps each env has taken in its episode.
    steps: i32, Int, Env;
    /// Each env's next draw in the seeded SplitMix64 stream (an `Int64` tensor).
    draws: u64, Int64, Env;
    /// Units held per position (`env_stride` / `asset_stride`).
    holding: f64, Double, Position;
    /// Average entry price per position (0 when flat).
    entry: f64, Double, Position;
    /// Highest price since entry per position (0 when flat), for the trailing stop.
    high_water: f64, Double, Position;
    /// Bars of cooldown left per position (an `Int` tensor).
    cooldown: u32, Int, Position;
    /// The weights space's units to trade per position this step (scratch).
    order: f64, Double, Position;
    /// The last step's reward per env.
    reward: f32, Float, Env;
    /// 1 where the env finished its episode on the last step (and was reset), else 0.
    done: f32, Float, Env;
    /// Equity at the end of the last step, before any reset.
    equity_out: f64, Double, Env;
    /// `[n_envs, obs_stride]`: the next observations, in `VecEnv::observe`'s layout.
    obs: f32, Float, Obs;
    /// Finished episodes per env: the sum of their total returns.
    ret_sum: f64, Double, Env;
    /// How many episodes `ret_sum` holds.
    ret_count: f64, Double, Env;
}

// SAFETY: the pointers are only dereferenced by the kernel, each env range by one thread, on buffers the
// owning env keeps alive and does not touch while a call runs.
unsafe impl Send for Buffers {}
unsafe impl Sync for Buffers {}

/// How the tensors of each [`Per`] are made, joined and selected.
#[cfg(feature = "train")]
mod tensors {
    use super::{Dims, Per};
    use tch::{Device, Kind, TchError, Tensor};

    pub(super) fn zeros(per: Per, d: Dims, kind: Kind, device: Device) -> Tensor {
        let (e, a, o) = (d.envs as i64, d.assets as i64, d.obs as i64);
        match per {
            Per::Env => Tensor::zeros([e], (kind, device)),
            Per::Position => Tensor::zeros([e * a], (kind, device)),
            Per::Asset => Tensor::zeros([e, a], (kind, device)),
            Per::Obs => Tensor::zeros([e, o], (kind, device)),
        }
    }

    /// Positions asset-major are `[A, E]` flattened: joined along the env axis, dimension 1.
    pub(super) fn join(per: Per, parts: &[&Tensor], assets: i64, asset_major: bool) -> Result<Tensor, TchError> {
        if per == Per::Position && asset_major {
            let rows = parts.iter().map(|t| t.f_view([assets, -1])).collect::<Result<Vec<Tensor>, _>>()?;
            return Tensor::f_cat(&rows, 1)?.f_reshape([-1]);
        }
        Tensor::f_cat(parts, 0)
    }

    pub(super) fn select(
        per: Per,
        t: &Tensor,
        rows: &Tensor,
        assets: i64,
        asset_major: bool,
    ) -> Result<Tensor, TchError> {
        match (per, asset_major) {
            (Per::Position, true) => t.f_view([assets, -1])?.f_index_select(1, rows)?.f_reshape([-1]),
            (Per::Position, false) => t.f_view([-1, assets])?.f_index_select(0, rows)?.f_reshape([-1]),
            _ => t.f_index_select(0, rows),
        }
    }
}
