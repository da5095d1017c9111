//! The REST client against the fake Alpaca: every endpoint, error classes, retries, and the rule that an
//! order is never sent twice. The tests that wait (rate limits, retry delays, timeouts) run on paused
//! time: the runtime's clock jumps to the next timer whenever nothing is ready, so a 65-second window
//! passes at once; the fake records requests and keeps its rate-limit window on that same clock.

use super::*;
use crate::alpaca::backoff::Backoff;
use crate::alpaca::fake::{FakeAlpaca, Fault, KEY_ID, SECRET_KEY};
use crate::alpaca::wire::market as wm;
use crate::config::Secret;
use crate::domain::{ClientOrderId, OrderStatus, Price, Qty, Side, Symbol, Timeframe};
use rust_decimal::Decimal;
use std::time::Duration;

fn client_with(fake: &FakeAlpaca, key: &str, timeout: Duration) -> RestClient {
    RestClient::new(RestConfig {
        key_id: Secret::new(key),
        timeout,
        retry: RetryPolicy {
            backoff: Backoff { initial: Duration::from_millis(10), max: Duration::from_millis(40) },
            trading_deadline: Duration::from_secs(3),
            ..RetryPolicy::default()
        },
        data_limit: RateLimit { per_minute: 10_000, burst: 100 },
        ..fake.rest_config()
    })
    .unwrap()
}

async fn setup() -> (FakeAlpaca, RestClient) {
    let fake = FakeAlpaca::start(0).await.unwrap();
    fake.set_price("AAPL", Decimal::from(200));
    let c = client_with(&fake, KEY_ID, Duration::from_secs(5));
    (fake, c)
}

fn order(coid: &str, qty: u32, kind: OrderKind) -> NewOrder {
    NewOrder {
        symbol: Symbol::new("AAPL").unwrap(),
        side: Side::Buy,
        qty: Qty::new(Decimal::from(qty)).unwrap(),
        kind,
        time_in_force: TimeInForce::Day,
        client_order_id: ClientOrderId::new(coid).unwrap(),
    }
}

#[tokio::test(start_paused = true)]
async fn endpoints_against_the_fake() {
    let (fake, c) = setup().await;
    let a = c.issue::<GetAccount>(&()).await.unwrap();
    assert_eq!(a.cash, Decimal::from(100_000));
    let clock = c.issue::<GetClock>(&()).await.unwrap();
    assert!(clock.next_close > clock.timestamp);
    let days = c.issue::<GetCalendar>(&("2024-05-06".parse().unwrap(), "2024-05-12".parse().unwrap())).await.unwrap();
    assert_eq!(days.len(), 5, "Monday to Friday");
    let asset = c.issue::<GetAsset>(&Symbol::new("AAPL").unwrap()).await.unwrap();
    assert!(asset.tradable && asset.fractionable);
    assert_eq!(c.issue::<ListAssets>(&"us_equity".to_string()).await.unwrap().len(), 1);

    let o = c.submit_order(&order("tb-a-1", 10, OrderKind::Market)).await.unwrap();
    assert_eq!((o.status, o.filled_avg_price), (OrderStatus::Filled, Some(Decimal::from(200))));
    assert_eq!(c.issue::<GetOrder>(&o.id).await.unwrap().id, o.id);
    let by = c.issue::<GetOrderByClientId>(&ClientOrderId::new("tb-a-1").unwrap()).await.unwrap();
    assert_eq!(by.id, o.id);
    let resting =
        c.submit_order(&order("tb-a-2", 1, OrderKind::Limit(Price::new(Decimal::from(150)).unwrap()))).await.unwrap();
    assert_eq!(resting.status, OrderStatus::Accepted);
    let open =
        ListOrdersQuery { status: OrderFilter::Open, limit: 50, after: None, symbols: vec![], oldest_first: false };
    assert_eq!(c.issue::<ListOrders>(&open).await.unwrap().items.len(), 1);
    let all = ListOrdersQuery { status: OrderFilter::All, ..open.clone() };
    assert_eq!(c.issue::<ListOrders>(&all).await.unwrap().items.len(), 2);
    c.issue::<CancelOrder>(&resting.id).await.unwrap();
    assert_eq!(c.issue::<GetOrder>(&resting.id).await.unwrap().status, OrderStatus::Canceled);
    assert!(c.issue::<CancelAllOrders>(&()).await.unwrap().is_empty());

    let ps = c.issue::<ListPositions>(&()).await.unwrap().items;
    assert_eq!((ps.len(), ps[0].qty), (1, Decimal::from(10)));
    let p = c.issue::<GetPosition>(&Symbol::new("AAPL").unwrap()).await.unwrap();
    assert_eq!(p.avg_entry_price, Decimal::from(200));
    let closed = c.issue::<ClosePosition>(&(Symbol::new("AAPL").unwrap(), Some(Decimal::from(4)))).await.unwrap();
    assert_eq!((closed.side, closed.status), (Side::Sell, OrderStatus::Filled));
    let st = c.issue::<CloseAllPositions>(&()).await.unwrap();
    assert_eq!((st.len(), st[0].status), (1, 200));
    assert!(matches!(
        c.issue::<GetPosition>(&Symbol::new("AAPL").unwrap()).await,
        Err(RestError::NotFound { endpoint: "GET /v2/positions/{symbol}", .. })
    ));
    assert_eq!(c.issue::<GetAccount>(&()).await.unwrap().cash, Decimal::from(100_000), "bought and sold at 200");
    assert_eq!(fake.count("POST", "/v2/orders"), 2);
}

