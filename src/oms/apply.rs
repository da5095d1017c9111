//! Broker updates into the OMS: the transition table, fills counted once from the cumulative filled
//! quantity, positions, and adoption of orders placed outside tradebot.

use super::record::fill_key;
use super::{FillRecord, Oms, OmsChange, OmsError, OmsOrder, PositionRecord};
use crate::domain::{BrokerOrder, OrderUpdate};
use crate::domain::{ClientOrderId, OrderStatus};
use chrono::{DateTime, Utc};

use rust_decimal::Decimal;

/// The prefix of the client order ids tradebot derives (`ClientOrderId::derive`).
const OUR_PREFIX: &str = "tb-";

/// The bar time in one of our ids (`tb-{strategy}-{symbol}-{bar unix seconds}-{seq}`).
fn bar_time_of(id: &ClientOrderId) -> Option<DateTime<Utc>> {
    let secs = id.as_str().rsplit('-').nth(1)?.parse::<i64>().ok()?;
    DateTime::from_timestamp(secs, 0)
}

/// A fill the broker reported: its quantity and price, for pricing the new part exactly.
#[derive(Debug, Clone, Copy)]
pub(super) struct FillHint {
    pub qty: Decimal,
    pub price: Decimal,
}

impl Oms {
    /// Applies one trade update: status by the transition table, new fills (the part of the broker's
    /// cumulative filled quantity above ours), positions. Everything is stored before it returns.
    /// Unknown orders are adopted (taken back as ours when their id is tradebot's, `tb-`). A transition the table refuses (a late acknowledgement after a fill)
    /// changes nothing but fills; a fill on an order we had ended (a "lost" order that did reach the
    /// broker) takes the broker's status.
    pub fn on_update(&mut self, u: &OrderUpdate) -> Result<Vec<OmsChange>, OmsError> {
        let mut changes = Vec::new();
        let id = self.resolve(&u.order, &mut changes)?;
        // The broker has it, so it was sent (a runner that reports no `Event::Sending` still ends here).
        self.queued.remove(&id);
        let hint = u.fill.as_ref().map(|f| FillHint { qty: f.qty, price: f.price });
        let exec_id = u.fill.as_ref().and_then(|f| f.execution_id.clone());
        let seen_exec = exec_id.as_ref().is_some_and(|x| self.execution_ids.contains(x));
        let mut cum = u.order.filled_qty;
        let known = self.orders.get(&id).map_or(Decimal::ZERO, |o| o.filled_qty);
        if cum.is_zero()
            && !seen_exec
            && let Some(h) = hint
        {
            // Some brokers leave the order's filled_qty out of a fill event: count the fill itself.
            cum = known + h.qty;
        }
        let time = u.time.unwrap_or_else(|| self.clock.now());
        let avg = u.order.filled_avg_price;
        let filled =
            if seen_exec { false } else { self.record_fills(&id, cum, avg, hint, exec_id, time, false, &mut changes)? };
        if let Some(event) = u.order_event()
            && let Some(from) = self.orders.get(&id).map(|o| o.status)
        {
            match from.apply(event) {
                Ok(to) => self.set_status(&id, to, &mut changes),
                Err(e) if filled && from.is_terminal() => {
                    log::warn!("oms: order {id}: {e}; a fill arrived, taking the broker's status {:?}", u.order.status);
                    self.set_status(&id, u.order.status, &mut changes);
                }
                Err(e) => log::info!("oms: order {id}: {e}; update ignored ({:?})", u.kind),
            }
        }
        self.save_order(&id)?;
        Ok(changes)
    }

