//! Reconciliation: the broker's snapshot wins. Statuses and filled quantities are adopted (missing fills
//! synthesised), unknown orders adopted, lost submissions ended, positions set; every difference logged.

use super::{Oms, OmsChange, OmsError, PositionRecord, ReconcileReport};
use crate::contract::BrokerSnapshot;
use crate::domain::{ClientOrderId, OrderStatus, Symbol};
use rust_decimal::Decimal;
use std::collections::{BTreeMap, HashSet};

impl Oms {
    /// Adopts the broker's view (see the module docs for the rules) and marks the OMS ready.
    pub fn reconcile(&mut self, snap: &BrokerSnapshot) -> Result<ReconcileReport, OmsError> {
        let mut report = ReconcileReport::default();
        let mut seen = HashSet::new();
        for b in &snap.orders {
            let id = self.resolve(b, &mut report.changes)?;
            seen.insert(id.clone());
            let ours = self.orders.get(&id).map(|o| (o.filled_qty, o.status));
            let Some((filled, status)) = ours else { continue };
            if b.filled_qty > filled {
                log::warn!(
                    "oms: reconcile {id}: filled {filled} here, {} at the broker; recording the difference",
                    b.filled_qty
                );
                let time = snap.taken_at.unwrap_or_else(|| self.clock.now());
                let before = report.changes.len();
                self.record_fills(&id, b.filled_qty, b.filled_avg_price, None, None, time, true, &mut report.changes)?;
                report.synthesised_fills +=
                    report.changes[before..].iter().filter(|c| matches!(c, OmsChange::Fill(_))).count();
            } else if b.filled_qty < filled {
                log::error!(
                    "oms: reconcile {id}: filled {filled} here but only {} at the broker; keeping our fills",
                    b.filled_qty
                );
            }
            if b.status != status {
                log::warn!(
                    "oms: reconcile {id}: status {status:?} here, {:?} ({}) at the broker; adopting it",
                    b.status,
                    b.broker_status
                );
                self.set_status(&id, b.status, &mut report.changes);
            }
            self.save_order(&id)?;
        }
        self.end_lost_orders(&seen, &mut report)?;
        self.adopt_positions(&snap.positions, &mut report)?;
        self.store.flush()?;
        self.ready = true;
        if report.is_clean() {
            log::debug!("oms: reconciled with the broker: no differences");
        } else {
            log::warn!(
                "oms: reconciled with the broker: {} changes, {} fills synthesised, {} lost orders",
                report.changes.len(),
                report.synthesised_fills,
                report.lost.len()
            );
        }
        Ok(report)
    }

    /// Orders sent that the broker does not know, their send attempt older than the grace period: `Rejected`.
    fn end_lost_orders(&mut self, seen: &HashSet<ClientOrderId>, report: &mut ReconcileReport) -> Result<(), OmsError> {
        let now = self.clock.now();
        let grace = chrono::Duration::from_std(self.cfg.lost_after).unwrap_or(chrono::Duration::MAX);
        let missing: Vec<(ClientOrderId, OrderStatus, bool)> = self
            .open_orders()
            .filter(|o| !seen.contains(&o.client_order_id))
            .map(|o| (o.client_order_id.clone(), o.status, now - o.sent_at.unwrap_or(o.recorded_at) >= grace))
            .collect();
        for (id, status, old) in missing {
            if status == OrderStatus::PendingNew && self.queued.contains(&id) {
                log::info!("oms: reconcile {id}: still waiting in the command queue, not sent yet");
                continue;
            }
            match (status, old) {
                (OrderStatus::PendingNew, true) => {
                    log::warn!(
                        "oms: reconcile {id}: sent but unknown to the broker past the grace period; marked rejected (lost), not resent"
                    );
                    if let Some(o) = self.orders.get_mut(&id) {
                        o.note = Some("lost: never reached the broker".into());
                    }
                    self.set_status(&id, OrderStatus::Rejected, &mut report.changes);
                    self.save_order(&id)?;
                    report.lost.push(id);
                }
                (OrderStatus::PendingNew, false) => {
                    log::info!("oms: reconcile {id}: not at the broker yet; within the grace period, still in flight")
                }
                _ => {
                    log::warn!("oms: reconcile {id}: {status:?} here but absent from the broker's snapshot; left as is")
                }
            }
        }
        Ok(())
    }

    /// Positions become the broker's; a difference from our fills is kept as the symbol's adjustment.
    fn adopt_positions(&mut self, broker: &[(Symbol, Decimal)], report: &mut ReconcileReport) -> Result<(), OmsError> {
        let theirs: BTreeMap<&Symbol, Decimal> = broker.iter().map(|(s, q)| (s, *q)).collect();
        let symbols: Vec<Symbol> = self.positions.keys().chain(theirs.keys().copied()).cloned().collect();
        let now = self.clock.now();
        for sym in symbols {
            let from = self.position(&sym);
            let to = theirs.get(&sym).copied().unwrap_or_default();
            if from == to {
                continue;
            }
            log::warn!("oms: reconcile position {sym}: {from} here, {to} at the broker; adopting the broker's");
            let adjustment = to - self.fill_sum(&sym);
            self.write_position(&sym, PositionRecord { qty: to, adjustment, updated_at: now })?;
            report.changes.push(OmsChange::Position { symbol: sym, from, to });
        }
        Ok(())
    }
}
