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

    /// Alpaca's (and the logs') name: `day`, `gtc`, `ioc`.
    pub fn as_str(self) -> &'static str {
        match self {
            OrderTif::Day => "day",
            OrderTif::Gtc => "gtc",
            OrderTif::Ioc => "ioc",
        }
    }
}

/// Why an order was sent: the model's decision, or one of the protective sells (a trailing stop, the kill
/// switch's flatten, a flatten asked for by a person), or an order a person placed through tradebot.
/// Protective sells are never refused as stale: they are priced from the freshest price and always go out.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum OrderWhy {
    /// The policy's decision on a bar (the default, also for records stored before the field existed).
    #[default]
    Model,
    /// A trailing stop was hit: sells the position.
    Stop,
    /// The kill switch tripped and flattens the account.
    KillSwitch,
    /// A person asked for a flatten (over the control socket): sells every position.
    Flatten,
    /// An order a person placed through tradebot, not decided by the model.
    Manual,
}

impl OrderWhy {
    /// A sell that protects the account (stop, kill switch, flatten).
    pub fn is_protective(self) -> bool {
        matches!(self, OrderWhy::Stop | OrderWhy::KillSwitch | OrderWhy::Flatten)
    }

    /// The reason as logs, alerts and the status report write it: `model`, `stop`, `kill switch`, ...
    pub fn as_str(self) -> &'static str {
        match self {
            OrderWhy::Model => "model",
            OrderWhy::Stop => "stop",
            OrderWhy::KillSwitch => "kill switch",
            OrderWhy::Flatten => "flatten",
            OrderWhy::Manual => "manual",
        }
    }
}

impl std::fmt::Display for OrderWhy {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A market order for `qty` units, decided on the bar that closed at `bar_time`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct OrderRequest {
    /// Deterministic (`ClientOrderId::derive`): the same decision after a crash gives the same id.
    pub client_order_id: ClientOrderId,
    /// The instrument to trade.
    pub symbol: Symbol,
    /// Buy or sell.
    pub side: Side,
    /// The units to trade, above zero (fractional shares allowed where the asset is fractionable).
    pub qty: Qty,
    /// How long the order stays working (`OrderTif::for_asset`: `day` for stocks, `gtc` for crypto).
    pub tif: OrderTif,
    /// The close time of the bar the decision was taken on.
    pub bar_time: DateTime<Utc>,
    /// The price the decision was sized at (the bar's close), for notional checks and logs.
    pub ref_price: f64,
    /// Why it is sent (records stored before this field read as the model's).
    #[serde(default)]
    pub why: OrderWhy,
}
