//! `Panel`: the market an environment trades, time-major and shared by all envs: prices (T x A), feature
//! rows (T x A x F) and an optional per-day turbulence index.

use crate::domain::Bar;
use crate::features::{FeatureSpec, batch};

/// Why a panel cannot be built: its prices, features or bars do not fit together.
#[derive(Debug, thiserror::Error, PartialEq)]
pub enum PanelError {
    /// No asset, or fewer than two days.
    #[error("the panel needs at least one asset and two days")]
    Empty,
    /// An array's length does not fit the panel's dimensions.
    #[error("{what} has {got} values, expected {want}")]
    Shape {
        /// The array (`prices`, `features`, `turbulence`, `benchmark`).
        what: &'static str,
        /// Its length.
        got: usize,
        /// The length the panel's dimensions ask for.
        want: usize,
    },
    /// A price is not finite or not above zero.
    #[error("price {value} at day {day}, asset {asset}: prices must be finite and above zero")]
    BadPrice {
        /// The day (time step) of the price.
        day: usize,
        /// The asset's index.
        asset: usize,
        /// The price found.
        value: f32,
    },
    /// A benchmark price is not finite or not above zero.
    #[error("benchmark price {value} at day {day}: prices must be finite and above zero")]
    BadBenchmark {
        /// The day (time step) of the price.
        day: usize,
        /// The price found.
        value: f32,
    },
    /// The assets' bars are not at the same times (another count, or another time at some bar).
    #[error("asset {asset} has {got} bars, asset 0 has {want}; or bar {day} is at another time")]
    Misaligned {
        /// The asset's index.
        asset: usize,
        /// Its bar count.
        got: usize,
        /// Asset 0's bar count.
        want: usize,
        /// The first bar where they differ (the shorter count when the counts differ).
        day: usize,
    },
}

/// The market the envs trade: prices, feature rows and an optional turbulence index per day (a day is a bar of the
/// timeframe), shared by every env.
#[derive(Debug, Clone)]
pub struct Panel {
    /// Time steps (bars) of the panel, at least 2.
    pub n_days: usize,
    /// Assets (symbols) of the panel, at least 1.
    pub n_assets: usize,
    /// Features per asset and day.
    pub n_features: usize,
    /// `prices[day * n_assets + asset]`, the price trades execute at.
    pub prices: Vec<f32>,
    /// `features[(day * n_assets + asset) * n_features + k]`.
    pub features: Vec<f32>,
    /// FinRL's turbulence index per day (`turbulence_threshold` reads it; `None`: no turbulence).
    pub turbulence: Option<Vec<f64>>,
    /// An index symbol's price per day, the benchmark of `env.reward = vs-benchmark` when one is set.
    pub benchmark: Option<Vec<f32>>,
}

impl Panel {
    /// A panel from its arrays, checked: day-major prices and features, and an optional turbulence per day.
    pub fn new(
        n_assets: usize,
        prices: Vec<f32>,
        n_features: usize,
        features: Vec<f32>,
        turbulence: Option<Vec<f64>>,
    ) -> Result<Self, PanelError> {
        if n_assets == 0 || prices.len() < 2 * n_assets {
            return Err(PanelError::Empty);
        }
        let n_days = prices.len() / n_assets;
        if prices.len() != n_days * n_assets {
            return Err(PanelError::Shape { what: "prices", got: prices.len(), want: n_days * n_assets });
        }
        if features.len() != n_days * n_assets * n_features {
            return Err(PanelError::Shape {
                what: "features",
                got: features.len(),
                want: n_days * n_assets * n_features,
            });
        }
        if let Some(t) = &turbulence
            && t.len() != n_days
        {
            return Err(PanelError::Shape { what: "turbulence", got: t.len(), want: n_days });
        }
        if let Some(i) = prices.iter().position(|p| !(p.is_finite() && *p > 0.0)) {
            return Err(PanelError::BadPrice { day: i / n_assets, asset: i % n_assets, value: prices[i] });
        }
        Ok(Panel { n_days, n_assets, n_features, prices, features, turbulence, benchmark: None })
    }

