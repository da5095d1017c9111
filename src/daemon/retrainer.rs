//! The daemon's retrainer: asked between bars with the engine's clock (`on_clock`: the host's chores
//! thread live, `daemon/replay_hooks.rs` after each moment of a replay) whether the `[retrain]` schedule
//! fired since it last looked (so a replay retrains in simulated time), it starts the retrain pipeline on a
//! background task, never more than one run at a time, and hands each run's record back as a
//! `RetrainEvent` the engine reads between two bars (a new champion → the engine hot-swaps its policy).
//! The control socket's `retrain` request starts a run the same way. Training itself is a child process,
//! so nothing here can stop trading.

use crate::calendar::{Calendar, Session};
use crate::engine::EngineClock;
use crate::models::ModelKind;
use crate::retrain::{RetrainPipeline, RetrainProgress, RunRecord, Trigger};
use crate::schedule::Schedule;
use chrono::{DateTime, Utc};
use std::future::Future;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use tokio::sync::mpsc;

/// One retrain run, as the daemon runs it (the real `RetrainPipeline`, or a fake in tests).
pub(crate) trait RunPipeline: Send + Sync + 'static {
    fn run_once(
        &self,
        kind: ModelKind,
        trigger: Trigger,
        progress: &mut (dyn FnMut(RetrainProgress) + Send),
    ) -> impl Future<Output = RunRecord> + Send;
}

impl RunPipeline for RetrainPipeline {
    fn run_once(
        &self,
        kind: ModelKind,
        trigger: Trigger,
        progress: &mut (dyn FnMut(RetrainProgress) + Send),
    ) -> impl Future<Output = RunRecord> + Send {
        self.run(kind, trigger, progress)
    }
}

/// What the engine hears from the retrainer.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum RetrainEvent {
    /// One kind's run ended (promoted, kept or failed); see `RunRecord::new_champion`.
    Finished(Box<RunRecord>),
    /// The whole batch of runs is over; another may start.
    Idle,
}

impl RetrainEvent {
    /// The model to hot-swap in, when this event is a promotion.
    pub(crate) fn swap(&self) -> Option<(ModelKind, &str)> {
        match self {
            RetrainEvent::Finished(r) => r.new_champion().map(|id| (r.kind, id)),
            RetrainEvent::Idle => None,
        }
    }
}

/// A run could not start because one is under way.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("a retrain is already running; try again when it ends")]
pub(crate) struct Busy;

pub(crate) struct Retrainer<P: RunPipeline> {
    pipeline: Arc<P>,
    schedule: Schedule,
    enabled: bool,
    kinds: Vec<ModelKind>,
    last_check: Option<DateTime<Utc>>,
    running: Arc<AtomicBool>,
    events_tx: mpsc::UnboundedSender<RetrainEvent>,
    events_rx: mpsc::UnboundedReceiver<RetrainEvent>,
    progress: Option<mpsc::UnboundedSender<RetrainProgress>>,
    rt: tokio::runtime::Handle,
    /// The exchange's sessions (stocks traded): a scheduled run due inside a regular session waits for
    /// its close, so training never competes with the engine while the market trades. `None`: no wait.
    hours: Option<Calendar>,
    /// A scheduled run waiting for the session's close: when it was due.
    deferred: Option<DateTime<Utc>>,
}

impl<P: RunPipeline> Retrainer<P> {
    /// `rt`: where runs are spawned (the daemon's runtime; the engine's thread is not async).
    pub(crate) fn new(pipeline: P, schedule: Schedule, enabled: bool, rt: tokio::runtime::Handle) -> Self {
        let (events_tx, events_rx) = mpsc::unbounded_channel();
        Retrainer {
            pipeline: Arc::new(pipeline),
            schedule,
            enabled,
            kinds: vec![ModelKind::Ppo, ModelKind::Lstm],
            last_check: None,
            running: Arc::new(AtomicBool::new(false)),
            events_tx,
            events_rx,
            progress: None,
            rt,
            hours: None,
            deferred: None,
        }
    }

    /// The calendar whose regular sessions a scheduled run waits out (`None`: a crypto-only config).
    pub(crate) fn set_calendar(&mut self, hours: Option<Calendar>) {
        self.hours = hours;
    }

    /// The kinds a scheduled run retrains, in order (default: ppo, then lstm).
    #[cfg(test)]
    pub(crate) fn with_kinds(mut self, kinds: Vec<ModelKind>) -> Self {
        self.kinds = kinds;
        self
    }

