//! What the daemon runs around its engine, the same on a replay and live: the retrainer (scheduled runs on
//! the engine's clock, progress, hot swaps), the control socket's requests (status, pause, resume, flatten,
//! retrain), the status report, `/metrics` and the dashboard's data, and systemd status lines. It sees the
//! engine through an `EngineView` and acts on it through an `EngineLink`: a replay passes its engine itself
//! (`Host::poll` and `Host::publish` between two bars, a promoted model loaded and swapped at once, so a
//! replay is the same every time); live, the host runs on a thread of its own (`daemon::chores`) and its
//! actions reach the trading thread as events.

use super::models::load_swap;
use super::notify::Notifier;
use super::retrainer::{RetrainEvent, Retrainer, RunPipeline};
use crate::config::Config;
use crate::control::server::Call;
use crate::control::status::{FeedStatus, ModelsStatus, PositionStatus, RiskStatus, STATUS_VERSION, StaleSymbol};
use crate::control::{Request, Response, StatusReport};
use crate::domain::{Bar, Symbol};
use crate::engine::Core;
use crate::engine::{Clock, Command, Control, DecisionRecord, Engine, Event, LoadedModel, ModelSwap, Update};
use crate::metrics::Metrics;
use crate::models::Registry;
use crate::retrain::{Progress, RunRecord};
use crate::store::{Store, TreeName, TypedTree};
use crate::web::data::{DashboardData, DecisionView, EquityPoint, GateView, ModelView, SharedData, TrainingView};
use chrono::{DateTime, Utc};
use rust_decimal::prelude::ToPrimitive;
use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use tokio::sync::mpsc;

/// The account as the driver knows it: the simulated broker's, or the engine's view of Alpaca's.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct Account {
    pub equity: f64,
    pub cash: f64,
}

/// What the status report needs of the engine, taken between two events from its memory (no disk).
#[derive(Debug, Clone, Default)]
pub struct EngineView {
    pub account: Account,
    pub positions: Vec<(Symbol, rust_decimal::Decimal)>,
    pub closes: Vec<(Symbol, f64)>,
    pub open_orders: Vec<crate::control::status::OrderStatusLine>,
    pub policy_id: Option<String>,
    pub probs_id: Option<String>,
    pub missing_model: Option<&'static str>,
    pub paused: bool,
    pub kill_reason: Option<String>,
    pub stale: Vec<StaleSymbol>,
}

impl EngineView {
    pub fn of(engine: &Engine, account: Account) -> Self {
        EngineView {
            account,
            positions: engine.oms().positions().into_iter().collect(),
            closes: engine.last_closes(),
            open_orders: engine.oms().open_orders().map(super::status::order_line).collect(),
            policy_id: engine.policy_id().map(str::to_string),
            probs_id: engine.probs_id(),
            missing_model: engine.missing_model(),
            paused: engine.is_paused(),
            kill_reason: engine.risk().and_then(|r| r.kill_switch()).map(|k| k.reason.clone()),
            stale: engine
                .stale_symbols()
                .into_iter()
                .map(|(s, bars, down)| StaleSymbol { symbol: s.to_string(), bars, down })
                .collect(),
        }
    }
}

/// Where the host's actions on the engine go.
pub trait EngineLink {
    /// Hands the engine an event. Returns the orders it asks for now (a replay's engine), or none (live:
    /// the trading thread carries them out when it takes the event).
    fn send(&mut self, ev: Event) -> Vec<Command>;
    /// Loads a promoted model and hands it to the engine as `Update::Model`: at once (a replay, so a swap
    /// lands at the same bar every time) or on a thread of its own (live: the trading thread never waits
    /// for a model to load).
    fn swap(&mut self, load: Box<dyn FnOnce() -> Option<LoadedModel> + Send>);
}

impl EngineLink for Engine {
    fn send(&mut self, ev: Event) -> Vec<Command> {
        self.process(ev)
    }

    fn swap(&mut self, load: Box<dyn FnOnce() -> Option<LoadedModel> + Send>) {
        if let Some(m) = load() {
            self.process(Event::Update(Update::Model(ModelSwap::new(m))));
        }
    }
}