#[tokio::test]
async fn wrong_keys_give_one_clear_error_and_no_retries() {
    let (fake, _) = setup().await;
    let c = client_with(&fake, "PKWRONG", Duration::from_secs(5));
    let e = c.issue::<GetAccount>(&()).await.unwrap_err();
    assert!(matches!(e, RestError::Auth { status: 403, .. }), "{e:?}");
    assert!(!e.is_recoverable());
    let text = e.to_string();
    assert!(text.starts_with("GET /v2/account: Alpaca refused the API keys"), "{text}");
    assert!(text.contains("APCA_API_KEY_ID") && text.contains("paper-api.alpaca.markets"), "{text}");
    assert!(!text.contains(SECRET_KEY) && !format!("{c:?}").contains(SECRET_KEY), "the secret never prints");
    assert_eq!(fake.count("GET", "/v2/account"), 1, "an auth failure is not retried");
}

#[tokio::test(start_paused = true)]
async fn rate_limit_waits_for_retry_after_then_succeeds() {
    let (fake, c) = setup().await;
    fake.push_fault(Fault::RateLimited { retry_after_secs: 1 });
    c.issue::<GetAccount>(&()).await.unwrap();
    let reqs = fake.lock().requests.clone();
    assert_eq!(reqs.len(), 2);
    assert!(reqs[1].at - reqs[0].at >= Duration::from_secs(1), "{:?}", reqs[1].at - reqs[0].at);
}

#[tokio::test]
async fn retries_stop_at_the_calls_deadline_under_persistent_429() {
    let (fake, c) = setup().await;
    fake.rate_limit_for(Duration::from_secs(30));
    let started = tokio::time::Instant::now();
    assert!(matches!(c.issue::<GetClock>(&()).await, Err(RestError::RateLimited { .. })));
    // The reset is ~30 s away, past the 3 s trading deadline: no wait is started that would end past it.
    assert!(started.elapsed() < Duration::from_secs(3), "{:?}", started.elapsed());
    assert_eq!(fake.count("GET", "/v2/clock"), 1, "a wait past the deadline is not started");
}

#[tokio::test(start_paused = true)]
async fn a_65_second_rate_limit_window_is_waited_out_by_a_data_call() {
    let (fake, c) = setup().await;
    fake.rate_limit_for(Duration::from_secs(65));
    let started = tokio::time::Instant::now();
    let q = BarsQuery {
        symbols: vec![Symbol::new("AAPL").unwrap()],
        timeframe: Timeframe::Minutes(1),
        start: chrono::Utc::now() - chrono::Duration::days(1),
        end: chrono::Utc::now(),
        limit: 1000,
        feed: None,
        page_token: None,
    };
    c.issue::<GetBars>(&q).await.expect("the data call outlasts the window (deadline 120 s)");
    assert!(started.elapsed() >= Duration::from_secs(65), "{:?}", started.elapsed());
    // It waited for X-RateLimit-Reset instead of hammering: the first 429, then the request after the reset.
    assert!(fake.count("GET", "/v2/stocks/bars") <= 3, "{} requests", fake.count("GET", "/v2/stocks/bars"));
}

