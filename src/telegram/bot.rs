//! The bot's loop: long polling for updates; each message from an allowed chat is a command, answered from
//! the dashboard's data or sent to the daemon on the control channel (the same requests as the control
//! socket and the dashboard, audited as `telegram`). A stranger's chat is ignored (logged once per chat);
//! each chat may send `RATE` commands a minute; `/flatten` is only carried out when its button is pressed
//! within `CONFIRM_WITHIN`.

use super::api::{Api, ApiError, Update};
use super::commands::{self, BotCommand, HELP};
use crate::control::server::Call;
use crate::control::{Request, Response, audit};
use crate::web::data::DashboardSource;
use std::collections::{BTreeSet, HashMap, VecDeque};
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::sync::{mpsc, oneshot};
use tokio_util::sync::CancellationToken;

/// Commands a chat may send in a minute; more are refused (once) until the minute has passed.
pub(crate) const RATE: usize = 10;
const RATE_WINDOW: Duration = Duration::from_secs(60);
/// A `/flatten` button works this long.
pub(crate) const CONFIRM_WITHIN: Duration = Duration::from_secs(60);
const ANSWER_TIMEOUT: Duration = Duration::from_secs(30);
const CHANNEL: &str = "telegram";

pub(crate) struct Bot {
    api: Api,
    allowed: BTreeSet<String>,
    calls: mpsc::Sender<Call>,
    data: Arc<dyn DashboardSource>,
    /// How long one `getUpdates` waits for an update.
    pub poll: Duration,
    offset: i64,
    strangers: BTreeSet<i64>,
    recent: HashMap<i64, VecDeque<Instant>>,
    told_to_wait: BTreeSet<i64>,
    /// Per chat: the pending flatten's token and when it was asked for.
    flatten: HashMap<i64, (String, Instant)>,
    asked: u64,
}

impl Bot {
    pub(crate) fn new(api: Api, allowed: &[String], calls: mpsc::Sender<Call>, data: Arc<dyn DashboardSource>) -> Bot {
        Bot {
            api,
            allowed: allowed.iter().cloned().collect(),
            calls,
            data,
            poll: Duration::from_secs(25),
            offset: 0,
            strangers: BTreeSet::new(),
            recent: HashMap::new(),
            told_to_wait: BTreeSet::new(),
            flatten: HashMap::new(),
            asked: 0,
        }
    }

    /// Polls until `shutdown`; a failed poll is retried after a doubling wait (from 1 s to 60 s), or after
    /// the wait Telegram asks for (429).
    pub(crate) async fn run(mut self, shutdown: CancellationToken) {
        log::info!("telegram: answering commands from {} chat(s)", self.allowed.len());
        let mut backoff = Duration::from_secs(1);
        loop {
            let got = tokio::select! {
                _ = shutdown.cancelled() => return,
                got = self.api.updates(self.offset, self.poll) => got,
            };
            match got {
                Ok(updates) => {
                    backoff = Duration::from_secs(1);
                    for u in updates {
                        self.offset = self.offset.max(u.update_id + 1);
                        self.handle(u).await;
                    }
                }
                Err(e) => {
                    let wait = match &e {
                        ApiError::RateLimited { retry_after, .. } => Duration::from_secs(*retry_after),
                        _ => backoff,
                    };
                    log::warn!("telegram: {e}; polling again in {} s", wait.as_secs());
                    backoff = (backoff * 2).min(Duration::from_secs(60));
                    tokio::select! {
                        _ = shutdown.cancelled() => return,
                        _ = tokio::time::sleep(wait) => {}
                    }
                }
            }
        }
    }

    fn allowed(&mut self, chat: i64) -> bool {
        if self.allowed.contains(&chat.to_string()) {
            return true;
        }
        if self.strangers.insert(chat) {
            log::warn!("telegram: chat {chat} is not in notify.telegram_allowed_chats; its messages are ignored");
        }
        false
    }

    /// Whether `chat` may send one more command now (counting it).
    fn within_rate(&mut self, chat: i64, now: Instant) -> bool {
        let q = self.recent.entry(chat).or_default();
        while q.front().is_some_and(|t| now.duration_since(*t) >= RATE_WINDOW) {
            q.pop_front();
        }
        if q.len() >= RATE {
            return false;
        }
        q.push_back(now);
        self.told_to_wait.remove(&chat);
        true
    }

