//! The backtest loop: the Engine over aligned stored bars with the `SimBroker`. Orders decided on bar t
//! fill at bar t+1's close through the shared execution rule, exactly as the env steps. After each bar's
//! fills the broker's view (orders with their fills, positions, cash) reaches the engine as a
//! reconciliation, as a live broker's would; then the bar itself. Prices are the env's (closes as f32).

use super::metrics::Activity;
use crate::alpaca::event::BrokerOrder;
use crate::broker::{SimBroker, SimError, SimOrder};
use crate::domain::{Bar, OrderId, OrderRequest, OrderStatus, Symbol};
use crate::engine::{BrokerSnapshot, Command, Engine, Event, ManualClock};
use crate::live::Core;
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
    let mut pending: Vec<OrderRequest> = Vec::new();
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
        let orders: Vec<SimOrder> =
            pending.iter().map(|r| SimOrder { symbol: r.symbol.clone(), side: r.side, qty: qty_f64(r) }).collect();
        let fills = sim.step(&prices, &orders)?;
        let mut snap = BrokerSnapshot {
            cash: dec(sim.cash()),
            equity: dec(sim.equity()),
            taken_at: Some(t),
            ..Default::default()
        };
        for r in pending.drain(..) {
            let f = fills.iter().find(|f| f.symbol == r.symbol && !f.stopped);
            let filled = f
                .map_or(0.0, |f| if (f.qty > 0.0) == (r.side == crate::domain::Side::Buy) { f.qty.abs() } else { 0.0 });
            snap.orders.extend(broker_order(&r, filled, f.map_or(0.0, |f| f.price), t));
        }
        for f in &fills {
            run.activity.traded_notional += f.notional;
            run.activity.fees += f.fee;
            run.activity.trades += 1;
        }
        for (s, _) in &prices {
            let h = sim.holding(s);
            if h != 0.0 {
                snap.positions.push((s.clone(), dec(h)));
            }
        }
        engine.process(Event::Reconciled(Box::new(snap)));
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
                    pending.push(o.into_inner());
                }
            }
        }
    }
    Ok(run)
}

fn dec(x: f64) -> Decimal {
    Decimal::from_f64_retain(x).unwrap_or_default()
}

fn qty_f64(r: &OrderRequest) -> f64 {
    use rust_decimal::prelude::ToPrimitive;
    r.qty.get().to_f64().unwrap_or(0.0)
}

/// The simulated broker's report of a day order: filled (possibly in part, the rest canceled), or
/// canceled unfilled when the rule dropped it.
fn broker_order(r: &OrderRequest, filled: f64, price: f64, t: DateTime<Utc>) -> Option<BrokerOrder> {
    let full = filled >= qty_f64(r);
    Some(BrokerOrder {
        id: OrderId::new(&format!("sim-{}", r.client_order_id)).ok()?,
        client_order_id: Some(r.client_order_id.clone()),
        raw_client_order_id: r.client_order_id.to_string(),
        symbol: r.symbol.clone(),
        side: r.side,
        qty: Some(r.qty.get()),
        notional: None,
        filled_qty: dec(filled),
        filled_avg_price: (filled > 0.0).then(|| dec(price)),
        limit_price: None,
        status: if full { OrderStatus::Filled } else { OrderStatus::Canceled },
        broker_status: if full { "filled" } else { "canceled" }.into(),
        created_at: Some(t),
    })
}