#[tokio::test]
async fn server_errors_retried_only_where_idempotent() {
    let (fake, c) = setup().await;
    fake.push_fault(Fault::ServerError);
    c.issue::<GetAccount>(&()).await.unwrap();
    assert_eq!(fake.count("GET", "/v2/account"), 2);
    fake.push_fault(Fault::ServerError);
    let e = c.issue::<SubmitOrder>(&order("tb-b-1", 1, OrderKind::Market)).await.unwrap_err();
    assert!(matches!(e, RestError::Server { status: 500, .. }), "{e:?}");
    assert_eq!(fake.count("POST", "/v2/orders"), 1, "a POST is never retried by issue()");
}

#[tokio::test]
async fn ambiguous_order_post_is_looked_up_not_resent() {
    let (fake, c) = setup().await;
    fake.push_fault(Fault::ServerErrorAfterProcessing);
    let o = c.submit_order(&order("tb-c-1", 3, OrderKind::Market)).await.unwrap();
    assert_eq!(o.raw_client_order_id, "tb-c-1");
    assert_eq!(fake.count("POST", "/v2/orders"), 1);
    assert_eq!(fake.count("GET", "/v2/orders:by_client_order_id"), 1);
    assert_eq!(fake.lock().book.orders.len(), 1, "exactly one order exists");
    assert_eq!(fake.lock().book.positions["AAPL"].0, Decimal::from(3));
}

#[tokio::test]
async fn order_lost_before_alpaca_saw_it_is_sent_again_under_the_same_id() {
    let (fake, c) = setup().await;
    fake.push_fault(Fault::ServerError);
    let o = c.submit_order(&order("tb-d-1", 2, OrderKind::Market)).await.unwrap();
    assert_eq!(o.status, OrderStatus::Filled);
    assert_eq!(fake.count("POST", "/v2/orders"), 2);
    assert_eq!(fake.lock().book.orders.len(), 1);
    let posts: Vec<String> = fake.lock().requests.iter().map(|r| format!("{} {}", r.method, r.path)).collect();
    assert_eq!(posts, ["POST /v2/orders", "GET /v2/orders:by_client_order_id", "POST /v2/orders"]);
}

#[tokio::test]
async fn client_order_id_stays_unique_after_cancel() {
    let (fake, c) = setup().await;
    let limit = OrderKind::Limit(Price::new(Decimal::from(100)).unwrap());
    let o = c.submit_order(&order("tb-e-1", 1, limit)).await.unwrap();
    c.issue::<CancelOrder>(&o.id).await.unwrap();
    let e = c.issue::<SubmitOrder>(&order("tb-e-1", 1, limit)).await.unwrap_err();
    assert!(
        matches!(&e, RestError::DuplicateClientOrderId { client_order_id, .. } if client_order_id == "tb-e-1"),
        "{e:?}"
    );
    let again = c.submit_order(&order("tb-e-1", 1, limit)).await.unwrap();
    assert_eq!((again.id, again.status), (o.id, OrderStatus::Canceled), "a resend gets the existing order back");
    let other = c.submit_order(&order("tb-e-1", 5, limit)).await.unwrap_err();
    assert!(matches!(other, RestError::DuplicateClientOrderId { .. }), "a different order under a used id is refused");
    assert_eq!(fake.lock().book.orders.len(), 1);
}

