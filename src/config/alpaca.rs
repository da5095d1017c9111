//! `[alpaca]`: the trading, data and stream endpoints (the paper or live host by `mode`, never the other)
//! and the request timeout and retry budgets.

use super::raw::RawAlpaca;
use super::{Checker, Mode, ser_secs};
use serde::Serialize;
use std::time::Duration;
use url::Url;

pub(crate) const DEFAULT_TRADING_URL_PAPER: &str = "https://paper-api.alpaca.markets";
pub(crate) const DEFAULT_TRADING_URL_LIVE: &str = "https://api.alpaca.markets";
pub(crate) const DEFAULT_DATA_URL: &str = "https://data.alpaca.markets";
pub(crate) const DEFAULT_STREAM_URL: &str = "wss://stream.data.alpaca.markets/v2/iex";
pub(crate) const DEFAULT_TRADE_UPDATES_URL_PAPER: &str = "wss://paper-api.alpaca.markets/stream";
pub(crate) const DEFAULT_TRADE_UPDATES_URL_LIVE: &str = "wss://api.alpaca.markets/stream";

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct AlpacaConfig {
    pub trading_url: Url,
    pub data_url: Url,
    pub stream_url: Url,
    pub trade_updates_url: Url,
    #[serde(serialize_with = "ser_secs")]
    pub request_timeout: Duration,
    /// How long one market-data call keeps retrying 429s and outages (`data_retry_secs`, default 120).
    #[serde(serialize_with = "ser_secs")]
    pub data_retry: Duration,
    /// The same for trading calls other than order POSTs (`trading_retry_secs`, default 30).
    #[serde(serialize_with = "ser_secs")]
    pub trading_retry: Duration,
    /// An order POST's 429 waits (`order_retry_secs`, default 10).
    #[serde(serialize_with = "ser_secs")]
    pub order_retry: Duration,
    /// How long start-up keeps retrying the account call before giving up (`start_retry_secs`, default 300).
    #[serde(serialize_with = "ser_secs")]
    pub start_retry: Duration,
}

impl Checker {
    /// `[alpaca]` checked; a URL of the other mode's host is a problem.
    pub(super) fn alpaca(&mut self, a: RawAlpaca, mode: Mode) -> AlpacaConfig {
        let (trading_default, updates_default) = match mode {
            Mode::Live => (DEFAULT_TRADING_URL_LIVE, DEFAULT_TRADE_UPDATES_URL_LIVE),
            Mode::Paper => (DEFAULT_TRADING_URL_PAPER, DEFAULT_TRADE_UPDATES_URL_PAPER),
        };
        let alpaca = AlpacaConfig {
            trading_url: self.url("alpaca.trading_url", a.trading_url.as_deref(), trading_default, &["https", "http"]),
            data_url: self.url("alpaca.data_url", a.data_url.as_deref(), DEFAULT_DATA_URL, &["https", "http"]),
            stream_url: self.url("alpaca.stream_url", a.stream_url.as_deref(), DEFAULT_STREAM_URL, &["wss", "ws"]),
            trade_updates_url: self.url(
                "alpaca.trade_updates_url",
                a.trade_updates_url.as_deref(),
                updates_default,
                &["wss", "ws"],
            ),
            request_timeout: Duration::from_secs_f64(self.range(
                "alpaca.request_timeout_secs",
                a.request_timeout_secs,
                10.0,
                (0.0, false),
                (300.0, true),
            )),
            data_retry: Duration::from_secs_f64(self.range(
                "alpaca.data_retry_secs",
                a.data_retry_secs,
                120.0,
                (0.0, true),
                (3600.0, true),
            )),
            trading_retry: Duration::from_secs_f64(self.range(
                "alpaca.trading_retry_secs",
                a.trading_retry_secs,
                30.0,
                (0.0, true),
                (3600.0, true),
            )),
            order_retry: Duration::from_secs_f64(self.range(
                "alpaca.order_retry_secs",
                a.order_retry_secs,
                10.0,
                (0.0, true),
                (3600.0, true),
            )),
            start_retry: Duration::from_secs_f64(self.range(
                "alpaca.start_retry_secs",
                a.start_retry_secs,
                300.0,
                (0.0, true),
                (3600.0, true),
            )),
        };
        self.mode_hosts(&alpaca, mode);
        alpaca
    }

    /// A paper config must not point at the live host, nor the reverse: the mode is the one switch.
    fn mode_hosts(&mut self, alpaca: &AlpacaConfig, mode: Mode) {
        let host = alpaca.trading_url.host_str().unwrap_or_default().to_string();
        if mode == Mode::Paper && host == "api.alpaca.markets" {
            self.problem(format!(
                "alpaca.trading_url = {:?}: that is the live host but mode = \"paper\"; use {DEFAULT_TRADING_URL_PAPER} or set mode = \"live\"",
                alpaca.trading_url.as_str()
            ));
        }
        if mode == Mode::Live && host.starts_with("paper-api.") {
            self.problem(format!(
                "alpaca.trading_url = {:?}: that is the paper host but mode = \"live\"; use {DEFAULT_TRADING_URL_LIVE} or set mode = \"paper\"",
                alpaca.trading_url.as_str()
            ));
        }
        // The same for the order-updates stream, which lives on the trading host.
        let updates_host = alpaca.trade_updates_url.host_str().unwrap_or_default().to_string();
        if mode == Mode::Paper && updates_host == "api.alpaca.markets" {
            self.problem(format!(
                "alpaca.trade_updates_url = {:?}: that is the live host but mode = \"paper\"; use {DEFAULT_TRADE_UPDATES_URL_PAPER} or set mode = \"live\"",
                alpaca.trade_updates_url.as_str()
            ));
        }
        if mode == Mode::Live && updates_host.starts_with("paper-api.") {
            self.problem(format!(
                "alpaca.trade_updates_url = {:?}: that is the paper host but mode = \"live\"; use {DEFAULT_TRADE_UPDATES_URL_LIVE} or set mode = \"paper\"",
                alpaca.trade_updates_url.as_str()
            ));
        }
    }
}
