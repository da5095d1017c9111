//! The LSTM's window sized to the data it has. A symbol's labelled samples are its bars less the bars
//! before its first full window (`windows::first_ready_bar`: the features' warm-up on slow bars dominates,
//! about `(warm-up + slow_len) x slow_factor` bars) and the last `horizon` bars, whose label is not known
//! yet. When the configured window leaves fewer pooled samples than `lstm.target_samples`, the sizing
//! shrinks `slow_len` (halving), then `slow_factor`, then `horizon` (one at a time), each no lower than its
//! `lstm.min_` bound, and stops as soon as the target is reached. Below `MIN_SAMPLES` even at the bounds,
//! training refuses with [`NotEnoughData`].

use crate::config::LstmConfig;
use crate::features::FeatureSpec;
use crate::features::windows::{self, WindowSpec};

/// Fewest pooled labelled samples worth a model: 70 % of them train (at least 200), the rest validate and test.
pub(crate) const MIN_SAMPLES: usize = 300;

/// The start of the message of [`NotEnoughData`] (the retrain records such a run as skipped).
pub(crate) use crate::retrain::NOT_ENOUGH_DATA;

/// Labelled samples a symbol with `bars` bars gives under window `w`.
pub(crate) fn labelled(spec: &FeatureSpec, w: &WindowSpec, bars: usize) -> usize {
    bars.saturating_sub(windows::first_ready_bar(spec, w) + w.horizon)
}

/// Pooled labelled samples over symbols with these bar counts.
pub(crate) fn pooled(spec: &FeatureSpec, w: &WindowSpec, bars: &[usize]) -> usize {
    bars.iter().map(|&n| labelled(spec, w, n)).sum()
}

/// The window for symbols with these bar counts: the configured one when it reaches `cfg.target_samples`,
/// else the first step of the shrinking (see the module) that does, or the bounds.
pub(crate) fn size(cfg: &LstmConfig, spec: &FeatureSpec, bars: &[usize]) -> WindowSpec {
    let mut w = cfg.window_spec();
    let floor = |min: usize, v: usize| min.min(v);
    let (min_slow_len, min_slow_factor, min_horizon) = (
        floor(cfg.min_slow_len, w.slow_len),
        floor(cfg.min_slow_factor, w.slow_factor),
        floor(cfg.min_horizon, w.horizon),
    );
    while pooled(spec, &w, bars) < cfg.target_samples {
        if w.slow_len > min_slow_len {
            w.slow_len = (w.slow_len / 2).max(min_slow_len);
        } else if w.slow_factor > min_slow_factor {
            w.slow_factor -= 1;
        } else if w.horizon > min_horizon {
            w.horizon -= 1;
        } else {
            break;
        }
    }
    w
}

/// Too few labelled samples for the LSTM even with its window at the sizing's bounds.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error(
    "{NOT_ENOUGH_DATA}: {samples} labelled samples ({per_symbol} per symbol over {days} days), need {need}: import more history (`tradebot data import FILE` or `tradebot data fetch --from YYYY-MM-DD`, up to lstm.history_days = {history_days} days before the [train] range ends) or lower lstm.min_slow_len / lstm.min_slow_factor"
)]
pub(crate) struct NotEnoughData {
    pub samples: usize,
    /// The mean over the symbols, rounded down.
    pub per_symbol: usize,
    /// Calendar days from the first to the last bar the symbols have.
    pub days: i64,
    pub need: usize,
    pub history_days: u32,
}

#[cfg(test)]
mod tests;
