use super::*;
use crate::env::{EnvConfig, Panel, VecEnv};
use chrono::DateTime;
use proptest::prelude::*;
use std::sync::Arc;

fn sym(i: usize) -> Symbol {
    Symbol::new(&format!("S{i}")).unwrap()
}

#[test]
fn fills_with_fees_caps_and_refuses_bad_orders() {
    let p = ExecParams { fee_bps: 10.0, slippage_bps: 0.0, min_order: 1.0, integer_units: true, ..Default::default() };
    let mut b = SimBroker::new(1_000.0, p);
    let s = sym(0);
    // 20 units at 100 cost 2,002 with fees: capped by cash after fees to 9 units.
    let f = b.step(&[(s.clone(), 100.0)], &[SimOrder { symbol: s.clone(), side: Side::Buy, qty: 20.0 }]).unwrap();
    assert_eq!(f[0].qty, 9.0);
    assert!((b.cash() - (1_000.0 - 900.0 * 1.001)).abs() < 1e-9);
    // Selling more than held sells the holding; a 0.5-unit order is below the minimum and dropped.
    let f = b.step(&[(s.clone(), 110.0)], &[SimOrder { symbol: s.clone(), side: Side::Sell, qty: 50.0 }]).unwrap();
    assert_eq!(f[0].qty, -9.0);
    assert_eq!(b.holding(&s), 0.0);
    assert!(
        b.step(&[(s.clone(), 110.0)], &[SimOrder { symbol: s.clone(), side: Side::Buy, qty: 0.5 }]).unwrap().is_empty()
    );
    assert!(matches!(
        b.step(&[], &[SimOrder { symbol: s.clone(), side: Side::Buy, qty: 1.0 }]),
        Err(SimError::NoPrice(_))
    ));
    assert!(matches!(b.step(&[(s.clone(), f64::NAN)], &[]), Err(SimError::BadPrice { .. })));
    assert!(matches!(
        b.step(&[(s.clone(), 1.0)], &[SimOrder { symbol: s, side: Side::Buy, qty: -1.0 }]),
        Err(SimError::BadQty(_))
    ));
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]
    /// The broker and the environment, given the same actions (the broker as quantities
    /// `|action| × max_trade`), hold the same cash, holdings and equity at every bar, stops and
    /// cooldowns included.
    #[test]
    fn broker_and_env_agree_on_any_action_sequence(
        seed in 0u64..1000,
        actions in proptest::collection::vec(-1.0f32..1.0, 3 * 59),
        stop in prop_oneof![Just(0.0), 0.02f64..0.1],
        cooldown in 0u32..4,
        integer in any::<bool>(),
        fee in 0.0f64..30.0,
        slip in 0.0f64..20.0,
    ) {
        let assets = 3;
        let panel = Arc::new(Panel::synthetic(60, assets, 1, seed).unwrap());
        let exec = ExecParams { max_trade: 50.0, min_order: 1.0, fee_bps: fee, slippage_bps: slip, trailing_stop: stop, cooldown_bars: cooldown, integer_units: integer, ..Default::default() };
        let cfg = EnvConfig { n_envs: 1, episode_len: 59, initial_cash: 10_000.0, exec, fixed_start: true, seed, ..Default::default() };
        let mut env = VecEnv::new(cfg, panel.clone()).unwrap();
        let mut broker = SimBroker::new(10_000.0, exec);
        let mut step = crate::env::StepOutcome::default();
        for t in 0..59 {
            let a = &actions[t * assets..(t + 1) * assets];
            env.step(a, &mut step).unwrap();
            let day = t + 1;
            let bars: Vec<(Symbol, f64)> = (0..assets).map(|k| (sym(k), f64::from(panel.price(day, k)))).collect();
            let orders: Vec<SimOrder> = (0..assets)
                .filter(|&k| a[k] != 0.0)
                .map(|k| SimOrder {
                    symbol: sym(k),
                    side: if a[k] > 0.0 { Side::Buy } else { Side::Sell },
                    qty: f64::from(a[k]).abs() * exec.max_trade,
                })
                .collect();
            broker.step(&bars, &orders).unwrap();
            if t + 1 < 59 {
                prop_assert_eq!(env.cash()[0].to_bits(), broker.cash().to_bits(), "cash at bar {}", t);
                for k in 0..assets {
                    prop_assert_eq!(env.positions()[k].holding.to_bits(), broker.holding(&sym(k)).to_bits(), "holding {} at bar {}", k, t);
                    prop_assert_eq!(env.positions()[k].cooldown, broker.position(&sym(k)).map(|p| p.cooldown).unwrap_or(0));
                }
            }
            prop_assert_eq!(step.equity[0].to_bits(), broker.equity().to_bits(), "equity at bar {}", t);
        }
    }
}

