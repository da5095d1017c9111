//! Dataset snapshots: the bars of a training window written to one safetensors file, so that a training
//! child process reads its data without opening the store (which the daemon holds) and trains on exactly
//! the bars the daemon saw when the run started.
//!
//! Layout: for the i-th symbol, `t.{i}` (I64 `[n]`, bar close times in Unix microseconds) and
//! `ohlcv.{i}` (F64 `[n, 5]`); metadata `format` = `tradebot-bars-1`, `symbols` (comma-separated, in index
//! order) and `timeframe`. Every bar is re-checked on load (`Bar::new`), so a corrupt file is an error
//! that names the symbol and row, never a panic or a silently bad dataset.

use crate::domain::{Bar, Symbol, Timeframe};
#[cfg(feature = "train")]
use chrono::DateTime;
#[cfg(feature = "train")]
use safetensors::tensor::SafeTensors;
use safetensors::tensor::{Dtype, TensorView};
use std::collections::HashMap;
use std::path::Path;

const FORMAT: &str = "tradebot-bars-1";

#[derive(Debug, thiserror::Error)]
pub(crate) enum SnapshotError {
    #[error("snapshot {path}: {source}")]
    Io { path: String, source: std::io::Error },
    #[error(
        "snapshot {path}: not a tradebot bar snapshot ({reason}); write it with the daemon's retrain or `tradebot data snapshot`"
    )]
    #[cfg(feature = "train")]
    Format { path: String, reason: String },
    #[error("snapshot {path}: {symbol} row {row}: {reason}")]
    #[cfg(feature = "train")]
    BadBar { path: String, symbol: String, row: usize, reason: String },
    #[error("snapshot: {0} has no bars in the window; nothing to train on")]
    Empty(String),
}

/// Bars of several symbols over one window.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Snapshot {
    pub timeframe: Timeframe,
    /// One series per symbol, each in time order.
    pub series: Vec<(Symbol, Vec<Bar>)>,
}

impl Snapshot {
    pub(crate) fn write(&self, path: &Path) -> Result<(), SnapshotError> {
        let io = |source| SnapshotError::Io { path: path.display().to_string(), source };
        let mut buffers: Vec<(String, Dtype, Vec<usize>, Vec<u8>)> = Vec::new();
        for (i, (sym, bars)) in self.series.iter().enumerate() {
            if bars.is_empty() {
                return Err(SnapshotError::Empty(sym.to_string()));
            }
            let t: Vec<u8> = bars.iter().flat_map(|b| b.t.timestamp_micros().to_le_bytes()).collect();
            let x: Vec<u8> =
                bars.iter().flat_map(|b| [b.o, b.h, b.l, b.c, b.v]).flat_map(|v| v.to_le_bytes()).collect();
            buffers.push((format!("t.{i}"), Dtype::I64, vec![bars.len()], t));
            buffers.push((format!("ohlcv.{i}"), Dtype::F64, vec![bars.len(), 5], x));
        }
        let views = buffers
            .iter()
            .map(|(name, dt, shape, data)| TensorView::new(*dt, shape.clone(), data).map(|v| (name.clone(), v)))
            .collect::<Result<Vec<_>, _>>()
            .map_err(|e| io(std::io::Error::other(e)))?;
        let symbols: Vec<String> = self.series.iter().map(|(s, _)| s.to_string()).collect();
        let meta = HashMap::from([
            ("format".to_string(), FORMAT.to_string()),
            ("symbols".to_string(), symbols.join(",")),
            ("timeframe".to_string(), self.timeframe.to_string()),
        ]);
        let bytes = safetensors::serialize(views, Some(meta)).map_err(|e| io(std::io::Error::other(e)))?;
        // Write then rename: a crash leaves the old file or the new one, never half of one.
        let tmp = path.with_extension("safetensors.tmp");
        std::fs::write(&tmp, bytes).map_err(io)?;
        std::fs::rename(&tmp, path).map_err(io)
    }

