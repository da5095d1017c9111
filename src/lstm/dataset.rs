//! The classifier's dataset, resident on the training device. Feature panels (`fast` `[rows, nf]`, `slow`
//! `[rows, ns]`, `context` `[rows, nc]`) go to the device once; a sample is only a pair of row indices
//! (the last fast row and the last slow row it may see) and a label. A batch gathers its windows by
//! index, so windows are never materialised: memory is O(rows), not O(samples × window).

use tch::{Device, Kind, Tensor};

#[derive(Debug, thiserror::Error)]
pub(crate) enum DatasetError {
    #[error("dataset: {0}")]
    Shape(String),
    #[error("dataset: {0} has a NaN or infinite value; features must be finite before training")]
    NotFinite(&'static str),
}

pub(crate) struct WindowDataset {
    pub fast: Tensor,
    pub slow: Tensor,
    pub context: Tensor,
    pub fast_len: i64,
    pub slow_len: i64,
    /// `[samples]` index of the last fast row of each sample's window (inclusive).
    pub fast_end: Tensor,
    /// `[samples]` index of the last slow row (the newest slow bar closed at or before the sample's time).
    pub slow_end: Tensor,
    /// `[samples]` row of the context panel.
    pub context_row: Tensor,
    /// `[samples]` class 0 (down), 1 (flat), 2 (up).
    pub labels: Tensor,
    fast_offsets: Tensor,
    slow_offsets: Tensor,
}

/// A batch of gathered windows.
pub(crate) struct Batch {
    pub fast: Tensor,
    pub slow: Tensor,
    pub context: Tensor,
    pub labels: Tensor,
}

/// The host-side description of a dataset before it moves to the device.
pub(crate) struct DatasetSpec {
    pub fast: Vec<f32>,
    pub fast_dim: usize,
    pub slow: Vec<f32>,
    pub slow_dim: usize,
    pub context: Vec<f32>,
    pub context_dim: usize,
    pub fast_len: usize,
    pub slow_len: usize,
    pub fast_end: Vec<i64>,
    pub slow_end: Vec<i64>,
    pub context_row: Vec<i64>,
    pub labels: Vec<i64>,
}

impl WindowDataset {
    /// Checks every index against the panels and moves everything to `device` once.
    pub(crate) fn new(s: DatasetSpec, device: Device) -> Result<Self, DatasetError> {
        let rows = |v: &[f32], d: usize, what: &str| -> Result<i64, DatasetError> {
            if d == 0 || !v.len().is_multiple_of(d) {
                return Err(DatasetError::Shape(format!("{what} has {} values, not a multiple of {d}", v.len())));
            }
            Ok((v.len() / d) as i64)
        };
        let (nf, ns, nc) = (
            rows(&s.fast, s.fast_dim, "fast")?,
            rows(&s.slow, s.slow_dim, "slow")?,
            rows(&s.context, s.context_dim, "context")?,
        );
        let n = s.labels.len();
        if s.fast_end.len() != n || s.slow_end.len() != n || s.context_row.len() != n {
            return Err(DatasetError::Shape("index vectors and labels differ in length".into()));
        }
        let bad = |ends: &[i64], len: usize, rows: i64| ends.iter().position(|&e| e + 1 < len as i64 || e >= rows);
        if let Some(i) = bad(&s.fast_end, s.fast_len, nf) {
            return Err(DatasetError::Shape(format!(
                "sample {i}: fast window ending at row {} does not fit",
                s.fast_end[i]
            )));
        }
        if let Some(i) = bad(&s.slow_end, s.slow_len, ns) {
            return Err(DatasetError::Shape(format!(
                "sample {i}: slow window ending at row {} does not fit",
                s.slow_end[i]
            )));
        }
        if let Some(i) = s.context_row.iter().position(|&r| r < 0 || r >= nc) {
            return Err(DatasetError::Shape(format!("sample {i}: context row {} out of range", s.context_row[i])));
        }
        if let Some(i) = s.labels.iter().position(|l| !(0..3).contains(l)) {
            return Err(DatasetError::Shape(format!("sample {i}: label {} is not 0, 1 or 2", s.labels[i])));
        }
        for (v, what) in [(&s.fast, "fast"), (&s.slow, "slow"), (&s.context, "context")] {
            if v.iter().any(|x| !x.is_finite()) {
                return Err(DatasetError::NotFinite(what));
            }
        }
        let panel = |v: &[f32], d: usize| Tensor::from_slice(v).view([-1, d as i64]).to_device(device);
        let idx = |v: &[i64]| Tensor::from_slice(v).to_device(device);
        Ok(WindowDataset {
            fast: panel(&s.fast, s.fast_dim),
            slow: panel(&s.slow, s.slow_dim),
            context: panel(&s.context, s.context_dim),
            fast_len: s.fast_len as i64,
            slow_len: s.slow_len as i64,
            fast_end: idx(&s.fast_end),
            slow_end: idx(&s.slow_end),
            context_row: idx(&s.context_row),
            labels: idx(&s.labels),
            fast_offsets: Tensor::arange_start(1 - s.fast_len as i64, 1, (Kind::Int64, device)),
            slow_offsets: Tensor::arange_start(1 - s.slow_len as i64, 1, (Kind::Int64, device)),
        })
    }

