//! Risk checks: each refusal with its reason code, risk-reducing sells never blocked by exposure, a
//! property test that an approved buy never breaches a limit, the trailing stop against the env's rule,
//! and the kill switch (trips exactly at the limit, persisted across a store reopen, cleared).

use super::*;
use crate::config::{KillSwitchAction, RiskConfig};
use crate::domain::{ClientOrderId, OrderRequest, OrderTif, Qty, Side, Symbol, Timeframe};
use crate::exec::{self, ExecParams, Position};
use crate::store::Store;
use chrono::{DateTime, TimeZone, Utc};
use chrono_tz::America::New_York;
use proptest::prelude::*;
use rust_decimal::Decimal;
use std::collections::{BTreeMap, HashMap};
use std::str::FromStr;
use std::time::Duration;

fn sym(s: &str) -> Symbol {
    Symbol::new(s).unwrap()
}

fn d(s: &str) -> Decimal {
    Decimal::from_str(s).unwrap()
}

/// Monday 2024-03-11 at the given New York time.
fn ny(h: u32, m: u32) -> DateTime<Utc> {
    New_York.with_ymd_and_hms(2024, 3, 11, h, m, 0).single().unwrap().to_utc()
}

fn cfg() -> RiskConfig {
    RiskConfig {
        max_position_pct: 0.25,
        max_gross_exposure_pct: 1.0,
        max_order_notional: d("10000"),
        daily_loss_limit_pct: 0.05,
        kill_switch: KillSwitchAction::Halt,
        max_bar_age: Duration::from_secs(120),
        extended_hours: false,
        max_working_orders: 1,
    }
}

fn open_checks(dir: &std::path::Path, cfg: &RiskConfig, exec: &ExecParams) -> (Store, RiskChecks) {
    let store = Store::open(dir).unwrap();
    let checks = RiskChecks::open(cfg, exec, &store).unwrap();
    (store, checks)
}

fn req(symbol: &str, side: Side, qty: &str, price: f64) -> OrderRequest {
    let s = sym(symbol);
    OrderRequest {
        client_order_id: ClientOrderId::derive("t", &s, ny(10, 0), 0),
        symbol: s,
        side,
        qty: Qty::new(d(qty)).unwrap(),
        tif: OrderTif::Day,
        bar_time: ny(10, 0),
        ref_price: price,
        why: crate::domain::OrderWhy::Model,
    }
}

struct Ctx {
    positions: BTreeMap<Symbol, Holding>,
    assets: HashMap<Symbol, AssetRules>,
    equity: Decimal,
    cash: Decimal,
    now: DateTime<Utc>,
    tf: Timeframe,
    finite: bool,
}

impl Ctx {
    fn new() -> Self {
        Ctx {
            positions: BTreeMap::new(),
            assets: HashMap::new(),
            equity: d("100000"),
            cash: d("100000"),
            now: ny(10, 1),
            tf: Timeframe::MIN1,
            finite: true,
        }
    }

    fn hold(mut self, s: &str, qty: &str, price: f64) -> Self {
        self.positions.insert(sym(s), Holding { qty: d(qty), price });
        self
    }

    fn get(&self) -> RiskContext<'_> {
        RiskContext {
            equity: self.equity,
            cash: self.cash,
            positions: &self.positions,
            bar_time: ny(10, 1),
            timeframe: self.tf,
            now: self.now,
            inputs_finite: self.finite,
            assets: &self.assets,
        }
    }
}

fn reason(r: Result<RiskApproved<OrderRequest>, Refusal>) -> &'static str {
    match r {
        Ok(_) => "approved",
        Err(e) => {
            assert!(!e.to_string().is_empty());
            e.reason()
        }
    }
}

