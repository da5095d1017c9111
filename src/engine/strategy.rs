//! Strategy modes: how model outputs become wanted trades, per symbol, before risk and the OMS.
//!
//! - `ppo`: the policy's actions in the model's action space (`env.action_space`): share counts, each `a_k`
//!   a trade of `a_k × max_trade` units under `exec`'s sizing; or target weights with a no-trade
//!   band, sized by `exec::weights` exactly as the env sizes them in training (`from_weights`).
//! - `lstm`: per symbol, long `lstm_position_pct` of equity when P(up) ≥ the up cut-off, flat when P(down) ≥
//!   the down cut-off, otherwise hold. The cut-offs are the config's `up_threshold` / `down_threshold` when
//!   set, else the ones the model chose on its validation split (`engine::cutoffs`), else 0.5.
//! - `ensemble`: the PPO trades, except buys of a symbol whose P(down) ≥ `veto_down` (vetoed).
//!
//! The LSTM probabilities come from a `ProbSource`: the real one (the LSTM input builder from the `lstm`
//! branch feeding `policy::LstmPolicy`) plugs in at this seam; tests use a fake.

pub use crate::config::{StrategyConfig, StrategyMode};
use crate::domain::{Bar, Side, Symbol};
use crate::exec::ExecParams;
use crate::policy::PolicyError;
use serde::Serialize;

/// Per-symbol direction probabilities [P(down), P(flat), P(up)].
pub trait ProbSource: Send {
    /// Every closed bar, in time order (the source keeps its windows).
    fn on_bar(&mut self, bar: &Bar);
    /// The probabilities for `symbol` at its last bar; `None` while its windows are not full.
    fn probs(&mut self, symbol: &Symbol) -> Option<Result<[f32; 3], PolicyError>>;
    /// The id of the model the probabilities come from.
    fn model_id(&self) -> String;
    /// The (up, down) cut-offs the model chose on its validation split, when it has them.
    fn cutoffs(&self) -> (Option<f32>, Option<f32>) {
        (None, None)
    }
    /// Hot swap: trade with `policy` from the next bar on, keeping the windows. Returns false when this
    /// source is not an LSTM model's (the model is then not used).
    fn set_lstm(&mut self, _policy: crate::policy::LstmPolicy) -> bool {
        false
    }
    /// The windows an LSTM model's source builds (`None`: not an LSTM model's).
    fn lstm_window(&self) -> Option<crate::features::windows::WindowSpec> {
        None
    }
}

/// A wanted trade for one symbol.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Want {
    /// Buy or sell.
    pub side: Side,
    /// How many units (shares, fractional where allowed), always positive.
    pub qty: f64,
}

/// PPO: the action's units under the execution rule's sizing; sells capped at the holding (long-only).
pub fn from_action(exec: &ExecParams, action: f32, holding: f64) -> Option<Want> {
    let a = if action.is_nan() { 0.0 } else { f64::from(action) };
    let units = exec.units(a);
    if units < exec.min_order || units <= 0.0 {
        return None;
    }
    if a > 0.0 {
        Some(Want { side: Side::Buy, qty: units })
    } else if holding > 0.0 {
        Some(Want { side: Side::Sell, qty: units.min(holding) })
    } else {
        None
    }
}

/// PPO in the weights action space: the wanted trade per symbol that brings each weight back within
/// `band` of the policy's target (to the band's edge), none inside the band. `equity` is cash plus the
/// symbols' positions at `closes` (the env's equity).
pub fn from_weights(
    exec: &ExecParams,
    (band, max_weight): (f64, f64),
    actions: &[f32],
    holdings: &[f64],
    closes: &[f64],
    equity: f64,
) -> Vec<Option<Want>> {
    let n = actions.len();
    let (mut target, mut units) = (vec![0.0; n], vec![0.0; n]);
    crate::exec::weights::target_weights(actions, max_weight, &mut target);
    crate::exec::weights::band_orders(&target, holdings, closes, equity, band, exec, &mut units);
    units
        .iter()
        .map(|&u| match u {
            u if u > 0.0 => Some(Want { side: Side::Buy, qty: u }),
            u if u < 0.0 => Some(Want { side: Side::Sell, qty: -u }),
            _ => None,
        })
        .collect()
}

/// The probability cut-offs the LSTM strategy trades on.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Cutoffs {
    /// The P(up) at or above which the strategy goes long (when P(up) ≥ P(down)).
    pub up: f32,
    /// The P(down) at or above which the strategy goes flat.
    pub down: f32,
}

impl Cutoffs {
    /// The config's cut-offs where set, else the model's, else `DEFAULT_CUTOFF`.
    pub fn resolve(cfg: &StrategyConfig, model: (Option<f32>, Option<f32>)) -> Cutoffs {
        let d = crate::config::DEFAULT_CUTOFF;
        Cutoffs { up: cfg.up_threshold.or(model.0).unwrap_or(d), down: cfg.down_threshold.or(model.1).unwrap_or(d) }
    }
}