    #[cfg(test)]
    pub(crate) fn len(&self) -> i64 {
        self.labels.size()[0]
    }

    /// Another handle on the same device tensors, for a training thread.
    pub(super) fn shallow_clone(&self) -> WindowDataset {
        WindowDataset {
            fast: self.fast.shallow_clone(),
            slow: self.slow.shallow_clone(),
            context: self.context.shallow_clone(),
            fast_len: self.fast_len,
            slow_len: self.slow_len,
            fast_end: self.fast_end.shallow_clone(),
            slow_end: self.slow_end.shallow_clone(),
            context_row: self.context_row.shallow_clone(),
            labels: self.labels.shallow_clone(),
            fast_offsets: self.fast_offsets.shallow_clone(),
            slow_offsets: self.slow_offsets.shallow_clone(),
        }
    }

    pub(crate) fn device(&self) -> Device {
        self.labels.device()
    }

    /// Gathers the windows of samples `idx` (`[B]` int64 on the device).
    pub(crate) fn batch(&self, idx: &Tensor) -> Batch {
        let b = idx.size()[0];
        let gather = |panel: &Tensor, ends: &Tensor, offsets: &Tensor, len: i64| {
            let rows = ends.index_select(0, idx).unsqueeze(1) + offsets.unsqueeze(0);
            panel.index_select(0, &rows.reshape([-1])).view([b, len, -1])
        };
        Batch {
            fast: gather(&self.fast, &self.fast_end, &self.fast_offsets, self.fast_len),
            slow: gather(&self.slow, &self.slow_end, &self.slow_offsets, self.slow_len),
            context: self.context.index_select(0, &self.context_row.index_select(0, idx)),
            labels: self.labels.index_select(0, idx),
        }
    }
}

/// Chronological split of samples `0..n` (already in time order) into train / validation / test by
/// fractions, leaving `gap` samples out between parts so that no label horizon overlaps the next part.
#[cfg(test)]
pub(crate) fn chronological_split(n: usize, train: f64, valid: f64, gap: usize) -> (Vec<i64>, Vec<i64>, Vec<i64>) {
    let tr_end = (n as f64 * train) as usize;
    let va_end = (n as f64 * (train + valid)) as usize;
    let range = |a: usize, b: usize| (a.min(n)..b.min(n)).map(|i| i as i64).collect::<Vec<_>>();
    (range(0, tr_end), range(tr_end + gap, va_end), range(va_end + gap, n))
}

/// A synthetic dataset with a planted, learnable pattern (for tests and `tradebot bench lstm`): Gaussian
/// fast features; every 4 fast rows form a slow row (their mean), so sample `r` sees the slow bars that
/// closed at or before it; the label is down / flat / up by whether the sum of fast feature 0 over the
/// last 5 rows plus half of context feature 0 is below -1, between, or above 1.
pub(crate) fn synthetic(
    samples: usize,
    fast_len: usize,
    fast_dim: usize,
    slow_len: usize,
    context_dim: usize,
    seed: u64,
) -> DatasetSpec {
    let mut rng = crate::env::rng::SplitMix64::new(seed);
    let mut normal = || {
        let (u1, u2) = (rng.next_f64().max(1e-12), rng.next_f64());
        ((-2.0 * u1.ln()).sqrt() * (2.0 * std::f64::consts::PI * u2).cos()) as f32
    };
    let first = (fast_len - 1).max(4 * slow_len + 3).max(4);
    let rows = first + samples;
    let fast: Vec<f32> = (0..rows * fast_dim).map(|_| normal()).collect();
    let context: Vec<f32> = (0..rows * context_dim).map(|_| normal()).collect();
    let slow: Vec<f32> = (0..rows / 4)
        .flat_map(|s| {
            let fast = &fast;
            (0..fast_dim).map(move |f| (0..4).map(|k| fast[(4 * s + k) * fast_dim + f]).sum::<f32>() / 4.0)
        })
        .collect();
    let (mut fast_end, mut slow_end, mut context_row, mut labels) = (vec![], vec![], vec![], vec![]);
    for r in first..rows {
        let s: f32 = (0..5).map(|k| fast[(r - k) * fast_dim]).sum::<f32>() + 0.5 * context[r * context_dim];
        fast_end.push(r as i64);
        slow_end.push(((r + 1) / 4) as i64 - 1);
        context_row.push(r as i64);
        labels.push(if s < -1.0 {
            0
        } else if s > 1.0 {
            2
        } else {
            1
        });
    }
    DatasetSpec {
        fast,
        fast_dim,
        slow,
        slow_dim: fast_dim,
        context,
        context_dim,
        fast_len,
        slow_len,
        fast_end,
        slow_end,
        context_row,
        labels,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec() -> DatasetSpec {
        // fast rows hold their own row number; slow rows 100 + row number.
        DatasetSpec {
            fast: (0..20).map(|r| r as f32).collect(),
            fast_dim: 1,
            slow: (0..5).flat_map(|r| [100.0 + r as f32, -1.0]).collect(),
            slow_dim: 2,
            context: (0..20).map(|r| r as f32 * 10.0).collect(),
            context_dim: 1,
            fast_len: 4,
            slow_len: 2,
            fast_end: vec![3, 10, 19],
            slow_end: vec![1, 2, 4],
            context_row: vec![3, 10, 19],
            labels: vec![0, 1, 2],
        }
    }

    #[test]
    fn gathers_exact_windows_by_index() {
        let d = WindowDataset::new(spec(), Device::Cpu).unwrap();
        let b = d.batch(&Tensor::from_slice(&[1i64, 2]));
        assert_eq!(b.fast.size(), [2, 4, 1]);
        assert_eq!(
            Vec::<f32>::try_from(b.fast.reshape([-1])).unwrap(),
            vec![7.0, 8.0, 9.0, 10.0, 16.0, 17.0, 18.0, 19.0]
        );
        assert_eq!(
            Vec::<f32>::try_from(b.slow.reshape([-1])).unwrap(),
            vec![101.0, -1.0, 102.0, -1.0, 103.0, -1.0, 104.0, -1.0]
        );
        assert_eq!(Vec::<f32>::try_from(b.context.reshape([-1])).unwrap(), vec![100.0, 190.0]);
        assert_eq!(Vec::<i64>::try_from(b.labels).unwrap(), vec![1, 2]);
    }

    #[test]
    fn refuses_windows_that_do_not_fit_and_nan() {
        let mut s = spec();
        s.fast_end[0] = 2; // needs rows -1..=2
        assert!(WindowDataset::new(s, Device::Cpu).is_err());
        let mut s = spec();
        s.slow_end[2] = 5;
        assert!(WindowDataset::new(s, Device::Cpu).is_err());
        let mut s = spec();
        s.fast[5] = f32::NAN;
        assert!(matches!(WindowDataset::new(s, Device::Cpu), Err(DatasetError::NotFinite("fast"))));
        let mut s = spec();
        s.labels[0] = 3;
        assert!(WindowDataset::new(s, Device::Cpu).is_err());
    }

    #[test]
    fn split_is_chronological_with_gaps() {
        let (tr, va, te) = chronological_split(100, 0.6, 0.2, 5);
        assert_eq!((tr.len(), va.len(), te.len()), (60, 15, 15));
        assert_eq!((*tr.last().unwrap(), va[0], *va.last().unwrap(), te[0]), (59, 65, 79, 85));
    }
}
