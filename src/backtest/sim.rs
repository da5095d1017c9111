//! The backtest loop: the Engine over aligned stored bars with the `SimBroker`. Orders decided on bar t
//! fill at bar t+1's close through the shared execution rule, exactly as the env steps. After each bar's
//! fills the broker's view (orders with their fills, positions, cash) reaches the engine as a
//! reconciliation, as a live broker's would; then the bar itself. Prices are the env's (closes as f32).

use super::metrics::Activity;
use crate::broker::{SimBroker, SimError};
use crate::domain::{Bar, OrderStatus, Symbol};
use crate::domain::{BrokerOrder, Fill, OrderUpdate, UpdateKind};
use crate::engine::Core;
use crate::engine::{BrokerSnapshot, Command, Engine, Event, ManualClock};
use chrono::{DateTime, Utc};
use rust_decimal::Decimal;

/// The curve and the activity of one simulated run.
#[derive(Debug, Clone, Default)]
pub struct SimRun {
    /// Equity after each bar's fills, from bar `start` on.
    pub curve: Vec<(DateTime<Utc>, f64)>,
    pub cash: Vec<f64>,
    pub activity: Activity,
}

#[derive(Debug, thiserror::Error)]
pub enum SimRunError {
    #[error(transparent)]
    Sim(#[from] SimError),
    #[error("bar {day} of {symbol} is at {got}, {first} has {want}: the bars are not aligned")]
    Misaligned { day: usize, symbol: Symbol, got: DateTime<Utc>, first: Symbol, want: DateTime<Utc> },
}

/// Runs `engine` over `bars` (one aligned vector per symbol, the engine's symbol order), recording the
/// curve from bar `start` on.
pub fn simulate(
    engine: &mut Engine,
    clock: &ManualClock,
    sim: &mut SimBroker,
    bars: &[Vec<Bar>],
    start: usize,
) -> Result<SimRun, SimRunError> {
    let days = bars.first().map_or(0, |b| b.len());
    let mut run = SimRun::default();
    for d in 0..days {
        let t = bars[0][d].t;
        for b in bars {
            if b.len() != days || b[d].t != t {
                let got = b.get(d).map_or(t, |x| x.t);
                let (symbol, first) = (b[0].symbol.clone(), bars[0][0].symbol.clone());
                return Err(SimRunError::Misaligned { day: d, symbol, got, first, want: t });
            }
        }
        clock.set(t);
        let prices: Vec<(Symbol, f64)> = bars.iter().map(|b| (b[d].symbol.clone(), f64::from(b[d].c as f32))).collect();
        let snap = fill_pending(sim, &prices, t, &mut run.activity)?;
        deliver(engine, snap, t);
        if d >= start {
            let eq = sim.equity();
            run.curve.push((t, eq));
            run.cash.push(sim.cash());
            if eq > 0.0 {
                run.activity.exposure_sum += (eq - sim.cash()) / eq;
            }
        }
        for b in bars {
            for c in engine.process(Event::Bar(b[d].clone())) {
                if let Command::Submit(o) = c {
                    sim.queue(o);
                }
            }
        }
    }
    Ok(run)
}

/// One step of the simulated broker: the orders it holds (decided on the previous bar) fill at these
/// prices through the execution rule; returns the broker's view for the engine's reconciliation, and adds
/// the fills to `activity`.
pub fn fill_pending(
    sim: &mut SimBroker,
    prices: &[(Symbol, f64)],
    t: DateTime<Utc>,
    activity: &mut Activity,
) -> Result<BrokerSnapshot, SimError> {
    let (snap, fills) = sim.fill_pending(prices, t)?;
    for f in &fills {
        activity.traded_notional += f.notional;
        activity.fees += f.fee;
        activity.trades += 1;
    }
    Ok(snap)
}
/// The broker's trade updates for each order of `snap` (as Alpaca's trade_updates stream would send
/// them), then the snapshot itself as a reconciliation, which then finds nothing to adopt.
pub fn deliver(engine: &mut Engine, snap: BrokerSnapshot, t: DateTime<Utc>) {
    for o in &snap.orders {
        let held = snap.positions.iter().find(|(s, _)| *s == o.symbol).map_or(Decimal::ZERO, |p| p.1);
        for u in trade_updates(o, held, t) {
            engine.process(Event::Order(Box::new(u)));
        }
    }
    engine.process(Event::Reconciled(Box::new(snap)));
}

/// What Alpaca's trade_updates would say about a simulated day order: a fill (partial, then the rest
/// canceled) or a cancel when the execution rule dropped it.
pub fn trade_updates(o: &BrokerOrder, position_after: Decimal, t: DateTime<Utc>) -> Vec<OrderUpdate> {
    let fill = (o.filled_qty > Decimal::ZERO).then(|| Fill {
        price: o.filled_avg_price.unwrap_or_default(),
        qty: o.filled_qty,
        position_qty: position_after,
        execution_id: Some(format!("sim-{}", o.raw_client_order_id)),
    });
    let update = |kind, order: BrokerOrder, fill| OrderUpdate { kind, order, time: Some(t), fill };
    match (fill, o.status) {
        (Some(f), OrderStatus::Filled) => vec![update(UpdateKind::Fill, o.clone(), Some(f))],
        (Some(f), _) => {
            let partial = BrokerOrder {
                status: OrderStatus::PartiallyFilled,
                broker_status: "partially_filled".into(),
                ..o.clone()
            };
            vec![update(UpdateKind::PartialFill, partial, Some(f)), update(UpdateKind::Canceled, o.clone(), None)]
        }
        (None, _) => vec![update(UpdateKind::Canceled, o.clone(), None)],
    }
}
