//! `FeatureState`: the incremental computation of one symbol's features, one bar in, one row out.

use super::indicators::{Ema, Wilder, Window, ratio};
use super::spec::FeatureSpec;

/// Per-symbol state. Feed bars in time order; each call writes one row and says whether it is ready.
#[derive(Debug, Clone)]
pub(crate) struct FeatureState {
    spec: FeatureSpec,
    seen: usize,
    closes: Window,
    logrets: Window,
    typical: Window,
    volumes: Window,
    emas: Vec<Ema>,
    macd_fast: Ema,
    macd_slow: Ema,
    macd_signal: Ema,
    rsi_gain: Wilder,
    rsi_loss: Wilder,
    tr: Wilder,
    plus_dm: Wilder,
    minus_dm: Wilder,
    adx: Wilder,
    prev: Option<(f64, f64, f64)>,
}

impl FeatureState {
    pub(crate) fn new(spec: FeatureSpec) -> Self {
        let hist = spec.history();
        let vol_cap = spec.vol_windows.iter().copied().max().unwrap_or(1);
        FeatureState {
            seen: 0,
            closes: Window::new(hist),
            logrets: Window::new(vol_cap),
            typical: Window::new(spec.cci_period),
            volumes: Window::new(spec.volume_z_window),
            emas: spec.ema_spans.iter().map(|&s| Ema::new(s)).collect(),
            macd_fast: Ema::new(spec.macd_fast),
            macd_slow: Ema::new(spec.macd_slow),
            macd_signal: Ema::new(spec.macd_signal),
            rsi_gain: Wilder::new(spec.rsi_period),
            rsi_loss: Wilder::new(spec.rsi_period),
            tr: Wilder::new(spec.adx_period),
            plus_dm: Wilder::new(spec.adx_period),
            minus_dm: Wilder::new(spec.adx_period),
            adx: Wilder::new(spec.adx_period),
            prev: None,
            spec,
        }
    }

    pub(crate) fn spec(&self) -> &FeatureSpec {
        &self.spec
    }

    /// Bars seen so far.
    pub(crate) fn seen(&self) -> usize {
        self.seen
    }

    /// Takes the next bar (prices > 0, as `Bar::new` guarantees) and writes its row into `row`
    /// (`spec.n_cols()` long). Returns whether the row is ready; a row that is not holds zeros.
    pub(crate) fn update_into(&mut self, _o: f64, h: f64, l: f64, c: f64, v: f64, row: &mut [f32]) -> bool {
        self.seen += 1;
        if let Some(&prev_c) = self.closes.back(0).as_ref() {
            self.logrets.push((c / prev_c).ln());
        }
        self.closes.push(c);
        self.typical.push((h + l + c) / 3.0);
        self.volumes.push(v);
        let mut out = Vec::with_capacity(row.len());
        self.returns(c, &mut out);
        self.averages(c, &mut out);
        self.macd(c, &mut out);
        out.push(self.rsi(c));
        out.push(self.cci());
        let (dx, adx) = self.dmi(h, l, c);
        out.push(dx);
        out.push(adx);
        out.push(self.bollinger(c));
        out.push(self.volume_z(v));
        let ready = self.seen >= self.spec.warmup();
        for (dst, src) in row.iter_mut().zip(out) {
            *dst = if ready && src.is_finite() { src as f32 } else { 0.0 };
        }
        ready
    }

    fn returns(&self, c: f64, out: &mut Vec<f64>) {
        for &h in &self.spec.return_horizons {
            out.push(self.closes.back(h).map_or(0.0, |p| (c / p).ln()));
        }
        for &w in &self.spec.vol_windows {
            let mean = self.logrets.mean_last(w);
            out.push(self.logrets.std_last(w, mean));
        }
    }

    fn averages(&mut self, c: f64, out: &mut Vec<f64>) {
        for &w in &self.spec.sma_windows {
            out.push(ratio(c, self.closes.mean_last(w), 1.0) - 1.0);
        }
        for ema in &mut self.emas {
            out.push(ratio(c, ema.update(c), 1.0) - 1.0);
        }
    }

    fn macd(&mut self, c: f64, out: &mut Vec<f64>) {
        let line = ratio(self.macd_fast.update(c) - self.macd_slow.update(c), c, 0.0);
        let signal = self.macd_signal.update(line);
        out.extend([line, signal, line - signal]);
    }

    /// RSI over Wilder-smoothed gains and losses, in [0, 1]; 0.5 when the price has not moved.
    fn rsi(&mut self, c: f64) -> f64 {
        let Some(prev) = self.closes.back(1) else { return 0.5 };
        let d = c - prev;
        let gain = self.rsi_gain.update(d.max(0.0));
        let loss = self.rsi_loss.update((-d).max(0.0));
        if gain + loss == 0.0 { 0.5 } else { gain / (gain + loss) }
    }

    /// CCI / 100: typical price against its SMA, in units of 0.015 × mean absolute deviation.
    fn cci(&self) -> f64 {
        let n = self.spec.cci_period;
        let tp = self.typical.back(0).unwrap_or(0.0);
        let mean = self.typical.mean_last(n);
        let mad = self.typical.mad_last(n, mean);
        ratio(tp - mean, 0.015 * mad, 0.0) / 100.0
    }

    /// DX / 100 and ADX / 100 from Wilder-smoothed true range and directional movement.
    fn dmi(&mut self, h: f64, l: f64, c: f64) -> (f64, f64) {
        let Some((ph, pl, pc)) = self.prev.replace((h, l, c)) else { return (0.0, 0.0) };
        let up = h - ph;
        let down = pl - l;
        let pdm = if up > down && up > 0.0 { up } else { 0.0 };
        let mdm = if down > up && down > 0.0 { down } else { 0.0 };
        let tr = (h - l).max((h - pc).abs()).max((l - pc).abs());
        let tr = self.tr.update(tr);
        let pdi = ratio(self.plus_dm.update(pdm), tr, 0.0);
        let mdi = ratio(self.minus_dm.update(mdm), tr, 0.0);
        let dx = ratio((pdi - mdi).abs(), pdi + mdi, 0.0);
        if !self.tr.ready() {
            return (dx, 0.0);
        }
        (dx, self.adx.update(dx))
    }

    /// Position of the close in the Bollinger band: 0 at the lower band, 1 at the upper, 0.5 if flat.
    fn bollinger(&self, c: f64) -> f64 {
        let w = self.spec.bb_window;
        let mean = self.closes.mean_last(w);
        let sd = self.closes.std_last(w, mean);
        let lower = mean - self.spec.bb_k * sd;
        ratio(c - lower, 2.0 * self.spec.bb_k * sd, 0.5)
    }

    fn volume_z(&self, v: f64) -> f64 {
        let w = self.spec.volume_z_window;
        let mean = self.volumes.mean_last(w);
        let sd = self.volumes.std_last(w, mean);
        ratio(v - mean, sd, 0.0)
    }
}
