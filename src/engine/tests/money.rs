//! The engine's account between snapshots (issue 23): fills move cash at once and only once, a working
//! order blocks a second one on the same side, holdings outside the configured symbols count in equity,
//! stops follow reconciled holdings, stay armed when their sell is refused, and pass a `halt` kill switch.

use super::{feed, fill_events, rig, risk_cfg, snapshot, submits, with_risk};
use crate::domain::{OrderRequest, Qty, Side, Symbol};
use crate::engine::*;
use crate::exec::ExecParams;
use crate::features::FeatureSpec;
use rust_decimal::Decimal;

/// A rig with the full risk checks, warmed up and reconciled at 100,000 cash; the clock at bar `w`.
fn ready(exec: &ExecParams) -> (super::Rig, ManualClock, usize) {
    let w = FeatureSpec::default().warmup();
    let (mut r, clock) = with_risk(rig(StrategyMode::Ppo, None), &risk_cfg("1000000"), exec);
    for d in 0..w {
        clock.set(r.bars[0][d].t);
        feed(&mut r.engine, &r.bars, d);
    }
    r.engine.process(snapshot(100_000));
    clock.set(r.bars[0][w].t);
    (r, clock, w)
}

fn first_submit(cmds: &[Command]) -> OrderRequest {
    match cmds.first() {
        Some(Command::Submit(o)) => o.get().clone(),
        other => panic!("no submit: {other:?}"),
    }
}

#[test]
fn a_fill_moves_cash_at_once_fees_included_and_a_duplicate_fill_once() {
    let exec = ExecParams { max_trade: 20.0, fee_bps: 10.0, ..ExecParams::default() };
    let (mut r, _clock, w) = ready(&exec);
    let o = first_submit(&feed(&mut r.engine, &r.bars, w));
    let events = fill_events(&o, 50, r.bars[0][w].t);
    for ev in events.clone() {
        r.engine.process(ev);
    }
    let spent = 20.0 * 50.0 * (1.0 + 10.0 / 10_000.0);
    assert!((r.engine.cash() - (100_000.0 - spent)).abs() < 1e-9, "cash {}", r.engine.cash());
    // The same fill reported again (a reconnect replays the stream): counted once.
    for ev in events {
        r.engine.process(ev);
    }
    assert!((r.engine.cash() - (100_000.0 - spent)).abs() < 1e-9, "cash {}", r.engine.cash());
    // Equity moves with the price, not with the fill: cash + 20 units at the last close.
    let close = r.bars[0][w].c;
    assert!((r.engine.equity() - (100_000.0 - spent + 20.0 * close)).abs() < 1e-6);
}

#[test]
fn a_working_buy_blocks_another_buy_of_the_symbol() {
    let (mut r, clock, w) = ready(&ExecParams { max_trade: 20.0, ..ExecParams::default() });
    let o = first_submit(&feed(&mut r.engine, &r.bars, w));
    assert_eq!(o.side, Side::Buy);
    // Not filled yet (queued at the broker): the next bar wants +1 on AAPL again.
    clock.set(r.bars[0][w + 1].t);
    assert!(submits(&feed(&mut r.engine, &r.bars, w + 1)).is_empty(), "a second buy on an unfilled one");
    assert_eq!(r.engine.take_refusals(), vec![(Symbol::new("AAPL").unwrap(), "working_order")]);
    // Filled: the next bar may buy again.
    for ev in fill_events(&o, 50, r.bars[0][w].t) {
        r.engine.process(ev);
    }
    clock.set(r.bars[0][w + 2].t);
    assert_eq!(submits(&feed(&mut r.engine, &r.bars, w + 2)).len(), 1);
}

#[test]
fn an_equity_that_is_not_a_number_refuses_the_order_instead_of_reading_as_zero() {
    let (mut r, _clock, w) = ready(&ExecParams { max_trade: 20.0, ..ExecParams::default() });
    r.engine.outside_value = f64::NAN; // the observation is fine, the equity is not
    assert!(submits(&feed(&mut r.engine, &r.bars, w)).is_empty());
    assert_eq!(r.engine.take_refusals(), vec![(Symbol::new("AAPL").unwrap(), "non_finite")]);
}