    /// Where the runs' progress goes while they run (the dashboard, `tradebot status`); how each ended
    /// comes from `poll`/`recv` (`RetrainEvent::Finished`), never on this channel.
    pub(crate) fn with_progress(mut self, tx: mpsc::UnboundedSender<RetrainProgress>) -> Self {
        self.progress = Some(tx);
        self
    }

    /// A reloaded schedule (SIGHUP): the next fire time is computed from the last clock reading on.
    pub(crate) fn set_schedule(&mut self, schedule: Schedule, enabled: bool) {
        self.schedule = schedule;
        self.enabled = enabled;
    }

    #[cfg(test)]
    pub(crate) fn is_running(&self) -> bool {
        self.running.load(Ordering::SeqCst)
    }

    /// The next scheduled run after the last clock reading.
    pub(crate) fn next_due(&self) -> Option<DateTime<Utc>> {
        self.enabled.then(|| self.last_check.and_then(|t| self.schedule.next_after(t))).flatten()
    }

    /// Called between bars with the engine's clock: starts a run when a fire time of the schedule passed
    /// since the previous call. The first call only sets the baseline. A fire time that passes while a run is under
    /// way is skipped (logged), and the next one tries again. Returns whether a run started.
    pub(crate) fn on_clock(&mut self, clock: &dyn EngineClock) -> bool {
        let now = clock.now();
        let Some(since) = self.last_check else {
            self.last_check = Some(now);
            return false;
        };
        // The baseline never moves back, so a clock stepping backwards cannot replay a fire time.
        if now <= since {
            return false;
        }
        self.last_check = Some(now);
        if !self.enabled {
            return false;
        }
        let Some(fire) = self.schedule.fired_between(since, now).or(self.deferred) else { return false };
        if self.hours.as_ref().is_some_and(|c| c.is_open(now, Session::Regular)) {
            if self.deferred.is_none() {
                log::info!("retrain: the run due at {fire} waits for the session's close (the market is open)");
            }
            self.deferred = Some(fire);
            return false;
        }
        self.deferred = None;
        let trigger = Trigger { reason: format!("schedule {:?} at {fire}", self.schedule.spec()), clock_time: now };
        match self.start(self.kinds.clone(), trigger) {
            Ok(()) => true,
            Err(Busy) => {
                log::warn!("retrain: the run due at {fire} is skipped, the previous one is still running");
                false
            }
        }
    }

    /// A run asked for by hand (control socket): one kind, or every kind.
    pub(crate) fn request(
        &mut self,
        kind: Option<ModelKind>,
        reason: &str,
        clock: &dyn EngineClock,
    ) -> Result<(), Busy> {
        let kinds = kind.map_or_else(|| self.kinds.clone(), |k| vec![k]);
        self.start(kinds, Trigger { reason: reason.to_string(), clock_time: clock.now() })
    }

    fn start(&mut self, kinds: Vec<ModelKind>, trigger: Trigger) -> Result<(), Busy> {
        if self.running.swap(true, Ordering::SeqCst) {
            return Err(Busy);
        }
        let names: Vec<&str> = kinds.iter().map(|k| k.as_str()).collect();
        log::info!("retrain: starting {} ({})", names.join(" then "), trigger.reason);
        let (pipeline, running, events) = (self.pipeline.clone(), self.running.clone(), self.events_tx.clone());
        let progress = self.progress.clone();
        self.rt.spawn(async move {
            // The progress channel carries a run while it runs; its end (the record) goes once, as
            // `RetrainEvent::Finished` on the events channel, not also as `RetrainProgress::Finished`.
            let mut report = move |p: RetrainProgress| {
                if let (Some(tx), false) = (&progress, matches!(p, RetrainProgress::Finished(_))) {
                    let _ = tx.send(p);
                }
            };
            for kind in kinds {
                let record = pipeline.run_once(kind, trigger.clone(), &mut report).await;
                let _ = events.send(RetrainEvent::Finished(Box::new(record)));
            }
            running.store(false, Ordering::SeqCst);
            let _ = events.send(RetrainEvent::Idle);
        });
        Ok(())
    }

    /// Events ready now, without waiting: what the engine calls between two bars.
    pub(crate) fn poll(&mut self) -> Vec<RetrainEvent> {
        let mut out = Vec::new();
        while let Ok(e) = self.events_rx.try_recv() {
            out.push(e);
        }
        out
    }

    /// Waits for the next event (async callers; a replay that must not outrun its retrain).
    /// Cancellation-safe.
    #[cfg(test)]
    pub(crate) async fn recv(&mut self) -> Option<RetrainEvent> {
        self.events_rx.recv().await
    }
}

#[cfg(test)]
mod tests;
