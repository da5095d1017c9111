//! Trailing stops and cooldown for live positions, with the environment's rule (`exec`): per symbol a
//! shadow `exec::Position` (holding, entry, high-water mark since entry, cooldown). Each bar runs
//! `exec::sell_phase` with no requested trade, exactly as the env does before its buys: the cooldown
//! counts down, the high-water mark rises, and when the price falls `trailing_stop` below it the whole
//! holding is to be sold and the symbol takes no buys for `cooldown_bars` more bars. Broker fills keep the
//! holding and entry in step with the account; a reconciliation sets the holding to the broker's.
//!
//! A stop is disarmed only when its sell goes out (`restore` after a refused one). The engine syncs the
//! holdings from the order manager after every reconciliation and fill, so a restart, an adopted position
//! or an inferred fill has its stop. Not persisted: after a restart the high-water mark starts again from
//! the last price seen.

use crate::domain::{Side, Symbol};
use crate::exec::{self, ExecParams, Position};
use std::collections::BTreeMap;

/// The trailing stop fired: sell `qty` units of `symbol` (the whole holding).
#[derive(Debug, Clone, PartialEq)]
pub struct StopOut {
    pub symbol: Symbol,
    pub qty: f64,
    pub price: f64,
    pub high_water: f64,
}

#[derive(Debug, Clone)]
pub struct StopTracker {
    params: ExecParams,
    book: BTreeMap<Symbol, Position>,
}

impl StopTracker {
    /// `trailing_stop`: fraction below the high-water mark (0 = off); `cooldown_bars` after a stop-out.
    pub fn new(trailing_stop: f64, cooldown_bars: u32) -> Self {
        let params = ExecParams {
            trailing_stop,
            cooldown_bars,
            fee_bps: 0.0,
            slippage_bps: 0.0,
            min_order: 0.0,
            integer_units: false,
            ..ExecParams::default()
        };
        StopTracker { params, book: BTreeMap::new() }
    }

    /// A bar of `symbol` closed at `price` (call once per bar, before checking that bar's orders).
    pub fn on_bar(&mut self, symbol: &Symbol, price: f64) -> Option<StopOut> {
        if !(price.is_finite() && price > 0.0) {
            return None;
        }
        let pos = self.book.entry(symbol.clone()).or_default();
        let (held, high_water) = (pos.holding, pos.high_water.max(price));
        let mut scratch_cash = 0.0;
        let fill = exec::sell_phase(&self.params, pos, &mut scratch_cash, price, 0.0);
        fill.stopped.then(|| StopOut { symbol: symbol.clone(), qty: held, price, high_water })
    }

    /// A price between two bars (a minute of a longer timeframe): the high-water mark rises and the stop
    /// fires as on a bar, but the cooldown does not count down (it counts bars of the timeframe).
    pub fn on_price(&mut self, symbol: &Symbol, price: f64) -> Option<StopOut> {
        let pos = self.book.get_mut(symbol)?;
        if pos.holding <= 0.0 {
            return None;
        }
        // `sell_phase` takes one off a running cooldown: put it on first.
        if pos.cooldown > 0 {
            pos.cooldown += 1;
        }
        self.on_bar(symbol, price)
    }

    /// A broker fill: buys add to the holding (entry averaged, high-water mark as in `exec::buy_phase`);
    /// sells reduce it (a stop-out's own sell finds the shadow already flat).
    pub fn on_fill(&mut self, symbol: &Symbol, side: Side, qty: f64, price: f64) {
        if !(qty.is_finite() && qty > 0.0 && price.is_finite() && price > 0.0) {
            return;
        }
        let pos = self.book.entry(symbol.clone()).or_default();
        match side {
            Side::Buy => {
                let held = pos.holding.max(0.0);
                pos.entry = if held > 0.0 { (pos.entry * held + price * qty) / (held + qty) } else { price };
                pos.high_water = if held > 0.0 { pos.high_water.max(price) } else { price };
                pos.holding = held + qty;
            }
            Side::Sell => {
                pos.holding = (pos.holding - qty).max(0.0);
                if pos.holding <= 0.0 {
                    *pos = Position { cooldown: pos.cooldown, ..Position::default() };
                }
            }
        }
    }

    /// The broker's holding after a reconciliation; a holding that appears starts its high-water mark at
    /// `price`.
    pub fn sync(&mut self, symbol: &Symbol, qty: f64, price: f64) {
        let pos = self.book.entry(symbol.clone()).or_default();
        if qty <= 0.0 || !qty.is_finite() {
            *pos = Position { cooldown: pos.cooldown, ..Position::default() };
        } else if pos.holding <= 0.0 {
            *pos = Position { holding: qty, entry: price, high_water: price, cooldown: pos.cooldown };
        } else {
            pos.holding = qty;
        }
    }

    /// Puts back `symbol`'s state from before a bar whose stop-out could not be sold (refused, nothing to
    /// sell): the stop stays armed and fires again on the next bar below the mark.
    pub fn restore(&mut self, symbol: &Symbol, before: Position) {
        self.book.insert(symbol.clone(), before);
    }

    /// Bars (this one included) during which `symbol` takes no buys.
    pub fn cooldown(&self, symbol: &Symbol) -> u32 {
        self.book.get(symbol).map_or(0, |p| p.cooldown)
    }

    pub fn position(&self, symbol: &Symbol) -> Position {
        self.book.get(symbol).copied().unwrap_or_default()
    }
}
