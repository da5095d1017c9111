//! Every fixture under `tests/fixtures/alpaca/` parsed and checked field by field.

use super::*;
use crate::alpaca::event::*;
use crate::alpaca::wire::rest as w;
use crate::domain::{OrderEvent, OrderStatus, Side, Timeframe};
use std::path::PathBuf;

fn fixture(name: &str) -> Vec<u8> {
    let p = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/alpaca").join(name);
    std::fs::read(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()))
}

fn one(name: &str) -> StreamItem {
    let f = market_frame(&fixture(name));
    assert!(f.errors.is_empty(), "{name}: {:?}", f.errors);
    assert_eq!(f.items.len(), 1, "{name}");
    f.items.into_iter().next().unwrap()
}

fn market(name: &str) -> MarketEvent {
    match one(name) {
        StreamItem::Market(m) => m,
        other => panic!("{name}: {other:?}"),
    }
}

fn ts(s: &str) -> chrono::DateTime<chrono::Utc> {
    time("t", s).unwrap()
}

#[test]
fn control_messages() {
    assert_eq!(one("stream/connected.json"), StreamItem::Control(StreamControl::Connected));
    assert_eq!(one("stream/authenticated.json"), StreamItem::Control(StreamControl::Authenticated));
    assert_eq!(
        one("stream/error_auth_failed.json"),
        StreamItem::Control(StreamControl::Error { code: 402, msg: "auth failed".into() })
    );
    assert_eq!(
        one("stream/error_connection_limit.json"),
        StreamItem::Control(StreamControl::Error { code: 406, msg: "connection limit exceeded".into() })
    );
    let StreamItem::Control(StreamControl::Subscription(s)) = one("stream/subscription_stocks.json") else { panic!() };
    assert_eq!(s.trades.iter().collect::<Vec<_>>(), ["AAPL"]);
    assert_eq!(s.quotes.iter().collect::<Vec<_>>(), ["MSFT"]);
    assert_eq!(s.bars.iter().collect::<Vec<_>>(), ["*"]);
    assert!(s.daily_bars.is_empty());
    let StreamItem::Control(StreamControl::Subscription(c)) = one("stream/subscription_crypto.json") else { panic!() };
    assert!(c.daily_bars.is_empty(), "null is an empty list");
    assert!(c.updated_bars.contains("BTC/USD"));
}

#[test]
fn stock_trade_and_quote() {
    let MarketEvent::Trade(t) = market("stream/trade_stock.json") else { panic!() };
    assert_eq!((t.symbol.as_str(), t.price, t.size, t.id), ("AAPL", 187.12, 100.0, Some(52983525029461)));
    assert_eq!(t.time.timestamp_subsec_nanos(), 123_456_789);
    assert_eq!(
        (t.exchange.as_deref(), t.tape.as_deref(), t.conditions.clone()),
        (Some("V"), Some("C"), vec!["@".into()])
    );
    let MarketEvent::Quote(q) = market("stream/quote_stock.json") else { panic!() };
    assert_eq!((q.bid_price, q.bid_size, q.ask_price, q.ask_size), (402.11, 2.0, 402.15, 3.0));
    assert_eq!(q.time.timestamp_subsec_nanos(), 335_567_700);
}

#[test]
fn bar_batch_keeps_order_and_kinds() {
    let f = market_frame(&fixture("stream/bars_batch.json"));
    assert!(f.errors.is_empty());
    let bars: Vec<StreamBar> = f
        .items
        .into_iter()
        .map(|i| match i {
            StreamItem::Market(MarketEvent::Bar(b)) => b,
            other => panic!("{other:?}"),
        })
        .collect();
    assert_eq!(bars.iter().map(|b| b.kind).collect::<Vec<_>>(), [BarKind::Minute, BarKind::Updated, BarKind::Daily]);
    assert_eq!(bars[0].bar.t, ts("2024-05-01T14:30:00Z"));
    assert_eq!(
        (bars[0].bar.o, bars[0].bar.h, bars[0].bar.l, bars[0].bar.c, bars[0].bar.v),
        (187.0, 187.3, 186.9, 187.1, 12040.0)
    );
    assert_eq!((bars[0].trade_count, bars[0].vwap), (Some(143), Some(187.08)));
    assert_eq!(bars[0].bar.timeframe, Timeframe::MIN1);
    assert_eq!(bars[2].bar.timeframe, Timeframe::DAY1);
}

