//! Single risk checks on their own: an order's notional (quantity × the price it was sized at) under a
//! cap (the live runner's scripted core, engines without the full checks), and a sell that only reduces
//! a holding (stops and flattens of an engine without the full checks). The full checks live beside them.

use super::RiskApproved;
use crate::domain::OrderRequest;
use rust_decimal::Decimal;

#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub(crate) enum NotionalRefusal {
    #[error("order {id}: reference price {price} is not a finite positive number")]
    BadPrice { id: String, price: f64 },
    #[error("order {id}: notional {notional:.2} is above the cap {cap:.2}")]
    AboveCap { id: String, notional: Decimal, cap: Decimal },
    #[error("order {id}: only a sell of at most the {held} held may pass here, not a {side} of {qty}")]
    NotReducing { id: String, side: crate::domain::Side, qty: Decimal, held: Decimal },
}

/// Approves `req` when it sells at most `held` units at a finite positive price: it can only reduce a
/// position (what a stop or a flatten sends), so no cap applies.
pub(crate) fn approve_reducing_sell(
    req: OrderRequest,
    held: Decimal,
) -> Result<RiskApproved<OrderRequest>, NotionalRefusal> {
    let id = req.client_order_id.to_string();
    if !(req.ref_price.is_finite() && req.ref_price > 0.0) {
        return Err(NotionalRefusal::BadPrice { id, price: req.ref_price });
    }
    let qty = req.qty.get();
    if req.side != crate::domain::Side::Sell || qty > held {
        return Err(NotionalRefusal::NotReducing { id, side: req.side, qty, held });
    }
    Ok(RiskApproved::new(req))
}

/// Approves `req` when `qty × ref_price <= cap`.
pub(crate) fn approve_notional(req: OrderRequest, cap: Decimal) -> Result<RiskApproved<OrderRequest>, NotionalRefusal> {
    let id = req.client_order_id.to_string();
    let price = Decimal::from_f64_retain(req.ref_price)
        .filter(|p| *p > Decimal::ZERO)
        .ok_or(NotionalRefusal::BadPrice { id: id.clone(), price: req.ref_price })?;
    let notional = req.qty.get() * price;
    if notional > cap {
        return Err(NotionalRefusal::AboveCap { id, notional, cap });
    }
    Ok(RiskApproved::new(req))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::{ClientOrderId, OrderTif, Qty, Side, Symbol};
    use chrono::DateTime;

    fn req(qty: i64, price: f64) -> OrderRequest {
        let s = Symbol::new("AAPL").unwrap();
        let t = DateTime::from_timestamp(0, 0).unwrap();
        OrderRequest {
            client_order_id: ClientOrderId::derive("t", &s, t, 0),
            symbol: s,
            side: Side::Buy,
            qty: Qty::new(Decimal::from(qty)).unwrap(),
            tif: OrderTif::Day,
            bar_time: t,
            ref_price: price,
            why: crate::domain::OrderWhy::Model,
        }
    }

    #[test]
    fn caps_the_notional_and_refuses_bad_prices() {
        assert!(approve_notional(req(2, 50.0), Decimal::from(100)).is_ok());
        assert!(matches!(approve_notional(req(3, 50.0), Decimal::from(100)), Err(NotionalRefusal::AboveCap { .. })));
        assert!(matches!(
            approve_notional(req(1, f64::NAN), Decimal::from(100)),
            Err(NotionalRefusal::BadPrice { .. })
        ));
        assert!(matches!(approve_notional(req(1, 0.0), Decimal::from(100)), Err(NotionalRefusal::BadPrice { .. })));
    }

    #[test]
    fn a_reducing_sell_passes_and_nothing_else() {
        let sell = |qty| OrderRequest { side: Side::Sell, ..req(qty, 50.0) };
        assert!(approve_reducing_sell(sell(5), Decimal::from(5)).is_ok());
        assert!(matches!(approve_reducing_sell(sell(6), Decimal::from(5)), Err(NotionalRefusal::NotReducing { .. })));
        assert!(matches!(
            approve_reducing_sell(req(1, 50.0), Decimal::from(5)),
            Err(NotionalRefusal::NotReducing { .. })
        ));
        let nan = OrderRequest { ref_price: f64::NAN, ..sell(1) };
        assert!(matches!(approve_reducing_sell(nan, Decimal::from(5)), Err(NotionalRefusal::BadPrice { .. })));
    }
}
