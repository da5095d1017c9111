//! A Telegram bot you can talk to (`notify.telegram_commands = true`), as Freqtrade's users have it:
//! `/status`, `/positions`, `/profit [days]`, `/balance`, `/models` answered from the dashboard's data;
//! `/pause`, `/resume`, `/retrain [kind]` and `/flatten` (after its confirmation button) sent to the daemon
//! on the control channel and audited as the control socket's requests are. It long-polls the Bot API
//! with the token and API of the alerts' Telegram target; only the chats of
//! `notify.telegram_allowed_chats` (default: `notify.telegram_chat_id`) are answered.

pub(crate) mod api;
pub(crate) mod bot;
pub(crate) mod commands;

use crate::alerts::Target;
use crate::config::NotifyConfig;
use crate::control::server::Call;
use crate::web::data::DashboardSource;
use std::sync::Arc;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

/// Why the bot cannot start.
#[derive(Debug, thiserror::Error)]
pub(crate) enum StartError {
    /// `notify.telegram_commands` is set but no Telegram target (chat id and token) is configured.
    #[error(
        "notify.telegram_commands = true needs the bot: set notify.telegram_chat_id and the token in ${}",
        crate::alerts::TELEGRAM_TOKEN_VAR
    )]
    NoBot,
}

/// Starts the bot on `rt` when `cfg.telegram_commands` is set. `Err`: commands are asked for without a
/// Telegram target (its chat id and token) to answer with.
pub(crate) fn start(
    cfg: &NotifyConfig,
    targets: &[Target],
    calls: mpsc::Sender<Call>,
    data: Arc<dyn DashboardSource>,
    rt: &tokio::runtime::Handle,
    shutdown: CancellationToken,
) -> Result<(), StartError> {
    if !cfg.telegram_commands {
        return Ok(());
    }
    let Some((api, token)) = targets.iter().find_map(|t| match t {
        Target::Telegram { api, token, .. } => Some((api.clone(), token.clone())),
        _ => None,
    }) else {
        return Err(StartError::NoBot);
    };
    let bot = bot::Bot::new(api::Api::new(&api, token), &cfg.telegram_allowed_chats, calls, data);
    rt.spawn(bot.run(shutdown));
    Ok(())
}

#[cfg(test)]
mod tests;
