//! The trading environment seen through the `rl::BatchEnv` trait, so PPO trains on it: `TradingEnv`
//! (`env::VecEnv`, plain Rust on the host) or `KernelTradingEnv` (the env kernel on the training device).
//! Actions are clipped to [-1, 1] (the env's action space); an episode's "return" for progress reports is
//! its total return, `final equity / initial cash - 1`.

use super::{BatchEnv, HostStep, Step};
use crate::env::kernel::{KernelEnvError, TensorKernelEnv};
use crate::env::{self, EnvConfig, EnvError, Panel};
use std::sync::Arc;
use tch::{Device, Kind, Tensor};

pub struct TradingEnv {
    inner: env::VecEnv,
    obs: Vec<f32>,
    step: env::Step,
    actions: Vec<f32>,
    initial_cash: f64,
}

impl TradingEnv {
    pub fn new(cfg: EnvConfig, panel: Arc<Panel>) -> Result<Self, EnvError> {
        let initial_cash = cfg.initial_cash;
        let inner = env::VecEnv::new(cfg, panel)?;
        let obs = vec![0.0; inner.n_envs() * inner.obs_dim()];
        let actions = vec![0.0; inner.n_envs() * inner.n_assets()];
        Ok(TradingEnv { inner, obs, step: env::Step::default(), actions, initial_cash })
    }

    pub fn inner(&self) -> &env::VecEnv {
        &self.inner
    }

    /// Steps the inner env on `self.actions` (clipped to [-1, 1]); returns the finished episodes' returns
    /// and the done flags as 0/1.
    fn advance(&mut self) -> (Vec<f64>, Vec<f32>) {
        self.actions.iter_mut().for_each(|a| *a = a.clamp(-1.0, 1.0));
        let n = self.inner.n_envs();
        if let Err(e) = self.inner.step(&self.actions, &mut self.step) {
            log::error!("trading env step failed: {e}; this step trades nothing");
            self.step = env::Step { reward: vec![0.0; n], done: vec![false; n], equity: vec![self.initial_cash; n] };
        }
        let finished =
            (0..n).filter(|&i| self.step.done[i]).map(|i| self.step.equity[i] / self.initial_cash - 1.0).collect();
        let done = self.step.done.iter().map(|d| f32::from(u8::from(*d))).collect();
        (finished, done)
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

    fn step(&mut self, actions: &Tensor) -> Step {
        let flat = actions.to_device(Device::Cpu).to_kind(Kind::Float).reshape([-1]);
        match Vec::<f32>::try_from(flat) {
            Ok(v) if v.len() == self.actions.len() => self.actions.copy_from_slice(&v),
            _ => self.actions.iter_mut().for_each(|a| *a = 0.0),
        }
        let (finished, done) = self.advance();
        Step {
            obs: self.obs_tensor(),
            reward: Tensor::from_slice(&self.step.reward),
            done: Tensor::from_slice(&done),
            finished,
        }
    }

    fn reset_host(&mut self, obs: &mut Vec<f32>) -> Result<(), tch::TchError> {
        obs.resize(self.obs.len(), 0.0);
        self.inner.observe(obs);
        Ok(())
    }

    fn step_host(&mut self, actions: &[f32], out: &mut HostStep) -> Result<(), tch::TchError> {
        if actions.len() == self.actions.len() {
            self.actions.copy_from_slice(actions);
        } else {
            self.actions.iter_mut().for_each(|a| *a = 0.0);
        }
        let (finished, done) = self.advance();
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
    error: Option<String>,
}

impl KernelTradingEnv {
    pub fn new(cfg: &EnvConfig, panel: &Panel, device: Device) -> Result<Self, KernelEnvError> {
        Ok(KernelTradingEnv { inner: TensorKernelEnv::new(cfg, panel, device)?, error: None })
    }

    pub fn inner(&self) -> &TensorKernelEnv {
        &self.inner
    }

    fn fail(&mut self, what: String) {
        if self.error.is_none() {
            self.error = Some(what);
        }
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

    fn step(&mut self, actions: &Tensor) -> Step {
        let want = [self.num_envs() as i64, self.act_dim() as i64];
        if actions.size() != want {
            self.fail(format!("the policy gave actions of shape {:?}; the env takes {want:?}", actions.size()));
        } else if let Err(e) = self.inner.set_actions(actions) {
            self.fail(format!("the env kernel could not take the policy's actions: {e}"));
        } else if let Err(e) = self.inner.step() {
            self.fail(format!("the env kernel's step failed: {e}"));
        }
        // Copies on the device: the kernel overwrites its buffers at the next step.
        Step {
            obs: self.inner.obs().copy(),
            reward: self.inner.reward().copy(),
            done: self.inner.done().copy(),
            finished: Vec::new(),
        }
    }

    fn take_returns(&mut self) -> Option<(f64, f64)> {
        match self.inner.take_returns() {
            Ok(r) => Some(r),
            Err(e) => {
                self.fail(format!("could not read the episode returns back from the device: {e}"));
                None
            }
        }
    }

    fn take_error(&mut self) -> Option<String> {
        self.error.take()
    }
}
