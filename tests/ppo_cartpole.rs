//! The proof that PPO learns: on gymnasium's CartPole-v1 (vectorized in Rust), PPO trained for at most
//! 200,000 environment steps reaches a mean return of at least 475 over 20 evaluation episodes (the mean
//! action, no exploration noise) for at least 4 of 5 seeds.
#![cfg(feature = "train")]

use tch::{Device, Tensor};
use tradebot::rl::cartpole::{CartPole, MAX_STEPS};
use tradebot::rl::ppo::{Ppo, PpoConfig};

fn config(seed: u64) -> PpoConfig {
    PpoConfig {
        hidden: vec![64, 64],
        n_steps: 128,
        batch_size: 256,
        n_epochs: 10,
        learning_rate: 1e-3,
        gamma: 0.98,
        gae_lambda: 0.9,
        ent_coef: 0.0,
        seed,
        ..Default::default()
    }
}

fn evaluate(p: &Ppo, seed: u64) -> f64 {
    let mut env = CartPole::new(20, seed ^ 0xE7A1);
    let mut obs = tradebot::rl::VecEnv::reset(&mut env);
    let mut returns = Vec::new();
    for _ in 0..(MAX_STEPS + 1) {
        let a: Tensor = p.act_deterministic(&obs);
        let st = tradebot::rl::VecEnv::step(&mut env, &a);
        returns.extend(st.finished);
        obs = st.obs;
        if returns.len() >= 20 {
            break;
        }
    }
    returns.truncate(20);
    returns.iter().sum::<f64>() / returns.len().max(1) as f64
}

#[test]
fn ppo_solves_cartpole_for_4_of_5_seeds() {
    tch::set_num_threads(1);
    let mut results = Vec::new();
    for seed in 1..=5u64 {
        let mut p = Ppo::new(config(seed), 4, 1, Device::Cpu).unwrap();
        let mut env = CartPole::new(8, seed);
        let mut last = None;
        p.train(&mut env, 200_000, |s| {
            last = s.mean_return;
            // Stop once training episodes are near-perfect; the evaluation below decides.
            s.mean_return.is_none_or(|r| r < 495.0)
        })
        .unwrap();
        assert!(p.env_steps <= 200_000 + 128 * 8);
        let score = evaluate(&p, seed);
        eprintln!("seed {seed}: {} env steps, last training mean {last:?}, evaluation mean {score}", p.env_steps);
        results.push(score);
    }
    let solved = results.iter().filter(|r| **r >= 475.0).count();
    assert!(solved >= 4, "only {solved} of 5 seeds reached 475: {results:?}");
}
