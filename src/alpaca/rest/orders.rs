//! Order submission that never sends an order twice: a POST is not retried blindly; after an ambiguous
//! failure (timeout, 5xx, broken connection) the order is looked up by its client_order_id, and only if
//! Alpaca has never seen it is it sent again, under the same id (so Alpaca itself refuses a duplicate).

use super::{GetOrderByClientId, NewOrder, RestClient, RestError, SubmitOrder};
use crate::alpaca::event::BrokerOrder;

impl RestClient {
    /// Submits `order` at most once in effect. `Ok` is the order as Alpaca knows it (possibly from an
    /// earlier attempt or an earlier process: a restart resending a stored intent gets the existing
    /// order back). Not cancellation-safe: dropping it mid-way can leave an order whose fate is unknown;
    /// calling it again with the same `order` resolves that.
    pub async fn submit_order(&self, order: &NewOrder) -> Result<BrokerOrder, RestError> {
        let coid = order.client_order_id.as_str();
        let mut attempt = 0;
        loop {
            let err = match self.issue::<SubmitOrder>(order).await {
                Ok(o) => return Ok(o),
                Err(e) => e,
            };
            if matches!(err, RestError::DuplicateClientOrderId { .. }) {
                return match self.issue::<GetOrderByClientId>(&order.client_order_id).await {
                    Ok(existing) if order.matches(&existing) => Ok(existing),
                    _ => Err(err),
                };
            }
            if !err.is_ambiguous() || attempt >= self.retry_policy().max_retries {
                return Err(err);
            }
            match self.issue::<GetOrderByClientId>(&order.client_order_id).await {
                Ok(existing) => return Ok(existing),
                Err(RestError::NotFound { .. }) => {
                    log::warn!("alpaca: order {coid} never reached Alpaca ({err}); sending it again");
                }
                // Still unknown: report the first failure; the caller reconciles later.
                Err(_) => return Err(err),
            }
            tokio::time::sleep(self.retry_policy().backoff.delay(attempt)).await;
            attempt += 1;
        }
    }
}
