//! The simulated broker as a broker: orders are taken, held until the next bar, then filled through the
//! execution rule (`SimBroker::step`) and reported as Alpaca reports a day order: filled, filled in part
//! (the rest canceled) or canceled unfilled. `Broker` is implemented on the same calls, so a runner can
//! talk to it as to Alpaca; its fills still come from whoever drives `fill_pending` with the bars' prices.

use super::{SimBroker, SimError, SimFill, SimOrder};
use crate::broker::{Broker, BrokerError};
use crate::contract::BrokerSnapshot;
use crate::domain::{BrokerOrder, ClientOrderId, OrderId, OrderRequest, OrderStatus, Side, Symbol};
use crate::risk::RiskApproved;
use chrono::{DateTime, Utc};
use rust_decimal::Decimal;
use rust_decimal::prelude::ToPrimitive;

impl SimBroker {
    /// Takes an approved order; it fills at the next `fill_pending`. An order whose client id is already
    /// pending is not taken twice (the broker's idempotency by client order id).
    pub(crate) fn queue(&mut self, order: RiskApproved<OrderRequest>) -> Option<BrokerOrder> {
        let order = order.into_inner();
        if let Some(o) = self.pending.iter().find(|o| o.client_order_id == order.client_order_id) {
            return report(o, 0.0, 0.0, self.at, OrderStatus::Accepted);
        }
        let r = report(&order, 0.0, 0.0, self.at, OrderStatus::Accepted);
        self.pending.push(order);
        r
    }

    /// One bar at time `t`: the pending orders fill at `prices` through the execution rule. Returns the
    /// broker's view after it (each order filled, or canceled when the rule dropped it; positions; cash),
    /// for the engine's reconciliation, and the fills.
    pub(crate) fn fill_pending(
        &mut self,
        prices: &[(Symbol, f64)],
        t: DateTime<Utc>,
    ) -> Result<(BrokerSnapshot, Vec<SimFill>), SimError> {
        let orders: Vec<SimOrder> =
            self.pending.iter().map(|r| SimOrder { symbol: r.symbol.clone(), side: r.side, qty: qty_f64(r) }).collect();
        let fills = self.step(prices, &orders)?;
        self.at = Some(t);
        self.closed = self
            .pending
            .drain(..)
            .filter_map(|r| {
                let f = fills.iter().find(|f| f.symbol == r.symbol && !f.stopped);
                let filled = f.map_or(0.0, |f| if (f.qty > 0.0) == (r.side == Side::Buy) { f.qty.abs() } else { 0.0 });
                let status = if filled >= qty_f64(&r) { OrderStatus::Filled } else { OrderStatus::Canceled };
                report(&r, filled, f.map_or(0.0, |f| f.price), Some(t), status)
            })
            .collect();
        Ok((self.view(), fills))
    }

    /// The broker's view now: open orders, the orders the last bar closed, positions, cash and equity.
    pub(crate) fn view(&self) -> BrokerSnapshot {
        let mut orders = self.closed.clone();
        orders.extend(self.pending.iter().filter_map(|r| report(r, 0.0, 0.0, self.at, OrderStatus::Accepted)));
        let positions =
            self.positions.iter().filter(|(_, p)| p.holding != 0.0).map(|(s, p)| (s.clone(), dec(p.holding))).collect();
        BrokerSnapshot { orders, positions, cash: dec(self.cash()), equity: dec(self.equity()), taken_at: self.at }
    }
}

impl Broker for SimBroker {
    async fn submit(&mut self, order: RiskApproved<OrderRequest>) -> Result<BrokerOrder, BrokerError> {
        if !self.prices.contains_key(&order.symbol) {
            return Err(BrokerError::Rejected(format!(
                "the simulated broker has no price for {} yet: it fills only symbols it has seen a bar of",
                order.symbol
            )));
        }
        let id = order.client_order_id.clone();
        self.queue(order).ok_or_else(|| BrokerError::Rejected(format!("order {id}: no broker id can be made for it")))
    }

    async fn cancel(&mut self, id: &ClientOrderId) -> Result<(), BrokerError> {
        let before = self.pending.len();
        self.pending.retain(|o| &o.client_order_id != id);
        if self.pending.len() == before {
            return Err(BrokerError::Rejected(format!("order {id} is not open: it filled or was canceled")));
        }
        Ok(())
    }

    async fn snapshot(&mut self) -> Result<BrokerSnapshot, BrokerError> {
        Ok(self.view())
    }
}

/// Money and quantities from the rule's floats, as the backtest has always reported them.
fn dec(x: f64) -> Decimal {
    Decimal::from_f64_retain(x).unwrap_or_default()
}

fn qty_f64(r: &OrderRequest) -> f64 {
    r.qty.get().to_f64().unwrap_or(0.0)
}

/// An order as the broker reports it (`None` only if its id were blank, which "sim-..." never is).
fn report(
    r: &OrderRequest,
    filled: f64,
    price: f64,
    t: Option<DateTime<Utc>>,
    status: OrderStatus,
) -> Option<BrokerOrder> {
    Some(BrokerOrder {
        id: OrderId::new(&format!("sim-{}", r.client_order_id)).ok()?,
        client_order_id: Some(r.client_order_id.clone()),
        raw_client_order_id: r.client_order_id.to_string(),
        symbol: r.symbol.clone(),
        side: r.side,
        qty: Some(r.qty.get()),
        notional: None,
        filled_qty: dec(filled),
        filled_avg_price: (filled > 0.0).then(|| dec(price)),
        limit_price: None,
        broker_status: match status {
            OrderStatus::Filled => "filled",
            OrderStatus::Canceled => "canceled",
            _ => "accepted",
        }
        .into(),
        status,
        created_at: t,
    })
}
