//! The kernel env on tch tensors: every piece of state (cash, positions, the episode counters, the
//! observations the policy reads, the actions `set_actions` copies in) is a tensor on the training device,
//! owned here, and a step is one kernel launch on their raw pointers, each buffer checked first. On a CUDA device the NVRTC build runs ([`super::cuda`],
//! positions asset-major so that neighbouring threads read neighbouring memory); on the CPU the `cc`
//! build runs over the CPU tensors (env-major), so the trainer's device path is exercised in CI. Nothing
//! is read back to the host inside a step; finished episodes' returns are summed per env and read on
//! request (once per update).

use super::cuda::{CudaKernel, KernelEnvError};
use super::state::{Dims, Inputs, TensorState};
use super::{Buffers, Entry, Params};
use crate::env::{EnvConfig, EnvError, Panel, StepOutcome};
use std::sync::Arc;
use tch::{Device, Kind, Tensor};

pub(super) enum Backend {
    Cpu(Option<Arc<rayon::ThreadPool>>),
    Cuda(CudaKernel),
}

/// The trading environment (`VecEnv`'s, standard accounting) with its state in tensors on one device.
pub struct TensorKernelEnv {
    pub(super) params: Params,
    pub(super) backend: Backend,
    pub(super) device: Device,
    /// The panel on the device (prices, features, turbulence, the benchmark index), kept alive for the
    /// kernel's pointers.
    pub(super) panel: [Tensor; 4],
    pub(super) has_turbulence: bool,
    /// The kernel reads the benchmark index (`Params::bench_symbol`).
    pub(super) has_benchmark: bool,
    /// Every buffer of the kernel's state (`state.rs`: the actions `set_actions` copies in, the accounts,
    /// positions and episode counters, the outputs, the observations), in `params`' layout.
    pub(super) state: TensorState,
    /// In a population (`stack`): each trial's own values, and the same as bytes on the device for the
    /// kernel (`tb_trial`); `None` for one trial's env.
    pub(super) trials: Option<(Vec<super::TrialEnv>, Tensor)>,
}

impl TensorKernelEnv {
    /// The env of `cfg` on `panel`, on `device` (the CPU or a CUDA device), reset to its first observations.
    pub fn new(cfg: &EnvConfig, panel: &Panel, device: Device) -> Result<Self, KernelEnvError> {
        let backend = match device {
            Device::Cpu => Backend::Cpu(None),
            Device::Cuda(ordinal) => Backend::Cuda(CudaKernel::load(ordinal)?),
            other => return Err(KernelEnvError::device(other)),
        };
        let params = super::params(cfg, panel, device.is_cuda())?;
        let dims = Dims { envs: cfg.n_envs, assets: panel.n_assets, obs: params.obs_stride as usize };
        let turbulence = panel.turbulence.clone().unwrap_or_else(|| vec![0.0]);
        let benchmark = panel.benchmark.clone().filter(|_| params.bench_symbol != 0).unwrap_or_else(|| vec![0.0]);
        let env = TensorKernelEnv {
            params,
            backend,
            device,
            panel: [
                Tensor::from_slice(&panel.prices).to_device(device),
                Tensor::from_slice(&panel.features).to_device(device),
                Tensor::from_slice(&turbulence).to_device(device),
                Tensor::from_slice(&benchmark).to_device(device),
            ],
            has_turbulence: panel.turbulence.is_some(),
            has_benchmark: params.bench_symbol != 0,
            state: TensorState::zeros(dims, device),
            trials: None,
        };
        env.launch(Entry::Init)?;
        Ok(env)
    }

    /// On the CPU, steps on at most `threads` threads of a pool of its own (0 = rayon's global pool).
    /// No effect on a GPU.
    pub fn with_threads(mut self, threads: usize) -> Result<Self, EnvError> {
        if let Backend::Cpu(pool) = &mut self.backend {
            *pool = crate::env::vec_env::pool(threads)?;
        }
        Ok(self)
    }

    /// The device the state lives and steps on.
    pub fn device(&self) -> Device {
        self.device
    }

    /// How many envs step together.
    pub fn n_envs(&self) -> usize {
        self.params.n_envs as usize
    }

    /// Assets of the panel.
    pub fn n_assets(&self) -> usize {
        self.params.n_assets as usize
    }

