//! SAC's pieces: the squashed Gaussian's log-probability against its definition, the Polyak update, the
//! temperature's direction, and the shapes a trainer refuses. The proof that SAC learns is the pendulum
//! test (tests/ppo_cartpole.rs).

use super::nets::{polyak, squashed};
use super::*;
use crate::rl::pendulum::Pendulum;

#[test]
fn the_squashed_log_probability_is_the_gaussians_less_the_tanh_jacobian() {
    let mean = Tensor::from_slice(&[0.3f64, -1.2, 4.0, 0.0]).view([2, 2]);
    let log_std = Tensor::from_slice(&[-0.5f64, 0.2, 0.7, -2.0]).view([2, 2]);
    let eps = Tensor::from_slice(&[1.1f64, -0.4, 2.5, 0.3]).view([2, 2]);
    let (a, lp) = squashed(&mean, &log_std, &eps);
    let (m, s, e) = ([0.3, -1.2, 4.0, 0.0], [-0.5f64, 0.2, 0.7, -2.0], [1.1, -0.4, 2.5, 0.3]);
    let mut want = [0.0f64; 2];
    for i in 0..4 {
        let u = m[i] + s[i].exp() * e[i];
        let density = -0.5 * e[i] * e[i] - s[i] - 0.5 * (2.0 * std::f64::consts::PI).ln();
        want[i / 2] += density - (1.0 - u.tanh().powi(2)).ln();
        assert!((a.double_value(&[(i / 2) as i64, (i % 2) as i64]) - u.tanh()).abs() < 1e-12);
    }
    for (k, w) in want.iter().enumerate() {
        let got = lp.double_value(&[k as i64]);
        assert!((got - w).abs() < 1e-7, "row {k}: {got} vs {w}");
    }
    // Far in the tail, where 1 - tanh² rounds to 0 in f32, the stable form stays finite.
    let (_, far) = squashed(
        &Tensor::from_slice(&[30.0f32]).view([1, 1]),
        &Tensor::zeros([1, 1], (Kind::Float, Device::Cpu)),
        &Tensor::zeros([1, 1], (Kind::Float, Device::Cpu)),
    );
    assert!(far.double_value(&[0]).is_finite());
}

#[test]
fn polyak_moves_the_target_tau_of_the_way() {
    let target = Tensor::from_slice(&[0.0f32, 10.0]);
    let source = Tensor::from_slice(&[1.0f32, 0.0]);
    polyak(&target, &source, 0.25);
    assert_eq!(Vec::<f32>::try_from(&target).unwrap(), vec![0.25, 7.5]);
}

fn small(seed: u64) -> SacConfig {
    SacConfig {
        hidden: vec![16],
        warmup_steps: 64,
        batch_size: 32,
        buffer_size: 1000,
        normalize_obs: false,
        seed,
        ..Default::default()
    }
}

#[test]
fn the_temperature_falls_while_the_policy_is_more_random_than_its_target() {
    // A fresh actor's entropy on a 1-d action is far above the target -1: alpha must fall from 1, report
    // after report.
    let mut sac = Sac::new(SacConfig { alpha_learning_rate: 1e-2, ..small(3) }, 3, 1, 4, Device::Cpu).unwrap();
    let mut env = Pendulum::new(4, 3);
    let mut reports = Vec::new();
    sac.train(&mut env, 800, 400, |s| {
        reports.push(s.clone());
        true
    })
    .unwrap();
    assert_eq!(sac.env_steps, 800);
    assert_eq!(sac.updates, (800 - 64) / 4 + 1, "one update per step of the 4 envs once 64 steps are in");
    let last = reports.last().unwrap();
    assert!(last.alpha < 0.8 && last.alpha > 0.0 && last.alpha < reports[0].alpha, "{reports:?}");
    assert!(last.critic_loss.is_finite() && last.episodes == 4, "{last:?}");
    assert_eq!(reports.len(), 2);
}

#[test]
fn a_trainer_refuses_an_env_of_another_shape_and_a_buffer_smaller_than_a_step() {
    let mut sac = Sac::new(small(1), 4, 1, 4, Device::Cpu).unwrap();
    let e = sac.train(&mut Pendulum::new(4, 1), 100, 100, |_| true).unwrap_err();
    assert!(e.to_string().contains("the environment has 3 observations but the policy expects 4"), "{e}");
    let e = Sac::new(SacConfig { buffer_size: 2, batch_size: 2, ..small(1) }, 3, 1, 4, Device::Cpu).err().unwrap();
    assert!(e.to_string().contains("sac.buffer_size = 2 is below env.n_envs = 4"), "{e}");
    let e = Sac::new(SacConfig { tau: 0.0, ..small(1) }, 3, 1, 4, Device::Cpu).err().unwrap();
    assert!(e.to_string().contains("sac.tau must be in (0, 1]"), "{e}");
}
