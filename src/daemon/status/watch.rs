//! What the host watches to alert the trader (`crate::alerts`): the kill switch tripping, each retrain's
//! outcome with the gate's numbers, the market feed down longer than `notify.feed_down_mins` (and back),
//! and one summary a trading day (live only: a replay's simulated days would flood the phone). Each
//! alert is sent once per change, never per tick.

use super::state::Watched;
use crate::alerts::{Alert, AlertKind};
use crate::config::FeedKind;
use crate::daemon::host::Host;
use crate::daemon::retrainer::RunPipeline;
use crate::domain::money;
use crate::live::view::EngineView;
use crate::retrain::{RunOutcome, RunRecord};
use chrono::{DateTime, NaiveDate, Utc};

fn alert(event: AlertKind, text: String, at: DateTime<Utc>, details: serde_json::Value) -> Alert {
    Alert { event, text, at, details }
}

impl<P: RunPipeline> Host<P> {
    /// Between two events, at `now` (the wall clock): the kill switch and the feed.
    pub(in crate::daemon) fn watch(&mut self, view: &EngineView, now: DateTime<Utc>) {
        self.watched.positions = view.positions.len();
        if !self.alerts.is_on() {
            return;
        }
        match (&view.kill_reason, self.watched.kill) {
            (Some(reason), false) => {
                self.watched.kill = true;
                self.alerts.send(alert(
                    AlertKind::KillSwitch,
                    format!(
                        "kill switch tripped: {reason}; no new orders until `tradebot risk clear` (equity {})",
                        money(view.account.equity)
                    ),
                    now,
                    serde_json::json!({ "reason": reason, "equity": view.account.equity }),
                ));
            }
            (None, true) => self.watched.kill = false,
            _ => {}
        }
        if view.protect_failures.count > self.watched.protect_failures {
            self.watched.protect_failures = view.protect_failures.count;
            let last = view.protect_failures.last.clone().unwrap_or_default();
            self.alerts.send(alert(
                AlertKind::ProtectFailed,
                format!("a protective sell did not go out: {last}"),
                now,
                serde_json::json!({ "failures": view.protect_failures.count, "last": last }),
            ));
        }
        let limit = self.config.notify.feed_down_mins;
        if self.config.feed.kind != FeedKind::Alpaca || limit == 0 {
            return;
        }
        let connected = self.metrics.feed_connected.get() == 1;
        match (connected, self.watched.feed_down_since) {
            (false, None) => self.watched.feed_down_since = Some(now),
            (false, Some(since))
                if !self.watched.feed_alerted && now - since >= chrono::Duration::minutes(limit as i64) =>
            {
                self.watched.feed_alerted = true;
                let mins = (now - since).num_minutes();
                self.alerts.send(alert(
                    AlertKind::FeedDown,
                    format!(
                        "market feed down for {mins} min (since {}); reconnecting, no new bars meanwhile",
                        since.format("%H:%M UTC")
                    ),
                    now,
                    serde_json::json!({ "since": since.to_rfc3339(), "minutes": mins }),
                ));
            }
            (true, Some(since)) => {
                if self.watched.feed_alerted {
                    let mins = (now - since).num_minutes();
                    self.alerts.send(alert(
                        AlertKind::FeedBack,
                        format!("market feed back after {mins} min"),
                        now,
                        serde_json::json!({ "since": since.to_rfc3339(), "minutes": mins }),
                    ));
                }
                self.watched = Watched { feed_down_since: None, feed_alerted: false, ..self.watched.clone() };
            }
            _ => {}
        }
    }

    /// A retrain ended: promoted, kept (with the gate's numbers) or failed.
    pub(in crate::daemon) fn alert_retrain(&self, r: &RunRecord) {
        let kind = r.kind.as_str();
        let numbers = r.decision.as_ref().map(|d| crate::retrain::gate::numbers_line(&d.numbers)).unwrap_or_default();
        let champion = r.champion_before.as_deref().unwrap_or("no champion");
        let candidate = r.candidate.as_deref().unwrap_or("no candidate");
        let (event, text) = match r.outcome {
            RunOutcome::Promoted => (
                AlertKind::Promoted,
                format!("retrain {kind}: {candidate} promoted over {champion}: {}. {numbers}", r.reason()),
            ),
            RunOutcome::Kept => (
                AlertKind::Kept,
                format!("retrain {kind}: {champion} kept, {candidate} refused: {}. {numbers}", r.reason()),
            ),
            RunOutcome::Failed | RunOutcome::Interrupted | RunOutcome::Skipped => (
                AlertKind::RetrainFailed,
                format!("retrain {kind} {}: {}; {champion} keeps trading", r.outcome.as_str(), r.reason()),
            ),
            RunOutcome::Running => return,
        };
        let numbers = r.decision.as_ref().map(|d| serde_json::json!(d.numbers)).unwrap_or_default();
        let details = serde_json::json!({
            "kind": kind, "run": r.id, "outcome": r.outcome.as_str(), "candidate": r.candidate,
            "champion_before": r.champion_before, "champion_after": r.champion_after, "numbers": numbers,
        });
        self.alerts.send(alert(
            event,
            text.trim_end_matches([' ', '.']).to_string() + ".",
            crate::clock::now(),
            details,
        ));
    }

    /// The day `day` ended at `close` equity after opening at `open` (live only).
    pub(in crate::daemon) fn alert_day(&self, day: NaiveDate, open: f64, close: f64, positions: usize) {
        if !self.config.notify.daily_summary || self.config.feed.kind != FeedKind::Alpaca {
            return;
        }
        let pnl = close - open;
        let pct = if open > 0.0 { pnl / open * 100.0 } else { 0.0 };
        let sign = if pnl < 0.0 { "" } else { "+" };
        self.alerts.send(alert(
            AlertKind::DailySummary,
            format!("{day}: equity {} (day {sign}{}, {pct:+.2}%), {positions} positions", money(close), money(pnl)),
            crate::clock::now(),
            serde_json::json!({ "day": day.to_string(), "open_equity": open, "equity": close, "pnl": pnl, "positions": positions }),
        ));
    }
}

#[cfg(test)]
mod tests;
