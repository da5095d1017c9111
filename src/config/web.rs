//! The `[web]` section: where the daemon serves `/metrics` and the dashboard, and where the dashboard's
//! access token comes from. Loopback by default; the token never comes from the config file itself.

use super::Checker;
use super::raw::RawWeb;
use serde::Serialize;
use std::net::SocketAddr;
use std::path::PathBuf;

pub const DEFAULT_WEB_LISTEN: &str = "127.0.0.1:9187";

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct WebConfig {
    pub enabled: bool,
    pub listen: SocketAddr,
    /// A file holding the dashboard token. Without it: `$TRADEBOT_WEB_TOKEN`, then the systemd credential
    /// `TRADEBOT_WEB_TOKEN`, then `state_dir/web.token` (created, mode 0600, on first start).
    pub token_file: Option<PathBuf>,
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
        WebConfig { enabled: r.enabled.unwrap_or(true), listen, token_file: r.token_file.map(PathBuf::from) }
    }
}
