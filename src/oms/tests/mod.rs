//! OMS tests: idempotent submission, fills exactly once, adoption, reconciliation rules and restarts,
//! with the toy broker and harness the property test (`tests/property.rs`) shares.

use super::*;
use crate::contract::{BrokerSnapshot, ManualClock};
use crate::domain::{BrokerOrder, Fill, OrderUpdate, UpdateKind};
use crate::domain::{OrderTif, Qty, Side};
use crate::risk::approve_for_test;
use chrono::{DateTime, Utc};
use rust_decimal::Decimal;
use std::time::Duration;

fn t0() -> DateTime<Utc> {
    DateTime::from_timestamp(1_700_000_000, 0).unwrap()
}

fn sym(s: &str) -> Symbol {
    Symbol::new(s).unwrap()
}

fn request(symbol: &str, bar: i64, side: Side, qty: i64) -> RiskApproved<OrderRequest> {
    let s = sym(symbol);
    let bar_time = t0() + chrono::Duration::days(bar);
    approve_for_test(OrderRequest {
        client_order_id: ClientOrderId::derive("test", &s, bar_time, 0),
        symbol: s,
        side,
        qty: Qty::new(Decimal::from(qty)).unwrap(),
        tif: OrderTif::Day,
        bar_time,
        ref_price: 100.0,
        why: crate::domain::OrderWhy::Model,
    })
}

/// A toy broker: accepts orders, fills them in steps at a fixed price per step, and keeps every update
/// it would have streamed.
#[derive(Default)]
struct ToyBroker {
    orders: Vec<BrokerOrder>,
    updates: Vec<OrderUpdate>,
    execs: u64,
}

impl ToyBroker {
    fn accept(&mut self, r: &OrderRequest) {
        let o = BrokerOrder {
            id: OrderId::new(&format!("b-{}", self.orders.len())).unwrap(),
            client_order_id: Some(r.client_order_id.clone()),
            raw_client_order_id: r.client_order_id.to_string(),
            symbol: r.symbol.clone(),
            side: r.side,
            qty: Some(r.qty.get()),
            notional: None,
            filled_qty: Decimal::ZERO,
            filled_avg_price: None,
            limit_price: None,
            status: OrderStatus::Accepted,
            broker_status: "new".into(),
            created_at: Some(t0()),
        };
        self.updates.push(OrderUpdate { kind: UpdateKind::New, order: o.clone(), time: Some(t0()), fill: None });
        self.orders.push(o);
    }

    fn fill(&mut self, i: usize, amount: Decimal, price: Decimal) {
        let Some(o) = self.orders.get_mut(i) else { return };
        let left = o.qty.unwrap_or_default() - o.filled_qty;
        let q = amount.min(left);
        if q <= Decimal::ZERO || o.status.is_terminal() {
            return;
        }
        let old = o.filled_qty;
        o.filled_qty += q;
        o.filled_avg_price = Some((o.filled_avg_price.unwrap_or_default() * old + price * q) / o.filled_qty);
        let done = o.filled_qty == o.qty.unwrap_or_default();
        o.status = if done { OrderStatus::Filled } else { OrderStatus::PartiallyFilled };
        self.execs += 1;
        let fill = Fill { price, qty: q, position_qty: Decimal::ZERO, execution_id: Some(format!("x{}", self.execs)) };
        let kind = if done { UpdateKind::Fill } else { UpdateKind::PartialFill };
        self.updates.push(OrderUpdate { kind, order: o.clone(), time: Some(t0()), fill: Some(fill) });
    }

    fn positions(&self) -> Vec<(Symbol, Decimal)> {
        let mut p: BTreeMap<Symbol, Decimal> = BTreeMap::new();
        for o in &self.orders {
            let signed = if o.side == Side::Buy { o.filled_qty } else { -o.filled_qty };
            *p.entry(o.symbol.clone()).or_default() += signed;
        }
        p.into_iter().filter(|(_, q)| !q.is_zero()).collect()
    }

    fn snapshot(&self) -> BrokerSnapshot {
        BrokerSnapshot { orders: self.orders.clone(), positions: self.positions(), ..BrokerSnapshot::default() }
    }
}

struct Harness {
    dir: tempfile::TempDir,
    clock: ManualClock,
    oms: Option<Oms>,
}

impl Harness {
    fn new() -> Self {
        let dir = tempfile::tempdir().unwrap();
        let clock = ManualClock::new(t0());
        let mut h = Harness { dir, clock, oms: None };
        h.reopen();
        h
    }

