//! CartPole-v1 with gymnasium's dynamics and termination, vectorized over E environments in plain Rust.
//!
//! Physics (Euler integration, tau = 0.02 s): gravity 9.8, cart mass 1.0, pole mass 0.1, half pole
//! length 0.5, force 10 N. An episode terminates when |x| > 2.4 or |theta| > 12 degrees, and is truncated
//! at 500 steps; reward is 1 per step. Reset draws every state variable uniformly from [-0.05, 0.05].
//! The action is continuous here (the PPO policy is Gaussian): a value above 0 pushes right.

use super::host_batch::{HostBatch, SingleEnv};
use crate::env::rng::SplitMix64;

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
/// Steps after which an episode is truncated (CartPole-v1's 500).
pub const MAX_STEPS: u32 = 500;

/// One cart and pole: `[x, x_dot, theta, theta_dot]`.
pub struct Cart;

/// E carts and poles.
pub type CartPole = HostBatch<Cart>;

impl CartPole {
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
}

impl SingleEnv for Cart {
    type State = [f64; 4];
    const OBS_DIM: usize = 4;
    const MAX_STEPS: u32 = MAX_STEPS;

    fn reset(rng: &mut SplitMix64) -> [f64; 4] {
        std::array::from_fn(|_| rng.uniform(-0.05, 0.05))
    }

    /// Reward 1 per step; a step on an action that is not finite earns 0.
    fn step(s: &mut [f64; 4], a: f32) -> (f64, bool) {
        let terminated = CartPole::physics(s, a > 0.0);
        (if a.is_finite() { 1.0 } else { 0.0 }, terminated)
    }

    fn observe(s: &[f64; 4], out: &mut Vec<f32>) {
        out.extend(s.iter().map(|v| *v as f32));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rl::BatchEnv;
    use tch::Tensor;

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
