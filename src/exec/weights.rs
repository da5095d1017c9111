//! The action spaces: what a policy's output (`action [-1, A]`, each in [-1, 1]) asks for.
//!
//! - [`ActionSpace::Shares`] (the default, FinRL's): `a_k × max_trade` units of asset `k` bought or sold.
//! - [`ActionSpace::Weights`]: target portfolio weights. The A outputs, times [`LOGIT_SCALE`], are the
//!   logits of a softmax over the assets and cash (cash's logit is 0), so the weights are long-only and
//!   sum to 1 with cash; each asset's weight is capped at `max_weight`, the excess going to cash. A
//!   position is traded only when its weight drifts more than `band` from its target, and then only to
//!   the band's edge (`target ± band`), which keeps turnover low: [`band_orders`].
//!
//! The same functions size the env's trades (`VecEnv`) and the engine's orders (`engine::strategy`), so
//! training and trading cannot disagree.

use super::ExecParams;
use serde::{Deserialize, Serialize};

/// The policy output times this is a softmax logit: |a| ≤ 1 spans weights from about 0.7% to 99% of one
/// asset against cash.
pub(crate) const LOGIT_SCALE: f64 = 5.0;

/// Which action space a model acts in; in `[env]`, and in a PPO model's manifest (`params.env.action`).
#[derive(Debug, Clone, Copy, PartialEq, Default, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "kebab-case")]
pub enum ActionSpace {
    /// FinRL's share counts: `a_k × max_trade` units.
    #[default]
    Shares,
    /// Target weights with a no-trade band (both fractions of equity, `band` in [0, 1), `max_weight` in
    /// (0, 1]).
    Weights {
        /// No trade while a weight is within this of its target (a fraction of equity, in [0, 1)).
        band: f64,
        /// The cap on each asset's weight (a fraction of equity, in (0, 1]).
        max_weight: f64,
    },
}

impl ActionSpace {
    /// `shares` or `weights`, as the config names it.
    pub fn name(&self) -> &'static str {
        match self {
            ActionSpace::Shares => "shares",
            ActionSpace::Weights { .. } => "weights",
        }
    }
}

impl std::fmt::Display for ActionSpace {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ActionSpace::Shares => f.write_str("shares"),
            ActionSpace::Weights { band, max_weight } => {
                write!(f, "weights (band {:.1}%, cap {:.0}% per asset)", band * 100.0, max_weight * 100.0)
            }
        }
    }
}

/// The target weight of each asset for `actions` (one per asset; NaN counts as 0): softmax over the
/// scaled actions and cash's logit 0, each asset capped at `max_weight` (the excess stays in cash).
pub(crate) fn target_weights(actions: &[f32], max_weight: f64, out: &mut [f64]) {
    let logit = |a: f32| if a.is_nan() { 0.0 } else { f64::from(a).clamp(-1.0, 1.0) * LOGIT_SCALE };
    // Cash's logit is 0; subtracting the largest keeps exp() finite.
    let top = actions.iter().map(|a| logit(*a)).fold(0.0, f64::max);
    let mut sum = (-top).exp();
    for (w, a) in out.iter_mut().zip(actions) {
        *w = (logit(*a) - top).exp();
        sum += *w;
    }
    for w in out.iter_mut() {
        *w = (*w / sum).min(max_weight);
    }
}

