//! `RestClient`: the one place REST I/O happens (`issue::<E>()`), plus the order-submission policy.

use super::classify::classify;
use super::{Endpoint, Host, Limiter, RateLimit, RestError};
use crate::alpaca::backoff::Backoff;
use crate::config::Secret;
use reqwest::StatusCode;
use std::sync::Arc;
use std::time::Duration;
use url::Url;

/// How long to keep retrying and how long to wait between tries.
///
/// A call is retried (429s always, timeouts, 5xx and broken connections when the endpoint is idempotent)
/// until its deadline: the wait is the longer of the server's (`Retry-After`, else `X-RateLimit-Reset`)
/// and the backoff's, and a wait that would end past the deadline is not started. An order POST is not
/// idempotent: only its 429s are retried here; after an ambiguous failure `submit_order` looks it up
/// (at most `max_retries` times) before sending it again.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct RetryPolicy {
    /// Re-sends of an order POST after an ambiguous failure (each after a lookup by client_order_id).
    pub max_retries: u32,
    /// The delays between retries (also after a 429 when the server's wait is shorter).
    pub backoff: Backoff,
    /// Total time for one market-data call, waits included (`alpaca.data_retry_secs`).
    pub data_deadline: Duration,
    /// Total time for one trading call other than an order POST (`alpaca.trading_retry_secs`).
    pub trading_deadline: Duration,
    /// Total time for an order POST's 429 waits (`alpaca.order_retry_secs`): an order that waits longer
    /// is better refused and decided again on the next bar.
    pub order_deadline: Duration,
}

impl Default for RetryPolicy {
    fn default() -> Self {
        RetryPolicy {
            max_retries: 3,
            backoff: Backoff { initial: Duration::from_millis(250), max: Duration::from_secs(8) },
            data_deadline: Duration::from_secs(120),
            trading_deadline: Duration::from_secs(30),
            order_deadline: Duration::from_secs(10),
        }
    }
}

impl RetryPolicy {
    /// The deadline of a call to `host`; `idempotent = false` is an order POST.
    pub fn deadline(&self, host: Host, idempotent: bool) -> Duration {
        match (host, idempotent) {
            (Host::Data, _) => self.data_deadline,
            (Host::Trading, true) => self.trading_deadline,
            (Host::Trading, false) => self.order_deadline,
        }
    }
}

/// Where and how the REST client talks to Alpaca: hosts, keys, timeouts, retries and rate limits.
#[derive(Debug, Clone)]
pub struct RestConfig {
    /// The trading API's base URL (`https://paper-api.alpaca.markets` or `https://api.alpaca.markets`).
    pub trading_url: Url,
    /// The market-data API's base URL (`https://data.alpaca.markets`).
    pub data_url: Url,
    /// The API key id, sent as the `APCA-API-KEY-ID` header.
    pub key_id: Secret,
    /// The API secret, sent as the `APCA-API-SECRET-KEY` header.
    pub secret_key: Secret,
    /// The limit on connecting and on each request, reply included.
    pub timeout: Duration,
    /// How failed calls are retried.
    pub retry: RetryPolicy,
    /// The client-side request budget for the trading host.
    pub trading_limit: RateLimit,
    /// The client-side request budget for the market-data host.
    pub data_limit: RateLimit,
}

impl RestConfig {
    /// From the daemon's configuration and keys, with the default retry policy and Alpaca's limits.
    pub fn from_config(a: &crate::config::AlpacaConfig, c: &crate::config::Credentials) -> Self {
        RestConfig {
            trading_url: a.trading_url.clone(),
            data_url: a.data_url.clone(),
            key_id: c.key_id.clone(),
            secret_key: c.secret_key.clone(),
            timeout: a.request_timeout,
            retry: RetryPolicy {
                data_deadline: a.data_retry,
                trading_deadline: a.trading_retry,
                order_deadline: a.order_retry,
                ..RetryPolicy::default()
            },
            trading_limit: RateLimit::TRADING,
            data_limit: RateLimit::DATA_FREE,
        }
    }
}

/// A REST client for both Alpaca hosts. Cheap to clone (shares the connection pool and the limiters).
#[derive(Debug, Clone)]
pub struct RestClient {
    http: reqwest::Client,
    cfg: Arc<RestConfig>,
    trading_limiter: Arc<Limiter>,
    data_limiter: Arc<Limiter>,
}

/// One reply, before classification.
struct Reply {
    status: StatusCode,
    headers: reqwest::header::HeaderMap,
    body: Vec<u8>,
}

impl RestClient {
    /// A client for these settings; fails (`RestError::Request`) only when the HTTP client cannot be set up.
    pub fn new(cfg: RestConfig) -> Result<Self, RestError> {
        let http = reqwest::Client::builder()
            .timeout(cfg.timeout)
            .connect_timeout(cfg.timeout)
            .user_agent(concat!("tradebot/", env!("CARGO_PKG_VERSION")))
            .build()
            .map_err(|e| RestError::Request { endpoint: "client", message: e.to_string() })?;
        Ok(RestClient {
            http,
            trading_limiter: Arc::new(Limiter::new(cfg.trading_limit)),
            data_limiter: Arc::new(Limiter::new(cfg.data_limit)),
            cfg: Arc::new(cfg),
        })
    }