#[test]
fn each_limit_refuses_with_its_reason_and_an_order_within_all_passes() {
    let dir = tempfile::tempdir().unwrap();
    let (_s, rc) = open_checks(dir.path(), &cfg(), &ExecParams::default());
    let c = Ctx::new();
    assert_eq!(reason(rc.check(req("AAPL", Side::Buy, "10", 100.0), &c.get())), "approved");
    assert_eq!(reason(rc.check(req("AAPL", Side::Buy, "101", 100.0), &c.get())), "max_order_notional");
    // 25% of 100k = 25k: 200 held + 60 bought at 100 = 26k.
    let c = Ctx::new().hold("AAPL", "200", 100.0);
    assert_eq!(reason(rc.check(req("AAPL", Side::Buy, "60", 100.0), &c.get())), "max_position");
    assert_eq!(reason(rc.check(req("AAPL", Side::Buy, "50", 100.0), &c.get())), "approved");
    // Gross: 4 × 24k elsewhere + 5k = 101k > 100k, though the order and the position are within limits.
    let mut c = Ctx::new();
    for s in ["A", "B", "C", "D"] {
        c = c.hold(s, "240", 100.0);
    }
    assert_eq!(reason(rc.check(req("AAPL", Side::Buy, "50", 100.0), &c.get())), "max_gross_exposure");
    let mut c = Ctx::new();
    c.cash = d("1000");
    assert_eq!(reason(rc.check(req("AAPL", Side::Buy, "11", 100.0), &c.get())), "insufficient_cash");
    c.equity = Decimal::ZERO;
    assert_eq!(reason(rc.check(req("AAPL", Side::Buy, "1", 100.0), &c.get())), "no_equity");
}

#[test]
fn inputs_staleness_hours_and_asset_rules() {
    let dir = tempfile::tempdir().unwrap();
    let (_s, rc) = open_checks(dir.path(), &cfg(), &ExecParams::default());
    let mut c = Ctx::new();
    c.finite = false;
    assert_eq!(reason(rc.check(req("AAPL", Side::Buy, "1", 100.0), &c.get())), "non_finite");
    let c = Ctx::new();
    assert_eq!(reason(rc.check(req("AAPL", Side::Buy, "1", f64::NAN), &c.get())), "non_finite");
    let c = Ctx::new().hold("MSFT", "1", f64::INFINITY);
    assert_eq!(reason(rc.check(req("AAPL", Side::Buy, "1", 100.0), &c.get())), "non_finite");
    // Bar closed 10:01, max age 120 s: fine at 10:03, stale at 10:03:01.
    let mut c = Ctx::new();
    c.now = ny(10, 3);
    assert_eq!(reason(rc.check(req("AAPL", Side::Buy, "1", 100.0), &c.get())), "approved");
    c.now = ny(10, 3) + chrono::Duration::seconds(1);
    assert_eq!(reason(rc.check(req("AAPL", Side::Buy, "1", 100.0), &c.get())), "stale_bar");
    // Market hours: intraday stock at 09:00 refused; crypto fine; a daily bar is not checked.
    let mut rc_old = cfg();
    rc_old.max_bar_age = Duration::from_secs(86_400 * 4);
    let dir2 = tempfile::tempdir().unwrap();
    let (_s2, rc2) = open_checks(dir2.path(), &rc_old, &ExecParams::default());
    let mut c = Ctx::new();
    c.now = ny(9, 0);
    let early = |c: &Ctx, r| reason(rc2.check(r, &c.get()));
    assert_eq!(early(&c, req("AAPL", Side::Buy, "1", 100.0)), "market_closed");
    assert_eq!(early(&c, req("BTC/USD", Side::Buy, "0.01", 60000.0)), "approved");
    c.tf = Timeframe::DAY1;
    assert_eq!(early(&c, req("AAPL", Side::Buy, "1", 100.0)), "approved");
    // On the exchange calendar: Independence Day 2024 (a Thursday) is closed all day, the 3rd closes at
    // 13:00, where Alpaca would queue the order for the next open.
    let at = |mo, d, h, mi| New_York.with_ymd_and_hms(2024, mo, d, h, mi, 0).single().unwrap().to_utc();
    let mut rc_year = cfg();
    rc_year.max_bar_age = Duration::from_secs(86_400 * 365);
    let dir3 = tempfile::tempdir().unwrap();
    let (_s3, rc3) = open_checks(dir3.path(), &rc_year, &ExecParams::default());
    let mut c = Ctx::new();
    for (now, want) in
        [(at(7, 4, 11, 0), "market_closed"), (at(7, 3, 13, 30), "market_closed"), (at(7, 3, 12, 30), "approved")]
    {
        c.now = now;
        assert_eq!(reason(rc3.check(req("AAPL", Side::Buy, "1", 100.0), &c.get())), want, "at {now}");
    }
    // Asset rules: whole units for a non-fractionable stock (refused, not rounded), minimum size, tradable.
    let mut c = Ctx::new();
    assert_eq!(reason(rc.check(req("AAPL", Side::Buy, "1.5", 100.0), &c.get())), "not_fractionable");
    let rules = AssetRules { fractionable: true, min_order_size: Some(d("0.5")), ..AssetRules::assumed(&sym("AAPL")) };
    c.assets.insert(sym("AAPL"), rules);
    assert_eq!(reason(rc.check(req("AAPL", Side::Buy, "1.5", 100.0), &c.get())), "approved");
    assert_eq!(reason(rc.check(req("AAPL", Side::Buy, "0.25", 100.0), &c.get())), "below_min_order");
    c.assets.get_mut(&sym("AAPL")).unwrap().tradable = false;
    assert_eq!(reason(rc.check(req("AAPL", Side::Buy, "1", 100.0), &c.get())), "not_tradable");
}

