//! The cores the live driver puts on the runner's trading thread: `LiveCore` (the engine, its reports and
//! its view for the chores thread) and `Notifying` (the scripted harness with systemd's READY and
//! watchdog), and the feed wrapper that counts connections into the metrics. Their reports go through
//! `live::report::Reporter`, as the replay's do.

use super::Core;
use super::report::Reporter;
use super::view::{Balance, EngineView, TradingView};
use crate::engine::{Command, Engine, Event};
use crate::feed::{FeedError, FeedEvent, MarketFeed};
use chrono::{DateTime, Utc};
use std::time::Instant;
use tokio::sync::{mpsc, watch};

/// A core that tells systemd it is ready after its first reconciliation and pings the watchdog as it
/// works (the scripted harness).
pub(crate) struct Notifying<C: Core> {
    core: C,
    report: Reporter,
}

impl<C: Core> Notifying<C> {
    pub(crate) fn new(core: C, report: Reporter) -> Self {
        Notifying { core, report }
    }
}

impl<C: Core> Core for Notifying<C> {
    fn process(&mut self, ev: Event) -> Vec<Command> {
        let reconciled = matches!(ev, Event::Reconciled(_));
        let out = self.core.process(ev);
        if reconciled {
            self.report.ready("reconciled with the broker; trading");
        }
        self.report.watchdog();
        out
    }
}

/// The engine on the live runner: it only trades. Per event it counts into the metrics and pings the
/// systemd watchdog; after it, it leaves a view of the engine for the daemon's chores (`daemon::chores`), whose
/// controls, models and limits come back through its inbox as events. `READY=1` after the first
/// reconciliation.
pub(crate) struct LiveCore {
    engine: Engine,
    report: Reporter,
    views: watch::Sender<TradingView>,
    inbox: Option<mpsc::Receiver<Event>>,
    bars_received: u64,
    last_bar: std::collections::BTreeMap<String, DateTime<Utc>>,
}

impl LiveCore {
    /// The engine on the trading thread; the chores thread's controls, models and limits come back
    /// through `inbox` as events.
    pub(crate) fn new(engine: Engine, report: Reporter, inbox: mpsc::Receiver<Event>) -> Self {
        let core = LiveCore {
            engine,
            report,
            views: watch::Sender::new(TradingView::default()),
            inbox: Some(inbox),
            bars_received: 0,
            last_bar: Default::default(),
        };
        core.views.send_replace(core.view());
        core
    }

    /// The engine's view, as the chores thread follows it.
    pub(crate) fn views(&self) -> watch::Receiver<TradingView> {
        self.views.subscribe()
    }

    pub(crate) fn engine(&self) -> &Engine {
        &self.engine
    }

    fn view(&self) -> TradingView {
        let account = Balance { equity: self.engine.equity(), cash: self.engine.cash() };
        TradingView {
            engine: EngineView::of(&self.engine, account),
            ready: self.report.is_ready(),
            bars_received: self.bars_received,
            last_bar: self.last_bar.clone(),
        }
    }
}

impl Core for LiveCore {
    fn process(&mut self, ev: Event) -> Vec<Command> {
        let reconciled = matches!(ev, Event::Reconciled(_));
        if let Event::Order(u) = &ev {
            self.report.order(u.kind.as_str());
        }
        let out = match ev {
            Event::Bar(b) => {
                self.report.bar(&b);
                self.bars_received += 1;
                self.last_bar.insert(b.symbol.to_string(), b.t);
                let started = Instant::now();
                let out = self.engine.process(Event::Bar(b));
                self.report.decided(started.elapsed());
                out
            }
            ev => self.engine.process(ev),
        };
        for (_, reason) in self.engine.take_refusals() {
            self.report.refused(reason);
        }
        if reconciled {
            self.report.ready("reconciled with the broker; trading");
        }
        self.report.sent(&out);
        self.views.send_replace(self.view());
        self.report.watchdog();
        out
    }

    fn inbox(&mut self) -> Option<mpsc::Receiver<Event>> {
        self.inbox.take()
    }
}

/// The feed, keeping `feed_connected` and counting its reconnects and backfilled bars into the metrics (`feed_reconnects`,
/// `backfilled_bars`; the status report reads the same counter).
pub(crate) struct CountingFeed<F> {
    inner: F,
    metrics: std::sync::Arc<crate::metrics::Metrics>,
    connects: u64,
}

impl<F> CountingFeed<F> {
    pub(crate) fn new(inner: F, metrics: std::sync::Arc<crate::metrics::Metrics>) -> Self {
        CountingFeed { inner, metrics, connects: 0 }
    }
}

impl<F: MarketFeed + Send> MarketFeed for CountingFeed<F> {
    async fn next(&mut self) -> Result<FeedEvent, FeedError> {
        let ev = self.inner.next().await;
        match &ev {
            Ok(FeedEvent::Disconnected { .. }) | Err(_) => _ = self.metrics.feed_connected.set(0),
            Ok(FeedEvent::Connected { .. }) => _ = self.metrics.feed_connected.set(1),
            _ => {}
        }
        if let Ok(FeedEvent::Connected { backfilled }) = &ev {
            if self.connects > 0 {
                self.metrics.feed_reconnects.inc();
            }
            self.connects += 1;
            self.metrics.backfilled_bars.inc_by(*backfilled as u64);
        }
        ev
    }
}