#[test]
fn status_luld_imbalance_correction_cancel() {
    let MarketEvent::Status(s) = market("stream/status_halt.json") else { panic!() };
    assert!(s.is_halt());
    assert_eq!((s.reason_code.as_str(), s.message.as_str()), ("T12", "Trading Halt"));
    let MarketEvent::Luld { limit_up, limit_down, indicator, time, .. } = market("stream/luld.json") else { panic!() };
    assert_eq!((limit_up, limit_down, indicator.as_str()), (196.47, 177.76, "B"));
    assert_eq!(time.timestamp_subsec_nanos(), 335_689_322);
    assert!(matches!(market("stream/imbalance.json"), MarketEvent::Imbalance { price: 187.25, .. }));
    let MarketEvent::Correction { original_id, corrected_id, price, .. } = market("stream/correction.json") else {
        panic!()
    };
    assert_eq!((original_id, corrected_id, price), (52983525029461, 52983525029470, 187.10));
    assert!(matches!(
        market("stream/cancel_error.json"),
        MarketEvent::TradeCancel { trade_id: 52983525029461, is_error: false, .. }
    ));
}

#[test]
fn crypto_messages() {
    let MarketEvent::Trade(t) = market("stream/crypto_trade.json") else { panic!() };
    assert_eq!((t.symbol.as_str(), t.size, t.taker_side), ("BTC/USD", 0.0125, Some(Side::Buy)));
    assert_eq!(t.exchange, None);
    let MarketEvent::Quote(q) = market("stream/crypto_quote.json") else { panic!() };
    assert_eq!((q.bid_size, q.ask_price), (0.51, 60012.4));
    let MarketEvent::Bar(b) = market("stream/crypto_bar.json") else { panic!() };
    assert_eq!((b.bar.v, b.trade_count), (0.0, Some(0)));
    let MarketEvent::OrderBook { bids, asks, reset, .. } = market("stream/crypto_orderbook.json") else { panic!() };
    assert_eq!((bids[0].price, bids[0].size, asks[0].size, reset), (60010.5, 0.25, 0.0, false));
}

#[test]
fn news_message() {
    let MarketEvent::News { id, headline, symbols, created_at } = market("stream/news.json") else { panic!() };
    assert_eq!((id, headline.as_str(), symbols), (24918784, "Apple beats estimates", vec!["AAPL".to_string()]));
    assert_eq!(created_at, ts("2024-05-02T20:31:00Z"));
}

#[test]
fn unknown_type_is_skipped_and_the_rest_delivered() {
    let f = market_frame(&fixture("stream/unknown_type.json"));
    assert_eq!((f.items.len(), f.unknown, f.errors.len()), (1, 1, 0));
}

fn update(name: &str) -> UpdatesItem {
    let f = updates_frame(&fixture(name));
    assert!(f.errors.is_empty(), "{name}: {:?}", f.errors);
    assert_eq!(f.items.len(), 1, "{name}");
    f.items.into_iter().next().unwrap()
}

#[test]
fn trade_updates_control() {
    assert_eq!(update("updates/authorized.json"), UpdatesItem::Authorized);
    assert_eq!(update("updates/unauthorized.json"), UpdatesItem::Unauthorized { action: "authenticate".into() });
    assert_eq!(update("updates/listening.json"), UpdatesItem::Listening(vec!["trade_updates".into()]));
}

#[test]
fn every_trade_update_event_maps() {
    use UpdateKind as K;
    let cases = [
        ("new", K::New, Some(OrderEvent::Accepted)),
        ("accepted", K::Accepted, Some(OrderEvent::Accepted)),
        ("pending_new", K::PendingNew, Some(OrderEvent::Accepted)),
        ("partial_fill", K::PartialFill, Some(OrderEvent::PartialFill)),
        ("fill", K::Fill, Some(OrderEvent::Fill)),
        ("canceled", K::Canceled, Some(OrderEvent::Canceled)),
        ("expired", K::Expired, Some(OrderEvent::Expired)),
        ("replaced", K::Replaced, Some(OrderEvent::Replaced)),
        ("rejected", K::Rejected, Some(OrderEvent::Rejected)),
        ("pending_cancel", K::PendingCancel, Some(OrderEvent::CancelRequested)),
        ("order_cancel_rejected", K::OrderCancelRejected, Some(OrderEvent::CancelRejected { partially_filled: false })),
        ("done_for_day", K::DoneForDay, None),
        ("stopped", K::Stopped, None),
        ("pending_replace", K::PendingReplace, None),
        ("calculated", K::Calculated, None),
        ("suspended", K::Suspended, None),
        ("order_replace_rejected", K::OrderReplaceRejected, None),
        ("restated", K::Restated, None),
    ];
    for (ev, kind, order_event) in cases {
        let UpdatesItem::Update(u) = update(&format!("updates/event_{ev}.json")) else { panic!("{ev}") };
        assert_eq!((u.kind, u.order_event()), (kind, order_event), "{ev}");
        assert_eq!(kind.as_str(), ev, "the orders metric's label is Alpaca's name of the event");
        assert_eq!(u.order.raw_client_order_id, "tb-ppo-AAPL-1714573800-0");
        assert!(u.time.is_some(), "{ev}");
    }
}

