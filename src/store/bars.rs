//! Bars in the store: a compact 40-byte value under a key that scans one symbol and timeframe in time order.

use super::backend::{Raw, Span};
use super::{Store, StoreError, TreeName, keys};
use crate::domain::{Bar, Symbol, Timeframe};
use chrono::{DateTime, Utc};

impl Store {
    /// Writes bars (an existing bar at the same symbol, timeframe and time is replaced). Returns how
    /// many were new.
    pub fn put_bars(&self, bars: &[Bar]) -> Result<usize, StoreError> {
        let tree = self.raw_tree(TreeName::Bars)?;
        let mut new = 0;
        let mut batch = Vec::with_capacity(bars.len());
        for b in bars {
            let k = keys::bar_key(&b.symbol, b.timeframe, b.t);
            if !tree.contains_key(&k).map_err(self.on_write())? {
                new += 1;
            }
            batch.push((k, encode_bar(b).to_vec()));
        }
        tree.insert_all(batch).map_err(self.on_write())?;
        Ok(new)
    }

    /// Bars of one symbol and timeframe with `from <= t <= to`, in time order.
    pub fn bars(
        &self,
        symbol: &Symbol,
        tf: Timeframe,
        from: DateTime<Utc>,
        to: DateTime<Utc>,
    ) -> Result<Vec<Bar>, StoreError> {
        let tree = self.raw_tree(TreeName::Bars)?;
        let lo = keys::bar_key(symbol, tf, from);
        let hi = keys::bar_key(symbol, tf, to);
        tree.scan(Span::Range(&lo, &hi), false, usize::MAX, decode_bar_entry)
    }

    /// The time of the newest stored bar, if any.
    pub fn last_bar_time(&self, symbol: &Symbol, tf: Timeframe) -> Result<Option<DateTime<Utc>>, StoreError> {
        let tree = self.raw_tree(TreeName::Bars)?;
        let last = tree.scan(Span::Prefix(&keys::bar_prefix(symbol, tf)), true, 1, decode_bar_entry)?;
        Ok(last.first().map(|b| b.t))
    }

    /// Number of stored bars of one symbol and timeframe.
    pub fn bar_count(&self, symbol: &Symbol, tf: Timeframe) -> Result<usize, StoreError> {
        let tree = self.raw_tree(TreeName::Bars)?;
        Ok(tree.scan(Span::Prefix(&keys::bar_prefix(symbol, tf)), false, usize::MAX, |_, _| Ok(()))?.len())
    }
}

/// Bars are stored compactly: o, h, l, c, v as little-endian f64 (40 bytes).
fn encode_bar(b: &Bar) -> [u8; 40] {
    let mut out = [0u8; 40];
    for (i, x) in [b.o, b.h, b.l, b.c, b.v].into_iter().enumerate() {
        out[i * 8..i * 8 + 8].copy_from_slice(&x.to_le_bytes());
    }
    out
}

fn decode_bar_entry(k: &[u8], v: Raw<'_>) -> Result<Bar, StoreError> {
    let v = v.bytes("bars")?;
    let corrupt = |reason: String| StoreError::Corrupt { tree: "bars", reason };
    let (symbol, tf, t) = keys::parse_bar_key(k).ok_or_else(|| corrupt(format!("bad key {k:?}")))?;
    if v.len() != 40 {
        return Err(corrupt(format!("{symbol} {t}: value has {} bytes, expected 40", v.len())));
    }
    let f = |i: usize| f64::from_le_bytes(v[i * 8..i * 8 + 8].try_into().unwrap_or([0; 8]));
    Bar::new(symbol.clone(), tf, t, f(0), f(1), f(2), f(3), f(4)).map_err(|e| corrupt(format!("{symbol} {t}: {e}")))
}
