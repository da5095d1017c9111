//! What the daemon runs around its engine, the same on a replay and live: the retrainer (scheduled runs on
//! the engine's clock, progress, hot swaps), the control socket's requests (status, pause, resume, flatten,
//! retrain), the status report, `/metrics` and the dashboard's data, and systemd status lines. It sees the
//! engine through an `EngineView` and acts on it through an `EngineLink`: a replay passes its engine itself
//! (`Host::poll` and `Host::publish` between two bars, a promoted model loaded and swapped at once, so a
//! replay is the same every time); live, the host runs on a thread of its own (`daemon::chores`) and its
//! actions reach the trading thread as events.

pub(crate) use super::link::{Balance, EngineLink, EngineView};
use super::models::load_swap;
use super::requests;
use super::retrainer::{RetrainEvent, Retrainer, RunPipeline};
use crate::config::Config;
use crate::control::server::Call;
use crate::control::{Request, Response};
use crate::domain::Bar;
use crate::engine::{Command, Control, EngineClock, Event, Update};
use crate::live::notify::Notifier;
use crate::live::report::Reporter;
use crate::metrics::Metrics;
use crate::models::Registry;
use crate::retrain::study_record::StudyRecord;
use crate::retrain::{RetrainProgress, RunRecord};
use crate::store::Store;
use crate::web::data::{ChartPoint, SharedData, TrainingView};
use chrono::{DateTime, Utc};
use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use tokio::sync::mpsc;

/// The daemon's live state, behind the status report and the dashboard.
#[derive(Debug, Clone)]
pub(crate) struct DaemonState {
    pub bars_received: u64,
    pub last_bar: BTreeMap<String, DateTime<Utc>>,
    pub day_open_equity: Option<(chrono::NaiveDate, f64)>,
    pub equity: Vec<ChartPoint>,
    pub running: BTreeMap<String, TrainingView>,
    pub activity: String,
    pub started_at: DateTime<Utc>,
}

pub(crate) struct Host<P: RunPipeline> {
    pub config: Config,
    /// The main store: bars, retrain records.
    pub store: Store,
    /// The engine's account store (orders, fills, decisions, kill switch): a replay's `state_dir/replay`,
    /// live the main store; set by the driver once open (`None` until then).
    pub account: Option<Store>,
    pub registry: Registry,
    pub metrics: Arc<Metrics>,
    pub dashboard: Arc<SharedData>,
    pub retrainer: Retrainer<P>,
    /// The retrainer's progress (`Retrainer::with_progress`).
    pub progress: Option<mpsc::UnboundedReceiver<RetrainProgress>>,
    /// The control socket's requests (`control::server::serve`).
    pub calls: Option<mpsc::Receiver<Call>>,
    /// Metrics and systemd, as the trading side reports them (`live::report`).
    pub report: Reporter,
    /// Set by SIGHUP: reload what can be reloaded at the next `poll`.
    pub hangup: Arc<AtomicBool>,
    pub live: DaemonState,
    /// Every retrain run that ended, in order.
    pub retrains: Vec<RunRecord>,
    /// Where alerts go (`[notify]`); off unless `with_alerts`.
    pub alerts: crate::alerts::Alerts,
    pub(super) watched: super::status::state::Watched,
    /// The dashboard's book as last read from the store, and when.
    pub(super) book_at: std::sync::Mutex<Option<(std::time::Instant, super::status::book::Book, Vec<StudyRecord>)>>,
}

/// What a host is built from (`Host::new`): the config, the main store and the registry, where metrics and
/// the dashboard's data go, the retrainer with its progress, the control socket's requests and systemd.
pub(in crate::daemon) struct HostParts<P: RunPipeline> {
    pub config: Config,
    pub store: Store,
    pub registry: Registry,
    pub metrics: Arc<Metrics>,
    pub dashboard: Arc<SharedData>,
    pub retrainer: Retrainer<P>,
    /// The retrainer's progress (`Retrainer::with_progress`).
    pub progress: Option<mpsc::UnboundedReceiver<RetrainProgress>>,
    /// The control socket's requests (`control::server::serve`).
    pub calls: Option<mpsc::Receiver<Call>>,
    pub notifier: Notifier,
}

