//! Alerts to the trader's phone: the kill switch tripped, a retrain promoted a model, kept the champion or
//! failed (with the gate's numbers), the market feed down for longer than `notify.feed_down_mins`, and a
//! daily summary. Each goes to every target of `[notify]`: a generic JSON webhook, Telegram's Bot API
//! (`sendMessage`) and a Discord webhook, in the formats Freqtrade's users know.
//!
//! `Alerts::send` never blocks: it puts the alert in a bounded queue (a full queue drops it, logged) and a
//! task on the runtime delivers it, each attempt within `notify.timeout_secs`, retried `notify.retries`
//! times with a doubling wait; a delivery that fails every attempt is logged at WARN and dropped. The
//! Telegram token and the Discord URL are `Secret`s from the environment or systemd credentials.

use crate::config::{NotifyConfig, Secret};
use chrono::{DateTime, Utc};
use serde::Serialize;
use std::time::Duration;
use tokio::sync::mpsc;

pub const TELEGRAM_TOKEN_VAR: &str = "TRADEBOT_TELEGRAM_TOKEN";
pub const DISCORD_WEBHOOK_VAR: &str = "TRADEBOT_DISCORD_WEBHOOK";
/// Alerts waiting for delivery; more are dropped (logged) rather than held in memory.
const QUEUE: usize = 256;
/// Discord refuses longer messages.
const DISCORD_MAX: usize = 2000;

/// What happened.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum AlertKind {
    KillSwitch,
    /// A protective sell (stop, the kill switch's flatten, a flatten) was refused or rejected.
    ProtectFailed,
    Promoted,
    Kept,
    RetrainFailed,
    FeedDown,
    FeedBack,
    DailySummary,
    /// `tradebot run` stopped on an error (the unit may not restart it): sent before the process exits.
    Fatal,
}

/// One alert: a line for people, and the numbers behind it for machines (the generic webhook's `details`).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Alert {
    pub event: AlertKind,
    pub text: String,
    pub at: DateTime<Utc>,
    pub details: serde_json::Value,
}

/// Where alerts go, with their secrets.
#[derive(Debug, Clone)]
pub enum Target {
    Webhook(url::Url),
    Telegram { api: url::Url, token: Secret, chat_id: String },
    Discord(Secret),
}

impl Target {
    fn name(&self) -> &'static str {
        match self {
            Target::Webhook(_) => "webhook",
            Target::Telegram { .. } => "telegram",
            Target::Discord(_) => "discord",
        }
    }

    /// The URL and JSON body of `alert` for this target; `mode` is "paper", "live" or "replay".
    pub fn request(&self, alert: &Alert, mode: &str) -> (String, serde_json::Value) {
        let line = format!("tradebot ({mode}): {}", alert.text);
        match self {
            Target::Webhook(u) => (
                u.to_string(),
                serde_json::json!({
                    "event": alert.event, "text": alert.text, "at": alert.at.to_rfc3339(),
                    "mode": mode, "details": alert.details,
                }),
            ),
            Target::Telegram { api, token, chat_id } => (
                format!("{}/bot{}/sendMessage", api.as_str().trim_end_matches('/'), token.expose()),
                serde_json::json!({ "chat_id": chat_id, "text": line, "disable_web_page_preview": true }),
            ),
            Target::Discord(url) => {
                let content: String = line.chars().take(DISCORD_MAX).collect();
                (url.expose().to_string(), serde_json::json!({ "content": content }))
            }
        }
    }
}

