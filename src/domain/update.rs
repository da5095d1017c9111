//! What a broker reports about an order, in the domain's terms: its state (`BrokerOrder`), a fill, and an
//! update event (`OrderUpdate`) with the lifecycle event it drives. Alpaca's wire types are parsed into
//! these (`alpaca::parse`); the engine, the order manager and the simulated broker see only these.

use super::{ClientOrderId, OrderEvent, OrderId, OrderStatus, Side, Symbol};
use chrono::{DateTime, Utc};
use rust_decimal::Decimal;

/// Every trade_updates event, in domain spelling.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum UpdateKind {
    New,
    Fill,
    PartialFill,
    Canceled,
    Expired,
    DoneForDay,
    Replaced,
    Accepted,
    Rejected,
    PendingNew,
    Stopped,
    PendingCancel,
    PendingReplace,
    Calculated,
    Suspended,
    OrderReplaceRejected,
    OrderCancelRejected,
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
    pub id: OrderId,
    /// `None` when Alpaca's id does not fit ours (an order placed by hand, say).
    pub client_order_id: Option<ClientOrderId>,
    pub raw_client_order_id: String,
    pub symbol: Symbol,
    pub side: Side,
    pub qty: Option<Decimal>,
    pub notional: Option<Decimal>,
    pub filled_qty: Decimal,
    pub filled_avg_price: Option<Decimal>,
    pub limit_price: Option<Decimal>,
    pub status: OrderStatus,
    /// Alpaca's own status word, for logs (`done_for_day`, `held`, ...).
    pub broker_status: String,
    pub created_at: Option<DateTime<Utc>>,
}

/// A fill reported by a `fill` or `partial_fill` event.
#[derive(Debug, Clone, PartialEq)]
pub struct Fill {
    pub price: Decimal,
    pub qty: Decimal,
    /// The position after this fill (negative when short).
    pub position_qty: Decimal,
    pub execution_id: Option<String>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct OrderUpdate {
    pub kind: UpdateKind,
    pub order: BrokerOrder,
    pub time: Option<DateTime<Utc>>,
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