/// A daemon that stops gives its queued alerts a few seconds to go out (a retrain's outcome at the end
/// of a replay, a kill switch just before SIGTERM), and logs a line for each that did not.
impl<P: RunPipeline> Drop for Host<P> {
    fn drop(&mut self) {
        self.alerts.flush(crate::alerts::SHUTDOWN_WAIT);
    }
}

impl<P: RunPipeline> Host<P> {
    pub(in crate::daemon) fn new(parts: HostParts<P>) -> Self {
        let HostParts { config, store, registry, metrics, dashboard, retrainer, progress, calls, notifier } = parts;
        let live = DaemonState {
            bars_received: 0,
            last_bar: BTreeMap::new(),
            day_open_equity: None,
            equity: Vec::new(),
            running: BTreeMap::new(),
            activity: "starting".into(),
            started_at: crate::clock::now(),
        };
        Host {
            config,
            store,
            account: None,
            registry,
            metrics: metrics.clone(),
            dashboard,
            retrainer,
            progress,
            calls,
            report: Reporter::new(metrics.clone(), notifier),
            hangup: Arc::new(AtomicBool::new(false)),
            live,
            retrains: Vec::new(),
            alerts: crate::alerts::Alerts::off(),
            watched: Default::default(),
            book_at: Default::default(),
        }
    }

    pub(crate) fn with_alerts(mut self, alerts: crate::alerts::Alerts) -> Self {
        self.alerts = alerts;
        self
    }

    /// A bar reached the engine (counted for status and metrics).
    pub(crate) fn saw_bar(&mut self, bar: &Bar) {
        self.report.bar(bar);
        self.live.bars_received += 1;
        self.live.last_bar.insert(bar.symbol.to_string(), bar.t);
    }

    /// A point of the equity curve; the trading day's first point sets the day's opening equity (the
    /// last equity of the day before, or `equity` itself on the first day).
    pub(crate) fn equity_point(&mut self, t: DateTime<Utc>, equity: f64, buy_hold: f64) {
        let day = t.date_naive();
        if self.live.day_open_equity.is_none_or(|(d0, _)| d0 != day) {
            let open = self.live.equity.last().map_or(equity, |p| p.equity);
            if let Some((d0, open0)) = self.live.day_open_equity {
                self.alert_day(d0, open0, open, self.watched.positions);
            }
            self.live.day_open_equity = Some((day, open));
        }
        self.live.equity.push(ChartPoint { t, equity, buy_hold });
    }

    pub(crate) fn set_activity(&mut self, activity: impl Into<String>) {
        self.live.activity = activity.into();
        self.report.status(&self.live.activity);
    }

    /// Retrain progress and outcomes (a promoted model goes to the engine), the control socket's requests
    /// (answered from `view`), a SIGHUP. Returns the orders a `flatten` asked for (a replay's engine), and
    /// whether the retrainer went idle.
    pub(crate) fn poll(
        &mut self,
        engine: &mut dyn EngineLink,
        view: &EngineView,
        clock: &dyn EngineClock,
    ) -> (Vec<Command>, bool) {
        self.watch(view, crate::clock::now());
        if self.hangup.swap(false, Ordering::SeqCst) {
            self.reload(engine);
        }
        let idle = self.drain_retrains(engine);
        let cmds = self.serve_calls(engine, view, clock);
        (cmds, idle)
    }

