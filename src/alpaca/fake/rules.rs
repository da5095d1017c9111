//! Alpaca's order rules, as the fake applies them to a new order, with Alpaca's status codes and
//! messages (shared/alpaca-protocol.md, "POST /v2/orders body" and "Errors"):
//! - time in force per asset class: crypto takes only `gtc` and `ioc` (422 "invalid crypto
//!   time_in_force"); a fractional or notional stock order only `day` (422 "fractional orders must be
//!   DAY orders");
//! - crypto quantities: at least the pair's minimum order size, in whole steps of its quantity increment,
//!   limit prices in whole steps of its price increment (422); an order worth at least $1 (403 "cost basis
//!   must be >= minimal amount of order 1"); no selling more than the balance not already held for open
//!   sells (403 "insufficient balance for BTC ...": crypto is never sold short);
//! - wash-trade prevention (Alpaca's "User Protection", crypto included): an order that could execute
//!   against an open order of the other side of the same symbol is refused (403 "potential wash trade
//!   detected. use complex orders"): a market order against any such order, a limit order against an
//!   opposite market order or an opposite limit its price crosses.

use crate::alpaca::wire::rest as w;
use rust_decimal::Decimal;

/// Why an order was refused: HTTP status and Alpaca's error body.
pub type Refusal = (u16, w::ErrorBody);

pub(super) fn refusal(status: u16, code: i64, message: &str) -> Refusal {
    (status, w::ErrorBody { code: Some(code), message: message.into() })
}

/// The fake's crypto pairs' asset facts (served by `/v2/assets`): minimum order size 0.0001, quantity
/// increment 0.000000001 (Alpaca's nine decimal places), price increment 0.01.
pub const CRYPTO_MIN_ORDER_SIZE: Decimal = Decimal::from_parts(1, 0, 0, false, 4);
/// The quantity step of the fake's crypto orders: 0.000000001 (see above).
pub const CRYPTO_MIN_TRADE_INCREMENT: Decimal = Decimal::from_parts(1, 0, 0, false, 9);
/// The price step of the fake's crypto limit orders: $0.01 (see above).
pub const CRYPTO_PRICE_INCREMENT: Decimal = Decimal::from_parts(1, 0, 0, false, 2);
/// Alpaca's smallest crypto order value, in dollars.
pub const CRYPTO_MIN_NOTIONAL: Decimal = Decimal::ONE;

/// Alpaca's message refusing an order that could trade against an open order of the other side (HTTP 403).
pub const WASH_TRADE: &str = "potential wash trade detected. use complex orders";

/// Crypto pairs are named with a slash (`BTC/USD`), as Alpaca's orders and assets name them.
pub fn is_crypto(symbol: &str) -> bool {
    symbol.contains('/')
}

/// The time in force Alpaca gives a position's closing order: crypto takes no `day`.
pub fn closing_tif(symbol: &str) -> w::TimeInForce {
    if is_crypto(symbol) { w::TimeInForce::Gtc } else { w::TimeInForce::Day }
}

/// An order that may still execute.
pub fn is_open(o: &w::Order) -> bool {
    matches!(
        o.status,
        w::OrderStatus::New
            | w::OrderStatus::Accepted
            | w::OrderStatus::PartiallyFilled
            | w::OrderStatus::PendingNew
            | w::OrderStatus::AcceptedForBidding
            | w::OrderStatus::Held
            | w::OrderStatus::PendingCancel
            | w::OrderStatus::PendingReplace
    )
}

fn decimal(s: Option<&str>) -> Option<Decimal> {
    s.and_then(|s| s.parse::<Decimal>().ok())
}

/// Time in force and quantity form (422), before the quantity's own check: `qty` is the positive
/// quantity sent, if any.
pub(super) fn order_form(req: &w::OrderRequest, qty: Option<Decimal>) -> Result<(), Refusal> {
    let tif = req.time_in_force;
    if !is_crypto(&req.symbol) {
        let fractional = qty.is_some_and(|q| !q.fract().is_zero()) || req.notional.is_some();
        if fractional && tif != w::TimeInForce::Day {
            return Err(refusal(422, 42210000, "fractional orders must be DAY orders"));
        }
        return Ok(());
    }
    if !matches!(tif, w::TimeInForce::Gtc | w::TimeInForce::Ioc) {
        return Err(refusal(422, 42210000, "invalid crypto time_in_force"));
    }
    // Alpaca does not document its wording for these three; the status and code are its usual 422.
    if let Some(q) = qty {
        if q < CRYPTO_MIN_ORDER_SIZE {
            return Err(refusal(422, 42210000, &format!("qty must be >= {CRYPTO_MIN_ORDER_SIZE}")));
        }
        if !(q % CRYPTO_MIN_TRADE_INCREMENT).is_zero() {
            return Err(refusal(422, 42210000, &format!("qty must be in increments of {CRYPTO_MIN_TRADE_INCREMENT}")));
        }
    }
    if let Some(lp) = decimal(req.limit_price.as_deref())
        && !(lp % CRYPTO_PRICE_INCREMENT).is_zero()
    {
        return Err(refusal(422, 42210000, &format!("limit_price must be in increments of {CRYPTO_PRICE_INCREMENT}")));
    }
    Ok(())
}