    /// Issues `E` with rate limiting, a timeout on every attempt and bounded retries (see module docs).
    /// Cancellation-safe in the sense that dropping it sends nothing more; a request already on the wire
    /// may still be carried out by the server.
    pub async fn issue<E: Endpoint>(&self, input: &E::Input) -> Result<E::Output, RestError> {
        let deadline = self.cfg.retry.deadline(E::HOST, E::IDEMPOTENT);
        let started = tokio::time::Instant::now();
        let mut attempt = 0u32;
        loop {
            let err = match self.once::<E>(input).await {
                Ok(r) if r.status.is_success() => {
                    if attempt > 0 {
                        log::info!(
                            "alpaca: {} succeeded on attempt {} after {:.1} s",
                            E::NAME,
                            attempt + 1,
                            started.elapsed().as_secs_f64()
                        );
                    }
                    return E::parse(input, &r.body);
                }
                Ok(r) => classify(E::NAME, r.status, &r.headers, &r.body, E::client_order_id(input)),
                Err(e) => e,
            };
            let retry = match &err {
                RestError::RateLimited { retry_after, .. } => Some(*retry_after),
                e if E::IDEMPOTENT && e.is_ambiguous() => Some(Duration::ZERO),
                _ => None,
            };
            let Some(server_wait) = retry else {
                log::warn!("alpaca: {} failed: {err}", E::NAME);
                return Err(err);
            };
            let wait = server_wait.max(self.cfg.retry.backoff.delay(attempt));
            if started.elapsed() + wait > deadline {
                log::warn!(
                    "alpaca: {} gave up after {} attempt(s) over {:.1} s (its retry deadline is {} s): {err}",
                    E::NAME,
                    attempt + 1,
                    started.elapsed().as_secs_f64(),
                    deadline.as_secs()
                );
                return Err(err);
            }
            if matches!(err, RestError::RateLimited { .. }) {
                self.limiter(E::HOST).block_until(tokio::time::Instant::now() + wait);
            }
            // Once per call at INFO (what and why); the later waits of the same call at DEBUG.
            if attempt == 0 {
                log::info!(
                    "alpaca: {} failed ({err}); waiting {:.1} s, retrying for up to {} s",
                    E::NAME,
                    wait.as_secs_f64(),
                    deadline.as_secs()
                );
            } else {
                log::debug!("alpaca: {} attempt {} failed ({err}); waiting {wait:?}", E::NAME, attempt + 1);
            }
            tokio::time::sleep(wait).await;
            attempt += 1;
        }
    }

    /// The retry policy this client was built with.
    pub fn retry_policy(&self) -> RetryPolicy {
        self.cfg.retry
    }

    fn limiter(&self, host: Host) -> &Limiter {
        match host {
            Host::Trading => &self.trading_limiter,
            Host::Data => &self.data_limiter,
        }
    }

    /// One attempt: wait for a token, send, read the whole body, all within the timeout.
    async fn once<E: Endpoint>(&self, input: &E::Input) -> Result<Reply, RestError> {
        self.limiter(E::HOST).acquire().await;
        let base = match E::HOST {
            Host::Trading => &self.cfg.trading_url,
            Host::Data => &self.cfg.data_url,
        };
        let url = base
            .join(E::path(input).trim_start_matches('/'))
            .map_err(|e| RestError::Request { endpoint: E::NAME, message: e.to_string() })?;
        let mut req = self
            .http
            .request(E::METHOD, url)
            .header("APCA-API-KEY-ID", self.cfg.key_id.expose())
            .header("APCA-API-SECRET-KEY", self.cfg.secret_key.expose())
            .query(&E::query(input));
        if let Some(body) = E::body(input) {
            req = req.json(&body);
        }
        let timeout = self.cfg.timeout;
        let fut = async {
            let resp = req.send().await?;
            let status = resp.status();
            let headers = resp.headers().clone();
            let body = resp.bytes().await?.to_vec();
            Ok::<_, reqwest::Error>(Reply { status, headers, body })
        };
        match tokio::time::timeout(timeout, fut).await {
            Err(_) => Err(RestError::Timeout { endpoint: E::NAME, timeout }),
            Ok(Err(e)) if e.is_timeout() => Err(RestError::Timeout { endpoint: E::NAME, timeout }),
            // reqwest's Display names the URL but never the headers, so no key can leak here.
            Ok(Err(e)) => Err(RestError::Transport { endpoint: E::NAME, message: e.to_string() }),
            Ok(Ok(r)) => Ok(r),
        }
    }
}