    /// SIGHUP: re-reads the config file and applies what can change safely while trading: the risk limits
    /// (`[risk]`, except the daily loss limit and the kill switch's action, which belong to the persisted
    /// kill switch) and the retrain schedule (`retrain.schedule`, `retrain.timezone`, `retrain.enabled`).
    /// Any other change is refused with a log line naming it; the running value stays. A file that does not
    /// load changes nothing.
    pub(crate) fn reload(&mut self, engine: &mut dyn EngineLink) {
        let file = self.config.source.clone();
        let new = match Config::load(&file) {
            Ok(c) => c,
            Err(e) => {
                log::error!("SIGHUP: {e}; nothing reloaded, the running configuration stays");
                return;
            }
        };
        let reload = self.config.reload(&new);
        let refused = reload.refused;
        let mut applied: Vec<&str> = Vec::new();
        if let Some(risk) = reload.risk {
            engine.send(Event::Update(Update::Limits(Box::new(crate::risk::Limits::from_config(&risk)))));
            self.config.risk = risk;
            applied.push("risk limits");
        }
        if let Some((schedule, enabled)) = reload.schedule {
            self.retrainer.set_schedule(schedule.clone(), enabled);
            self.config.retrain.schedule = schedule;
            self.config.retrain.enabled = enabled;
            applied.push("retrain schedule");
        }
        if applied.is_empty() && refused.is_empty() {
            log::info!("SIGHUP: {} has no changes", file.display());
        }
        if !applied.is_empty() {
            log::info!("SIGHUP: reloaded {} from {}", applied.join(" and "), file.display());
        }
        if !refused.is_empty() {
            log::warn!(
                "SIGHUP: {} changed in {} but cannot change while trading: restart the daemon (systemctl restart tradebot) to apply; running with the old values",
                refused.join(", "),
                file.display()
            );
        }
    }

    fn drain_retrains(&mut self, engine: &mut dyn EngineLink) -> bool {
        if let Some(rx) = self.progress.as_mut() {
            while let Ok(p) = rx.try_recv() {
                on_progress(&self.metrics, &mut self.live, &p);
            }
        }
        let mut idle = false;
        for ev in self.retrainer.poll() {
            if let Some((kind, id)) = ev.swap() {
                self.swap(engine, kind, id);
            }
            match ev {
                RetrainEvent::Finished(r) => {
                    self.alert_retrain(&r);
                    self.metrics.training_ended(r.kind.as_str());
                    self.metrics.retrain(r.kind.as_str(), r.outcome.as_str());
                    self.live.running.remove(r.kind.as_str());
                    self.retrains.push(*r);
                }
                RetrainEvent::Idle => idle = true,
            }
        }
        idle
    }

    /// The engine trades with model `id` of `kind` from the next bar (loaded as the link loads).
    fn swap(&self, engine: &mut dyn EngineLink, kind: crate::models::ModelKind, id: &str) {
        let (config, registry, id) = (self.config.clone(), self.registry.clone(), id.to_string());
        engine.swap(Box::new(move || load_swap(&config, &registry, kind, &id)));
    }

    fn serve_calls(&mut self, engine: &mut dyn EngineLink, view: &EngineView, clock: &dyn EngineClock) -> Vec<Command> {
        let mut out = Vec::new();
        let Some(rx) = self.calls.as_mut() else { return out };
        let mut calls = Vec::new();
        while let Ok(c) = rx.try_recv() {
            calls.push(c);
        }
        for (req, reply) in calls {
            let resp = match req {
                // A snapshot, an import, a kill switch clear: answered there (some from threads of their own).
                req @ (Request::Snapshot { .. } | Request::Import { .. } | Request::RiskClear { .. }) => {
                    requests::serve(req, reply, &self.store, self.account.as_ref(), engine, clock.now());
                    continue;
                }
                Request::Status => Response::status(self.status(view)),
                Request::Pause => {
                    engine.send(Event::Control(Control::Pause));
                    self.set_activity("paused: no new orders until `tradebot resume`");
                    Response::done("paused: no new orders until resume")
                }
                Request::Resume => {
                    engine.send(Event::Control(Control::Resume));
                    self.set_activity("trading");
                    Response::done("resumed")
                }
                Request::Flatten => {
                    out.extend(engine.send(Event::Control(Control::Flatten)));
                    // The status says "flattened" once every sell went out (`publish::flatten_activity`).
                    self.set_activity("flattening every position, then paused");
                    Response::done("flattening every position, then paused")
                }
                Request::Retrain { kind } => match self.retrainer.request(kind, "control socket", clock) {
                    Ok(()) => Response::done("retrain started"),
                    Err(e) => Response::error(e.to_string()),
                },
                Request::Promote { id, reason } => match self.registry.promote(&id, &reason) {
                    Ok(m) => {
                        log::info!(model_id = m.id.as_str(); "models: {} promoted to {} champion by hand ({reason})", m.id, m.kind.as_str());
                        self.swap(engine, m.kind, &m.id);
                        Response::done(format!(
                            "{} is the {} champion; trading with it from the next bar",
                            m.id,
                            m.kind.as_str()
                        ))
                    }
                    Err(e) => Response::error(e.to_string()),
                },
                Request::Rollback { kind, reason } => match self.registry.rollback(kind, &reason) {
                    Ok(m) => {
                        log::info!(model_id = m.id.as_str(); "models: rolled back to {} as {} champion ({reason})", m.id, kind.as_str());
                        self.swap(engine, kind, &m.id);
                        Response::done(format!("rolled back: {} is the {} champion again", m.id, kind.as_str()))
                    }
                    Err(e) => Response::error(e.to_string()),
                },
            };
            let _ = reply.send(resp);
        }
        out
    }
}

