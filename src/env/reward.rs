//! The training rewards (`env.reward`), and what "better" means to the promotion gate with each
//! (`Reward::objective`): the one place the config says it.
//!
//! - `equity` (the default, FinRL's): `reward_scale × (equity change − turnover_penalty × notional)`.
//! - `vs-benchmark`: the portfolio's log return minus the benchmark's, minus `turnover_bps` basis points of
//!   the notional traded (as a fraction of the equity before the step), times `reward_scale ×
//!   initial_cash` (so that its size matches the equity reward's). The benchmark is equal-weight
//!   buy-and-hold of the same symbols from the episode's first day, or a configured index symbol
//!   (`Panel::benchmark`).
//! - `differential-sharpe`: Moody and Saffell's differential Sharpe ratio of the same net log return
//!   `R_t`, with moving moments `A`, `B` (rate `eta`, zero at each episode start):
//!   `D_t = (B ΔA − ½ A ΔB) / (B − A²)^{3/2}`, `ΔA = R_t − A`, `ΔB = R_t² − B`, then `A += eta ΔA`,
//!   `B += eta ΔB`. `D_t` is 0 while `B − A²` is not positive and is clipped to ±[`DSR_CLIP`] (the first
//!   steps of an episode, when the variance estimate is tiny).

use serde::Serialize;

/// |D_t| is capped here.
pub const DSR_CLIP: f64 = 5.0;

/// What a candidate must beat without a champion, by the training reward's own measure.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Objective {
    /// Return: a lead over cash and buy-and-hold, per bar, by the bootstrap test.
    #[default]
    Return,
    /// Risk-adjusted return: a lead over cash by the bootstrap test, and a Sharpe ratio above
    /// buy-and-hold's by the gate's margin.
    Sharpe,
}

/// The benchmark of `vs-benchmark`; written as `equal-weight` or the symbol (`env.benchmark`).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum Benchmark {
    /// Equal-weight buy-and-hold of the traded symbols, bought at the episode's first day.
    #[default]
    EqualWeight,
    /// An index symbol's price (the panel's `benchmark` series).
    Symbol(String),
}

impl Serialize for Benchmark {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self {
            Benchmark::EqualWeight => s.serialize_str("equal-weight"),
            Benchmark::Symbol(sym) => s.serialize_str(sym),
        }
    }
}

/// The training reward (`env.reward`); see the module's notes.
#[derive(Debug, Clone, PartialEq, Default, Serialize)]
#[serde(tag = "kind", rename_all = "kebab-case")]
pub enum Reward {
    /// FinRL's: `reward_scale × (equity change − turnover_penalty × notional traded)`.
    #[default]
    Equity,
    /// The portfolio's net log return minus the benchmark's, scaled to the equity reward's size.
    VsBenchmark {
        /// What the return is measured against.
        benchmark: Benchmark,
        /// Basis points of the notional traded (over equity) taken from the return.
        turnover_bps: f64,
    },
    /// Moody and Saffell's differential Sharpe ratio of the net log return, clipped to ±`DSR_CLIP`.
    DifferentialSharpe {
        /// The rate of the moving moments A and B (0 to 1).
        eta: f64,
        /// Basis points of the notional traded (over equity) taken from the return.
        turnover_bps: f64,
    },
}

impl Reward {
    /// The reward's name in the config (`equity`, `vs-benchmark`, `differential-sharpe`).
    pub fn name(&self) -> &'static str {
        match self {
            Reward::Equity => "equity",
            Reward::VsBenchmark { .. } => "vs-benchmark",
            Reward::DifferentialSharpe { .. } => "differential-sharpe",
        }
    }

    /// What the gate's no-champion rule asks of a candidate trained with this reward.
    pub fn objective(&self) -> Objective {
        match self {
            Reward::Equity | Reward::VsBenchmark { .. } => Objective::Return,
            Reward::DifferentialSharpe { .. } => Objective::Sharpe,
        }
    }
}

