use super::*;

fn params() -> ExecParams {
    ExecParams { max_trade: 100.0, min_order: 1.0, fee_bps: 10.0, ..ExecParams::default() }
}

fn close(a: f64, b: f64) -> bool {
    (a - b).abs() < 1e-9 * b.abs().max(1.0)
}

#[test]
fn fees_are_charged_on_buys_and_sells() {
    let p = params();
    let (mut pos, mut cash) = (Position::default(), 10_000.0);
    let f = buy_phase(&p, &mut pos, &mut cash, 100.0, 0.1);
    assert_eq!((f.qty, pos.holding), (10.0, 10.0));
    // 10 x 100 = 1000, fee 10 bps = 1.
    assert!(close(cash, 8_999.0), "{cash}");
    let f = sell_phase(&p, &mut pos, &mut cash, 110.0, -0.05);
    assert_eq!((f.qty, pos.holding), (-5.0, 5.0));
    assert!(close(cash, 8_999.0 + 550.0 - 0.55), "{cash}");
    assert!(close(f.fee, 0.55));
}

#[test]
fn slippage_moves_the_execution_price_against_the_trader() {
    let p = ExecParams { slippage_bps: 50.0, fee_bps: 0.0, ..params() };
    let (mut pos, mut cash) = (Position::default(), 10_000.0);
    buy_phase(&p, &mut pos, &mut cash, 100.0, 0.1);
    assert!(close(cash, 10_000.0 - 10.0 * 100.5));
    assert!(close(pos.entry, 100.5));
    sell_phase(&p, &mut pos, &mut cash, 100.0, -1.0);
    assert!(close(cash, 10_000.0 - 1005.0 + 10.0 * 99.5));
    assert_eq!(pos, Position::default());
}

#[test]
fn buys_are_capped_by_cash_after_fees() {
    let p = params();
    let (mut pos, mut cash) = (Position::default(), 1_000.0);
    // 50 wanted; 1000 / (100 * 1.001) = 9.99 -> 9 whole units.
    let f = buy_phase(&p, &mut pos, &mut cash, 100.0, 0.5);
    assert_eq!(f.qty, 9.0);
    assert!(close(cash, 1_000.0 - 900.0 * 1.001));
    // FinRL's cap ignores the fee: floor(1000 / 100) = 10, and cash ends below zero.
    let p = ExecParams { cash_cap_ignores_fees: true, ..params() };
    let (mut pos, mut cash) = (Position::default(), 1_000.0);
    assert_eq!(buy_phase(&p, &mut pos, &mut cash, 100.0, 0.5).qty, 10.0);
    assert!(close(cash, -1.0));
    // Fractional units spend the cash to the cent, never below zero.
    let p = ExecParams { integer_units: false, ..params() };
    let (mut pos, mut cash) = (Position::default(), 1_000.0);
    let f = buy_phase(&p, &mut pos, &mut cash, 100.0, 0.5);
    assert!(close(f.qty, 1_000.0 / 100.1));
    assert!((0.0..1e-9).contains(&cash), "{cash}");
}

#[test]
fn sells_are_capped_at_the_holding_and_never_go_short() {
    let p = params();
    let (mut pos, mut cash) = (Position { holding: 3.0, entry: 50.0, high_water: 50.0, cooldown: 0 }, 0.0);
    let f = sell_phase(&p, &mut pos, &mut cash, 50.0, -1.0);
    assert_eq!(f.qty, -3.0);
    assert_eq!(pos, Position::default());
    assert_eq!(sell_phase(&p, &mut pos, &mut cash, 50.0, -1.0), AssetFill::default());
    assert!(close(cash, 150.0 * 0.999));
}

#[test]
fn requested_trades_below_the_minimum_are_dropped() {
    let p = ExecParams { min_order: 5.0, ..params() };
    let (mut pos, mut cash) = (Position::default(), 10_000.0);
    // 0.049 x 100 = 4.9 -> 4 units: dropped. 0.05 -> 5 units: traded.
    assert_eq!(buy_phase(&p, &mut pos, &mut cash, 10.0, 0.049), AssetFill::default());
    assert_eq!(cash, 10_000.0);
    assert_eq!(buy_phase(&p, &mut pos, &mut cash, 10.0, 0.05).qty, 5.0);
    assert_eq!(sell_phase(&p, &mut pos, &mut cash, 10.0, -0.04), AssetFill::default());
    assert_eq!(pos.holding, 5.0);
}

#[test]
fn trailing_stop_sells_everything_below_the_high_water_mark() {
    let p = ExecParams { trailing_stop: 0.1, ..params() };
    let (mut pos, mut cash) = (Position::default(), 10_000.0);
    buy_phase(&p, &mut pos, &mut cash, 100.0, 0.2);
    assert_eq!(pos.high_water, 100.0);
    for price in [110.0, 120.0, 115.0, 108.5] {
        assert_eq!(sell_phase(&p, &mut pos, &mut cash, price, 0.0), AssetFill::default(), "at {price}");
    }
    assert_eq!(pos.high_water, 120.0);
    // 120 x 0.9 = 108: stopped, whatever the action says.
    let f = sell_phase(&p, &mut pos, &mut cash, 108.0, 1.0);
    assert!(f.stopped);
    assert_eq!(f.qty, -20.0);
    assert_eq!(pos.holding, 0.0);
}

