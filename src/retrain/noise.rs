//! How likely a lead is to be noise: a paired moving-block bootstrap of per-bar return differences.
//!
//! Given the candidate's and a reference's per-bar returns over the same bars, the differences
//! `d_t = a_t - b_t` are resampled in blocks of `BLOCK` consecutive bars (keeping short-range
//! autocorrelation, as in Künsch 1989, "The jackknife and the bootstrap for general stationary
//! observations"), `RESAMPLES` times with a fixed seed; the confidence is the share of resamples whose
//! mean difference is above zero. A candidate whose returns equal the reference's plus mean-zero noise
//! scores near 0.5; one with a real edge near 1. `folds` splits the bars into K consecutive folds for
//! the per-fold figures a decision shows.

/// Consecutive bars per resampled block.
pub const BLOCK: usize = 5;
/// Bootstrap resamples.
pub const RESAMPLES: usize = 2000;

/// The share of block-bootstrap resamples of `a - b` with a positive mean; `None` when the series differ
/// in length, are shorter than two blocks, or hold a non-finite value.
pub fn lead_confidence(a: &[f64], b: &[f64]) -> Option<f64> {
    if a.len() != b.len() || a.len() < 2 * BLOCK {
        return None;
    }
    let d: Vec<f64> = a.iter().zip(b).map(|(x, y)| x - y).collect();
    if d.iter().any(|v| !v.is_finite()) {
        return None;
    }
    let n = d.len();
    let starts = n - BLOCK + 1;
    // xorshift64*, seeded from the data's length: the same series give the same confidence every time.
    let mut state = 0x9e37_79b9_7f4a_7c15_u64 ^ n as u64;
    let mut next = move || {
        state ^= state >> 12;
        state ^= state << 25;
        state ^= state >> 27;
        state.wrapping_mul(0x2545_f491_4f6c_dd1d)
    };
    let mut above = 0usize;
    for _ in 0..RESAMPLES {
        let (mut sum, mut taken) = (0.0, 0usize);
        while taken < n {
            let s = (next() % starts as u64) as usize;
            for v in &d[s..(s + BLOCK).min(s + n - taken)] {
                sum += v;
                taken += 1;
            }
        }
        if sum > 0.0 {
            above += 1;
        }
    }
    Some(above as f64 / RESAMPLES as f64)
}

/// Compounded return of each of `k` consecutive folds of `r` (the last fold takes the remainder).
pub fn fold_returns(r: &[f64], k: usize) -> Vec<f64> {
    let k = k.clamp(1, r.len().max(1));
    let size = r.len() / k;
    (0..k)
        .map(|i| {
            let end = if i + 1 == k { r.len() } else { (i + 1) * size };
            r[i * size..end].iter().fold(1.0, |acc, x| acc * (1.0 + x)) - 1.0
        })
        .collect()
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// Normal draws from a seeded generator (Box-Muller over xorshift).
    pub(crate) fn normal(seed: u64, n: usize, mean: f64, sd: f64) -> Vec<f64> {
        let mut s = seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1;
        let mut u = move || {
            s ^= s << 13;
            s ^= s >> 7;
            s ^= s << 17;
            ((s >> 11) as f64 + 0.5) / (1u64 << 53) as f64
        };
        (0..n).map(|_| mean + sd * (-2.0 * u().ln()).sqrt() * (std::f64::consts::TAU * u()).cos()).collect()
    }

    #[test]
    fn an_edge_scores_high_noise_near_a_coin_toss_and_bad_input_none() {
        let base = normal(1, 250, 0.0005, 0.01);
        let better: Vec<f64> = base.iter().zip(normal(2, 250, 0.002, 0.002)).map(|(a, e)| a + e).collect();
        assert!(lead_confidence(&better, &base).unwrap() > 0.99);
        assert!(lead_confidence(&base, &better).unwrap() < 0.01);
        let same = lead_confidence(&base, &base).unwrap();
        assert_eq!(same, 0.0, "no resample of all-zero differences is above zero");
        assert_eq!(lead_confidence(&base, &base[1..]), None);
        assert_eq!(lead_confidence(&base[..5], &base[..5]), None);
        let mut nan = base.clone();
        nan[3] = f64::NAN;
        assert_eq!(lead_confidence(&nan, &base), None);
        assert_eq!(lead_confidence(&better, &base), lead_confidence(&better, &base), "seeded");
    }

    #[test]
    fn folds_compound_their_bars_and_cover_all() {
        let r = [0.1, 0.1, -0.5, 0.0, 1.0];
        let f = fold_returns(&r, 2);
        assert_eq!(f.len(), 2);
        assert!((f[0] - 0.21).abs() < 1e-12);
        assert!((f[1] - (0.5 * 1.0 * 2.0 - 1.0)).abs() < 1e-12);
        assert_eq!(fold_returns(&r, 9).len(), 5);
        assert_eq!(fold_returns(&[], 4), vec![0.0]);
    }
}
