//! FinRL parity: the fixture written by `benches/peers/finrl_env.py` (FinRL 0.3.7's numpy env run on a
//! seeded 2,520-day x 30-asset panel under a fixed random action stream) replayed through `VecEnv`.

use crate::env::*;
use crate::exec::ExecParams;
use flate2::read::GzDecoder;
use std::io::Read;
use std::sync::Arc;

pub(crate) struct Fixture {
    pub days: usize,
    pub assets: usize,
    pub prices: Vec<f32>,
    pub tech: Vec<f32>,
    pub tech_cols: usize,
    pub turbulence: Vec<f64>,
    pub actions: Vec<f32>,
    pub holdings: Vec<f32>,
    pub total: Vec<f64>,
}

struct Reader(Vec<u8>, usize);

impl Reader {
    fn take(&mut self, n: usize) -> &[u8] {
        self.1 += n;
        &self.0[self.1 - n..self.1]
    }
    fn u32(&mut self) -> usize {
        u32::from_le_bytes(self.take(4).try_into().unwrap()) as usize
    }
    fn f32s(&mut self, n: usize) -> Vec<f32> {
        self.take(4 * n).chunks_exact(4).map(|c| f32::from_le_bytes(c.try_into().unwrap())).collect()
    }
    fn f64s(&mut self, n: usize) -> Vec<f64> {
        self.take(8 * n).chunks_exact(8).map(|c| f64::from_le_bytes(c.try_into().unwrap())).collect()
    }
}

pub(crate) fn load_fixture() -> Fixture {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/finrl_np_parity.bin.gz");
    let mut bytes = Vec::new();
    GzDecoder::new(std::fs::File::open(path).unwrap()).read_to_end(&mut bytes).unwrap();
    let mut r = Reader(bytes, 0);
    assert_eq!(r.take(4), b"FRL1");
    let (days, assets, tech_cols) = (r.u32(), r.u32(), r.u32());
    let prices = r.f32s(days * assets);
    let tech = r.f32s(days * tech_cols);
    let turbulence = r.f64s(days);
    let actions = r.f32s((days - 1) * assets);
    let holdings = r.f32s((days - 1) * assets);
    let total = r.f64s(days);
    let _amount_f32 = r.take(days - 1);
    assert_eq!(r.1, r.0.len(), "trailing bytes in the fixture");
    Fixture { days, assets, prices, tech, tech_cols, turbulence, actions, holdings, total }
}

/// FinRL's defaults as an env configuration: hmax 100, trades of more than 10 shares, 0.1% fees, reward
/// scaling 2^-11, turbulence threshold 99, one episode over the whole panel from day 0.
pub(crate) fn finrl_config(days: usize, accounting: Accounting) -> EnvConfig {
    EnvConfig {
        n_envs: 1,
        episode_len: days - 1,
        initial_cash: 1e6,
        exec: ExecParams {
            max_trade: 100.0,
            min_order: 11.0,
            fee_bps: 10.0,
            slippage_bps: 0.0,
            trailing_stop: 0.0,
            cooldown_bars: 0,
            integer_units: true,
            cash_cap_ignores_fees: true,
        },
        reward_scale: 2f64.powi(-11),
        turnover_penalty: 0.0,
        action: Default::default(),
        reward: Default::default(),
        turbulence_threshold: Some(99.0),
        fixed_start: true,
        seed: 0,
        accounting,
    }
}

pub(crate) fn fixture_panel(f: &Fixture) -> Arc<Panel> {
    assert_eq!(f.tech_cols, f.assets, "one tech column per asset");
    Arc::new(Panel::new(f.assets, f.prices.clone(), 1, f.tech.clone(), Some(f.turbulence.clone())).unwrap())
}

/// The fixture's panel with its last day repeated, so that an episode of `days - 1` steps does not end
/// (and reset) on the last step: the holdings after it stay visible.
fn extended_panel(f: &Fixture) -> Arc<Panel> {
    let a = f.assets;
    let mut prices = f.prices.clone();
    prices.extend_from_slice(&f.prices[(f.days - 1) * a..]);
    let mut tech = f.tech.clone();
    tech.extend_from_slice(&f.tech[(f.days - 1) * a..]);
    let mut turbulence = f.turbulence.clone();
    turbulence.push(0.0);
    Arc::new(Panel::new(a, prices, 1, tech, Some(turbulence)).unwrap())
}

