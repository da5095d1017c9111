//! `AlpacaBroker` against the fake Alpaca: orders, idempotent resubmission, ambiguous failures,
//! snapshots, asset checks and error mapping. Tests that send more than the trading rate limit's burst
//! run on paused time, so its waits take none.

use super::*;
use crate::alpaca::fake::{FakeAlpaca, Fault};
use crate::domain::{OrderStatus, Qty, Side};
use crate::risk::approve_for_test;
use chrono::DateTime;
use std::str::FromStr;

/// A buy with the time in force tradebot gives the symbol's asset class.
fn order(symbol: &str, bar: i64, qty: &str) -> RiskApproved<OrderRequest> {
    let s = Symbol::new(symbol).unwrap();
    let tif = crate::risk::tif_for(&s, None);
    order_with(symbol, bar, qty, Side::Buy, tif)
}

fn order_with(symbol: &str, bar: i64, qty: &str, side: Side, tif: OrderTif) -> RiskApproved<OrderRequest> {
    let s = Symbol::new(symbol).unwrap();
    let bar_time = DateTime::from_timestamp(1_700_000_000 + bar * 60, 0).unwrap();
    approve_for_test(OrderRequest {
        client_order_id: ClientOrderId::derive(if side == Side::Buy { "t" } else { "s" }, &s, bar_time, 0),
        symbol: s,
        side,
        qty: Qty::from_str(qty).unwrap(),
        tif,
        bar_time,
        ref_price: 100.0,
        why: crate::domain::OrderWhy::Model,
    })
}

async fn fake() -> (FakeAlpaca, AlpacaBroker) {
    let fake = FakeAlpaca::start(0).await.unwrap();
    fake.set_price("AAPL", Decimal::from(100));
    let rest = RestClient::new(fake.rest_config()).unwrap();
    (fake, AlpacaBroker::new(rest))
}

#[tokio::test]
async fn submits_once_and_reports_the_order_in_the_snapshot() {
    let (fake, mut broker) = fake().await;
    let o = broker.submit(order("AAPL", 0, "2")).await.unwrap();
    assert_eq!(o.status, OrderStatus::Filled, "the fake fills market orders at once");
    // The same decision again (a restart resending): Alpaca refuses the id, the client finds the order.
    let again = broker.submit(order("AAPL", 0, "2")).await.unwrap();
    assert_eq!(again.id, o.id);
    assert_eq!(fake.lock().book.orders.len(), 1);
    let snap = broker.snapshot().await.unwrap();
    assert_eq!(snap.orders.len(), 1);
    assert_eq!(snap.positions, vec![(Symbol::new("AAPL").unwrap(), Decimal::from(2))]);
    assert_eq!(snap.cash, Decimal::from(100_000 - 200));
    assert!(snap.taken_at.is_some());
}

#[tokio::test]
async fn a_server_error_after_the_order_was_placed_finds_it_instead_of_sending_again() {
    let (fake, mut broker) = fake().await;
    broker.submit(order("AAPL", 0, "1")).await.unwrap(); // caches the asset
    fake.push_fault(Fault::ServerErrorAfterProcessing);
    let o = broker.submit(order("AAPL", 1, "1")).await.unwrap();
    assert_eq!(o.filled_qty, Decimal::ONE);
    assert_eq!(fake.lock().book.orders.len(), 2);
}

#[tokio::test]
async fn refusals_are_rejections_and_cancel_reaches_the_order() {
    let (fake, mut broker) = fake().await;
    let e = broker.submit(order("AAPL", 0, "5000")).await.unwrap_err();
    assert!(matches!(e, BrokerError::Rejected(_)), "{e}");
    assert!(!e.retriable());
    let e = broker.submit(order("ZZZZ", 0, "1")).await.unwrap_err();
    assert!(matches!(e, BrokerError::Rejected(_)), "unknown asset: {e}");
    let filled = order("AAPL", 1, "1");
    broker.submit(filled.clone()).await.unwrap();
    let e = broker.cancel(&filled.client_order_id).await.unwrap_err();
    assert!(matches!(e, BrokerError::Rejected(_)), "a filled order is not cancelable: {e}");
    assert_eq!(fake.count("DELETE", &format!("/v2/orders/{}", fake.lock().book.orders[0].id)), 1);
}

#[test]
fn asset_facts_refuse_orders_alpaca_would_refuse() {
    let mut a = Asset {
        symbol: Symbol::new("BTC/USD").unwrap(),
        class: "crypto".into(),
        tradable: true,
        fractionable: true,
        shortable: false,
        min_order_size: Some(Decimal::from_str("0.0001").unwrap()),
        min_trade_increment: None,
        price_increment: None,
    };
    assert_eq!(asset_refusal(&a, Decimal::from_str("0.5").unwrap()), None);
    assert!(asset_refusal(&a, Decimal::from_str("0.00001").unwrap()).is_some());
    a.fractionable = false;
    assert!(asset_refusal(&a, Decimal::from_str("0.5").unwrap()).is_some());
    assert_eq!(asset_refusal(&a, Decimal::from(2)), None);
    a.fractionable = true;
    a.min_trade_increment = Some(Decimal::from_str("0.0001").unwrap());
    assert_eq!(asset_refusal(&a, Decimal::from_str("0.0012").unwrap()), None);
    let why = asset_refusal(&a, Decimal::from_str("0.00125").unwrap()).unwrap();
    assert!(why.contains("increment 0.0001"), "{why}");
    a.tradable = false;
    assert!(asset_refusal(&a, Decimal::from(2)).is_some());
}

