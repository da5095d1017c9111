//! A synthetic market for the fake: one seeded random walk of minute bars per symbol, stocks during the
//! NYSE's regular sessions (the shipped calendar: holidays, early closes), crypto pairs (`BTC/USD`)
//! around the clock. The same seed, symbols, prices and start give the same bars.
//!
//! `FakeAlpaca::run_market` puts `history_days` of it in the REST history at once, then, on the fake's
//! clock (simulated with `--speed`), publishes each minute bar once its minute has ended: it goes to the
//! REST history and to the stream's subscribers, and the orders held for that symbol fill at its open (an
//! order fills at the next price, as a market order placed between two bars does).

use super::{App, UpdCmd, WsCmd, rest::update_msg};
use crate::alpaca::wire::market as wm;
use crate::alpaca::wire::updates as wu;
use crate::calendar::Calendar;
use crate::clock::SimClock;
use chrono::{DateTime, Duration, SecondsFormat, Utc};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use rand_distr::StandardNormal;
use rust_decimal::Decimal;
use std::collections::BTreeMap;

/// What the fake's market trades.
#[derive(Debug, Clone, PartialEq)]
pub struct MarketSpec {
    /// Seed of the random walk of prices and volumes: the same seed gives the same bars.
    pub seed: u64,
    /// Symbols and their price at the start of the history (`BTC/USD`-style names are crypto).
    pub symbols: Vec<(String, f64)>,
    /// How much minute history REST serves from the start (before the first streamed bar).
    pub history_days: i64,
    /// Symbols that often trade nothing in a minute (an IEX feed's quiet stocks): the chance, 0 to 1, that
    /// a minute of theirs has no bar.
    pub quiet: BTreeMap<String, f64>,
}

/// One symbol's walk: where it is and the next minute it has not produced yet.
#[derive(Debug)]
pub(super) struct Walk {
    pub symbol: String,
    crypto: bool,
    rng: StdRng,
    price: f64,
    next: DateTime<Utc>,
    /// The chance that a minute has no bar.
    quiet: f64,
}

fn cents(x: f64) -> f64 {
    (x * 100.0).round() / 100.0
}

/// FNV-1a: a stable per-symbol stream of the seed (the standard library's hasher may change).
fn mix(seed: u64, symbol: &str) -> u64 {
    symbol.bytes().fold(0xcbf2_9ce4_8422_2325 ^ seed, |h, b| (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3))
}

impl Walk {
    pub(super) fn new(seed: u64, symbol: &str, price: f64, from: DateTime<Utc>) -> Walk {
        Walk {
            symbol: symbol.into(),
            crypto: symbol.contains('/'),
            rng: StdRng::seed_from_u64(mix(seed, symbol)),
            price: cents(price.max(1.0)),
            next: from,
            quiet: 0.0,
        }
    }

    /// This walk with minutes left without a bar at the chance `p`.
    pub(super) fn quiet(self, p: f64) -> Walk {
        Walk { quiet: p.clamp(0.0, 1.0), ..self }
    }

    /// The first minute this symbol trades at or after `t` (`None` past the calendar's reach).
    fn trading_minute(&self, cal: &Calendar, t: DateTime<Utc>) -> Option<DateTime<Utc>> {
        if self.crypto {
            return Some(t);
        }
        let (open, _) = cal.session_at_or_after(t)?;
        Some(t.max(open))
    }

    /// When the next bar is due: the end of the next minute this symbol trades.
    pub(super) fn due(&self, cal: &Calendar) -> Option<DateTime<Utc>> {
        self.trading_minute(cal, self.next).map(|m| m + Duration::minutes(1))
    }

    /// The bars of every minute that has ended by `now`, in order.
    pub(super) fn until(&mut self, cal: &Calendar, now: DateTime<Utc>) -> Vec<wm::Bar> {
        let mut out = Vec::new();
        while let Some(m) = self.trading_minute(cal, self.next)
            && m + Duration::minutes(1) <= now
        {
            let bar = self.bar(m);
            if self.quiet == 0.0 || self.rng.random::<f64>() >= self.quiet {
                out.push(bar);
            }
            self.next = m + Duration::minutes(1);
        }
        out
    }

    fn bar(&mut self, t: DateTime<Utc>) -> wm::Bar {
        let sigma = if self.crypto { 0.0012 } else { 0.0008 };
        let z: f64 = self.rng.sample(StandardNormal);
        let o = self.price;
        let c = cents(o * (z * sigma + 0.000_000_5).exp()).max(0.01);
        let wick = |rng: &mut StdRng| rng.random::<f64>() * sigma * 0.6;
        let h = cents(o.max(c) * (1.0 + wick(&mut self.rng)));
        let l = cents(o.min(c) * (1.0 - wick(&mut self.rng))).max(0.01);
        let (v, n) = if self.crypto {
            (f64::from(self.rng.random_range(1..4000u32)) / 1000.0, self.rng.random_range(1..40))
        } else {
            (f64::from(self.rng.random_range(100..20_000u32)), self.rng.random_range(5..200))
        };
        self.price = c;
        wm::Bar {
            symbol: None,
            o,
            h,
            l,
            c,
            v,
            t: t.to_rfc3339_opts(SecondsFormat::Secs, true),
            n: Some(n),
            vw: Some(((o + h + l + c) / 4.0 * 10_000.0).round() / 10_000.0),
        }
    }
}

