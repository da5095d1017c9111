//! The trading environment seen through the `rl::BatchEnv` trait, so PPO trains on it: `TradingEnv`
//! (`env::VecEnv`, plain Rust on the host) or `KernelTradingEnv` (the env kernel on the training device).
//! Actions are clipped to [-1, 1] (the env's action space); an episode's "return" for progress reports is
//! its total return, `final equity / initial cash - 1`.

use super::{BatchEnv, HostStep, StepError, TensorStep};
use crate::env::kernel::{KernelEnvError, TensorKernelEnv};
use crate::env::{self, EnvConfig, EnvError, Panel};
use std::sync::Arc;
use tch::{Device, Kind, Tensor};

/// The trading env on the host (`env::VecEnv`) as a `BatchEnv`: what the CPU trainers step.
pub struct TradingEnv {
    inner: env::VecEnv,
    obs: Vec<f32>,
    step: env::StepOutcome,
    actions: Vec<f32>,
    initial_cash: f64,
}

impl TradingEnv {
    /// `env::VecEnv::new` over `panel` with `cfg`, with the buffers its steps reuse.
    pub fn new(cfg: EnvConfig, panel: Arc<Panel>) -> Result<Self, EnvError> {
        let initial_cash = cfg.initial_cash;
        let inner = env::VecEnv::new(cfg, panel)?;
        let obs = vec![0.0; inner.n_envs() * inner.obs_dim()];
        let actions = vec![0.0; inner.n_envs() * inner.n_assets()];
        Ok(TradingEnv { inner, obs, step: env::StepOutcome::default(), actions, initial_cash })
    }

    /// The env underneath (cash, positions, equity).
    pub fn inner(&self) -> &env::VecEnv {
        &self.inner
    }

    /// `actions` into `self.actions`, or the error naming both counts.
    fn take_actions(&mut self, actions: &[f32]) -> Result<(), StepError> {
        if actions.len() != self.actions.len() {
            let (envs, act_dim) = (self.inner.n_envs(), self.inner.n_assets());
            return Err(StepError::ActionCount { got: actions.len(), want: self.actions.len(), envs, act_dim });
        }
        self.actions.copy_from_slice(actions);
        Ok(())
    }

    /// Steps the inner env on `self.actions` (clipped to [-1, 1]); returns the finished episodes' returns
    /// and the done flags as 0/1.
    fn advance(&mut self) -> Result<(Vec<f64>, Vec<f32>), StepError> {
        self.actions.iter_mut().for_each(|a| *a = a.clamp(-1.0, 1.0));
        let n = self.inner.n_envs();
        self.inner.step(&self.actions, &mut self.step)?;
        let finished =
            (0..n).filter(|&i| self.step.done[i]).map(|i| self.step.equity[i] / self.initial_cash - 1.0).collect();
        let done = self.step.done.iter().map(|d| f32::from(u8::from(*d))).collect();
        Ok((finished, done))
    }

    fn obs_tensor(&mut self) -> Tensor {
        self.inner.observe(&mut self.obs);
        Tensor::from_slice(&self.obs).view([self.inner.n_envs() as i64, self.inner.obs_dim() as i64])
    }
}

impl BatchEnv for TradingEnv {
    fn num_envs(&self) -> usize {
        self.inner.n_envs()
    }

    fn obs_dim(&self) -> usize {
        self.inner.obs_dim()
    }

    fn act_dim(&self) -> usize {
        self.inner.n_assets()
    }

    fn device(&self) -> Device {
        Device::Cpu
    }

    /// The env resets itself at construction and after every episode: this returns the current state.
    fn reset(&mut self) -> Tensor {
        self.obs_tensor()
    }

    fn step(&mut self, actions: &Tensor) -> Result<TensorStep, StepError> {
        let flat = actions.f_to_device(Device::Cpu)?.f_to_kind(Kind::Float)?.f_reshape([-1])?;
        self.take_actions(&Vec::<f32>::try_from(flat)?)?;
        let (finished, done) = self.advance()?;
        Ok(TensorStep {
            obs: self.obs_tensor(),
            reward: Tensor::from_slice(&self.step.reward),
            done: Tensor::from_slice(&done),
            finished,
        })
    }

    fn reset_host(&mut self, obs: &mut Vec<f32>) -> Result<(), tch::TchError> {
        obs.resize(self.obs.len(), 0.0);
        self.inner.observe(obs);
        Ok(())
    }

    fn step_host(&mut self, actions: &[f32], out: &mut HostStep) -> Result<(), StepError> {
        self.take_actions(actions)?;
        let (finished, done) = self.advance()?;
        out.finished = finished;
        out.done = done;
        out.reward.clear();
        out.reward.extend_from_slice(&self.step.reward);
        out.obs.resize(self.obs.len(), 0.0);
        self.inner.observe(&mut out.obs);
        Ok(())
    }
}

