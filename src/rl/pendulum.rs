//! Pendulum-v1 with gymnasium's dynamics, reward and time limit, vectorized over E environments in plain
//! Rust: the continuous-control check for SAC (as CartPole is PPO's).
//!
//! A pole of mass 1 and length 1 hangs from a motor; gravity 10, time step 0.05 s. The torque is the
//! action times 2 (the action is clipped to [-1, 1], so the torque to [-2, 2]); the angular velocity is
//! clipped to [-8, 8]. Reward: `-(angle² + 0.1 velocity² + 0.001 torque²)`, the angle normalised to
//! [-pi, pi) (0 is upright). The episode never terminates and is truncated at 200 steps; reset draws the
//! angle from [-pi, pi] and the velocity from [-1, 1]. Observation: `[cos angle, sin angle, velocity]`.
//! A random policy scores about -1,200 an episode; a swing-up and balance about -150.

use super::host_batch::{HostBatch, SingleEnv};
use crate::env::rng::SplitMix64;
use std::f64::consts::PI;

const GRAVITY: f64 = 10.0;
const MASS: f64 = 1.0;
const LENGTH: f64 = 1.0;
const DT: f64 = 0.05;
const MAX_SPEED: f64 = 8.0;
/// The largest torque the pendulum takes; actions are clipped to ± this (Pendulum-v1's 2).
pub const MAX_TORQUE: f64 = 2.0;
/// Steps after which an episode is truncated (Pendulum-v1's 200).
pub const MAX_STEPS: u32 = 200;

/// One pendulum: `[angle, angular velocity]`.
pub struct Pole;

/// E pendulums.
pub type Pendulum = HostBatch<Pole>;

/// An angle in [-pi, pi).
fn normalize(a: f64) -> f64 {
    (a + PI).rem_euclid(2.0 * PI) - PI
}

impl Pendulum {
    /// Advances one pendulum by one step under `torque` (already within the limits); returns the reward.
    pub fn physics(s: &mut [f64; 2], torque: f64) -> f64 {
        let [th, thdot] = *s;
        let cost = normalize(th).powi(2) + 0.1 * thdot * thdot + 0.001 * torque * torque;
        let acc = 3.0 * GRAVITY / (2.0 * LENGTH) * th.sin() + 3.0 / (MASS * LENGTH * LENGTH) * torque;
        let new_thdot = (thdot + acc * DT).clamp(-MAX_SPEED, MAX_SPEED);
        *s = [th + new_thdot * DT, new_thdot];
        -cost
    }
}

impl SingleEnv for Pole {
    type State = [f64; 2];
    const OBS_DIM: usize = 3;
    const MAX_STEPS: u32 = MAX_STEPS;

    fn reset(rng: &mut SplitMix64) -> [f64; 2] {
        [rng.uniform(-PI, PI), rng.uniform(-1.0, 1.0)]
    }

    /// The action clipped to [-1, 1] (not finite counts as 0) times the torque limit; never terminates.
    fn step(s: &mut [f64; 2], a: f32) -> (f64, bool) {
        let u = if a.is_finite() { a } else { 0.0 };
        let torque = f64::from(u).clamp(-1.0, 1.0) * MAX_TORQUE;
        (Pendulum::physics(s, torque), false)
    }

    fn observe(&[th, thdot]: &[f64; 2], out: &mut Vec<f32>) {
        out.extend([th.cos() as f32, th.sin() as f32, thdot as f32]);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rl::BatchEnv;
    use tch::Tensor;

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