    /// Floats per observation row.
    pub fn obs_dim(&self) -> usize {
        self.params.obs_stride as usize
    }

    /// Each env's starting cash, in dollars (the observation's scale).
    pub fn initial_cash(&self) -> f64 {
        self.params.initial_cash
    }

    /// `[n_envs, obs_dim]`: the current observations (the kernel overwrites them at the next step: copy
    /// what must outlive it).
    pub fn obs(&self) -> &Tensor {
        &self.state.obs
    }

    /// `[n_envs]`: the last step's rewards (f32; overwritten at the next step).
    pub fn reward(&self) -> &Tensor {
        &self.state.reward
    }

    /// `[n_envs]`: 1.0 where the last step ended an episode, else 0.0 (f32; overwritten at the next step).
    pub fn done(&self) -> &Tensor {
        &self.state.done
    }

    /// Copies `actions` (`n_envs x n_assets` values of any float kind, on any device; laid out env-major)
    /// into the env's own action buffer for the next `step`. A copy on the device when `actions` is on
    /// the env's device: nothing is read back to the host.
    pub fn set_actions(&mut self, actions: &Tensor) -> Result<(), KernelEnvError> {
        let want = self.n_envs() * self.n_assets();
        let got = if actions.defined() { actions.numel() } else { 0 };
        if got != want {
            return Err(EnvError::ActionShape { got, want }.into());
        }
        let rows = actions.f_reshape([self.n_envs() as i64, self.n_assets() as i64])?;
        self.state.actions.f_copy_(&rows)?;
        Ok(())
    }

    /// Steps every env with the actions of `set_actions` (clipped to [-1, 1] by the kernel; NaN counts
    /// as 0) and writes the next observations, reward and done flags in place. No copy to the host.
    pub fn step(&mut self) -> Result<(), KernelEnvError> {
        self.launch(Entry::Step)
    }

    /// As `VecEnv::step` on host slices (tests, benchmarks): the actions copied in, the results out.
    pub fn step_host(&mut self, actions: &[f32], out: &mut StepOutcome) -> Result<(), KernelEnvError> {
        let want = self.n_envs() * self.n_assets();
        if actions.len() != want {
            return Err(EnvError::ActionShape { got: actions.len(), want }.into());
        }
        self.set_actions(&Tensor::f_from_slice(actions)?)?;
        self.step()?;
        out.reward = crate::ml::readback::f32s(&self.state.reward)?;
        out.done = crate::ml::readback::f32s(&self.state.done)?.into_iter().map(|d| d != 0.0).collect();
        out.equity = crate::ml::readback::f64s(&self.state.equity_out)?;
        Ok(())
    }

    /// Cash per env, read back (tests).
    pub fn cash(&self) -> Result<Vec<f64>, KernelEnvError> {
        Ok(crate::ml::readback::f64s(&self.state.cash)?)
    }

    /// Holdings read back, env-major (`env * n_assets + asset`) like `CpuKernelEnv::holdings`.
    pub fn holdings(&self) -> Result<Vec<f64>, KernelEnvError> {
        let (e, a) = (self.n_envs() as i64, self.n_assets() as i64);
        let env_major = if self.device.is_cuda() {
            self.state.holding.f_view([a, e])?.f_transpose(0, 1)?.f_contiguous()?
        } else {
            self.state.holding.shallow_clone()
        };
        Ok(crate::ml::readback::f64s(&env_major)?)
    }

    /// Finished episodes since the last call: (sum of total returns, count), one read back to the host
    /// (counted by `readback`: call it once per update, not per step); clears them.
    pub fn take_returns(&mut self) -> Result<(f64, f64), KernelEnvError> {
        let (sums, counts) = (&mut self.state.ret_sum, &mut self.state.ret_count);
        let both = Tensor::f_stack(&[sums.f_sum(Kind::Double)?, counts.f_sum(Kind::Double)?], 0)?;
        let read = crate::ml::readback::f64s(&both);
        let _ = sums.f_zero_()?;
        let _ = counts.f_zero_()?;
        match read?[..] {
            [sum, count] => Ok((sum, count)),
            ref other => Err(KernelEnvError::Readback { what: "episode returns", got: other.len(), want: 2 }),
        }
    }