#[test]
fn risk_reducing_sells_pass_every_exposure_limit_and_shorts_do_not() {
    let dir = tempfile::tempdir().unwrap();
    let (_s, rc) = open_checks(dir.path(), &cfg(), &ExecParams::default());
    // Far over every limit: 5,000 units at 100 = 500k on 100k equity, and the sell itself is 200k notional.
    let mut c = Ctx::new().hold("AAPL", "5000", 100.0).hold("MSFT", "5000", 100.0);
    c.cash = Decimal::ZERO;
    c.equity = d("1");
    assert_eq!(reason(rc.check(req("AAPL", Side::Sell, "2000", 100.0), &c.get())), "approved");
    assert_eq!(reason(rc.check(req("AAPL", Side::Sell, "5000", 100.0), &c.get())), "approved");
    assert_eq!(reason(rc.check(req("AAPL", Side::Sell, "5001", 100.0), &c.get())), "would_short");
    assert_eq!(reason(rc.check(req("IBM", Side::Sell, "1", 100.0), &c.get())), "would_short");
}

#[test]
fn crypto_orders_keep_to_the_pairs_increment_and_minimum_value() {
    let dir = tempfile::tempdir().unwrap();
    let (_s, rc) = open_checks(dir.path(), &cfg(), &ExecParams::default());
    let mut c = Ctx::new().hold("BTC/USD", "0.5", 30_000.0);
    let rules = AssetRules {
        min_order_size: Some(d("0.0001")),
        min_trade_increment: Some(d("0.0001")),
        ..AssetRules::assumed(&sym("BTC/USD"))
    };
    c.assets.insert(sym("BTC/USD"), rules);
    assert_eq!(reason(rc.check(req("BTC/USD", Side::Buy, "0.0123", 30_000.0), &c.get())), "approved");
    assert_eq!(reason(rc.check(req("BTC/USD", Side::Buy, "0.01234", 30_000.0), &c.get())), "qty_increment");
    // Sells too: Alpaca would refuse them all the same.
    assert_eq!(reason(rc.check(req("BTC/USD", Side::Sell, "0.00015", 30_000.0), &c.get())), "qty_increment");
    // 0.0001 BTC at $5,000 is 50 cents: under Alpaca's $1 crypto minimum.
    assert_eq!(reason(rc.check(req("BTC/USD", Side::Sell, "0.0001", 5_000.0), &c.get())), "below_min_notional");
    assert_eq!(reason(rc.check(req("BTC/USD", Side::Sell, "0.5001", 30_000.0), &c.get())), "would_short");
}

