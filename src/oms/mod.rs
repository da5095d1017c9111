//! The order manager (OMS): a synchronous state machine the engine embeds. It owns every order tradebot
//! placed or adopted, every fill and every position, in the store's `orders`, `fills` and `positions`
//! trees, and never does I/O besides the store: it returns `Command`s for the edges to carry out.
//!
//! ```text
//!  Oms::open(store, clock, cfg)        loads orders, fills, positions; not ready
//!  reconcile(&BrokerSnapshot)          adopts the broker's view; ready
//!  submit(RiskApproved<OrderRequest>)  -> Some(Command::Submit)   order stored in PendingNew, flushed
//!                                      -> None                    this client_order_id was recorded before
//!  on_update(&OrderUpdate)             transition table, fills exactly once, positions
//!  on_submit_failed(id, reason, retriable), cancel(id), on_broker_reconnected() (both not ready again
//!                                      until the next reconciliation)
//! ```
//!
//! **Idempotent submission.** The engine derives the client_order_id from the decision
//! (`ClientOrderId::derive(strategy, symbol, bar_time, seq)`); `submit` refuses (returns `None`) any id
//! it has ever recorded, across restarts, so one decision gives at most one order. The record is on disk
//! before the `Command::Submit` leaves: a crash after it leaves at worst an order we think is in flight
//! that the broker never saw, which reconciliation resolves.
//!
//! **Fills exactly once.** Fill accounting follows the order's cumulative filled quantity as the broker
//! reports it (in every update and every snapshot): only the part above what is recorded becomes a new
//! fill record, so duplicate, late or re-ordered updates and reconciliations never count a fill twice.
//! Fill records are keyed by (client_order_id, cumulative quantity): writing the same fill again after a
//! crash overwrites itself. At open each order's filled quantity and each position are rebuilt from the
//! fill records (plus the broker adjustments, see `PositionRecord`).
//!
//! **Reconciliation rules** (`reconcile`): for every order in the snapshot, the broker wins: its status
//! is adopted, fills missing from its filled quantity are synthesised (price from its average), orders we
//! never placed are adopted; every difference is logged (`log::warn!`, old → new). An order we recorded
//! as sent (`PendingNew`) that the snapshot does not hold is left in flight while its send attempt
//! (`on_sending`) is younger than `OmsConfig::lost_after` (its POST may still arrive) and marked `Rejected`
//! ("lost") after that; it is never resent, since its decision is in the past. One still waiting in the
//! command queue has made no attempt and is left alone. Positions are set to the broker's. Then the OMS is
//! ready. Any update stream reconnect makes it not ready until the next reconciliation.
//!
//! Every state change is stored before the call returns; the `orders` and `fills` trees are flushed on
//! write (see `store`), and each call ends with an order or store flush, so positions are on disk too.

mod apply;
mod reconcile;
mod record;
#[cfg(test)]
mod tests;
pub mod trades;

pub use record::{FillRecord, OmsChange, OmsConfig, OmsError, OmsOrder, PositionRecord, ReconcileReport};

use crate::contract::{Command, EngineClock};
use crate::domain::{ClientOrderId, OrderEvent, OrderId, OrderRequest, OrderStatus, Symbol};
use crate::risk::RiskApproved;
use crate::store::{Store, TreeName, TypedTree};
use rust_decimal::Decimal;
use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};

/// The order manager: the in-memory view of every order, fill and position, kept in step with the store's
/// `orders`, `fills` and `positions` trees. See the module docs for its calls.
pub struct Oms {
    store: Store,
    orders_tree: TypedTree<OmsOrder>,
    fills_tree: TypedTree<FillRecord>,
    positions_tree: TypedTree<PositionRecord>,
    orders: BTreeMap<ClientOrderId, OmsOrder>,
    /// The ids of the orders not in a terminal state, kept with every status set (`put_order`,
    /// `set_status`): the engine asks for the working orders several times per decision, and reading
    /// them here costs the open orders, not every order ever recorded.
    open: BTreeSet<ClientOrderId>,
    by_broker_id: HashMap<OrderId, ClientOrderId>,
    positions: BTreeMap<Symbol, PositionRecord>,
    /// Per symbol, the signed sum of its fill records.
    fill_sums: BTreeMap<Symbol, Decimal>,
    execution_ids: HashSet<String>,
    fill_count: usize,
    /// Orders this process recorded whose send attempt has not been reported yet (in the command queue).
    queued: HashSet<ClientOrderId>,
    ready: bool,
    clock: Box<dyn EngineClock>,
    cfg: OmsConfig,
}

