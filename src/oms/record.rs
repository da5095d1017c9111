//! What the order manager stores and reports: order records (`orders` tree), fill records (`fills`
//! tree), position records (`positions` tree), the changes it reports, its errors and its settings.

use crate::domain::{ClientOrderId, OrderId, OrderStatus, Side, Symbol};
use crate::store::StoreError;
use chrono::{DateTime, Utc};
use rust_decimal::Decimal;
use serde::{Deserialize, Serialize};
use std::time::Duration;

/// One order as the OMS knows it. Key in the `orders` tree: the client_order_id.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct OmsOrder {
    /// Tradebot's own id for the order (Alpaca's `client_order_id`); the record's key, never reused.
    pub client_order_id: ClientOrderId,
    /// The broker's id, once the broker has told us.
    pub broker_id: Option<OrderId>,
    /// The instrument traded.
    pub symbol: Symbol,
    /// Buy or sell.
    pub side: Side,
    /// `None` for a notional order placed by hand and adopted.
    pub qty: Option<Decimal>,
    /// Cumulative filled quantity: the sum of this order's fill records.
    pub filled_qty: Decimal,
    /// Volume-weighted average price of the fills so far, in dollars per share; `None` before the first fill.
    pub avg_fill_price: Option<Decimal>,
    /// Where the order stands in its life cycle (Alpaca's order states, as the OMS last saw or set them).
    pub status: OrderStatus,
    /// The bar the decision was taken on (`None` for adopted orders).
    pub bar_time: Option<DateTime<Utc>>,
    /// When the OMS first recorded it (its clock).
    pub recorded_at: DateTime<Utc>,
    /// When the runner reported its send attempt (`Event::Sending`, just before the POST); `None` while
    /// it waits in the command queue, and for adopted orders. The lost rule counts from here.
    #[serde(default)]
    pub sent_at: Option<DateTime<Utc>>,
    /// When the record last changed (the OMS clock).
    pub updated_at: DateTime<Utc>,
    /// Placed outside tradebot (by hand, another program) and adopted from the broker's reports.
    pub adopted: bool,
    /// Why it ended, when the OMS ended it itself (lost submissions, refusals).
    pub note: Option<String>,
}

/// One fill. Key in the `fills` tree: `client_order_id 0x00 cum_qty` (the quantity at 12 decimal places
/// as a sign-flipped big-endian i128, so an order's fills sort in fill order), so recording the same fill twice
/// (a crash between the fill and the order write) overwrites the same record instead of adding one.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FillRecord {
    /// The order this fill belongs to.
    pub client_order_id: ClientOrderId,
    /// The order's instrument.
    pub symbol: Symbol,
    /// The order's side: a buy adds `qty` to the position, a sell takes it away.
    pub side: Side,
    /// Units in this fill (> 0).
    pub qty: Decimal,
    /// Price of this fill, in dollars per share.
    pub price: Decimal,
    /// The order's cumulative filled quantity after this fill.
    pub cum_qty: Decimal,
    /// Alpaca's `execution_id` for the fill, used to record each fill once; `None` for synthesised fills.
    pub execution_id: Option<String>,
    /// When the fill happened (UTC): the broker's timestamp, or for synthesised fills the time of the broker
    /// snapshot they were inferred from.
    pub time: DateTime<Utc>,
    /// Not reported as a fill event but inferred from the broker's filled quantity at reconciliation.
    pub synthesised: bool,
}

impl FillRecord {
    /// The position change: + for buys, - for sells.
    pub fn signed_qty(&self) -> Decimal {
        match self.side {
            Side::Buy => self.qty,
            Side::Sell => -self.qty,
        }
    }

    /// The fill's key in the `fills` tree (see the type's docs): the same fill always gives the same key.
    pub fn key(&self) -> Vec<u8> {
        fill_key(&self.client_order_id, self.cum_qty)
    }
}