#[test]
fn reason_codes_are_distinct_and_listed() {
    let mut seen = std::collections::HashSet::new();
    for r in Refusal::REASONS {
        assert!(seen.insert(r), "{r} twice");
    }
    let e = Refusal::Cooldown { symbol: sym("AAPL"), bars_left: 2 };
    assert!(Refusal::REASONS.contains(&e.reason()));
    assert!(e.to_string().contains("AAPL") && e.to_string().contains('2'));
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]
    /// Whatever the account, an approved buy keeps the order notional, the symbol's position and the gross
    /// exposure within their limits; an approved sell never goes short.
    #[test]
    fn an_approved_order_never_breaches_a_limit(
        held in 0u32..400, other in 0u32..1500, qty in 1u32..300, price in 1.0f64..500.0,
        other_price in 1.0f64..500.0, equity in 1_000u32..200_000, cash in 0u32..200_000, buy in any::<bool>(),
    ) {
        let dir = tempfile::tempdir().unwrap();
        let (_s, rc) = open_checks(dir.path(), &cfg(), &ExecParams::default());
        let mut c = Ctx::new()
            .hold("AAPL", &held.to_string(), price)
            .hold("MSFT", &other.to_string(), other_price);
        c.equity = Decimal::from(equity);
        c.cash = Decimal::from(cash);
        let side = if buy { Side::Buy } else { Side::Sell };
        let r = req("AAPL", side, &qty.to_string(), price);
        let p = context::dec(price).unwrap();
        if let Ok(a) = rc.check(r, &c.get()) {
            let q = a.qty.get();
            if buy {
                let l = rc.limits();
                prop_assert!(q * p <= l.max_order_notional);
                prop_assert!((Decimal::from(held) + q) * p <= l.max_position_pct * c.equity);
                let gross = (Decimal::from(held) + q) * p + Decimal::from(other) * context::dec(other_price).unwrap();
                prop_assert!(gross <= l.max_gross_exposure_pct * c.equity);
                prop_assert!(q * p <= c.cash);
            } else {
                prop_assert!(q <= Decimal::from(held));
            }
        } else if !buy {
            // A sell within the holding is only ever refused for going short.
            prop_assert!(qty > held);
        }
    }

    /// The tracker fires its stops on the same bars as the env's rule, and blocks buys on the same bars.
    #[test]
    fn trailing_stop_and_cooldown_match_the_env_rule(
        steps in proptest::collection::vec((0.8f64..1.2, any::<bool>()), 1..80),
        stop in 0.02f64..0.3, cooldown in 0u32..5,
    ) {
        let p = ExecParams {
            trailing_stop: stop, cooldown_bars: cooldown, fee_bps: 0.0, slippage_bps: 0.0,
            min_order: 0.0, integer_units: false, max_trade: 1.0, ..ExecParams::default()
        };
        let mut tracker = StopTracker::new(stop, cooldown);
        let (mut env_pos, mut cash) = (Position::default(), 1e12);
        let s = sym("AAPL");
        let mut price = 100.0;
        for (i, (mv, want_buy)) in steps.into_iter().enumerate() {
            price *= mv;
            let env_sell = exec::sell_phase(&p, &mut env_pos, &mut cash, price, 0.0);
            let ours = tracker.on_bar(&s, price);
            prop_assert_eq!(env_sell.stopped, ours.is_some(), "bar {}", i);
            if let Some(o) = &ours {
                prop_assert!((o.qty + env_sell.qty).abs() < 1e-9);
                tracker.on_fill(&s, Side::Sell, o.qty, price);
            }
            let action = if want_buy { 1.0 } else { 0.0 };
            let env_buy = exec::buy_phase(&p, &mut env_pos, &mut cash, price, action);
            let blocked = tracker.cooldown(&s) > 0;
            prop_assert_eq!(want_buy && !blocked, env_buy.qty > 0.0, "bar {}", i);
            if env_buy.qty > 0.0 {
                tracker.on_fill(&s, Side::Buy, env_buy.qty, price);
            }
            let t = tracker.position(&s);
            prop_assert!((t.holding - env_pos.holding).abs() < 1e-9);
            prop_assert!((t.high_water - env_pos.high_water).abs() < 1e-9 * price.max(1.0));
        }
    }
}

#[test]
fn a_stop_out_puts_the_symbol_in_cooldown_and_buys_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let exec = ExecParams { trailing_stop: 0.1, cooldown_bars: 2, ..ExecParams::default() };
    let (_s, mut rc) = open_checks(dir.path(), &cfg(), &exec);
    let s = sym("AAPL");
    assert!(rc.on_bar(&s, 100.0).is_none());
    rc.on_fill(&s, Side::Buy, 10.0, 100.0);
    assert!(rc.on_bar(&s, 120.0).is_none());
    let out = rc.on_bar(&s, 108.0).expect("10% below the 120 high-water mark");
    assert_eq!((out.qty, out.high_water), (10.0, 120.0));
    let c = Ctx::new();
    // The stop bar and the next two bars take no buys; the third does.
    assert_eq!(reason(rc.check(req("AAPL", Side::Buy, "1", 100.0), &c.get())), "cooldown");
    for _ in 0..2 {
        rc.on_bar(&s, 108.0);
        assert_eq!(reason(rc.check(req("AAPL", Side::Buy, "1", 100.0), &c.get())), "cooldown");
    }
    rc.on_bar(&s, 108.0);
    assert_eq!(reason(rc.check(req("AAPL", Side::Buy, "1", 100.0), &c.get())), "approved");
}