fn order(s: &Symbol, side: Side, qty: i64, bar: i64) -> crate::risk::RiskApproved<OrderRequest> {
    use crate::domain::{ClientOrderId, OrderTif, Qty};
    let bar_time = DateTime::from_timestamp(1_700_000_000 + bar * 86_400, 0).unwrap();
    crate::risk::approve_for_test(OrderRequest {
        client_order_id: ClientOrderId::derive("sim", s, bar_time, 0),
        symbol: s.clone(),
        side,
        qty: Qty::new(rust_decimal::Decimal::from(qty)).unwrap(),
        tif: OrderTif::Day,
        bar_time,
        ref_price: 100.0,
        why: crate::domain::OrderWhy::Model,
    })
}

/// Through the `Broker` trait: an order is open until the next bar, fills there at the close (the rule's
/// cash cap cuts a buy too big, the rest canceled), and a cancel before the bar takes it back.
#[tokio::test]
async fn as_a_broker_orders_wait_for_the_next_bar_and_report_like_alpaca() {
    use crate::broker::{Broker, BrokerError};
    use crate::domain::OrderStatus;
    use rust_decimal::Decimal;
    let p = ExecParams { fee_bps: 0.0, slippage_bps: 0.0, min_order: 1.0, integer_units: true, ..Default::default() };
    let mut b = SimBroker::new(1_000.0, p);
    let (s, t0) = (sym(0), DateTime::from_timestamp(1_700_000_000, 0).unwrap());
    let e = b.submit(order(&s, Side::Buy, 3, 0)).await.unwrap_err();
    assert!(matches!(e, BrokerError::Rejected(ref m) if m.contains("no price for S0")), "{e}");
    b.fill_pending(&[(s.clone(), 100.0)], t0).unwrap();

    let buy = order(&s, Side::Buy, 30, 1);
    let id = buy.client_order_id.clone();
    let ack = b.submit(buy.clone()).await.unwrap();
    assert_eq!((ack.status, ack.filled_qty), (OrderStatus::Accepted, Decimal::ZERO));
    b.submit(buy).await.unwrap();
    let open = b.snapshot().await.unwrap();
    assert_eq!(open.orders.len(), 1, "the same client id is taken once");
    assert!(open.positions.is_empty());

    // 30 at 50 is 1,500: the cash (1,000) buys 20, the rest is canceled.
    let t1 = t0 + chrono::Duration::days(1);
    let (snap, fills) = b.fill_pending(&[(s.clone(), 50.0)], t1).unwrap();
    assert_eq!(fills.len(), 1);
    let o = &snap.orders[0];
    assert_eq!(
        (o.client_order_id.as_ref(), o.status, o.filled_qty),
        (Some(&id), OrderStatus::Canceled, Decimal::from(20))
    );
    assert_eq!(o.filled_avg_price, Some(Decimal::from(50)));
    assert_eq!(snap.positions, vec![(s.clone(), Decimal::from(20))]);
    assert_eq!((snap.cash, snap.equity, snap.taken_at), (Decimal::ZERO, Decimal::from(1_000), Some(t1)));

    // A sell canceled before the next bar never fills; a cancel of a closed order is refused.
    let sell = order(&s, Side::Sell, 5, 2);
    let sell_id = sell.client_order_id.clone();
    b.submit(sell).await.unwrap();
    b.cancel(&sell_id).await.unwrap();
    assert!(matches!(b.cancel(&sell_id).await, Err(BrokerError::Rejected(_))));
    let (snap, fills) = b.fill_pending(&[(s.clone(), 60.0)], t1 + chrono::Duration::days(1)).unwrap();
    assert!(fills.is_empty() && snap.orders.is_empty());
    assert_eq!(b.holding(&s), 20.0);
}
