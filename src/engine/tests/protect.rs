//! Marks between daily bars, and the protective sells: the daily loss limit and the stops on minute
//! prices, a flatten mid-session on `1Day` (never refused as stale), a sell that waits for the cancel of
//! our working buy (the broker's wash-trade rule), the kill switch's flatten sent again after a refusal.

use super::{fill_events, rig, risk_cfg, snapshot, with_risk};
use crate::config::{KillSwitchAction, RiskConfig};
use crate::domain::{Bar, ClientOrderId, OrderRequest, OrderWhy, Side, Symbol, Timeframe};
use crate::engine::{Command, Control, Core, Event, ManualClock, StrategyMode};
use crate::exec::ExecParams;
use crate::features::FeatureSpec;
use chrono::{DateTime, Duration, Utc};

fn aapl() -> Symbol {
    Symbol::new("AAPL").unwrap()
}

fn minute(t: DateTime<Utc>, c: f64) -> Bar {
    Bar { symbol: aapl(), timeframe: Timeframe::MIN1, t, o: c, h: c, l: c, c, v: 10.0 }
}

fn submitted(cmds: &[Command]) -> Vec<&OrderRequest> {
    cmds.iter().filter_map(|c| if let Command::Submit(o) = c { Some(o.get()) } else { None }).collect()
}

/// An engine on daily bars holding 20 AAPL bought at 50 (cash 99,000 of 100,000), its clock at the buy's
/// bar. Returns the rig, the clock, and the day bar index it bought on.
fn holding(cfg: &RiskConfig, exec: &ExecParams) -> (super::Rig, ManualClock, usize) {
    let w = FeatureSpec::default().warmup();
    let (mut r, clock) = with_risk(rig(StrategyMode::Ppo, None), cfg, exec);
    for d in 0..w {
        clock.set(r.bars[0][d].t);
        super::feed(&mut r.engine, &r.bars, d);
    }
    r.engine.process(snapshot(100_000));
    clock.set(r.bars[0][w].t);
    let cmds = super::feed(&mut r.engine, &r.bars, w);
    let buy = submitted(&cmds)[0].clone();
    for ev in fill_events(&buy, 50, r.bars[0][w].t) {
        r.engine.process(ev);
    }
    r.engine.process(Event::Reconciled(Box::new(crate::engine::BrokerSnapshot {
        cash: 99_000.into(),
        equity: 100_000.into(),
        positions: vec![(aapl(), 20.into())],
        ..Default::default()
    })));
    assert_eq!(r.engine.oms().position(&aapl()), 20.into());
    (r, clock, w)
}

fn flatten_cfg(limit: f64) -> RiskConfig {
    RiskConfig { daily_loss_limit_pct: limit, kill_switch: KillSwitchAction::Flatten, ..risk_cfg("1000000") }
}

#[test]
fn a_minute_crash_between_daily_bars_trips_the_kill_switch_and_flattens_within_the_minute() {
    let (mut r, clock, w) = holding(&flatten_cfg(0.001), &ExecParams { max_trade: 20.0, ..ExecParams::default() });
    // The next session, mid-morning: AAPL's minutes fall from 50 to 40 (20 x -10 = -200, 0.2% of 100,000).
    let t0 = r.bars[0][w].t + Duration::hours(14);
    clock.set(t0);
    assert!(r.engine.process(Event::Mark(minute(t0, 49.9))).is_empty(), "a 0.002% dip is nothing");
    let crash = minute(t0 + Duration::minutes(1), 40.0);
    clock.set(crash.t + Duration::seconds(5));
    let cmds = r.engine.process(Event::Mark(crash.clone()));
    let k = r.engine.risk().unwrap().kill_switch().expect("tripped on the minute, not at the day's close").clone();
    assert_eq!(k.open_equity, rust_decimal::Decimal::from(100_000), "against the previous close");
    let sells = submitted(&cmds);
    assert_eq!(sells.len(), 1, "{cmds:?}");
    let s = sells[0];
    assert_eq!((s.side, s.qty.get(), s.why, s.ref_price), (Side::Sell, 20.into(), OrderWhy::KillSwitch, 40.0));
    assert_eq!(s.client_order_id, ClientOrderId::derive("killsw", &aapl(), crash.t, 0));
    // A mark never decides: no buy, no stored decision beyond the day bar's.
    assert!(submitted(&r.engine.process(Event::Mark(minute(crash.t + Duration::minutes(1), 41.0)))).is_empty());
}