#[test]
fn the_kill_switch_trips_exactly_at_the_limit_and_stays_tripped_across_a_reopen() {
    let dir = tempfile::tempdir().unwrap();
    let exec = ExecParams::default();
    {
        let (_s, mut rc) = open_checks(dir.path(), &cfg(), &exec);
        assert!(rc.on_equity(ny(9, 30), d("100000")).unwrap().is_none());
        // 5% of 100,000 is 5,000: a loss of 4,999.99 does not trip, 5,000 does.
        assert!(rc.on_equity(ny(10, 0), d("95000.01")).unwrap().is_none());
        assert!(rc.kill_switch().is_none());
        assert_eq!(reason(rc.check(req("AAPL", Side::Buy, "1", 100.0), &Ctx::new().get())), "approved");
        let k = rc.on_equity(ny(10, 5), d("95000")).unwrap().expect("trips at exactly 5%");
        assert_eq!((k.open_equity, k.equity, k.loss_pct), (d("100000"), d("95000"), d("0.05")));
        assert_eq!(k.action, KillSwitchAction::Halt);
        // A recovery does not untrip it.
        assert!(rc.on_equity(ny(11, 0), d("101000")).unwrap().is_none());
        assert_eq!(reason(rc.check(req("AAPL", Side::Buy, "1", 100.0), &Ctx::new().get())), "kill_switch");
        // Under `halt` too, a sell that reduces a holding (a stop, a flatten) passes; nothing else does.
        let c = Ctx::new().hold("AAPL", "10", 100.0);
        assert_eq!(reason(rc.check(req("AAPL", Side::Sell, "10", 100.0), &c.get())), "approved", "halt");
        assert_eq!(reason(rc.check(req("AAPL", Side::Sell, "11", 100.0), &c.get())), "kill_switch", "not reducing");
    }
    // Reopened (a restart), with flatten configured now: still tripped, under the action it tripped with.
    let mut flatten = cfg();
    flatten.kill_switch = KillSwitchAction::Flatten;
    {
        let (_s, rc) = open_checks(dir.path(), &flatten, &exec);
        let k = rc.kill_switch().expect("still tripped after a restart");
        assert_eq!(k.tripped_at, ny(10, 5));
        assert_eq!(reason(rc.check(req("AAPL", Side::Buy, "1", 100.0), &Ctx::new().get())), "kill_switch");
        let c = Ctx::new().hold("AAPL", "10", 100.0);
        // Tripped under halt: reducing sells pass, but no flatten is planned.
        assert_eq!(reason(rc.check(req("AAPL", Side::Sell, "10", 100.0), &c.get())), "approved");
        assert!(rc.flatten_plan(&c.positions).is_empty());
    }
    let store = Store::open(dir.path()).unwrap();
    let cleared = clear_kill_switch(&store, "tester", ny(12, 0)).unwrap().expect("was tripped");
    assert_eq!(cleared.tripped_at, ny(10, 5));
    assert_eq!(stored_state(&store).unwrap(), (None, None));
    drop(store);
    let (_s, mut rc) = open_checks(dir.path(), &flatten, &exec);
    assert!(rc.kill_switch().is_none());
    // The day's opening equity starts again from the next figure after a clear.
    assert!(rc.on_equity(ny(12, 1), d("95000")).unwrap().is_none());
    let k = rc.on_equity(ny(12, 2), d("90250")).unwrap().expect("5% below 95,000");
    assert_eq!(k.action, KillSwitchAction::Flatten);
    let c = Ctx::new().hold("AAPL", "10", 100.0).hold("MSFT", "0", 50.0);
    assert_eq!(rc.flatten_plan(&c.positions), vec![(sym("AAPL"), d("10"))]);
    assert_eq!(reason(rc.check(req("AAPL", Side::Sell, "10", 100.0), &c.get())), "approved", "the flatten sell");
    assert_eq!(reason(rc.check(req("AAPL", Side::Buy, "1", 100.0), &c.get())), "kill_switch");
}

