use super::rng::SplitMix64;
use super::*;
use crate::exec::{ExecParams, Position};
use crate::features::FeatureSpec;
use std::sync::Arc;

mod parity;

pub(crate) fn real_panel() -> Arc<Panel> {
    let bars: Vec<_> = ["AAPL", "IBM", "MSFT"].iter().map(|s| crate::features::tests::real_bars(s)).collect();
    Arc::new(Panel::from_bars(&FeatureSpec::default(), &bars).unwrap())
}

fn tiny_panel(prices: &[[f32; 2]], turbulence: Option<Vec<f64>>) -> Arc<Panel> {
    let flat: Vec<f32> = prices.iter().flatten().copied().collect();
    Arc::new(Panel::new(2, flat, 0, vec![], turbulence).unwrap())
}

#[test]
fn random_actions_on_real_data_keep_cash_and_holdings_non_negative_and_finite() {
    let panel = real_panel();
    assert_eq!(panel.n_assets, 3);
    assert!(panel.n_days > 3000);
    let variants = [
        ExecParams { trailing_stop: 0.05, cooldown_bars: 3, slippage_bps: 5.0, min_order: 2.0, ..Default::default() },
        ExecParams {
            integer_units: false,
            max_trade: 300.0,
            trailing_stop: 0.1,
            cooldown_bars: 1,
            ..Default::default()
        },
        ExecParams { fee_bps: 0.0, max_trade: 1000.0, ..Default::default() },
    ];
    for (v, exec) in variants.into_iter().enumerate() {
        let cfg = EnvConfig {
            n_envs: 8,
            episode_len: 500,
            initial_cash: 50_000.0,
            exec,
            seed: v as u64,
            ..Default::default()
        };
        let mut env = VecEnv::new(cfg, panel.clone()).unwrap();
        let mut rng = SplitMix64::new(99 + v as u64);
        let mut actions = vec![0f32; 8 * 3];
        let mut obs = vec![0f32; 8 * env.obs_dim()];
        let mut step = StepOutcome::default();
        let (mut stops, mut dones, mut traded) = (0, 0, 0);
        for _ in 0..2_000 {
            actions.iter_mut().for_each(|x| *x = rng.action());
            let before: Vec<f64> = env.positions().iter().map(|p| p.holding).collect();
            env.step(&actions, &mut step).unwrap();
            env.observe(&mut obs);
            assert!(env.cash().iter().all(|c| *c >= 0.0 && c.is_finite()), "variant {v}: {:?}", env.cash());
            assert!(env.positions().iter().all(|p| p.holding >= 0.0 && p.entry.is_finite()));
            assert!(step.reward.iter().all(|r| r.is_finite()) && step.equity.iter().all(|e| e.is_finite()));
            assert!(obs.iter().all(|x| x.is_finite()));
            stops += env.positions().iter().filter(|p| p.cooldown > 0).count();
            dones += step.done.iter().filter(|d| **d).count();
            traded += env.positions().iter().zip(&before).filter(|(p, b)| p.holding != **b).count();
        }
        assert_eq!(dones, 8 * 2_000 / 500, "variant {v}");
        assert!(traded > 1_000, "variant {v}: the random actions barely traded ({traded})");
        if v < 2 {
            assert!(stops > 0, "variant {v}: no trailing stop ever fired");
        }
    }
}

#[test]
fn episodes_have_fixed_length_random_seeded_starts_and_reset_themselves() {
    let panel = real_panel();
    let cfg = EnvConfig { n_envs: 4, episode_len: 5, seed: 7, ..Default::default() };
    let mut env = VecEnv::new(cfg.clone(), panel.clone()).unwrap();
    let starts: Vec<usize> = env.days().to_vec();
    assert!(starts.iter().all(|d| *d + 5 < panel.n_days));
    assert!(starts.windows(2).any(|w| w[0] != w[1]), "starts are not random: {starts:?}");
    assert_eq!(VecEnv::new(cfg.clone(), panel.clone()).unwrap().days(), &starts[..], "same seed, same starts");
    let other = VecEnv::new(EnvConfig { seed: 8, ..cfg.clone() }, panel.clone()).unwrap();
    assert_ne!(other.days(), &starts[..]);
    let mut step = StepOutcome::default();
    let buy = vec![1f32; 4 * 3];
    for k in 1..=10 {
        env.step(&buy, &mut step).unwrap();
        assert_eq!(step.done, vec![k % 5 == 0; 4], "step {k}");
        if k % 5 == 0 {
            assert!(env.cash().iter().all(|c| *c == cfg.initial_cash));
            assert!(env.positions().iter().all(|p| *p == Position::default()));
        } else {
            let d: Vec<usize> = env.days().iter().map(|d| d - k % 5).collect();
            assert!(d.iter().all(|x| *x < panel.n_days));
        }
    }
    assert_eq!(env.step(&[0.0; 3], &mut step), Err(EnvError::ActionShape { got: 3, want: 12 }));
}

