//! The kernel env on tch tensors: every piece of state (cash, positions, the episode counters, the
//! observations the policy reads, the actions it writes) is a tensor on the training device, and a step
//! is one kernel launch on their raw pointers. On a CUDA device the NVRTC build runs ([`super::cuda`],
//! positions asset-major so that neighbouring threads read neighbouring memory); on the CPU the `cc`
//! build runs over the CPU tensors (env-major), so the trainer's device path is exercised in CI. Nothing
//! is read back to the host inside a step; finished episodes' returns are summed per env and read on
//! request (once per update).

use super::cuda::{CudaKernel, KernelEnvError};
use super::{Buffers, Entry, Params};
use crate::env::{EnvConfig, EnvError, Panel, Step};
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
    /// The panel on the device (prices, features, turbulence), kept alive for the kernel's pointers.
    pub(super) panel: [Tensor; 3],
    pub(super) has_turbulence: bool,
    /// `[n_envs, n_assets]`: the policy writes its actions here before `step`.
    pub actions: Tensor,
    /// Per env: cash, equity, equity_out, ret_sum, ret_count (f64); day, steps (i32); draws (u64 as i64).
    pub(super) cash: Tensor,
    pub(super) equity: Tensor,
    pub(super) equity_out: Tensor,
    pub(super) ret_sum: Tensor,
    pub(super) ret_count: Tensor,
    pub(super) day: Tensor,
    pub(super) steps: Tensor,
    pub(super) draws: Tensor,
    /// Per position (`params`' layout): holding, entry, high water (f64), cooldown (u32 as i32).
    pub(super) holding: Tensor,
    pub(super) entry: Tensor,
    pub(super) high_water: Tensor,
    pub(super) cooldown: Tensor,
    /// Per env: the last step's reward and done flag (0/1), f32.
    pub reward: Tensor,
    pub done: Tensor,
    /// `[n_envs, obs_dim]`: the next observations, in `VecEnv::observe`'s layout.
    pub obs: Tensor,
    /// In a population (`stack`): each trial's own values, and the same as bytes on the device for the
    /// kernel (`tb_trial`); `None` for one trial's env.
    pub(super) trials: Option<(Vec<super::Trial>, Tensor)>,
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
        let (e, a) = (cfg.n_envs as i64, panel.n_assets as i64);
        let zeros = |n: i64, kind: Kind| Tensor::zeros([n], (kind, device));
        let turbulence = panel.turbulence.clone().unwrap_or_else(|| vec![0.0]);
        let env = TensorKernelEnv {
            params,
            backend,
            device,
            panel: [
                Tensor::from_slice(&panel.prices).to_device(device),
                Tensor::from_slice(&panel.features).to_device(device),
                Tensor::from_slice(&turbulence).to_device(device),
            ],
            has_turbulence: panel.turbulence.is_some(),
            actions: Tensor::zeros([e, a], (Kind::Float, device)),
            cash: zeros(e, Kind::Double),
            equity: zeros(e, Kind::Double),
            equity_out: zeros(e, Kind::Double),
            ret_sum: zeros(e, Kind::Double),
            ret_count: zeros(e, Kind::Double),
            day: zeros(e, Kind::Int),
            steps: zeros(e, Kind::Int),
            draws: zeros(e, Kind::Int64),
            holding: zeros(e * a, Kind::Double),
            entry: zeros(e * a, Kind::Double),
            high_water: zeros(e * a, Kind::Double),
            cooldown: zeros(e * a, Kind::Int),
            reward: zeros(e, Kind::Float),
            done: zeros(e, Kind::Float),
            obs: Tensor::zeros([e, params.obs_stride as i64], (Kind::Float, device)),
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

    pub fn device(&self) -> Device {
        self.device
    }

    pub fn n_envs(&self) -> usize {
        self.params.n_envs as usize
    }

    pub fn n_assets(&self) -> usize {
        self.params.n_assets as usize
    }

    pub fn obs_dim(&self) -> usize {
        self.params.obs_stride as usize
    }

    pub fn initial_cash(&self) -> f64 {
        self.params.initial_cash
    }

    /// Steps every env with `self.actions` (clipped to [-1, 1] by the kernel; NaN counts as 0) and writes
    /// the next observations, reward and done flags in place. No copy to the host.
    pub fn step(&mut self) -> Result<(), KernelEnvError> {
        self.launch(Entry::Step)
    }

    /// As `VecEnv::step` on host slices (tests, benchmarks): the actions copied in, the results out.
    pub fn step_host(&mut self, actions: &[f32], out: &mut Step) -> Result<(), KernelEnvError> {
        let want = self.n_envs() * self.n_assets();
        if actions.len() != want {
            return Err(EnvError::ActionShape { got: actions.len(), want }.into());
        }
        let host = Tensor::from_slice(actions).view([self.n_envs() as i64, self.n_assets() as i64]);
        self.actions.copy_(&host);
        self.step()?;
        out.reward = Vec::<f32>::try_from(self.reward.to_device(Device::Cpu))?;
        out.done = Vec::<f32>::try_from(self.done.to_device(Device::Cpu))?.into_iter().map(|d| d != 0.0).collect();
        out.equity = Vec::<f64>::try_from(self.equity_out.to_device(Device::Cpu))?;
        Ok(())
    }

    /// Cash per env, read back (tests).
    pub fn cash(&self) -> Result<Vec<f64>, KernelEnvError> {
        Ok(Vec::<f64>::try_from(self.cash.to_device(Device::Cpu))?)
    }

    /// Holdings read back, env-major (`env * n_assets + asset`) like `CpuKernelEnv::holdings`.
    pub fn holdings(&self) -> Result<Vec<f64>, KernelEnvError> {
        let (e, a) = (self.n_envs() as i64, self.n_assets() as i64);
        let env_major = if self.device.is_cuda() {
            self.holding.view([a, e]).transpose(0, 1).contiguous()
        } else {
            self.holding.copy()
        };
        Ok(Vec::<f64>::try_from(env_major.to_device(Device::Cpu).view([-1]))?)
    }

    /// Finished episodes since the last call: (sum of total returns, count), one read back to the host
    /// (counted by `readback`: call it once per update, not per step); clears them.
    pub fn take_returns(&mut self) -> Result<(f64, f64), KernelEnvError> {
        let both = Tensor::stack(&[self.ret_sum.sum(Kind::Double), self.ret_count.sum(Kind::Double)], 0);
        let read = crate::readback::f64s(&both);
        let _ = self.ret_sum.zero_();
        let _ = self.ret_count.zero_();
        match read?[..] {
            [sum, count] => Ok((sum, count)),
            ref other => {
                Err(KernelEnvError::Driver(format!("the episode returns came back as {} values", other.len())))
            }
        }
    }

    fn buffers(&self) -> Buffers {
        let f64p = |t: &Tensor| t.data_ptr() as *mut f64;
        Buffers {
            prices: self.panel[0].data_ptr() as *const f32,
            features: self.panel[1].data_ptr() as *const f32,
            turbulence: if self.has_turbulence { self.panel[2].data_ptr() as *const f64 } else { std::ptr::null() },
            actions: self.actions.data_ptr() as *const f32,
            cash: f64p(&self.cash),
            equity: f64p(&self.equity),
            day: self.day.data_ptr() as *mut i32,
            steps: self.steps.data_ptr() as *mut i32,
            draws: self.draws.data_ptr() as *mut u64,
            holding: f64p(&self.holding),
            entry: f64p(&self.entry),
            high_water: f64p(&self.high_water),
            cooldown: self.cooldown.data_ptr() as *mut u32,
            reward: self.reward.data_ptr() as *mut f32,
            done: self.done.data_ptr() as *mut f32,
            equity_out: f64p(&self.equity_out),
            obs: self.obs.data_ptr() as *mut f32,
            ret_sum: f64p(&self.ret_sum),
            ret_count: f64p(&self.ret_count),
            trials: self.trials.as_ref().map_or(std::ptr::null(), |(_, t)| t.data_ptr() as *const super::Trial),
        }
    }

    fn launch(&self, entry: Entry) -> Result<(), KernelEnvError> {
        if self.actions.kind() != Kind::Float || !self.actions.is_contiguous() {
            return Err(EnvError::Unsupported("the kernel env's actions must stay a contiguous f32 tensor").into());
        }
        let b = self.buffers();
        match &self.backend {
            // SAFETY: every tensor behind `b` is a contiguous tensor on the CPU of the size `params`
            // promises (built in `new`; the actions checked above), owned by `self` and untouched while
            // the call runs.
            Backend::Cpu(pool) => unsafe { super::run_cpu(entry, &self.params, &b, pool.as_deref()) },
            // SAFETY: the same tensors on the CUDA device; `self` keeps them alive, and libtorch's later
            // work on them is queued on the same (default) stream after the launch.
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
    /// configuration variant (stops, cooldowns, turbulence, every accounting option) and random actions.
    pub(crate) fn assert_agrees_with_the_host_build(device: Device, n_envs: usize, steps: usize) {
        let panel = panel_with_turbulence();
        for (v, cfg) in configs(n_envs).into_iter().enumerate() {
            let mut want = CpuKernelEnv::new(&cfg, panel.clone()).unwrap();
            let mut got = TensorKernelEnv::new(&cfg, &panel, device).unwrap().with_threads(2).unwrap();
            let obs = |t: &Tensor| Vec::<f32>::try_from(t.to_device(Device::Cpu).view([-1])).unwrap();
            assert_eq!(f32_bits(&obs(&got.obs)), f32_bits(want.obs()), "variant {v}: first observation");
            let mut rng = crate::env::rng::SplitMix64::new(v as u64 + 7);
            let mut actions = vec![0f32; cfg.n_envs * panel.n_assets];
            let (mut s_want, mut s_got) = (Step::default(), Step::default());
            for s in 0..steps {
                random_actions(&mut rng, &mut actions);
                want.step(&actions, &mut s_want).unwrap();
                got.step_host(&actions, &mut s_got).unwrap();
                let at = format!("variant {v} step {s}");
                assert_eq!(f32_bits(&s_got.reward), f32_bits(&s_want.reward), "{at}: reward");
                assert_eq!(bits(&s_got.equity), bits(&s_want.equity), "{at}: equity");
                assert_eq!(s_got.done, s_want.done, "{at}: done");
                assert_eq!(bits(&got.cash().unwrap()), bits(want.cash()), "{at}: cash");
                assert_eq!(bits(&got.holdings().unwrap()), bits(want.holdings()), "{at}: holdings");
                assert_eq!(f32_bits(&obs(&got.obs)), f32_bits(want.obs()), "{at}: observation");
            }
            // Summed per env, then over envs in another order: the count exactly, the sum closely.
            let (got_r, want_r) = (got.take_returns().unwrap(), want.take_returns());
            assert_eq!(got_r.1, want_r.1, "variant {v}: finished episodes");
            assert!(want_r.1 > 0.0, "variant {v}: no episode ended in {steps} steps: the test checks nothing");
            assert!((got_r.0 - want_r.0).abs() <= 1e-9 * want_r.1, "variant {v}: returns {got_r:?} vs {want_r:?}");
            assert_eq!(got.take_returns().unwrap(), (0.0, 0.0), "variant {v}: the returns were not cleared");
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
        let err = env.step_host(&[0.0; 3], &mut Step::default()).err().unwrap().to_string();
        assert!(err.contains('3') && err.contains(&(4 * panel.n_assets).to_string()), "{err}");
    }
}
