//! Runner tests with an in-memory broker, a channel feed and channel updates: the first reconciliation
//! comes before any order, one order per decision, reconnects reconcile, failures reach the OMS, and
//! shutdown returns the core with its state.

use super::*;
use crate::alpaca::feed::StreamError;
use crate::alpaca::updates::UpdatesEvent;
use crate::broker::BrokerError;
use crate::domain::BrokerOrder;
use crate::domain::{Bar, ClientOrderId, OrderId, OrderRequest, OrderStatus, Qty, Symbol, Timeframe};
use crate::engine::{BrokerSnapshot, ManualClock};
use crate::feed::{FeedError, FeedEvent};
use crate::oms::{Oms, OmsConfig};
use crate::risk::RiskApproved;
use crate::store::Store;
use chrono::DateTime;
use rust_decimal::Decimal;
use std::sync::{Arc, Mutex};

struct ChanFeed(mpsc::UnboundedReceiver<FeedEvent>);

impl MarketFeed for ChanFeed {
    async fn next(&mut self) -> Result<FeedEvent, FeedError> {
        match self.0.recv().await {
            Some(e) => Ok(e),
            None => std::future::pending().await,
        }
    }
}

#[derive(Default)]
struct MemState {
    orders: Vec<BrokerOrder>,
    snapshots: usize,
    /// Submits answer with this error (outcome unknown) instead of placing the order.
    fail_submits: bool,
    /// Each submit takes this long before the order is placed (a slow POST).
    submit_delay: Duration,
}

/// Fills every order at once at 10.
#[derive(Clone, Default)]
struct MemBroker(Arc<Mutex<MemState>>);

impl MemBroker {
    fn state(&self) -> std::sync::MutexGuard<'_, MemState> {
        self.0.lock().unwrap()
    }
}

impl Broker for MemBroker {
    async fn submit(&mut self, o: RiskApproved<OrderRequest>) -> Result<BrokerOrder, BrokerError> {
        let delay = self.state().submit_delay;
        tokio::time::sleep(delay).await;
        let mut s = self.state();
        if s.fail_submits {
            return Err(BrokerError::Ambiguous("connection reset".into()));
        }
        let b = BrokerOrder {
            id: OrderId::new(&format!("m{}", s.orders.len())).unwrap(),
            client_order_id: Some(o.client_order_id.clone()),
            raw_client_order_id: o.client_order_id.to_string(),
            symbol: o.symbol.clone(),
            side: o.side,
            qty: Some(o.qty.get()),
            notional: None,
            filled_qty: o.qty.get(),
            filled_avg_price: Some(Decimal::from(10)),
            limit_price: None,
            status: OrderStatus::Filled,
            broker_status: "filled".into(),
            created_at: None,
        };
        s.orders.push(b.clone());
        Ok(b)
    }

    async fn cancel(&mut self, _: &ClientOrderId) -> Result<(), BrokerError> {
        Ok(())
    }

    async fn snapshot(&mut self) -> Result<BrokerSnapshot, BrokerError> {
        let mut s = self.state();
        s.snapshots += 1;
        let mut pos = std::collections::BTreeMap::<Symbol, Decimal>::new();
        for o in &s.orders {
            *pos.entry(o.symbol.clone()).or_default() += o.filled_qty;
        }
        Ok(BrokerSnapshot { orders: s.orders.clone(), positions: pos.into_iter().collect(), ..Default::default() })
    }
}

fn bar(symbol: &str, minute: i64) -> FeedEvent {
    let t = DateTime::from_timestamp(1_700_000_000 + minute * 60, 0).unwrap();
    FeedEvent::Bar(
        Bar::new(Symbol::new(symbol).unwrap(), Timeframe::Minutes(1), t, 10.0, 10.0, 10.0, 10.0, 1.0).unwrap(),
    )
}

struct Rig {
    feed: mpsc::UnboundedSender<FeedEvent>,
    updates: mpsc::UnboundedSender<UpdatesEvent>,
    broker: MemBroker,
    stop: CancellationToken,
    run: tokio::task::JoinHandle<Result<RunnerExit<ScriptedCore>, RunError>>,
    _dir: tempfile::TempDir,
}