#[test]
fn risk_max_working_orders_lets_that_many_work_at_once() {
    let w = FeatureSpec::default().warmup();
    let cfg = crate::config::RiskConfig { max_working_orders: 2, ..risk_cfg("1000000") };
    let exec = ExecParams { max_trade: 20.0, ..ExecParams::default() };
    let (mut r, clock) = with_risk(rig(StrategyMode::Ppo, None), &cfg, &exec);
    for d in 0..w {
        clock.set(r.bars[0][d].t);
        feed(&mut r.engine, &r.bars, d);
    }
    r.engine.process(snapshot(100_000));
    // Two buys of AAPL on two bars, neither filled: the second is allowed, the third is not.
    for (d, want) in [(w, 1), (w + 1, 1), (w + 2, 0)] {
        clock.set(r.bars[0][d].t);
        assert_eq!(submits(&feed(&mut r.engine, &r.bars, d)).len(), want, "bar {d}");
    }
    assert_eq!(r.engine.take_refusals(), vec![(Symbol::new("AAPL").unwrap(), "working_order")]);
}

#[test]
fn holdings_outside_the_configured_symbols_count_in_equity() {
    let (mut r, _clock, _w) = ready(&ExecParams::default());
    let snap = BrokerSnapshot {
        cash: Decimal::from(50_000),
        equity: Decimal::from(80_000),
        positions: vec![(Symbol::new("TSLA").unwrap(), Decimal::from(100))],
        ..Default::default()
    };
    r.engine.process(Event::Reconciled(Box::new(snap)));
    assert!((r.engine.equity() - 80_000.0).abs() < 1e-6, "equity {}", r.engine.equity());
}

#[test]
fn stops_follow_reconciled_holdings_sell_on_a_stale_bar_once_our_buy_is_canceled_and_pass_halt() {
    let exec = ExecParams { max_trade: 20.0, trailing_stop: 0.05, cooldown_bars: 3, ..ExecParams::default() };
    let (mut r, clock, w) = ready(&exec);
    let aapl = Symbol::new("AAPL").unwrap();
    // 30 units found at the broker (bought by hand, or before a restart): no fill event ever came.
    let snap = BrokerSnapshot {
        cash: Decimal::from(98_500),
        equity: Decimal::from(100_000),
        positions: vec![(aapl.clone(), Decimal::from(30))],
        ..Default::default()
    };
    r.engine.process(Event::Reconciled(Box::new(snap)));
    assert_eq!(r.engine.oms().position(&aapl), Decimal::from(30));
    // The day opens (and buys 20 more, left working); then the kill switch trips under `halt` (-10%).
    let buy = first_submit(&feed(&mut r.engine, &r.bars, w));
    let low = BrokerSnapshot {
        cash: Decimal::from(88_500),
        equity: Decimal::from(90_000),
        positions: vec![(aapl.clone(), Decimal::from(30))],
        ..Default::default()
    };
    r.engine.process(Event::Reconciled(Box::new(low)));
    feed(&mut r.engine, &r.bars, w);
    assert!(r.engine.risk().unwrap().kill_switch().is_some(), "tripped");
    // A close far under the high on a stale bar: the stop fires. A protective sell is never refused as
    // stale, but our buy still works: the broker would refuse a sell against it (a wash trade), so the buy
    // is canceled first and the sell waits.
    let mut crash = r.bars[0][w + 1].clone();
    crash.c = r.bars[0][w].c * 0.8;
    clock.set(crash.t + chrono::Duration::days(10));
    let cmds = r.engine.process(Event::Bar(crash.clone()));
    assert!(submits(&cmds).is_empty(), "no sell against our working buy: {cmds:?}");
    assert!(cmds.iter().any(|c| matches!(c, Command::Cancel(id) if *id == buy.client_order_id)), "{cmds:?}");
    // The cancel is confirmed: the whole holding is sold, through the tripped `halt` kill switch (it
    // reduces the position), although the bar is ten days old.
    let mut canceled = match fill_events(&buy, 50, crash.t).into_iter().next() {
        Some(Event::Order(u)) => u,
        other => panic!("{other:?}"),
    };
    canceled.kind = crate::domain::UpdateKind::Canceled;
    canceled.order.status = crate::domain::OrderStatus::Canceled;
    canceled.order.broker_status = "canceled".into();
    canceled.order.filled_qty = Decimal::ZERO;
    canceled.order.filled_avg_price = None;
    canceled.fill = None;
    let sells = submits(&r.engine.process(Event::Order(canceled)));
    assert_eq!(sells, vec![("AAPL".to_string(), Side::Sell, "30".to_string())]);
}

