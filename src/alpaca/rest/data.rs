//! Market-data REST: historical bars, one page per call (`GetBars`), and `RestClient::fetch_bars`, which
//! follows `next_page_token` to the end.

use super::{Endpoint, Host, RestClient, RestError, decode};
use crate::alpaca::parse;
use crate::alpaca::wire::rest::BarsPage;
use crate::domain::{Bar, Symbol, Timeframe};
use chrono::{DateTime, SecondsFormat, Utc};
use reqwest::Method;

/// What bars to ask `GET /v2/stocks/bars` (or the crypto bars endpoint) for: one page of them.
#[derive(Debug, Clone, PartialEq)]
pub struct BarsQuery {
    /// The symbols, all stocks or all crypto pairs (Alpaca's `symbols`, comma-joined).
    pub symbols: Vec<Symbol>,
    /// The bar size (Alpaca's `timeframe`, e.g. `1Min`).
    pub timeframe: Timeframe,
    /// The first bar start wanted (UTC, inclusive; Alpaca's `start`).
    pub start: DateTime<Utc>,
    /// Inclusive.
    pub end: DateTime<Utc>,
    /// Bars per page, 1 to 10,000, counted over all symbols.
    pub limit: u32,
    /// `iex`, `sip`, ...; stocks only. `None` = Alpaca's default for the plan.
    pub feed: Option<String>,
    /// The previous page's `next_page_token`, to get the page after it; `None` for the first page.
    pub page_token: Option<String>,
}

impl BarsQuery {
    fn is_crypto(&self) -> bool {
        self.symbols.first().is_some_and(Symbol::is_crypto)
    }
}

/// One page of `GET /v2/stocks/bars` (or `/v1beta3/crypto/us/bars` when the symbols are crypto pairs).
pub struct GetBars;
impl Endpoint for GetBars {
    type Input = BarsQuery;
    type Output = (Vec<Bar>, Option<String>);
    const METHOD: Method = Method::GET;
    const IDEMPOTENT: bool = true;
    const NAME: &'static str = "GET /v2/stocks/bars";
    const HOST: Host = Host::Data;
    fn path(q: &BarsQuery) -> String {
        if q.is_crypto() { "/v1beta3/crypto/us/bars".into() } else { "/v2/stocks/bars".into() }
    }
    fn query(q: &BarsQuery) -> Vec<(&'static str, String)> {
        let time = |t: DateTime<Utc>| t.to_rfc3339_opts(SecondsFormat::AutoSi, true);
        let mut v = vec![
            ("symbols", q.symbols.iter().map(Symbol::as_str).collect::<Vec<_>>().join(",")),
            ("timeframe", q.timeframe.to_string()),
            ("start", time(q.start)),
            ("end", time(q.end)),
            ("limit", q.limit.clamp(1, 10_000).to_string()),
        ];
        if !q.is_crypto() {
            v.push(("adjustment", "raw".into()));
            if let Some(f) = &q.feed {
                v.push(("feed", f.clone()));
            }
        }
        if let Some(t) = &q.page_token {
            v.push(("page_token", t.clone()));
        }
        v
    }
    fn parse(q: &BarsQuery, body: &[u8]) -> Result<Self::Output, RestError> {
        decode(Self::NAME, body, |p: BarsPage| parse::bars_page(p, q.timeframe))
    }
}

impl RestClient {
    /// Every bar of the query, following `next_page_token` (at most `max_pages` pages, so a server that
    /// keeps returning tokens cannot loop us forever). Bars come back sorted by (time, symbol).
    /// Cancellation-safe: nothing is stored; dropping it loses only the pages read so far.
    pub async fn fetch_bars(&self, query: &BarsQuery, max_pages: usize) -> Result<Vec<Bar>, RestError> {
        let mut q = query.clone();
        q.page_token = None;
        let mut all = Vec::new();
        for _ in 0..max_pages {
            let (bars, next) = self.issue::<GetBars>(&q).await?;
            all.extend(bars);
            match next {
                Some(t) => q.page_token = Some(t),
                None => {
                    all.sort_by(|a, b| (a.t, &a.symbol).cmp(&(b.t, &b.symbol)));
                    return Ok(all);
                }
            }
        }
        Err(RestError::Unexpected {
            endpoint: GetBars::NAME,
            status: 200,
            message: format!("still more pages after {max_pages}; narrow the range"),
        })
    }
}
