//! The live runner: the async edge of `tradebot run`. It turns traffic into `Event`s, runs the trading
//! core on its own thread, and carries out the core's `Command`s. It holds no trading state.
//!
//! ```text
//!  MarketFeed (feed::LiveBars over AlpacaFeed) ── feed task ──► Event::Bar, NoBar ─┐
//!  UpdateSource (TradeUpdates) ──────── updates task ──► Event::Order,      │ tokio mpsc
//!                                        reconnect ────► Event::BrokerReconnected
//!  interval ─────────────────────────── tick task ────► Event::Tick ────────┤
//!  Core::inbox (the daemon's chores) ─── inbox task ───► Event::Control, Event::Update ┤
//!                                                                            ▼
//!                      core thread (std::thread): Core::process(Event) -> Vec<Command>
//!                                                                            │
//!  Broker (AlpacaBroker) ◄── command task ◄───────────────────────────────────┘
//!     Submit → Event::Sending, then the broker's answer as Event::Order, or Event::SubmitFailed
//!     Cancel → broker.cancel;  Reconcile → broker.snapshot → Event::Reconciled (retried until it works)
//! ```
//!
//! The core thread's command handling (`engine::drive::handle`) is the one the replays, backtests and the gate
//! run through too (`engine::drive::run`, a synchronous loop over stored bars with a simulated broker): live adds
//! only the async edges drawn above.
//!
//! The runner starts with one `Command::Reconcile` of its own, so the core (its OMS) hears the broker's
//! view before anything else. Every broker call has a timeout. A blocking core never stalls the reactor.
//!
//! **Shutdown** has one owner, a `CancellationToken` with a `TaskTracker`: SIGTERM, SIGINT, the caller's
//! token, a fatal feed error or the end of a finite feed (a replay) cancel it. The tasks stop; the core
//! gets `Control::Shutdown` (it starts no new order); the command task finishes the command in hand (an
//! order POST in flight is awaited, bounded by `broker_timeout`, and its answer recorded) and reports the
//! submits still queued as `Event::NotSent` (recorded `not_sent` at once, not found "lost" a minute into
//! the next start); then the core's event channel closes and its thread returns it to the caller, who
//! flushes the store. Everything must be done within `RunnerConfig::shutdown_deadline`, which must exceed
//! `broker_timeout`.

mod commands;
pub(crate) mod engine_core;
pub(crate) mod notify;
pub(crate) mod report;
mod scripted;
mod tasks;
#[cfg(test)]
mod tests;
pub(crate) mod view;

pub(crate) use scripted::ScriptedCore;
#[cfg(test)]
pub(crate) use tasks::ChannelUpdates;
pub(crate) use tasks::UpdateSource;

use crate::broker::Broker;
pub(crate) use crate::engine::Core;
use crate::engine::drive;
use crate::engine::{Command, Control, Event};
use crate::feed::MarketFeed;
use std::time::Duration;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

/// The exit code of a run stopped by a fatal error (`EX_TEMPFAIL`): systemd restarts the unit.
pub const EX_FATAL: u8 = 75;
/// The exit code after the core thread panicked (`EX_SOFTWARE`).
pub const EX_PANIC: u8 = 70;

/// How a run ended: the core, and the fatal error that stopped it, if one did (the caller cleans up with
/// the core, then fails with `RunError::Fatal`).
pub(crate) struct RunnerExit<C> {
    pub core: C,
    pub fatal: Option<String>,
}

/// Where a task that stops the run records why.
#[derive(Clone, Default)]
pub(crate) struct FatalCell(std::sync::Arc<std::sync::Mutex<Option<String>>>);

impl FatalCell {
    /// Records the first fatal reason and starts the shutdown.
    pub(crate) fn stop(&self, reason: String, stop: &CancellationToken) {
        let mut cell = self.0.lock().unwrap_or_else(|p| p.into_inner());
        if cell.is_none() {
            *cell = Some(reason);
        }
        stop.cancel();
    }

    fn take(&self) -> Option<String> {
        self.0.lock().unwrap_or_else(|p| p.into_inner()).take()
    }
}

/// Cancels the shutdown token when dropped: the core thread's end, however it ends (a panic included),
/// stops the run at once instead of leaving the process idle until the watchdog.
struct CancelOnDrop(CancellationToken);

impl Drop for CancelOnDrop {
    fn drop(&mut self) {
        self.0.cancel();
    }
}

#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct RunnerConfig {
    /// How often `Event::Tick` is sent.
    pub tick: Duration,
    /// The longest any one broker call may take.
    pub broker_timeout: Duration,
    /// Wait between failed reconciliations.
    pub reconcile_retry: Duration,
    /// From the start of shutdown to everything stopped.
    pub shutdown_deadline: Duration,
    /// Listen for SIGTERM and SIGINT (off in tests, where the token is enough).
    pub handle_signals: bool,
    /// An order whose bar closed longer ago than this when its turn to be sent comes is not sent (it is
    /// refused, "stale at send"): the risk checks' `max_bar_age`, checked again at the door.
    pub max_order_age: Duration,
    /// The bars' length (`market.timeframe`): an order's bar closed this long after its stamp.
    pub bar_length: Duration,
    /// Commands waiting for the command task; a submit that finds the queue full is not sent.
    pub queue: usize,
}

