//! trade_updates against the fake: exact frames, binary updates mapped to order events, reconnect with a
//! reconcile signal, fatal bad keys, and the fake's legacy auth form.

use super::*;
use crate::alpaca::event::UpdateKind;
use crate::alpaca::fake::{FakeAlpaca, KEY_ID, SECRET_KEY};
use crate::alpaca::rest::{NewOrder, OrderKind, RestClient, TimeInForce};
use crate::domain::{ClientOrderId, OrderEvent, Qty, Side, Symbol};
use futures_util::{SinkExt, StreamExt};
use rust_decimal::Decimal;

/// The stream's own settings (the streams' backoff, 10 s I/O timeout, pings every 10 s), on the fake.
fn config(fake: &FakeAlpaca, key: &str) -> UpdatesConfig {
    UpdatesConfig::new(fake.ws_url("stream"), Secret::new(key), Secret::new(SECRET_KEY))
}

async fn next(s: &mut TradeUpdates) -> UpdatesEvent {
    tokio::time::timeout(Duration::from_secs(10), s.next()).await.expect("stalled").expect("failed")
}

async fn buy(fake: &FakeAlpaca, coid: &str) {
    let rest = RestClient::new(fake.rest_config()).unwrap();
    let order = NewOrder {
        symbol: Symbol::new("AAPL").unwrap(),
        side: Side::Buy,
        qty: Qty::new(Decimal::from(2)).unwrap(),
        kind: OrderKind::Market,
        time_in_force: TimeInForce::Day,
        client_order_id: ClientOrderId::new(coid).unwrap(),
    };
    rest.submit_order(&order).await.unwrap();
}

fn order_update(ev: UpdatesEvent) -> Box<crate::alpaca::event::OrderUpdate> {
    match ev {
        UpdatesEvent::Order(u) => u,
        other => panic!("{other:?}"),
    }
}

/// On paused time: the reconnect waits the streams' backoff (0.25 to 0.5 s for the first retry) on the
/// runtime's clock.
#[tokio::test(start_paused = true)]
async fn frames_updates_and_reconnect() {
    let fake = FakeAlpaca::start(0).await.unwrap();
    fake.set_price("AAPL", Decimal::from(150));
    let mut s = TradeUpdates::start(config(&fake, KEY_ID));
    assert_eq!(next(&mut s).await, UpdatesEvent::Connected { reconnect: false });
    assert_eq!(
        fake.lock().updates_received,
        [
            format!(r#"{{"action":"auth","key":"{KEY_ID}","secret":"{SECRET_KEY}"}}"#),
            r#"{"action":"listen","data":{"streams":["trade_updates"]}}"#.to_string(),
        ]
    );
    buy(&fake, "tb-u-1").await;
    let new = order_update(next(&mut s).await);
    assert_eq!((new.kind, new.order_event()), (UpdateKind::New, Some(OrderEvent::Accepted)));
    let fill = order_update(next(&mut s).await);
    assert_eq!((fill.kind, fill.order.raw_client_order_id.as_str()), (UpdateKind::Fill, "tb-u-1"));
    assert_eq!(fill.fill.as_ref().map(|f| (f.price, f.qty)), Some((Decimal::from(150), Decimal::from(2))));

    fake.drop_update_sockets();
    assert!(matches!(next(&mut s).await, UpdatesEvent::Disconnected { .. }));
    let lost = tokio::time::Instant::now();
    assert_eq!(next(&mut s).await, UpdatesEvent::Connected { reconnect: true }, "tells the OMS to reconcile");
    let waited = lost.elapsed();
    assert!(waited >= Backoff::STREAM.ceiling(0) / 2, "the first retry waits the backoff: {waited:?}");
    assert!(waited < Backoff::STREAM.ceiling(0) + Duration::from_secs(1), "{waited:?}");
    buy(&fake, "tb-u-2").await;
    assert_eq!(order_update(next(&mut s).await).order.raw_client_order_id, "tb-u-2");
    assert_eq!(fake.lock().updates_connections, 2);
}

#[tokio::test]
async fn wrong_keys_are_fatal_once() {
    let fake = FakeAlpaca::start(0).await.unwrap();
    let mut s = TradeUpdates::start(config(&fake, "PKWRONG"));
    let e = tokio::time::timeout(Duration::from_secs(5), s.next()).await.unwrap().unwrap_err();
    assert!(matches!(e, UpdatesError::Auth { .. }) && e.to_string().contains("APCA_API_KEY_ID"), "{e}");
    assert!(matches!(s.next().await, Err(UpdatesError::Stopped)));
    assert_eq!(fake.lock().updates_connections, 1);
}

#[tokio::test]
async fn fake_accepts_the_legacy_auth_form_and_refuses_listen_before_auth() {
    let fake = FakeAlpaca::start(0).await.unwrap();
    let (mut ws, _) = tokio_tungstenite::connect_async(fake.ws_url("stream").as_str()).await.unwrap();
    let mut reply = async |text: &str| {
        ws.send(tokio_tungstenite::tungstenite::Message::text(text)).await.unwrap();
        let m = ws.next().await.unwrap().unwrap();
        assert!(m.is_binary(), "paper sends binary frames");
        String::from_utf8(m.into_data().to_vec()).unwrap()
    };
    assert_eq!(
        reply(r#"{"action":"listen","data":{"streams":["trade_updates"]}}"#).await,
        r#"{"stream":"authorization","data":{"status":"unauthorized","action":"listen"}}"#
    );
    let legacy = format!(r#"{{"action":"authenticate","data":{{"key_id":"{KEY_ID}","secret_key":"{SECRET_KEY}"}}}}"#);
    assert_eq!(
        reply(&legacy).await,
        r#"{"stream":"authorization","data":{"status":"authorized","action":"authenticate"}}"#
    );
    assert_eq!(
        reply(r#"{"action":"listen","data":{"streams":["trade_updates","bogus"]}}"#).await,
        r#"{"stream":"listening","data":{"streams":["trade_updates"]}}"#
    );
}