/// The net log return of one step: `ln(equity / prev) − ln(bench / bench_prev) − bps × turnover / prev`
/// (the benchmark term only when `bench` is given as (now, before)).
pub fn net_log_return(equity: f64, prev: f64, bench: Option<(f64, f64)>, turnover: f64, bps: f64) -> f64 {
    let ln = |now: f64, before: f64| if before > 0.0 { (now / before).max(1e-12).ln() } else { 0.0 };
    let b = bench.map_or(0.0, |(now, before)| ln(now, before));
    let cost = if prev > 0.0 { bps * 1e-4 * turnover / prev } else { 0.0 };
    ln(equity, prev) - b - cost
}

/// One step of the differential Sharpe ratio: returns `D_t` and moves the moments `(a, b)`.
pub fn differential_sharpe(r: f64, eta: f64, a: &mut f64, b: &mut f64) -> f64 {
    let (da, db) = (r - *a, r * r - *b);
    let var = *b - *a * *a;
    let d = if var > 0.0 { (*b * da - 0.5 * *a * db) / var.powf(1.5) } else { 0.0 };
    *a += eta * da;
    *b += eta * db;
    d.clamp(-DSR_CLIP, DSR_CLIP)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn differential_sharpe_equals_its_formula() {
        let eta = 0.1;
        let (mut a, mut b) = (0.0, 0.0);
        // First step: no variance yet, D = 0; the moments move.
        assert_eq!(differential_sharpe(0.02, eta, &mut a, &mut b), 0.0);
        assert!((a - 0.002).abs() < 1e-12 && (b - 0.00004).abs() < 1e-12, "{a} {b}");
        // Hand-computed moments after 0.02, 0.01, -0.005 with eta 0.1.
        differential_sharpe(0.01, eta, &mut a, &mut b);
        differential_sharpe(-0.005, eta, &mut a, &mut b);
        // Hand-computed: A = 0.002 + 0.1 (0.01 - 0.002) = 0.0028, then 0.0028 + 0.1 (-0.005 - 0.0028) = 0.00202;
        // B = 0.00004 + 0.1 (0.0001 - 0.00004) = 0.000046, then 0.000046 + 0.1 (0.000025 - 0.000046) = 0.0000439.
        let (ea, eb) = (0.00202, 0.0000439);
        assert!((a - ea).abs() < 1e-12 && (b - eb).abs() < 1e-12, "{a} {b}");
        // The next step against the formula written out.
        let r = 0.004;
        let want = (eb * (r - ea) - 0.5 * ea * (r * r - eb)) / (eb - ea * ea).powf(1.5);
        let got = differential_sharpe(r, eta, &mut a, &mut b);
        assert!((got - want).abs() < 1e-12, "{got} vs {want}");
        assert!(got.abs() < DSR_CLIP, "the checked step is not clipped: {got}");
        // A large return against a tiny variance is clipped.
        // (1e-8 x 0.5) / (1e-8)^1.5 = 5000 -> 5; and -5000 -> -5.
        let (mut a, mut b) = (0.0, 1e-8);
        assert_eq!(differential_sharpe(0.5, eta, &mut a, &mut b), DSR_CLIP);
        let (mut a, mut b) = (0.0, 1e-8);
        assert_eq!(differential_sharpe(-0.5, eta, &mut a, &mut b), -DSR_CLIP);
    }

    #[test]
    fn net_log_return_subtracts_the_benchmark_and_the_turnover_cost() {
        // Equity 100 -> 103, benchmark 1.0 -> 1.01, 50 traded at 10 bps.
        let r = net_log_return(103.0, 100.0, Some((1.01, 1.0)), 50.0, 10.0);
        assert!((r - ((1.03f64).ln() - (1.01f64).ln() - 0.001 * 0.5)).abs() < 1e-15, "{r}");
        assert_eq!(net_log_return(100.0, 100.0, None, 0.0, 10.0), 0.0);
        assert_eq!(Reward::DifferentialSharpe { eta: 0.01, turnover_bps: 0.0 }.objective(), Objective::Sharpe);
        assert_eq!(Reward::default().objective(), Objective::Return);
    }
}