#[test]
fn sells_happen_before_buys_so_a_sale_funds_a_buy_in_the_same_step() {
    // Asset 0 is held with no cash; selling it must pay for asset 1 on the same step.
    let panel = tiny_panel(&[[10.0, 10.0]; 4], None);
    let exec = ExecParams { fee_bps: 0.0, max_trade: 10.0, ..Default::default() };
    let cfg = EnvConfig { episode_len: 3, initial_cash: 100.0, exec, fixed_start: true, ..Default::default() };
    let mut env = VecEnv::new(cfg, panel).unwrap();
    let mut step = StepOutcome::default();
    env.step(&[1.0, 0.0], &mut step).unwrap();
    assert_eq!((env.cash()[0], env.positions()[0].holding), (0.0, 10.0));
    // Asset 1's buy comes first in the action vector, asset 0's sell runs first all the same.
    env.step(&[-1.0, 1.0], &mut step).unwrap();
    assert_eq!((env.positions()[0].holding, env.positions()[1].holding), (0.0, 10.0));
    assert_eq!(env.cash()[0], 0.0);
}

#[test]
fn reward_is_scaled_equity_change_minus_turnover_penalty() {
    let panel = tiny_panel(&[[10.0, 20.0], [11.0, 20.0], [12.0, 18.0]], None);
    let exec = ExecParams { fee_bps: 10.0, max_trade: 10.0, ..Default::default() };
    let cfg = EnvConfig {
        episode_len: 2,
        initial_cash: 1_000.0,
        exec,
        reward_scale: 0.5,
        turnover_penalty: 0.01,
        fixed_start: true,
        ..Default::default()
    };
    let mut env = VecEnv::new(cfg, panel).unwrap();
    let mut step = StepOutcome::default();
    // Day 1: buy 10 of asset 0 at 11: fee 0.11, equity 1000 - 0.11; turnover 110.
    env.step(&[1.0, 0.0], &mut step).unwrap();
    let expect = 0.5 * (-0.11 - 0.01 * 110.0);
    assert!((f64::from(step.reward[0]) - expect).abs() < 1e-6, "{} vs {expect}", step.reward[0]);
    // Day 2: hold; price 12: equity + 10.
    env.step(&[0.0, 0.0], &mut step).unwrap();
    assert!((f64::from(step.reward[0]) - 5.0).abs() < 1e-5, "{}", step.reward[0]);
}

#[test]
fn turbulence_above_the_threshold_liquidates_and_blocks_buys() {
    let panel = tiny_panel(&[[10.0, 10.0], [10.0, 10.0], [12.0, 10.0], [10.0, 10.0]], Some(vec![0.0, 0.0, 500.0, 0.0]));
    let exec = ExecParams { fee_bps: 0.0, max_trade: 10.0, ..Default::default() };
    let cfg =
        EnvConfig { episode_len: 3, exec, turbulence_threshold: Some(99.0), fixed_start: true, ..Default::default() };
    let mut env = VecEnv::new(cfg, panel).unwrap();
    let mut step = StepOutcome::default();
    env.step(&[1.0, 1.0], &mut step).unwrap();
    assert_eq!(env.positions()[0].holding, 10.0);
    env.step(&[1.0, 1.0], &mut step).unwrap();
    assert!(env.positions().iter().all(|p| p.holding == 0.0), "{:?}", env.positions());
    assert_eq!(env.cash()[0], 100_000.0 + 10.0 * 2.0);
    // A calm day trades again.
    env.step(&[1.0, 1.0], &mut step).unwrap();
    assert_eq!(step.equity[0], 100_020.0);
    assert!(step.done[0]);
}

