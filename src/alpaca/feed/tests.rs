//! The market-data feed against the fake Alpaca: exact handshake frames, exactly-once delivery across
//! 20 forced disconnects, half-dead socket detection, 406 back-off, fatal auth failure. The silence and
//! back-off tests run on paused time (the runtime's clock jumps to the next timer when nothing is ready),
//! measured on that clock.

use super::*;
use crate::alpaca::fake::{FakeAlpaca, KEY_ID, SECRET_KEY};
use crate::alpaca::rest::{RateLimit, RestConfig};
use crate::alpaca::wire::market as wm;
use crate::domain::Bar;
use chrono::SecondsFormat;
use std::sync::Arc;
use std::time::Instant;

const T0: i64 = 1_714_573_800;

fn wire_bar(i: i64) -> wm::Bar {
    let t = DateTime::from_timestamp(T0 + 60 * i, 0).unwrap();
    wm::Bar {
        symbol: None,
        o: 10.0,
        h: 11.0,
        l: 9.0,
        c: 10.5,
        v: 100.0,
        t: t.to_rfc3339_opts(SecondsFormat::Secs, true),
        n: None,
        vw: None,
    }
}

fn rest(fake: &FakeAlpaca) -> RestClient {
    RestClient::new(RestConfig { data_limit: RateLimit { per_minute: 100_000, burst: 1000 }, ..fake.rest_config() })
        .unwrap()
}

fn config(fake: &FakeAlpaca, key: &str, symbols: &[&str]) -> StreamConfig {
    let mut c = StreamConfig::new(
        fake.ws_url("v2/iex"),
        Secret::new(key),
        Secret::new(SECRET_KEY),
        symbols.iter().map(|s| Symbol::new(s).unwrap()).collect(),
    );
    c.backoff = Backoff { initial: Duration::from_millis(10), max: Duration::from_millis(80) };
    c.io_timeout = Duration::from_secs(3);
    c.ping_interval = Duration::from_millis(200);
    c.silence_timeout = Duration::from_secs(5);
    c
}

async fn next(feed: &mut AlpacaFeed) -> FeedEvent {
    tokio::time::timeout(Duration::from_secs(10), feed.recv()).await.expect("feed stalled").expect("feed failed")
}

async fn wait_connected(feed: &mut AlpacaFeed) -> Vec<Bar> {
    let mut bars = Vec::new();
    loop {
        match next(feed).await {
            FeedEvent::Connected { .. } => return bars,
            FeedEvent::Bar(b) => bars.push(b),
            _ => {}
        }
    }
}