impl std::fmt::Debug for Oms {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Oms")
            .field("orders", &self.orders.len())
            .field("fills", &self.fill_count)
            .field("positions", &self.positions)
            .field("ready", &self.ready)
            .finish()
    }
}

/// What a trading core does with an OMS call's result: its commands; or none when it failed, a store
/// failure also stopping new orders (`halted`: the record of an order could not be kept), anything else
/// logged. `who` names the core in the log.
pub fn commands_of(result: Result<Vec<Command>, OmsError>, who: &str, halted: &mut bool) -> Vec<Command> {
    match result {
        Ok(c) => c,
        Err(e @ OmsError::Store(_)) => {
            log::error!("{who}: {e}; no new orders from here on");
            *halted = true;
            Vec::new()
        }
        Err(e) => {
            log::warn!("{who}: {e}");
            Vec::new()
        }
    }
}

impl Oms {
    /// Loads every stored order, fill and position. The OMS starts not ready: reconcile first.
    pub fn open(store: &Store, clock: Box<dyn EngineClock>, cfg: OmsConfig) -> Result<Oms, OmsError> {
        let mut oms = Oms {
            store: store.clone(),
            orders_tree: store.tree(TreeName::Orders)?,
            fills_tree: store.tree(TreeName::Fills)?,
            positions_tree: store.tree(TreeName::Positions)?,
            orders: BTreeMap::new(),
            open: BTreeSet::new(),
            by_broker_id: HashMap::new(),
            positions: BTreeMap::new(),
            fill_sums: BTreeMap::new(),
            execution_ids: HashSet::new(),
            fill_count: 0,
            queued: HashSet::new(),
            ready: false,
            clock,
            cfg,
        };
        oms.load()?;
        Ok(oms)
    }

    fn load(&mut self) -> Result<(), OmsError> {
        for (_, o) in self.orders_tree.scan_prefix(b"")? {
            if let Some(b) = &o.broker_id {
                self.by_broker_id.insert(b.clone(), o.client_order_id.clone());
            }
            self.put_order(o);
        }
        // Per order: (cumulative filled, notional) from its fill records.
        let mut filled: HashMap<ClientOrderId, (Decimal, Decimal)> = HashMap::new();
        for (_, f) in self.fills_tree.scan_prefix(b"")? {
            *self.fill_sums.entry(f.symbol.clone()).or_default() += f.signed_qty();
            let e = filled.entry(f.client_order_id.clone()).or_default();
            e.0 = e.0.max(f.cum_qty);
            e.1 += f.qty * f.price;
            if let Some(x) = &f.execution_id {
                self.execution_ids.insert(x.clone());
            }
            self.fill_count += 1;
        }
        let now = self.clock.now();
        for (id, (cum, notional)) in filled {
            let Some(o) = self.orders.get_mut(&id) else {
                log::warn!("oms: fill records of {id} but no order record; its fills still count in positions");
                continue;
            };
            if o.filled_qty != cum {
                log::warn!(
                    "oms: order {id}: filled quantity {} on record, {cum} in its fills; using the fills",
                    o.filled_qty
                );
                o.filled_qty = cum;
                o.avg_fill_price = (cum > Decimal::ZERO).then(|| notional / cum);
                o.updated_at = now;
                self.orders_tree.insert(id.as_str().as_bytes(), o)?;
            }
        }
        for (k, p) in self.positions_tree.scan_prefix(b"")? {
            let Some(sym) = std::str::from_utf8(&k).ok().and_then(|s| Symbol::new(s).ok()) else {
                log::warn!("oms: skipping a position record with an unreadable key {k:?}");
                continue;
            };
            self.positions.insert(sym, p);
        }
        let symbols: Vec<Symbol> = self.fill_sums.keys().chain(self.positions.keys()).cloned().collect();
        for sym in symbols {
            let adjustment = self.positions.get(&sym).map_or(Decimal::ZERO, |p| p.adjustment);
            let qty = self.fill_sum(&sym) + adjustment;
            let stored = self.positions.get(&sym).map(|p| p.qty);
            if stored != Some(qty) {
                log::warn!("oms: position {sym}: {stored:?} on record, {qty} from its fills; using the fills");
                self.write_position(&sym, PositionRecord { qty, adjustment, updated_at: now })?;
            }
        }
        self.store.flush().map_err(OmsError::Store)?;
        log::info!(
            "oms: loaded {} orders ({} open), {} fills, {} positions",
            self.orders.len(),
            self.open_orders().count(),
            self.fill_count,
            self.positions.len()
        );
        Ok(())
    }

