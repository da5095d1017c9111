//! The engine's account between two broker snapshots: fills move cash at once (fees included), orders
//! still working count against the limits, and the value of holdings outside the configured symbols
//! comes from the broker's equity. A snapshot resets all of it to the broker's figures.

use crate::domain::{Side, Symbol};
use crate::oms::{Oms, OmsChange};
use crate::risk::Holding;
use rust_decimal::Decimal;
use rust_decimal::prelude::ToPrimitive;
use std::collections::BTreeMap;

/// Cash after the new fills among `changes` (each fill once: the OMS reports only fills it had not
/// recorded), with `fee_bps` on each fill's notional.
pub(super) fn cash_after_fills(mut cash: f64, changes: &[OmsChange], fee_bps: f64) -> f64 {
    for c in changes {
        if let OmsChange::Fill(f) = c {
            let (Some(q), Some(p)) = (f.qty.to_f64(), f.price.to_f64()) else { continue };
            let notional = q * p;
            let fee = notional * fee_bps / 10_000.0;
            match f.side {
                Side::Buy => cash -= notional + fee,
                Side::Sell => cash += notional - fee,
            }
        }
    }
    cash
}

/// The units of `symbol` still to fill on open orders of `side`.
pub(super) fn working_qty(oms: &Oms, symbol: &Symbol, side: Side) -> Decimal {
    oms.open_orders()
        .filter(|o| o.symbol == *symbol && o.side == side)
        .map(|o| (o.qty.unwrap_or_default() - o.filled_qty).max(Decimal::ZERO))
        .sum()
}

/// How many orders of `side` on `symbol` are still working (recorded, sent or open at the broker).
pub(super) fn working_count(oms: &Oms, symbol: &Symbol, side: Side) -> usize {
    oms.open_orders().filter(|o| o.symbol == *symbol && o.side == side).count()
}

/// The holdings and cash the checks of a `side` order see: for a buy, every open buy counts as held and
/// its notional (at the last price) as spent; for a sell, units already being sold are not held any more.
pub(super) fn with_working(
    oms: &Oms,
    mut positions: BTreeMap<Symbol, Holding>,
    mut cash: f64,
    side: Side,
    price: impl Fn(&Symbol) -> f64,
) -> (BTreeMap<Symbol, Holding>, f64) {
    let symbols: Vec<Symbol> = oms.open_orders().map(|o| o.symbol.clone()).collect();
    for s in symbols {
        let p = price(&s);
        let h = positions.entry(s.clone()).or_insert(Holding { qty: Decimal::ZERO, price: p });
        h.qty = oms.position(&s)
            + match side {
                Side::Buy => working_qty(oms, &s, Side::Buy),
                Side::Sell => -working_qty(oms, &s, Side::Sell),
            };
    }
    if side == Side::Buy {
        let spent: f64 =
            positions.keys().map(|s| working_qty(oms, s, Side::Buy).to_f64().unwrap_or(0.0) * price(s)).sum();
        cash -= spent;
    }
    positions.retain(|_, h| !h.qty.is_zero());
    (positions, cash)
}