#[test]
fn cooldown_refuses_buys_for_n_bars_after_a_stop_out() {
    let p = ExecParams { trailing_stop: 0.05, cooldown_bars: 2, ..params() };
    let (mut pos, mut cash) = (Position::default(), 10_000.0);
    buy_phase(&p, &mut pos, &mut cash, 100.0, 0.1);
    assert!(sell_phase(&p, &mut pos, &mut cash, 90.0, 0.0).stopped);
    // The stop bar and the next two bars take no buys; the third does.
    assert_eq!(buy_phase(&p, &mut pos, &mut cash, 90.0, 1.0), AssetFill::default());
    for bar in 1..=2 {
        sell_phase(&p, &mut pos, &mut cash, 90.0, 0.0);
        assert_eq!(buy_phase(&p, &mut pos, &mut cash, 90.0, 1.0), AssetFill::default(), "bar {bar}");
    }
    sell_phase(&p, &mut pos, &mut cash, 90.0, 0.0);
    assert!(buy_phase(&p, &mut pos, &mut cash, 90.0, 0.1).qty > 0.0);
}

#[test]
fn entry_is_the_average_price_and_high_water_restarts_on_a_new_entry() {
    let p = ExecParams { fee_bps: 0.0, ..params() };
    let (mut pos, mut cash) = (Position::default(), 100_000.0);
    buy_phase(&p, &mut pos, &mut cash, 100.0, 0.1);
    buy_phase(&p, &mut pos, &mut cash, 130.0, 0.3);
    assert!(close(pos.entry, (1_000.0 + 3_900.0) / 40.0));
    assert_eq!(pos.high_water, 130.0);
    sell_phase(&p, &mut pos, &mut cash, 90.0, -1.0);
    buy_phase(&p, &mut pos, &mut cash, 80.0, 0.1);
    assert_eq!((pos.entry, pos.high_water), (80.0, 80.0));
}

#[test]
fn liquidation_sells_everything_and_counts_down_the_cooldown() {
    let p = params();
    let mut pos = Position { holding: 7.0, entry: 9.0, high_water: 12.0, cooldown: 2 };
    let mut cash = 0.0;
    let f = liquidate(&p, &mut pos, &mut cash, 10.0);
    assert_eq!(f.qty, -7.0);
    assert!(close(cash, 70.0 * 0.999));
    assert_eq!(pos, Position { cooldown: 1, ..Position::default() });
}

mod props {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(64))]
        /// Over any price path and actions: cash and holdings never go negative, and at the trade price
        /// equity only loses what fees and slippage take (the accounting creates and destroys nothing).
        #[test]
        fn trades_conserve_equity_up_to_fees_and_slippage(
            moves in prop::collection::vec((-0.1f64..0.1, -1.0f64..1.0, -1.0f64..1.0), 1..120),
            fee_bps in 0.0f64..50.0,
            slippage_bps in 0.0f64..50.0,
            integer_units in any::<bool>(),
            stop in prop::option::of(0.01f64..0.2),
        ) {
            let p = ExecParams {
                max_trade: 50.0, min_order: 1.0, fee_bps, slippage_bps, integer_units,
                trailing_stop: stop.unwrap_or(0.0), cooldown_bars: 2, cash_cap_ignores_fees: false,
            };
            let mut pos = [Position::default(); 2];
            let mut cash = 5_000.0;
            let mut prices = [40.0, 75.0];
            for (dp, a0, a1) in moves {
                prices[0] *= 1.0 + dp;
                prices[1] *= 1.0 - dp / 2.0;
                let equity = |cash: f64, pos: &[Position; 2]| cash + pos[0].holding * prices[0] + pos[1].holding * prices[1];
                let before = equity(cash, &pos);
                let mut fills = Vec::new();
                for (k, a) in [a0, a1].into_iter().enumerate() {
                    fills.push((k, sell_phase(&p, &mut pos[k], &mut cash, prices[k], a)));
                }
                for (k, a) in [a0, a1].into_iter().enumerate() {
                    fills.push((k, buy_phase(&p, &mut pos[k], &mut cash, prices[k], a)));
                }
                let cost: f64 = fills.iter().map(|(k, f)| f.fee + f.qty.abs() * prices[*k] * slippage_bps * 1e-4).sum();
                let after = equity(cash, &pos);
                prop_assert!(cash >= 0.0 && pos.iter().all(|q| q.holding >= 0.0), "cash {cash}, {pos:?}");
                prop_assert!((before - cost - after).abs() <= 1e-9 * before.abs().max(1.0), "{before} - {cost} != {after}");
            }
        }
    }
}