    /// Drops the OMS and its store (releasing the lock), then opens both again from disk.
    fn reopen(&mut self) {
        self.oms = None;
        let store = Store::open(self.dir.path()).unwrap();
        let cfg = OmsConfig { lost_after: Duration::from_secs(60) };
        self.oms = Some(Oms::open(&store, Box::new(self.clock.clone()), cfg).unwrap());
    }

    fn oms(&mut self) -> &mut Oms {
        self.oms.as_mut().unwrap()
    }
}

fn submitted(cmd: Option<Command>) -> OrderRequest {
    match cmd {
        Some(Command::Submit(r)) => r.into_inner(),
        other => panic!("expected a submit, got {other:?}"),
    }
}

/// Signed sum of the fill records per symbol.
fn fill_positions(oms: &Oms) -> BTreeMap<Symbol, Decimal> {
    let mut p: BTreeMap<Symbol, Decimal> = BTreeMap::new();
    for f in oms.fills().unwrap() {
        *p.entry(f.symbol.clone()).or_default() += f.signed_qty();
    }
    p.retain(|_, q| !q.is_zero());
    p
}

#[test]
fn nothing_is_submitted_before_reconciliation_and_an_id_only_once_across_restarts() {
    let mut h = Harness::new();
    assert!(!h.oms().ready());
    assert!(matches!(h.oms().submit(request("AAPL", 0, Side::Buy, 3)), Err(OmsError::NotReady)));
    h.oms().reconcile(&BrokerSnapshot::default()).unwrap();
    assert!(h.oms().ready());
    let r = submitted(h.oms().submit(request("AAPL", 0, Side::Buy, 3)).unwrap());
    assert_eq!(h.oms().order(&r.client_order_id).unwrap().status, OrderStatus::PendingNew);
    assert!(h.oms().submit(request("AAPL", 0, Side::Buy, 3)).unwrap().is_none(), "same decision twice");
    h.reopen();
    h.oms().reconcile(&BrokerSnapshot::default()).unwrap();
    assert!(h.oms().submit(request("AAPL", 0, Side::Buy, 3)).unwrap().is_none(), "same decision after a restart");
    assert!(h.oms().submit(request("AAPL", 1, Side::Buy, 3)).unwrap().is_some(), "the next bar is a new decision");
    assert_eq!(h.oms().order(&r.client_order_id).unwrap().status, OrderStatus::PendingNew, "in flight, on disk");
}

#[test]
fn duplicate_and_late_updates_count_each_fill_once() {
    let mut h = Harness::new();
    h.oms().reconcile(&BrokerSnapshot::default()).unwrap();
    let mut b = ToyBroker::default();
    let r = submitted(h.oms().submit(request("MSFT", 0, Side::Buy, 10)).unwrap());
    b.accept(&r);
    b.fill(0, Decimal::from(4), Decimal::from(100));
    b.fill(0, Decimal::from(6), Decimal::from(110));
    let (new, part, full) = (b.updates[0].clone(), b.updates[1].clone(), b.updates[2].clone());
    for u in [&new, &part, &part, &full, &new, &part, &full] {
        h.oms().on_update(u).unwrap();
    }
    let o = h.oms().order(&r.client_order_id).unwrap().clone();
    assert_eq!(o.status, OrderStatus::Filled, "a late ack or partial fill does not reopen a filled order");
    assert_eq!(o.filled_qty, Decimal::from(10));
    assert_eq!(o.avg_fill_price, Some(Decimal::from(106)));
    assert_eq!(h.oms().fill_count(), 2);
    let prices: Vec<Decimal> = h.oms().fills().unwrap().iter().map(|f| f.price).collect();
    assert_eq!(prices, vec![Decimal::from(100), Decimal::from(110)]);
    assert_eq!(h.oms().position(&sym("MSFT")), Decimal::from(10));
    h.reopen();
    assert_eq!(h.oms().fill_count(), 2);
    assert_eq!(h.oms().position(&sym("MSFT")), Decimal::from(10));
    h.oms().on_update(&full).unwrap();
    assert_eq!(h.oms().fill_count(), 2, "a redelivered fill after a restart is still a duplicate");
}

#[test]
fn a_fill_that_overtakes_the_fill_of_a_lower_cumulative_quantity_is_counted_once() {
    let mut h = Harness::new();
    h.oms().reconcile(&BrokerSnapshot::default()).unwrap();
    let mut b = ToyBroker::default();
    let r = submitted(h.oms().submit(request("MSFT", 0, Side::Buy, 10)).unwrap());
    b.accept(&r);
    b.fill(0, Decimal::from(4), Decimal::from(100));
    b.fill(0, Decimal::from(6), Decimal::from(110));
    h.oms().on_update(&b.updates[2]).unwrap();
    h.oms().on_update(&b.updates[1]).unwrap();
    assert_eq!(h.oms().order(&r.client_order_id).unwrap().filled_qty, Decimal::from(10));
    assert_eq!(h.oms().position(&sym("MSFT")), Decimal::from(10));
    assert_eq!(h.oms().fill_count(), 1, "the whole quantity arrived as one fill");
}