/// The daemon's live state, behind the status report and the dashboard.
#[derive(Debug, Clone)]
pub struct Live {
    pub bars_received: u64,
    pub last_bar: BTreeMap<String, DateTime<Utc>>,
    pub day_open_equity: Option<(chrono::NaiveDate, f64)>,
    pub equity: Vec<EquityPoint>,
    pub running: BTreeMap<String, TrainingView>,
    pub activity: String,
    pub started_at: DateTime<Utc>,
}

pub struct Host<P: RunPipeline> {
    pub config: Config,
    /// The main store: bars, retrain records.
    pub store: Store,
    pub registry: Registry,
    pub metrics: Arc<Metrics>,
    pub dashboard: Arc<SharedData>,
    pub retrainer: Retrainer<P>,
    /// The retrainer's progress (`Retrainer::with_progress`).
    pub progress: Option<mpsc::UnboundedReceiver<Progress>>,
    /// The control socket's requests (`control::server::serve`).
    pub calls: Option<mpsc::Receiver<Call>>,
    pub notifier: Notifier,
    /// Set by SIGHUP: reload what can be reloaded at the next `poll`.
    pub hangup: Arc<AtomicBool>,
    pub live: Live,
    /// Every retrain run that ended, in order.
    pub retrains: Vec<RunRecord>,
    /// Where alerts go (`[notify]`); off unless `with_alerts`.
    pub alerts: crate::alerts::Alerts,
    pub(super) watched: super::watch::Watched,
    /// When the dashboard's book was last read.
    book_at: std::sync::Mutex<Option<std::time::Instant>>,
}

/// How often the dashboard's book (trades, per-symbol P&L, price charts) is read from the store.
const BOOK_EVERY: std::time::Duration = std::time::Duration::from_secs(1);