    /// Every buffer the kernel reads or writes checked against what `params` makes it touch: kind,
    /// contiguity, element count and device, from host metadata only (no synchronisation).
    fn check_buffers(&self) -> Result<(), KernelEnvError> {
        let p = &self.params;
        let count = |what: &str, n: i32| {
            usize::try_from(n).map_err(|_| KernelEnvError::TooLarge(format!("{what} is {n}: the env is corrupt")))
        };
        let (e, a) = (count("the env count", p.n_envs)?, count("the asset count", p.n_assets)?);
        let (days, f, obs) = (
            count("the day count", p.n_days)?,
            count("the feature count", p.n_features)?,
            count("obs_stride", p.obs_stride)?,
        );
        let d = self.device;
        use super::check_buffer as check;
        check("prices", &self.panel[0], Kind::Float, days * a, d)?;
        check("features", &self.panel[1], Kind::Float, days * a * f, d)?;
        if self.has_turbulence {
            check("turbulence", &self.panel[2], Kind::Double, days, d)?;
        }
        if self.has_benchmark {
            check("benchmark", &self.panel[3], Kind::Float, days, d)?;
        }
        self.state.check(Dims { envs: e, assets: a, obs }, d)?;
        // The positions' strides must stay inside the `e * a` elements checked above.
        let strides_ok =
            (p.env_stride, p.asset_stride) == (a as i32, 1) || (p.env_stride, p.asset_stride) == (1, e as i32);
        if !strides_ok {
            return Err(KernelEnvError::TooLarge(format!(
                "the position strides ({}, {}) fit neither layout of {e} envs x {a} assets: the env is corrupt",
                p.env_stride, p.asset_stride
            )));
        }
        if let Some((trials, table)) = &self.trials {
            // The kernel reads `trials[i / trial_envs]` for every env `i`, as `TrialEnv` (8-byte aligned).
            let per = count("envs per trial", p.trial_envs)?;
            if per == 0 || trials.len().checked_mul(per) != Some(e) {
                return Err(KernelEnvError::TooLarge(format!(
                    "{} trials of {per} envs do not make the {e} envs stepped: the env is corrupt",
                    trials.len()
                )));
            }
            check("trials", table, Kind::Uint8, std::mem::size_of_val(trials.as_slice()), d)?;
            if !(table.data_ptr() as usize).is_multiple_of(std::mem::align_of::<super::TrialEnv>()) {
                return Err(KernelEnvError::TooLarge("the trial table is not 8-byte aligned".into()));
            }
        }
        Ok(())
    }

    /// The buffers' raw pointers (host pointers on the CPU, device pointers on CUDA); taking them reads
    /// no memory. Only `launch` passes them on, after `check_buffers`.
    fn buffers(&self) -> Buffers {
        self.state.buffers(Inputs {
            prices: self.panel[0].data_ptr() as *const f32,
            features: self.panel[1].data_ptr() as *const f32,
            turbulence: if self.has_turbulence { self.panel[2].data_ptr() as *const f64 } else { std::ptr::null() },
            benchmark: if self.has_benchmark { self.panel[3].data_ptr() as *const f32 } else { std::ptr::null() },
            trials: self.trials.as_ref().map_or(std::ptr::null(), |(_, t)| t.data_ptr() as *const super::TrialEnv),
        })
    }