/// Wash-trade prevention: `limit` is the new order's limit price (`None` for a market order).
pub(super) fn wash_trade(req: &w::OrderRequest, limit: Option<Decimal>, orders: &[w::Order]) -> Result<(), Refusal> {
    let could_execute = |o: &w::Order| match (limit, o.kind, decimal(o.limit_price.as_deref())) {
        (Some(ours), w::OrderType::Limit, Some(theirs)) => {
            if req.side == w::Side::Buy {
                ours >= theirs
            } else {
                ours <= theirs
            }
        }
        // A market order on either side (or a stop, which may become one) can execute at any price.
        _ => true,
    };
    let conflict = req.side != w::Side::Unknown
        && orders.iter().any(|o| o.symbol == req.symbol && o.side != req.side && is_open(o) && could_execute(o));
    if conflict { Err(refusal(403, 40310000, WASH_TRADE)) } else { Ok(()) }
}

/// A crypto order's value and, for a sell, the balance (403): `price` is its limit or the market price;
/// `held` the units held.
pub(super) fn crypto_funds(
    req: &w::OrderRequest,
    qty: Decimal,
    price: Decimal,
    held: Decimal,
    orders: &[w::Order],
) -> Result<(), Refusal> {
    if qty * price < CRYPTO_MIN_NOTIONAL {
        return Err(refusal(403, 40310000, "cost basis must be >= minimal amount of order 1"));
    }
    if req.side != w::Side::Sell {
        return Ok(());
    }
    let selling: Decimal = orders
        .iter()
        .filter(|o| o.symbol == req.symbol && o.side == w::Side::Sell && is_open(o))
        .map(|o| decimal(o.qty.as_deref()).unwrap_or_default() - decimal(o.filled_qty.as_deref()).unwrap_or_default())
        .sum();
    let available = (held - selling).max(Decimal::ZERO);
    if qty > available {
        let base = req.symbol.split('/').next().unwrap_or(&req.symbol);
        let msg = format!("insufficient balance for {base} (requested: {qty}, available: {available})");
        return Err(refusal(403, 40310000, &msg));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::super::Book;
    use super::*;

    fn req(symbol: &str, side: w::Side, qty: &str, tif: w::TimeInForce, coid: &str) -> w::OrderRequest {
        w::OrderRequest {
            symbol: symbol.into(),
            qty: Some(qty.into()),
            notional: None,
            side,
            kind: w::OrderType::Market,
            time_in_force: tif,
            limit_price: None,
            stop_price: None,
            extended_hours: None,
            client_order_id: Some(coid.into()),
        }
    }

    fn limit(mut r: w::OrderRequest, price: &str) -> w::OrderRequest {
        r.kind = w::OrderType::Limit;
        r.limit_price = Some(price.into());
        r
    }

    fn book() -> Book {
        let mut b = Book::new(Decimal::from(100_000));
        b.prices.insert("BTC/USD".into(), Decimal::from(50_000));
        b.prices.insert("AAPL".into(), Decimal::from(100));
        b
    }

    fn refused(b: &mut Book, r: &w::OrderRequest) -> (u16, Option<i64>, String) {
        let (status, body) = b.submit(r).unwrap_err();
        (status, body.code, body.message)
    }

    use crate::alpaca::wire::rest::Side::{Buy, Sell};
    use crate::alpaca::wire::rest::TimeInForce::{Day, Gtc, Ioc};

    #[test]
    fn crypto_takes_gtc_or_ioc_and_fractional_stock_orders_day() {
        let mut b = book();
        let day = req("BTC/USD", Buy, "0.01", Day, "a");
        assert_eq!(refused(&mut b, &day), (422, Some(42210000), "invalid crypto time_in_force".into()));
        assert_eq!(b.refused.len(), 1, "recorded");
        let o = b.submit(&req("BTC/USD", Buy, "0.01", Gtc, "b")).unwrap();
        assert_eq!((o.status, o.time_in_force), (w::OrderStatus::Filled, Gtc));
        b.submit(&req("BTC/USD", Sell, "0.005", Ioc, "c")).unwrap();
        // Stocks: whole shares take any time in force; fractional ones only `day`.
        b.submit(&req("AAPL", Buy, "2", Gtc, "d")).unwrap();
        let frac = req("AAPL", Buy, "0.5", Gtc, "e");
        assert_eq!(refused(&mut b, &frac), (422, Some(42210000), "fractional orders must be DAY orders".into()));
        b.submit(&req("AAPL", Buy, "0.5", Day, "f")).unwrap();
        let notional = w::OrderRequest { qty: None, notional: Some("50".into()), ..req("AAPL", Buy, "1", Gtc, "g") };
        assert_eq!(refused(&mut b, &notional).2, "fractional orders must be DAY orders");
    }

    #[test]
    fn crypto_quantities_keep_to_the_pairs_steps_minimums_and_balance() {
        let mut b = book();
        assert_eq!(refused(&mut b, &req("BTC/USD", Buy, "0.00005", Gtc, "a")).0, 422, "under the minimum size");
        assert_eq!(refused(&mut b, &req("BTC/USD", Buy, "0.0100000001", Gtc, "b")).0, 422, "ten decimal places");
        let lp = limit(req("BTC/USD", Buy, "0.01", Gtc, "c"), "49999.995");
        assert_eq!(refused(&mut b, &lp).0, 422, "a price under the price increment");
        b.prices.insert("BTC/USD".into(), Decimal::from(5_000));
        let small = req("BTC/USD", Buy, "0.0001", Gtc, "d");
        assert_eq!(
            refused(&mut b, &small),
            (403, Some(40310000), "cost basis must be >= minimal amount of order 1".into())
        );
        b.submit(&req("BTC/USD", Buy, "0.5", Gtc, "e")).unwrap();
        let (status, code, msg) = refused(&mut b, &req("BTC/USD", Sell, "0.6", Gtc, "f"));
        assert_eq!((status, code), (403, Some(40310000)));
        assert_eq!(msg, "insufficient balance for BTC (requested: 0.6, available: 0.5)");
        // Units an open sell holds are not available to another.
        b.hold_orders = true;
        b.submit(&req("BTC/USD", Sell, "0.3", Gtc, "g")).unwrap();
        let msg = refused(&mut b, &limit(req("BTC/USD", Sell, "0.3", Gtc, "h"), "6000")).2;
        assert_eq!(msg, "insufficient balance for BTC (requested: 0.3, available: 0.2)");
    }

    #[test]
    fn an_order_that_could_trade_against_our_own_opposite_order_is_a_wash_trade() {
        let mut b = book();
        b.submit(&req("BTC/USD", Buy, "1", Gtc, "held")).unwrap();
        b.hold_orders = true;
        let buy = b.submit(&req("BTC/USD", Buy, "0.5", Gtc, "buy")).unwrap();
        assert_eq!(buy.status, w::OrderStatus::New, "working");
        let wash = (403, Some(40310000), WASH_TRADE.to_string());
        assert_eq!(refused(&mut b, &req("BTC/USD", Sell, "0.5", Gtc, "s1")), wash, "a market sell");
        assert_eq!(
            refused(&mut b, &limit(req("BTC/USD", Sell, "0.5", Gtc, "s2"), "60000")),
            wash,
            "against a market buy"
        );
        // Another symbol, or the same side, is no wash trade.
        b.submit(&req("AAPL", Buy, "1", Day, "aapl")).unwrap();
        b.submit(&req("BTC/USD", Buy, "0.1", Gtc, "buy2")).unwrap();
        // Limits against limits: only prices that cross conflict.
        let mut b = book();
        b.hold_orders = true;
        b.submit(&req("AAPL", Buy, "10", Day, "own")).unwrap();
        b.fill_held();
        b.submit(&limit(req("AAPL", Buy, "1", Day, "bid"), "90")).unwrap();
        b.submit(&limit(req("AAPL", Sell, "1", Day, "ask"), "95")).unwrap();
        assert_eq!(refused(&mut b, &limit(req("AAPL", Sell, "1", Day, "x"), "89")), wash, "a sell at or under our bid");
        assert_eq!(refused(&mut b, &limit(req("AAPL", Buy, "1", Day, "y"), "95")), wash, "a buy at or over our ask");
        assert_eq!(refused(&mut b, &req("AAPL", Buy, "1", Day, "z")), wash, "a market buy against our ask");
        // Once the buy is canceled, the sell goes through.
        let mut b = book();
        b.submit(&req("BTC/USD", Buy, "1", Gtc, "held")).unwrap();
        b.hold_orders = true;
        let open = b.submit(&req("BTC/USD", Buy, "0.5", Gtc, "buy")).unwrap();
        assert_eq!(refused(&mut b, &req("BTC/USD", Sell, "1", Gtc, "sell")), wash);
        b.cancel(&open.id).unwrap();
        assert_eq!(b.submit(&req("BTC/USD", Sell, "1", Gtc, "sell2")).unwrap().status, w::OrderStatus::New);
    }
}
