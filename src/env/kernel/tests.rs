//! The kernel's CPU build against `VecEnv`: the same seed, the same random actions on the shipped data,
//! the same bits at every step, with stops, cooldowns, turbulence, every execution option, both action
//! spaces and every reward.
// The tests call the C kernel directly, as its Rust wrapper does.
#![allow(unsafe_code)]

use super::*;
use crate::env::rng::SplitMix64;
use crate::env::{Benchmark, Reward, VecEnv};
use crate::exec::ActionSpace;
use crate::exec::ExecParams;
use crate::exec::weights::target_weights;

pub(crate) fn bits(v: &[f64]) -> Vec<u64> {
    v.iter().map(|x| x.to_bits()).collect()
}

pub(crate) fn f32_bits(v: &[f32]) -> Vec<u32> {
    v.iter().map(|x| x.to_bits()).collect()
}

/// Every option of the execution rule, both action spaces and every reward: four variants of share
/// counts with the equity reward, four of target weights (one per reward, each benchmark, whole and
/// fractional units; bands and caps that bind on random actions), and share counts with each new reward.
pub(crate) fn configs(n_envs: usize) -> Vec<EnvConfig> {
    let mut all = shares_configs(n_envs);
    all.extend(new_reward_configs(n_envs));
    all
}

fn shares_configs(n_envs: usize) -> Vec<EnvConfig> {
    let base = EnvConfig { n_envs, episode_len: 60, initial_cash: 30_000.0, seed: 5, ..Default::default() };
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
            exec: ExecParams {
                integer_units: false,
                max_trade: 250.0,
                trailing_stop: 0.05,
                cooldown_bars: 0,
                ..Default::default()
            },
            seed: 11,
            ..base.clone()
        },
        EnvConfig {
            exec: ExecParams { cash_cap_ignores_fees: true, fee_bps: 25.0, ..Default::default() },
            turbulence_threshold: Some(99.0),
            reward_scale: 1.0,
            ..base.clone()
        },
        EnvConfig {
            exec: ExecParams {
                fee_bps: 0.0,
                max_trade: 1000.0,
                trailing_stop: 0.02,
                cooldown_bars: 5,
                ..Default::default()
            },
            fixed_start: true,
            episode_len: 45,
            ..base
        },
    ]
}

fn new_reward_configs(n_envs: usize) -> Vec<EnvConfig> {
    let base = EnvConfig { n_envs, episode_len: 60, initial_cash: 30_000.0, seed: 21, ..Default::default() };
    let weights = |band: f64, max_weight: f64| ActionSpace::Weights { band, max_weight };
    let index = Benchmark::Symbol("SPY".into());
    let stop = |trailing_stop: f64, cooldown_bars: u32| ExecParams {
        trailing_stop,
        cooldown_bars,
        slippage_bps: 5.0,
        min_order: 1.0,
        ..Default::default()
    };
    vec![
        EnvConfig {
            action: weights(0.05, 0.4),
            reward: Reward::VsBenchmark { benchmark: Benchmark::EqualWeight, turnover_bps: 10.0 },
            exec: stop(0.03, 2),
            turbulence_threshold: Some(99.0),
            ..base.clone()
        },
        EnvConfig {
            action: weights(0.02, 0.3),
            reward: Reward::VsBenchmark { benchmark: index.clone(), turnover_bps: 50.0 },
            exec: ExecParams { integer_units: false, min_order: 0.5, ..stop(0.05, 0) },
            reward_scale: 1e-3,
            seed: 22,
            ..base.clone()
        },
        EnvConfig {
            action: weights(0.1, 0.6),
            reward: Reward::DifferentialSharpe { eta: 0.05, turnover_bps: 5.0 },
            exec: ExecParams { cash_cap_ignores_fees: true, fee_bps: 25.0, ..stop(0.04, 1) },
            turbulence_threshold: Some(99.0),
            seed: 23,
            ..base.clone()
        },
        EnvConfig {
            action: weights(0.03, 0.5),
            exec: stop(0.02, 5),
            turnover_penalty: 0.001,
            fixed_start: true,
            episode_len: 45,
            seed: 24,
            ..base.clone()
        },
        EnvConfig {
            reward: Reward::DifferentialSharpe { eta: 0.01, turnover_bps: 20.0 },
            exec: stop(0.03, 2),
            seed: 25,
            ..base.clone()
        },
        EnvConfig {
            reward: Reward::VsBenchmark { benchmark: index, turnover_bps: 10.0 },
            exec: ExecParams { integer_units: false, max_trade: 250.0, ..stop(0.05, 0) },
            turbulence_threshold: Some(99.0),
            seed: 26,
            ..base
        },
    ]
}