    pub(super) async fn handle(&mut self, u: Update) {
        if let Some(q) = u.callback_query {
            let Some(chat) = q.message.as_ref().map(|m| m.chat.id) else { return };
            if !self.allowed(chat) {
                return;
            }
            let text = self.confirm(chat, q.data.as_deref().unwrap_or("")).await;
            self.say_callback(&q.id, &text).await;
            self.say(chat, &text, &[]).await;
            return;
        }
        let Some(m) = u.message else { return };
        let chat = m.chat.id;
        if !self.allowed(chat) {
            return;
        }
        if !self.within_rate(chat, Instant::now()) {
            if self.told_to_wait.insert(chat) {
                self.say(chat, &format!("too many commands: at most {RATE} a minute; wait a little"), &[]).await;
            }
            return;
        }
        let text = m.text.unwrap_or_default();
        let reply = match commands::parse(&text) {
            Err(why) => why.to_string(),
            Ok(BotCommand::Help) => HELP.to_string(),
            Ok(BotCommand::Status) => commands::status(&self.data.snapshot()),
            Ok(BotCommand::Positions) => commands::positions(&self.data.snapshot()),
            Ok(BotCommand::Balance) => commands::balance(&self.data.snapshot()),
            Ok(BotCommand::Profit { days }) => commands::profit(&self.data.snapshot(), days),
            Ok(BotCommand::Models) => commands::models(&self.data.snapshot()),
            Ok(BotCommand::Control(req)) => self.ask(req).await,
            Ok(BotCommand::Flatten) => {
                self.asked += 1;
                let token = format!("flatten:{}:{}", std::process::id(), self.asked);
                self.flatten.insert(chat, (token.clone(), Instant::now()));
                let buttons = [("Sell everything".to_string(), token), ("Cancel".to_string(), "cancel".to_string())];
                let ask = "Flatten: sell every position, then pause? Press within a minute.";
                self.say(chat, ask, &buttons).await;
                return;
            }
        };
        self.say(chat, &reply, &[]).await;
    }

    /// A button pressed: the pending flatten of `chat` when `data` is its token and it is recent.
    async fn confirm(&mut self, chat: i64, data: &str) -> String {
        let pending = self.flatten.remove(&chat);
        if data == "cancel" {
            return "flatten cancelled".to_string();
        }
        match pending {
            Some((token, at)) if token == data && at.elapsed() <= CONFIRM_WITHIN => self.ask(Request::Flatten).await,
            Some((token, _)) if token == data => {
                log::warn!("telegram: a flatten confirmed after {} s was refused", CONFIRM_WITHIN.as_secs());
                "too late: send /flatten again".to_string()
            }
            _ => "that button is no longer valid: send /flatten again".to_string(),
        }
    }

    /// Sends `req` to the daemon and says its answer; audited like the control socket's.
    async fn ask(&self, req: Request) -> String {
        let (tx, rx) = oneshot::channel();
        let resp = if self.calls.send((req.clone(), tx)).await.is_err() {
            Response::error("the daemon is stopping")
        } else {
            match tokio::time::timeout(ANSWER_TIMEOUT, rx).await {
                Ok(Ok(r)) => r,
                Ok(Err(_)) => Response::error("the daemon dropped the request"),
                Err(_) => Response::error(format!("no answer within {} s", ANSWER_TIMEOUT.as_secs())),
            }
        };
        audit(CHANNEL, &req, &resp);
        if resp.ok {
            resp.message.unwrap_or_else(|| "done".to_string())
        } else {
            format!("refused: {}", resp.error.unwrap_or_default())
        }
    }

    async fn say(&self, chat: i64, text: &str, buttons: &[super::api::Button]) {
        if let Err(e) = self.api.send(chat, text, buttons).await {
            log::warn!("telegram: cannot answer chat {chat}: {e}");
        }
    }

    async fn say_callback(&self, id: &str, text: &str) {
        if let Err(e) = self.api.answer_callback(id, text).await {
            log::debug!("telegram: cannot answer a button press: {e}");
        }
    }
}