/// The env kernel on the training device (CUDA, or the CPU for tests): the policy's actions are copied
/// into the kernel's action tensor on the device, the step is one launch, and the observations, rewards
/// and done flags come back as device tensors. Finished episodes' returns are summed per env on the device
/// and read by `take_returns`, once per rollout: a rollout step reads nothing back to the host.
pub struct KernelTradingEnv {
    inner: TensorKernelEnv,
}

impl KernelTradingEnv {
    /// The env kernel over `panel` with `cfg`, its state on `device`.
    pub fn new(cfg: &EnvConfig, panel: &Panel, device: Device) -> Result<Self, KernelEnvError> {
        Ok(KernelTradingEnv { inner: TensorKernelEnv::new(cfg, panel, device)? })
    }

    /// The kernel env underneath.
    pub fn inner(&self) -> &TensorKernelEnv {
        &self.inner
    }
}

impl BatchEnv for KernelTradingEnv {
    fn num_envs(&self) -> usize {
        self.inner.n_envs()
    }

    fn obs_dim(&self) -> usize {
        self.inner.obs_dim()
    }

    fn act_dim(&self) -> usize {
        self.inner.n_assets()
    }

    fn device(&self) -> Device {
        self.inner.device()
    }

    /// The env resets itself at construction and after every episode: this returns the current state.
    fn reset(&mut self) -> Tensor {
        self.inner.obs().copy()
    }

    fn step(&mut self, actions: &Tensor) -> Result<TensorStep, StepError> {
        let want = [self.num_envs() as i64, self.act_dim() as i64];
        if actions.size() != want {
            return Err(StepError::ActionShape { got: actions.size(), want });
        }
        self.inner.set_actions(actions).map_err(StepError::SetActions)?;
        self.inner.step().map_err(StepError::Kernel)?;
        // Copies on the device: the kernel overwrites its buffers at the next step.
        Ok(TensorStep {
            obs: self.inner.obs().copy(),
            reward: self.inner.reward().copy(),
            done: self.inner.done().copy(),
            finished: Vec::new(),
        })
    }

    fn take_returns(&mut self) -> Result<Option<(f64, f64)>, StepError> {
        self.inner.take_returns().map(Some).map_err(StepError::Returns)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env(n_envs: usize) -> TradingEnv {
        let panel = Arc::new(Panel::synthetic(40, 2, 1, 7).unwrap());
        TradingEnv::new(EnvConfig { n_envs, episode_len: 10, ..EnvConfig::default() }, panel).unwrap()
    }

    /// Actions of the wrong count are the step's error, naming both counts; they were zeros (no trade)
    /// before, which trained on a step the policy never asked for.
    #[test]
    fn a_wrong_count_of_actions_is_an_error_not_zeros() {
        let mut e = env(3);
        let err = e.step(&Tensor::from_slice(&[0.5f32; 5])).map(|_| ()).unwrap_err();
        assert!(matches!(err, StepError::ActionCount { got: 5, want: 6, envs: 3, act_dim: 2 }), "{err}");
        assert!(err.to_string().contains("the policy gave 5 actions; the env takes 6"), "{err}");
        let mut out = HostStep::default();
        let err = e.step_host(&[0.5; 7], &mut out).unwrap_err();
        assert!(matches!(err, StepError::ActionCount { got: 7, want: 6, .. }), "{err}");
        let st = e.step(&Tensor::from_slice(&[0.5f32; 6]).view([3, 2])).unwrap();
        assert_eq!(st.reward.size(), [3]);
        e.step_host(&[0.5; 6], &mut out).unwrap();
        assert_eq!(out.reward.len(), 3);
    }

    /// The env kernel (its CPU build) refuses actions of another shape with the step's error, where it
    /// used to keep the failure for `take_error` and step on the old actions.
    #[test]
    fn the_kernel_env_refuses_actions_of_another_shape() {
        let panel = Panel::synthetic(40, 2, 1, 7).unwrap();
        let cfg = EnvConfig { n_envs: 3, episode_len: 10, ..EnvConfig::default() };
        let mut e = KernelTradingEnv::new(&cfg, &panel, Device::Cpu).unwrap();
        let err = e.step(&Tensor::zeros([2, 2], (Kind::Float, Device::Cpu))).map(|_| ()).unwrap_err();
        assert!(matches!(&err, StepError::ActionShape { got, want: [3, 2] } if got == &[2, 2]), "{err}");
        assert!(e.step(&Tensor::zeros([3, 2], (Kind::Float, Device::Cpu))).is_ok());
        assert!(e.take_returns().unwrap().is_some());
    }
}
