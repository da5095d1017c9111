//! The runner's input tasks: market feed, broker updates, ticks, the core's inbox, signals. Each turns its traffic into
//! `Event`s for the core and stops when the shutdown token is cancelled. None holds trading state.

use crate::alpaca::updates::{TradeUpdates, UpdatesError, UpdatesEvent};
use crate::engine::Event;
use crate::feed::{FeedError, FeedEvent, MarketFeed};
use std::future::Future;
use std::time::Duration;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

/// A stream of broker order events: Alpaca's trade_updates, or a channel from the simulated broker.
pub(crate) trait UpdateSource: Send + 'static {
    /// The next event. Must be cancellation-safe (the runner selects on it).
    fn next(&mut self) -> impl Future<Output = Result<UpdatesEvent, UpdatesError>> + Send;
}

impl UpdateSource for TradeUpdates {
    async fn next(&mut self) -> Result<UpdatesEvent, UpdatesError> {
        TradeUpdates::next(self).await
    }
}

/// Updates from a channel (the simulated broker's); `Stopped` once every sender is gone.
#[cfg(test)]
pub(crate) struct ChannelUpdates(pub mpsc::UnboundedReceiver<UpdatesEvent>);

#[cfg(test)]
impl UpdateSource for ChannelUpdates {
    async fn next(&mut self) -> Result<UpdatesEvent, UpdatesError> {
        self.0.recv().await.ok_or(UpdatesError::Stopped)
    }
}

/// Bars to the core. A fatal feed error, or the end of a finite feed, starts the shutdown.
pub(super) async fn feed<F: MarketFeed>(
    mut feed: F,
    tx: mpsc::Sender<Event>,
    stop: CancellationToken,
    fatal: super::FatalCell,
) {
    loop {
        let ev = tokio::select! {
            _ = stop.cancelled() => return,
            ev = feed.next() => ev,
        };
        match ev {
            Ok(FeedEvent::Bar(b)) => {
                if tx.send(Event::Bar(b)).await.is_err() {
                    return;
                }
            }
            Ok(FeedEvent::Mark(b)) => {
                if tx.send(Event::Mark(b)).await.is_err() {
                    return;
                }
            }
            Ok(FeedEvent::NoBar { symbol, t }) => {
                if tx.send(Event::NoBar { symbol, t }).await.is_err() {
                    return;
                }
            }
            Ok(FeedEvent::BarUpdated(b)) => {
                log::debug!("runner: bar correction for {} at {} not traded on", b.symbol, b.t)
            }
            Ok(FeedEvent::Connected { backfilled }) => {
                log::info!("runner: market feed connected ({backfilled} bars backfilled)")
            }
            Ok(FeedEvent::Disconnected { reason }) => log::warn!("runner: market feed lost: {reason}"),
            Ok(FeedEvent::Status { symbol, t, halted, detail }) => {
                let what = if halted { "halted" } else { "trading status" };
                log::info!("runner: {symbol} {what} at {t}: {detail}")
            }
            Err(FeedError::Stopped) => {
                log::info!("runner: market feed ended; stopping");
                stop.cancel();
                return;
            }
            Err(e) if e.is_fatal() => {
                log::error!("runner: market feed failed: {e}; stopping");
                fatal.stop(format!("market feed: {e}"), &stop);
                return;
            }
            Err(e) => log::warn!("runner: market feed: {e}"),
        }
    }
}

/// Broker updates to the core; a reconnect becomes `Event::BrokerReconnected` (reconcile before
/// trading on). A refused key stops the run.
pub(super) async fn updates<U: UpdateSource>(
    mut src: U,
    tx: mpsc::Sender<Event>,
    stop: CancellationToken,
    fatal: super::FatalCell,
) {
    loop {
        let ev = tokio::select! {
            _ = stop.cancelled() => return,
            ev = src.next() => ev,
        };
        let out = match ev {
            Ok(UpdatesEvent::Order(u)) => Event::Order(u),
            Ok(UpdatesEvent::Connected { reconnect: true }) => Event::BrokerReconnected,
            Ok(UpdatesEvent::Connected { reconnect: false }) => {
                log::info!("runner: broker updates connected");
                continue;
            }
            Ok(UpdatesEvent::Disconnected { reason }) => {
                log::warn!("runner: broker updates lost: {reason}");
                continue;
            }
            Err(UpdatesError::Stopped) => {
                log::info!("runner: broker updates ended");
                return;
            }
            Err(e) => {
                log::error!("runner: broker updates failed: {e}; stopping");
                fatal.stop(format!("broker updates: {e}"), &stop);
                return;
            }
        };
        if tx.send(out).await.is_err() {
            return;
        }
    }
}

pub(super) async fn ticks(every: Duration, tx: mpsc::Sender<Event>, stop: CancellationToken) {
    let mut iv = tokio::time::interval(every);
    iv.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Skip);
    iv.tick().await;
    loop {
        tokio::select! {
            _ = stop.cancelled() => return,
            _ = iv.tick() => {
                // A full queue means the core is behind: skip this tick rather than pile up more.
                if let Err(mpsc::error::TrySendError::Closed(_)) = tx.try_send(Event::Tick) {
                    return;
                }
            }
        }
    }
}

/// The core's own inbox (`Core::inbox`) into its event channel, until shutdown or every sender is gone.
pub(super) async fn inbox(mut rx: mpsc::Receiver<Event>, tx: mpsc::Sender<Event>, stop: CancellationToken) {
    loop {
        let ev = tokio::select! {
            _ = stop.cancelled() => return,
            ev = rx.recv() => ev,
        };
        let Some(ev) = ev else { return };
        if tx.send(ev).await.is_err() {
            return;
        }
    }
}

/// SIGTERM (systemd's stop) and SIGINT (Ctrl-C) start the shutdown. Returns the listening task's future
/// once the handlers are installed, so no signal between the call and the spawn is missed.
pub(super) fn signals(stop: CancellationToken) -> std::io::Result<impl Future<Output = ()> + Send> {
    use tokio::signal::unix::{SignalKind, signal};
    let mut term = signal(SignalKind::terminate())?;
    let mut int = signal(SignalKind::interrupt())?;
    Ok(async move {
        tokio::select! {
            _ = stop.cancelled() => {}
            _ = term.recv() => { log::info!("runner: SIGTERM"); stop.cancel(); }
            _ = int.recv() => { log::info!("runner: SIGINT"); stop.cancel(); }
        }
    })
}
