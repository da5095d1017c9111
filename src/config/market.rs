//! `[market]` (the symbols, the timeframe, how long a quiet symbol is carried) and `[feed]` (a replay's
//! file, speed and dates, or Alpaca's stream).

use super::raw::{RawFeed, RawMarket};
use super::{Checker, FeedKind};
use crate::domain::{Symbol, Timeframe};
use chrono::NaiveDate;
use serde::Serialize;
use std::path::PathBuf;

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct MarketConfig {
    pub symbols: Vec<Symbol>,
    pub timeframe: Timeframe,
    /// Bars a symbol without a bar of its own is carried at its last close (never traded) before it is
    /// reported down.
    pub max_stale_bars: u32,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct FeedConfig {
    pub kind: FeedKind,
    /// Bars to import into the store before a replay, when it lacks them.
    pub file: Option<PathBuf>,
    /// Replay speed: 0 = as fast as possible, N = N times real time.
    pub speed: f64,
    pub from: Option<NaiveDate>,
    pub to: Option<NaiveDate>,
}

impl Checker {
    /// `[market]` checked: every symbol valid, in Alpaca's spelling and listed once.
    pub(super) fn market(&mut self, m: RawMarket) -> MarketConfig {
        let mut symbols = Vec::new();
        match m.symbols {
            None => self.problem(
                "market.symbols is missing: list the symbols to trade, e.g. symbols = [\"AAPL\", \"MSFT\"]".into(),
            ),
            Some(list) if list.is_empty() => self.problem("market.symbols = []: list at least one symbol".into()),
            Some(list) => {
                for s in list {
                    match Symbol::new(&s) {
                        Ok(sym) if symbols.contains(&sym) => {
                            self.problem(format!("market.symbols: {s:?} is listed twice"))
                        }
                        Ok(sym) => match sym.alpaca_spelling() {
                            Ok(()) => symbols.push(sym),
                            Err(fix) => self.problem(format!("market.symbols: {s:?}: {fix}")),
                        },
                        Err(e) => self.problem(format!("market.symbols: {e}")),
                    }
                }
            }
        }
        let timeframe = match Timeframe::parse(m.timeframe.as_deref().unwrap_or("1Day")) {
            Ok(tf) => tf,
            Err(e) => {
                self.problem(format!("market.timeframe = {:?}: {e}", m.timeframe.unwrap_or_default()));
                Timeframe::DAY1
            }
        };
        let max_stale_bars = m.max_stale_bars.unwrap_or(3);
        if max_stale_bars > 10_000 {
            self.problem(format!("market.max_stale_bars = {max_stale_bars}: use at most 10000 (bars)"));
        }
        MarketConfig { symbols, timeframe, max_stale_bars }
    }

    /// `[feed]` checked: `from` no later than `to`.
    pub(super) fn feed(&mut self, f: RawFeed) -> FeedConfig {
        let feed = FeedConfig {
            kind: self.choice(
                "feed.kind",
                f.kind.as_deref(),
                "replay",
                &[("replay", FeedKind::Replay), ("alpaca", FeedKind::Alpaca)],
            ),
            file: f.file.map(PathBuf::from),
            speed: self.range("feed.speed", f.speed, 0.0, (0.0, true), (1.0e6, true)),
            from: self.date("feed.from", f.from.as_deref()),
            to: self.date("feed.to", f.to.as_deref()),
        };
        if let (Some(from), Some(to)) = (feed.from, feed.to)
            && from > to
        {
            self.problem(format!("feed.from = {from} is after feed.to = {to}: swap them"));
        }
        feed
    }
}