#[test]
fn bad_panels_and_configs_are_refused_with_the_reason() {
    assert_eq!(Panel::new(0, vec![], 0, vec![], None).unwrap_err(), PanelError::Empty);
    // NaN never equals itself: match on the variant.
    let e = Panel::new(2, vec![1.0, 2.0, f32::NAN, 3.0], 0, vec![], None).unwrap_err();
    assert!(matches!(e, PanelError::BadPrice { day: 1, asset: 0, .. }), "{e}");
    let e = Panel::new(2, vec![1.0, 2.0, 0.0, 3.0], 0, vec![], None).unwrap_err();
    assert_eq!(e, PanelError::BadPrice { day: 1, asset: 0, value: 0.0 });
    let e = Panel::new(2, vec![1.0; 4], 3, vec![0.0; 11], None).unwrap_err();
    assert_eq!(e, PanelError::Shape { what: "features", got: 11, want: 12 });
    let e = Panel::new(2, vec![1.0; 4], 0, vec![], Some(vec![0.0; 3])).unwrap_err();
    assert_eq!(e, PanelError::Shape { what: "turbulence", got: 3, want: 2 });
    let bars: Vec<_> = ["AAPL", "FB"].iter().map(|s| crate::features::tests::real_bars(s)).collect();
    let e = Panel::from_bars(&FeatureSpec::default(), &bars).unwrap_err();
    assert!(matches!(e, PanelError::Misaligned { asset: 1, got: 196, want: 3270, .. }), "{e}");

    let panel = tiny_panel(&[[1.0, 1.0]; 3], None);
    let too_long = EnvConfig { episode_len: 3, ..Default::default() };
    assert_eq!(VecEnv::new(too_long, panel.clone()).err(), Some(EnvError::EpisodeTooLong { len: 3, days: 3 }));
    let none = EnvConfig { n_envs: 0, episode_len: 2, ..Default::default() };
    assert_eq!(VecEnv::new(none, panel).err(), Some(EnvError::NoEnvs));
}

#[test]
fn episode_starts_are_the_seeded_stream_drawn_env_by_env() {
    let panel = real_panel();
    let (e, len) = (5, 60);
    let cfg = EnvConfig { n_envs: e, episode_len: len, seed: 42, ..Default::default() };
    let mut env = VecEnv::new(cfg, panel.clone()).unwrap();
    let mut stream = SplitMix64::new(42);
    let span = panel.n_days - len;
    let first: Vec<usize> = (0..e).map(|_| stream.below(span)).collect();
    assert_eq!(env.days(), first.as_slice());
    let mut step = StepOutcome::default();
    for _ in 0..len {
        env.step(&vec![0.0; e * 3], &mut step).unwrap();
    }
    assert!(step.done.iter().all(|d| *d));
    let second: Vec<usize> = (0..e).map(|_| stream.below(span)).collect();
    assert_eq!(env.days(), second.as_slice());
}

#[test]
fn vec_env_is_bit_identical_on_any_thread_count() {
    let panel = crate::env::kernel::tests::panel_with_turbulence();
    let mut cfgs = crate::env::kernel::tests::configs(300);
    // FinRL's accounting too: its float32 sums use a scratch buffer per chunk of envs.
    cfgs.push(EnvConfig {
        accounting: Accounting::FinrlNumpy,
        exec: ExecParams { cash_cap_ignores_fees: true, min_order: 11.0, ..Default::default() },
        turbulence_threshold: Some(99.0),
        ..cfgs[0].clone()
    });
    for (v, cfg) in cfgs.into_iter().enumerate() {
        let run = |threads: usize| {
            let mut env = VecEnv::new(cfg.clone(), panel.clone()).unwrap().with_threads(threads).unwrap();
            let mut rng = SplitMix64::new(3);
            let mut actions = vec![0f32; cfg.n_envs * 3];
            let (mut step, mut obs) = (StepOutcome::default(), vec![0f32; cfg.n_envs * env.obs_dim()]);
            let mut trace = Vec::new();
            for _ in 0..130 {
                crate::env::kernel::tests::random_actions(&mut rng, &mut actions);
                env.step(&actions, &mut step).unwrap();
                env.observe(&mut obs);
                trace.extend(step.equity.iter().map(|x| x.to_bits()));
                trace.extend(step.reward.iter().map(|x| u64::from(x.to_bits())));
                trace.extend(obs.iter().map(|x| u64::from(x.to_bits())));
                trace.extend(step.done.iter().map(|d| u64::from(*d)));
            }
            trace
        };
        let one = run(1);
        assert_eq!(run(2), one, "variant {v}: 2 threads");
        assert_eq!(run(0), one, "variant {v}: all cores");
    }
}