#[test]
fn orders_placed_by_hand_are_adopted() {
    let mut h = Harness::new();
    h.oms().reconcile(&BrokerSnapshot::default()).unwrap();
    let mut b = ToyBroker::default();
    let mut r = request("IBM", 0, Side::Buy, 2).into_inner();
    r.client_order_id = ClientOrderId::new("by-hand-1").unwrap();
    b.accept(&r);
    b.fill(0, Decimal::from(2), Decimal::from(50));
    let changes = h.oms().on_update(&b.updates[1]).unwrap();
    assert!(changes.iter().any(|c| matches!(c, OmsChange::Adopted { .. })));
    let o = h.oms().order(&r.client_order_id).unwrap();
    assert!(o.adopted);
    assert_eq!(o.status, OrderStatus::Filled);
    assert_eq!(h.oms().position(&sym("IBM")), Decimal::from(2));
}

#[test]
fn reconcile_synthesises_missing_fills_and_adopts_statuses_and_positions() {
    let mut h = Harness::new();
    h.oms().reconcile(&BrokerSnapshot::default()).unwrap();
    let mut b = ToyBroker::default();
    let r = submitted(h.oms().submit(request("AAPL", 0, Side::Buy, 5)).unwrap());
    b.accept(&r);
    b.fill(0, Decimal::from(5), Decimal::from(20));
    let mut snap = b.snapshot();
    // A position the broker holds from a trade we never saw (a transfer in, say).
    snap.positions.push((sym("GOOG"), Decimal::from(7)));
    let rep = h.oms().reconcile(&snap).unwrap();
    assert_eq!(rep.synthesised_fills, 1);
    let o = h.oms().order(&r.client_order_id).unwrap();
    assert_eq!((o.status, o.filled_qty), (OrderStatus::Filled, Decimal::from(5)));
    let fills = h.oms().fills().unwrap();
    assert!(fills[0].synthesised);
    assert_eq!(fills[0].price, Decimal::from(20));
    assert_eq!(h.oms().position(&sym("GOOG")), Decimal::from(7));
    // The stream's fill arriving after the reconciliation is a duplicate.
    h.oms().on_update(&b.updates[1]).unwrap();
    assert_eq!(h.oms().fill_count(), 1);
    h.reopen();
    let want: BTreeMap<Symbol, Decimal> = snap.positions.iter().cloned().collect();
    assert_eq!(h.oms().positions(), want, "adjustments survive a restart");
    assert!(h.oms().reconcile(&snap).unwrap().is_clean());
}

#[test]
fn a_submission_the_broker_never_saw_is_lost_after_the_grace_period_and_never_resent() {
    let mut h = Harness::new();
    h.oms().reconcile(&BrokerSnapshot::default()).unwrap();
    let r = submitted(h.oms().submit(request("AAPL", 0, Side::Buy, 5)).unwrap());
    h.reopen(); // the process died before the POST left
    let rep = h.oms().reconcile(&BrokerSnapshot::default()).unwrap();
    assert!(rep.lost.is_empty(), "within the grace period the POST may still arrive");
    assert_eq!(h.oms().order(&r.client_order_id).unwrap().status, OrderStatus::PendingNew);
    h.clock.set(t0() + chrono::Duration::seconds(61));
    let rep = h.oms().reconcile(&BrokerSnapshot::default()).unwrap();
    assert_eq!(rep.lost, vec![r.client_order_id.clone()]);
    assert_eq!(h.oms().order(&r.client_order_id).unwrap().status, OrderStatus::Rejected);
    assert!(h.oms().submit(request("AAPL", 0, Side::Buy, 5)).unwrap().is_none());
    // It reached the broker after all and filled: the broker wins.
    let mut b = ToyBroker::default();
    b.accept(&r);
    b.fill(0, Decimal::from(5), Decimal::from(10));
    h.oms().on_update(&b.updates[1]).unwrap();
    assert_eq!(h.oms().order(&r.client_order_id).unwrap().status, OrderStatus::Filled);
    assert_eq!(h.oms().position(&sym("AAPL")), Decimal::from(5));
}