#[test]
fn fill_carries_price_qty_and_position() {
    let UpdatesItem::Update(u) = update("updates/event_fill.json") else { panic!() };
    let f = u.fill.clone().unwrap();
    assert_eq!(
        (f.price.to_string(), f.qty.to_string(), f.position_qty.to_string()),
        ("187.15".into(), "6".into(), "10".into())
    );
    assert_eq!(u.order.status, OrderStatus::Filled);
    assert_eq!(u.order.filled_avg_price.unwrap().to_string(), "187.138");
    let UpdatesItem::Update(p) = update("updates/event_partial_fill.json") else { panic!() };
    assert_eq!(p.order.status, OrderStatus::PartiallyFilled);
    assert_eq!(p.fill.unwrap().execution_id.as_deref(), Some("7922ab44-c5a4-4a1c-a8fb-f4a3a6ed5c0a"));
}

fn rest<T: serde::de::DeserializeOwned>(name: &str) -> T {
    serde_json::from_slice(&fixture(name)).unwrap_or_else(|e| panic!("{name}: {e}"))
}

#[test]
fn rest_objects() {
    let a = account(rest("rest/account.json")).unwrap();
    assert_eq!((a.cash.to_string(), a.buying_power.to_string(), a.blocked), ("100000".into(), "400000".into(), false));
    let c = clock(rest("rest/clock.json")).unwrap();
    assert_eq!(c.next_open, ts("2026-08-31T13:30:00Z"));
    assert!(!c.is_open);
    let days: Vec<w::CalendarDay> = rest("rest/calendar.json");
    let d = calendar_day(days[1].clone()).unwrap();
    assert_eq!((d.open, d.close), (ts("2026-11-27T14:30:00Z"), ts("2026-11-27T18:00:00Z")), "EST is UTC-5 in November");
    let s = asset(rest("rest/asset.json")).unwrap();
    assert!(s.tradable && s.fractionable && s.min_order_size.is_none());
    let b = asset(rest("rest/asset_crypto.json")).unwrap();
    assert_eq!(b.min_order_size.unwrap().to_string(), "0.000018096");
    let o = order(rest("rest/order.json")).unwrap();
    assert_eq!((o.side, o.qty.unwrap().to_string(), o.status), (Side::Buy, "10".into(), OrderStatus::Filled));
    assert_eq!(o.client_order_id.unwrap().as_str(), "tb-ppo-AAPL-1714573800-0");
    let p = position(rest("rest/position.json")).unwrap();
    assert_eq!((p.symbol.as_str(), p.qty.to_string()), ("AAPL", "10".into()));
}

#[test]
fn bars_pages_and_errors() {
    let (bars, token) = bars_page(rest("rest/bars_page.json"), Timeframe::DAY1).unwrap();
    assert_eq!(bars.iter().map(|b| b.symbol.as_str()).collect::<Vec<_>>(), ["AAPL", "AAPL", "MSFT"]);
    assert_eq!(bars[0].t, ts("2024-01-03T05:00:00Z"));
    assert_eq!(token.as_deref(), Some("TVNGVHwxRHwyMDI0LTAxLTAzVDA1OjAwOjAwLjAwMDAwMDAwMFo="));
    let (bars, token) = bars_page(rest("rest/bars_page_last.json"), Timeframe::DAY1).unwrap();
    assert!(bars.is_empty() && token.is_none());
    let e: w::ErrorBody = rest("rest/error_buying_power.json");
    assert_eq!((e.code, e.message.as_str()), (Some(40310000), "insufficient buying power"));
    let e: w::ErrorBody = rest("rest/error_duplicate_client_order_id.json");
    assert_eq!(e.code, Some(40010001));
    let e: w::ErrorBody = rest("rest/error_not_found_no_code.json");
    assert_eq!((e.code, e.message.as_str()), (None, "endpoint not found"));
    let m: Vec<w::MultiStatus> = rest("rest/cancel_all.json");
    assert_eq!(m.iter().map(|s| s.status).collect::<Vec<_>>(), [200, 500]);
    let m: Vec<w::MultiStatus> = rest("rest/close_all.json");
    assert_eq!((m[0].symbol.as_deref(), m[1].status), (Some("AAPL"), 403));
}