#[test]
fn errors_map_by_what_they_mean_for_the_order() {
    let timeout = || RestError::Timeout { endpoint: "x", timeout: std::time::Duration::from_secs(1) };
    assert!(matches!(map_error(timeout(), true), BrokerError::Ambiguous(_)));
    assert!(matches!(map_error(timeout(), false), BrokerError::Unavailable(_)));
    let auth = RestError::Auth { endpoint: "x", status: 401, message: "no".into() };
    assert!(matches!(map_error(auth, true), BrokerError::Auth(_)));
    let bp = RestError::InsufficientBuyingPower { endpoint: "x", message: "no".into() };
    assert!(matches!(map_error(bp, true), BrokerError::Rejected(_)));
}

#[tokio::test(start_paused = true)]
async fn crypto_positions_come_back_under_the_pair_symbol_orders_use() {
    let (fake, mut broker) = fake().await;
    fake.set_price("BTC/USD", Decimal::from(50_000));
    broker.submit(order("BTC/USD", 0, "0.5")).await.unwrap();
    broker.submit(order("AAPL", 1, "3")).await.unwrap();
    // Alpaca answers the position as `BTCUSD`; the snapshot must speak of `BTC/USD`, the symbol of the
    // orders, fills and config, or every reconciliation zeroes the holding and adopts a phantom.
    let snap = broker.snapshot().await.unwrap();
    let mut positions = snap.positions.clone();
    positions.sort();
    assert_eq!(
        positions,
        vec![(Symbol::new("AAPL").unwrap(), Decimal::from(3)), (Symbol::new("BTC/USD").unwrap(), Decimal::new(5, 1))]
    );
}

/// An open order in the fake's book as Alpaca would list it, placed outside tradebot.
fn foreign(
    id: &str,
    symbol: &str,
    status: crate::alpaca::wire::rest::OrderStatus,
    at: &str,
) -> crate::alpaca::wire::rest::Order {
    crate::alpaca::wire::rest::Order {
        id: id.into(),
        client_order_id: format!("web-{id}"),
        created_at: Some(at.into()),
        submitted_at: Some(at.into()),
        symbol: symbol.into(),
        qty: Some("1".into()),
        filled_qty: Some("0".into()),
        status,
        ..Default::default()
    }
}

#[tokio::test(start_paused = true)]
async fn foreign_orders_and_positions_do_not_fail_the_snapshot() {
    use crate::alpaca::wire::rest::OrderStatus as W;
    let (fake, mut broker) = fake().await;
    let mine = broker.submit(order("AAPL", 0, "2")).await.unwrap();
    {
        let mut s = fake.lock();
        let at = "2030-01-01T15:00:00Z";
        // An options order (symbol over 15 characters), a multi-leg order (empty symbol), and an options
        // position; and an order in a status this build does not know, which is listed (kept working).
        s.book.orders.push(foreign("opt-1", "AAPL240119C00150000", W::New, at));
        s.book.orders.push(foreign("mleg-1", "", W::New, at));
        s.book.orders.push(foreign("new-status-1", "MSFT", W::Unknown, at));
        s.book.positions.insert("AAPL240119C00150000".into(), (Decimal::from(1), Decimal::from(3)));
    }
    for _ in 0..2 {
        let snap = broker.snapshot().await.expect("one foreign element must not fail the snapshot");
        let mut ids: Vec<String> = snap.orders.iter().map(|o| o.id.to_string()).collect();
        ids.sort();
        let mut want = vec![mine.id.to_string(), "new-status-1".to_string()];
        want.sort();
        assert_eq!(ids, want, "an order in an unknown status is listed, never dropped");
        let unknown = snap.orders.iter().find(|o| o.id.to_string() == "new-status-1").unwrap();
        assert_eq!(unknown.status, OrderStatus::Accepted, "kept working");
        assert_eq!(snap.positions, vec![(Symbol::new("AAPL").unwrap(), Decimal::from(2))]);
    }
    assert_eq!(broker.reported.len(), 3, "each foreign element is reported once: {:?}", broker.reported);
}

