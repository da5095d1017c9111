//! The live daemon's chores, on a thread of their own beside the trading thread, once a second: the
//! retrain schedule on the wall clock, retrain progress and outcomes (a promoted model is loaded on a
//! thread of its own and reaches the engine as `Update::Model`), the control socket's requests (pause,
//! resume and flatten reach the engine as events; status is answered from the last view), SIGHUP (new
//! risk limits as `Update::Limits`), a refreshed exchange calendar (`Update::Calendar`), the equity curve,
//! and the status report, `/metrics` and the dashboard, which read the registry and the runs from disk.
//!
//! The trading thread only trades: after each event it leaves a `TradingView` here (its engine's state
//! from memory), and it takes what this thread sends between two events (`Core::inbox`).

use super::calendar_source::CalendarSlot;
use super::host::{EngineLink, Host};
use super::retrainer::RunPipeline;
use crate::domain::Symbol;
use crate::engine::{Command, Event, LoadedModel, ModelSwap, ProcessClock, Update};
use crate::live::view::TradingView;
use crate::store::Store;
use chrono::{DateTime, Utc};
use std::time::Duration;
use tokio::sync::{mpsc, watch};
use tokio_util::sync::CancellationToken;

/// How often the chores run.
pub(crate) const EVERY: Duration = Duration::from_secs(1);

/// The engine's inbox, as the chores' `EngineLink`: every action is an event for the trading thread.
pub(crate) struct Inbox(pub mpsc::Sender<Event>);

impl EngineLink for Inbox {
    fn send(&mut self, ev: Event) -> Vec<Command> {
        // A plain thread, not the runtime's: waiting for room in the queue blocks only the chores.
        if self.0.blocking_send(ev).is_err() {
            log::debug!("chores: the engine has stopped; event dropped");
        }
        Vec::new()
    }

    fn swap(&mut self, load: Box<dyn FnOnce() -> Option<LoadedModel> + Send>) {
        let tx = self.0.clone();
        let spawned = std::thread::Builder::new().name("tradebot-load".into()).spawn(move || {
            if let Some(m) = load()
                && tx.blocking_send(Event::Update(Update::Model(ModelSwap::new(m)))).is_err()
            {
                log::debug!("chores: the engine stopped before its new model arrived");
            }
        });
        if let Err(e) = spawned {
            log::error!("chores: cannot start a thread to load the new model ({e}); the previous model keeps trading");
        }
    }
}

/// The equal-weight buy-and-hold benchmark beside the equity curve: from the first complete bar's equity
/// and closes.
#[derive(Default)]
struct Curve {
    benchmark: Option<(f64, Vec<f64>)>,
    last_point: Option<DateTime<Utc>>,
}

impl Curve {
    /// A new equity point when the engine's last bar moved on (all symbols' closes known).
    fn point<P: RunPipeline>(&mut self, host: &mut Host<P>, view: &TradingView) {
        let closes: &[(Symbol, f64)] = &view.engine.closes;
        let Some(t) = view.last_bar.values().max().copied() else { return };
        if self.last_point == Some(t) || closes.is_empty() || closes.iter().any(|(_, c)| *c <= 0.0) {
            return;
        }
        self.last_point = Some(t);
        let equity = view.engine.account.equity;
        let (e0, c0) = self.benchmark.get_or_insert_with(|| (equity, closes.iter().map(|(_, c)| *c).collect()));
        let growth = closes.iter().zip(c0.iter()).map(|((_, c), c0)| c / c0).sum::<f64>() / closes.len() as f64;
        host.equity_point(t, equity, *e0 * growth);
    }
}

/// Starts the chores' thread; it runs until `stop` is cancelled and returns the host (the retrainer in it
/// stops its child when dropped).
pub(crate) fn spawn<P: RunPipeline + Send + 'static>(
    mut host: Host<P>,
    views: watch::Receiver<TradingView>,
    mut engine: Inbox,
    calendar: CalendarSlot,
    account: Store,
    stop: CancellationToken,
) -> std::io::Result<std::thread::JoinHandle<Host<P>>> {
    host.account = Some(account.clone());
    std::thread::Builder::new().name("tradebot-chores".into()).spawn(move || {
        let stocks = host.config.market.symbols.iter().any(|s| !s.is_crypto());
        let mut curve = Curve::default();
        let mut ready = false;
        while !stop.is_cancelled() {
            let view = views.borrow().clone();
            if view.ready && !ready {
                ready = true;
                host.set_activity("trading");
            }
            let fresh = calendar.lock().unwrap_or_else(|p| p.into_inner()).take();
            if let Some(c) = fresh {
                if stocks {
                    host.retrainer.set_calendar(Some(c.clone()));
                }
                engine.send(Event::Update(Update::Calendar(Box::new(c))));
            }
            host.retrainer.on_clock(&ProcessClock);
            host.live.bars_received = view.bars_received;
            host.live.last_bar = view.last_bar.clone();
            curve.point(&mut host, &view);
            host.poll(&mut engine, &view.engine, &ProcessClock);
            host.publish(&view.engine, Some(&account));
            wait(&stop, EVERY);
        }
        host
    })
}

/// Sleeps `d`, or less when `stop` is cancelled first.
fn wait(stop: &CancellationToken, d: Duration) {
    let step = Duration::from_millis(50);
    let mut left = d;
    while !left.is_zero() && !stop.is_cancelled() {
        let s = left.min(step);
        std::thread::sleep(s);
        left -= s;
    }
}

#[cfg(test)]
mod tests;