#[test]
fn a_trailing_stop_fires_on_a_minute_without_counting_down_its_cooldown() {
    let exec = ExecParams { max_trade: 20.0, trailing_stop: 0.05, cooldown_bars: 3, ..ExecParams::default() };
    let (mut r, clock, w) = holding(&risk_cfg("1000000"), &exec);
    let t0 = r.bars[0][w].t + Duration::hours(14);
    clock.set(t0);
    assert!(r.engine.process(Event::Mark(minute(t0, 52.0))).is_empty(), "the high-water mark rises to 52");
    let drop = minute(t0 + Duration::minutes(1), 49.0);
    let cmds = r.engine.process(Event::Mark(drop.clone()));
    let sells = submitted(&cmds);
    assert_eq!(sells.len(), 1, "49 is 5.8% under 52: {cmds:?}");
    assert_eq!((sells[0].why, sells[0].qty.get()), (OrderWhy::Stop, 20.into()));
    assert_eq!(sells[0].client_order_id, ClientOrderId::derive("stop", &aapl(), drop.t, 0));
    let cooldown = r.engine.risk().unwrap().stops().cooldown(&aapl());
    for i in 2..30 {
        r.engine.process(Event::Mark(minute(t0 + Duration::minutes(i), 49.0)));
    }
    assert_eq!(r.engine.risk().unwrap().stops().cooldown(&aapl()), cooldown, "minutes are not bars");
}

#[test]
fn a_flatten_mid_session_on_daily_bars_sells_although_the_day_bar_is_old() {
    let (mut r, clock, w) = holding(&risk_cfg("1000000"), &ExecParams { max_trade: 20.0, ..ExecParams::default() });
    // Five days after the last day bar (older than risk.max_bar_age, 4 days): the model's orders would be
    // stale, a flatten is not.
    let now = r.bars[0][w].t + Duration::days(5);
    clock.set(now);
    let cmds = r.engine.process(Event::Control(Control::Flatten));
    let sells = submitted(&cmds);
    assert_eq!(sells.len(), 1, "{cmds:?}");
    assert_eq!((sells[0].side, sells[0].qty.get(), sells[0].why), (Side::Sell, 20.into(), OrderWhy::Flatten));
    assert_eq!(sells[0].client_order_id, ClientOrderId::derive("flatten", &aapl(), now, 0));
    let o = r.engine.flatten_outcome().expect("the outcome is kept for the status");
    assert_eq!((o.seq, o.sent.clone(), o.waiting.len(), o.failed.len()), (1, vec![aapl()], 0, 0));
    assert_eq!(o.unconfirmed, vec![(aapl(), sells[0].client_order_id.clone())], "not accepted yet");
    assert!(r.engine.is_paused());
    // The broker refuses it: the flatten failed for AAPL (the CLI exits 1, the host alerts).
    let id = sells[0].client_order_id.clone();
    r.engine.process(Event::SubmitFailed { client_order_id: id, reason: "403 forbidden".into(), retriable: false });
    let o = r.engine.flatten_outcome().unwrap();
    assert_eq!((o.sent.len(), o.unconfirmed.len()), (0, 0));
    assert_eq!(o.failed, vec![(aapl(), "403 forbidden".to_string())]);
    assert_eq!(r.engine.protect_failures().count, 1);
    // A second flatten, half a minute later: its own number, and the sell goes out again.
    clock.set(now + Duration::seconds(30));
    let again = r.engine.process(Event::Control(Control::Flatten));
    assert_eq!(submitted(&again).len(), 1, "{again:?}");
    assert_eq!(r.engine.flatten_outcome().unwrap().seq, 2);
}