#[tokio::test]
async fn every_open_order_is_listed_beyond_one_page() {
    use crate::alpaca::wire::rest::OrderStatus as W;
    let (fake, mut broker) = fake().await;
    {
        let mut s = fake.lock();
        for i in 0..503 {
            // Three share one instant across the page boundary.
            let at = format!("2030-01-01T15:{:02}:{:02}Z", i.min(500) / 60, i.min(500) % 60);
            let mut o = foreign(&format!("o-{i}"), "AAPL", W::New, &at);
            o.client_order_id = format!("tb-{i}");
            s.book.orders.push(o);
        }
    }
    let snap = broker.snapshot().await.unwrap();
    let ids: HashSet<_> = snap.orders.iter().map(|o| o.id.clone()).collect();
    assert_eq!((snap.orders.len(), ids.len()), (503, 503), "none capped, none twice");
}

#[tokio::test(start_paused = true)]
async fn a_fill_between_the_order_list_and_the_positions_is_not_counted_twice() {
    let (fake, mut broker) = fake().await;
    fake.lock().book.hold_orders = true;
    broker.submit(order("AAPL", 0, "2")).await.unwrap();
    let lists_before = fake.count("GET", "/v2/orders");
    // Requests of a snapshot: the order lists (all, open), then the positions: the held order fills just
    // before the positions are read, after the orders were listed as unfilled.
    fake.push_fault(Fault::Slow(std::time::Duration::ZERO));
    fake.push_fault(Fault::Slow(std::time::Duration::ZERO));
    fake.push_fault(Fault::FillHeld);
    let snap = broker.snapshot().await.unwrap();
    let aapl = Symbol::new("AAPL").unwrap();
    let held = snap.positions.iter().find(|(s, _)| *s == aapl).map(|p| p.1);
    assert_eq!(held, Some(Decimal::from(2)), "{snap:?}");
    let o = snap.orders.iter().find(|o| o.symbol == aapl).unwrap();
    assert_eq!((o.status, o.filled_qty), (OrderStatus::Filled, Decimal::from(2)), "orders and positions agree");
    assert!(fake.count("GET", "/v2/orders") - lists_before >= 6, "taken again after the fill moved");
}

#[tokio::test]
async fn every_time_in_force_reaches_alpaca_as_its_wire_value() {
    use crate::alpaca::wire::rest::TimeInForce as Wire;
    let (fake, mut broker) = fake().await;
    let all = [
        (OrderTif::Day, TimeInForce::Day, Wire::Day),
        (OrderTif::Gtc, TimeInForce::Gtc, Wire::Gtc),
        (OrderTif::Ioc, TimeInForce::Ioc, Wire::Ioc),
    ];
    for (bar, (tif, rest, wire)) in all.into_iter().enumerate() {
        assert_eq!(time_in_force(tif), rest);
        broker.submit(order_with("AAPL", bar as i64, "1", Side::Buy, tif)).await.unwrap();
        assert_eq!(fake.lock().book.orders[bar].time_in_force, wire, "{tif:?}");
    }
}

#[tokio::test]
async fn crypto_orders_go_out_gtc_and_alpaca_refuses_day() {
    let (fake, mut broker) = fake().await;
    fake.set_price("BTC/USD", Decimal::from(50_000));
    let e = broker.submit(order_with("BTC/USD", 0, "0.01", Side::Buy, OrderTif::Day)).await.unwrap_err();
    assert!(matches!(&e, BrokerError::Rejected(m) if m.contains("invalid crypto time_in_force")), "{e}");
    let o = broker.submit(order("BTC/USD", 1, "0.01")).await.unwrap();
    assert_eq!(o.status, OrderStatus::Filled);
    let sent = fake.lock().book.orders[0].time_in_force;
    assert_eq!(sent, crate::alpaca::wire::rest::TimeInForce::Gtc);
    // A stock order stays a day order.
    broker.submit(order("AAPL", 2, "1")).await.unwrap();
    assert_eq!(fake.lock().book.orders[1].time_in_force, crate::alpaca::wire::rest::TimeInForce::Day);
}

#[tokio::test]
async fn a_sell_while_our_buy_works_is_a_wash_trade_until_the_buy_is_canceled() {
    let (fake, mut broker) = fake().await;
    fake.set_price("BTC/USD", Decimal::from(50_000));
    broker.submit(order("BTC/USD", 0, "0.5")).await.unwrap();
    fake.lock().book.hold_orders = true;
    let working = order("BTC/USD", 1, "0.1");
    broker.submit(working.clone()).await.unwrap();
    let sell = order_with("BTC/USD", 2, "0.5", Side::Sell, OrderTif::Gtc);
    let e = broker.submit(sell.clone()).await.unwrap_err();
    assert!(matches!(&e, BrokerError::Rejected(m) if m.contains("potential wash trade detected")), "{e}");
    assert!(!e.retriable());
    broker.cancel(&working.client_order_id).await.unwrap();
    // The refused id was never taken: the same decision goes through once the buy is gone.
    let o = broker.submit(sell).await.unwrap();
    assert_eq!((o.side, o.status), (Side::Sell, OrderStatus::Accepted));
}
