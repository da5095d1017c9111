//! Pendulum-v1 with gymnasium's dynamics, reward and time limit, vectorized over E environments in plain
//! Rust: the continuous-control check for SAC (as CartPole is PPO's).
//!
//! A pole of mass 1 and length 1 hangs from a motor; gravity 10, time step 0.05 s. The torque is the
//! action times 2 (the action is clipped to [-1, 1], so the torque to [-2, 2]); the angular velocity is
//! clipped to [-8, 8]. Reward: `-(angle² + 0.1 velocity² + 0.001 torque²)`, the angle normalised to
//! [-pi, pi) (0 is upright). The episode never terminates and is truncated at 200 steps; reset draws the
//! angle from [-pi, pi] and the velocity from [-1, 1]. Observation: `[cos angle, sin angle, velocity]`.
//! A random policy scores about -1,200 an episode; a swing-up and balance about -150.

use super::{BatchEnv, HostStep, Step, StepError};
use crate::env::rng::SplitMix64;
use std::f64::consts::PI;
use tch::{Device, Kind, Tensor};

const GRAVITY: f64 = 10.0;
const MASS: f64 = 1.0;
const LENGTH: f64 = 1.0;
const DT: f64 = 0.05;
const MAX_SPEED: f64 = 8.0;
pub const MAX_TORQUE: f64 = 2.0;
pub const MAX_STEPS: u32 = 200;

pub struct Pendulum {
    /// `[angle, angular velocity]` per env.
    state: Vec<[f64; 2]>,
    steps: Vec<u32>,
    returns: Vec<f64>,
    rng: SplitMix64,
}

/// An angle in [-pi, pi).
fn normalize(a: f64) -> f64 {
    (a + PI).rem_euclid(2.0 * PI) - PI
}

impl Pendulum {
    pub fn new(num_envs: usize, seed: u64) -> Self {
        let mut env = Pendulum {
            state: vec![[0.0; 2]; num_envs],
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
        self.state[i] = [self.rng.uniform(-PI, PI), self.rng.uniform(-1.0, 1.0)];
        self.steps[i] = 0;
        self.returns[i] = 0.0;
    }

    /// Advances one pendulum by one step under `torque` (already within the limits); returns the reward.
    pub fn physics(s: &mut [f64; 2], torque: f64) -> f64 {
        let [th, thdot] = *s;
        let cost = normalize(th).powi(2) + 0.1 * thdot * thdot + 0.001 * torque * torque;
        let acc = 3.0 * GRAVITY / (2.0 * LENGTH) * th.sin() + 3.0 / (MASS * LENGTH * LENGTH) * torque;
        let new_thdot = (thdot + acc * DT).clamp(-MAX_SPEED, MAX_SPEED);
        *s = [th + new_thdot * DT, new_thdot];
        -cost
    }

    /// One step of every env on actions `a` (clipped to [-1, 1]; not finite counts as 0), with automatic
    /// reset at the time limit.
    fn advance(&mut self, a: &[f32], reward: &mut Vec<f32>, done: &mut Vec<f32>, finished: &mut Vec<f64>) {
        let n = self.state.len();
        reward.clear();
        done.clear();
        for i in 0..n {
            let u = a.get(i).copied().filter(|u| u.is_finite()).unwrap_or(0.0);
            let torque = f64::from(u).clamp(-1.0, 1.0) * MAX_TORQUE;
            let r = Self::physics(&mut self.state[i], torque);
            reward.push(r as f32);
            self.steps[i] += 1;
            self.returns[i] += r;
            let ended = self.steps[i] >= MAX_STEPS;
            done.push(if ended { 1.0 } else { 0.0 });
            if ended {
                finished.push(self.returns[i]);
                self.reset_one(i);
            }
        }
    }

    fn obs_into(&self, out: &mut Vec<f32>) {
        out.clear();
        out.extend(self.state.iter().flat_map(|[th, thdot]| [th.cos() as f32, th.sin() as f32, *thdot as f32]));
    }

    fn obs(&self) -> Tensor {
        let mut flat = Vec::new();
        self.obs_into(&mut flat);
        Tensor::from_slice(&flat).view([self.state.len() as i64, 3])
    }
}

impl BatchEnv for Pendulum {
    fn num_envs(&self) -> usize {
        self.state.len()
    }

    fn obs_dim(&self) -> usize {
        3
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
    fn physics_matches_hand_computed_steps() {
        // Hanging straight down at rest (angle pi): cost pi², no acceleration but the torque's 3 u.
        let mut s = [PI, 0.0];
        let r = Pendulum::physics(&mut s, 2.0);
        assert!((r - -(PI * PI + 0.001 * 4.0)).abs() < 1e-12, "{r}");
        let acc = 15.0 * PI.sin() + 3.0 * 2.0;
        assert!((s[1] - acc * 0.05).abs() < 1e-12 && (s[0] - (PI + acc * 0.05 * 0.05)).abs() < 1e-12, "{s:?}");
        // Upright at rest with no torque: reward 0, and it stays (sin 0 = 0).
        let mut up = [0.0, 0.0];
        assert_eq!(Pendulum::physics(&mut up, 0.0), 0.0);
        assert_eq!(up, [0.0, 0.0]);
        // The speed limit: a fast spin is clipped to 8.
        let mut fast = [0.5, 7.99];
        Pendulum::physics(&mut fast, 2.0);
        assert_eq!(fast[1], 8.0);
        // The angle in the cost wraps: 2 pi + 0.1 costs as 0.1.
        let mut wrapped = [2.0 * PI + 0.1, 0.0];
        assert!((Pendulum::physics(&mut wrapped, 0.0) + 0.01).abs() < 1e-9);
    }

    #[test]
    fn episodes_last_200_steps_and_actions_are_clipped() {
        let mut env = Pendulum::new(2, 3);
        let mut twin = Pendulum::new(2, 3);
        let mut finished = Vec::new();
        for t in 0..MAX_STEPS {
            // 5.0 and NaN act as 1.0 and 0.0.
            let st = env.step(&Tensor::from_slice(&[5.0f32, f32::NAN])).unwrap();
            let tw = twin.step(&Tensor::from_slice(&[1.0f32, 0.0])).unwrap();
            assert_eq!(Vec::<f32>::try_from(st.reward).unwrap(), Vec::<f32>::try_from(tw.reward).unwrap());
            let done = Vec::<f32>::try_from(st.done).unwrap();
            assert_eq!(done, if t + 1 == MAX_STEPS { vec![1.0, 1.0] } else { vec![0.0, 0.0] }, "step {t}");
            finished.extend(st.finished);
        }
        assert_eq!(finished.len(), 2);
        // Mostly hanging: far below the swing-up's -200.
        assert!(finished.iter().all(|r| *r < -300.0 && r.is_finite()), "{finished:?}");
        let obs = Vec::<f32>::try_from(env.obs().reshape([-1])).unwrap();
        assert!((obs[0] * obs[0] + obs[1] * obs[1] - 1.0).abs() < 1e-5, "cos² + sin² = 1: {obs:?}");
    }
}
