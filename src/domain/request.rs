//! `OrderRequest`: what the engine wants a broker to do, before any broker's spelling of it. Only
//! `risk::RiskApproved<OrderRequest>` reaches a broker.

use super::{ClientOrderId, Qty, Side, Symbol};
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

/// How long an order stays working.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum OrderTif {
    /// Until the end of the trading day: stocks (fractional and notional stock orders take only this).
    Day,
    /// Until filled or canceled: crypto, which Alpaca takes only as `gtc` or `ioc`.
    Gtc,
    /// Fill what can be filled at once, cancel the rest.
    Ioc,
}

impl OrderTif {
    /// The time in force of tradebot's orders by asset class, the one place it is chosen: crypto `gtc`
    /// (Alpaca refuses `day` for crypto: 422 "invalid crypto time_in_force"), stocks `day` (the only one
    /// Alpaca takes for fractional and notional stock orders).
    pub fn for_asset(crypto: bool) -> Self {
        if crypto { OrderTif::Gtc } else { OrderTif::Day }
    }
}

/// A market order for `qty` units, decided on the bar that closed at `bar_time`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct OrderRequest {
    /// Deterministic (`ClientOrderId::derive`): the same decision after a crash gives the same id.
    pub client_order_id: ClientOrderId,
    pub symbol: Symbol,
    pub side: Side,
    pub qty: Qty,
    pub tif: OrderTif,
    /// The close time of the bar the decision was taken on.
    pub bar_time: DateTime<Utc>,
    /// The price the decision was sized at (the bar's close), for notional checks and logs.
    pub ref_price: f64,
}
