//! `FeatureSpec`: which indicators, with which parameters, in which column order; its checks and its
//! fingerprint for model manifests.

use serde::{Deserialize, Serialize};

/// Bumped whenever any feature's arithmetic or column order changes.
pub const FEATURE_VERSION: u32 = 1;

/// The parameters of the feature set. Every window is in bars.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FeatureSpec {
    /// Log-return horizons: `ln(c_t / c_{t-h})`.
    pub return_horizons: Vec<usize>,
    /// Rolling volatility (population std of one-bar log returns) windows.
    pub vol_windows: Vec<usize>,
    /// `c / SMA_w - 1` windows.
    pub sma_windows: Vec<usize>,
    /// `c / EMA_s - 1` spans.
    pub ema_spans: Vec<usize>,
    /// MACD's fast EMA span.
    pub macd_fast: usize,
    /// MACD's slow EMA span.
    pub macd_slow: usize,
    /// MACD's signal-line EMA span.
    pub macd_signal: usize,
    /// RSI's period (Wilder's smoothing).
    pub rsi_period: usize,
    /// CCI's period.
    pub cci_period: usize,
    /// ADX's period (Wilder's smoothing).
    pub adx_period: usize,
    /// Bollinger bands' window.
    pub bb_window: usize,
    /// Bollinger bands' width in standard deviations.
    pub bb_k: f64,
    /// The window of the volume z-score.
    pub volume_z_window: usize,
}

impl Default for FeatureSpec {
    fn default() -> Self {
        FeatureSpec {
            return_horizons: vec![1, 5, 20],
            vol_windows: vec![20],
            sma_windows: vec![10, 50],
            ema_spans: vec![12, 26],
            macd_fast: 12,
            macd_slow: 26,
            macd_signal: 9,
            rsi_period: 14,
            cci_period: 20,
            adx_period: 14,
            bb_window: 20,
            bb_k: 2.0,
            volume_z_window: 20,
        }
    }
}

#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("features.{key} = {value}: {reason}")]
pub struct SpecError {
    pub key: &'static str,
    pub value: String,
    pub reason: &'static str,
}

/// Longest window any parameter may have.
pub(super) const MAX_WINDOW: usize = 10_000;

impl FeatureSpec {
    /// Checks every parameter; all problems are returned together.
    pub fn check(&self) -> Vec<SpecError> {
        let mut errs = Vec::new();
        let mut win = |key: &'static str, v: usize, min: usize| {
            if v < min || v > MAX_WINDOW {
                let reason = if min == 1 { "must be in [1, 10000]" } else { "must be in [2, 10000]" };
                errs.push(SpecError { key, value: v.to_string(), reason });
            }
        };
        for &h in &self.return_horizons {
            win("return_horizons", h, 1);
        }
        for &w in &self.vol_windows {
            win("vol_windows", w, 2);
        }
        for &w in &self.sma_windows {
            win("sma_windows", w, 1);
        }
        for &s in &self.ema_spans {
            win("ema_spans", s, 1);
        }
        win("macd_fast", self.macd_fast, 1);
        win("macd_slow", self.macd_slow, 2);
        win("macd_signal", self.macd_signal, 1);
        win("rsi_period", self.rsi_period, 1);
        win("cci_period", self.cci_period, 2);
        win("adx_period", self.adx_period, 1);
        win("bb_window", self.bb_window, 2);
        win("volume_z_window", self.volume_z_window, 2);
        for (key, list) in [
            ("return_horizons", &self.return_horizons),
            ("vol_windows", &self.vol_windows),
            ("sma_windows", &self.sma_windows),
            ("ema_spans", &self.ema_spans),
        ] {
            if list.is_empty() {
                errs.push(SpecError { key, value: "[]".into(), reason: "list at least one window" });
            }
        }
        if self.macd_fast >= self.macd_slow {
            errs.push(SpecError {
                key: "macd_fast",
                value: self.macd_fast.to_string(),
                reason: "must be below macd_slow",
            });
        }
        if !(self.bb_k.is_finite() && self.bb_k > 0.0 && self.bb_k <= 10.0) {
            errs.push(SpecError { key: "bb_k", value: self.bb_k.to_string(), reason: "must be in (0, 10]" });
        }
        errs
    }

    /// Column names, in output order.
    pub fn names(&self) -> Vec<String> {
        let mut n = Vec::new();
        n.extend(self.return_horizons.iter().map(|h| format!("logret_{h}")));
        n.extend(self.vol_windows.iter().map(|w| format!("vol_{w}")));
        n.extend(self.sma_windows.iter().map(|w| format!("sma_ratio_{w}")));
        n.extend(self.ema_spans.iter().map(|s| format!("ema_ratio_{s}")));
        n.push(format!("macd_{}_{}", self.macd_fast, self.macd_slow));
        n.push(format!("macd_signal_{}", self.macd_signal));
        n.push("macd_hist".to_string());
        n.push(format!("rsi_{}", self.rsi_period));
        n.push(format!("cci_{}", self.cci_period));
        n.push(format!("dx_{}", self.adx_period));
        n.push(format!("adx_{}", self.adx_period));
        n.push(format!("bb_pos_{}", self.bb_window));
        n.push(format!("volume_z_{}", self.volume_z_window));
        n
    }

    /// The number of feature columns (the length of `names`).
    pub fn n_cols(&self) -> usize {
        self.return_horizons.len() + self.vol_windows.len() + self.sma_windows.len() + self.ema_spans.len() + 9
    }

    /// Bars needed before the first ready row (that row is the `warmup()`-th bar, index `warmup() - 1`).
    pub fn warmup(&self) -> usize {
        let mut w = 1;
        for &h in &self.return_horizons {
            w = w.max(h + 1);
        }
        for &v in &self.vol_windows {
            w = w.max(v + 1);
        }
        for &s in self.sma_windows.iter().chain(&self.ema_spans) {
            w = w.max(s);
        }
        w = w.max(self.macd_slow + self.macd_signal - 1);
        w = w.max(self.rsi_period + 1);
        w = w.max(self.cci_period);
        // DI needs n true ranges (n + 1 bars), ADX then n DX values.
        w = w.max(2 * self.adx_period);
        w = w.max(self.bb_window);
        w.max(self.volume_z_window)
    }

    /// Identifies the arithmetic: goes into model manifests; a model refuses a different fingerprint.
    pub fn fingerprint(&self) -> String {
        let json = serde_json::to_string(self).unwrap_or_default();
        format!("features-v{FEATURE_VERSION}:{json}")
    }

    /// The longest history any indicator looks at, in bars.
    pub(crate) fn history(&self) -> usize {
        self.warmup() + 1
    }
}
