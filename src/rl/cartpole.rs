//! CartPole-v1 with gymnasium's dynamics and termination, vectorized over E environments in plain Rust.
//!
//! Physics (Euler integration, tau = 0.02 s): gravity 9.8, cart mass 1.0, pole mass 0.1, half pole
//! length 0.5, force 10 N. An episode terminates when |x| > 2.4 or |theta| > 12 degrees, and is truncated
//! at 500 steps; reward is 1 per step. Reset draws every state variable uniformly from [-0.05, 0.05].
//! The action is continuous here (the PPO policy is Gaussian): a value above 0 pushes right.

use super::{BatchEnv, HostStep, Step, StepError};
use crate::env::rng::SplitMix64;
use tch::{Device, Kind, Tensor};

const GRAVITY: f64 = 9.8;
const MASS_CART: f64 = 1.0;
const MASS_POLE: f64 = 0.1;
const TOTAL_MASS: f64 = MASS_CART + MASS_POLE;
const LENGTH: f64 = 0.5;
const POLE_MASS_LENGTH: f64 = MASS_POLE * LENGTH;
const FORCE_MAG: f64 = 10.0;
const TAU: f64 = 0.02;
const THETA_LIMIT: f64 = 12.0 * 2.0 * std::f64::consts::PI / 360.0;
const X_LIMIT: f64 = 2.4;
pub const MAX_STEPS: u32 = 500;

pub struct CartPole {
    state: Vec<[f64; 4]>,
    steps: Vec<u32>,
    returns: Vec<f64>,
    rng: SplitMix64,
}

impl CartPole {
    pub fn new(num_envs: usize, seed: u64) -> Self {
        let mut env = CartPole {
            state: vec![[0.0; 4]; num_envs],
            steps: vec![0; num_envs],
            returns: vec![0.0; num_envs],
            rng: SplitMix64::new(seed),
        };
        for i in 0..num_envs {
            env.reset_one(i);
        }
        env
    }

    fn reset_one(&mut self, i: usize) {
        for v in self.state[i].iter_mut() {
            *v = self.rng.uniform(-0.05, 0.05);
        }
        self.steps[i] = 0;
        self.returns[i] = 0.0;
    }

    /// Advances one environment by one step; returns whether it terminated (pole fell or cart left).
    pub fn physics(s: &mut [f64; 4], push_right: bool) -> bool {
        let [x, x_dot, theta, theta_dot] = *s;
        let force = if push_right { FORCE_MAG } else { -FORCE_MAG };
        let (sin, cos) = theta.sin_cos();
        let temp = (force + POLE_MASS_LENGTH * theta_dot * theta_dot * sin) / TOTAL_MASS;
        let theta_acc = (GRAVITY * sin - cos * temp) / (LENGTH * (4.0 / 3.0 - MASS_POLE * cos * cos / TOTAL_MASS));
        let x_acc = temp - POLE_MASS_LENGTH * theta_acc * cos / TOTAL_MASS;
        *s = [x + TAU * x_dot, x_dot + TAU * x_acc, theta + TAU * theta_dot, theta_dot + TAU * theta_acc];
        s[0] < -X_LIMIT || s[0] > X_LIMIT || s[2] < -THETA_LIMIT || s[2] > THETA_LIMIT
    }

    fn obs(&self) -> Tensor {
        let flat: Vec<f32> = self.state.iter().flat_map(|s| s.iter().map(|v| *v as f32)).collect();
        Tensor::from_slice(&flat).view([self.state.len() as i64, 4])
    }
}

impl CartPole {
    /// One step of every env on actions `a` (> 0 pushes right), with automatic reset.
    fn advance(&mut self, a: &[f32], reward: &mut Vec<f32>, done: &mut Vec<f32>, finished: &mut Vec<f64>) {
        let n = self.state.len();
        reward.clear();
        reward.resize(n, 1.0);
        done.clear();
        done.resize(n, 0.0);
        for i in 0..n {
            let terminated = Self::physics(&mut self.state[i], a[i] > 0.0);
            self.steps[i] += 1;
            self.returns[i] += 1.0;
            if !a[i].is_finite() {
                reward[i] = 0.0;
            }
            if terminated || self.steps[i] >= MAX_STEPS {
                done[i] = 1.0;
                finished.push(self.returns[i]);
                self.reset_one(i);
            }
        }
    }