/// Runs the market until the fake stops: history first, then each minute as it ends on the fake's clock.
pub(super) async fn run(app: App, spec: MarketSpec, clock: Option<SimClock>) {
    let now = || clock.map_or_else(Utc::now, |c| c.at(Utc::now()));
    let cal = Calendar::shipped();
    let start = now() - Duration::days(spec.history_days.max(0));
    let start = DateTime::from_timestamp(start.timestamp() - start.timestamp() % 60, 0).unwrap_or(start);
    let walk =
        |(s, p): &(String, f64)| Walk::new(spec.seed, s, *p, start).quiet(spec.quiet.get(s).copied().unwrap_or(0.0));
    let mut walks: Vec<Walk> = spec.symbols.iter().map(walk).collect();
    {
        let mut s = app.lock();
        s.book.clock = clock;
        s.book.hold_orders = true;
        for w in &mut walks {
            let bars = w.until(&cal, now());
            if let Some(p) = Decimal::from_f64_retain(w.price) {
                s.book.prices.insert(w.symbol.clone(), p.round_dp(2));
            }
            s.bars.entry(w.symbol.clone()).or_default().extend(bars);
        }
    }
    loop {
        let t = now();
        for w in &mut walks {
            for bar in w.until(&cal, t) {
                publish(&app, &w.symbol, bar);
            }
        }
        let Some(due) = walks.iter().filter_map(|w| w.due(&cal)).min() else {
            log::warn!("fake alpaca: the market has no session left in the calendar; no more bars");
            return;
        };
        let wait = match clock {
            Some(c) => c.wall_span(due - now()),
            None => (due - now()).to_std().unwrap_or_default(),
        };
        tokio::time::sleep(wait.max(std::time::Duration::from_millis(1))).await;
    }
}

/// One closed minute: the held orders of its symbol fill at its open, then it is stored and streamed.
fn publish(app: &App, symbol: &str, bar: wm::Bar) {
    let filled = {
        let mut s = app.lock();
        let price = |x: f64| Decimal::from_f64_retain(x).map(|p| p.round_dp(2));
        let filled = match price(bar.o) {
            Some(open) => s.book.fill_held_of(symbol, open),
            None => Vec::new(),
        };
        if let Some(close) = price(bar.c) {
            s.book.prices.insert(symbol.into(), close);
        }
        s.bars.entry(symbol.into()).or_default().push(bar.clone());
        filled
    };
    for o in &filled {
        let _ = app.updates_tx.send(UpdCmd::Msg(update_msg(wu::TradeEvent::Fill, o)));
    }
    let _ = app.market_tx.send(WsCmd::Bar(wm::Bar { symbol: Some(symbol.into()), ..bar }));
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t(s: &str) -> DateTime<Utc> {
        DateTime::parse_from_rfc3339(s).unwrap().to_utc()
    }

    #[test]
    fn a_stock_walks_only_in_sessions_and_a_seed_gives_the_same_bars() {
        let cal = Calendar::shipped();
        // Wednesday 2025-11-26 13:00 New York to the Monday after Thanksgiving's early-closing Friday.
        let (from, to) = (t("2025-11-26T18:00:00Z"), t("2025-12-01T15:00:00Z"));
        let bars = Walk::new(7, "AAPL", 190.0, from).until(&cal, to);
        let again = Walk::new(7, "AAPL", 190.0, from).until(&cal, to);
        assert_eq!(bars, again);
        assert_ne!(bars, Walk::new(8, "AAPL", 190.0, from).until(&cal, to), "another seed, another walk");
        let times: Vec<DateTime<Utc>> = bars.iter().map(|b| t(&b.t)).collect();
        // Wednesday 13:00-16:00 (180), Friday 09:30-13:00 (210), Monday 09:30-10:00 (30).
        assert_eq!(times.len(), 180 + 210 + 30);
        assert_eq!(times[0], from);
        assert_eq!(times[179], t("2025-11-26T20:59:00Z"));
        assert_eq!(times[180], t("2025-11-28T14:30:00Z"));
        assert_eq!(times[389], t("2025-11-28T17:59:00Z"));
        assert_eq!(times[390], t("2025-12-01T14:30:00Z"));
        for (b, next) in bars.iter().zip(&bars[1..]) {
            assert!(b.l <= b.o.min(b.c) && b.h >= b.o.max(b.c) && b.l > 0.0, "{b:?}");
            assert_eq!(next.o, b.c, "each minute opens at the last close");
        }
    }

    #[test]
    fn a_quiet_symbol_skips_minutes_at_its_chance_and_keeps_its_walk() {
        let cal = Calendar::shipped();
        let (from, to) = (t("2025-12-01T14:30:00Z"), t("2025-12-01T21:00:00Z"));
        let bars = Walk::new(3, "XYZ", 50.0, from).quiet(0.9).until(&cal, to);
        // 390 minutes at a 10% chance of a bar each: 39 expected; far from 0 and from 390.
        assert!((15..80).contains(&bars.len()), "{}", bars.len());
        assert_eq!(bars, Walk::new(3, "XYZ", 50.0, from).quiet(0.9).until(&cal, to), "deterministic");
    }

    #[test]
    fn a_crypto_pair_trades_every_minute_and_a_bar_waits_for_its_minute_to_end() {
        let cal = Calendar::shipped();
        let from = t("2025-11-29T12:00:00Z");
        let mut w = Walk::new(1, "BTC/USD", 90_000.0, from);
        assert_eq!(w.until(&cal, t("2025-11-29T12:00:59Z")).len(), 0);
        assert_eq!(w.due(&cal), Some(t("2025-11-29T12:01:00Z")));
        let bars = w.until(&cal, t("2025-11-29T13:00:00Z"));
        assert_eq!(bars.len(), 60);
        assert_eq!(bars[59].t, "2025-11-29T12:59:00Z");
        assert!(bars.iter().all(|b| b.v > 0.0));
    }
}
