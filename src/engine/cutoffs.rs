//! The LSTM strategy's probability cut-offs, chosen on the validation split: every pair on a grid is
//! traded by the strategy's own rule (`strategy::from_probs`: long when P(up) ≥ up and P(up) ≥ P(down),
//! flat when P(down) ≥ down, otherwise hold) over each symbol's validation bars in time order, with the
//! env's fee and slippage on every change of position, and the pair with the best validation metric wins.
//! Training stores it in the manifest (`UP_PARAM`, `DOWN_PARAM`); the engine trades on it unless the
//! config fixes `strategy.up_threshold` / `down_threshold`.

pub use crate::config::CutoffMetric;
use std::collections::BTreeMap;

/// Manifest params holding the chosen cut-offs.
pub const UP_PARAM: &str = "prob_up_cutoff";
/// Manifest param holding the chosen P(down) cut-off (`UP_PARAM` holds P(up)'s).
pub const DOWN_PARAM: &str = "prob_down_cutoff";

/// The grid: 0.34 to 0.90 in steps of 0.02 (below 1/3 every class clears it).
fn grid() -> impl Iterator<Item = f32> + Clone {
    (17..=45).map(|k| k as f32 * 0.02)
}

/// One validation sample: its symbol, time, the model's P(down) and P(up), and the return a position taken
/// on its decision earns over one bar (a decision at a close fills at the next close: the bar after that).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Sample {
    /// The symbol's index among the validation's symbols.
    pub symbol: u32,
    /// The bar's time, in microseconds since the Unix epoch: orders each symbol's samples and pools the symbols'
    /// returns by time.
    pub t: i64,
    /// The model's P(down) at the bar.
    pub p_down: f32,
    /// The model's P(up) at the bar.
    pub p_up: f32,
    /// The fractional return of a long position decided at this bar (0.01 = +1%).
    pub next_return: f64,
}

/// The chosen pair and what it earned on validation.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Choice {
    /// The P(up) cut-off: long at or above it (and P(up) ≥ P(down)).
    pub up: f32,
    /// The P(down) cut-off: flat at or above it.
    pub down: f32,
    /// The pair's validation metric (`lstm.cutoff_metric`), higher is better.
    pub metric: f64,
    /// Entries into a long position over the validation split.
    pub entries: usize,
}

/// The best pair with at least `min_entries` entries, or `None` when no pair trades that often. `cost` is
/// the fraction of notional lost per change of position (fee plus slippage). Ties go to the higher
/// cut-offs (fewer trades on the same evidence).
pub fn choose(samples: &[Sample], cost: f64, metric: CutoffMetric, min_entries: usize) -> Option<Choice> {
    let mut by_symbol: BTreeMap<u32, Vec<Sample>> = BTreeMap::new();
    for s in samples {
        by_symbol.entry(s.symbol).or_default().push(*s);
    }
    for v in by_symbol.values_mut() {
        v.sort_by_key(|s| s.t);
    }
    let n_symbols = by_symbol.len().max(1) as f64;
    let mut best: Option<Choice> = None;
    for up in grid() {
        for down in grid() {
            let mut per_t: BTreeMap<i64, f64> = BTreeMap::new();
            let mut entries = 0;
            for v in by_symbol.values() {
                let mut long = false;
                for s in v {
                    let was = long;
                    if s.p_up >= up && s.p_up >= s.p_down {
                        long = true;
                    } else if s.p_down >= down {
                        long = false;
                    }
                    entries += usize::from(long && !was);
                    let r = if long { s.next_return } else { 0.0 } - if long != was { cost } else { 0.0 };
                    *per_t.entry(s.t).or_default() += r / n_symbols;
                }
            }
            if entries < min_entries.max(1) {
                continue;
            }
            let value = score(per_t.values().copied(), metric);
            if !value.is_finite() {
                continue;
            }
            if best.is_none_or(|b| value >= b.metric) {
                best = Some(Choice { up, down, metric: value, entries });
            }
        }
    }
    best
}

fn score(returns: impl Iterator<Item = f64>, metric: CutoffMetric) -> f64 {
    let r: Vec<f64> = returns.collect();
    let n = r.len() as f64;
    let mean = r.iter().sum::<f64>() / n.max(1.0);
    match metric {
        CutoffMetric::Return => r.iter().sum(),
        CutoffMetric::Sharpe => {
            let var = r.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / (n - 1.0).max(1.0);
            if var > 0.0 { mean / var.sqrt() } else { f64::NEG_INFINITY }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A symbol whose next bar rises after P(up) ≥ 0.62 and falls otherwise: the chosen up cut-off must
    /// separate the two, and the cost of trading must be charged.
    fn planted(n: usize) -> Vec<Sample> {
        let mut x = 0x2545_f491_4f6c_dd1du64;
        (0..n)
            .map(|i| {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                let p_up = 0.3 + 0.6 * ((x % 1000) as f32 / 1000.0);
                let next_return = if p_up >= 0.62 { 0.01 } else { -0.01 };
                Sample { symbol: (i % 2) as u32, t: (i / 2) as i64, p_down: 1.0 - p_up, p_up, next_return }
            })
            .collect()
    }

    #[test]
    fn the_chosen_up_cutoff_separates_a_planted_signal() {
        let samples = planted(2000);
        let c = choose(&samples, 0.0, CutoffMetric::Return, 5).unwrap();
        // The oracle: long on exactly the rising bars, each symbol half the book.
        let oracle = samples.iter().filter(|s| s.next_return > 0.0).count() as f64 * 0.01 / 2.0;
        assert!((c.metric - oracle).abs() < 1e-9, "{c:?} vs the oracle's {oracle}");
        assert!((c.up - 0.62).abs() < 1e-6 && c.entries >= 5, "the signal's edge: {c:?}");
        let sharpe = choose(&planted(2000), 0.0, CutoffMetric::Sharpe, 5).unwrap();
        assert!(sharpe.up >= 0.6, "{sharpe:?}");
    }

    #[test]
    fn costs_count_and_too_few_entries_give_none() {
        let free = choose(&planted(2000), 0.0, CutoffMetric::Return, 5).unwrap();
        let dear = choose(&planted(2000), 0.001, CutoffMetric::Return, 5).unwrap();
        assert!(dear.metric < free.metric, "{dear:?} vs {free:?}");
        // A model that is never confident enough never enters.
        let flat: Vec<Sample> = planted(200).into_iter().map(|s| Sample { p_up: 0.2, p_down: 0.2, ..s }).collect();
        assert_eq!(choose(&flat, 0.0, CutoffMetric::Sharpe, 1), None);
        assert_eq!(choose(&[], 0.0, CutoffMetric::Sharpe, 1), None);
    }
}