/// Weights with a 5% band, no fees: the first step buys each asset up to the band's lower edge (target
/// 1/3 each), the second (same prices) trades nothing, the fourth (sized at day 3's prices, where asset 0
/// doubled) sells asset 0 down to its upper edge and buys asset 1 up to its lower edge. Orders are sized
/// at the observation day's prices and filled at the next day's, as the engine's are.
#[test]
fn weights_actions_trade_to_the_band_edge_and_not_inside_it() {
    let days = [[10.0, 20.0], [10.0, 20.0], [10.0, 20.0], [20.0, 20.0], [20.0, 20.0], [20.0, 20.0]];
    let panel = tiny_panel(&days, None);
    let exec = ExecParams { fee_bps: 0.0, integer_units: false, min_order: 0.001, ..Default::default() };
    let action = crate::exec::ActionSpace::Weights { band: 0.05, max_weight: 1.0 };
    let cfg =
        EnvConfig { episode_len: 5, initial_cash: 10_000.0, exec, fixed_start: true, action, ..Default::default() };
    let mut env = VecEnv::new(cfg.clone(), panel.clone()).unwrap();
    let mut step = StepOutcome::default();
    let weights = |env: &VecEnv, day: usize| -> Vec<f64> {
        let eq = env.equity()[0];
        (0..2).map(|k| env.positions()[k].holding * f64::from(panel.price(day, k)) / eq).collect()
    };
    let third = 1.0 / 3.0;
    env.step(&[0.0, 0.0], &mut step).unwrap();
    let w = weights(&env, 1);
    assert!(w.iter().all(|x| (x - (third - 0.05)).abs() < 1e-9), "bought to the lower edge: {w:?}");
    assert!((env.positions()[0].holding - (third - 0.05) * 1_000.0).abs() < 1e-6);
    let held: Vec<f64> = env.positions().iter().map(|p| p.holding).collect();
    env.step(&[0.0, 0.0], &mut step).unwrap();
    assert_eq!(env.positions().iter().map(|p| p.holding).collect::<Vec<_>>(), held, "inside the band: no trade");
    env.step(&[0.0, 0.0], &mut step).unwrap();
    assert_eq!(env.positions().iter().map(|p| p.holding).collect::<Vec<_>>(), held, "sized at day 2: no trade");
    env.step(&[0.0, 0.0], &mut step).unwrap();
    let w = weights(&env, 4);
    assert!((w[0] - (third + 0.05)).abs() < 1e-9 && (w[1] - (third - 0.05)).abs() < 1e-9, "to the edges: {w:?}");
    // The env kernel trades the same orders: the same holdings after the same four steps.
    let mut kernel = crate::env::kernel::CpuKernelEnv::new(&cfg, panel.clone()).unwrap();
    for _ in 0..4 {
        kernel.step(&[0.0, 0.0], &mut step).unwrap();
    }
    let held: Vec<f64> = env.positions().iter().map(|p| p.holding).collect();
    assert_eq!(kernel.holdings(), held.as_slice(), "the kernel's holdings");
    // FinRL's accounting has share counts only.
    let finrl = EnvConfig { accounting: Accounting::FinrlNumpy, ..cfg };
    assert!(matches!(VecEnv::new(finrl, panel), Err(EnvError::Unsupported(_))));
}

