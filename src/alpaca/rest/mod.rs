//! Alpaca REST: each call is a type implementing [`Endpoint`] (method, path, query, body, parse,
//! idempotency); [`RestClient::issue`] is the one place that does I/O: rate limiting, the keys in headers,
//! a timeout on every request, classification of errors, and bounded retries with jittered backoff
//! (429 always, honouring `Retry-After` / `X-RateLimit-Reset`; 5xx and timeouts only for idempotent
//! calls). Order submission is never retried blindly: see [`RestClient::submit_order`].

pub mod classify;
mod client;
mod data;
mod error;
mod limiter;
mod orders;
mod trading;

pub use client::{RestClient, RestConfig, RetryPolicy};
pub use data::{BarsQuery, GetBars};
pub use error::RestError;
pub use limiter::{Limiter, RateLimit};
pub use trading::*;

use reqwest::Method;

/// Which Alpaca host an endpoint lives on (each has its own rate limit).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Host {
    /// `api.alpaca.markets` / `paper-api.alpaca.markets`: account, orders, positions, assets, clock.
    Trading,
    /// `data.alpaca.markets`: historical market data.
    Data,
}

/// One REST call, declared as a type.
pub trait Endpoint {
    /// What the call needs to build its path, query and body.
    type Input: Sync;
    /// What a successful reply gives, in domain terms.
    type Output;
    /// The HTTP method.
    const METHOD: Method;
    /// Safe to send twice: retried after a 5xx or a timeout. Every call is retried after a 429 (the
    /// server refused it without acting).
    const IDEMPOTENT: bool;
    /// `"GET /v2/account"`: how errors and logs name the call.
    const NAME: &'static str;
    /// Which host the call goes to (trading unless said otherwise).
    const HOST: Host = Host::Trading;

    /// The URL path on the host, e.g. `/v2/orders/{id}`.
    fn path(input: &Self::Input) -> String;
    /// The query parameters; none unless the endpoint says otherwise.
    fn query(_input: &Self::Input) -> Vec<(&'static str, String)> {
        Vec::new()
    }
    /// The JSON body; none unless the endpoint says otherwise.
    fn body(_input: &Self::Input) -> Option<serde_json::Value> {
        None
    }
    /// The client_order_id an order POST carries, so a duplicate refusal can name it.
    fn client_order_id(_input: &Self::Input) -> Option<&str> {
        None
    }
    /// Turns a 2xx body into the output.
    fn parse(input: &Self::Input, body: &[u8]) -> Result<Self::Output, RestError>;
}

/// Deserialises a body and converts it, naming the endpoint in any error.
pub(crate) fn decode<W: serde::de::DeserializeOwned, T>(
    endpoint: &'static str,
    body: &[u8],
    convert: impl FnOnce(W) -> Result<T, crate::alpaca::parse::ParseError>,
) -> Result<T, RestError> {
    let wire: W = serde_json::from_slice(body).map_err(|e| RestError::Decode { endpoint, message: e.to_string() })?;
    convert(wire).map_err(|e| RestError::Decode { endpoint, message: e.to_string() })
}

#[cfg(test)]
mod tests;
