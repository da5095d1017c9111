//! E copies of a small control environment stepped together in plain Rust: the `BatchEnv` scaffolding
//! (reset, automatic reset at an episode's end, episode returns, tensors or host arrays) that CartPole and
//! Pendulum share. An environment brings only its dynamics, as a `SingleEnv`.

use super::{BatchEnv, HostStep, StepError, TensorStep};
use crate::env::rng::SplitMix64;
use tch::{Device, Kind, Tensor};

/// One environment with one continuous action: its state, reset, step and observation.
pub trait SingleEnv {
    /// The environment's state between steps.
    type State;
    /// Values per observation.
    const OBS_DIM: usize;
    /// Steps after which an episode is truncated.
    const MAX_STEPS: u32;

    /// A fresh episode's state.
    fn reset(rng: &mut SplitMix64) -> Self::State;
    /// One step on the action as the policy gave it (unbounded, maybe not finite): the reward, and whether
    /// the episode terminated.
    fn step(state: &mut Self::State, action: f32) -> (f64, bool);
    /// Appends the state's `OBS_DIM` observations to `out`.
    fn observe(state: &Self::State, out: &mut Vec<f32>);
}

/// E environments of kind `E` with their own step counts and running returns, and one seeded generator
/// for every reset.
pub struct HostBatch<E: SingleEnv> {
    pub(super) state: Vec<E::State>,
    steps: Vec<u32>,
    returns: Vec<f64>,
    rng: SplitMix64,
}

impl<E: SingleEnv> HostBatch<E> {
    /// `num_envs` environments, each reset from one generator seeded with `seed`.
    pub fn new(num_envs: usize, seed: u64) -> Self {
        let mut rng = SplitMix64::new(seed);
        let state = (0..num_envs).map(|_| E::reset(&mut rng)).collect();
        HostBatch { state, steps: vec![0; num_envs], returns: vec![0.0; num_envs], rng }
    }

    fn reset_one(&mut self, i: usize) {
        self.state[i] = E::reset(&mut self.rng);
        self.steps[i] = 0;
        self.returns[i] = 0.0;
    }

    fn reset_all(&mut self) {
        for i in 0..self.state.len() {
            self.reset_one(i);
        }
    }

    fn check(&self, got: usize) -> Result<(), StepError> {
        let n = self.state.len();
        if got != n {
            return Err(StepError::ActionCount { got, want: n, envs: n, act_dim: 1 });
        }
        Ok(())
    }

    /// One step of every env on actions `a`, with automatic reset where an episode ended.
    fn advance(&mut self, a: &[f32], reward: &mut Vec<f32>, done: &mut Vec<f32>, finished: &mut Vec<f64>) {
        reward.clear();
        done.clear();
        for (i, &u) in a.iter().enumerate().take(self.state.len()) {
            let (r, terminated) = E::step(&mut self.state[i], u);
            reward.push(r as f32);
            self.steps[i] += 1;
            self.returns[i] += r;
            let ended = terminated || self.steps[i] >= E::MAX_STEPS;
            done.push(if ended { 1.0 } else { 0.0 });
            if ended {
                finished.push(self.returns[i]);
                self.reset_one(i);
            }
        }
    }

    fn obs_into(&self, out: &mut Vec<f32>) {
        out.clear();
        for s in &self.state {
            E::observe(s, out);
        }
    }

    /// The observations `[E, OBS_DIM]`.
    pub fn obs(&self) -> Tensor {
        let mut flat = Vec::with_capacity(self.state.len() * E::OBS_DIM);
        self.obs_into(&mut flat);
        Tensor::from_slice(&flat).view([self.state.len() as i64, E::OBS_DIM as i64])
    }
}

impl<E: SingleEnv> BatchEnv for HostBatch<E> {
    fn num_envs(&self) -> usize {
        self.state.len()
    }

    fn obs_dim(&self) -> usize {
        E::OBS_DIM
    }

    fn act_dim(&self) -> usize {
        1
    }

    fn device(&self) -> Device {
        Device::Cpu
    }

    fn reset(&mut self) -> Tensor {
        self.reset_all();
        self.obs()
    }

    fn step(&mut self, actions: &Tensor) -> Result<TensorStep, StepError> {
        let a = Vec::<f32>::try_from(actions.f_to_device(Device::Cpu)?.f_to_kind(Kind::Float)?.f_reshape([-1])?)?;
        self.check(a.len())?;
        let (mut reward, mut done, mut finished) = (Vec::new(), Vec::new(), Vec::new());
        self.advance(&a, &mut reward, &mut done, &mut finished);
        Ok(TensorStep {
            obs: self.obs(),
            reward: Tensor::from_slice(&reward),
            done: Tensor::from_slice(&done),
            finished,
        })
    }

    fn reset_host(&mut self, obs: &mut Vec<f32>) -> Result<(), tch::TchError> {
        self.reset_all();
        self.obs_into(obs);
        Ok(())
    }

    fn step_host(&mut self, actions: &[f32], out: &mut HostStep) -> Result<(), StepError> {
        self.check(actions.len())?;
        out.finished.clear();
        self.advance(actions, &mut out.reward, &mut out.done, &mut out.finished);
        self.obs_into(&mut out.obs);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Counts its steps, earns the action (0 where it is not finite), terminates on a negative action.
    struct Count;

    impl SingleEnv for Count {
        type State = u32;
        const OBS_DIM: usize = 1;
        const MAX_STEPS: u32 = 3;

        fn reset(_: &mut SplitMix64) -> u32 {
            0
        }

        fn step(s: &mut u32, a: f32) -> (f64, bool) {
            *s += 1;
            (if a.is_finite() { f64::from(a) } else { 0.0 }, a < 0.0)
        }

        fn observe(s: &u32, out: &mut Vec<f32>) {
            out.push(*s as f32);
        }
    }

    #[test]
    fn an_episode_ends_at_termination_or_the_limit_returns_its_rewards_and_restarts() {
        let mut env = HostBatch::<Count>::new(2, 0);
        let (mut out, mut obs, mut finished) = (HostStep::default(), Vec::new(), Vec::new());
        env.reset_host(&mut obs).unwrap();
        assert_eq!(obs, [0.0, 0.0]);
        let mut seen = Vec::new();
        for a in [[1.0, 0.5], [-2.0, f32::NAN], [1.0, 0.5]] {
            env.step_host(&a, &mut out).unwrap();
            finished.push(out.finished.clone());
            seen.push((out.reward.clone(), out.done.clone(), out.obs.clone()));
        }
        // Env 0 terminates at its 2nd step and restarts; env 1 reaches the limit of 3 steps.
        assert_eq!(seen[1], (vec![-2.0, 0.0], vec![1.0, 0.0], vec![0.0, 2.0]));
        assert_eq!(seen[2], (vec![1.0, 0.5], vec![0.0, 1.0], vec![1.0, 0.0]));
        // A return is the sum of the rewards given: 1 - 2 for env 0, 0.5 + 0 + 0.5 for env 1.
        assert_eq!(finished, [vec![], vec![-1.0], vec![1.0]]);
        let err = env.step_host(&[1.0], &mut out).unwrap_err().to_string();
        assert!(err.contains("gave 1 actions") && err.contains("takes 2"), "{err}");
        assert!(env.step(&Tensor::from_slice(&[1.0f32, 1.0, 1.0])).is_err(), "three actions for two envs");
    }
}