#[test]
fn an_order_waiting_in_the_command_queue_is_never_lost_and_its_grace_runs_from_the_send_attempt() {
    let mut h = Harness::new();
    h.oms().reconcile(&BrokerSnapshot::default()).unwrap();
    let r = submitted(h.oms().submit(request("AAPL", 0, Side::Buy, 5)).unwrap());
    let id = r.client_order_id.clone();
    // The broker is slow: minutes pass with the submit still queued behind a snapshot that kept failing.
    h.clock.set(t0() + chrono::Duration::seconds(300));
    let rep = h.oms().reconcile(&BrokerSnapshot::default()).unwrap();
    assert!(rep.lost.is_empty(), "an order that was never sent cannot have been lost");
    assert_eq!(h.oms().order(&id).unwrap().status, OrderStatus::PendingNew);
    // Its turn comes: the attempt is stored, and the grace period runs from it.
    h.oms().on_sending(&id).unwrap();
    assert_eq!(h.oms().order(&id).unwrap().sent_at, Some(t0() + chrono::Duration::seconds(300)));
    h.clock.set(t0() + chrono::Duration::seconds(359));
    assert!(h.oms().reconcile(&BrokerSnapshot::default()).unwrap().lost.is_empty());
    h.clock.set(t0() + chrono::Duration::seconds(361));
    assert_eq!(h.oms().reconcile(&BrokerSnapshot::default()).unwrap().lost, vec![id.clone()]);
    // The attempt is on disk: a restart counts from it too.
    let q = submitted(h.oms().submit(request("MSFT", 0, Side::Buy, 5)).unwrap());
    h.oms().on_sending(&q.client_order_id).unwrap();
    h.reopen();
    assert_eq!(h.oms().order(&q.client_order_id).unwrap().sent_at, Some(t0() + chrono::Duration::seconds(361)));
    h.clock.set(t0() + chrono::Duration::seconds(400));
    assert!(h.oms().reconcile(&BrokerSnapshot::default()).unwrap().lost.is_empty());
}

#[test]
fn submit_failures_reject_or_ask_for_reconciliation() {
    let mut h = Harness::new();
    h.oms().reconcile(&BrokerSnapshot::default()).unwrap();
    let a = submitted(h.oms().submit(request("AAPL", 0, Side::Buy, 5)).unwrap());
    let b = submitted(h.oms().submit(request("MSFT", 0, Side::Buy, 5)).unwrap());
    assert!(h.oms().on_submit_failed(&a.client_order_id, "insufficient buying power", false).unwrap().is_empty());
    assert_eq!(h.oms().order(&a.client_order_id).unwrap().status, OrderStatus::Rejected);
    let cmds = h.oms().on_submit_failed(&b.client_order_id, "timeout", true).unwrap();
    assert_eq!(cmds, vec![Command::Reconcile]);
    assert_eq!(h.oms().order(&b.client_order_id).unwrap().status, OrderStatus::PendingNew);
    // An outcome unknown: no new order until the broker's view is back (no stale burst).
    assert!(!h.oms().ready());
    assert!(matches!(h.oms().submit(request("IBM", 0, Side::Buy, 5)), Err(OmsError::NotReady)));
    h.oms().reconcile(&BrokerSnapshot::default()).unwrap();
    assert!(h.oms().ready());
    assert_eq!(h.oms().on_broker_reconnected(), Command::Reconcile);
    assert!(!h.oms().ready());
}

#[test]
fn a_crash_between_a_fill_and_its_order_write_loses_nothing_and_counts_nothing_twice() {
    let mut h = Harness::new();
    h.oms().reconcile(&BrokerSnapshot::default()).unwrap();
    let mut b = ToyBroker::default();
    let r = submitted(h.oms().submit(request("AAPL", 0, Side::Buy, 5)).unwrap());
    b.accept(&r);
    b.fill(0, Decimal::from(5), Decimal::from(10));
    // Write only the fill record, as a process killed right after it would have.
    {
        let store = h.oms().store.clone();
        let fills: TypedTree<FillRecord> = store.tree(TreeName::Fills).unwrap();
        let f = FillRecord {
            client_order_id: r.client_order_id.clone(),
            symbol: sym("AAPL"),
            side: Side::Buy,
            qty: Decimal::from(5),
            price: Decimal::from(10),
            cum_qty: Decimal::from(5),
            execution_id: Some("x1".into()),
            time: t0(),
            synthesised: false,
        };
        fills.insert(&f.key(), &f).unwrap();
    }
    h.reopen();
    assert_eq!(h.oms().order(&r.client_order_id).unwrap().filled_qty, Decimal::from(5));
    assert_eq!(h.oms().position(&sym("AAPL")), Decimal::from(5));
    h.oms().on_update(&b.updates[1]).unwrap();
    h.oms().reconcile(&b.snapshot()).unwrap();
    assert_eq!(h.oms().fill_count(), 1);
    assert_eq!(h.oms().position(&sym("AAPL")), Decimal::from(5));
}

