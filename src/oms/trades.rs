//! Round trips from fills, for people: each sell matched first-in first-out against the buys before it
//! gives closed trades (entry, exit, quantity, P&L after fees); what is left is the open position with its
//! average entry price. Fees are the execution rule's (`fee_bps` of each fill's notional), as the
//! simulated broker charges them. Long only, as the strategies trade: a sell beyond the holding closes
//! what is held and the rest is left out.

use super::FillRecord;
use crate::domain::{Side, Symbol};
use chrono::{DateTime, Utc};
use rust_decimal::prelude::ToPrimitive;
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, VecDeque};

/// One closed trade: a buy's units sold later.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ClosedTrade {
    /// The symbol traded.
    pub symbol: String,
    /// When the buy that opened these units filled (UTC).
    pub entry_time: DateTime<Utc>,
    /// When the sell that closed them filled (UTC).
    pub exit_time: DateTime<Utc>,
    /// Shares closed.
    pub qty: f64,
    /// The buy's fill price, in dollars per share.
    pub entry_price: f64,
    /// The sell's fill price, in dollars per share.
    pub exit_price: f64,
    /// Both sides' fees on these units.
    pub fees: f64,
    /// (exit − entry) × qty − fees.
    pub pnl: f64,
}

/// What is still held of a symbol, from its fills.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct OpenLots {
    /// Shares still held.
    pub qty: f64,
    /// The average price of the units held (their buys').
    pub avg_entry: f64,
    /// The buy fees of the units held.
    pub fees: f64,
}

#[derive(Debug, Clone)]
struct Lot {
    qty: f64,
    price: f64,
    fee_per_unit: f64,
    time: DateTime<Utc>,
}

/// Closed trades in exit order, and the open lots by symbol.
pub fn round_trips(fills: &[FillRecord], fee_bps: f64) -> (Vec<ClosedTrade>, BTreeMap<Symbol, OpenLots>) {
    let mut fills: Vec<&FillRecord> = fills.iter().collect();
    fills.sort_by_key(|f| f.time);
    let mut lots: BTreeMap<Symbol, VecDeque<Lot>> = BTreeMap::new();
    let mut closed = Vec::new();
    for f in fills {
        let (qty, price) = (f.qty.to_f64().unwrap_or(0.0), f.price.to_f64().unwrap_or(0.0));
        if !(qty > 0.0 && price > 0.0) {
            continue;
        }
        let fee_per_unit = price * fee_bps / 10_000.0;
        let held = lots.entry(f.symbol.clone()).or_default();
        match f.side {
            Side::Buy => held.push_back(Lot { qty, price, fee_per_unit, time: f.time }),
            Side::Sell => {
                let mut left = qty;
                while left > 1e-12 {
                    let Some(lot) = held.front_mut() else { break };
                    let q = left.min(lot.qty);
                    let fees = q * (lot.fee_per_unit + fee_per_unit);
                    closed.push(ClosedTrade {
                        symbol: f.symbol.to_string(),
                        entry_time: lot.time,
                        exit_time: f.time,
                        qty: q,
                        entry_price: lot.price,
                        exit_price: price,
                        fees,
                        pnl: (price - lot.price) * q - fees,
                    });
                    lot.qty -= q;
                    left -= q;
                    if lot.qty <= 1e-12 {
                        held.pop_front();
                    }
                }
            }
        }
    }
    let open = lots
        .into_iter()
        .filter_map(|(s, ls)| {
            let qty: f64 = ls.iter().map(|l| l.qty).sum();
            (qty > 1e-12).then(|| {
                let cost: f64 = ls.iter().map(|l| l.qty * l.price).sum();
                let fees = ls.iter().map(|l| l.qty * l.fee_per_unit).sum();
                (s, OpenLots { qty, avg_entry: cost / qty, fees })
            })
        })
        .collect();
    (closed, open)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::ClientOrderId;
    use rust_decimal::Decimal;

    fn fill(symbol: &str, side: Side, qty: i64, price: i64, day: i64) -> FillRecord {
        let s = Symbol::new(symbol).unwrap();
        let time = DateTime::from_timestamp(1_700_000_000 + day * 86_400, 0).unwrap();
        FillRecord {
            client_order_id: ClientOrderId::derive("t", &s, time, 0),
            symbol: s,
            side,
            qty: Decimal::from(qty),
            price: Decimal::from(price),
            cum_qty: Decimal::from(qty),
            execution_id: None,
            time,
            synthesised: false,
        }
    }

    #[test]
    fn sells_close_the_oldest_buys_first_with_both_sides_fees() {
        // 10 at 100, 10 at 110; sell 15 at 120: 10 from the first lot, 5 from the second. Fees 10 bps.
        let fills = [
            fill("AAPL", Side::Sell, 3, 90, 3), // given out of order: sorted by time
            fill("AAPL", Side::Buy, 10, 100, 0),
            fill("AAPL", Side::Buy, 10, 110, 1),
            fill("AAPL", Side::Sell, 15, 120, 2),
            fill("MSFT", Side::Buy, 4, 50, 0),
        ];
        let (closed, open) = round_trips(&fills, 10.0);
        assert_eq!(closed.len(), 3);
        let (a, b, c) = (&closed[0], &closed[1], &closed[2]);
        assert_eq!((a.qty, a.entry_price, a.exit_price), (10.0, 100.0, 120.0));
        assert!((a.fees - 10.0 * (0.1 + 0.12)).abs() < 1e-9, "{}", a.fees);
        assert!((a.pnl - (200.0 - 2.2)).abs() < 1e-9, "{}", a.pnl);
        assert_eq!((b.qty, b.entry_price), (5.0, 110.0));
        // The last sell (3 at 90) closes 3 of the 5 left at 110: a loss.
        assert_eq!((c.qty, c.entry_price, c.exit_price), (3.0, 110.0, 90.0));
        assert!(c.pnl < -60.0);
        let aapl = &open[&Symbol::new("AAPL").unwrap()];
        assert_eq!((aapl.qty, aapl.avg_entry), (2.0, 110.0));
        assert_eq!(open[&Symbol::new("MSFT").unwrap()].qty, 4.0);
    }

    #[test]
    fn a_sell_beyond_the_holding_closes_what_is_held() {
        let (closed, open) = round_trips(&[fill("IBM", Side::Buy, 2, 10, 0), fill("IBM", Side::Sell, 5, 12, 1)], 0.0);
        assert_eq!(closed.len(), 1);
        assert_eq!((closed[0].qty, closed[0].pnl), (2.0, 4.0));
        assert!(open.is_empty());
    }
}