    fn obs_into(&self, out: &mut Vec<f32>) {
        out.clear();
        out.extend(self.state.iter().flat_map(|s| s.iter().map(|v| *v as f32)));
    }
}

impl BatchEnv for CartPole {
    fn num_envs(&self) -> usize {
        self.state.len()
    }

    fn obs_dim(&self) -> usize {
        4
    }

    fn act_dim(&self) -> usize {
        1
    }

    fn device(&self) -> Device {
        Device::Cpu
    }

    fn reset(&mut self) -> Tensor {
        for i in 0..self.state.len() {
            self.reset_one(i);
        }
        self.obs()
    }

    fn step(&mut self, actions: &Tensor) -> Result<Step, StepError> {
        let n = self.state.len();
        let a = Vec::<f32>::try_from(actions.f_to_device(Device::Cpu)?.f_to_kind(Kind::Float)?.f_reshape([-1])?)?;
        if a.len() != n {
            return Err(StepError::ActionCount { got: a.len(), want: n, envs: n, act_dim: 1 });
        }
        let (mut reward, mut done, mut finished) = (Vec::new(), Vec::new(), Vec::new());
        self.advance(&a, &mut reward, &mut done, &mut finished);
        Ok(Step { obs: self.obs(), reward: Tensor::from_slice(&reward), done: Tensor::from_slice(&done), finished })
    }

    fn reset_host(&mut self, obs: &mut Vec<f32>) -> Result<(), tch::TchError> {
        for i in 0..self.state.len() {
            self.reset_one(i);
        }
        self.obs_into(obs);
        Ok(())
    }

    fn step_host(&mut self, actions: &[f32], out: &mut HostStep) -> Result<(), StepError> {
        let n = self.state.len();
        if actions.len() != n {
            return Err(StepError::ActionCount { got: actions.len(), want: n, envs: n, act_dim: 1 });
        }
        out.finished.clear();
        self.advance(actions, &mut out.reward, &mut out.done, &mut out.finished);
        self.obs_into(&mut out.obs);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn physics_matches_hand_computed_first_step() {
        // From rest at the origin, pushing right: temp = 10/1.1, theta_acc = -temp / (0.5 * (4/3 - 0.1/1.1)).
        let mut s = [0.0; 4];
        assert!(!CartPole::physics(&mut s, true));
        let temp = 10.0 / 1.1;
        let theta_acc = -temp / (0.5 * (4.0 / 3.0 - 0.1 / 1.1));
        let x_acc = temp - 0.05 * theta_acc / 1.1;
        assert_eq!(s, [0.0, 0.02 * x_acc, 0.0, 0.02 * theta_acc]);
    }

    #[test]
    fn always_pushing_one_way_fails_fast_and_auto_resets() {
        let mut env = CartPole::new(3, 1);
        let mut lens = Vec::new();
        for _ in 0..200 {
            let st = env.step(&Tensor::from_slice(&[1.0f32, 1.0, 1.0])).unwrap();
            lens.extend(st.finished);
            assert_eq!(st.obs.size(), [3, 4]);
        }
        assert!(lens.len() >= 3, "{lens:?}");
        assert!(lens.iter().all(|l| (5.0..60.0).contains(l)), "{lens:?}");
        // After an automatic reset the state is small again.
        let obs = Vec::<f32>::try_from(env.obs().reshape([-1])).unwrap();
        assert!(obs.iter().all(|v| v.is_finite()));
    }

    #[test]
    fn truncates_at_500() {
        let mut env = CartPole::new(1, 2);
        // A hand-made balancing controller keeps the pole up: the episode must end at exactly 500.
        for _ in 0..MAX_STEPS {
            let [_, x_dot, theta, theta_dot] = env.state[0];
            let push = theta + 0.5 * theta_dot + 0.01 * x_dot > 0.0;
            let st = env.step(&Tensor::from_slice(&[if push { 1.0f32 } else { -1.0 }])).unwrap();
            if let Some(r) = st.finished.first() {
                assert_eq!(*r, 500.0);
                return;
            }
        }
        panic!("no episode ended within 500 steps");
    }
}