    #[cfg(feature = "train")]
    pub(crate) fn read(path: &Path) -> Result<Snapshot, SnapshotError> {
        let p = path.display().to_string();
        let format = |reason: String| SnapshotError::Format { path: p.clone(), reason };
        let bytes = std::fs::read(path).map_err(|source| SnapshotError::Io { path: p.clone(), source })?;
        let (_, header) = SafeTensors::read_metadata(&bytes).map_err(|e| format(e.to_string()))?;
        let st = SafeTensors::deserialize(&bytes).map_err(|e| format(e.to_string()))?;
        let meta = header.metadata().clone().unwrap_or_default();
        if meta.get("format").map(String::as_str) != Some(FORMAT) {
            return Err(format(format!("metadata format is {:?}, expected {FORMAT:?}", meta.get("format"))));
        }
        let tf_text = meta.get("timeframe").ok_or_else(|| format("no timeframe in metadata".into()))?;
        let timeframe = Timeframe::parse(tf_text).map_err(|e| format(format!("timeframe {tf_text:?}: {e}")))?;
        let names = meta.get("symbols").ok_or_else(|| format("no symbols in metadata".into()))?;
        let mut series = Vec::new();
        for (i, name) in names.split(',').filter(|s| !s.is_empty()).enumerate() {
            let sym = Symbol::new(name).map_err(|e| format(format!("symbol {name:?}: {e}")))?;
            let t = st.tensor(&format!("t.{i}")).map_err(|e| format(format!("t.{i}: {e}")))?;
            let x = st.tensor(&format!("ohlcv.{i}")).map_err(|e| format(format!("ohlcv.{i}: {e}")))?;
            let n = t.shape().first().copied().unwrap_or(0);
            if t.dtype() != Dtype::I64 || x.dtype() != Dtype::F64 || x.shape() != [n, 5] || t.shape() != [n] {
                return Err(format(format!("{name}: tensors of the wrong type or shape")));
            }
            let bars = decode(&p, &sym, timeframe, t.data(), x.data())?;
            series.push((sym, bars));
        }
        Ok(Snapshot { timeframe, series })
    }
}

#[cfg(feature = "train")]
fn decode(path: &str, sym: &Symbol, tf: Timeframe, t: &[u8], x: &[u8]) -> Result<Vec<Bar>, SnapshotError> {
    let word = |b: &[u8]| -> [u8; 8] {
        let mut w = [0u8; 8];
        w.copy_from_slice(b);
        w
    };
    let mut bars = Vec::with_capacity(t.len() / 8);
    for (row, (tb, xb)) in t.chunks_exact(8).zip(x.chunks_exact(40)).enumerate() {
        let bad = |reason: String| SnapshotError::BadBar { path: path.into(), symbol: sym.to_string(), row, reason };
        let micros = i64::from_le_bytes(word(tb));
        let time = DateTime::from_timestamp_micros(micros).ok_or_else(|| bad(format!("time {micros} out of range")))?;
        let v: Vec<f64> = xb.chunks_exact(8).map(|c| f64::from_le_bytes(word(c))).collect();
        let bar = Bar::new(sym.clone(), tf, time, v[0], v[1], v[2], v[3], v[4]).map_err(|e| bad(e.to_string()))?;
        if bars.last().is_some_and(|prev: &Bar| prev.t >= bar.t) {
            return Err(bad("times are not increasing".into()));
        }
        bars.push(bar);
    }
    Ok(bars)
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::{TimeZone, Utc};

    fn bars(sym: &str, n: usize) -> Vec<Bar> {
        let s = Symbol::new(sym).unwrap();
        (0..n)
            .map(|i| {
                let t = Utc.with_ymd_and_hms(2010, 1, 4, 21, 0, 0).unwrap() + chrono::Duration::days(i as i64);
                let c = 10.0 + i as f64 * 0.25;
                Bar::new(s.clone(), Timeframe::DAY1, t, c, c + 1.0, c - 1.0, c + 0.1, 1000.0 + i as f64).unwrap()
            })
            .collect()
    }

    #[test]
    fn round_trip_is_exact() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("w.safetensors");
        let snap = Snapshot {
            timeframe: Timeframe::DAY1,
            series: vec![
                (Symbol::new("AAPL").unwrap(), bars("AAPL", 30)),
                (Symbol::new("BTC/USD").unwrap(), bars("BTC/USD", 7)),
            ],
        };
        snap.write(&path).unwrap();
        assert_eq!(Snapshot::read(&path).unwrap(), snap);
    }

    #[test]
    fn corrupt_files_are_named_errors() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("w.safetensors");
        std::fs::write(&path, b"not a safetensors file at all").unwrap();
        let e = Snapshot::read(&path).unwrap_err().to_string();
        assert!(e.contains("not a tradebot bar snapshot"), "{e}");

        // A NaN close inside an otherwise valid file names the symbol and row.
        let snap = Snapshot { timeframe: Timeframe::DAY1, series: vec![(Symbol::new("IBM").unwrap(), bars("IBM", 5))] };
        snap.write(&path).unwrap();
        let mut bytes = std::fs::read(&path).unwrap();
        let needle = (10.0f64 + 2.0 * 0.25 + 0.1).to_le_bytes();
        let at = bytes.windows(8).position(|w| w == needle).unwrap();
        bytes[at..at + 8].copy_from_slice(&f64::NAN.to_le_bytes());
        std::fs::write(&path, bytes).unwrap();
        let e = Snapshot::read(&path).unwrap_err().to_string();
        assert!(e.contains("IBM row 2"), "{e}");

        let empty = Snapshot { timeframe: Timeframe::DAY1, series: vec![(Symbol::new("IBM").unwrap(), vec![])] };
        assert!(matches!(empty.write(&path), Err(SnapshotError::Empty(_))));
    }
}
