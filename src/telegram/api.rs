//! The few Bot API calls the bot makes (`getUpdates` long polling, `sendMessage` with an optional inline
//! keyboard, `answerCallbackQuery`), as Telegram documents them: a JSON POST to `<api>/bot<token>/<method>`
//! answered by `{"ok": true, "result": ...}` or `{"ok": false, "error_code", "description", "parameters":
//! {"retry_after"}}`.

use crate::config::Secret;
use serde::Deserialize;
use serde_json::{Value, json};
use std::time::Duration;

#[derive(Debug, thiserror::Error)]
pub(crate) enum ApiError {
    #[error("telegram {method}: {source}")]
    Http {
        method: &'static str,
        #[source]
        source: reqwest::Error,
    },
    #[error("telegram {method}: too many requests; retry after {retry_after} s")]
    RateLimited { method: &'static str, retry_after: u64 },
    #[error("telegram {method} refused: {code} {description}")]
    Refused { method: &'static str, code: i64, description: String },
}

#[derive(Debug, Clone, Deserialize)]
pub(crate) struct Update {
    pub update_id: i64,
    #[serde(default)]
    pub message: Option<Message>,
    #[serde(default)]
    pub callback_query: Option<CallbackQuery>,
}

#[derive(Debug, Clone, Deserialize)]
pub(crate) struct Message {
    pub chat: Chat,
    #[serde(default)]
    pub text: Option<String>,
}

#[derive(Debug, Clone, Deserialize)]
pub(crate) struct Chat {
    pub id: i64,
}

#[derive(Debug, Clone, Deserialize)]
pub(crate) struct CallbackQuery {
    pub id: String,
    #[serde(default)]
    pub message: Option<Message>,
    #[serde(default)]
    pub data: Option<String>,
}

#[derive(Deserialize)]
struct Answer {
    ok: bool,
    #[serde(default)]
    result: Value,
    #[serde(default)]
    error_code: i64,
    #[serde(default)]
    description: String,
    #[serde(default)]
    parameters: Option<Parameters>,
}

#[derive(Deserialize)]
struct Parameters {
    retry_after: Option<u64>,
}

/// A button under a message: its label and what a press sends back (`callback_data`).
pub(crate) type Button = (String, String);

pub(crate) struct Api {
    http: reqwest::Client,
    base: String,
    token: Secret,
}

impl Api {
    pub(crate) fn new(api: &url::Url, token: Secret) -> Api {
        Api { http: reqwest::Client::new(), base: api.as_str().trim_end_matches('/').to_string(), token }
    }

    async fn call(&self, method: &'static str, body: Value, limit: Duration) -> Result<Value, ApiError> {
        let url = format!("{}/bot{}/{method}", self.base, self.token.expose());
        let http = |source| ApiError::Http { method, source };
        // The error's URL holds the token: it is left out of what is said.
        let resp = self.http.post(url).json(&body).timeout(limit).send().await.map_err(|e| http(e.without_url()))?;
        let answer: Answer = resp.json().await.map_err(|e| http(e.without_url()))?;
        if answer.ok {
            return Ok(answer.result);
        }
        match answer.parameters.and_then(|p| p.retry_after) {
            Some(retry_after) if answer.error_code == 429 => Err(ApiError::RateLimited { method, retry_after }),
            _ => Err(ApiError::Refused { method, code: answer.error_code, description: answer.description }),
        }
    }

    /// The updates from `offset` on, waiting up to `wait` for one (long polling).
    pub(crate) async fn updates(&self, offset: i64, wait: Duration) -> Result<Vec<Update>, ApiError> {
        let body =
            json!({ "offset": offset, "timeout": wait.as_secs(), "allowed_updates": ["message", "callback_query"] });
        let result = self.call("getUpdates", body, wait + Duration::from_secs(10)).await?;
        // An update of a kind we do not read still advances the offset; one that does not parse at all
        // is skipped (its id, when it has one, is kept so that it is not fetched again).
        let items = result.as_array().cloned().unwrap_or_default();
        Ok(items
            .into_iter()
            .filter_map(|v| {
                serde_json::from_value::<Update>(v.clone()).ok().or_else(|| {
                    let id = v.get("update_id")?.as_i64()?;
                    log::warn!("telegram: update {id} does not parse; skipped");
                    Some(Update { update_id: id, message: None, callback_query: None })
                })
            })
            .collect())
    }

    pub(crate) async fn send(&self, chat: i64, text: &str, buttons: &[Button]) -> Result<(), ApiError> {
        let mut body = json!({ "chat_id": chat, "text": text, "disable_web_page_preview": true });
        if !buttons.is_empty() {
            let row: Vec<Value> = buttons.iter().map(|(t, d)| json!({ "text": t, "callback_data": d })).collect();
            body["reply_markup"] = json!({ "inline_keyboard": [row] });
        }
        self.call("sendMessage", body, Duration::from_secs(10)).await.map(drop)
    }

    pub(crate) async fn answer_callback(&self, id: &str, text: &str) -> Result<(), ApiError> {
        let body = json!({ "callback_query_id": id, "text": text });
        self.call("answerCallbackQuery", body, Duration::from_secs(10)).await.map(drop)
    }
}
