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

pub(crate) const TELEGRAM_TOKEN_VAR: &str = "TRADEBOT_TELEGRAM_TOKEN";
pub(crate) const DISCORD_WEBHOOK_VAR: &str = "TRADEBOT_DISCORD_WEBHOOK";
/// Alerts waiting for delivery; more are dropped (logged) rather than held in memory.
const QUEUE: usize = 256;
/// Discord refuses longer messages.
const DISCORD_MAX: usize = 2000;

/// What happened.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub(crate) enum AlertKind {
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
pub(crate) struct Alert {
    pub event: AlertKind,
    pub text: String,
    pub at: DateTime<Utc>,
    pub details: serde_json::Value,
}

/// Where alerts go, with their secrets.
#[derive(Debug, Clone)]
pub(crate) enum Target {
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
    pub(crate) fn request(&self, alert: &Alert, mode: &str) -> (String, serde_json::Value) {
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

/// Why `[notify]`'s targets cannot be built: each message names the fix.
#[derive(Debug, thiserror::Error)]
pub(crate) enum TargetError {
    /// `notify.telegram_chat_id` without the bot's token.
    #[error(
        "notify.telegram_chat_id is set but no bot token: set {TELEGRAM_TOKEN_VAR} in the environment or as a systemd credential (LoadCredential={TELEGRAM_TOKEN_VAR}:FILE)"
    )]
    NoTelegramToken,
    /// `notify.discord = true` without the webhook's URL.
    #[error(
        "notify.discord = true but no webhook URL: set {DISCORD_WEBHOOK_VAR} in the environment or as a systemd credential (LoadCredential={DISCORD_WEBHOOK_VAR}:FILE)"
    )]
    NoDiscordWebhook,
    /// The Discord webhook's secret does not parse as a URL.
    #[error("{DISCORD_WEBHOOK_VAR} is not a URL: copy the webhook's URL from Discord's channel settings")]
    DiscordNotUrl,
    /// A credential file exists and cannot be read.
    #[error("cannot read credential {}: {error}", path.display())]
    Read {
        /// The file.
        path: std::path::PathBuf,
        /// Why (in the message: no source, so that it is said once).
        error: std::io::Error,
    },
}

/// The targets `[notify]` names, their secrets read through `env` (the environment, then files of the same
/// names in `$CREDENTIALS_DIRECTORY`). A target whose secret is missing is an error naming the fix.
pub(crate) fn targets(cfg: &NotifyConfig, env: impl Fn(&str) -> Option<String>) -> Result<Vec<Target>, TargetError> {
    let secret = |name: &str| -> Result<Option<Secret>, TargetError> {
        if let Some(v) = env(name).filter(|v| !v.trim().is_empty()) {
            return Ok(Some(Secret::new(v.trim())));
        }
        let Some(dir) = env("CREDENTIALS_DIRECTORY") else { return Ok(None) };
        let p = std::path::Path::new(&dir).join(name);
        match std::fs::read_to_string(&p) {
            Ok(s) if !s.trim().is_empty() => Ok(Some(Secret::new(s.trim()))),
            Ok(_) => Ok(None),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(error) => Err(TargetError::Read { path: p, error }),
        }
    };
    let mut out = Vec::new();
    if let Some(u) = &cfg.webhook_url {
        out.push(Target::Webhook(u.clone()));
    }
    if let Some(chat_id) = &cfg.telegram_chat_id {
        let token = secret(TELEGRAM_TOKEN_VAR)?.ok_or(TargetError::NoTelegramToken)?;
        out.push(Target::Telegram { api: cfg.telegram_api.clone(), token, chat_id: chat_id.clone() });
    }
    if cfg.discord {
        let url = secret(DISCORD_WEBHOOK_VAR)?.ok_or(TargetError::NoDiscordWebhook)?;
        if url::Url::parse(url.expose()).is_err() {
            return Err(TargetError::DiscordNotUrl);
        }
        out.push(Target::Discord(url));
    }
    Ok(out)
}

/// How long a daemon that stops waits for its queued alerts before it exits (`Alerts::flush`).
pub(crate) const SHUTDOWN_WAIT: Duration = Duration::from_secs(5);

/// The alerts queued and not yet delivered or given up, oldest first: (event, text).
#[derive(Debug, Default)]
struct Pending {
    alerts: std::sync::Mutex<std::collections::VecDeque<(AlertKind, String)>>,
    changed: std::sync::Condvar,
}