/// The targets `[notify]` names, their secrets read through `env` (the environment, then files of the same
/// names in `$CREDENTIALS_DIRECTORY`). A target whose secret is missing is an error naming the fix.
pub fn targets(cfg: &NotifyConfig, env: impl Fn(&str) -> Option<String>) -> Result<Vec<Target>, String> {
    let secret = |name: &str| -> Result<Option<Secret>, String> {
        if let Some(v) = env(name).filter(|v| !v.trim().is_empty()) {
            return Ok(Some(Secret::new(v.trim())));
        }
        let Some(dir) = env("CREDENTIALS_DIRECTORY") else { return Ok(None) };
        let p = std::path::Path::new(&dir).join(name);
        match std::fs::read_to_string(&p) {
            Ok(s) if !s.trim().is_empty() => Ok(Some(Secret::new(s.trim()))),
            Ok(_) => Ok(None),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(format!("cannot read credential {}: {e}", p.display())),
        }
    };
    let mut out = Vec::new();
    if let Some(u) = &cfg.webhook_url {
        out.push(Target::Webhook(u.clone()));
    }
    if let Some(chat_id) = &cfg.telegram_chat_id {
        let token = secret(TELEGRAM_TOKEN_VAR)?.ok_or_else(|| {
            format!("notify.telegram_chat_id is set but no bot token: set {TELEGRAM_TOKEN_VAR} in the environment or as a systemd credential (LoadCredential={TELEGRAM_TOKEN_VAR}:FILE)")
        })?;
        out.push(Target::Telegram { api: cfg.telegram_api.clone(), token, chat_id: chat_id.clone() });
    }
    if cfg.discord {
        let url = secret(DISCORD_WEBHOOK_VAR)?.ok_or_else(|| {
            format!("notify.discord = true but no webhook URL: set {DISCORD_WEBHOOK_VAR} in the environment or as a systemd credential (LoadCredential={DISCORD_WEBHOOK_VAR}:FILE)")
        })?;
        if url::Url::parse(url.expose()).is_err() {
            return Err(format!(
                "{DISCORD_WEBHOOK_VAR} is not a URL: copy the webhook's URL from Discord's channel settings"
            ));
        }
        out.push(Target::Discord(url));
    }
    Ok(out)
}

/// The sending side of the alert queue; `off()` sends nothing.
#[derive(Debug, Clone)]
pub struct Alerts {
    tx: Option<mpsc::Sender<Alert>>,
}

impl Alerts {
    pub fn off() -> Alerts {
        Alerts { tx: None }
    }

    /// Starts the delivery task on `rt` (nothing when there is no target).
    pub fn start(targets: Vec<Target>, cfg: &NotifyConfig, mode: &str, rt: &tokio::runtime::Handle) -> Alerts {
        if targets.is_empty() {
            return Alerts::off();
        }
        let names: Vec<&str> = targets.iter().map(Target::name).collect();
        log::info!("alerts: to {}", names.join(", "));
        let (tx, rx) = mpsc::channel(QUEUE);
        let policy = Delivery {
            timeout: Duration::from_secs(cfg.timeout_secs),
            retries: cfg.retries,
            first_wait: Duration::from_secs(1),
        };
        rt.spawn(deliver(rx, targets, mode.to_string(), policy));
        Alerts { tx: Some(tx) }
    }

    pub fn is_on(&self) -> bool {
        self.tx.is_some()
    }

    /// Queues `alert`; never waits.
    pub fn send(&self, alert: Alert) {
        let Some(tx) = &self.tx else { return };
        if let Err(e) = tx.try_send(alert) {
            let (mpsc::error::TrySendError::Full(a) | mpsc::error::TrySendError::Closed(a)) = e;
            log::warn!(
                "alerts: {} alert dropped: the delivery queue is full or stopped",
                serde_json::to_string(&a.event).unwrap_or_default()
            );
        }
    }
}

/// How each alert is delivered.
#[derive(Debug, Clone, Copy)]
pub struct Delivery {
    pub timeout: Duration,
    pub retries: u32,
    pub first_wait: Duration,
}

/// The delivery task: each alert to each target, in order, until the queue closes.
pub async fn deliver(mut rx: mpsc::Receiver<Alert>, targets: Vec<Target>, mode: String, policy: Delivery) {
    let client = match reqwest::Client::builder().timeout(policy.timeout).build() {
        Ok(c) => c,
        Err(e) => {
            log::error!("alerts: cannot build an HTTP client ({e}); no alert will be sent");
            return;
        }
    };
    while let Some(alert) = rx.recv().await {
        for t in &targets {
            let (url, body) = t.request(&alert, &mode);
            let mut wait = policy.first_wait;
            let mut attempt = 0;
            loop {
                let err = match client.post(&url).json(&body).send().await {
                    Ok(r) if r.status().is_success() => break,
                    Ok(r) => format!("HTTP {}", r.status()),
                    // Without the URL: Telegram's holds the bot token.
                    Err(e) => e.without_url().to_string(),
                };
                if attempt >= policy.retries {
                    log::warn!(
                        "alerts: {} not delivered to {} after {} attempts: {err}",
                        alert.text,
                        t.name(),
                        attempt + 1
                    );
                    break;
                }
                attempt += 1;
                tokio::time::sleep(wait).await;
                wait *= 2;
            }
        }
    }
}

#[cfg(test)]
pub(crate) mod tests;
