//! One wrapper for what the trading side tells the outside, the same live, on the scripted harness and on
//! a replay: `/metrics` (bars, decision latency, order updates, orders sent, refusals) and systemd
//! (`READY=1` once, status lines, the watchdog, `STOPPING=1`). The view of the engine goes out beside it:
//! live through the trading thread's view channel (`engine_core::LiveCore`), on a replay through `Host::publish`.

use super::notify::Notifier;
use crate::domain::Bar;
use crate::engine::Command;
use crate::metrics::Metrics;
use std::sync::Arc;
use std::time::Duration;

pub(crate) struct Reporter {
    metrics: Arc<Metrics>,
    notifier: Notifier,
    ready: bool,
}

impl Reporter {
    pub(crate) fn new(metrics: Arc<Metrics>, notifier: Notifier) -> Reporter {
        Reporter { metrics, notifier, ready: false }
    }

    /// A bar reached the engine.
    pub(crate) fn bar(&self, bar: &Bar) {
        self.metrics.bar(bar.symbol.as_str());
    }

    /// The engine took `took` over a bar (its decision, when the bar completed a moment).
    pub(crate) fn decided(&self, took: Duration) {
        self.metrics.decision_latency.observe(took.as_secs_f64());
    }

    /// What the broker said of an order (`new`, `fill`, `canceled`, ...).
    pub(crate) fn order(&self, what: &str) {
        self.metrics.order(what);
    }

    /// The orders among `cmds`, counted as sent (`new`).
    pub(crate) fn sent(&self, cmds: &[Command]) {
        self.sent_count(cmds.iter().filter(|c| matches!(c, Command::Submit(_))).count());
    }

    /// `n` orders counted as sent (`new`).
    pub(crate) fn sent_count(&self, n: usize) {
        for _ in 0..n {
            self.metrics.order("new");
        }
    }

    /// An order risk refused, by its reason code.
    pub(crate) fn refused(&self, code: &'static str) {
        self.metrics.reject(code);
    }

    /// Ready (`READY=1` and the log line), said once however often it is called.
    pub(crate) fn ready(&mut self, status: &str) {
        if !self.ready {
            self.ready = true;
            self.notifier.ready(status);
        }
    }

    pub(crate) fn is_ready(&self) -> bool {
        self.ready
    }

    /// What the daemon is doing (`STATUS=`).
    pub(crate) fn status(&mut self, status: &str) {
        self.notifier.status(status);
    }

    pub(crate) fn stopping(&mut self, status: &str) {
        self.notifier.stopping(status);
    }

    /// The loop turned: `WATCHDOG=1` when half the interval has passed.
    pub(crate) fn watchdog(&mut self) {
        self.notifier.watchdog();
    }
}
