//! Building blocks of the feature set: a fixed-size window of the last N values, an exponential moving
//! average and Wilder's smoothing. Each is updated with one value at a time; every sum is recomputed over
//! its window in index order, so a value depends only on the values in the window (no running-sum drift,
//! no dependence on how long the series has been running).

/// The last `cap` values pushed, oldest first.
#[derive(Debug, Clone)]
pub(super) struct Window {
    buf: Vec<f64>,
    cap: usize,
    head: usize,
    len: usize,
}

impl Window {
    pub(super) fn new(cap: usize) -> Self {
        let cap = cap.max(1);
        Window { buf: vec![0.0; cap], cap, head: 0, len: 0 }
    }

    pub(super) fn push(&mut self, x: f64) {
        self.buf[self.head] = x;
        self.head = (self.head + 1) % self.cap;
        self.len = (self.len + 1).min(self.cap);
    }

    /// The value pushed `back` pushes ago (0 = the newest), if still held.
    pub(super) fn back(&self, back: usize) -> Option<f64> {
        if back >= self.len {
            return None;
        }
        Some(self.buf[(self.head + self.cap - 1 - back) % self.cap])
    }

    /// Mean of the newest `n` values (n ≤ len), summed oldest first.
    pub(super) fn mean_last(&self, n: usize) -> f64 {
        let n = n.min(self.len).max(1);
        let mut s = 0.0;
        for i in (0..n).rev() {
            s += self.back(i).unwrap_or(0.0);
        }
        s / n as f64
    }

    /// Population standard deviation of the newest `n` values around `mean` (two-pass, never negative).
    pub(super) fn std_last(&self, n: usize, mean: f64) -> f64 {
        let n = n.min(self.len).max(1);
        let mut s = 0.0;
        for i in (0..n).rev() {
            let d = self.back(i).unwrap_or(0.0) - mean;
            s += d * d;
        }
        (s / n as f64).sqrt()
    }

    /// Mean absolute deviation of the newest `n` values around `mean`.
    pub(super) fn mad_last(&self, n: usize, mean: f64) -> f64 {
        let n = n.min(self.len).max(1);
        let mut s = 0.0;
        for i in (0..n).rev() {
            s += (self.back(i).unwrap_or(0.0) - mean).abs();
        }
        s / n as f64
    }
}

/// Exponential moving average with `alpha = 2 / (span + 1)`, seeded with the first value.
#[derive(Debug, Clone)]
pub(super) struct Ema {
    alpha: f64,
    value: f64,
    seen: usize,
}

impl Ema {
    pub(super) fn new(span: usize) -> Self {
        Ema { alpha: 2.0 / (span as f64 + 1.0), value: 0.0, seen: 0 }
    }

    pub(super) fn update(&mut self, x: f64) -> f64 {
        self.value = if self.seen == 0 { x } else { self.value + self.alpha * (x - self.value) };
        self.seen += 1;
        self.value
    }
}

/// Wilder's smoothing over `n`: the plain mean of the first `n` values, then `v += (x - v) / n`.
#[derive(Debug, Clone)]
pub(super) struct Wilder {
    n: usize,
    value: f64,
    seen: usize,
}

impl Wilder {
    pub(super) fn new(n: usize) -> Self {
        Wilder { n: n.max(1), value: 0.0, seen: 0 }
    }

    pub(super) fn update(&mut self, x: f64) -> f64 {
        self.seen += 1;
        if self.seen <= self.n {
            // Running mean of the first n values: after n of them it is their plain mean.
            self.value += (x - self.value) / self.seen as f64;
        } else {
            self.value += (x - self.value) / self.n as f64;
        }
        self.value
    }

    /// True once `n` values have been seen.
    pub(super) fn ready(&self) -> bool {
        self.seen >= self.n
    }
}

/// `num / den`, or `fallback` when the denominator is zero or tiny relative to the numerator scale, so that
/// a flat series yields a defined value instead of NaN or infinity.
pub(super) fn ratio(num: f64, den: f64, fallback: f64) -> f64 {
    if den.abs() <= f64::EPSILON * num.abs().max(1e-300) || den == 0.0 {
        return fallback;
    }
    let r = num / den;
    if r.is_finite() { r } else { fallback }
}
