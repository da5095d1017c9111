//! Brokers: where `Command`s from the engine are carried out.
//!
//! - `sim`: the local simulated broker, which fills orders with the very execution rule the training
//!   environment uses (`exec`).
//! - The `Broker` trait: the async edge the live runner talks to (Alpaca paper, Alpaca live, and the
//!   simulated broker behind it for paper trading without Alpaca). It only takes risk-approved orders.

pub(crate) mod alpaca;
pub(crate) mod sim;

pub(crate) use alpaca::AlpacaBroker;
pub(crate) use sim::{SimBroker, SimError};

use crate::contract::BrokerSnapshot;
use crate::domain::BrokerOrder;
use crate::domain::{ClientOrderId, OrderRequest};
use crate::risk::RiskApproved;
use std::future::Future;

/// Why a broker call failed. `retriable` errors may be tried again later; the others will not succeed.
#[derive(Debug, thiserror::Error)]
pub(crate) enum BrokerError {
    #[error("broker refused the order: {0}")]
    Rejected(String),
    /// The request may or may not have reached the broker (timeout, dropped connection): the OMS looks the
    /// order up by its client_order_id before anything else; it is never simply resent.
    #[error("order outcome unknown: {0}")]
    Ambiguous(String),
    #[error("broker unavailable: {0}")]
    Unavailable(String),
    #[error("broker credentials refused: {0}")]
    Auth(String),
}

impl BrokerError {
    pub(crate) fn retriable(&self) -> bool {
        matches!(self, BrokerError::Ambiguous(_) | BrokerError::Unavailable(_))
    }
}

/// A broker as the live runner uses it. Implementations must be cancellation-safe only in the sense that
/// a dropped `submit` leaves an ambiguous order, which reconciliation resolves.
pub(crate) trait Broker: Send {
    fn submit(
        &mut self,
        order: RiskApproved<OrderRequest>,
    ) -> impl Future<Output = Result<BrokerOrder, BrokerError>> + Send;
    fn cancel(&mut self, id: &ClientOrderId) -> impl Future<Output = Result<(), BrokerError>> + Send;
    /// Open orders, recent orders, positions and account, for reconciliation.
    fn snapshot(&mut self) -> impl Future<Output = Result<BrokerSnapshot, BrokerError>> + Send;
}
