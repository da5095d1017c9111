//! `RestError`: what a REST call can end in, classified once from the HTTP status and Alpaca's error body.
//! `is_recoverable()` splits them: retrying later may help (rate limit, server, timeout, transport) or it
//! cannot (auth, not found, unprocessable, buying power, decode).

use std::time::Duration;

/// What a REST call to Alpaca ended in, when not in its reply.
#[derive(Debug, thiserror::Error)]
pub enum RestError {
    /// HTTP 401, or 403 with an auth message: the API keys are wrong or for the other environment.
    #[error(
        "{endpoint}: Alpaca refused the API keys (HTTP {status}: {message}). Fix: set APCA_API_KEY_ID and \
         APCA_API_SECRET_KEY to a key pair of this environment (paper keys only work with \
         paper-api.alpaca.markets, live keys with api.alpaca.markets), then restart"
    )]
    Auth {
        /// The call, as `Endpoint::NAME` names it (`"GET /v2/account"`).
        endpoint: &'static str,
        /// The HTTP status.
        status: u16,
        /// Alpaca's `message` (or the start of the reply body when it is not JSON).
        message: String,
    },
    /// Any other HTTP 403: the account may not do this (e.g. shorting, a blocked account).
    #[error("{endpoint}: forbidden: {message}")]
    Forbidden {
        /// The call, as `Endpoint::NAME` names it (`"GET /v2/account"`).
        endpoint: &'static str,
        /// Alpaca's error `code` (e.g. 40310000), when the body had one.
        code: Option<i64>,
        /// Alpaca's `message` (or the start of the reply body when it is not JSON).
        message: String,
    },
    /// HTTP 403 mentioning "insufficient": not enough buying power or shares for the order.
    #[error("{endpoint}: insufficient buying power or quantity: {message}")]
    InsufficientBuyingPower {
        /// The call, as `Endpoint::NAME` names it (`"GET /v2/account"`).
        endpoint: &'static str,
        /// Alpaca's `message` (or the start of the reply body when it is not JSON).
        message: String,
    },
    /// HTTP 404: no such order, position or asset.
    #[error("{endpoint}: not found: {message}")]
    NotFound {
        /// The call, as `Endpoint::NAME` names it (`"GET /v2/account"`).
        endpoint: &'static str,
        /// Alpaca's `message` (or the start of the reply body when it is not JSON).
        message: String,
    },
    /// HTTP 422 (or 400) "client_order_id must be unique": an order with this id was sent before.
    #[error("{endpoint}: client_order_id {client_order_id:?} was already used (Alpaca keeps them unique forever)")]
    DuplicateClientOrderId {
        /// The call, as `Endpoint::NAME` names it (`"GET /v2/account"`).
        endpoint: &'static str,
        /// The client_order_id refused.
        client_order_id: String,
    },
    /// Any other HTTP 422: Alpaca refused the request's contents (bad qty, price, symbol, ...).
    #[error("{endpoint}: unprocessable ({code:?}): {message}")]
    Unprocessable {
        /// The call, as `Endpoint::NAME` names it (`"GET /v2/account"`).
        endpoint: &'static str,
        /// Alpaca's error `code` (e.g. 40310000), when the body had one.
        code: Option<i64>,
        /// Alpaca's `message` (or the start of the reply body when it is not JSON).
        message: String,
    },
    /// HTTP 429: over the host's request limit; the request was not acted on.
    #[error("{endpoint}: rate limited; retry after {retry_after:?}")]
    RateLimited {
        /// The call, as `Endpoint::NAME` names it (`"GET /v2/account"`).
        endpoint: &'static str,
        /// How long the server asked to wait (`Retry-After` / `X-RateLimit-Reset`; zero when absent).
        retry_after: Duration,
    },
    /// HTTP 5xx: Alpaca failed; whether it acted on the request is unknown.
    #[error("{endpoint}: server error HTTP {status}: {message}")]
    Server {
        /// The call, as `Endpoint::NAME` names it (`"GET /v2/account"`).
        endpoint: &'static str,
        /// The HTTP status.
        status: u16,
        /// Alpaca's `message` (or the start of the reply body when it is not JSON).
        message: String,
    },
    /// Any other HTTP status, or a call that could not finish as asked (e.g. too many pages of bars).
    #[error("{endpoint}: unexpected HTTP {status}: {message}")]
    Unexpected {
        /// The call, as `Endpoint::NAME` names it (`"GET /v2/account"`).
        endpoint: &'static str,
        /// The HTTP status.
        status: u16,
        /// Alpaca's `message` (or the start of the reply body when it is not JSON).
        message: String,
    },
    /// No reply within the client's timeout; whether Alpaca acted on the request is unknown.
    #[error("{endpoint}: no reply within {0:?}", .timeout)]
    Timeout {
        /// The call, as `Endpoint::NAME` names it (`"GET /v2/account"`).
        endpoint: &'static str,
        /// The timeout that ran out.
        timeout: Duration,
    },
    /// The connection failed (DNS, TLS, reset); whether Alpaca acted on the request is unknown.
    #[error("{endpoint}: transport: {message}")]
    Transport {
        /// The call, as `Endpoint::NAME` names it (`"GET /v2/account"`).
        endpoint: &'static str,
        /// What went wrong, as the HTTP client or the parser said it.
        message: String,
    },
    /// The reply's body is not the JSON expected, or a field in it is invalid.
    #[error("{endpoint}: could not read the reply: {message}")]
    Decode {
        /// The call, as `Endpoint::NAME` names it (`"GET /v2/account"`).
        endpoint: &'static str,
        /// What went wrong, as the HTTP client or the parser said it.
        message: String,
    },
    /// The request could not be built or the HTTP client not set up (a bug or a bad URL).
    #[error("{endpoint}: could not build the request: {message}")]
    Request {
        /// The call, as `Endpoint::NAME` names it (`"GET /v2/account"`).
        endpoint: &'static str,
        /// What went wrong, as the HTTP client or the parser said it.
        message: String,
    },
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