/// The shipped data with a turbulent day in 17 and an index series (for `benchmark = SYMBOL`): the mean
/// of the three prices, wobbling.
pub(crate) fn panel_with_turbulence() -> Arc<Panel> {
    let p = crate::env::tests::real_panel();
    let turbulence: Vec<f64> = (0..p.n_days).map(|d| if d % 17 == 0 { 150.0 } else { 10.0 }).collect();
    let a = p.n_assets;
    let index: Vec<f32> = (0..p.n_days)
        .map(|d| p.prices[d * a..(d + 1) * a].iter().sum::<f32>() / a as f32 * (1.0 + 0.01 * (d as f32).sin()))
        .collect();
    let panel = Panel { turbulence: Some(turbulence), ..(*p).clone() }.with_benchmark(index).unwrap();
    Arc::new(panel)
}

/// For the weights space: how often (env, asset) sat inside the no-trade band with a weight off its
/// target, sat outside it, and had its target capped at `max_weight`, before a step of `actions` from
/// `env`'s state (weights at the observation day's prices, as the env sizes them).
#[derive(Debug, Default)]
struct Binding {
    inside: usize,
    outside: usize,
    capped: usize,
}

impl Binding {
    fn count(&mut self, env: &VecEnv, panel: &Panel, cfg: &EnvConfig, actions: &[f32]) {
        let ActionSpace::Weights { band, max_weight } = cfg.action else { return };
        let a = panel.n_assets;
        let mut target = vec![0.0; a];
        for i in 0..cfg.n_envs {
            let day = env.days()[i];
            target_weights(&actions[i * a..(i + 1) * a], max_weight, &mut target);
            let pos = &env.positions()[i * a..(i + 1) * a];
            let price = |k: usize| f64::from(panel.price(day, k));
            let equity = env.cash()[i] + (0..a).map(|k| pos[k].holding * price(k)).sum::<f64>();
            for k in 0..a {
                let w = pos[k].holding * price(k) / equity;
                let off = (w - target[k]).abs();
                self.inside += usize::from(off > 1e-3 && off < band - 1e-3);
                self.outside += usize::from(off > band + 1e-3);
                self.capped += usize::from(target[k] == max_weight);
            }
        }
    }
}

/// Random actions in [-1, 1), one in 50 NaN (counts as 0), one in 20 beyond the range (clamped).
pub(crate) fn random_actions(rng: &mut SplitMix64, out: &mut [f32]) {
    for x in out.iter_mut() {
        *x = match rng.below(100) {
            0 | 1 => f32::NAN,
            2..=6 => rng.action() * 3.0,
            _ => rng.action(),
        };
    }
}

