//! Performance metrics over an equity curve: total return, CAGR, Sharpe, Sortino, max drawdown, turnover,
//! trades, fees, exposure. Reusable by the backtest, the promotion gate and the daemon's summary.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, Copy, PartialEq, Default, Serialize, Deserialize)]
pub struct Performance {
    pub total_return: f64,
    pub cagr: f64,
    /// Annualised (mean / std of per-bar returns × √periods_per_year); 0 when returns do not vary.
    pub sharpe: f64,
    /// As Sharpe, with the downside deviation (returns below 0).
    pub sortino: f64,
    /// Largest peak-to-trough fall, as a positive fraction.
    pub max_drawdown: f64,
    /// Traded notional over mean equity.
    pub turnover: f64,
    pub trades: usize,
    pub fees: f64,
    /// Mean fraction of equity held in positions.
    pub exposure: f64,
}

/// What the curve alone cannot tell.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub(crate) struct Activity {
    pub traded_notional: f64,
    pub trades: usize,
    pub fees: f64,
    /// Sum over bars of (position value / equity).
    pub exposure_sum: f64,
}

/// Metrics of `curve` (time, equity), `periods_per_year` bars a year (252 for daily bars).
pub(crate) fn metrics(curve: &[(DateTime<Utc>, f64)], periods_per_year: f64, act: Activity) -> Performance {
    let (Some(first), Some(last)) = (curve.first(), curve.last()) else { return Performance::default() };
    let total_return = last.1 / first.1 - 1.0;
    let years = (last.0 - first.0).num_seconds() as f64 / (365.25 * 86_400.0);
    let cagr = if years > 0.0 && last.1 > 0.0 { (last.1 / first.1).powf(1.0 / years) - 1.0 } else { 0.0 };
    let rets: Vec<f64> = curve.windows(2).map(|w| w[1].1 / w[0].1 - 1.0).collect();
    let n = rets.len().max(1) as f64;
    let mean = rets.iter().sum::<f64>() / n;
    let sd = (rets.iter().map(|r| (r - mean).powi(2)).sum::<f64>() / n).sqrt();
    let down = (rets.iter().map(|r| r.min(0.0).powi(2)).sum::<f64>() / n).sqrt();
    let ann = periods_per_year.sqrt();
    let (mut peak, mut max_dd) = (f64::MIN, 0.0f64);
    for (_, e) in curve {
        peak = peak.max(*e);
        if peak > 0.0 {
            max_dd = max_dd.max(1.0 - e / peak);
        }
    }
    let mean_equity = curve.iter().map(|c| c.1).sum::<f64>() / curve.len() as f64;
    Performance {
        total_return,
        cagr,
        sharpe: if sd > 0.0 { mean / sd * ann } else { 0.0 },
        sortino: if down > 0.0 { mean / down * ann } else { 0.0 },
        max_drawdown: max_dd,
        turnover: if mean_equity > 0.0 { act.traded_notional / mean_equity } else { 0.0 },
        trades: act.trades,
        fees: act.fees,
        exposure: act.exposure_sum / curve.len() as f64,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn drawdown_returns_and_ratios() {
        let t = |d: i64| DateTime::from_timestamp(d * 86_400 * 365, 0).unwrap_or_default();
        let curve = [(t(0), 100.0), (t(1), 120.0), (t(2), 90.0), (t(3), 121.0)];
        let m = metrics(&curve, 1.0, Activity { traded_notional: 216.0, trades: 3, fees: 1.5, exposure_sum: 2.0 });
        assert!((m.total_return - 0.21).abs() < 1e-12);
        assert!((m.max_drawdown - 0.25).abs() < 1e-12);
        assert!((m.turnover - 216.0 / 107.75).abs() < 1e-12);
        assert!((m.exposure - 0.5).abs() < 1e-12);
        assert!(m.sharpe > 0.0 && m.sortino > m.sharpe, "{m:?}");
        assert!(m.cagr > 0.06 && m.cagr < 0.07, "{m:?}");
        let flat = metrics(&[(t(0), 1.0), (t(1), 1.0)], 252.0, Activity::default());
        assert_eq!((flat.sharpe, flat.sortino, flat.max_drawdown), (0.0, 0.0, 0.0));
    }
}
