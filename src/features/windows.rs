//! The LSTM classifier's inputs from bars, in one place for training (batch, per symbol) and the live
//! engine (streaming, one bar in): `x_fast` (the last `fast_len` feature rows of the bars themselves),
//! `x_slow` (the last `slow_len` feature rows of slow bars, each `slow_factor` consecutive bars aggregated
//! OHLCV and closing with its last bar) and `x_context` ([`context_names`]). At bar t only slow bars closed
//! at or before t are used. Slow bars are anchored at the first bar fed: the live engine must warm up from
//! the same first bar as training did (or any bar a multiple of `slow_factor` bars later) to see the same
//! slow bars. Both paths run the same [`WindowState`], so they are bit-identical by construction (and a
//! test checks it). No tch here: this module is in the inference-only build.

use super::{FeatureSpec, FeatureState};
use crate::domain::Bar;
use serde::{Deserialize, Serialize};
use std::collections::VecDeque;

/// Window lengths, the slow timeframe and the labels (the `[lstm]` keys of the same names).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct WindowSpec {
    pub fast_len: usize,
    pub slow_len: usize,
    pub slow_factor: usize,
    /// Bars ahead for the label's return; also the gap between train, validation and test.
    pub horizon: usize,
    /// Label up when the forward log return exceeds this.
    pub up_threshold: f64,
    /// Label down when the forward log return is below this (negative).
    pub down_threshold: f64,
}

/// The context vector's names: the volatility and RSI columns of the latest fast row and of the latest
/// closed slow row, and `slow_phase` = bars since the last slow bar closed / `slow_factor`.
pub fn context_names(spec: &FeatureSpec) -> Vec<String> {
    let names = spec.names();
    let (v, r) = context_columns(spec);
    vec![
        format!("fast.{}", names[v]),
        format!("slow.{}", names[v]),
        format!("fast.{}", names[r]),
        format!("slow.{}", names[r]),
        "slow_phase".to_string(),
    ]
}

/// Column indices of the first volatility window and of the RSI (see `FeatureSpec::names`).
fn context_columns(spec: &FeatureSpec) -> (usize, usize) {
    let vol = spec.return_horizons.len();
    let rsi = vol + spec.vol_windows.len() + spec.sma_windows.len() + spec.ema_spans.len() + 3;
    (vol, rsi)
}

#[cfg(feature = "train")]
/// Class of a forward log return: 0 down, 1 flat, 2 up.
pub(crate) fn label(now_close: f64, later_close: f64, w: &WindowSpec) -> i64 {
    let r = (later_close / now_close).ln();
    if r < w.down_threshold {
        0
    } else if r > w.up_threshold {
        2
    } else {
        1
    }
}

/// What one bar did to the state.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct StepInfo {
    /// A slow bar closed with this bar; `slow_row()` is its row.
    pub slow_closed: bool,
    /// Enough ready fast and slow rows for a full window ending at this bar.
    pub window_ready: bool,
}

/// The per-symbol state shared by both paths: fast and slow features, the slow bar being built.
#[derive(Debug, Clone)]
pub(crate) struct WindowState {
    w: WindowSpec,
    fast: FeatureState,
    slow: FeatureState,
    /// (o, h, l, c, v) of the slow bar being aggregated, and how many bars it holds.
    agg: (f64, f64, f64, f64, f64),
    in_agg: usize,
    slow_seen: usize,
    warmup: usize,
    fast_row: Vec<f32>,
    slow_row: Vec<f32>,
    context: Vec<f32>,
}

impl WindowState {
    pub(crate) fn new(spec: FeatureSpec, w: WindowSpec) -> Self {
        let n = spec.n_cols();
        WindowState {
            w,
            warmup: spec.warmup(),
            fast: FeatureState::new(spec.clone()),
            slow: FeatureState::new(spec),
            agg: (0.0, 0.0, 0.0, 0.0, 0.0),
            in_agg: 0,
            slow_seen: 0,
            fast_row: vec![0.0; n],
            slow_row: vec![0.0; n],
            context: vec![0.0; 5],
        }
    }

    /// Takes the next bar of the symbol (time order).
    pub(crate) fn step(&mut self, b: &Bar) -> StepInfo {
        self.fast.update_into(b.o, b.h, b.l, b.c, b.v, &mut self.fast_row);
        self.agg = if self.in_agg == 0 {
            (b.o, b.h, b.l, b.c, b.v)
        } else {
            let (o, h, l, _, v) = self.agg;
            (o, h.max(b.h), l.min(b.l), b.c, v + b.v)
        };
        self.in_agg += 1;
        let slow_closed = self.in_agg == self.w.slow_factor;
        if slow_closed {
            let (o, h, l, c, v) = self.agg;
            self.slow.update_into(o, h, l, c, v, &mut self.slow_row);
            self.slow_seen += 1;
            self.in_agg = 0;
        }
        let (v, r) = context_columns(self.fast.spec());
        self.context = vec![
            self.fast_row[v],
            self.slow_row[v],
            self.fast_row[r],
            self.slow_row[r],
            self.in_agg as f32 / self.w.slow_factor as f32,
        ];
        let ready = |seen: usize, len: usize| seen + 1 >= self.warmup + len;
        StepInfo {
            slow_closed,
            window_ready: ready(self.fast.seen(), self.w.fast_len) && ready(self.slow_seen, self.w.slow_len),
        }
    }

    pub(crate) fn fast_row(&self) -> &[f32] {
        &self.fast_row
    }

    /// The row of the newest closed slow bar (zeros before the first).
    pub(crate) fn slow_row(&self) -> &[f32] {
        &self.slow_row
    }