#[test]
fn kernel_cpu_build_agrees_with_vec_env_bit_for_bit() {
    let panel = panel_with_turbulence();
    for (v, cfg) in configs(16).into_iter().enumerate() {
        let (e, a) = (cfg.n_envs, panel.n_assets);
        let mut want = VecEnv::new(cfg.clone(), panel.clone()).unwrap();
        let mut got = CpuKernelEnv::new(&cfg, panel.clone()).unwrap();
        let mut obs = vec![0f32; e * want.obs_dim()];
        want.observe(&mut obs);
        assert_eq!(f32_bits(got.obs()), f32_bits(&obs), "variant {v}: first observation");
        let mut rng = SplitMix64::new(v as u64);
        let mut actions = vec![0f32; e * a];
        let (mut s_want, mut s_got) = (StepOutcome::default(), StepOutcome::default());
        let (mut stops, mut dones, mut turbulent, mut returns) = (0, 0, 0, 0.0);
        let mut binding = Binding::default();
        for s in 0..200 {
            random_actions(&mut rng, &mut actions);
            binding.count(&want, &panel, &cfg, &actions);
            want.step(&actions, &mut s_want).unwrap();
            got.step(&actions, &mut s_got).unwrap();
            let at = format!("variant {v} step {s}");
            assert_eq!(f32_bits(&s_got.reward), f32_bits(&s_want.reward), "{at}: reward");
            assert_eq!(bits(&s_got.equity), bits(&s_want.equity), "{at}: equity");
            assert_eq!(s_got.done, s_want.done, "{at}: done");
            assert_eq!(bits(got.cash()), bits(want.cash()), "{at}: cash");
            let held: Vec<f64> = want.positions().iter().map(|p| p.holding).collect();
            assert_eq!(bits(got.holdings()), bits(&held), "{at}: holdings");
            let cd: Vec<u32> = want.positions().iter().map(|p| p.cooldown).collect();
            assert_eq!(got.cooldowns(), cd.as_slice(), "{at}: cooldowns");
            let days: Vec<i32> = want.days().iter().map(|d| *d as i32).collect();
            assert_eq!(got.days(), days.as_slice(), "{at}: days");
            want.observe(&mut obs);
            assert_eq!(f32_bits(got.obs()), f32_bits(&obs), "{at}: observation");
            stops += want.positions().iter().filter(|p| p.cooldown > 0).count();
            let ended: Vec<f64> =
                (0..e).filter(|&i| s_want.done[i]).map(|i| s_want.equity[i] / cfg.initial_cash - 1.0).collect();
            dones += ended.len();
            returns += ended.iter().sum::<f64>();
            let day = want.days()[0];
            turbulent += usize::from(panel.turbulence.as_ref().is_some_and(|t| t[day] > 99.0));
        }
        assert!(dones >= 3 * e, "variant {v}: only {dones} episode ends, resets are not exercised");
        if cfg.exec.trailing_stop > 0.0 {
            assert!(stops > 0, "variant {v}: no stop fired, the comparison misses a rule");
        }
        if matches!(cfg.action, ActionSpace::Weights { .. }) {
            let Binding { inside, outside, capped } = binding;
            assert!(inside > 0 && outside > 0 && capped > 0, "variant {v}: band and cap not both binding: {binding:?}");
        }
        assert!(turbulent > 0, "variant {v}: no turbulent day was traded");
        let (sum, count) = got.take_returns();
        assert_eq!(count, dones as f64, "variant {v}: episodes counted on the kernel side");
        assert!((sum - returns).abs() <= 1e-12 * dones as f64, "variant {v}: returns {sum} vs {returns}");
        assert_eq!(got.take_returns(), (0.0, 0.0), "variant {v}: take_returns clears");
    }
}

/// The GPU's layout (positions asset-major) steps the same envs as the CPU's (env-major), so the CUDA
/// build's only difference from the checked CPU build is the compiler.
#[test]
fn kernel_asset_major_layout_steps_the_same_envs() {
    let panel = panel_with_turbulence();
    for (v, cfg) in configs(20).into_iter().enumerate() {
        let (e, a) = (cfg.n_envs, panel.n_assets);
        let mut env_major = CpuKernelEnv::new(&cfg, panel.clone()).unwrap();
        let mut asset_major = CpuKernelEnv::with_layout(&cfg, panel.clone(), true).unwrap();
        let mut rng = SplitMix64::new(40 + v as u64);
        let mut actions = vec![0f32; e * a];
        let (mut s1, mut s2) = (StepOutcome::default(), StepOutcome::default());
        for s in 0..150 {
            random_actions(&mut rng, &mut actions);
            env_major.step(&actions, &mut s1).unwrap();
            asset_major.step(&actions, &mut s2).unwrap();
            let at = format!("variant {v} step {s}");
            assert_eq!(bits(&s2.equity), bits(&s1.equity), "{at}: equity");
            assert_eq!(f32_bits(&s2.reward), f32_bits(&s1.reward), "{at}: reward");
            assert_eq!(f32_bits(asset_major.obs()), f32_bits(env_major.obs()), "{at}: observation");
            let transposed: Vec<f64> = (0..e * a).map(|j| asset_major.holdings()[(j % a) * e + j / a]).collect();
            assert_eq!(bits(&transposed), bits(env_major.holdings()), "{at}: holdings");
        }
        assert_ne!(bits(asset_major.holdings()), bits(env_major.holdings()), "variant {v}: the layouts are the same");
    }
}

