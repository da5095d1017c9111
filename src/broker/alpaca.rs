//! `AlpacaBroker`: the `Broker` trait over Alpaca's trading REST API (`alpaca::rest::RestClient`).
//!
//! - `submit`: checks the asset (tradable, fractionable when the quantity is fractional, at least its
//!   `min_order_size`; looked up once per symbol) and sends a market order with our client_order_id
//!   through `RestClient::submit_order`, which never sends an order twice (after an ambiguous failure it
//!   looks the order up by client_order_id first).
//! - `cancel`: finds the order by client_order_id and cancels it by Alpaca's id.
//! - `snapshot`: every open order, the orders of the last `lookback` (open or closed, up to 500), the
//!   positions and the account: what the OMS reconciles against.
//!
//! REST errors map onto `BrokerError` by what they mean for the order: refused, outcome unknown,
//! unavailable for now, or keys refused.

use super::{Broker, BrokerError};
use crate::alpaca::event::BrokerOrder;
use crate::alpaca::model::Asset;
use crate::alpaca::rest::{
    CancelOrder, GetAccount, GetAsset, GetOrderByClientId, ListOrders, ListOrdersQuery, ListPositions, NewOrder,
    OrderFilter, OrderKind, RestClient, RestError, TimeInForce,
};
use crate::domain::{ClientOrderId, OrderRequest, OrderTif, Symbol};
use crate::engine::BrokerSnapshot;
use crate::risk::RiskApproved;
use chrono::Utc;
use rust_decimal::Decimal;
use std::collections::HashMap;

pub struct AlpacaBroker {
    rest: RestClient,
    /// Closed orders younger than this are part of every snapshot.
    lookback: chrono::Duration,
    assets: HashMap<Symbol, Asset>,
}

impl AlpacaBroker {
    pub fn new(rest: RestClient) -> Self {
        AlpacaBroker { rest, lookback: chrono::Duration::days(7), assets: HashMap::new() }
    }

    /// How far back a snapshot lists closed orders (default 7 days).
    pub fn with_lookback(mut self, lookback: chrono::Duration) -> Self {
        self.lookback = lookback;
        self
    }

    async fn asset(&mut self, symbol: &Symbol) -> Result<Asset, BrokerError> {
        if let Some(a) = self.assets.get(symbol) {
            return Ok(a.clone());
        }
        let a = self.rest.issue::<GetAsset>(symbol).await.map_err(|e| map_error(e, false))?;
        self.assets.insert(symbol.clone(), a.clone());
        Ok(a)
    }

    async fn list(
        &self,
        status: OrderFilter,
        after: Option<chrono::DateTime<Utc>>,
    ) -> Result<Vec<BrokerOrder>, BrokerError> {
        let q = ListOrdersQuery { status, limit: 500, after, symbols: Vec::new() };
        self.rest.issue::<ListOrders>(&q).await.map_err(|e| map_error(e, false))
    }
}

/// Why an order may not go to Alpaca as asked, from the asset's facts; `None` when it may.
pub fn asset_refusal(asset: &Asset, qty: Decimal) -> Option<String> {
    if !asset.tradable {
        return Some(format!("{} is not tradable at Alpaca", asset.symbol));
    }
    if qty.fract() != Decimal::ZERO && !asset.fractionable {
        return Some(format!("{} is not fractionable: quantity {qty} must be whole", asset.symbol));
    }
    match asset.min_order_size {
        Some(min) if qty < min => Some(format!("quantity {qty} is below {}'s minimum order size {min}", asset.symbol)),
        _ => None,
    }
}

/// A REST error in the broker's terms. `submitting`: the call was an order POST, whose outcome is
/// unknown after a server error, a timeout or an unreadable reply.
pub fn map_error(e: RestError, submitting: bool) -> BrokerError {
    let msg = e.to_string();
    match e {
        RestError::Auth { .. } => BrokerError::Auth(msg),
        RestError::Forbidden { .. }
        | RestError::InsufficientBuyingPower { .. }
        | RestError::NotFound { .. }
        | RestError::DuplicateClientOrderId { .. }
        | RestError::Unprocessable { .. }
        | RestError::Request { .. } => BrokerError::Rejected(msg),
        RestError::Server { .. } | RestError::Timeout { .. } | RestError::Transport { .. } => {
            if submitting {
                BrokerError::Ambiguous(msg)
            } else {
                BrokerError::Unavailable(msg)
            }
        }
        RestError::Decode { .. } | RestError::Unexpected { .. } if submitting => BrokerError::Ambiguous(msg),
        RestError::RateLimited { .. } | RestError::Decode { .. } | RestError::Unexpected { .. } => {
            BrokerError::Unavailable(msg)
        }
    }
}

impl Broker for AlpacaBroker {
    /// Not cancellation-safe: dropped mid-way, the order's fate is unknown until a reconciliation.
    async fn submit(&mut self, order: RiskApproved<OrderRequest>) -> Result<BrokerOrder, BrokerError> {
        let asset = self.asset(&order.symbol).await?;
        if let Some(why) = asset_refusal(&asset, order.qty.get()) {
            return Err(BrokerError::Rejected(why));
        }
        let new = NewOrder {
            symbol: order.symbol.clone(),
            side: order.side,
            qty: order.qty,
            kind: OrderKind::Market,
            time_in_force: match order.tif {
                OrderTif::Day => TimeInForce::Day,
                OrderTif::Gtc => TimeInForce::Gtc,
            },
            client_order_id: order.client_order_id.clone(),
        };
        self.rest.submit_order(&new).await.map_err(|e| map_error(e, true))
    }

    /// Cancellation-safe: a cancel may be repeated.
    async fn cancel(&mut self, id: &ClientOrderId) -> Result<(), BrokerError> {
        let o = self.rest.issue::<GetOrderByClientId>(id).await.map_err(|e| map_error(e, false))?;
        self.rest.issue::<CancelOrder>(&o.id).await.map_err(|e| map_error(e, false))
    }

    /// Cancellation-safe: read-only.
    async fn snapshot(&mut self) -> Result<BrokerSnapshot, BrokerError> {
        let taken_at = Utc::now();
        let mut orders = self.list(OrderFilter::All, Some(taken_at - self.lookback)).await?;
        for o in self.list(OrderFilter::Open, None).await? {
            if !orders.iter().any(|x| x.id == o.id) {
                orders.push(o);
            }
        }
        let positions = self.rest.issue::<ListPositions>(&()).await.map_err(|e| map_error(e, false))?;
        let account = self.rest.issue::<GetAccount>(&()).await.map_err(|e| map_error(e, false))?;
        Ok(BrokerSnapshot {
            orders,
            positions: positions.into_iter().map(|p| (p.symbol, p.qty)).collect(),
            cash: account.cash,
            equity: account.equity,
            taken_at: Some(taken_at),
        })
    }
}

#[cfg(test)]
mod tests;