    /// False at start and after `on_broker_reconnected` until a reconciliation has completed.
    pub fn ready(&self) -> bool {
        self.ready
    }

    /// Records the order in flight (`PendingNew`, on disk) and returns the command that sends it, or
    /// `None` when its client_order_id was recorded before (the decision was already acted on).
    pub fn submit(&mut self, order: RiskApproved<OrderRequest>) -> Result<Option<Command>, OmsError> {
        let id = order.client_order_id.clone();
        if self.orders.contains_key(&id) {
            log::info!("oms: order {id} was recorded before; not sending it again");
            return Ok(None);
        }
        if !self.ready {
            return Err(OmsError::NotReady);
        }
        let now = self.clock.now();
        let status = OrderStatus::Created
            .apply(OrderEvent::Submit)
            .map_err(|e| OmsError::Invalid { id: id.clone(), reason: e.to_string() })?;
        let rec = OmsOrder {
            client_order_id: id.clone(),
            broker_id: None,
            symbol: order.symbol.clone(),
            side: order.side,
            qty: Some(order.qty.get()),
            filled_qty: Decimal::ZERO,
            avg_fill_price: None,
            status,
            bar_time: Some(order.bar_time),
            recorded_at: now,
            sent_at: None,
            updated_at: now,
            adopted: false,
            note: None,
        };
        self.orders_tree.insert(id.as_str().as_bytes(), &rec)?;
        self.queued.insert(id);
        self.put_order(rec);
        Ok(Some(Command::Submit(order)))
    }

    /// The runner is about to send this order (`Event::Sending`): its send attempt is stored, and from
    /// now on the lost rule's grace period runs for it.
    pub fn on_sending(&mut self, id: &ClientOrderId) -> Result<Vec<Command>, OmsError> {
        self.queued.remove(id);
        let now = self.clock.now();
        let o = self.orders.get_mut(id).ok_or_else(|| OmsError::UnknownOrder(id.clone()))?;
        if o.sent_at.is_none() {
            o.sent_at = Some(now);
            self.save_order(id)?;
        }
        Ok(Vec::new())
    }

    /// Asks the broker to cancel a working order (`PendingCancel`, stored). `None` when it is no longer
    /// working (filled, canceled, ...).
    pub fn cancel(&mut self, id: &ClientOrderId) -> Result<Option<Command>, OmsError> {
        let o = self.orders.get(id).ok_or_else(|| OmsError::UnknownOrder(id.clone()))?;
        match o.status.apply(OrderEvent::CancelRequested) {
            Ok(next) if !o.status.is_terminal() => {
                self.set_status(id, next, &mut Vec::new());
                self.save_order(id)?;
                Ok(Some(Command::Cancel(id.clone())))
            }
            _ => Ok(None),
        }
    }

    /// A submit failed before any acknowledgement. Not retriable: the broker refused it (`Rejected`).
    /// Retriable: its fate is unknown (it may have reached the broker), so it stays in flight and the
    /// returned command asks for a reconciliation, which settles it.
    pub fn on_submit_failed(
        &mut self,
        id: &ClientOrderId,
        reason: &str,
        retriable: bool,
    ) -> Result<Vec<Command>, OmsError> {
        self.queued.remove(id);
        let status = self.orders.get(id).map(|o| o.status).ok_or_else(|| OmsError::UnknownOrder(id.clone()))?;
        if retriable {
            // Not ready until the broker's view is back: bars meanwhile record no orders sized on holdings
            // that may be stale, so nothing queues up to go out in a burst when the broker answers again.
            log::warn!("oms: submit of {id} failed, outcome unknown ({reason}); no new orders until reconciled");
            self.ready = false;
            return Ok(vec![Command::Reconcile]);
        }
        match status.apply(OrderEvent::Rejected) {
            Ok(next) if status == OrderStatus::PendingNew => {
                log::warn!("oms: order {id} refused: {reason}");
                if let Some(o) = self.orders.get_mut(id) {
                    o.note = Some(format!("refused: {reason}"));
                }
                self.set_status(id, next, &mut Vec::new());
                self.save_order(id)?;
            }
            _ => log::warn!("oms: submit failure for {id} ({reason}) ignored: order is {status:?}"),
        }
        Ok(Vec::new())
    }