    /// A panel of closes and features from aligned bars (one slice per asset, the same times), dropping
    /// the warm-up days so that every row is ready.
    pub fn from_bars(spec: &FeatureSpec, assets: &[Vec<Bar>]) -> Result<Self, PanelError> {
        let first = assets.first().ok_or(PanelError::Empty)?;
        for (a, bars) in assets.iter().enumerate() {
            if let Some(day) = misaligned_day(bars.len() != first.len(), bars, first) {
                return Err(PanelError::Misaligned { asset: a, got: bars.len(), want: first.len(), day });
            }
        }
        let skip = spec.warmup().saturating_sub(1);
        let n_days = first.len().saturating_sub(skip);
        let (na, nf) = (assets.len(), spec.n_cols());
        let mats: Vec<_> = assets.iter().map(|b| batch(spec, b)).collect();
        let mut prices = Vec::with_capacity(n_days * na);
        let mut features = Vec::with_capacity(n_days * na * nf);
        for d in skip..first.len() {
            for (bars, m) in assets.iter().zip(&mats) {
                prices.push(bars[d].c as f32);
                features.extend_from_slice(m.row(d));
            }
        }
        Panel::new(na, prices, nf, features, None)
    }

    /// The panel with an index's price per day as the benchmark (`env.reward = vs-benchmark`).
    pub fn with_benchmark(mut self, prices: Vec<f32>) -> Result<Self, PanelError> {
        if prices.len() != self.n_days {
            return Err(PanelError::Shape { what: "benchmark", got: prices.len(), want: self.n_days });
        }
        if let Some(day) = prices.iter().position(|p| !(p.is_finite() && *p > 0.0)) {
            return Err(PanelError::BadBenchmark { day, value: prices[day] });
        }
        self.benchmark = Some(prices);
        Ok(self)
    }

    /// The price of `asset` on `day`.
    pub fn price(&self, day: usize, asset: usize) -> f32 {
        self.prices[day * self.n_assets + asset]
    }
}

fn misaligned_day(len_differs: bool, bars: &[Bar], first: &[Bar]) -> Option<usize> {
    if len_differs {
        return Some(bars.len().min(first.len()));
    }
    bars.iter().zip(first).position(|(x, y)| x.t != y.t)
}

impl Panel {
    /// A seeded synthetic panel for benchmarks: geometric random walks (2% daily volatility) from prices
    /// in [10, 200], `n_features` columns of the one-day log return, turbulence |N(0, 40)|-like with about
    /// 3% of days above 100.
    pub fn synthetic(n_days: usize, n_assets: usize, n_features: usize, seed: u64) -> Result<Self, PanelError> {
        let mut rng = super::rng::SplitMix64::new(seed);
        let mut unit = || (rng.next_u64() >> 11) as f64 / (1u64 << 53) as f64;
        let mut last: Vec<f64> = (0..n_assets).map(|_| 10.0 + 190.0 * unit()).collect();
        let mut prices = Vec::with_capacity(n_days * n_assets);
        let mut features = Vec::with_capacity(n_days * n_assets * n_features);
        let mut turbulence = Vec::with_capacity(n_days);
        for day in 0..n_days {
            for p in last.iter_mut() {
                // Sum of 4 uniforms: roughly normal, variance 1/3, scaled to 2% daily.
                let z = (unit() + unit() + unit() + unit() - 2.0) * 3f64.sqrt();
                let r = if day == 0 { 0.0 } else { 0.02 * z };
                *p = (*p * r.exp()).max(0.01);
                prices.push(*p as f32);
                features.extend(std::iter::repeat_n(r as f32, n_features));
            }
            let calm = (unit() + unit() + unit() - 1.5).abs() * 60.0;
            turbulence.push(if unit() < 0.03 { 100.0 + 200.0 * unit() } else { calm });
        }
        Panel::new(n_assets, prices, n_features, features, Some(turbulence))
    }
}
