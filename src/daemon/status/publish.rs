//! The host's publishing: the status report (for the control socket, `tradebot status` while stopped,
//! and `/metrics`) and the dashboard's data, from an `EngineView`, the registry and the runs on disk, and
//! the engine's account store.

use crate::control::StatusReport;
use crate::control::report::{FeedStatus, ModelsStatus, PositionStatus, RiskStatus, STATUS_VERSION};
use crate::daemon::host::{DaemonState, Host};
use crate::daemon::retrainer::RunPipeline;
use crate::domain::Symbol;
use crate::engine::DecisionRecord;
use crate::live::view::EngineView;
use crate::models::Registry;
use crate::store::{Store, TreeName, TypedTree};
use crate::web::data::{DashboardData, DecisionView, GateView, ModelView, TrainingView};
use rust_decimal::prelude::ToPrimitive;
use std::collections::BTreeMap;

/// How often the dashboard's book (trades, per-symbol P&L, price charts) is read from the store.
const BOOK_EVERY: std::time::Duration = std::time::Duration::from_secs(1);

impl<P: RunPipeline> Host<P> {
    /// The next `publish` reads the book afresh (the end of a replay).
    pub(crate) fn refresh_book(&self) {
        *self.book_at.lock().unwrap_or_else(|p| p.into_inner()) = None;
    }

    /// The status report, the metrics' gauges and the dashboard, from the engine's state in `view`, the
    /// registry and the runs on disk, and the engine's account store (its decisions and fills).
    pub(crate) fn publish(&self, view: &EngineView, account: Option<&Store>) {
        let st = self.status(view);
        self.metrics.observe_status(&st);
        // A replay's feed is the store, always connected (as the status says); live, the stream sets it.
        if self.config.feed.kind != crate::config::FeedKind::Alpaca {
            self.metrics.feed_connected.set(1);
        }
        if let Err(e) = super::offline::keep_published(&self.store, &st, crate::clock::now()) {
            log::warn!("status: cannot keep the status for `tradebot status` while stopped: {e}");
        }
        let decisions = account.and_then(|s| s.tree::<DecisionRecord>(TreeName::Decisions).ok());
        let recent =
            decisions.as_ref().map(|d| recent_decisions(d, &self.config.market.symbols, 10)).unwrap_or_default();
        let (models, gate, training) = history(&self.registry, &self.store, &self.live);
        // The book reads every fill: at most once a second (a replay publishes at every bar); between two
        // reads the last one is shown.
        // The searches too (they change only when one is stored): not read again at every bar of a replay.
        let (book, studies) = {
            let mut cached = self.book_at.lock().unwrap_or_else(|p| p.into_inner());
            match cached.as_ref() {
                Some((at, book, studies)) if at.elapsed() < BOOK_EVERY => (book.clone(), studies.clone()),
                _ => {
                    let mut book = super::book::book(account, decisions.as_ref(), view, self.config.env.exec.fee_bps);
                    crate::web::data::add_stored_bars(&mut book.prices, &self.store, self.config.market.timeframe);
                    let studies = crate::retrain::study_record::recent(&self.store, 3).unwrap_or_default();
                    *cached = Some((std::time::Instant::now(), book.clone(), studies.clone()));
                    (book, studies)
                }
            }
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
            studies,
            trailing_stop: self.config.env.exec.trailing_stop,
            timeframe: self.config.market.timeframe.to_string(),
        });
    }

    pub(crate) fn status(&self, view: &EngineView) -> StatusReport {
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
        let mut models = super::offline::models(config, &self.store, now).unwrap_or_else(|e| {
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
            mode: config.mode.to_string(),
            pid: std::process::id(),
            started_at: Some(live.started_at),
            activity: match view.missing_model {
                Some(what) if !view.paused => format!(
                    "{}: no {what} champion fits this config; trading nothing until a retrain promotes one{}{}",
                    crate::control::report::NO_MODEL,
                    models.next_retrain.map(|t| format!(" (next scheduled retrain {t})")).unwrap_or_default(),
                    if live.activity == "trading" { String::new() } else { format!("; {}", live.activity) }
                ),
                _ => match &view.flatten {
                    Some(f) if view.paused && live.activity.starts_with("flatten") => flatten_activity(f),
                    _ => live.activity.clone(),
                },
            },
            feed: FeedStatus {
                kind: config.feed.kind.to_string(),
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
            flatten: view.flatten.clone(),
            as_of: None,
        }
    }
}

/// The status's activity after a flatten: "flattened" only once every sell went out.
fn flatten_activity(f: &crate::control::report::FlattenStatus) -> String {
    if !f.failed.is_empty() {
        format!("flatten FAILED for {}; paused: no new orders until `tradebot resume`", f.failed.join("; "))
    } else if !f.waiting.is_empty() {
        format!("flattening: the sells of {} wait for the cancel of our buys; paused", f.waiting.join(", "))
    } else if !f.unconfirmed.is_empty() {
        format!(
            "flattening: the sells of {} are sent, not yet accepted by the broker; paused",
            f.unconfirmed.join(", ")
        )
    } else {
        "flattened and paused: no new orders until `tradebot resume`".to_string()
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

fn history(
    registry: &Registry,
    store: &Store,
    live: &DaemonState,
) -> (Vec<ModelView>, Vec<GateView>, Vec<TrainingView>) {
    let models = registry
        .list()
        .map(|(ms, _)| {
            let mut v: Vec<ModelView> = ms
                .into_iter()
                .map(|m| ModelView {
                    id: m.id,
                    kind: m.kind.as_str().to_string(),
                    state: m.state.as_str().to_string(),
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