#[test]
fn malformed_messages_are_errors_not_panics() {
    let cases: &[&[u8]] = &[
        b"",
        b"not json",
        b"[",
        b"[{\"T\":\"b\"}]",
        b"[{\"T\":\"b\",\"S\":\"AAPL\",\"o\":\"1\",\"h\":1,\"l\":1,\"c\":1,\"v\":1,\"t\":\"2024-05-01T14:30:00Z\"}]",
        b"[{\"T\":\"b\",\"S\":\"AAPL\",\"o\":1e400,\"h\":1,\"l\":1,\"c\":1,\"v\":1,\"t\":\"2024-05-01T14:30:00Z\"}]",
        b"[{\"T\":\"b\",\"S\":\"AAPL\",\"o\":NaN,\"h\":1,\"l\":1,\"c\":1,\"v\":1,\"t\":\"2024-05-01T14:30:00Z\"}]",
        b"[{\"T\":\"b\",\"S\":\"AAPL\",\"o\":1,\"h\":1,\"l\":1,\"c\":1,\"v\":-5,\"t\":\"2024-05-01T14:30:00Z\"}]",
        b"[{\"T\":\"b\",\"S\":\"AAPL\",\"o\":1,\"h\":1,\"l\":1,\"c\":1,\"v\":1,\"t\":\"yesterday\"}]",
        b"[{\"T\":\"t\",\"S\":\"AAPL\",\"i\":99999999999999999999999,\"p\":1,\"s\":1,\"t\":\"2024-05-01T14:30:00Z\"}]",
        b"[{\"T\":\"q\",\"S\":\"\",\"bp\":1,\"bs\":1,\"ap\":1,\"as\":1,\"t\":\"2024-05-01T14:30:00Z\"}]",
        b"[{\"T\":7}]",
        b"[{\"no_tag\":1}]",
        b"[1, \"x\", null, []]",
        b"42",
    ];
    for c in cases {
        let f = market_frame(c);
        assert!(f.items.is_empty(), "{:?}", String::from_utf8_lossy(c));
        let u = updates_frame(c);
        assert!(u.items.is_empty(), "{:?}", String::from_utf8_lossy(c));
    }
    let deep = format!("{}{}", "[".repeat(100_000), "]".repeat(100_000));
    assert_eq!(market_frame(deep.as_bytes()).errors.len(), 1, "recursion limit, not a stack overflow");
}

#[test]
fn one_bad_message_does_not_hide_the_good_ones() {
    let frame = br#"[{"T":"b","S":"AAPL","o":"x"},{"T":"b","S":"AAPL","o":1,"h":2,"l":1,"c":2,"v":3,"t":"2024-05-01T14:30:00Z"}]"#;
    let f = market_frame(frame);
    assert_eq!((f.items.len(), f.errors.len()), (1, 1));
}

mod never_panics {
    use super::*;
    use proptest::prelude::*;

    fn json_value() -> impl Strategy<Value = serde_json::Value> {
        let leaf = prop_oneof![
            Just(serde_json::Value::Null),
            any::<bool>().prop_map(serde_json::Value::Bool),
            any::<i64>().prop_map(|i| serde_json::json!(i)),
            any::<u64>().prop_map(|i| serde_json::json!(i)),
            any::<f64>().prop_map(|f| serde_json::json!(f)),
            "[A-Za-z0-9:./ -]{0,12}".prop_map(serde_json::Value::String),
            prop_oneof![Just("2024-05-01T14:30:00Z"), Just("2024-05-01T14:30:00.1-04:00")]
                .prop_map(|s| serde_json::Value::String(s.into())),
        ];
        leaf.prop_recursive(3, 24, 6, |inner| {
            prop_oneof![
                proptest::collection::vec(inner.clone(), 0..4).prop_map(serde_json::Value::Array),
                proptest::collection::btree_map(
                    prop_oneof![
                        Just("T".to_string()),
                        Just("S".to_string()),
                        Just("o".to_string()),
                        Just("h".to_string()),
                        Just("l".to_string()),
                        Just("c".to_string()),
                        Just("v".to_string()),
                        Just("t".to_string()),
                        Just("p".to_string()),
                        Just("s".to_string()),
                        Just("stream".to_string()),
                        Just("data".to_string()),
                        Just("event".to_string()),
                        Just("order".to_string()),
                    ],
                    inner,
                    0..10
                )
                .prop_map(|m| serde_json::Value::Object(m.into_iter().collect())),
            ]
        })
    }

