//! `RestError`: what a REST call can end in, classified once from the HTTP status and Alpaca's error body.
//! `is_recoverable()` splits them: retrying later may help (rate limit, server, timeout, transport) or it
//! cannot (auth, not found, unprocessable, buying power, decode).

use std::time::Duration;

#[derive(Debug, thiserror::Error)]
pub enum RestError {
    #[error(
        "{endpoint}: Alpaca refused the API keys (HTTP {status}: {message}). Fix: set APCA_API_KEY_ID and \
         APCA_API_SECRET_KEY to a key pair of this environment (paper keys only work with \
         paper-api.alpaca.markets, live keys with api.alpaca.markets), then restart"
    )]
    Auth { endpoint: &'static str, status: u16, message: String },
    #[error("{endpoint}: forbidden: {message}")]
    Forbidden { endpoint: &'static str, code: Option<i64>, message: String },
    #[error("{endpoint}: insufficient buying power or quantity: {message}")]
    InsufficientBuyingPower { endpoint: &'static str, message: String },
    #[error("{endpoint}: not found: {message}")]
    NotFound { endpoint: &'static str, message: String },
    #[error("{endpoint}: client_order_id {client_order_id:?} was already used (Alpaca keeps them unique forever)")]
    DuplicateClientOrderId { endpoint: &'static str, client_order_id: String },
    #[error("{endpoint}: unprocessable ({code:?}): {message}")]
    Unprocessable { endpoint: &'static str, code: Option<i64>, message: String },
    #[error("{endpoint}: rate limited; retry after {retry_after:?}")]
    RateLimited { endpoint: &'static str, retry_after: Duration },
    #[error("{endpoint}: server error HTTP {status}: {message}")]
    Server { endpoint: &'static str, status: u16, message: String },
    #[error("{endpoint}: unexpected HTTP {status}: {message}")]
    Unexpected { endpoint: &'static str, status: u16, message: String },
    #[error("{endpoint}: no reply within {0:?}", .timeout)]
    Timeout { endpoint: &'static str, timeout: Duration },
    #[error("{endpoint}: transport: {message}")]
    Transport { endpoint: &'static str, message: String },
    #[error("{endpoint}: could not read the reply: {message}")]
    Decode { endpoint: &'static str, message: String },
    #[error("{endpoint}: could not build the request: {message}")]
    Request { endpoint: &'static str, message: String },
}

impl RestError {
    /// Worth retrying later (possibly much later); the others need a person or a different request.
    pub fn is_recoverable(&self) -> bool {
        matches!(
            self,
            RestError::RateLimited { .. }
                | RestError::Server { .. }
                | RestError::Timeout { .. }
                | RestError::Transport { .. }
        )
    }

    /// The outcome of the call is unknown: the request may or may not have been carried out.
    pub fn is_ambiguous(&self) -> bool {
        matches!(self, RestError::Server { .. } | RestError::Timeout { .. } | RestError::Transport { .. })
    }
}