fn on_progress(metrics: &Metrics, live: &mut DaemonState, p: &RetrainProgress) {
    match p {
        RetrainProgress::Snapshot { kind, .. } => {
            live.running.insert(
                kind.as_str().to_string(),
                TrainingView {
                    id: format!("{}-running", kind.as_str()),
                    kind: kind.as_str().to_string(),
                    started_at: crate::clock::now(),
                    outcome: "running".into(),
                    curves: BTreeMap::new(),
                    progress: None,
                    metrics: BTreeMap::new(),
                    gate: None,
                },
            );
        }
        RetrainProgress::Training { kind, line } => {
            metrics.training_progress(kind.as_str(), line);
            if let Some(v) = live.running.get_mut(kind.as_str()) {
                crate::retrain::record::add_to_curves(&mut v.curves, line);
                if let Some(p) = crate::web::data::TrainingProgress::of_line(line) {
                    v.progress = Some(p);
                }
            }
        }
        // The end of a run arrives once, as `RetrainEvent::Finished` (`drain_retrains`).
        RetrainProgress::Finished(_) | RetrainProgress::Evaluating { .. } => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::models::ModelKind;

    /// A search's progress (`retrain.tune`) shows as trials ended of trials, a PPO run's as steps.
    #[test]
    fn progress_counts_steps_epochs_or_trials() {
        let metrics = Metrics::new();
        let mut live = DaemonState {
            bars_received: 0,
            last_bar: BTreeMap::new(),
            day_open_equity: None,
            equity: Vec::new(),
            running: BTreeMap::new(),
            activity: String::new(),
            started_at: crate::clock::now(),
        };
        on_progress(&metrics, &mut live, &RetrainProgress::Snapshot { kind: ModelKind::Ppo, bars: 10 });
        let lines = [
            serde_json::json!({"event": "search", "trials_ended": 3, "trials": 12, "best_value": 0.5}),
            serde_json::json!({"event": "progress", "env_steps": 64, "total_steps": 256}),
        ];
        let mut seen = Vec::new();
        for line in lines {
            on_progress(&metrics, &mut live, &RetrainProgress::Training { kind: ModelKind::Ppo, line });
            let p = live.running["ppo"].progress.clone().unwrap();
            seen.push((p.done, p.total));
        }
        assert_eq!(seen, [(3.0, 12.0), (64.0, 256.0)]);
        assert_eq!(live.running["ppo"].progress.as_ref().unwrap().gpu, None, "no GPU fields, no GPU shown");

        // A child on a GPU: its readings reach the dashboard's run and `/metrics` while it runs.
        let line = serde_json::json!({"event": "progress", "env_steps": 128, "total_steps": 256,
            "gpu_busy_pct": 96.5, "gpu_memory_mb": 4096.0});
        on_progress(&metrics, &mut live, &RetrainProgress::Training { kind: ModelKind::Ppo, line });
        let gpu = live.running["ppo"].progress.as_ref().unwrap().gpu;
        assert_eq!(gpu, Some(crate::web::data::GpuNow { busy_pct: 96.5, memory_mb: 4096.0, power_w: None }));
        assert!(metrics.encode().contains("tradebot_train_gpu_busy_percent{kind=\"ppo\"} 96.5"));
    }
}
