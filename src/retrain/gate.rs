//! The promotion gate: a candidate replaces the champion only if, on a holdout it never trained on and in
//! the same backtest, it beats the champion's Sharpe ratio by the configured margin, keeps its maximum
//! drawdown within the cap, and trades at least the minimum number of times. The decision and its numbers
//! are kept, whichever way it goes.

use crate::config::GateConfig;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// The backtest figures the gate reads.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct GateInput {
    pub sharpe: f64,
    /// As a positive fraction (0.2 = 20% below the peak).
    pub max_drawdown: f64,
    pub trades: u64,
    pub total_return: f64,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct GateDecision {
    pub promote: bool,
    pub reason: String,
    pub numbers: BTreeMap<String, f64>,
}

/// `champion = None` (no model yet): the candidate needs only the drawdown cap and the trade minimum.
pub fn decide(candidate: &GateInput, champion: Option<&GateInput>, cfg: &GateConfig) -> GateDecision {
    let mut numbers = BTreeMap::from([
        ("candidate_sharpe".to_string(), candidate.sharpe),
        ("candidate_max_drawdown".to_string(), candidate.max_drawdown),
        ("candidate_trades".to_string(), candidate.trades as f64),
        ("candidate_return".to_string(), candidate.total_return),
        ("min_sharpe_margin".to_string(), cfg.min_sharpe_margin),
        ("max_drawdown_cap".to_string(), cfg.max_drawdown),
    ]);
    if let Some(c) = champion {
        numbers.insert("champion_sharpe".into(), c.sharpe);
        numbers.insert("champion_max_drawdown".into(), c.max_drawdown);
        numbers.insert("champion_trades".into(), c.trades as f64);
        numbers.insert("champion_return".into(), c.total_return);
    }
    let fail = |reason: String| GateDecision { promote: false, reason, numbers: numbers.clone() };
    if !(candidate.sharpe.is_finite() && candidate.max_drawdown.is_finite()) {
        return fail(format!(
            "candidate backtest is not finite (Sharpe {}, drawdown {})",
            candidate.sharpe, candidate.max_drawdown
        ));
    }
    if candidate.max_drawdown > cfg.max_drawdown {
        return fail(format!(
            "candidate max drawdown {:.1}% exceeds the cap of {:.1}%",
            candidate.max_drawdown * 100.0,
            cfg.max_drawdown * 100.0
        ));
    }
    if candidate.trades < cfg.min_trades {
        return fail(format!("candidate traded {} times, fewer than the minimum {}", candidate.trades, cfg.min_trades));
    }
    let reason = match champion {
        None => "no champion yet; candidate within the drawdown cap and the trade minimum".to_string(),
        Some(c) => {
            // A champion whose Sharpe is undefined (it never traded) is beaten by any finite figure.
            let champ = if c.sharpe.is_nan() { f64::NEG_INFINITY } else { c.sharpe };
            if candidate.sharpe < champ + cfg.min_sharpe_margin {
                return fail(format!(
                    "candidate Sharpe {:.3} does not beat the champion's {:.3} by the margin {:.3}",
                    candidate.sharpe, c.sharpe, cfg.min_sharpe_margin
                ));
            }
            format!(
                "candidate Sharpe {:.3} beats the champion's {:.3} by at least {:.3}",
                candidate.sharpe, c.sharpe, cfg.min_sharpe_margin
            )
        }
    };
    GateDecision { promote: true, reason, numbers }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cfg() -> GateConfig {
        GateConfig { min_sharpe_margin: 0.1, max_drawdown: 0.25, min_trades: 5 }
    }

    fn g(sharpe: f64, dd: f64, trades: u64) -> GateInput {
        GateInput { sharpe, max_drawdown: dd, trades, total_return: 0.1 }
    }

    #[test]
    fn promotes_only_a_clear_improvement() {
        let champ = g(1.0, 0.1, 20);
        assert!(decide(&g(1.2, 0.1, 20), Some(&champ), &cfg()).promote);
        let d = decide(&g(1.05, 0.1, 20), Some(&champ), &cfg());
        assert!(!d.promote && d.reason.contains("does not beat"), "{}", d.reason);
        assert_eq!(d.numbers["champion_sharpe"], 1.0);
        assert_eq!(d.numbers["candidate_sharpe"], 1.05);
    }

    #[test]
    fn drawdown_cap_and_trade_minimum_bind_even_without_a_champion() {
        let d = decide(&g(3.0, 0.4, 20), None, &cfg());
        assert!(!d.promote && d.reason.contains("exceeds the cap"), "{}", d.reason);
        let d = decide(&g(3.0, 0.1, 2), None, &cfg());
        assert!(!d.promote && d.reason.contains("fewer than the minimum 5"), "{}", d.reason);
        assert!(decide(&g(0.2, 0.1, 5), None, &cfg()).promote);
    }

    #[test]
    fn non_finite_figures_never_promote() {
        assert!(!decide(&g(f64::NAN, 0.1, 20), None, &cfg()).promote);
        assert!(!decide(&g(f64::INFINITY, f64::NAN, 20), Some(&g(1.0, 0.1, 9)), &cfg()).promote);
        assert!(decide(&g(0.5, 0.1, 20), Some(&g(f64::NAN, 0.0, 0)), &cfg()).promote);
    }
}