#[test]
fn finrl_numpy_env_is_reproduced_step_by_step() {
    let f = load_fixture();
    assert_eq!((f.days, f.assets), (2520, 30));
    let cfg = EnvConfig { episode_len: f.days, ..finrl_config(f.days, Accounting::FinrlNumpy) };
    let mut env = VecEnv::new(cfg, extended_panel(&f)).unwrap();
    assert_eq!(env.equity()[0], f.total[0]);
    let mut step = StepOutcome::default();
    let a = f.assets;
    let (mut turbulent_days, mut worst) = (0, 0f64);
    for t in 0..f.days - 1 {
        env.step(&f.actions[t * a..(t + 1) * a], &mut step).unwrap();
        let got: Vec<f32> = env.positions().iter().map(|p| p.holding as f32).collect();
        assert_eq!(got, &f.holdings[t * a..(t + 1) * a], "holdings differ after step {}", t + 1);
        let rel = (step.equity[0] - f.total[t + 1]).abs() / f.total[t + 1].abs();
        worst = worst.max(rel);
        assert!(rel <= 1e-5, "total asset after step {}: {} vs FinRL {}", t + 1, step.equity[0], f.total[t + 1]);
        turbulent_days += usize::from(f.turbulence[t + 1] > 99.0);
    }
    assert!(turbulent_days > 30, "the fixture must exercise the turbulence rule");
    // The fixture must have traded a lot, or matching it proves little.
    let changes = (1..f.days - 1)
        .map(|t| (0..a).filter(|&k| f.holdings[t * a + k] != f.holdings[(t - 1) * a + k]).count())
        .sum::<usize>();
    assert!(changes > 20_000, "only {changes} holding changes in the fixture");
    eprintln!("FinRL parity: worst relative total-asset difference {worst:e}");
}

#[test]
fn finrl_episode_ends_on_the_panels_last_day() {
    let f = load_fixture();
    let mut env = VecEnv::new(finrl_config(f.days, Accounting::FinrlNumpy), fixture_panel(&f)).unwrap();
    let mut step = StepOutcome::default();
    let a = f.assets;
    for t in 0..f.days - 1 {
        env.step(&f.actions[t * a..(t + 1) * a], &mut step).unwrap();
        assert_eq!(step.done[0], t == f.days - 2, "step {}", t + 1);
    }
    assert_eq!(step.equity[0], f.total[f.days - 1]);
}

/// The standard f64 accounting under the same settings runs the same rule: it holds exactly FinRL's
/// positions until the first step where FinRL's float32 rounding tips a `floor(cash / price)` the other way
/// (step 393 on this fixture), and stays within 0.1% of FinRL's total asset over the whole run. This is why
/// the parity configuration needs `Accounting::FinrlNumpy`.
#[test]
fn standard_accounting_follows_finrl_until_float32_rounding_diverges() {
    let f = load_fixture();
    let mut env = VecEnv::new(finrl_config(f.days, Accounting::Standard), fixture_panel(&f)).unwrap();
    let mut step = StepOutcome::default();
    let a = f.assets;
    let (mut first_diff, mut worst) = (None, 0f64);
    for t in 0..f.days - 2 {
        env.step(&f.actions[t * a..(t + 1) * a], &mut step).unwrap();
        let got: Vec<f32> = env.positions().iter().map(|p| p.holding as f32).collect();
        if first_diff.is_none() && got != f.holdings[t * a..(t + 1) * a] {
            first_diff = Some(t + 1);
        }
        worst = worst.max((step.equity[0] - f.total[t + 1]).abs() / f.total[t + 1]);
    }
    let first = first_diff.unwrap_or(usize::MAX);
    assert!(first >= 300, "the f64 rule left FinRL's holdings at step {first}");
    assert!(worst < 2e-3, "total asset off by {worst:e}");
}
