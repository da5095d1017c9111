//! The tensor env against the plain-Rust env: same seed, same random actions, the same numbers.

use super::rng::SplitMix64;
use super::*;
use crate::exec::ExecParams;
use std::sync::Arc;
use tch::{Device, Kind, Tensor};

fn to_vec(t: &Tensor) -> Vec<f64> {
    let t = t.to_device(Device::Cpu).to_kind(Kind::Double).contiguous().view([-1]);
    let mut v = vec![0f64; t.numel()];
    t.copy_data(&mut v, t.numel());
    v
}

fn bits(v: &[f64]) -> Vec<u64> {
    v.iter().map(|x| x.to_bits()).collect()
}

fn configs() -> Vec<EnvConfig> {
    let base = EnvConfig { n_envs: 16, episode_len: 60, initial_cash: 30_000.0, seed: 5, ..Default::default() };
    vec![
        EnvConfig {
            exec: ExecParams {
                trailing_stop: 0.03,
                cooldown_bars: 2,
                slippage_bps: 5.0,
                min_order: 3.0,
                ..Default::default()
            },
            turnover_penalty: 0.001,
            turbulence_threshold: Some(99.0),
            ..base.clone()
        },
        EnvConfig {
            exec: ExecParams { integer_units: false, max_trade: 250.0, trailing_stop: 0.05, ..Default::default() },
            ..base.clone()
        },
        EnvConfig {
            exec: ExecParams { cash_cap_ignores_fees: true, ..Default::default() },
            turbulence_threshold: Some(99.0),
            ..base
        },
    ]
}

fn panel_with_turbulence() -> Arc<Panel> {
    let p = super::tests::real_panel();
    let turbulence: Vec<f64> = (0..p.n_days).map(|d| if d % 17 == 0 { 150.0 } else { 10.0 }).collect();
    Arc::new(Panel { turbulence: Some(turbulence), ..(*p).clone() })
}

/// Steps both envs on `device` with the same actions and checks them against each other at every step.
fn compare_with_vec_env(device: Device) {
    let panel = panel_with_turbulence();
    for (v, cfg) in configs().into_iter().enumerate() {
        let (e, a) = (cfg.n_envs, panel.n_assets);
        let mut cpu = VecEnv::new(cfg.clone(), panel.clone()).unwrap();
        let mut gpu = TchEnv::new(cfg, &panel, device).unwrap();
        let mut rng = SplitMix64::new(v as u64);
        let mut actions = vec![0f32; e * a];
        let mut step = Step::default();
        let mut obs = vec![0f32; e * cpu.obs_dim()];
        let mut stops = 0;
        for s in 0..200 {
            actions.iter_mut().for_each(|x| *x = rng.action());
            cpu.step(&actions, &mut step).unwrap();
            let t = gpu.step(&Tensor::from_slice(&actions).view([e as i64, a as i64])).unwrap();
            assert_eq!(t.done, step.done[0], "variant {v} step {s}");
            assert_eq!(bits(&to_vec(&t.equity)), bits(&step.equity), "variant {v} step {s}: equity");
            let rewards: Vec<f64> = step.reward.iter().map(|r| f64::from(*r)).collect();
            assert_eq!(bits(&to_vec(&t.reward)), bits(&rewards), "variant {v} step {s}: reward");
            assert_eq!(bits(&to_vec(gpu.cash())), bits(cpu.cash()), "variant {v} step {s}: cash");
            let held: Vec<f64> = cpu.positions().iter().map(|p| p.holding).collect();
            assert_eq!(bits(&to_vec(gpu.holdings())), bits(&held), "variant {v} step {s}: holdings");
            let pos = cpu.positions();
            let cd: Vec<f64> = pos.iter().map(|p| f64::from(p.cooldown)).collect();
            assert_eq!(to_vec(gpu.cooldowns()), cd, "variant {v} step {s}: cooldowns");
            let (entry, hwm) = gpu.entries_and_high_water();
            let want: Vec<f64> = pos.iter().map(|p| p.entry).collect();
            assert_eq!(bits(&to_vec(entry)), bits(&want), "variant {v} step {s}: entry prices");
            let want: Vec<f64> = pos.iter().map(|p| p.high_water).collect();
            assert_eq!(bits(&to_vec(hwm)), bits(&want), "variant {v} step {s}: high-water marks");
            let days: Vec<f64> = cpu.days().iter().map(|d| *d as f64).collect();
            assert_eq!(to_vec(gpu.days()), days, "variant {v} step {s}: days");
            cpu.observe(&mut obs);
            let o: Vec<f64> = obs.iter().map(|x| f64::from(*x)).collect();
            assert_eq!(bits(&to_vec(&gpu.observe())), bits(&o), "variant {v} step {s}: observation");
            stops += cpu.positions().iter().filter(|p| p.cooldown > 0).count();
        }
        if v < 2 {
            assert!(stops > 0, "variant {v}: no stop fired, the comparison misses a rule");
        }
    }
}

#[test]
fn tensor_env_on_cpu_agrees_with_the_rust_env_bit_for_bit() {
    compare_with_vec_env(Device::Cpu);
}

/// Needs a CUDA GPU (feature `gpu-tests`, `make test-gpu`): fails without one.
#[cfg(feature = "gpu-tests")]
mod gpu_tests {
    use super::*;

    /// Needs a CUDA GPU, which CI has not: run by `make test-gpu`, where a missing GPU is a failure.
    #[test]
    fn tensor_env_on_cuda_agrees_with_the_rust_env() {
        assert!(
            crate::native::load_torch_cuda(),
            "no CUDA device (tch::Cuda::is_available() is false): this test needs a GPU"
        );
        compare_with_vec_env(Device::Cuda(0));
    }
}

#[test]
fn tensor_env_refuses_finrl_accounting_and_bad_shapes() {
    let panel = super::tests::real_panel();
    let cfg = EnvConfig { accounting: Accounting::FinrlNumpy, ..Default::default() };
    assert!(matches!(TchEnv::new(cfg, &panel, Device::Cpu), Err(EnvError::Unsupported(_))));
    let mut env = TchEnv::new(EnvConfig { n_envs: 2, ..Default::default() }, &panel, Device::Cpu).unwrap();
    assert!(matches!(env.step(&Tensor::zeros([2, 2], (Kind::Float, Device::Cpu))), Err(EnvError::ActionShape { .. })));
}
