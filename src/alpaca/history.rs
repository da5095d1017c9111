//! Incremental history download: for each symbol, fetch over REST (paginated, rate-limited) only the bars
//! after the newest one already stored in the window, and store them. Used by `tradebot data fetch`.

use crate::alpaca::rest::{BarsQuery, RestClient, RestError};
use crate::domain::{Symbol, Timeframe};
use crate::store::{Store, StoreError};
use chrono::{DateTime, Utc};

/// Why a history download stopped.
#[derive(Debug, thiserror::Error)]
pub enum HistoryError {
    /// Alpaca's data API refused or failed a bars request (after its retries).
    #[error(transparent)]
    Rest(#[from] RestError),
    /// The downloaded bars could not be read from or written to the store.
    #[error("store: {0}")]
    Store(#[from] StoreError),
}

/// Per symbol: bars received and how many of them were new to the store.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Fetched {
    /// The symbol downloaded.
    pub symbol: Symbol,
    /// Bars Alpaca returned for it, over all pages.
    pub received: usize,
    /// Of those, bars the store did not hold yet.
    pub new: usize,
    /// Where the request started (after the newest stored bar, or `from`).
    pub start: DateTime<Utc>,
}

/// What to download: `symbols` at `timeframe` over `[from, to]`, from the `feed` (`iex`, `sip`; stocks).
#[derive(Debug, Clone, PartialEq)]
pub struct HistoryRequest {
    /// The symbols to download, each fetched and stored on its own.
    pub symbols: Vec<Symbol>,
    /// The bar size to download (Alpaca's `timeframe`, e.g. `1Min`, `1Day`).
    pub timeframe: Timeframe,
    /// The first bar time wanted (UTC, inclusive).
    pub from: DateTime<Utc>,
    /// The last bar time wanted (UTC, inclusive).
    pub to: DateTime<Utc>,
    /// Alpaca's `feed` parameter for stock bars (`iex`, `sip`); `None` lets Alpaca choose (ignored for crypto).
    pub feed: Option<String>,
}

/// Fetches and stores what is missing for each symbol in `[from, to]`; `progress(symbol, done, total)`
/// is called after each symbol. Bars stored before a failure stay stored (the next run resumes).
/// Cancellation-safe: each symbol's bars are stored in one batch after its download.
pub async fn fetch_missing(
    rest: &RestClient,
    store: &Store,
    req: &HistoryRequest,
    mut progress: impl FnMut(&Symbol, usize, usize),
) -> Result<Vec<Fetched>, HistoryError> {
    let (tf, from, to, symbols) = (req.timeframe, req.from, req.to, &req.symbols);
    let mut out = Vec::new();
    for (i, symbol) in symbols.iter().enumerate() {
        let newest = store.bars(symbol, tf, from, to)?.last().map(|b| b.t);
        let start = newest.map_or(from, |t| t + chrono::Duration::seconds(1));
        let mut fetched = Fetched { symbol: symbol.clone(), received: 0, new: 0, start };
        if start <= to {
            let q = BarsQuery {
                symbols: vec![symbol.clone()],
                timeframe: tf,
                start,
                end: to,
                limit: 10_000,
                feed: req.feed.clone(),
                page_token: None,
            };
            let bars = rest.fetch_bars(&q, 10_000).await?;
            fetched.received = bars.len();
            fetched.new = store.put_bars(&bars)?;
        }
        out.push(fetched);
        progress(symbol, i + 1, symbols.len());
    }
    store.flush()?;
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::alpaca::fake::FakeAlpaca;
    use crate::alpaca::wire::market as wm;

    const T0: i64 = 1_714_573_800;

    fn bar(i: i64) -> wm::Bar {
        let t = DateTime::from_timestamp(T0 + 60 * i, 0).unwrap();
        wm::Bar { symbol: None, o: 1.0, h: 2.0, l: 1.0, c: 2.0, v: 5.0, t: t.to_rfc3339(), n: None, vw: None }
    }

    #[tokio::test]
    async fn second_run_fetches_only_what_is_missing() {
        let fake = FakeAlpaca::start(0).await.unwrap();
        fake.store_bars("AAPL", (0..30).map(bar).collect());
        let rest = RestClient::new(fake.rest_config()).unwrap();
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path()).unwrap();
        let syms = [Symbol::new("AAPL").unwrap()];
        let req = HistoryRequest {
            symbols: syms.to_vec(),
            timeframe: Timeframe::MIN1,
            from: DateTime::from_timestamp(T0, 0).unwrap(),
            to: DateTime::from_timestamp(T0 + 3600, 0).unwrap(),
            feed: None,
        };
        let mut calls = 0;
        let r = fetch_missing(&rest, &store, &req, |_, _, _| calls += 1).await.unwrap();
        assert_eq!((r[0].received, r[0].new, calls), (30, 30, 1));
        fake.store_bars("AAPL", (30..35).map(bar).collect());
        let r = fetch_missing(&rest, &store, &req, |_, _, _| {}).await.unwrap();
        assert_eq!((r[0].received, r[0].new), (5, 5), "only the five new bars travel");
        assert_eq!(r[0].start, DateTime::from_timestamp(T0 + 29 * 60 + 1, 0).unwrap());
        assert_eq!(store.bar_count(&syms[0], Timeframe::MIN1).unwrap(), 35);
        assert!(fake.lock().requests.last().unwrap().query.contains("start=2024-05-01T14%3A59%3A01Z"));
    }
}
