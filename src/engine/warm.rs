//! Warm-up before trading: the engine's features and LSTM windows filled from the bars the store holds, so
//! the first bar the feed brings can be decided on (no decision is made on a stored bar).

use super::Engine;
use crate::domain::{Bar, Timeframe};
use crate::store::{Store, StoreError};
use chrono::Duration;

impl Engine {
    /// The last `per_symbol` stored bars of `tf` of each traded symbol (read from twice that span before
    /// its last bar), oldest first across symbols, through [`Engine::warm_up`]. Returns how many it took;
    /// a symbol with no stored bar is said once and left to fill from the feed.
    pub(crate) fn warm_up_on_store(
        &mut self,
        store: &Store,
        tf: Timeframe,
        per_symbol: usize,
    ) -> Result<usize, StoreError> {
        let span = i64::try_from(per_symbol).unwrap_or(i64::MAX).saturating_mul(2);
        let mut warm: Vec<Bar> = Vec::new();
        for s in &self.cfg.symbols {
            let Some(last) = store.last_bar_time(s, tf)? else {
                log::warn!("engine: no stored {tf} bars of {s} to warm up on; trading starts once the features fill");
                continue;
            };
            let from = last - Duration::seconds(tf.seconds().saturating_mul(span));
            let bars = store.bars(s, tf, from, last)?;
            let n = bars.len();
            warm.extend(bars.into_iter().skip(n.saturating_sub(per_symbol)));
        }
        warm.sort_by_key(|b| b.t);
        for b in &warm {
            self.warm_up(b);
        }
        Ok(warm.len())
    }
}