/// A long position below this share of its target is topped up; above it, it is left alone (no trade each
/// bar for the drift of equity and price).
const TOP_UP_BELOW: f64 = 0.8;

/// LSTM: to `target` units (the strategy's share of equity at the close) when up is likely, to flat when
/// down is likely, otherwise hold.
pub fn from_probs(cut: Cutoffs, exec: &ExecParams, p: [f32; 3], holding: f64, target: f64) -> Option<Want> {
    let (down, up) = (p[0], p[2]);
    let diff = if up >= cut.up && up >= down {
        if holding < target * TOP_UP_BELOW { target - holding } else { 0.0 }
    } else if down >= cut.down {
        -holding
    } else {
        0.0
    };
    let qty = if exec.integer_units { diff.abs().trunc() } else { diff.abs() };
    if qty < exec.min_order || qty <= 0.0 {
        return None;
    }
    Some(Want { side: if diff > 0.0 { Side::Buy } else { Side::Sell }, qty })
}

/// Ensemble: a buy is vetoed when P(down) ≥ `veto_down`.
pub fn vetoed(cfg: &StrategyConfig, want: &Want, p: Option<[f32; 3]>) -> bool {
    want.side == Side::Buy && p.is_some_and(|p| p[0] >= cfg.veto_down)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn actions_probs_and_vetoes() {
        let exec = ExecParams { max_trade: 10.0, ..ExecParams::default() };
        assert_eq!(from_action(&exec, 0.55, 0.0), Some(Want { side: Side::Buy, qty: 5.0 }));
        assert_eq!(from_action(&exec, -0.55, 3.0), Some(Want { side: Side::Sell, qty: 3.0 }));
        assert_eq!(from_action(&exec, -0.55, 0.0), None);
        assert_eq!(from_action(&exec, 0.05, 0.0), None, "below the minimum order");
        let cfg = StrategyConfig { up_threshold: Some(0.6), ..Default::default() };
        let cut = Cutoffs::resolve(&cfg, (Some(0.4), Some(0.45)));
        assert_eq!(cut, Cutoffs { up: 0.6, down: 0.45 }, "the config's cut-off wins, the model's fills in");
        assert_eq!(Cutoffs::resolve(&StrategyConfig::default(), (None, None)), Cutoffs { up: 0.5, down: 0.5 });
        assert_eq!(from_probs(cut, &exec, [0.1, 0.2, 0.7], 2.0, 7.4), Some(Want { side: Side::Buy, qty: 5.0 }));
        assert_eq!(from_probs(cut, &exec, [0.1, 0.2, 0.7], 6.0, 7.4), None, "within the band: no top-up");
        assert_eq!(from_probs(cut, &exec, [0.5, 0.2, 0.3], 2.0, 7.4), Some(Want { side: Side::Sell, qty: 2.0 }));
        assert_eq!(from_probs(cut, &exec, [0.3, 0.4, 0.3], 2.0, 7.4), None);
        let buy = Want { side: Side::Buy, qty: 1.0 };
        let sell = Want { side: Side::Sell, qty: 1.0 };
        let ens = StrategyConfig { veto_down: 0.4, ..Default::default() };
        assert!(vetoed(&ens, &buy, Some([0.45, 0.1, 0.45])));
        assert!(!vetoed(&ens, &buy, Some([0.35, 0.3, 0.35])));
        assert!(!vetoed(&ens, &sell, Some([0.9, 0.05, 0.05])));
        assert!(!vetoed(&ens, &buy, None));
        assert!(StrategyConfig::default().validate().is_ok());
        // Weights: equity 10 000; symbol 0 at 25% against a target near 50% (band 5%): buys to the edge;
        // symbol 1 at about its target: no order.
        let (h, c) = ([50.0, 20.0], [50.0, 100.0]);
        let mut t = [0.0; 2];
        let acts = [0.2f32, -0.1];
        crate::exec::weights::target_weights(&acts, 1.0, &mut t);
        let w1 = 2_000.0 / 10_000.0;
        let band = (t[1] - w1).abs() + 0.01;
        let got = from_weights(&exec, (band, 1.0), &acts, &h, &c, 10_000.0);
        let want0 = ((t[0] - band - 0.25) * 10_000.0 / 50.0).trunc();
        assert!(want0 > 0.0, "{t:?}");
        assert_eq!(got, vec![Some(Want { side: Side::Buy, qty: want0 }), None]);
        assert!(StrategyConfig { up_threshold: Some(1.5), ..Default::default() }.validate().is_err());
        let old = StrategyConfig { lstm_qty: Some(10.0), ..Default::default() }.validate().unwrap_err().to_string();
        assert!(old.contains("lstm_position_pct"), "{old}");
        assert!(StrategyConfig { lstm_position_pct: 1.5, ..Default::default() }.validate().is_err());
        assert!(
            StrategyConfig { name: "--".into(), ..Default::default() }
                .validate()
                .unwrap_err()
                .to_string()
                .contains("strategy.name")
        );
    }
}