impl<P: RunPipeline> Host<P> {
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        config: Config,
        store: Store,
        registry: Registry,
        metrics: Arc<Metrics>,
        dashboard: Arc<SharedData>,
        retrainer: Retrainer<P>,
        progress: Option<mpsc::UnboundedReceiver<Progress>>,
        calls: Option<mpsc::Receiver<Call>>,
        notifier: Notifier,
    ) -> Self {
        let live = Live {
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
            registry,
            metrics,
            dashboard,
            retrainer,
            progress,
            calls,
            notifier,
            hangup: Arc::new(AtomicBool::new(false)),
            live,
            retrains: Vec::new(),
            alerts: crate::alerts::Alerts::off(),
            watched: Default::default(),
            book_at: Default::default(),
        }
    }

    pub fn with_alerts(mut self, alerts: crate::alerts::Alerts) -> Self {
        self.alerts = alerts;
        self
    }

    /// A bar reached the engine (counted for status and metrics).
    pub fn saw_bar(&mut self, bar: &Bar) {
        self.metrics.bar(bar.symbol.as_str());
        self.live.bars_received += 1;
        self.live.last_bar.insert(bar.symbol.to_string(), bar.t);
    }

    /// A point of the equity curve; the trading day's first point sets the day's opening equity (the
    /// last equity of the day before, or `equity` itself on the first day).
    pub fn equity_point(&mut self, t: DateTime<Utc>, equity: f64, buy_hold: f64) {
        let day = t.date_naive();
        if self.live.day_open_equity.is_none_or(|(d0, _)| d0 != day) {
            let open = self.live.equity.last().map_or(equity, |p| p.equity);
            if let Some((d0, open0)) = self.live.day_open_equity {
                self.alert_day(d0, open0, open, self.watched.positions);
            }
            self.live.day_open_equity = Some((day, open));
        }
        self.live.equity.push(EquityPoint { t, equity, buy_hold });
    }

    pub fn set_activity(&mut self, activity: impl Into<String>) {
        self.live.activity = activity.into();
        self.notifier.status(&self.live.activity);
    }

    /// Retrain progress and outcomes (a promoted model goes to the engine), the control socket's requests
    /// (answered from `view`), a SIGHUP. Returns the orders a `flatten` asked for (a replay's engine), and
    /// whether the retrainer went idle.
    pub fn poll(&mut self, engine: &mut dyn EngineLink, view: &EngineView, clock: &dyn Clock) -> (Vec<Command>, bool) {
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
    pub fn reload(&mut self, engine: &mut dyn EngineLink) {
        let file = self.config.source.clone();
        let new = match Config::load(&file) {
            Ok(c) => c,
            Err(e) => {
                log::error!("SIGHUP: {e}; nothing reloaded, the running configuration stays");
                return;
            }
        };
        let json = |c: &Config| serde_json::to_value(c).unwrap_or_default();
        let (old_v, new_v) = (json(&self.config), json(&new));
        let mut refused: Vec<String> = Vec::new();
        let mut applied: Vec<&str> = Vec::new();
        if let (Some(o), Some(n)) = (old_v.as_object(), new_v.as_object()) {
            for (k, v) in n {
                if o.get(k) != Some(v) && k != "risk" && k != "retrain" {
                    refused.push(format!("[{k}]"));
                }
            }
        }
        let (old_r, new_r) = (&self.config.risk, &new.risk);
        if old_v["risk"] != new_v["risk"] {
            if old_r.daily_loss_limit_pct != new_r.daily_loss_limit_pct || old_r.kill_switch != new_r.kill_switch {
                refused.push("risk.daily_loss_limit_pct / risk.kill_switch".into());
            }
            let mut risk = new_r.clone();
            risk.daily_loss_limit_pct = old_r.daily_loss_limit_pct;
            risk.kill_switch = old_r.kill_switch;
            engine.send(Event::Update(Update::Limits(Box::new(crate::risk::Limits::from_config(&risk)))));
            self.config.risk = risk;
            applied.push("risk limits");
        }
        let without_schedule = |v: &serde_json::Value| {
            let mut v = v.clone();
            if let Some(o) = v.as_object_mut() {
                for k in ["schedule", "timezone", "enabled"] {
                    o.remove(k);
                }
            }
            v
        };
        if without_schedule(&old_v["retrain"]) != without_schedule(&new_v["retrain"]) {
            refused.push("[retrain] budgets and gate".into());
        }
        let (old_t, new_t) = (&self.config.retrain, &new.retrain);
        if old_t.enabled != new_t.enabled || old_v["retrain"]["schedule"] != new_v["retrain"]["schedule"] {
            self.retrainer.set_schedule(new_t.schedule.clone(), new_t.enabled);
            self.config.retrain.schedule = new_t.schedule.clone();
            self.config.retrain.enabled = new_t.enabled;
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

    fn serve_calls(&mut self, engine: &mut dyn EngineLink, view: &EngineView, clock: &dyn Clock) -> Vec<Command> {
        let mut out = Vec::new();
        let Some(rx) = self.calls.as_mut() else { return out };
        let mut calls = Vec::new();
        while let Ok(c) = rx.try_recv() {
            calls.push(c);
        }
        for (req, reply) in calls {
            let resp = match req {
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
                    self.set_activity("flattened and paused: no new orders until `tradebot resume`");
                    Response::done("flattening every position, then paused")
                }
                Request::Retrain { kind } => match self.retrainer.request(kind, "control socket", clock) {
                    Ok(()) => Response::done("retrain started"),
                    Err(e) => Response::error(e.to_string()),
                },
                Request::Promote { id, reason } => match self.registry.promote(&id, &reason) {
                    Ok(m) => {
                        log::info!("models: {} promoted to {} champion by hand ({reason})", m.id, m.kind.as_str());
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
                        log::info!("models: rolled back to {} as {} champion ({reason})", m.id, kind.as_str());
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

    /// The next `publish` reads the book afresh (the end of a replay).
    pub fn refresh_book(&self) {
        *self.book_at.lock().unwrap_or_else(|p| p.into_inner()) = None;
    }

    /// The status report, the metrics' gauges and the dashboard, from the engine's state in `view`, the
    /// registry and the runs on disk, and the engine's account store (its decisions and fills).
    pub fn publish(&self, view: &EngineView, account: Option<&Store>) {
        let st = self.status(view);
        self.metrics.observe_status(&st);
        if let Err(e) = super::status::keep_published(&self.store, &st, crate::clock::now()) {
            log::warn!("status: cannot keep the status for `tradebot status` while stopped: {e}");
        }
        let decisions = account.and_then(|s| s.tree::<DecisionRecord>(TreeName::Decisions).ok());
        let recent =
            decisions.as_ref().map(|d| recent_decisions(d, &self.config.market.symbols, 10)).unwrap_or_default();
        let (models, gate, training) = history(&self.registry, &self.store, &self.live);
        // The book reads every fill: at most once a second (a replay publishes at every bar).
        let due = {
            let mut at = self.book_at.lock().unwrap_or_else(|p| p.into_inner());
            let due = at.is_none_or(|t| t.elapsed() >= BOOK_EVERY);
            if due {
                *at = Some(std::time::Instant::now());
            }
            due
        };
        let book = if due {
            super::book::book(account, decisions.as_ref(), view, self.config.env.exec.fee_bps)
        } else {
            let d = crate::web::DashboardSource::snapshot(self.dashboard.as_ref());
            super::book::Book { trades: d.trades, symbols: d.symbols, prices: d.prices }
        };
        self.dashboard.set(DashboardData {
            status: st,
            trades: book.trades,
            symbols: book.symbols,
            prices: book.prices,
            equity: self.live.equity.clone(),
            decisions: recent,
            models,
            gate,
            training,
            logs: crate::logging::recent(),
        });
    }

    pub fn status(&self, view: &EngineView) -> StatusReport {
        let (config, live) = (&self.config, &self.live);
        let now = live.last_bar.values().max().copied().unwrap_or_else(crate::clock::now);
        let closes: BTreeMap<Symbol, f64> = view.closes.iter().cloned().collect();
        let positions: Vec<PositionStatus> = view
            .positions
            .iter()
            .map(|(s, q)| {
                let qty = q.to_f64().unwrap_or(f64::NAN);
                let price = closes.get(s).copied().unwrap_or(f64::NAN);
                PositionStatus { symbol: s.to_string(), qty, price, value: qty * price }
            })
            .collect();
        let equity = view.account.equity;
        let gross: f64 = positions.iter().map(|p| p.value.abs()).sum();
        let day_open = live.day_open_equity.map_or(equity, |(_, e)| e);
        let mut models = super::status::models(config, &self.store, now).unwrap_or_else(|e| {
            log::warn!("status: cannot read the registry or the runs: {e}");
            ModelsStatus::default()
        });
        // What the engine trades with, which is what the registry's champion is after a swap.
        models.ppo = view.policy_id.clone().or(models.ppo);
        models.lstm = view.probs_id.clone().or(models.lstm);
        models.retraining = live.running.keys().next().cloned();
        models.next_retrain = self.retrainer.next_due();
        StatusReport {
            version: STATUS_VERSION,
            daemon_running: true,
            mode: format!("{:?}", config.mode).to_lowercase(),
            pid: std::process::id(),
            started_at: Some(live.started_at),
            activity: match view.missing_model {
                Some(what) if !view.paused => format!(
                    "{}: no {what} champion fits this config; trading nothing until a retrain promotes one{}{}",
                    crate::control::status::NO_MODEL,
                    models.next_retrain.map(|t| format!(" (next scheduled retrain {t})")).unwrap_or_default(),
                    if live.activity == "trading" { String::new() } else { format!("; {}", live.activity) }
                ),
                _ => live.activity.clone(),
            },
            feed: FeedStatus {
                kind: format!("{:?}", config.feed.kind).to_lowercase(),
                // A replay reads the store: always "connected"; live, the stream's state.
                connected: config.feed.kind != crate::config::FeedKind::Alpaca
                    || self.metrics.feed_connected.get() == 1,
                reconnects: self.metrics.feed_reconnects.get(),
                last_bar: live.last_bar.clone(),
                bars_received: live.bars_received,
                stale: view.stale.clone(),
            },
            positions,
            open_orders: view.open_orders.clone(),
            equity,
            cash: view.account.cash,
            pnl_today: equity - day_open,
            models,
            risk: RiskStatus {
                kill_switch: view.kill_reason.is_some(),
                kill_reason: view.kill_reason.clone(),
                paused: view.paused,
                gross_exposure: if equity > 0.0 { gross / equity } else { 0.0 },
            },
            as_of: None,
        }
    }
}

fn on_progress(metrics: &Metrics, live: &mut Live, p: &Progress) {
    match p {
        Progress::Snapshot { kind, .. } => {
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
        Progress::Training { kind, line } => {
            metrics.training_progress(kind.as_str(), line);
            if let Some(v) = live.running.get_mut(kind.as_str()) {
                crate::retrain::record::add_to_curves(&mut v.curves, line);
                let done = line.get("env_steps").or_else(|| line.get("epoch")).and_then(|x| x.as_f64());
                let total = line.get("total_steps").or_else(|| line.get("max_epochs")).and_then(|x| x.as_f64());
                if let (Some(done), Some(total)) = (done, total) {
                    v.progress = Some(crate::web::data::Progress {
                        done,
                        total,
                        steps_per_s: crate::metrics::train_rate(line).unwrap_or(0.0),
                        eta_secs: line.get("eta_secs").and_then(|x| x.as_f64()).unwrap_or_else(|| {
                            // The LSTM reports epoch times: the epochs left at the last one's pace.
                            let epoch = line.get("epoch_secs").and_then(|x| x.as_f64()).unwrap_or(0.0);
                            (total - done).max(0.0) * epoch
                        }),
                    });
                }
            }
        }
        Progress::Evaluating { .. } | Progress::Finished(_) => {}
    }
}

fn recent_decisions(tree: &TypedTree<DecisionRecord>, symbols: &[Symbol], n: usize) -> Vec<DecisionView> {
    let Ok(recent) = tree.last_n(n) else { return Vec::new() };
    let mut out = Vec::new();
    for (_, r) in recent {
        let model = r.model_id.clone().or(r.lstm_model_id.clone()).unwrap_or_default();
        for (k, sym) in symbols.iter().enumerate() {
            let mut outputs = BTreeMap::new();
            if let Some(a) = r.actions.get(k) {
                outputs.insert("action".to_string(), f64::from(*a));
            }
            if let Some(Some(p)) = r.probs.get(k) {
                outputs.insert("p_down".to_string(), f64::from(p[0]));
                outputs.insert("p_up".to_string(), f64::from(p[2]));
            }
            if let Some(c) = r.closes.get(k) {
                outputs.insert("close".to_string(), *c);
            }
            let action = r
                .orders
                .iter()
                .find(|o| o.0 == sym.as_str())
                .map(|o| format!("{} {}", o.1, o.2))
                .or_else(|| r.note.clone().filter(|n| n.starts_with(&format!("{sym} ")) || !n.contains(": refused")))
                .unwrap_or_else(|| "hold".into());
            out.push(DecisionView { t: r.t, symbol: sym.to_string(), model_id: model.clone(), outputs, action });
        }
    }
    out
}

fn history(registry: &Registry, store: &Store, live: &Live) -> (Vec<ModelView>, Vec<GateView>, Vec<TrainingView>) {
    let models = registry
        .list()
        .map(|(ms, _)| {
            let mut v: Vec<ModelView> = ms
                .into_iter()
                .map(|m| ModelView {
                    id: m.id,
                    kind: m.kind.as_str().to_string(),
                    state: format!("{:?}", m.state).to_lowercase(),
                    created_at: m.created_at,
                    metrics: m.metrics,
                })
                .collect();
            v.sort_by_key(|m| std::cmp::Reverse(m.created_at));
            v
        })
        .unwrap_or_default();
    let runs = crate::retrain::record::list(store).unwrap_or_default();
    let gate = runs
        .iter()
        .map(|r| GateView {
            at: r.started_at,
            kind: r.kind.as_str().to_string(),
            candidate: r.candidate.clone(),
            outcome: r.outcome.as_str().to_string(),
            reason: r.reason(),
            numbers: r.decision.as_ref().map(|d| d.numbers.clone()).unwrap_or_default(),
        })
        .collect();
    let mut training: Vec<TrainingView> = live.running.values().cloned().collect();
    training.extend(runs.iter().map(|r| TrainingView {
        id: r.id.clone(),
        kind: r.kind.as_str().to_string(),
        started_at: r.started_at,
        outcome: r.outcome.as_str().to_string(),
        curves: r.curves.clone(),
        progress: None,
        metrics: r.train_metrics.clone(),
        gate: r.decision.as_ref().map(|d| (d.reason.clone(), crate::retrain::gate::numbers_line(&d.numbers))),
    }));
    (models, gate, training)
}
