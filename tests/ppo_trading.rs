//! PPO on the trading environment: over synthetic prices with a planted, predictable signal (a feature
//! that gives the sign of the next day's drift), the trained policy must beat both buy-and-hold and a
//! random policy by a clear margin on fresh episodes.
#![cfg(feature = "train")]

use std::sync::Arc;
use tch::{Device, Kind, Tensor};
use tradebot::ExecParams;
use tradebot::env::rng::SplitMix64;
use tradebot::env::{self, EnvConfig, Panel};
use tradebot::rl::ppo::{Ppo, PpoConfig};
use tradebot::rl::trading::TradingEnv;

const ASSETS: usize = 2;

/// The env trades an action chosen on day t's observation at day t+1's price (FinRL's convention), so
/// the planted feature 0 on day t is s_{t+1} in {-1, +1}, the sign of the drift from day t+1 to t+2:
/// the price moves by exp(0.01 s_t + 0.005 z) from day t to t+1. Feature 1 is the past day's log return.
fn planted_panel(days: usize, seed: u64) -> Panel {
    let mut rng = SplitMix64::new(seed);
    let signal: Vec<Vec<f32>> =
        (0..=days).map(|_| (0..ASSETS).map(|_| if rng.next_f64() < 0.5 { -1.0 } else { 1.0 }).collect()).collect();
    let mut price = [100.0f64; ASSETS];
    let mut last_ret = [0.0f32; ASSETS];
    let (mut prices, mut features) = (Vec::new(), Vec::new());
    for t in 0..days {
        for a in 0..ASSETS {
            prices.push(price[a] as f32);
            features.extend([signal[t + 1][a], last_ret[a] * 50.0]);
        }
        for a in 0..ASSETS {
            let z = (rng.next_f64() + rng.next_f64() + rng.next_f64() - 1.5) * 2.0;
            let r = 0.01 * f64::from(signal[t][a]) + 0.005 * z;
            price[a] *= r.exp();
            last_ret[a] = r as f32;
        }
    }
    Panel::new(ASSETS, prices, 2, features, None).unwrap()
}

fn env_cfg(n_envs: usize, seed: u64) -> EnvConfig {
    EnvConfig {
        n_envs,
        episode_len: 60,
        initial_cash: 100_000.0,
        exec: ExecParams { max_trade: 500.0, min_order: 1.0, fee_bps: 1.0, ..Default::default() },
        reward_scale: 1e-4,
        seed,
        ..Default::default()
    }
}

/// Mean total return over `episodes` fresh episodes under `policy(obs) -> actions`.
fn mean_return(panel: &Arc<Panel>, seed: u64, mut policy: impl FnMut(&[f32], usize, usize) -> Vec<f32>) -> f64 {
    let n = 32;
    let mut e = env::VecEnv::new(env_cfg(n, seed), panel.clone()).unwrap();
    let mut obs = vec![0.0f32; n * e.obs_dim()];
    let mut step = env::StepOutcome::default();
    let mut returns = Vec::new();
    for t in 0..60 {
        e.observe(&mut obs);
        let acts = policy(&obs, t, e.obs_dim());
        e.step(&acts, &mut step).unwrap();
        for i in 0..n {
            if step.done[i] {
                returns.push(step.equity[i] / 100_000.0 - 1.0);
            }
        }
    }
    assert_eq!(returns.len(), n, "every env finishes exactly one episode");
    returns.iter().sum::<f64>() / n as f64
}

#[test]
fn ppo_beats_buy_and_hold_and_random_on_a_planted_signal() {
    tch::set_num_threads(1);
    let panel = Arc::new(planted_panel(2000, 17));
    let mut env = TradingEnv::new(env_cfg(16, 1), panel.clone()).unwrap();
    // The signal predicts one day ahead: a short horizon (gamma 0.9) keeps the advantage estimates clean.
    let cfg = PpoConfig {
        hidden: vec![64, 64],
        n_steps: 60,
        batch_size: 240,
        n_epochs: 10,
        learning_rate: 1e-3,
        gamma: 0.9,
        gae_lambda: 0.9,
        log_std_init: -0.5,
        seed: 3,
        ..Default::default()
    };
    let mut ppo = Ppo::new(cfg, tradebot::rl::BatchEnv::obs_dim(&env), ASSETS, Device::Cpu).unwrap();
    ppo.train(&mut env, 150_000, |s| {
        if s.update % 10 == 0 {
            eprintln!(
                "update {} steps {} mean return {:?} kl {:.4} ev {:.3} entropy {:.3}",
                s.update, s.env_steps, s.mean_return, s.approx_kl, s.explained_variance, s.entropy
            );
        }
        true
    })
    .unwrap();

    let eval_seed = 99;
    let trained = mean_return(&panel, eval_seed, |obs, _, d| {
        let x = Tensor::from_slice(obs).view([-1, d as i64]);
        Vec::<f32>::try_from(ppo.act_deterministic(&x).clamp(-1.0, 1.0).to_kind(Kind::Float).reshape([-1])).unwrap()
    });
    let buy_and_hold =
        mean_return(&panel, eval_seed, |obs, t, d| vec![if t == 0 { 1.0 } else { 0.0 }; obs.len() / d * ASSETS]);
    let mut rng = SplitMix64::new(5);
    let random = mean_return(&panel, eval_seed, |obs, _, d| {
        (0..obs.len() / d * ASSETS).map(|_| rng.uniform(-1.0, 1.0) as f32).collect()
    });
    eprintln!("mean episode return: trained {trained:.4}, buy-and-hold {buy_and_hold:.4}, random {random:.4}");
    assert!(trained > buy_and_hold + 0.05, "trained {trained} vs buy-and-hold {buy_and_hold}");
    assert!(trained > random + 0.05, "trained {trained} vs random {random}");
}