pub(super) fn fill_key(id: &ClientOrderId, cum: Decimal) -> Vec<u8> {
    let mut k = id.as_str().as_bytes().to_vec();
    k.push(0);
    let mut c = cum;
    c.rescale(12);
    k.extend_from_slice(&((c.mantissa() as u128) ^ (1u128 << 127)).to_be_bytes());
    k
}

/// One symbol's position. Key in the `positions` tree: the symbol. `qty` always equals the sum of the
/// symbol's fill records plus `adjustment`, the difference the broker reported at reconciliations
/// (trades we never saw, corporate actions); at open it is recomputed from the fills, so a crash between
/// a fill and its position write loses nothing.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PositionRecord {
    /// Shares held (+ long, − short): the sum of the symbol's fills plus `adjustment`.
    pub qty: Decimal,
    /// The part of `qty` not explained by our fill records, set from the broker's positions at reconciliation.
    pub adjustment: Decimal,
    /// When the position last changed (the OMS clock).
    pub updated_at: DateTime<Utc>,
}

/// What one call changed, for the engine and the logs.
#[derive(Debug, Clone, PartialEq)]
pub enum OmsChange {
    /// An order moved from one state to another.
    Status {
        /// The order that changed.
        id: ClientOrderId,
        /// Its state before.
        from: OrderStatus,
        /// Its state after.
        to: OrderStatus,
    },
    /// A fill was recorded (once per fill, however often the broker reports it).
    Fill(FillRecord),
    /// A symbol's position changed, by a fill or a reconciliation adjustment.
    Position {
        /// The symbol whose position changed.
        symbol: Symbol,
        /// Shares held before.
        from: Decimal,
        /// Shares held after.
        to: Decimal,
    },
    /// An order the broker reported that tradebot did not place.
    Adopted {
        /// The order tradebot did not place, now recorded under this id.
        id: ClientOrderId,
        /// Its instrument.
        symbol: Symbol,
    },
}

/// What a reconciliation found and changed.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct ReconcileReport {
    /// Every order, fill and position change the reconciliation made, in the order it made them.
    pub changes: Vec<OmsChange>,
    /// Orders we had sent that the broker has no record of, past the grace period: marked rejected.
    pub lost: Vec<ClientOrderId>,
    /// Fills inferred from the broker's filled quantities.
    pub synthesised_fills: usize,
}

impl ReconcileReport {
    /// True when the broker agreed with us on everything.
    pub fn is_clean(&self) -> bool {
        self.changes.is_empty() && self.lost.is_empty()
    }
}

/// Why an order manager call failed.
#[derive(Debug, thiserror::Error)]
pub enum OmsError {
    /// The store failed to read or write an order, fill or position record.
    #[error("order store: {0}")]
    Store(#[from] StoreError),
    /// An order was submitted before the first reconciliation since start or since the broker reconnected.
    #[error("no order may be submitted before the OMS has reconciled with the broker")]
    NotReady,
    /// A call named a client_order_id the OMS has never recorded.
    #[error("order {0} is not known to the OMS")]
    UnknownOrder(ClientOrderId),
    /// A broker order could not be taken over (its fields do not fit an OMS record).
    #[error("broker order {broker_id} cannot be adopted: {reason}")]
    Unadoptable {
        /// Alpaca's id of the order.
        broker_id: String,
        /// What about it does not fit.
        reason: String,
    },
    /// A request or report for this order breaks a rule of the OMS; `reason` says which.
    #[error("order {id}: {reason}")]
    Invalid {
        /// The order concerned.
        id: ClientOrderId,
        /// The rule broken.
        reason: String,
    },
}

/// Settings of the order manager.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct OmsConfig {
    /// An order in flight (`PendingNew`) that the broker still does not know this long after its send
    /// attempt is marked `Rejected` ("lost") at the next reconciliation. An order still waiting in this
    /// process's command queue has made no attempt and is never lost; one recorded by an earlier process
    /// (nothing can send it any more) counts from when it was recorded.
    pub lost_after: Duration,
}

impl Default for OmsConfig {
    fn default() -> Self {
        OmsConfig { lost_after: Duration::from_secs(60) }
    }
}
