//! What a broker reports about an order, in the domain's terms: its state (`BrokerOrder`), a fill, and an
//! update event (`OrderUpdate`) with the lifecycle event it drives. Alpaca's wire types are parsed into
//! these (`alpaca::parse`); the engine, the order manager and the simulated broker see only these.

use super::{ClientOrderId, OrderEvent, OrderId, OrderStatus, Side, Symbol};
use chrono::{DateTime, Utc};
use rust_decimal::Decimal;

/// Every trade_updates event, in domain spelling.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum UpdateKind {
    /// `new`: the order was routed to the exchange and is working.
    New,
    /// `fill`: the order filled completely; carries the last fill.
    Fill,
    /// `partial_fill`: part of the order filled; carries that fill.
    PartialFill,
    /// `canceled`: the order was canceled (partial fills stand).
    Canceled,
    /// `expired`: the order's time in force ran out.
    Expired,
    /// `done_for_day`: no more fills today; the order may resume the next day (informational).
    DoneForDay,
    /// `replaced`: the order was replaced by another.
    Replaced,
    /// `accepted`: Alpaca took the order but has not routed it yet.
    Accepted,
    /// `rejected`: Alpaca or the exchange refused the order.
    Rejected,
    /// `pending_new`: received and routed, not yet accepted for execution by the exchange.
    PendingNew,
    /// `stopped`: a fill is guaranteed but not yet made (informational).
    Stopped,
    /// `pending_cancel`: a cancel was asked for and is not yet confirmed.
    PendingCancel,
    /// `pending_replace`: a replace was asked for and is not yet confirmed (informational).
    PendingReplace,
    /// `calculated`: done for the day (filled or not), settlement calculations pending (informational).
    Calculated,
    /// `suspended`: the order is suspended and cannot trade (informational).
    Suspended,
    /// `order_replace_rejected`: a replace was refused; the order carries on (informational).
    OrderReplaceRejected,
    /// `order_cancel_rejected`: a cancel was refused; the order carries on.
    OrderCancelRejected,
    /// `restated`: the order's details were restated by the broker (informational).
    Restated,
}

impl UpdateKind {
    /// The event's name as Alpaca's trade_updates stream spells it (`partial_fill`, `done_for_day`): the
    /// `status` label of `tradebot_orders_total`.
    pub fn as_str(self) -> &'static str {
        match self {
            UpdateKind::New => "new",
            UpdateKind::Fill => "fill",
            UpdateKind::PartialFill => "partial_fill",
            UpdateKind::Canceled => "canceled",
            UpdateKind::Expired => "expired",
            UpdateKind::DoneForDay => "done_for_day",
            UpdateKind::Replaced => "replaced",
            UpdateKind::Accepted => "accepted",
            UpdateKind::Rejected => "rejected",
            UpdateKind::PendingNew => "pending_new",
            UpdateKind::Stopped => "stopped",
            UpdateKind::PendingCancel => "pending_cancel",
            UpdateKind::PendingReplace => "pending_replace",
            UpdateKind::Calculated => "calculated",
            UpdateKind::Suspended => "suspended",
            UpdateKind::OrderReplaceRejected => "order_replace_rejected",
            UpdateKind::OrderCancelRejected => "order_cancel_rejected",
            UpdateKind::Restated => "restated",
        }
    }
}

/// An order as the broker reports it.
#[derive(Debug, Clone, PartialEq)]
pub struct BrokerOrder {
    /// The broker's id of the order (Alpaca's `id`).
    pub id: OrderId,
    /// `None` when Alpaca's id does not fit ours (an order placed by hand, say).
    pub client_order_id: Option<ClientOrderId>,
    /// Alpaca's `client_order_id` as sent, kept for logs and for orders whose id is not ours.
    pub raw_client_order_id: String,
    /// The instrument ordered.
    pub symbol: Symbol,
    /// Buy or sell.
    pub side: Side,
    /// The units ordered; `None` for an order placed by dollar amount (`notional`).
    pub qty: Option<Decimal>,
    /// The dollar amount ordered; `None` for an order placed by quantity.
    pub notional: Option<Decimal>,
    /// The units filled so far (zero before the first fill).
    pub filled_qty: Decimal,
    /// The average price of the fills so far, in dollars per unit; `None` before the first fill.
    pub filled_avg_price: Option<Decimal>,
    /// The limit price in dollars per unit; `None` for a market order (all of tradebot's).
    pub limit_price: Option<Decimal>,
    /// Alpaca's status mapped onto our lifecycle.
    pub status: OrderStatus,
    /// Alpaca's own status word, for logs (`done_for_day`, `held`, ...).
    pub broker_status: String,
    /// When the broker created the order, in UTC; `None` when it did not say.
    pub created_at: Option<DateTime<Utc>>,
}

/// A fill reported by a `fill` or `partial_fill` event.
#[derive(Debug, Clone, PartialEq)]
pub struct Fill {
    /// The price of this fill, in dollars per unit.
    pub price: Decimal,
    /// The units of this fill (not the order's running total).
    pub qty: Decimal,
    /// The position after this fill (negative when short).
    pub position_qty: Decimal,
    /// The broker's id of this execution; the order manager counts a fill with a seen id only once.
    /// `None` when the broker gave none.
    pub execution_id: Option<String>,
}

/// One event of Alpaca's trade_updates stream (or the simulated broker's): what happened and the order
/// as it stands after it.
#[derive(Debug, Clone, PartialEq)]
pub struct OrderUpdate {
    /// Which event it is.
    pub kind: UpdateKind,
    /// The order after the event.
    pub order: BrokerOrder,
    /// When the event happened, in UTC; `None` when the broker did not say (the clock's time is used).
    pub time: Option<DateTime<Utc>>,
    /// The fill, on `fill` and `partial_fill` events; `None` on every other.
    pub fill: Option<Fill>,
}

impl OrderUpdate {
    /// The lifecycle event this update drives, or `None` for informational updates (`done_for_day`,
    /// `pending_replace`, `stopped`, `calculated`, `suspended`, `restated`, `order_replace_rejected`).
    pub fn order_event(&self) -> Option<OrderEvent> {
        use UpdateKind as K;
        Some(match self.kind {
            K::New | K::Accepted | K::PendingNew => OrderEvent::Accepted,
            K::Fill => OrderEvent::Fill,
            K::PartialFill => OrderEvent::PartialFill,
            K::Canceled => OrderEvent::Canceled,
            K::Expired => OrderEvent::Expired,
            K::Replaced => OrderEvent::Replaced,
            K::Rejected => OrderEvent::Rejected,
            K::PendingCancel => OrderEvent::CancelRequested,
            K::OrderCancelRejected => {
                OrderEvent::CancelRejected { partially_filled: self.order.filled_qty > Decimal::ZERO }
            }
            K::DoneForDay
            | K::Stopped
            | K::PendingReplace
            | K::Calculated
            | K::Suspended
            | K::OrderReplaceRejected
            | K::Restated => return None,
        })
    }
}