#[tokio::test(start_paused = true)]
async fn insufficient_buying_power_and_timeouts() {
    let (fake, c) = setup().await;
    let e = c.submit_order(&order("tb-f-1", 10_000, OrderKind::Market)).await.unwrap_err();
    assert!(matches!(e, RestError::InsufficientBuyingPower { .. }), "{e:?}");
    let quick = RestClient::new(RestConfig {
        timeout: Duration::from_millis(200),
        retry: RetryPolicy {
            backoff: Backoff { initial: Duration::from_millis(10), max: Duration::from_millis(40) },
            trading_deadline: Duration::from_secs(1),
            ..RetryPolicy::default()
        },
        ..fake.rest_config()
    })
    .unwrap();
    for _ in 0..20 {
        fake.push_fault(Fault::Slow(Duration::from_secs(2)));
    }
    let started = tokio::time::Instant::now();
    let e = quick.issue::<GetClock>(&()).await.unwrap_err();
    assert!(matches!(e, RestError::Timeout { .. }), "{e:?}");
    assert!(
        started.elapsed() < Duration::from_millis(1500),
        "attempts of 200 ms within the 1 s deadline, not slow replies of 2 s: {:?}",
        started.elapsed()
    );
    let n = fake.count("GET", "/v2/clock");
    assert!((3..=5).contains(&n), "{n} attempts of 200 ms (+ 5-40 ms backoff) in 1 s");
}

#[tokio::test]
async fn bars_follow_next_page_token() {
    let (fake, c) = setup().await;
    let bar = |i: i64| wm::Bar {
        symbol: None,
        o: 10.0,
        h: 11.0,
        l: 9.0,
        c: 10.5,
        v: 100.0,
        t: (chrono::DateTime::from_timestamp(1_714_573_800 + 60 * i, 0).unwrap()).to_rfc3339(),
        n: Some(3),
        vw: None,
    };
    fake.store_bars("AAPL", (0..25).map(bar).collect());
    fake.store_bars("MSFT", (0..10).map(bar).collect());
    let q = BarsQuery {
        symbols: vec![Symbol::new("MSFT").unwrap(), Symbol::new("AAPL").unwrap()],
        timeframe: Timeframe::MIN1,
        start: chrono::DateTime::from_timestamp(1_714_573_800, 0).unwrap(),
        end: chrono::DateTime::from_timestamp(1_714_573_800 + 3600, 0).unwrap(),
        limit: 10,
        feed: Some("iex".into()),
        page_token: None,
    };
    let bars = c.fetch_bars(&q, 100).await.unwrap();
    assert_eq!(bars.len(), 35);
    assert_eq!(fake.count("GET", "/v2/stocks/bars"), 4, "35 bars in pages of 10");
    assert!(bars.windows(2).all(|w| (w[0].t, &w[0].symbol) < (w[1].t, &w[1].symbol)), "sorted by time then symbol");
    assert!(matches!(c.fetch_bars(&q, 2).await, Err(RestError::Unexpected { .. })), "page cap");
    let last = fake.lock().requests.last().unwrap().query.clone();
    assert!(last.contains("page_token=10") && last.contains("feed=iex") && last.contains("limit=10"), "{last}");
}

#[tokio::test(start_paused = true)]
async fn a_429_holds_back_every_caller_until_the_reset() {
    let (fake, c) = setup().await;
    fake.push_fault(Fault::RateLimited { retry_after_secs: 1 });
    let first = tokio::spawn({
        let c = c.clone();
        async move { c.issue::<GetClock>(&()).await }
    });
    while fake.lock().requests.is_empty() {
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
    tokio::time::sleep(Duration::from_millis(100)).await;
    let others: Vec<_> = (0..5)
        .map(|_| {
            let c = c.clone();
            tokio::spawn(async move { c.issue::<GetAccount>(&()).await })
        })
        .collect();
    first.await.unwrap().unwrap();
    for o in others {
        o.await.unwrap().unwrap();
    }
    let reqs = fake.lock().requests.clone();
    assert_eq!(reqs.len(), 7, "the 429, its retry, five others: nothing more");
    let limited_at = reqs[0].at;
    assert!(
        reqs[1..].iter().all(|r| r.at - limited_at >= Duration::from_millis(950)),
        "no request went out during the Retry-After second: {:?}",
        reqs.iter().map(|r| r.at - limited_at).collect::<Vec<_>>()
    );
}