impl Pending {
    fn lock(&self) -> std::sync::MutexGuard<'_, std::collections::VecDeque<(AlertKind, String)>> {
        self.alerts.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The oldest alert is done with (delivered, or given up and logged).
    fn done(&self) {
        self.lock().pop_front();
        self.changed.notify_all();
    }
}

/// The sending side of the alert queue; `off()` sends nothing.
#[derive(Debug, Clone)]
pub(crate) struct Alerts {
    tx: Option<mpsc::Sender<Alert>>,
    pending: std::sync::Arc<Pending>,
}

impl Alerts {
    pub(crate) fn off() -> Alerts {
        Alerts { tx: None, pending: Default::default() }
    }

    /// Starts the delivery task on `rt` (nothing when there is no target).
    pub(crate) fn start(targets: Vec<Target>, cfg: &NotifyConfig, mode: &str, rt: &tokio::runtime::Handle) -> Alerts {
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
        let pending = std::sync::Arc::new(Pending::default());
        let done = pending.clone();
        rt.spawn(deliver_each(rx, targets, mode.to_string(), policy, move || done.done()));
        Alerts { tx: Some(tx), pending }
    }

    /// Waits up to `wait` for the queued alerts to go out (delivered, or given up and logged), then
    /// logs a line for each still queued: at shutdown nothing vanishes without a word. Returns how many.
    pub(crate) fn flush(&self, wait: Duration) -> usize {
        if self.tx.is_none() {
            return 0;
        }
        let deadline = std::time::Instant::now() + wait;
        let mut left = self.pending.lock();
        while !left.is_empty() {
            let now = std::time::Instant::now();
            if now >= deadline {
                break;
            }
            left = self.pending.changed.wait_timeout(left, deadline - now).unwrap_or_else(|p| p.into_inner()).0;
        }
        for (event, text) in left.iter() {
            log::warn!(
                "alerts: {} alert lost at shutdown (not delivered within {} s): {text}",
                serde_json::to_string(event).unwrap_or_default().trim_matches('"'),
                wait.as_secs_f64()
            );
        }
        left.len()
    }

    pub(crate) fn is_on(&self) -> bool {
        self.tx.is_some()
    }

    /// Queues `alert`; never waits.
    pub(crate) fn send(&self, alert: Alert) {
        let Some(tx) = &self.tx else { return };
        let entry = (alert.event, alert.text.clone());
        // Counted before it is queued: the delivery may end before `try_send` returns.
        self.pending.lock().push_back(entry);
        if let Err(e) = tx.try_send(alert) {
            self.pending.lock().pop_back();
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
pub(crate) struct Delivery {
    pub timeout: Duration,
    pub retries: u32,
    pub first_wait: Duration,
}

/// The delivery task: each alert to each target, in order, until the queue closes.
pub(crate) async fn deliver(rx: mpsc::Receiver<Alert>, targets: Vec<Target>, mode: String, policy: Delivery) {
    deliver_each(rx, targets, mode, policy, || {}).await
}

/// Why a request failed, in words: the error and each cause that adds something (the connection
/// refused, the DNS failure, the TLS error), after the target's host and port. Never the URL's path:
/// Telegram's holds the bot token.
fn failure(e: reqwest::Error, url: &str) -> String {
    use std::error::Error as _;
    let e = e.without_url();
    let mut parts = vec![e.to_string()];
    let mut source = e.source();
    while let Some(s) = source {
        let text = s.to_string();
        if !parts.iter().any(|p| p.contains(&text)) {
            parts.push(text);
        }
        source = s.source();
    }
    let place = url::Url::parse(url)
        .ok()
        .and_then(|u| Some(format!("{}:{}", u.host_str()?, u.port_or_known_default()?)))
        .unwrap_or_else(|| "the target".into());
    format!("{place}: {}", parts.join(": "))
}

/// `deliver`, calling `done` after each alert is delivered or given up.
async fn deliver_each(
    mut rx: mpsc::Receiver<Alert>,
    targets: Vec<Target>,
    mode: String,
    policy: Delivery,
    done: impl Fn(),
) {
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
                    Err(e) => failure(e, &url),
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
        done();
    }
}

#[cfg(test)]
pub(crate) mod tests;