    /// Our id for a broker order, adopting it (recorded, with no fills yet) when we do not know it.
    pub(super) fn resolve(&mut self, b: &BrokerOrder, changes: &mut Vec<OmsChange>) -> Result<ClientOrderId, OmsError> {
        let known = b
            .client_order_id
            .as_ref()
            .filter(|c| self.orders.contains_key(*c))
            .cloned()
            .or_else(|| self.by_broker_id.get(&b.id).cloned());
        if let Some(id) = known {
            if let Some(o) = self.orders.get_mut(&id)
                && o.broker_id.is_none()
            {
                o.broker_id = Some(b.id.clone());
                self.by_broker_id.insert(b.id.clone(), id.clone());
            }
            return Ok(id);
        }
        let id = match &b.client_order_id {
            Some(c) => c.clone(),
            None => ClientOrderId::new(&format!("x-{}", b.id)).map_err(|e| OmsError::Unadoptable {
                broker_id: b.id.to_string(),
                reason: format!("client_order_id {:?} and broker id both unusable: {e}", b.raw_client_order_id),
            })?,
        };
        let now = self.clock.now();
        // Our own id (`ClientOrderId::derive`): placed by tradebot, unknown here because the store was
        // restored from a backup taken before it (or lost it): recorded as ours, so that flatten and
        // cancel-on-shutdown treat it as ours.
        let ours = id.as_str().starts_with(OUR_PREFIX);
        if ours {
            log::warn!(
                "oms: order {id} ({} {} {:?} {}, {:?}) is tradebot's own but unknown to this store (restored from \
                 an older backup?): recorded as ours",
                b.id,
                b.side,
                b.qty,
                b.symbol,
                b.status
            );
        } else {
            log::warn!(
                "oms: adopting order {id} ({} {} {:?} {}, {:?}) that tradebot did not place",
                b.id,
                b.side,
                b.qty,
                b.symbol,
                b.status
            );
        }
        let rec = OmsOrder {
            client_order_id: id.clone(),
            broker_id: Some(b.id.clone()),
            symbol: b.symbol.clone(),
            side: b.side,
            qty: b.qty,
            filled_qty: Decimal::ZERO,
            avg_fill_price: None,
            // Fills come next; until they are recorded the order counts as working.
            status: if b.status.is_terminal() { OrderStatus::Accepted } else { b.status },
            bar_time: if ours { bar_time_of(&id) } else { None },
            recorded_at: b.created_at.unwrap_or(now),
            sent_at: b.created_at,
            updated_at: now,
            adopted: !ours,
            note: Some(if ours {
                "tradebot's own, taken back from the broker (not in the store)".to_string()
            } else {
                format!("adopted (broker client_order_id {:?})", b.raw_client_order_id)
            }),
        };
        self.orders_tree.insert(id.as_str().as_bytes(), &rec)?;
        self.by_broker_id.insert(b.id.clone(), id.clone());
        self.put_order(rec);
        changes.push(OmsChange::Adopted { id: id.clone(), symbol: b.symbol.clone() });
        Ok(id)
    }

    /// Records the part of `cum` (the broker's cumulative filled quantity) above what the order has as
    /// one fill, updates its position, and the order in memory (the caller saves it). The fill is priced
    /// from `hint` when it covers exactly the new part, else from the broker's average price. Returns
    /// whether anything was recorded.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn record_fills(
        &mut self,
        id: &ClientOrderId,
        cum: Decimal,
        avg: Option<Decimal>,
        hint: Option<FillHint>,
        execution_id: Option<String>,
        time: DateTime<Utc>,
        synthesised: bool,
        changes: &mut Vec<OmsChange>,
    ) -> Result<bool, OmsError> {
        let Some(o) = self.orders.get(id) else { return Err(OmsError::UnknownOrder(id.clone())) };
        let old = o.filled_qty;
        if cum <= old {
            return Ok(false);
        }
        let delta = cum - old;
        let old_avg = o.avg_fill_price.unwrap_or_default();
        let price = match (hint, avg) {
            (Some(h), _) if h.qty == delta => h.price,
            (_, Some(a)) => (a * cum - old_avg * old) / delta,
            (Some(h), None) => h.price,
            (None, None) => old_avg,
        };
        let fill = FillRecord {
            client_order_id: id.clone(),
            symbol: o.symbol.clone(),
            side: o.side,
            qty: delta,
            price,
            cum_qty: cum,
            execution_id: execution_id.clone(),
            time,
            synthesised,
        };
        debug_assert_eq!(fill.key(), fill_key(id, cum));
        self.fills_tree.insert(&fill.key(), &fill)?;
        self.fill_count += 1;
        if let Some(x) = execution_id {
            self.execution_ids.insert(x);
        }
        *self.fill_sums.entry(fill.symbol.clone()).or_default() += fill.signed_qty();
        let now = self.clock.now();
        let prev = self.positions.get(&fill.symbol).cloned();
        let from = prev.as_ref().map_or(Decimal::ZERO, |p| p.qty);
        let adjustment = prev.map_or(Decimal::ZERO, |p| p.adjustment);
        let to = from + fill.signed_qty();
        self.write_position(&fill.symbol, PositionRecord { qty: to, adjustment, updated_at: now })?;
        if let Some(o) = self.orders.get_mut(id) {
            o.avg_fill_price = Some((old_avg * old + price * delta) / cum);
            o.filled_qty = cum;
            o.updated_at = now;
        }
        changes.push(OmsChange::Position { symbol: fill.symbol.clone(), from, to });
        changes.push(OmsChange::Fill(fill));
        Ok(true)
    }
}