fn start() -> Rig {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path()).unwrap();
    let clock = ManualClock::new(DateTime::from_timestamp(1_700_000_000, 0).unwrap());
    let oms = Oms::open(&store, Box::new(clock), OmsConfig::default()).unwrap();
    let core = ScriptedCore::new(oms, Qty::new(Decimal::ONE).unwrap(), Decimal::from(1000), 0);
    let (feed, feed_rx) = mpsc::unbounded_channel();
    let (updates, upd_rx) = mpsc::unbounded_channel();
    let broker = MemBroker::default();
    let stop = CancellationToken::new();
    let cfg = RunnerConfig {
        broker_timeout: Duration::from_secs(2),
        reconcile_retry: Duration::from_millis(10),
        handle_signals: false,
        // The bars are from 2023.
        max_order_age: Duration::from_secs(1 << 32),
        ..RunnerConfig::default()
    };
    let run =
        tokio::spawn(super::run(core, ChanFeed(feed_rx), ChannelUpdates(upd_rx), broker.clone(), cfg, stop.clone()));
    Rig { feed, updates, broker, stop, run, _dir: dir }
}

/// Waits (up to 5 s) until `f` holds.
async fn until(what: &str, f: impl Fn() -> bool) {
    for _ in 0..500 {
        if f() {
            return;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    panic!("timed out waiting for {what}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn trades_each_decision_once_after_the_first_reconciliation_and_returns_the_core() {
    let rig = start();
    until("the first reconciliation", || rig.broker.state().snapshots == 1).await;
    for ev in [bar("AAPL", 0), bar("MSFT", 0), bar("AAPL", 0), bar("AAPL", 1)] {
        rig.feed.send(ev).unwrap();
    }
    until("three orders", || rig.broker.state().orders.len() == 3).await;
    rig.updates.send(UpdatesEvent::Connected { reconnect: true }).unwrap();
    until("a reconciliation after the reconnect", || rig.broker.state().snapshots == 2).await;
    rig.stop.cancel();
    let core = rig.run.await.unwrap().unwrap().core;
    assert_eq!(rig.broker.state().orders.len(), 3, "the repeated AAPL bar was not ordered twice");
    let oms = core.oms();
    assert!(oms.ready());
    assert_eq!(oms.fill_count(), 3);
    assert_eq!(oms.position(&Symbol::new("AAPL").unwrap()), Decimal::from(2));
    assert_eq!(oms.position(&Symbol::new("MSFT").unwrap()), Decimal::ONE);
    // Each send attempt was reported to the core before its POST, so the lost rule counts from it.
    assert!(oms.orders().all(|o| o.sent_at.is_some()), "every order's send attempt is recorded");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_ambiguous_submit_failure_leads_to_a_reconciliation() {
    let rig = start();
    until("the first reconciliation", || rig.broker.state().snapshots == 1).await;
    rig.broker.state().fail_submits = true;
    rig.feed.send(bar("AAPL", 0)).unwrap();
    until("a reconciliation after the failure", || rig.broker.state().snapshots == 2).await;
    rig.stop.cancel();
    let core = rig.run.await.unwrap().unwrap().core;
    let id = ClientOrderId::derive(ScriptedCore::STRATEGY, &Symbol::new("AAPL").unwrap(), bar_time(0), 0);
    assert_eq!(core.oms().order(&id).unwrap().status, OrderStatus::PendingNew, "in flight until the grace period ends");
}

fn bar_time(minute: i64) -> DateTime<chrono::Utc> {
    DateTime::from_timestamp(1_700_000_000 + minute * 60, 0).unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shutdown_during_a_burst_records_the_post_in_flight_and_the_unsent_orders_at_once() {
    let rig = start();
    until("the first reconciliation", || rig.broker.state().snapshots == 1).await;
    rig.broker.state().submit_delay = Duration::from_millis(300);
    for m in 0..8 {
        rig.feed.send(bar("AAPL", m)).unwrap();
    }
    until("the first order placed", || rig.broker.state().orders.len() == 1).await;
    // The second POST is in flight now; the other six are queued.
    tokio::time::sleep(Duration::from_millis(50)).await;
    rig.stop.cancel();
    let core = rig.run.await.unwrap().unwrap().core;
    let placed: Vec<ClientOrderId> =
        rig.broker.state().orders.iter().filter_map(|o| o.client_order_id.clone()).collect();
    assert_eq!(placed.len(), 2, "the POST in flight at the stop was finished, no new one started");
    let snapshots = rig.broker.state().snapshots;
    drop(core);
    // Reopened from the store, with no reconciliation since: the store equals the broker.
    let store = Store::open(rig._dir.path()).unwrap();
    let clock = ManualClock::new(DateTime::from_timestamp(1_700_000_000, 0).unwrap());
    let oms = Oms::open(&store, Box::new(clock), OmsConfig::default()).unwrap();
    assert_eq!(rig.broker.state().snapshots, snapshots);
    let orders: Vec<_> = oms.orders().cloned().collect();
    assert_eq!(orders.len(), 8, "{orders:?}");
    for o in &orders {
        if placed.contains(&o.client_order_id) {
            assert_eq!(o.status, OrderStatus::Filled, "{o:?}");
        } else {
            assert_eq!(o.status, OrderStatus::Rejected, "{o:?}");
            assert!(o.note.as_deref().is_some_and(|n| n.starts_with("not_sent")), "{o:?}");
        }
    }
    assert_eq!(oms.position(&Symbol::new("AAPL").unwrap()), Decimal::from(2));
}

/// A feed that fails at once with `err`.
struct FailingFeed(Option<FeedError>);

impl MarketFeed for FailingFeed {
    async fn next(&mut self) -> Result<FeedEvent, FeedError> {
        match self.0.take() {
            Some(e) => Err(e),
            None => std::future::pending().await,
        }
    }
}

fn quick_cfg() -> RunnerConfig {
    RunnerConfig {
        broker_timeout: Duration::from_secs(2),
        reconcile_retry: Duration::from_millis(10),
        shutdown_deadline: Duration::from_secs(5),
        handle_signals: false,
        max_order_age: Duration::from_secs(1 << 32),
        ..RunnerConfig::default()
    }
}

/// A rig whose runner refuses orders older than `max_order_age` at send, and queues at most `queue`.
fn start_with(max_order_age: Duration, queue: usize) -> Rig {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path()).unwrap();
    let clock = ManualClock::new(DateTime::from_timestamp(1_700_000_000, 0).unwrap());
    let oms = Oms::open(&store, Box::new(clock), OmsConfig::default()).unwrap();
    let core = ScriptedCore::new(oms, Qty::new(Decimal::ONE).unwrap(), Decimal::from(1000), 0);
    let (feed, feed_rx) = mpsc::unbounded_channel();
    let (updates, upd_rx) = mpsc::unbounded_channel();
    let broker = MemBroker::default();
    let stop = CancellationToken::new();
    let cfg = RunnerConfig { max_order_age, queue, ..quick_cfg() };
    let run =
        tokio::spawn(super::run(core, ChanFeed(feed_rx), ChannelUpdates(upd_rx), broker.clone(), cfg, stop.clone()));
    Rig { feed, updates, broker, stop, run, _dir: dir }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_order_stale_at_its_turn_is_not_sent_and_a_full_queue_sends_nothing_late() {
    // Bars from 2023 and a one-hour limit: refused at the door, recorded rejected at once.
    let rig = start_with(Duration::from_secs(3600), 256);
    until("the first reconciliation", || rig.broker.state().snapshots == 1).await;
    rig.feed.send(bar("AAPL", 0)).unwrap();
    tokio::time::sleep(Duration::from_millis(300)).await;
    rig.stop.cancel();
    let core = rig.run.await.unwrap().unwrap().core;
    assert!(rig.broker.state().orders.is_empty(), "a stale order went out");
    let id = ClientOrderId::derive(ScriptedCore::STRATEGY, &Symbol::new("AAPL").unwrap(), bar_time(0), 0);
    let o = core.oms().order(&id).unwrap();
    assert_eq!(o.status, OrderStatus::Rejected, "{o:?}");
    assert!(o.note.as_deref().is_some_and(|n| n.contains("stale at send")), "{o:?}");

    // A broker so slow that the queue (2) fills: the orders beyond it are recorded not sent, none goes
    // out late.
    let rig = start_with(Duration::from_secs(1 << 32), 2);
    until("the first reconciliation", || rig.broker.state().snapshots == 1).await;
    rig.broker.state().submit_delay = Duration::from_millis(400);
    for m in 0..8 {
        rig.feed.send(bar("AAPL", m)).unwrap();
    }
    tokio::time::sleep(Duration::from_millis(300)).await;
    rig.stop.cancel();
    let core = rig.run.await.unwrap().unwrap().core;
    let notes: Vec<String> = core.oms().orders().filter_map(|o| o.note.clone()).collect();
    assert!(notes.iter().filter(|n| n.starts_with("not_sent")).count() >= 5, "{notes:?}");
    assert!(rig.broker.state().orders.len() <= 1, "only the POST in flight: {}", rig.broker.state().orders.len());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fatal_feed_error_ends_the_run_with_its_reason_and_the_core() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path()).unwrap();
    let clock = ManualClock::new(DateTime::from_timestamp(1_700_000_000, 0).unwrap());
    let oms = Oms::open(&store, Box::new(clock), OmsConfig::default()).unwrap();
    let core = ScriptedCore::new(oms, Qty::new(Decimal::ONE).unwrap(), Decimal::from(1000), 0);
    let (_updates, upd_rx) = mpsc::unbounded_channel();
    let err =
        FeedError::from(StreamError::Subscription { url: "wss://x".into(), detail: "bars for AAPL missing".into() });
    let end = tokio::time::timeout(
        Duration::from_secs(10),
        super::run(
            core,
            FailingFeed(Some(err)),
            ChannelUpdates(upd_rx),
            MemBroker::default(),
            quick_cfg(),
            CancellationToken::new(),
        ),
    )
    .await
    .expect("the run stops by itself");
    let end = end.unwrap();
    assert!(end.fatal.as_deref().is_some_and(|r| r.contains("bars for AAPL missing")), "{:?}", end.fatal);
    // A stream task that ended without a word, and a backfill page it cannot use, are fatal too.
    assert!(FeedError::from(StreamError::Died).is_fatal());
    let bad_page =
        crate::alpaca::rest::RestError::Decode { endpoint: "GET /v2/stocks/bars", message: "bad bar".into() };
    assert!(!bad_page.is_recoverable() && FeedError::from(StreamError::Backfill(bad_page)).is_fatal());
    assert_eq!(
        FeedError::from(StreamError::Lost("reset".into())),
        FeedError::Transient("market data stream: reset".into())
    );
    assert_eq!(FeedError::from(StreamError::Stopped), FeedError::Stopped);
}

/// A core that panics on its first bar.
struct PanickingCore;

impl Core for PanickingCore {
    fn process(&mut self, ev: Event) -> Vec<Command> {
        if matches!(ev, Event::Bar(_)) {
            panic!("a bug in the core");
        }
        Vec::new()
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_panic_on_the_core_thread_stops_the_run_at_once() {
    let (feed, feed_rx) = mpsc::unbounded_channel();
    let (_updates, upd_rx) = mpsc::unbounded_channel();
    let run = tokio::spawn(super::run(
        PanickingCore,
        ChanFeed(feed_rx),
        ChannelUpdates(upd_rx),
        MemBroker::default(),
        quick_cfg(),
        CancellationToken::new(),
    ));
    feed.send(bar("AAPL", 0)).unwrap();
    let out = tokio::time::timeout(Duration::from_secs(10), run).await.expect("no idling until a watchdog");
    assert!(matches!(out.unwrap(), Err(RunError::CorePanicked)));
}