    fn launch(&self, entry: Entry) -> Result<(), KernelEnvError> {
        self.check_buffers()?;
        let b = self.buffers();
        match &self.backend {
            // SAFETY: `check_buffers` just checked every tensor behind `b` to be a dense, contiguous tensor
            // on the CPU (`self.device`; a `Backend::Cpu` env is built for the CPU only) of the element kind
            // and count `params` makes the kernel touch, and the position strides and trial table to stay
            // inside them. `self` owns the tensors: `new` and `step` (`&mut self`) are the only callers, so
            // no `&Tensor` of `obs()` and the like is alive during the call, and nothing in this crate keeps
            // another handle on them (a caller's `shallow_clone` shares the storage, as with any tch tensor,
            // and is the caller's to leave alone meanwhile). `run_cpu` returns once the kernel has finished.
            Backend::Cpu(pool) => unsafe { super::run_cpu(entry, &self.params, &b, pool.as_deref()) },
            // SAFETY: the same checks, with every tensor on `self.device`, the CUDA device the kernel was
            // loaded on (`new` loads it on that ordinal), so every pointer is device memory of that device
            // of the checked size. The launch is queued on the device's legacy default stream, libtorch's
            // stream: libtorch's later work on these tensors, and the caching allocator's reuse of their
            // memory if one is dropped, are ordered after the kernel.
            Backend::Cuda(kernel) => unsafe { kernel.launch(entry, &self.params, &b)? },
        }
        Ok(())
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::super::CpuKernelEnv;
    use super::super::tests::{bits, configs, f32_bits, panel_with_turbulence, random_actions};
    use super::*;

    /// The tensor env on `device` against the kernel's CPU build on host arrays, bit for bit, over every
    /// configuration variant (stops, cooldowns, turbulence, every accounting option, both action spaces,
    /// every reward) and random actions. On CUDA, where `exp`, `log` and `pow` are the GPU's own, what
    /// depends on them is compared within a relative 1e-9 (f64) or 1e-5 (f32) instead: the weights
    /// space's state and observations, and the rewards other than the equity change.
    pub(crate) fn assert_agrees_with_the_host_build(device: Device, n_envs: usize, steps: usize) {
        let panel = panel_with_turbulence();
        for (v, cfg) in configs(n_envs).into_iter().enumerate() {
            let mut want = CpuKernelEnv::new(&cfg, panel.clone()).unwrap();
            let mut got = TensorKernelEnv::new(&cfg, &panel, device).unwrap().with_threads(2).unwrap();
            let shares = cfg.action == crate::exec::ActionSpace::Shares;
            let state = Exact(!device.is_cuda() || shares);
            let reward = Exact(!device.is_cuda() || (shares && cfg.reward == crate::env::Reward::Equity));
            let obs = |t: &Tensor| Vec::<f32>::try_from(t.to_device(Device::Cpu).view([-1])).unwrap();
            state.f32s(&obs(got.obs()), want.obs(), &format!("variant {v}: first observation"));
            let mut rng = crate::env::rng::SplitMix64::new(v as u64 + 7);
            let mut actions = vec![0f32; cfg.n_envs * panel.n_assets];
            let (mut s_want, mut s_got) = (StepOutcome::default(), StepOutcome::default());
            for s in 0..steps {
                random_actions(&mut rng, &mut actions);
                want.step(&actions, &mut s_want).unwrap();
                got.step_host(&actions, &mut s_got).unwrap();
                let at = format!("variant {v} step {s}");
                reward.f32s(&s_got.reward, &s_want.reward, &format!("{at}: reward"));
                state.f64s(&s_got.equity, &s_want.equity, &format!("{at}: equity"));
                assert_eq!(s_got.done, s_want.done, "{at}: done");
                state.f64s(&got.cash().unwrap(), want.cash(), &format!("{at}: cash"));
                state.f64s(&got.holdings().unwrap(), want.holdings(), &format!("{at}: holdings"));
                state.f32s(&obs(got.obs()), want.obs(), &format!("{at}: observation"));
            }
            // Summed per env, then over envs in another order: the count exactly, the sum closely.
            let (got_r, want_r) = (got.take_returns().unwrap(), want.take_returns());
            assert_eq!(got_r.1, want_r.1, "variant {v}: finished episodes");
            assert!(want_r.1 > 0.0, "variant {v}: no episode ended in {steps} steps: the test checks nothing");
            assert!((got_r.0 - want_r.0).abs() <= 1e-9 * want_r.1, "variant {v}: returns {got_r:?} vs {want_r:?}");
            assert_eq!(got.take_returns().unwrap(), (0.0, 0.0), "variant {v}: the returns were not cleared");
        }
    }

    /// Bit for bit (true), or within a relative 1e-9 (f64) or 1e-5 (f32, with an absolute 1e-6 near 0).
    struct Exact(bool);

    impl Exact {
        fn f64s(&self, got: &[f64], want: &[f64], at: &str) {
            if self.0 {
                assert_eq!(bits(got), bits(want), "{at}");
            } else {
                assert_eq!(got.len(), want.len(), "{at}");
                let near = got
                    .iter()
                    .zip(want)
                    .all(|(g, w)| g.to_bits() == w.to_bits() || (g - w).abs() <= 1e-9 * w.abs().max(1.0));
                assert!(near, "{at}: {got:?} vs {want:?}");
            }
        }

        fn f32s(&self, got: &[f32], want: &[f32], at: &str) {
            if self.0 {
                assert_eq!(f32_bits(got), f32_bits(want), "{at}");
            } else {
                assert_eq!(got.len(), want.len(), "{at}");
                let near = got
                    .iter()
                    .zip(want)
                    .all(|(g, w)| g.to_bits() == w.to_bits() || (g - w).abs() <= 1e-6 + 1e-5 * w.abs());
                assert!(near, "{at}: {got:?} vs {want:?}");
            }
        }
    }

    /// The launcher the trainer's device path uses, on CPU tensors.
    #[test]
    fn the_tensor_env_on_the_cpu_equals_the_host_kernel_env_bit_for_bit() {
        assert_agrees_with_the_host_build(Device::Cpu, 150, 100);
    }

    #[test]
    fn a_wrong_action_count_is_refused_with_the_sizes() {
        let panel = panel_with_turbulence();
        let cfg = EnvConfig { n_envs: 4, episode_len: 30, ..Default::default() };
        let mut env = TensorKernelEnv::new(&cfg, &panel, Device::Cpu).unwrap();
        let err = env.step_host(&[0.0; 3], &mut StepOutcome::default()).err().unwrap().to_string();
        assert!(err.contains('3') && err.contains(&(4 * panel.n_assets).to_string()), "{err}");
        let err = env.set_actions(&Tensor::zeros([4 * panel.n_assets as i64 + 1], (Kind::Float, Device::Cpu)));
        let err = err.err().map(|e| e.to_string()).unwrap_or_default();
        assert!(err.contains(&(4 * panel.n_assets + 1).to_string()), "{err}");
    }

    /// A buffer replaced by one the launch would overrun, read with the wrong layout or kind is refused,
    /// named, before any pointer reaches the kernel; the env steps again once it is whole.
    #[test]
    fn a_buffer_of_the_wrong_size_layout_or_kind_is_refused_before_the_launch() {
        let panel = panel_with_turbulence();
        let cfg = EnvConfig { n_envs: 4, episode_len: 30, ..Default::default() };
        let mut env = TensorKernelEnv::new(&cfg, &panel, Device::Cpu).unwrap();
        let (e, a, d) = (4, panel.n_assets as i64, env.obs_dim() as i64);
        let f32s = (Kind::Float, Device::Cpu);
        let refused = |env: &mut TensorKernelEnv, name: &str, what: &str| {
            let err = env.step().err().map(|e| e.to_string()).unwrap_or_default();
            assert!(err.contains(&format!("`{name}`")) && err.contains(what), "{name}: {err}");
        };
        // One value where the kernel reads n_envs x n_assets.
        env.state.actions = Tensor::zeros([1], f32s);
        refused(&mut env, "actions", "1 contiguous Float");
        env.state.actions = Tensor::zeros([e, a], f32s);
        // Each in bounds of its memory, so the old launch did not crash on them: the wrong count, the
        // wrong layout (every other row), the wrong kind.
        env.state.obs = Tensor::zeros([e, d + 1], f32s);
        refused(&mut env, "obs", &format!("needs {} contiguous Float", e * d));
        env.state.obs = Tensor::zeros([e, 2 * d], f32s).narrow(1, 0, d);
        refused(&mut env, "obs", "non-contiguous");
        env.state.obs = Tensor::zeros([e, d], (Kind::Double, Device::Cpu));
        refused(&mut env, "obs", "Double");
        env.state.obs = Tensor::zeros([e, d], f32s);
        env.state.cash = Tensor::zeros([e + 1], (Kind::Double, Device::Cpu));
        refused(&mut env, "cash", "5 contiguous Double");
        env.state.cash = Tensor::zeros([e], (Kind::Double, Device::Cpu));
        env.set_actions(&Tensor::ones([e * a], f32s)).unwrap();
        env.step().unwrap();
        assert_eq!(env.obs().size(), [e, d]);
    }
}
