//! The last word of a failing `tradebot run`: an alert to every `[notify]` target before it exits.

use std::time::Duration;

/// How long a failing `tradebot run` waits for its last alert before it exits.
pub(super) const FATAL_ALERT_WAIT: Duration = Duration::from_secs(5);

/// The alert a failing `tradebot run` sends before it exits: the error and its causes, to every
/// `[notify]` target (none configured: nothing), on a runtime of its own, waiting at most
/// `FATAL_ALERT_WAIT` for the deliveries. An exit that systemd does not restart (a bad config, refused
/// keys, an unusable state directory, a damaged store) reaches a person this way.
pub(super) fn alert_fatal(config: &crate::config::Config, mode: &str, error: &anyhow::Error) {
    use crate::alerts::{Alert, AlertKind, Delivery, deliver, targets};
    let targets = match targets(&config.notify, |k| std::env::var(k).ok()) {
        Ok(t) if t.is_empty() => return,
        Ok(t) => t,
        Err(e) => {
            log::warn!("alerts: the fatal error is not sent: {e}");
            return;
        }
    };
    let causes: Vec<String> = error.chain().map(|c| c.to_string()).collect();
    let alert = Alert {
        event: AlertKind::Fatal,
        text: format!("stopped: {}", causes.join(": ")),
        at: chrono::Utc::now(),
        details: serde_json::json!({ "causes": causes }),
    };
    let rt = match tokio::runtime::Builder::new_current_thread().enable_all().build() {
        Ok(rt) => rt,
        Err(e) => {
            log::warn!("alerts: the fatal error is not sent (no runtime: {e})");
            return;
        }
    };
    let (tx, rx) = tokio::sync::mpsc::channel(1);
    if tx.try_send(alert).is_err() {
        return;
    }
    drop(tx);
    let policy = Delivery {
        timeout: Duration::from_secs(config.notify.timeout_secs).min(FATAL_ALERT_WAIT),
        retries: config.notify.retries.min(2),
        first_wait: Duration::from_millis(500),
    };
    let delivered = rt.block_on(async {
        tokio::time::timeout(FATAL_ALERT_WAIT, deliver(rx, targets, mode.to_string(), policy)).await
    });
    if delivered.is_err() {
        log::warn!("alerts: the fatal error was not delivered within {} s", FATAL_ALERT_WAIT.as_secs());
    }
}
