//! Filling the store from `feed.file` when a command needs bars the store lacks.

use crate::config::Config;
use crate::data::{ImportError, ImportOptions, import_csv};
use crate::store::Store;
use anyhow::bail;

/// Imports `feed.file` into the store for every configured symbol that has no bars yet (one seek per
/// symbol). Used by `run`, `train` and `backtest`, so that each works on a fresh state directory.
pub(crate) fn ensure_bars(config: &Config, store: &Store) -> anyhow::Result<()> {
    let tf = config.market.timeframe;
    // One seek per symbol: is there any bar at all? A store error stops the run rather than passing for "none".
    let mut missing = Vec::new();
    for s in &config.market.symbols {
        if store.last_bar_time(s, tf)?.is_none() {
            missing.push(s.clone());
        }
    }
    if !missing.is_empty() {
        let Some(file) = &config.feed.file else {
            bail!(
                "the store has no {tf} bars for {missing:?} and feed.file is not set: run `tradebot data import FILE` first"
            );
        };
        let names: Vec<&str> = missing.iter().map(|s| s.as_str()).collect();
        log::info!("importing {} for {}", file.display(), names.join(", "));
        let opts = ImportOptions { symbols: missing.clone(), timeframe: tf, ..Default::default() };
        // The store's own error, not wrapped: `main` maps a full disk or a damaged store to its exit code.
        let r = import_csv(store, file, &opts).map_err(|e| match e {
            ImportError::Store(s) => anyhow::Error::new(s),
            e => e.into(),
        })?;
        if !r.bad.is_empty() {
            bail!(
                "{}: {} bad rows (first: line {}: {}); fix the file or import it with `tradebot data import`",
                file.display(),
                r.bad.len(),
                r.bad[0].line,
                r.bad[0].reason
            );
        }
    }
    Ok(())
}