/// Our order as Alpaca lists it, with `status` as written (parsed as the broker runner parses it).
fn listed(r: &OrderRequest, broker_id: &str, status: &str) -> BrokerOrder {
    crate::alpaca::parse::order_value(serde_json::json!({
        "id": broker_id,
        "client_order_id": r.client_order_id.as_str(),
        "symbol": r.symbol.as_str(),
        "side": "buy",
        "type": "market",
        "time_in_force": "day",
        "extended_hours": false,
        "qty": r.qty.get().to_string(),
        "filled_qty": "0",
        "status": status,
        "created_at": "2023-11-14T22:13:20Z",
    }))
    .unwrap_or_else(|e| panic!("{status}: {e}"))
}

#[test]
fn an_order_the_broker_lists_is_never_lost_whatever_its_status_even_one_unknown_here() {
    let mut h = Harness::new();
    h.oms().reconcile(&BrokerSnapshot::default()).unwrap();
    let pending = submitted(h.oms().submit(request("AAPL", 0, Side::Buy, 5)).unwrap());
    let accepted = submitted(h.oms().submit(request("MSFT", 0, Side::Buy, 5)).unwrap());
    for r in [&pending, &accepted] {
        h.oms().on_sending(&r.client_order_id).unwrap();
    }
    let mut b = ToyBroker::default();
    b.accept(&accepted);
    h.oms().on_update(&b.updates[0]).unwrap();
    assert_eq!(h.oms().order(&accepted.client_order_id).unwrap().status, OrderStatus::Accepted);
    // Ten minutes on, far past the 60 s grace period: the broker lists both, in statuses we do not know.
    h.clock.set(t0() + chrono::Duration::seconds(600));
    for (pending_status, accepted_status) in [("pending_new", "accepted"), ("queued_at_venue", "a_new_status")] {
        let snap = BrokerSnapshot {
            orders: vec![listed(&pending, "b-p", pending_status), listed(&accepted, "b-a", accepted_status)],
            ..BrokerSnapshot::default()
        };
        let rep = h.oms().reconcile(&snap).unwrap();
        assert!(rep.lost.is_empty(), "{pending_status}: an order the broker holds is not lost: {rep:?}");
        for r in [&pending, &accepted] {
            let o = h.oms().order(&r.client_order_id).unwrap();
            assert!(!o.status.is_terminal() && o.note.is_none(), "{pending_status}: {o:?}");
        }
        assert_eq!(h.oms().open_orders().count(), 2, "both still working, blocking their symbols");
    }
    // When the broker ends it, it ends here.
    let snap = BrokerSnapshot { orders: vec![listed(&accepted, "b-a", "canceled")], ..BrokerSnapshot::default() };
    h.oms().reconcile(&snap).unwrap();
    assert_eq!(h.oms().order(&accepted.client_order_id).unwrap().status, OrderStatus::Canceled);
}

#[test]
fn our_own_orders_unknown_to_a_restored_store_are_ours_not_adopted() {
    let mut h = Harness::new();
    h.oms().reconcile(&BrokerSnapshot::default()).unwrap();
    // Placed by tradebot after the backup the store was restored from: the store has never heard of it.
    let ours = request("AAPL", 3, Side::Buy, 4).into_inner();
    let mut by_hand = request("IBM", 0, Side::Buy, 2).into_inner();
    by_hand.client_order_id = ClientOrderId::new("by-hand-7").unwrap();
    let snap = BrokerSnapshot {
        orders: vec![listed(&ours, "b-1", "new"), listed(&by_hand, "b-2", "new")],
        ..BrokerSnapshot::default()
    };
    let rep = h.oms().reconcile(&snap).unwrap();
    assert!(rep.lost.is_empty());
    let o = h.oms().order(&ours.client_order_id).unwrap();
    assert!(!o.adopted, "a tb- order is tradebot's own: {o:?}");
    assert_eq!((o.status, o.bar_time), (OrderStatus::Accepted, Some(ours.bar_time)));
    assert!(h.oms().order(&by_hand.client_order_id).unwrap().adopted, "one placed by hand is still adopted");
    h.reopen();
    assert!(!h.oms().order(&ours.client_order_id).unwrap().adopted, "stored as ours");
}

mod property;