#[test]
fn a_protective_sell_waits_for_the_cancel_of_our_working_buy() {
    let (mut r, clock, w) = holding(&risk_cfg("1000000"), &ExecParams { max_trade: 20.0, ..ExecParams::default() });
    // The next day's decision buys 20 more: acknowledged, working at the broker.
    clock.set(r.bars[0][w + 1].t);
    let cmds = super::feed(&mut r.engine, &r.bars, w + 1);
    let buy = submitted(&cmds).into_iter().find(|o| o.side == Side::Buy).expect("a buy").clone();
    let mut ack = fill_events(&buy, 50, r.bars[0][w + 1].t);
    let Some(Event::Order(u)) = ack.first_mut() else { panic!("no update") };
    u.kind = crate::domain::UpdateKind::New;
    u.order.status = crate::domain::OrderStatus::Accepted;
    u.order.broker_status = "new".into();
    u.order.filled_qty = 0.into();
    u.order.filled_avg_price = None;
    u.fill = None;
    let new = Event::Order(u.clone());
    r.engine.process(new);
    // Flatten: the buy is canceled first; no sell goes out against it (a wash trade at the broker).
    clock.set(r.bars[0][w + 1].t + Duration::hours(3));
    let cmds = r.engine.process(Event::Control(Control::Flatten));
    assert!(submitted(&cmds).is_empty(), "no sell while our buy works: {cmds:?}");
    assert!(cmds.iter().any(|c| matches!(c, Command::Cancel(id) if *id == buy.client_order_id)), "{cmds:?}");
    assert_eq!(crate::engine::protect::pending_of(&r.engine).get(&aapl()), Some(&OrderWhy::Flatten));
    assert_eq!(r.engine.flatten_outcome().unwrap().waiting, vec![aapl()]);
    // The broker confirms the cancel: the sell goes out, for the whole holding.
    let Event::Order(mut canceled) = new_update(u) else { unreachable!() };
    canceled.kind = crate::domain::UpdateKind::Canceled;
    canceled.order.status = crate::domain::OrderStatus::Canceled;
    canceled.order.broker_status = "canceled".into();
    let cmds = r.engine.process(Event::Order(canceled));
    let sells = submitted(&cmds);
    assert_eq!(sells.len(), 1, "{cmds:?}");
    assert_eq!((sells[0].side, sells[0].qty.get(), sells[0].why), (Side::Sell, 20.into(), OrderWhy::Flatten));
    let o = r.engine.flatten_outcome().unwrap();
    assert_eq!((o.sent.clone(), o.waiting.len()), (vec![aapl()], 0));
}

fn new_update(u: &crate::domain::OrderUpdate) -> Event {
    Event::Order(Box::new(u.clone()))
}

#[test]
fn a_refused_kill_switch_sell_is_sent_again_with_backoff() {
    let (mut r, clock, w) = holding(&flatten_cfg(0.001), &ExecParams { max_trade: 20.0, ..ExecParams::default() });
    let crash = minute(r.bars[0][w].t + Duration::hours(14), 40.0);
    clock.set(crash.t);
    let cmds = r.engine.process(Event::Mark(crash));
    let sell = submitted(&cmds)[0].clone();
    // The broker rejects it: nothing is being sold any more, and AAPL is still held.
    r.engine.process(Event::SubmitFailed {
        client_order_id: sell.client_order_id.clone(),
        reason: "403 rejected".into(),
        retriable: false,
    });
    let t1 = clock_now(&clock);
    assert!(submitted(&r.engine.process(Event::Tick)).is_empty(), "the first look schedules the retry");
    assert_eq!(r.engine.protect_failures().count, 1);
    assert!(r.engine.protect_failures().last.as_deref().unwrap().contains("20 AAPL"));
    clock.set(t1 + Duration::seconds(4));
    assert!(submitted(&r.engine.process(Event::Tick)).is_empty(), "not before 5 s");
    let t2 = t1 + Duration::seconds(5);
    clock.set(t2);
    let cmds = r.engine.process(Event::Tick);
    let again = submitted(&cmds);
    assert_eq!(again.len(), 1, "{cmds:?}");
    assert_eq!((again[0].why, again[0].qty.get()), (OrderWhy::KillSwitch, 20.into()));
    assert_eq!(again[0].client_order_id, ClientOrderId::derive("killsw", &aapl(), t2, 0));
    // Refused again: the next wait is twice as long.
    let id = again[0].client_order_id.clone();
    r.engine.process(Event::SubmitFailed { client_order_id: id, reason: "403".into(), retriable: false });
    r.engine.process(Event::Tick);
    assert_eq!(r.engine.protect_failures().count, 2);
    clock.set(t2 + Duration::seconds(9));
    assert!(submitted(&r.engine.process(Event::Tick)).is_empty(), "10 s the second time");
    clock.set(t2 + Duration::seconds(10));
    assert_eq!(submitted(&r.engine.process(Event::Tick)).len(), 1);
    // A person pauses: no more attempts.
    r.engine.process(Event::Control(Control::Pause));
    clock.set(t2 + Duration::hours(1));
    assert!(submitted(&r.engine.process(Event::Tick)).is_empty());
}

fn clock_now(c: &ManualClock) -> DateTime<Utc> {
    use crate::engine::EngineClock;
    c.now()
}
