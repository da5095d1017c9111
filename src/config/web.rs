//! The `[web]` section: where the daemon serves `/metrics` and the dashboard, and where the dashboard's
//! access token comes from. Loopback by default; the token never comes from the config file itself.
//!
//! The daemon serves plain HTTP (there is no TLS in it): a listener off loopback would send the token and
//! the controls (flatten, promote) in the clear, so it is refused unless `allow_remote = true` says that a
//! reverse proxy with TLS (or a private network) carries it. Each connection must send its request head
//! within `header_timeout_secs`, and at most `max_connections` are served at once: the ones above are
//! closed as they come, so that idle connections cannot use up the daemon's file descriptors.

use super::Checker;
use super::raw::RawWeb;
use serde::Serialize;
use std::net::SocketAddr;
use std::path::PathBuf;

pub(crate) const DEFAULT_WEB_LISTEN: &str = "127.0.0.1:9187";
pub(crate) const DEFAULT_MAX_CONNECTIONS: u64 = 256;
pub(super) const MAX_CONNECTIONS_LIMIT: u64 = 4096;
pub(crate) const DEFAULT_HEADER_TIMEOUT_SECS: u64 = 10;

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct WebConfig {
    pub enabled: bool,
    pub listen: SocketAddr,
    /// A file holding the dashboard token. Without it: `$TRADEBOT_WEB_TOKEN`, then the systemd credential
    /// `TRADEBOT_WEB_TOKEN`, then `state_dir/web.token` (created, mode 0600, on first start).
    pub token_file: Option<PathBuf>,
    /// A `listen` address off loopback is allowed (a WARN at start): the operator says that a TLS proxy or
    /// a private network carries the plain HTTP.
    pub allow_remote: bool,
    /// Connections served at once; more are closed as they are accepted.
    pub max_connections: usize,
    /// A connection that has not sent its whole request head within this many seconds is closed.
    pub header_timeout_secs: u64,
}

impl WebConfig {
    /// The WARN the daemon logs at start when it listens off loopback (allowed by `allow_remote`).
    pub fn remote_warning(&self) -> Option<String> {
        (self.enabled && !self.listen.ip().is_loopback()).then(|| {
            format!(
                "web.listen = \"{}\" is not loopback and web.allow_remote = true: the dashboard token and its controls \
                 travel as plain HTTP; serve it only through a reverse proxy with TLS or on a private network",
                self.listen
            )
        })
    }
}

impl Checker {
    pub(super) fn web(&mut self, r: RawWeb) -> WebConfig {
        let text = r.listen.as_deref().unwrap_or(DEFAULT_WEB_LISTEN);
        let listen = match text.parse::<SocketAddr>() {
            Ok(a) => a,
            Err(e) => {
                self.problem(format!(
                    "web.listen = {text:?}: {e}; use an address and port such as \"{DEFAULT_WEB_LISTEN}\""
                ));
                SocketAddr::from(([127, 0, 0, 1], 9187))
            }
        };
        let enabled = r.enabled.unwrap_or(true);
        let allow_remote = r.allow_remote.unwrap_or(false);
        if enabled && !listen.ip().is_loopback() && !allow_remote {
            self.problem(format!(
                "web.listen = {text:?} is not a loopback address: the daemon serves plain HTTP (no TLS), so the \
                 dashboard token and its controls would cross the network in the clear; listen on \
                 \"{DEFAULT_WEB_LISTEN}\" behind a reverse proxy with TLS, or set web.allow_remote = true to accept that"
            ));
        }
        let max_connections =
            self.count("web.max_connections", r.max_connections, DEFAULT_MAX_CONNECTIONS, 1, MAX_CONNECTIONS_LIMIT);
        let header_timeout_secs =
            self.count("web.header_timeout_secs", r.header_timeout_secs, DEFAULT_HEADER_TIMEOUT_SECS, 1, 300);
        WebConfig {
            enabled,
            listen,
            token_file: r.token_file.map(PathBuf::from),
            allow_remote,
            max_connections: max_connections as usize,
            header_timeout_secs,
        }
    }
}