/// The units to trade per asset (> 0 buy, < 0 sell, 0 none) to bring each weight back within `band` of
/// its `target`: an asset whose weight `w = holding × price / equity` is within `target ± band` is left
/// alone; one above goes down to `target + band`, one below up to `target − band`. Whole units when the
/// execution rule asks (rounded toward zero, so a trade never crosses the edge); trades below `min_order`
/// are dropped. Nothing trades when equity is not positive or a price is not.
pub(crate) fn band_orders(
    target: &[f64],
    holdings: &[f64],
    prices: &[f64],
    equity: f64,
    band: f64,
    exec: &ExecParams,
    out: &mut [f64],
) {
    out.fill(0.0);
    if equity.is_nan() || equity <= 0.0 {
        return;
    }
    for k in 0..out.len() {
        let (price, held) = (prices[k], holdings[k]);
        if price.is_nan() || price <= 0.0 {
            continue;
        }
        let w = held * price / equity;
        let edge = if w > target[k] + band {
            target[k] + band
        } else if w < target[k] - band {
            target[k] - band
        } else {
            continue;
        };
        let mut units = (edge - w) * equity / price;
        if exec.integer_units {
            // Toward zero, except for a float's hair below a whole unit (3.9999999999 units is 4).
            let near = units.round();
            units = if (units - near).abs() < 1e-9 { near } else { units.trunc() };
        }
        // Long-only: never sell more than the holding.
        units = units.max(-held);
        if units.abs() >= exec.min_order && units != 0.0 {
            out[k] = units;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn exec() -> ExecParams {
        ExecParams { min_order: 1.0, integer_units: true, ..ExecParams::default() }
    }

    #[test]
    fn weights_are_a_softmax_over_assets_and_cash_capped_per_asset() {
        let mut w = [0.0; 2];
        target_weights(&[0.0, 0.0], 1.0, &mut w);
        assert!(w.iter().all(|x| (x - 1.0 / 3.0).abs() < 1e-12), "{w:?}");
        // exp(5) : exp(-5) : 1 (cash).
        target_weights(&[1.0, -1.0], 1.0, &mut w);
        let z = 5f64.exp() + (-5f64).exp() + 1.0;
        assert!((w[0] - 5f64.exp() / z).abs() < 1e-12 && (w[1] - (-5f64).exp() / z).abs() < 1e-12, "{w:?}");
        target_weights(&[1.0, f32::NAN], 0.4, &mut w);
        assert_eq!(w[0], 0.4, "capped; the rest stays in cash");
        assert!((w[1] - 1.0 / z_of(5.0)).abs() < 1e-12, "NaN is a logit of 0: {w:?}");
        assert!(w.iter().all(|x| x.is_finite() && *x >= 0.0));
    }

    fn z_of(l: f64) -> f64 {
        l.exp() + 1.0 + 1.0
    }

    /// Equity 10 000: asset 0 at 25% (target 20%, band 3%): sells to 23%; asset 1 at 21% (target 20%):
    /// inside the band, no order; asset 2 at 0% (target 30%): buys to 27%.
    #[test]
    fn no_order_inside_the_band_and_orders_to_its_edge_outside() {
        let prices = [50.0, 30.0, 20.0];
        let holdings = [50.0, 70.0, 0.0]; // 2500, 2100, 0
        let equity = 10_000.0;
        let target = [0.20, 0.20, 0.30];
        let mut out = [0.0; 3];
        band_orders(&target, &holdings, &prices, equity, 0.03, &exec(), &mut out);
        // (0.23 - 0.25) * 10000 / 50 = -4 units; (0.27 - 0) * 10000 / 20 = 135 units.
        assert_eq!(out, [-4.0, 0.0, 135.0]);
        let after: Vec<f64> = (0..3).map(|k| (holdings[k] + out[k]) * prices[k] / equity).collect();
        assert!((after[0] - 0.23).abs() < 1e-12 && (after[2] - 0.27).abs() < 1e-12, "{after:?}");
        // Every weight within the band: nothing trades, whatever the exact drift.
        let target = [0.24, 0.19, 0.02];
        band_orders(&target, &holdings, &prices, equity, 0.03, &exec(), &mut out);
        assert_eq!(out, [0.0; 3]);
        // Whole units round toward zero (never past the edge); fractional units land on it exactly.
        let target = [0.20, 0.20, 0.301];
        band_orders(&target, &holdings, &prices, equity, 0.03, &exec(), &mut out);
        assert_eq!(out[2], 135.0, "135.5 units rounds down");
        let frac = ExecParams { integer_units: false, ..exec() };
        band_orders(&target, &holdings, &prices, equity, 0.03, &frac, &mut out);
        assert!((out[2] - 135.5).abs() < 1e-9, "{out:?}");
        // Below the minimum order: dropped. A target of 0 sells down to the band, never short.
        let big = ExecParams { min_order: 200.0, ..exec() };
        band_orders(&[0.2, 0.2, 0.3], &holdings, &prices, equity, 0.03, &big, &mut out);
        assert_eq!(out, [0.0; 3]);
        band_orders(&[0.0, 0.2, 0.0], &holdings, &prices, equity, 0.0, &exec(), &mut out);
        assert_eq!(out[0], -50.0);
        band_orders(&[0.2, 0.2, 0.3], &holdings, &prices, 0.0, 0.03, &exec(), &mut out);
        assert_eq!(out, [0.0; 3], "no equity: no trade");
    }
}