    pub(crate) fn context(&self) -> &[f32] {
        &self.context
    }
}

#[cfg(feature = "train")]
/// One symbol's panels and samples, as the trainer's device-resident dataset wants them: windows are
/// index ranges into the panels, never copied.
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct SymbolWindows {
    /// `[bars, nf]`: one row per bar (rows before the warm-up are zeros and never inside a window).
    pub fast: Vec<f32>,
    /// `[slow bars, ns]`: one row per closed slow bar.
    pub slow: Vec<f32>,
    /// `[bars, nc]`.
    pub context: Vec<f32>,
    /// Per sample: the bar index (= last fast row = context row), the last slow row, the label.
    pub bar: Vec<usize>,
    pub slow_end: Vec<usize>,
    /// `None` for the last `horizon` bars, whose forward return is not known yet.
    pub label: Vec<Option<i64>>,
}

#[cfg(feature = "train")]
/// The batch path: every bar whose full window is ready becomes a sample.
pub(crate) fn build(spec: &FeatureSpec, w: &WindowSpec, bars: &[Bar]) -> SymbolWindows {
    let mut st = WindowState::new(spec.clone(), *w);
    let mut out = SymbolWindows::default();
    let mut slow_rows = 0usize;
    for (i, b) in bars.iter().enumerate() {
        let info = st.step(b);
        out.fast.extend_from_slice(st.fast_row());
        out.context.extend_from_slice(st.context());
        if info.slow_closed {
            out.slow.extend_from_slice(st.slow_row());
            slow_rows += 1;
        }
        if info.window_ready {
            out.bar.push(i);
            out.slow_end.push(slow_rows - 1);
            out.label.push(bars.get(i + w.horizon).map(|later| label(b.c, later.c, w)));
        }
    }
    out
}

/// The index of the first bar whose window is ready (`WindowState::step`'s `window_ready`): how many bars
/// before a window a replay or a backtest must feed the LSTM so that it can decide from the window's
/// first bar. Found by stepping the state itself, so it follows the readiness rule exactly.
pub(crate) fn first_ready_bar(spec: &FeatureSpec, w: &WindowSpec) -> usize {
    let mut st = WindowState::new(spec.clone(), *w);
    let Ok(symbol) = crate::domain::Symbol::new("X") else { return 0 };
    let bound = (spec.warmup() + w.fast_len + w.slow_len + 2) * w.slow_factor.max(1) + w.fast_len;
    for i in 0..bound {
        let c = 100.0 + (i % 7) as f64;
        let bar = Bar {
            symbol: symbol.clone(),
            timeframe: crate::domain::Timeframe::DAY1,
            t: chrono::DateTime::<chrono::Utc>::UNIX_EPOCH,
            o: c,
            h: c + 1.0,
            l: c - 1.0,
            c,
            v: 1000.0,
        };
        if st.step(&bar).window_ready {
            return i;
        }
    }
    bound
}

/// Model inputs for one bar, row-major: `fast` `[fast_len, nf]`, `slow` `[slow_len, ns]`, `context` `[nc]`.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct WindowInputs {
    pub fast: Vec<f32>,
    pub slow: Vec<f32>,
    pub context: Vec<f32>,
}

/// The streaming path for the live engine: one bar in, the model's inputs out once the window is ready.
#[derive(Debug, Clone)]
pub(crate) struct WindowStream {
    state: WindowState,
    w: WindowSpec,
    fast: VecDeque<Vec<f32>>,
    slow: VecDeque<Vec<f32>>,
}

impl WindowStream {
    pub(crate) fn new(spec: FeatureSpec, w: WindowSpec) -> Self {
        WindowStream { state: WindowState::new(spec, w), w, fast: VecDeque::new(), slow: VecDeque::new() }
    }

    pub(crate) fn push(&mut self, bar: &Bar) -> Option<WindowInputs> {
        let info = self.state.step(bar);
        push_capped(&mut self.fast, self.state.fast_row(), self.w.fast_len);
        if info.slow_closed {
            push_capped(&mut self.slow, self.state.slow_row(), self.w.slow_len);
        }
        info.window_ready.then(|| WindowInputs {
            fast: self.fast.iter().flatten().copied().collect(),
            slow: self.slow.iter().flatten().copied().collect(),
            context: self.state.context().to_vec(),
        })
    }
}

fn push_capped(q: &mut VecDeque<Vec<f32>>, row: &[f32], cap: usize) {
    if q.len() == cap {
        q.pop_front();
    }
    q.push_back(row.to_vec());
}

#[cfg(feature = "train")]
/// Chronological split by time: the distinct sample times are cut at `train` and `train + valid`
/// fractions, and the first `gap` times after each cut are left out, so that a label looking `gap` bars
/// ahead never reaches into the next part. Returns sample indices of train, validation and test.
pub(crate) fn time_split(times: &[i64], train: f64, valid: f64, gap: usize) -> (Vec<i64>, Vec<i64>, Vec<i64>) {
    let mut distinct = times.to_vec();
    distinct.sort_unstable();
    distinct.dedup();
    let n = distinct.len();
    let tr_end = (n as f64 * train) as usize;
    let va_end = (n as f64 * (train + valid)) as usize;
    let rank = |t: i64| distinct.partition_point(|&d| d < t);
    let (mut tr, mut va, mut te) = (vec![], vec![], vec![]);
    for (i, &t) in times.iter().enumerate() {
        let k = rank(t);
        if k < tr_end {
            tr.push(i as i64);
        } else if k >= tr_end + gap && k < va_end {
            va.push(i as i64);
        } else if k >= va_end + gap {
            te.push(i as i64);
        }
    }
    (tr, va, te)
}

#[cfg(test)]
mod tests;
