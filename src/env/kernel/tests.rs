//! The kernel's CPU build against `VecEnv`: the same seed, the same random actions on the shipped data,
//! the same bits at every step, with stops, cooldowns, turbulence and every execution option.
// The tests call the C kernel directly, as its Rust wrapper does.
#![allow(unsafe_code)]

use super::*;
use crate::env::VecEnv;
use crate::env::rng::SplitMix64;
use crate::exec::ExecParams;

pub(crate) fn bits(v: &[f64]) -> Vec<u64> {
    v.iter().map(|x| x.to_bits()).collect()
}

pub(crate) fn f32_bits(v: &[f32]) -> Vec<u32> {
    v.iter().map(|x| x.to_bits()).collect()
}

/// Every option of the execution rule and the reward, across four variants.
pub(crate) fn configs(n_envs: usize) -> Vec<EnvConfig> {
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

pub(crate) fn panel_with_turbulence() -> Arc<Panel> {
    let p = crate::env::tests::real_panel();
    let turbulence: Vec<f64> = (0..p.n_days).map(|d| if d % 17 == 0 { 150.0 } else { 10.0 }).collect();
    Arc::new(Panel { turbulence: Some(turbulence), ..(*p).clone() })
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
        let (mut s_want, mut s_got) = (Step::default(), Step::default());
        let (mut stops, mut dones, mut turbulent, mut returns) = (0, 0, 0, 0.0);
        for s in 0..200 {
            random_actions(&mut rng, &mut actions);
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
        if v != 2 {
            assert!(stops > 0, "variant {v}: no stop fired, the comparison misses a rule");
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
        let (mut s1, mut s2) = (Step::default(), Step::default());
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
        let mut step = Step::default();
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
    assert!(matches!(CpuKernelEnv::new(&finrl, panel.clone()), Err(EnvError::Unsupported(_))));
    let long = EnvConfig { episode_len: panel.n_days, ..Default::default() };
    assert!(matches!(CpuKernelEnv::new(&long, panel.clone()), Err(EnvError::EpisodeTooLong { .. })));
    let none = EnvConfig { n_envs: 0, ..Default::default() };
    assert!(matches!(CpuKernelEnv::new(&none, panel.clone()), Err(EnvError::NoEnvs)));
    let mut env = CpuKernelEnv::new(&EnvConfig { n_envs: 2, ..Default::default() }, panel).unwrap();
    let err = env.step(&[0.0; 5], &mut Step::default()).unwrap_err();
    assert_eq!(err, EnvError::ActionShape { got: 5, want: 6 });
}

unsafe extern "C" {
    fn tb_layout(out: *mut i32);
}

#[test]
fn params_and_buffers_mirror_the_c_structs() {
    let mut c = [0i32; 9];
    // SAFETY: tb_layout writes 9 values.
    unsafe { tb_layout(c.as_mut_ptr()) };
    let rust = [
        std::mem::size_of::<Params>(),
        std::mem::offset_of!(Params, seed),
        std::mem::offset_of!(Params, cooldown_bars),
        std::mem::offset_of!(Params, obs_stride),
        std::mem::size_of::<Buffers>(),
        std::mem::offset_of!(Buffers, holding),
        std::mem::offset_of!(Buffers, ret_count),
        std::mem::size_of::<super::Trial>(),
        std::mem::offset_of!(super::Trial, cooldown_bars),
    ];
    assert_eq!(c.map(|x| x as usize), rust);
}