    /// An order recorded as sent that never left (the runner stopped first): `Rejected`, noted
    /// "not_sent", at once. The broker never saw it, so no later reconciliation has to find it lost.
    pub fn on_not_sent(&mut self, id: &ClientOrderId) -> Result<Vec<Command>, OmsError> {
        self.queued.remove(id);
        let status = self.orders.get(id).map(|o| o.status).ok_or_else(|| OmsError::UnknownOrder(id.clone()))?;
        if status != OrderStatus::PendingNew {
            log::warn!("oms: order {id} reported not sent, but it is {status}: left as it is");
            return Ok(Vec::new());
        }
        let next = status
            .apply(OrderEvent::Rejected)
            .map_err(|e| OmsError::Invalid { id: id.clone(), reason: e.to_string() })?;
        log::info!("oms: order {id} was not sent (shutting down): recorded as not_sent");
        if let Some(o) = self.orders.get_mut(id) {
            o.note = Some("not_sent: the daemon stopped before sending it".into());
        }
        self.set_status(id, next, &mut Vec::new());
        self.save_order(id)?;
        Ok(Vec::new())
    }

    /// The broker's update stream came back after a drop: updates may be lost, so no order goes out until
    /// the reconciliation this returns the command for has completed.
    pub fn on_broker_reconnected(&mut self) -> Command {
        self.ready = false;
        Command::Reconcile
    }

    /// A reconciliation, on demand (periodic checks). Does not change `ready`.
    pub fn request_reconcile(&self) -> Command {
        Command::Reconcile
    }

    /// Positions by symbol (flat symbols omitted).
    pub fn positions(&self) -> BTreeMap<Symbol, Decimal> {
        self.positions.iter().filter(|(_, p)| !p.qty.is_zero()).map(|(s, p)| (s.clone(), p.qty)).collect()
    }

    /// This symbol's position in shares (+ long, − short); zero when flat or never traded.
    pub fn position(&self, symbol: &Symbol) -> Decimal {
        self.positions.get(symbol).map_or(Decimal::ZERO, |p| p.qty)
    }

    /// Orders not in a terminal state (sent, working, or being canceled), in id order.
    pub fn open_orders(&self) -> impl Iterator<Item = &OmsOrder> {
        self.open.iter().filter_map(|id| self.orders.get(id))
    }

    /// The order recorded under this client_order_id, whatever its state; `None` if never recorded.
    pub fn order(&self, id: &ClientOrderId) -> Option<&OmsOrder> {
        self.orders.get(id)
    }

    /// Every order recorded, terminal ones included, in client_order_id order.
    pub fn orders(&self) -> impl Iterator<Item = &OmsOrder> {
        self.orders.values()
    }

    /// Fill records stored so far.
    pub fn fill_count(&self) -> usize {
        self.fill_count
    }

    /// Every fill record, in key order (client_order_id, cumulative quantity).
    pub fn fills(&self) -> Result<Vec<FillRecord>, OmsError> {
        Ok(self.fills_tree.scan_prefix(b"")?.into_iter().map(|(_, f)| f).collect())
    }

    fn fill_sum(&self, symbol: &Symbol) -> Decimal {
        self.fill_sums.get(symbol).copied().unwrap_or_default()
    }

    fn set_status(&mut self, id: &ClientOrderId, to: OrderStatus, changes: &mut Vec<OmsChange>) {
        let now = self.clock.now();
        if let Some(o) = self.orders.get_mut(id)
            && o.status != to
        {
            changes.push(OmsChange::Status { id: id.clone(), from: o.status, to });
            o.status = to;
            o.updated_at = now;
            if to.is_terminal() {
                self.open.remove(id);
            } else {
                self.open.insert(id.clone());
            }
        }
    }

    /// Keeps `o` in memory (replacing any order of its id), and its id among the open ones while its
    /// status is not terminal.
    fn put_order(&mut self, o: OmsOrder) {
        let id = o.client_order_id.clone();
        if o.status.is_terminal() {
            self.open.remove(&id);
        } else {
            self.open.insert(id.clone());
        }
        self.orders.insert(id, o);
    }

    /// Writes an order record (durable: flushes the whole store, positions included).
    fn save_order(&self, id: &ClientOrderId) -> Result<(), OmsError> {
        if let Some(o) = self.orders.get(id) {
            self.orders_tree.insert(id.as_str().as_bytes(), o)?;
        }
        Ok(())
    }

    fn write_position(&mut self, symbol: &Symbol, p: PositionRecord) -> Result<(), OmsError> {
        self.positions_tree.insert(symbol.as_str().as_bytes(), &p)?;
        self.positions.insert(symbol.clone(), p);
        Ok(())
    }
}
