//! The `[notify]` section: where alerts go (the daemon's alert queue). Each target is used when it is set: a
//! generic JSON webhook (`webhook_url`), Telegram (`telegram_chat_id`, with the bot token from
//! `$TRADEBOT_TELEGRAM_TOKEN` or the systemd credential of that name) and Discord (`discord = true`, with
//! the webhook URL, which holds its token, from `$TRADEBOT_DISCORD_WEBHOOK` or the credential). Secrets
//! never come from the file.

use super::Checker;
use super::raw::RawNotify;
use serde::Serialize;
use url::Url;

pub(crate) const TELEGRAM_API: &str = "https://api.telegram.org";

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct NotifyConfig {
    /// A generic JSON POST (`{"event", "text", "at", "mode", "details"}`).
    pub webhook_url: Option<Url>,
    /// Telegram's chat to send to.
    pub telegram_chat_id: Option<String>,
    /// Telegram's Bot API (another base URL for a proxy or a test).
    pub telegram_api: Url,
    /// Send to the Discord webhook from the credentials.
    pub discord: bool,
    /// Alert when the market feed has been down this long (minutes; 0: never).
    pub feed_down_mins: u64,
    /// One summary a trading day (equity, the day's P&L, positions), when the next day's first bar closes.
    pub daily_summary: bool,
    /// Each delivery attempt's limit, in seconds.
    pub timeout_secs: u64,
    /// Attempts after the first failed one, with a doubling wait from one second.
    pub retries: u32,
    /// Answer commands sent to the bot (`/status`, `/pause`, ...; the `telegram` module).
    pub telegram_commands: bool,
    /// The chats whose commands are answered (default: `telegram_chat_id`); others are ignored.
    pub telegram_allowed_chats: Vec<String>,
}

impl Checker {
    pub(super) fn notify(&mut self, r: RawNotify) -> NotifyConfig {
        let webhook_url = r
            .webhook_url
            .as_deref()
            .map(|u| self.url("notify.webhook_url", Some(u), "https://example.com/hook", &["http", "https"]));
        let telegram_api = self.url("notify.telegram_api", r.telegram_api.as_deref(), TELEGRAM_API, &["http", "https"]);
        let telegram_chat_id = r.telegram_chat_id.map(|s| s.trim().to_string());
        if telegram_chat_id.as_deref() == Some("") {
            self.problem(
                "notify.telegram_chat_id is empty: set the chat's id (a number, or @channel) or remove the key"
                    .to_string(),
            );
        }
        let timeout_secs = r.timeout_secs.unwrap_or(10);
        if !(1..=300).contains(&timeout_secs) {
            self.problem(format!("notify.timeout_secs = {timeout_secs}: must be 1 to 300"));
        }
        let retries = r.retries.unwrap_or(3);
        if retries > 10 {
            self.problem(format!("notify.retries = {retries}: at most 10"));
        }
        let telegram_commands = r.telegram_commands.unwrap_or(false);
        let telegram_allowed_chats: Vec<String> = match r.telegram_allowed_chats {
            Some(v) => v.into_iter().map(|s| s.trim().to_string()).collect(),
            None => telegram_chat_id.iter().cloned().collect(),
        };
        if telegram_allowed_chats.iter().any(String::is_empty) {
            self.problem(
                "notify.telegram_allowed_chats has an empty chat id: list the chats' ids (numbers)".to_string(),
            );
        }
        if telegram_commands && telegram_chat_id.is_none() {
            self.problem(
                "notify.telegram_commands = true needs the bot's chat: set notify.telegram_chat_id (and the token in \
                 $TRADEBOT_TELEGRAM_TOKEN)"
                    .to_string(),
            );
        }
        NotifyConfig {
            telegram_commands,
            telegram_allowed_chats,
            webhook_url,
            telegram_chat_id,
            telegram_api,
            discord: r.discord.unwrap_or(false),
            feed_down_mins: self.count("notify.feed_down_mins", r.feed_down_mins, 5, 0, 10_080),
            daily_summary: r.daily_summary.unwrap_or(true),
            timeout_secs,
            retries,
        }
    }
}
