//! A property test of the OMS against the toy broker: random fills, duplicate and re-ordered updates,
//! reconnects, reconciliations, lost submissions and restarts.

use super::*;
use proptest::prelude::*;

#[derive(Debug, Clone)]
enum Op {
    /// A decision on (symbol, bar); `reaches` false: the process died before the POST left.
    Decide {
        symbol: usize,
        bar: i64,
        sell: bool,
        reaches: bool,
    },
    Fill {
        order: usize,
        qty: u8,
        price: u8,
    },
    Deliver(usize),
    Reconnect,
    Reconcile,
    Restart,
    Wait,
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        3 => (0..3usize, 0..6i64, any::<bool>(), prop::bool::weighted(0.8))
            .prop_map(|(symbol, bar, sell, reaches)| Op::Decide { symbol, bar, sell, reaches }),
        4 => (0..16usize, 1..6u8, 1..200u8).prop_map(|(order, qty, price)| Op::Fill { order, qty, price }),
        5 => (0..64usize).prop_map(Op::Deliver),
        1 => Just(Op::Reconnect),
        1 => Just(Op::Reconcile),
        1 => Just(Op::Restart),
        1 => Just(Op::Wait),
    ]
}

const SYMBOLS: [&str; 3] = ["AAPL", "MSFT", "BTC/USD"];

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    /// Whatever arrives in whatever order, duplicated or not, with reconnects, reconciliations, lost
    /// submissions and restarts between: every order's recorded fills never exceed what the broker filled
    /// and add up to the order's filled quantity, positions equal the sum of the fills, each decision is
    /// sent at most once, and after a final reconciliation everything equals the broker's.
    #[test]
    fn fills_are_never_double_counted_and_positions_follow_the_fills(ops in prop::collection::vec(op(), 1..60)) {
        let mut h = Harness::new();
        let mut b = ToyBroker::default();
        let mut sent = std::collections::HashSet::new();
        for op in ops {
            match op {
                Op::Decide { symbol, bar, sell, reaches } => {
                    let side = if sell { Side::Sell } else { Side::Buy };
                    match h.oms().submit(request(SYMBOLS[symbol], bar, side, 5)) {
                        Ok(Some(cmd)) => {
                            let r = submitted(Some(cmd));
                            prop_assert!(sent.insert(r.client_order_id.clone()), "{} sent twice", r.client_order_id);
                            if reaches { b.accept(&r); }
                        }
                        Ok(None) => {}
                        Err(OmsError::NotReady) => prop_assert!(!h.oms().ready()),
                        Err(e) => prop_assert!(false, "submit failed: {e}"),
                    }
                }
                Op::Fill { order, qty, price } => {
                    if !b.orders.is_empty() {
                        let i = order % b.orders.len();
                        b.fill(i, Decimal::from(qty), Decimal::from(price));
                    }
                }
                Op::Deliver(i) => {
                    if !b.updates.is_empty() {
                        let u = b.updates[i % b.updates.len()].clone();
                        h.oms().on_update(&u).unwrap();
                    }
                }
                Op::Reconnect => { h.oms().on_broker_reconnected(); }
                Op::Reconcile => {
                    h.oms().reconcile(&b.snapshot()).unwrap();
                    let want: BTreeMap<Symbol, Decimal> = b.positions().into_iter().collect();
                    prop_assert_eq!(h.oms().positions(), want);
                }
                Op::Restart => h.reopen(),
                Op::Wait => h.clock.set(h.clock.now() + chrono::Duration::seconds(30)),
            }
            let oms = h.oms.as_ref().unwrap();
            for bo in &b.orders {
                let Some(o) = bo.client_order_id.as_ref().and_then(|c| oms.order(c)) else { continue };
                prop_assert!(o.filled_qty <= bo.filled_qty, "{}: {} recorded, {} filled", o.client_order_id, o.filled_qty, bo.filled_qty);
            }
            let mut per_order: BTreeMap<ClientOrderId, Decimal> = BTreeMap::new();
            for f in oms.fills().unwrap() {
                *per_order.entry(f.client_order_id.clone()).or_default() += f.qty;
            }
            for o in oms.orders() {
                prop_assert_eq!(per_order.get(&o.client_order_id).copied().unwrap_or_default(), o.filled_qty);
            }
            prop_assert_eq!(oms.positions(), fill_positions(oms));
            // The open orders (kept as an index beside the orders) are exactly the non-terminal ones, in id order.
            let open: Vec<&ClientOrderId> = oms.open_orders().map(|o| &o.client_order_id).collect();
            let live: Vec<&ClientOrderId> =
                oms.orders().filter(|o| !o.status.is_terminal()).map(|o| &o.client_order_id).collect();
            prop_assert_eq!(open, live);
        }
        h.oms().reconcile(&b.snapshot()).unwrap();
        for u in b.updates.clone() {
            h.oms().on_update(&u).unwrap();
        }
        let want: BTreeMap<Symbol, Decimal> = b.positions().into_iter().collect();
        prop_assert_eq!(h.oms().positions(), want.clone());
        prop_assert_eq!(fill_positions(h.oms.as_ref().unwrap()), want);
        for bo in &b.orders {
            let o = h.oms().order(bo.client_order_id.as_ref().unwrap()).unwrap().clone();
            prop_assert_eq!((o.filled_qty, o.status), (bo.filled_qty, bo.status));
        }
    }
}