#[test]
fn flatten_cancels_our_working_buys_and_sells_only_the_configured_symbols() {
    let (mut r, clock, w) = ready(&ExecParams { max_trade: 20.0, ..ExecParams::default() });
    let buy = first_submit(&feed(&mut r.engine, &r.bars, w));
    // MSFT held (configured), TSLA held too (bought by hand: not ours to sell).
    let snap = BrokerSnapshot {
        cash: Decimal::from(90_000),
        equity: Decimal::from(100_000),
        positions: vec![
            (Symbol::new("MSFT").unwrap(), Decimal::from(3)),
            (Symbol::new("TSLA").unwrap(), Decimal::from(5)),
        ],
        ..Default::default()
    };
    r.engine.process(Event::Reconciled(Box::new(snap)));
    clock.set(r.bars[0][w].t);
    let cmds = r.engine.process(Event::Control(Control::Flatten));
    assert!(matches!(&cmds[0], Command::Cancel(id) if *id == buy.client_order_id), "{cmds:?}");
    assert_eq!(submits(&cmds), vec![("MSFT".to_string(), Side::Sell, "3".to_string())]);
    // A kill-switch flatten and a manual one of the same bar do not share client order ids.
    let Some(Command::Submit(sell)) = cmds.last() else { panic!("{cmds:?}") };
    assert!(sell.client_order_id.as_str().starts_with("tb-flatten-"), "{}", sell.client_order_id);
}

#[test]
fn fractional_quantities_are_rounded_down_to_nine_decimals() {
    let q = Qty::from_f64(0.1).unwrap().get();
    assert_eq!(q.to_string(), "0.1", "the shortest decimal, not 0.1000000000000000055...");
    let rounded =
        Qty::from_f64(1.0 / 3.0).unwrap().get().round_dp_with_strategy(9, rust_decimal::RoundingStrategy::ToZero);
    assert_eq!(rounded.to_string(), "0.333333333");
}

#[test]
fn a_split_sized_gap_pauses_the_symbol_instead_of_firing_its_stop() {
    let exec = ExecParams { max_trade: 20.0, trailing_stop: 0.05, cooldown_bars: 3, ..ExecParams::default() };
    let (r, clock, w) = ready(&exec);
    let super::Rig { _dir, store, engine, bars, clock: rig_clock } = r;
    let mut r = super::Rig { _dir, store, engine: engine.with_gap_guard(), bars, clock: rig_clock };
    let aapl = Symbol::new("AAPL").unwrap();
    let snap = BrokerSnapshot {
        cash: Decimal::from(98_500),
        equity: Decimal::from(100_000),
        positions: vec![(aapl.clone(), Decimal::from(30))],
        ..Default::default()
    };
    r.engine.process(Event::Reconciled(Box::new(snap)));
    // A 2:1 split: the next bar opens and closes at half the price.
    let mut split = r.bars[0][w].clone();
    let half = r.bars[0][w - 1].c / 2.0;
    (split.o, split.h, split.l, split.c) = (half, half, half, half);
    clock.set(split.t);
    let mut cmds = r.engine.process(Event::Bar(split));
    cmds.extend(r.engine.process(Event::Bar(r.bars[1][w].clone())));
    assert!(submits(&cmds).iter().all(|(s, _, _)| s != "AAPL"), "no stop, no order on the gapped symbol: {cmds:?}");
    assert!(r.engine.take_refusals().contains(&(aapl.clone(), "price_gap")));
    // `resume` lets it trade again (the prices stay at the split level).
    r.engine.process(Event::Control(Control::Resume));
    let mut next = r.bars[0][w + 1].clone();
    (next.o, next.h, next.l, next.c) = (half, half * 1.01, half * 0.99, half);
    clock.set(next.t);
    let mut cmds = r.engine.process(Event::Bar(next));
    cmds.extend(r.engine.process(Event::Bar(r.bars[1][w + 1].clone())));
    assert!(!r.engine.take_refusals().iter().any(|(_, c)| *c == "price_gap"), "{cmds:?}");
}

/// Issue 39 item 1 on `1Day`, where every close opens a trading day: the day's reference equity is written
/// with the bar's order record and flushed by the event's one commit (not by a flush of its own), before
/// the order is handed back; it is on disk after that one flush.
#[test]
fn the_bar_that_opens_a_trading_day_writes_its_reference_and_its_order_in_one_flush() {
    let (mut r, _clock, w) = ready(&ExecParams::default());
    assert_eq!(crate::risk::stored_state(&r.store).unwrap().1, None, "no trading day opened while warming up");
    let mut flushes = Vec::new();
    let mut sent = 0;
    for symbol in &r.bars {
        let before = r.store.durable_flushes();
        sent += submits(&r.engine.process(Event::Bar(symbol[w].clone()))).len();
        flushes.push(r.store.durable_flushes() - before);
    }
    assert_eq!(sent, 1, "the close sends one order");
    assert_eq!(flushes.iter().sum::<u64>(), 1, "one flush for the close's order record and day reference: {flushes:?}");
    let day = crate::risk::stored_state(&r.store).unwrap().1.map(|d| d.day);
    assert_eq!(day, Some(crate::risk::hours::trading_day(r.bars[0][w].t)), "the day's reference is on disk");
}