/// Hand-computed: day 0 (10, 20), day 1 (11, 20), day 2 (12, 22). Step 1 buys 50 of asset 0 at 11 (550
/// traded, no fee): equity 10 000 -> 10 000, equal-weight buy-and-hold 1 -> (1.1 + 1) / 2 = 1.05, so the
/// reward is ln 1 - ln 1.05 - 20 bps x 550 / 10 000. Step 2 trades nothing: equity 9 450 + 50 x 12 =
/// 10 050, buy-and-hold (1.2 + 1.1) / 2 = 1.15: ln(10 050 / 10 000) - ln(1.15 / 1.05). With an index
/// (100, 100, 110): ln(10 050 / 10 000) - ln(1.1). Size: reward_scale x initial_cash = 1.
#[test]
fn the_benchmark_relative_reward_equals_its_definition() {
    let panel = tiny_panel(&[[10.0, 20.0], [11.0, 20.0], [12.0, 22.0]], None);
    let exec = ExecParams { fee_bps: 0.0, ..Default::default() };
    let reward = Reward::VsBenchmark { benchmark: crate::env::Benchmark::EqualWeight, turnover_bps: 20.0 };
    let cfg =
        EnvConfig { episode_len: 2, initial_cash: 10_000.0, exec, fixed_start: true, reward, ..Default::default() };
    let mut env = VecEnv::new(cfg.clone(), panel.clone()).unwrap();
    let mut step = StepOutcome::default();
    env.step(&[0.5, 0.0], &mut step).unwrap();
    let want1 = 0.0 - 1.05f64.ln() - 20e-4 * 550.0 / 10_000.0;
    assert!((f64::from(step.reward[0]) - want1).abs() < 1e-6, "{} vs {want1}", step.reward[0]);
    env.step(&[0.0, 0.0], &mut step).unwrap();
    assert_eq!(step.equity[0], 10_050.0);
    let want2 = (10_050f64 / 10_000.0).ln() - (1.15f64 / 1.05).ln();
    assert!((f64::from(step.reward[0]) - want2).abs() < 1e-6, "{} vs {want2}", step.reward[0]);

    let index = crate::env::Benchmark::Symbol("SPY".into());
    let cfg = EnvConfig { reward: Reward::VsBenchmark { benchmark: index, turnover_bps: 0.0 }, ..cfg };
    let e = VecEnv::new(cfg.clone(), panel.clone()).err().map(|e| e.to_string());
    assert!(e.is_some_and(|e| e.contains("no prices of SPY")), "an index without its prices is refused");
    let with_index = Arc::new((*panel).clone().with_benchmark(vec![100.0, 100.0, 110.0]).unwrap());
    let mut env = VecEnv::new(cfg.clone(), with_index.clone()).unwrap();
    env.step(&[0.5, 0.0], &mut step).unwrap();
    env.step(&[0.0, 0.0], &mut step).unwrap();
    let want = (10_050f64 / 10_000.0).ln() - 1.1f64.ln();
    assert!((f64::from(step.reward[0]) - want).abs() < 1e-6, "{} vs {want}", step.reward[0]);
    // The env kernel's reward is the same, bit for bit.
    let mut kernel = crate::env::kernel::CpuKernelEnv::new(&cfg, with_index).unwrap();
    let mut k_step = StepOutcome::default();
    kernel.step(&[0.5, 0.0], &mut k_step).unwrap();
    kernel.step(&[0.0, 0.0], &mut k_step).unwrap();
    assert_eq!(k_step.reward[0].to_bits(), step.reward[0].to_bits(), "the kernel's reward");

    // Differential Sharpe on the same steps (eta 0.1, 20 bps): 0 first (no variance yet), then the formula
    // (clipped) on the second step's net log return, with the moments the first step moved.
    let reward = Reward::DifferentialSharpe { eta: 0.1, turnover_bps: 20.0 };
    let mut env = VecEnv::new(EnvConfig { reward, ..env_cfg_of(&panel) }, panel).unwrap();
    env.step(&[0.5, 0.0], &mut step).unwrap();
    assert_eq!(step.reward[0], 0.0);
    env.step(&[0.0, 0.0], &mut step).unwrap();
    let (mut a, mut b) = (0.0, 0.0);
    crate::env::reward::differential_sharpe(-20e-4 * 550.0 / 10_000.0, 0.1, &mut a, &mut b);
    let want = crate::env::reward::differential_sharpe((10_050f64 / 10_000.0).ln(), 0.1, &mut a, &mut b);
    assert!(want != 0.0 && (f64::from(step.reward[0]) - want).abs() < 1e-6, "{} vs {want}", step.reward[0]);
}

fn env_cfg_of(panel: &Panel) -> EnvConfig {
    let exec = ExecParams { fee_bps: 0.0, ..Default::default() };
    EnvConfig { episode_len: panel.n_days - 1, initial_cash: 10_000.0, exec, fixed_start: true, ..Default::default() }
}
