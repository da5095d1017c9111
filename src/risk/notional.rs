//! One risk check on its own: an order's notional (quantity × the price it was sized at) under a cap.
//! Used by the live runner's scripted core; the engine's full checks live beside it.

use super::RiskApproved;
use crate::domain::OrderRequest;
use rust_decimal::Decimal;

#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum NotionalRefusal {
    #[error("order {id}: reference price {price} is not a finite positive number")]
    BadPrice { id: String, price: f64 },
    #[error("order {id}: notional {notional} is above the cap {cap}")]
    AboveCap { id: String, notional: Decimal, cap: Decimal },
}

/// Approves `req` when `qty × ref_price <= cap`.
pub fn approve_notional(req: OrderRequest, cap: Decimal) -> Result<RiskApproved<OrderRequest>, NotionalRefusal> {
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
}
