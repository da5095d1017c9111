//! The simulated broker as the run loop's venue (`engine::drive::Venue`): it takes the engine's orders, and
//! at each moment's close fills what it holds through the shared execution rule, exactly as the env
//! steps, and answers as a live broker would: the trade updates, then its snapshot as a reconciliation.
//! Orders decided on bar t fill at bar t+1's close. Prices are the env's (closes as f32). `moments` turns
//! aligned stored bars into the loop's moments.

use super::metrics::Activity;
use crate::broker::{SimBroker, SimError};
use crate::domain::{Bar, OrderStatus, Symbol};
use crate::domain::{BrokerOrder, Fill, OrderUpdate, UpdateKind};
use crate::engine::drive::{CommandSink, Moment, Refused, Venue};
use crate::engine::{BrokerSnapshot, Command, Event};
use chrono::{DateTime, Utc};
use rust_decimal::Decimal;

/// The curve and the activity of one simulated run.
#[derive(Debug, Clone, Default)]
#[cfg(test)]
pub(crate) struct SimRun {
    /// Equity after each bar's fills, from bar `start` on.
    pub curve: Vec<(DateTime<Utc>, f64)>,
    pub activity: Activity,
}

#[derive(Debug, thiserror::Error)]
pub(crate) enum SimRunError {
    #[error(transparent)]
    Sim(#[from] SimError),
    #[error("bar {day} of {symbol} is at {got}, {first} has {want}: the bars are not aligned")]
    Misaligned { day: usize, symbol: Symbol, got: DateTime<Utc>, first: Symbol, want: DateTime<Utc> },
}

/// The moments of `bars` (one aligned vector per symbol, the engine's symbol order): bar `d` of every
/// symbol at once; an error where the symbols' bars do not line up.
pub(crate) fn moments(bars: &[Vec<Bar>]) -> impl Iterator<Item = Result<Moment, SimRunError>> + '_ {
    let days = bars.first().map_or(0, |b| b.len());
    (0..days).map(move |d| {
        let t = bars[0][d].t;
        for b in bars {
            if b.len() != days || b[d].t != t {
                let got = b.get(d).map_or(t, |x| x.t);
                let (symbol, first) = (b[0].symbol.clone(), bars[0][0].symbol.clone());
                return Err(SimRunError::Misaligned { day: d, symbol, got, first, want: t });
            }
        }
        Ok(Moment { index: d, t, bars: bars.iter().map(|b| b[d].clone()).collect() })
    })
}

/// The simulated broker and the fills' activity, as the loop's venue.
pub(crate) struct SimVenue<'a> {
    pub sim: &'a mut SimBroker,
    pub activity: &'a mut Activity,
    /// Each order's status at the last close (for the daemon's metrics).
    pub statuses: Vec<OrderStatus>,
}

impl CommandSink for SimVenue<'_> {
    /// Orders wait for the next close. A cancel or a reconciliation asks nothing of the simulated
    /// broker: its day orders all close at the next bar, and it answers every close with its snapshot.
    fn offer(&mut self, c: Command) -> Result<(), Refused> {
        if let Command::Submit(o) = c {
            self.sim.queue(o);
        }
        Ok(())
    }

    fn wait(&mut self, c: Command) -> Result<(), Command> {
        self.offer(c).map_err(|r| match r {
            Refused::Closed(c) | Refused::Full(c) => c,
        })
    }
}

impl Venue for SimVenue<'_> {
    type Error = SimRunError;

    fn close(&mut self, m: &Moment) -> Result<Vec<Event>, SimRunError> {
        let prices: Vec<(Symbol, f64)> = m.bars.iter().map(|b| (b.symbol.clone(), f64::from(b.c as f32))).collect();
        let snap = fill_pending(self.sim, &prices, m.t, self.activity)?;
        self.statuses = snap.orders.iter().map(|o| o.status).collect();
        Ok(answer(snap, m.t))
    }
}

/// One step of the simulated broker: the orders it holds (decided on the previous bar) fill at these
/// prices through the execution rule; returns the broker's view for the engine's reconciliation, and adds
/// the fills to `activity`.
pub(crate) fn fill_pending(
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
pub(crate) fn answer(snap: BrokerSnapshot, t: DateTime<Utc>) -> Vec<Event> {
    let mut events = Vec::new();
    for o in &snap.orders {
        let held = snap.positions.iter().find(|(s, _)| *s == o.symbol).map_or(Decimal::ZERO, |p| p.1);
        events.extend(trade_updates(o, held, t).into_iter().map(|u| Event::Order(Box::new(u))));
    }
    events.push(Event::Reconciled(Box::new(snap)));
    events
}

/// What Alpaca's trade_updates would say about a simulated day order: a fill (partial, then the rest
/// canceled) or a cancel when the execution rule dropped it.
pub(crate) fn trade_updates(o: &BrokerOrder, position_after: Decimal, t: DateTime<Utc>) -> Vec<OrderUpdate> {
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