impl Default for RunnerConfig {
    fn default() -> Self {
        RunnerConfig {
            tick: Duration::from_secs(1),
            broker_timeout: Duration::from_secs(30),
            reconcile_retry: Duration::from_secs(2),
            shutdown_deadline: Duration::from_secs(20),
            handle_signals: true,
            max_order_age: Duration::from_secs(3600),
            bar_length: Duration::from_secs(60),
            queue: 256,
        }
    }
}

/// Why a live run (`live::run`) ended other than by a clean shutdown.
#[derive(Debug, thiserror::Error)]
pub enum RunError {
    #[error("cannot start the core thread: {0}")]
    /// The trading (core) thread could not be started.
    Thread(std::io::Error),
    #[error("the core thread panicked")]
    /// The trading thread panicked (a bug): the process exits with `EX_PANIC`.
    CorePanicked,
    /// A fatal feed or broker-updates error stopped the run (the core was shut down cleanly first): the
    /// process exits `EX_TEMPFAIL` so that systemd restarts it.
    #[error("stopped on a fatal error: {0}")]
    Fatal(String),
    #[error("shutdown did not finish within {0:?}")]
    /// The shutdown took longer than its deadline; what was left is logged.
    Deadline(Duration),
    #[error("cannot listen for signals: {0}")]
    /// The SIGTERM/SIGINT handlers could not be installed.
    Signals(std::io::Error),
}

/// Runs until `shutdown` is cancelled (or a signal, a fatal feed error, the end of the feed, the core
/// thread's end), then returns the core and the fatal error that stopped it, if any.
pub(crate) async fn run<C, F, U, B>(
    mut core: C,
    feed: F,
    updates: U,
    broker: B,
    cfg: RunnerConfig,
    shutdown: CancellationToken,
) -> Result<RunnerExit<C>, RunError>
where
    C: Core,
    F: MarketFeed + Send + 'static,
    U: UpdateSource,
    B: Broker + 'static,
{
    let (ev_tx, ev_rx) = mpsc::channel::<Event>(4096);
    let (cmd_tx, cmd_rx) = mpsc::channel::<Command>(cfg.queue.max(1));
    let inbox = core.inbox();
    let on_end = CancelOnDrop(shutdown.clone());
    let core_thread = std::thread::Builder::new()
        .name("tradebot-core".into())
        .spawn(move || {
            let _on_end = on_end;
            core_loop(core, ev_rx, cmd_tx)
        })
        .map_err(RunError::Thread)?;
    let fatal = FatalCell::default();
    let tracker = TaskTracker::new();
    if cfg.handle_signals {
        tracker.spawn(tasks::signals(shutdown.clone()).map_err(RunError::Signals)?);
    }
    tracker.spawn(tasks::feed(feed, ev_tx.clone(), shutdown.clone(), fatal.clone()));
    tracker.spawn(tasks::updates(updates, ev_tx.clone(), shutdown.clone(), fatal.clone()));
    tracker.spawn(tasks::ticks(cfg.tick, ev_tx.clone(), shutdown.clone()));
    if let Some(inbox) = inbox {
        tracker.spawn(tasks::inbox(inbox, ev_tx.clone(), shutdown.clone()));
    }
    tracker.spawn(commands::execute(broker, cmd_rx, ev_tx.clone(), cfg, shutdown.clone()));
    tracker.close();
    shutdown.cancelled().await;
    log::info!("runner: shutting down");
    let stopped = async {
        let _ = ev_tx.send(Event::Control(Control::Shutdown)).await;
        drop(ev_tx);
        tracker.wait().await;
        tokio::task::spawn_blocking(move || core_thread.join()).await
    };
    match tokio::time::timeout(cfg.shutdown_deadline, stopped).await {
        Err(_) => Err(RunError::Deadline(cfg.shutdown_deadline)),
        Ok(Ok(Ok(core))) => Ok(RunnerExit { core, fatal: fatal.take() }),
        Ok(_) => {
            log::error!("runner: the core thread panicked; stopping");
            Err(RunError::CorePanicked)
        }
    }
}

/// The core thread: events in, commands out (through the command handling the simulated sessions share,
/// `drive::handle`), until every event sender is gone.
fn core_loop<C: Core>(mut core: C, mut events: mpsc::Receiver<Event>, commands: mpsc::Sender<Command>) -> C {
    let mut sink = QueueSink(commands);
    while let Some(ev) = events.blocking_recv() {
        drive::handle(&mut core, ev, &mut sink);
    }
    core
}

/// The command task's queue as the core's sink.
struct QueueSink(mpsc::Sender<Command>);

impl drive::CommandSink for QueueSink {
    fn offer(&mut self, c: Command) -> Result<(), drive::Refused> {
        use mpsc::error::TrySendError;
        self.0.try_send(c).map_err(|e| match e {
            TrySendError::Closed(c) => drive::Refused::Closed(c),
            TrySendError::Full(c) => drive::Refused::Full(c),
        })
    }

    fn wait(&mut self, c: Command) -> Result<(), Command> {
        self.0.blocking_send(c).map_err(|e| e.0)
    }

    fn capacity(&self) -> usize {
        self.0.max_capacity()
    }
}