#[test]
fn kernel_cpu_build_is_the_same_on_any_thread_count() {
    let panel = panel_with_turbulence();
    let cfg = configs(300).swap_remove(0);
    let a = panel.n_assets;
    let run = |threads: usize| {
        let mut env = CpuKernelEnv::new(&cfg, panel.clone()).unwrap().with_threads(threads).unwrap();
        let mut rng = SplitMix64::new(9);
        let mut actions = vec![0f32; cfg.n_envs * a];
        let mut step = StepOutcome::default();
        let mut trace = Vec::new();
        for _ in 0..80 {
            random_actions(&mut rng, &mut actions);
            env.step(&actions, &mut step).unwrap();
            trace.extend(bits(&step.equity));
        }
        (trace, f32_bits(env.obs()))
    };
    let one = run(1);
    assert_eq!(run(2), one, "2 threads");
    assert_eq!(run(3), one, "3 threads");
}

#[test]
fn kernel_env_refuses_what_it_cannot_run() {
    let panel = crate::env::tests::real_panel();
    let finrl = EnvConfig { accounting: crate::env::Accounting::FinrlNumpy, ..Default::default() };
    let err = CpuKernelEnv::new(&finrl, panel.clone()).err().map(|e| e.to_string()).unwrap_or_default();
    assert!(err.contains("finrl-numpy") && err.contains("--device cpu"), "{err}");
    let long = EnvConfig { episode_len: panel.n_days, ..Default::default() };
    assert!(matches!(CpuKernelEnv::new(&long, panel.clone()), Err(EnvError::EpisodeTooLong { .. })));
    let none = EnvConfig { n_envs: 0, ..Default::default() };
    assert!(matches!(CpuKernelEnv::new(&none, panel.clone()), Err(EnvError::NoEnvs)));
    // FinRL's accounting has share counts only; an index benchmark needs the index's prices.
    let weights = ActionSpace::Weights { band: 0.05, max_weight: 0.5 };
    let finrl_weights = EnvConfig { action: weights, ..finrl.clone() };
    assert!(matches!(CpuKernelEnv::new(&finrl_weights, panel.clone()), Err(EnvError::Unsupported(_))));
    let reward = Reward::VsBenchmark { benchmark: Benchmark::Symbol("SPY".into()), turnover_bps: 10.0 };
    let no_index = EnvConfig { action: weights, reward, ..Default::default() };
    let err = CpuKernelEnv::new(&no_index, panel.clone()).err().map(|e| e.to_string()).unwrap_or_default();
    assert!(err.contains("SPY") && err.contains("equal-weight"), "{err}");
    let mut env = CpuKernelEnv::new(&EnvConfig { n_envs: 2, ..Default::default() }, panel).unwrap();
    let err = env.step(&[0.0; 5], &mut StepOutcome::default()).unwrap_err();
    assert_eq!(err, EnvError::ActionShape { got: 5, want: 6 });
}

unsafe extern "C" {
    fn tb_layout(out: *mut i32);
}

#[test]
fn params_and_buffers_mirror_the_c_structs() {
    let mut c = [0i32; 14];
    // SAFETY: tb_layout writes 14 values.
    unsafe { tb_layout(c.as_mut_ptr()) };
    let rust = [
        std::mem::size_of::<Params>(),
        std::mem::offset_of!(Params, seed),
        std::mem::offset_of!(Params, cooldown_bars),
        std::mem::offset_of!(Params, obs_stride),
        std::mem::size_of::<Buffers>(),
        std::mem::offset_of!(Buffers, holding),
        std::mem::offset_of!(Buffers, ret_count),
        std::mem::size_of::<super::TrialEnv>(),
        std::mem::offset_of!(super::TrialEnv, cooldown_bars),
        std::mem::offset_of!(Params, sharpe_eta),
        std::mem::offset_of!(Params, bench_symbol),
        std::mem::offset_of!(Buffers, benchmark),
        std::mem::offset_of!(Buffers, sharpe_b),
        std::mem::offset_of!(Buffers, order),
    ];
    assert_eq!(c.map(|x| x as usize), rust);
}