/// Issue 37: `risk clear` beside the running daemon clears the engine's own checks, on disk and in
/// memory, without a restart: orders pass again and the limit counts from the next figure.
#[test]
fn a_kill_switch_cleared_in_a_running_engine_lets_orders_through_at_once() {
    let dir = tempfile::tempdir().unwrap();
    let (store, mut rc) = open_checks(dir.path(), &cfg(), &ExecParams::default());
    assert!(rc.on_equity(ny(9, 30), d("100000")).unwrap().is_none());
    assert!(rc.on_equity(ny(10, 0), d("94000")).unwrap().is_some(), "6% down trips");
    assert_eq!(reason(rc.check(req("AAPL", Side::Buy, "1", 100.0), &Ctx::new().get())), "kill_switch");
    let cleared = rc.clear_kill("tester", ny(10, 30)).unwrap().expect("was tripped");
    assert_eq!(cleared.tripped_at, ny(10, 0));
    assert!(rc.kill_switch().is_none());
    assert_eq!(stored_state(&store).unwrap(), (None, None), "cleared on disk too");
    assert_eq!(reason(rc.check(req("AAPL", Side::Buy, "1", 100.0), &Ctx::new().get())), "approved");
    // The same loss does not trip it again: the day's reference is the next figure.
    assert!(rc.on_equity(ny(10, 31), d("94000")).unwrap().is_none());
    assert!(rc.on_equity(ny(10, 32), d("89300")).unwrap().is_some(), "5% below 94,000");
    assert_eq!(rc.clear_kill("tester", ny(11, 0)).unwrap().map(|k| k.tripped_at), Some(ny(10, 32)));
    assert_eq!(rc.clear_kill("tester", ny(11, 1)).unwrap(), None, "nothing left to clear");
}

#[test]
fn a_new_trading_day_takes_a_new_opening_equity() {
    let dir = tempfile::tempdir().unwrap();
    let (_s, mut rc) = open_checks(dir.path(), &cfg(), &ExecParams::default());
    assert!(rc.on_equity(ny(10, 0), d("100000")).unwrap().is_none());
    assert!(rc.on_equity(ny(15, 0), d("96000")).unwrap().is_none());
    // Next day (Tuesday) opens at 96,000: 4,800 is its limit.
    let tue = ny(10, 0) + chrono::Duration::days(1);
    assert!(rc.on_equity(tue, d("96000")).unwrap().is_none());
    assert!(rc.on_equity(tue + chrono::Duration::hours(1), d("91200.01")).unwrap().is_none());
    assert!(rc.on_equity(tue + chrono::Duration::hours(2), d("91200")).unwrap().is_some());
}

#[test]
fn the_day_is_measured_from_the_previous_close_and_a_restart_keeps_it() {
    let dir = tempfile::tempdir().unwrap();
    let exec = ExecParams::default();
    {
        let (_s, mut rc) = open_checks(dir.path(), &cfg(), &exec);
        assert!(rc.on_equity(ny(10, 0), d("100000")).unwrap().is_none());
        // Monday closes at 96,000 (a 4% loss on the day: under the 5% limit).
        assert!(rc.on_equity(ny(16, 0), d("96000")).unwrap().is_none());
    }
    // Restarted overnight: Tuesday's first figure (a daily bar's, say) is 91,200, 5% below Monday's close.
    // Taken as the day's own opening figure, it could never trip on the day's only figure.
    let (s, mut rc) = open_checks(dir.path(), &cfg(), &exec);
    let tue = ny(16, 0) + chrono::Duration::days(1);
    let k = rc.on_equity(tue, d("91200")).unwrap().expect("5% below the previous close");
    assert_eq!((k.open_equity, k.equity, k.loss_pct), (d("96000"), d("91200"), d("0.05")));
    let (_, day) = stored_state(&s).unwrap();
    let day = day.expect("the day's reference is stored");
    assert_eq!((day.equity, day.at), (d("96000"), ny(16, 0)));
}

#[test]
fn a_figure_stamped_before_the_last_counts_as_of_the_last() {
    let dir = tempfile::tempdir().unwrap();
    let (_s, mut rc) = open_checks(dir.path(), &cfg(), &ExecParams::default());
    // Monday's minutes, then Monday's day bar, stamped at the day's start but arriving at its close.
    assert!(rc.on_equity(ny(10, 0), d("100000")).unwrap().is_none());
    assert!(rc.on_equity(ny(15, 59), d("96000")).unwrap().is_none());
    let k = rc.on_equity(ny(0, 0), d("95000")).unwrap().expect("counted on Monday: 5% below its reference");
    assert_eq!((k.open_equity, k.tripped_at), (d("100000"), ny(15, 59)));
}