#[tokio::test]
async fn handshake_frames_are_exact_and_bars_flow() {
    let fake = FakeAlpaca::start(0).await.unwrap();
    let mut feed = AlpacaFeed::start(config(&fake, KEY_ID, &["AAPL"]), rest(&fake));
    wait_connected(&mut feed).await;
    assert_eq!(
        fake.lock().market_received,
        [
            format!(r#"{{"action":"auth","key":"{KEY_ID}","secret":"{SECRET_KEY}"}}"#),
            r#"{"action":"subscribe","bars":["AAPL"],"updatedBars":["AAPL"],"dailyBars":[],"statuses":["AAPL"]}"#
                .to_string(),
        ]
    );
    fake.publish_bar("AAPL", wire_bar(0));
    fake.publish_bar("MSFT", wire_bar(0));
    fake.publish_bar("AAPL", wire_bar(1));
    let FeedEvent::Bar(b0) = next(&mut feed).await else { panic!() };
    let FeedEvent::Bar(b1) = next(&mut feed).await else { panic!() };
    assert_eq!((b0.symbol.as_str(), b0.t.timestamp(), b1.t.timestamp()), ("AAPL", T0, T0 + 60), "MSFT not subscribed");
    fake.send_market_raw(r#"[{"T":"u","S":"AAPL","o":10,"h":12,"l":9,"c":11,"v":150,"t":"2024-05-01T14:31:00Z"},{"T":"zz"},{"T":"b","S":"AAPL","o":"bad"}]"#);
    let FeedEvent::BarUpdated(u) = next(&mut feed).await else { panic!() };
    assert_eq!((u.t.timestamp(), u.h), (T0 + 60, 12.0));
    fake.send_market_raw(r#"[{"T":"s","S":"AAPL","sc":"H","sm":"Trading Halt","rc":"T1","rm":"News pending","t":"2024-05-01T14:32:00Z","z":"C"}]"#);
    let FeedEvent::Status { symbol, halted, detail, .. } = next(&mut feed).await else { panic!() };
    assert_eq!((symbol.as_str(), halted, detail.as_str()), ("AAPL", true, "Trading Halt (News pending)"));
}

/// Waits until the fake has accepted `n` connections and one is open.
async fn wait_for_connection(fake: &FakeAlpaca, n: usize) {
    let deadline = Instant::now() + Duration::from_secs(10);
    while !(fake.market_connections() == n && fake.lock().market_active == 1) {
        assert!(Instant::now() < deadline, "connection {n} never came");
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn twenty_forced_disconnects_deliver_every_bar_once_in_order() {
    const ROUNDS: i64 = 21;
    const PER_ROUND: i64 = 10;
    let fake = Arc::new(FakeAlpaca::start(0).await.unwrap());
    fake.store_bars("AAPL", vec![wire_bar(-2), wire_bar(-1)]);
    let mut cfg = config(&fake, KEY_ID, &["AAPL", "MSFT"]);
    cfg.backfill_from = DateTime::from_timestamp(T0 - 120, 0);
    let mut feed = AlpacaFeed::start(cfg, rest(&fake));
    let publisher = {
        let fake = fake.clone();
        tokio::spawn(async move {
            for round in 0..ROUNDS {
                wait_for_connection(&fake, round as usize + 1).await;
                for i in round * PER_ROUND..(round + 1) * PER_ROUND {
                    fake.publish_bar("AAPL", wire_bar(i));
                    fake.publish_bar("MSFT", wire_bar(i));
                    tokio::time::sleep(Duration::from_millis(1)).await;
                }
                if round + 1 < ROUNDS {
                    fake.drop_market_sockets();
                }
            }
        })
    };
    let want = 2 + 2 * ROUNDS * PER_ROUND;
    let (mut bars, mut disconnects) = (Vec::new(), 0);
    while (bars.len() as i64) < want {
        match next(&mut feed).await {
            FeedEvent::Bar(b) => bars.push(b),
            FeedEvent::Disconnected { .. } => disconnects += 1,
            _ => {}
        }
    }
    publisher.await.unwrap();
    let extra = tokio::time::timeout(Duration::from_millis(300), feed.recv()).await;
    assert!(!matches!(extra, Ok(Ok(FeedEvent::Bar(_)))), "no bar beyond the expected ones: {extra:?}");
    assert_eq!((disconnects, fake.market_connections()), (20, 21));
    for sym in ["AAPL", "MSFT"] {
        let times: Vec<i64> =
            bars.iter().filter(|b| b.symbol.as_str() == sym).map(|b| (b.t.timestamp() - T0) / 60).collect();
        let first = if sym == "AAPL" { -2 } else { 0 };
        assert_eq!(times, (first..ROUNDS * PER_ROUND).collect::<Vec<_>>(), "{sym}: every bar once, in order");
    }
}

#[tokio::test(start_paused = true)]
async fn half_dead_socket_is_replaced_within_the_silence_timeout() {
    let fake = FakeAlpaca::start(0).await.unwrap();
    fake.lock().max_market_connections = 5;
    let mut cfg = config(&fake, KEY_ID, &["AAPL"]);
    cfg.silence_timeout = Duration::from_millis(600);
    cfg.ping_interval = Duration::from_millis(100);
    let mut feed = AlpacaFeed::start(cfg, rest(&fake));
    wait_connected(&mut feed).await;
    tokio::time::sleep(Duration::from_millis(900)).await;
    assert_eq!(fake.market_connections(), 1, "pongs keep a quiet but healthy socket alive");
    let silenced = tokio::time::Instant::now();
    fake.silence_market_sockets();
    let FeedEvent::Disconnected { reason } = next(&mut feed).await else { panic!() };
    let detected = silenced.elapsed();
    assert!(reason.contains("half-dead"), "{reason}");
    // The last pong came at most one ping interval (100 ms) before the silence, and the runtime's timers
    // round to the millisecond: 600 ms after it is 500 ms after the silence, give or take that rounding.
    assert!(detected >= Duration::from_millis(490) && detected < Duration::from_millis(1000), "{detected:?}");
    wait_connected(&mut feed).await;
    assert!(silenced.elapsed() < Duration::from_millis(1400), "replaced within the timeout plus one backoff");
    assert_eq!(fake.market_connections(), 2);
    fake.publish_bar("AAPL", wire_bar(5));
    assert!(matches!(next(&mut feed).await, FeedEvent::Bar(b) if b.t.timestamp() == T0 + 300));
}

#[tokio::test(start_paused = true)]
async fn connection_limit_backs_off_and_retries() {
    let fake = FakeAlpaca::start(0).await.unwrap();
    fake.lock().refuse_next_connections = 3;
    let mut cfg = config(&fake, KEY_ID, &["AAPL"]);
    cfg.backoff = Backoff { initial: Duration::from_millis(100), max: Duration::from_secs(1) };
    let started = tokio::time::Instant::now();
    let mut feed = AlpacaFeed::start(cfg, rest(&fake));
    wait_connected(&mut feed).await;
    let took = started.elapsed();
    let refused = fake.lock().market_refused;
    assert_eq!((refused, fake.market_connections()), (3, 1));
    assert!(took >= Duration::from_millis(350), "waits 50+100+200 ms at least, never spins: {took:?}");
}

#[tokio::test]
async fn wrong_keys_are_fatal_without_retries() {
    let fake = FakeAlpaca::start(0).await.unwrap();
    let mut feed = AlpacaFeed::start(config(&fake, "PKWRONG", &["AAPL"]), rest(&fake));
    let e = tokio::time::timeout(Duration::from_secs(5), feed.recv()).await.unwrap().unwrap_err();
    assert!(matches!(&e, StreamError::Auth { msg, .. } if msg == "auth failed"), "{e:?}");
    assert!(e.is_fatal() && e.to_string().contains("APCA_API_KEY_ID"));
    assert!(matches!(feed.recv().await, Err(StreamError::Died)), "after its fatal error the stream task is gone");
    assert_eq!(fake.market_connections(), 1);
}

/// The crypto stream (v1beta3 us) end to end: the same session code, a `/`-pair symbol, no statuses
/// asked (crypto has no trading halts), bars delivered with their pair symbol.
#[tokio::test]
async fn crypto_feed_handshake_and_bars() {
    let fake = FakeAlpaca::start(0).await.unwrap();
    let mut cfg = config(&fake, KEY_ID, &["BTC/USD"]);
    cfg.url = fake.ws_url("v1beta3/crypto/us");
    let mut feed = AlpacaFeed::start(cfg, rest(&fake));
    wait_connected(&mut feed).await;
    let received = fake.lock().market_received.clone();
    assert_eq!(received.len(), 2, "{received:?}");
    assert!(received[1].contains(r#""bars":["BTC/USD"]"#), "{}", received[1]);
    assert!(!received[1].contains(r#""statuses":["BTC/USD"]"#), "{}", received[1]);
    fake.publish_bar("BTC/USD", wire_bar(0));
    fake.publish_bar("BTC/USD", wire_bar(1));
    for i in 0..2 {
        let FeedEvent::Bar(b) = next(&mut feed).await else { panic!("bar {i} missing") };
        assert_eq!((b.symbol.as_str(), b.t.timestamp()), ("BTC/USD", T0 + 60 * i));
        assert!(b.symbol.is_crypto());
    }
}

#[tokio::test]
async fn a_message_over_one_mib_drops_the_connection_instead_of_being_buffered() {
    let fake = FakeAlpaca::start(0).await.unwrap();
    let mut cfg = config(&fake, KEY_ID, &["AAPL"]);
    cfg.backoff = Backoff { initial: Duration::from_millis(10), max: Duration::from_millis(50) };
    let mut feed = AlpacaFeed::start(cfg, rest(&fake));
    wait_connected(&mut feed).await;
    let huge = format!("[{{\"T\":\"n\",\"headline\":\"{}\"}}]", "x".repeat(crate::alpaca::WS_MAX_MESSAGE + 10));
    fake.send_market_raw(&huge);
    let reason = loop {
        if let FeedEvent::Disconnected { reason } = next(&mut feed).await {
            break reason;
        }
    };
    assert!(reason.to_lowercase().contains("too long") || reason.contains("limit"), "{reason}");
    wait_connected(&mut feed).await;
    assert_eq!(fake.market_connections(), 2, "reconnected after the drop");
}

/// A consumer that stops reading: the feed stops reading its socket, the fake falls more messages behind
/// than it buffers and cuts the socket off with `407 slow client`, and the reconnect's backfill brings
/// what the stream did not: every bar once, in order.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_consumer_that_falls_behind_is_cut_off_as_a_slow_client_and_loses_no_bar() {
    const MOST: i64 = 200_000;
    let fake = FakeAlpaca::start(0).await.unwrap();
    let mut feed = AlpacaFeed::start(config(&fake, KEY_ID, &["AAPL"]), rest(&fake));
    wait_connected(&mut feed).await;
    // Published without reading until the fake has cut a socket off (the kernel's socket buffers fill
    // first, then the fake's own).
    let mut published = 0;
    while fake.lock().market_slow_clients == 0 {
        assert!(published < MOST, "no socket cut off after {published} bars unread");
        for i in published..published + 1000 {
            fake.publish_bar("AAPL", wire_bar(i));
        }
        published += 1000;
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
    let (mut times, mut reasons) = (Vec::new(), Vec::new());
    while (times.len() as i64) < published {
        match next(&mut feed).await {
            FeedEvent::Bar(b) => times.push((b.t.timestamp() - T0) / 60),
            FeedEvent::Disconnected { reason } => reasons.push(reason),
            _ => {}
        }
    }
    assert!(reasons.iter().any(|r| r.contains("407") && r.contains("slow client")), "{reasons:?}");
    assert!(times.iter().copied().eq(0..published), "every bar once, in order ({} of {published})", times.len());
    let extra = tokio::time::timeout(Duration::from_millis(300), feed.recv()).await;
    assert!(!matches!(extra, Ok(Ok(FeedEvent::Bar(_)))), "no bar beyond the published ones: {extra:?}");
}

async fn disconnect_reason(feed: &mut AlpacaFeed) -> String {
    loop {
        if let FeedEvent::Disconnected { reason } = next(feed).await {
            return reason;
        }
    }
}

/// A stream error that does not end the session is named in the disconnect that follows it, and not in
/// one that comes after data: the stream went on after the error, so the error is not why it ended.
#[tokio::test]
async fn a_stream_error_is_named_in_the_disconnect_right_after_it_and_not_after_data() {
    let fake = FakeAlpaca::start(0).await.unwrap();
    let mut feed = AlpacaFeed::start(config(&fake, KEY_ID, &["AAPL"]), rest(&fake));
    wait_connected(&mut feed).await;
    let error = serde_json::to_string(&[wm::StreamMsg::Error { code: 500, msg: "internal error".into() }]).unwrap();
    fake.send_market_raw(&error);
    fake.publish_bar("AAPL", wire_bar(0));
    fake.drop_market_sockets();
    let reason = disconnect_reason(&mut feed).await;
    assert!(!reason.contains("500"), "a bar came between the error and the drop: {reason}");
    wait_connected(&mut feed).await;
    fake.send_market_raw(&error);
    fake.drop_market_sockets();
    let reason = disconnect_reason(&mut feed).await;
    assert!(reason.ends_with("after stream error 500: internal error"), "{reason}");
}
