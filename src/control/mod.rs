//! The control socket: a Unix socket (mode 0600, in the state directory) through which `tradebot status`,
//! `retrain`, `pause`, `resume` and `flatten` talk to a running daemon. One JSON request per line, one
//! JSON response per line (`protocol`); the daemon side (`server`) turns requests into messages for the
//! engine loop and waits for its answer; `client` is the command-line side.

pub mod beside;
pub mod client;
pub mod protocol;
pub mod report;
pub mod server;

pub use protocol::{ImportSummary, Request, Response, audit};
pub use report::StatusReport;

use std::path::{Path, PathBuf};

/// Where the daemon listens: `<state_dir>/control.sock`.
pub fn socket_path(state_dir: &Path) -> PathBuf {
    state_dir.join("control.sock")
}