    fn message() -> impl Strategy<Value = serde_json::Value> {
        let tag = prop_oneof![
            Just("b"),
            Just("u"),
            Just("d"),
            Just("t"),
            Just("q"),
            Just("s"),
            Just("l"),
            Just("i"),
            Just("c"),
            Just("x"),
            Just("o"),
            Just("n"),
            Just("success"),
            Just("error"),
            Just("subscription"),
            Just("zz")
        ];
        (tag, proptest::collection::btree_map("[A-Za-z]{1,3}", json_value(), 0..12)).prop_map(|(t, mut m)| {
            m.insert("T".into(), serde_json::Value::String(t.into()));
            serde_json::Value::Object(m.into_iter().collect())
        })
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(2000))]
        #[test]
        fn frame_parsers_never_panic_on_bytes(bytes in proptest::collection::vec(any::<u8>(), 0..256)) {
            let _ = market_frame(&bytes);
            let _ = updates_frame(&bytes);
        }

        #[test]
        fn frame_parsers_never_panic_on_json(v in json_value(), msgs in proptest::collection::vec(message(), 0..6)) {
            let _ = updates_frame(v.to_string().as_bytes());
            let f = market_frame(serde_json::Value::Array(msgs.clone()).to_string().as_bytes());
            prop_assert_eq!(f.items.len() + f.unknown + f.errors.len(), msgs.len());
        }
    }
}

#[test]
fn broker_numbers_beyond_a_trillion_are_refused_not_overflowed_later() {
    use rust_decimal::Decimal;
    assert_eq!(super::MAX_ABS, Decimal::from(1_000_000_000_000u64));
    assert_eq!(super::decimal("qty", "1000000000000").unwrap(), super::MAX_ABS);
    let e = super::decimal("qty", "79228162514264337593543950335").unwrap_err();
    assert!(e.to_string().contains("out of range"), "{e}");
    assert!(super::decimal("price", "-1e13").is_err());
    // A trade update with such a fill is refused as one message, never a panic in the order manager.
    let frame = br#"{"stream":"trade_updates","data":{"event":"fill","price":"1e20","qty":"1e20","order":{}}}"#;
    let f = crate::alpaca::parse::updates_frame(frame);
    assert!(f.items.is_empty() && !f.errors.is_empty(), "{f:?}");
}

/// `rest/order.json` with another status and filled quantity.
fn order_json(status: &str, filled: &str) -> serde_json::Value {
    let mut v: serde_json::Value = serde_json::from_slice(&fixture("rest/order.json")).unwrap();
    v["status"] = status.into();
    v["filled_qty"] = filled.into();
    v
}

#[test]
fn every_alpaca_order_status_maps_and_an_unknown_one_is_kept_working_and_named() {
    use OrderStatus as S;
    let table = [
        ("new", S::Accepted),
        ("accepted", S::Accepted),
        ("pending_new", S::PendingNew),
        ("accepted_for_bidding", S::Accepted),
        ("pending_cancel", S::PendingCancel),
        ("pending_replace", S::Accepted),
        ("pending_review", S::Accepted),
        ("calculated", S::Accepted),
        ("stopped", S::Accepted),
        ("suspended", S::Accepted),
        ("done_for_day", S::Accepted),
        ("held", S::Accepted),
        ("partially_filled", S::PartiallyFilled),
        ("filled", S::Filled),
        ("canceled", S::Canceled),
        ("expired", S::Expired),
        ("replaced", S::Replaced),
        ("rejected", S::Rejected),
        ("some_status_alpaca_adds_later", S::Accepted),
    ];
    for (text, want) in table {
        let o = order_value(order_json(text, "0")).unwrap_or_else(|e| panic!("{text}: {e}"));
        assert_eq!((o.status, o.broker_status.as_str()), (want, text), "{text}");
    }
    // Working with something filled: partially filled, whatever the working status is called.
    let o = order_value(order_json("a_new_working_status", "3")).unwrap();
    assert_eq!((o.status, o.broker_status.as_str()), (S::PartiallyFilled, "a_new_working_status"));
    // Through the typed wire object too (single-order replies), and on the updates stream.
    let mut w: w::Order = serde_json::from_value(order_json("brand_new", "0")).unwrap();
    w.filled_qty = Some("0".into());
    assert_eq!(order(w).unwrap().status, S::Accepted);
    let msg =
        serde_json::json!({"stream": "trade_updates", "data": {"event": "new", "order": order_json("brand_new", "0")}});
    let Some(UpdatesItem::Update(u)) = updates_message(msg).unwrap() else { panic!("an update") };
    assert_eq!((u.order.status, u.order.broker_status.as_str()), (S::Accepted, "brand_new"));
}
