//! Reading the store beside a running daemon: the daemon holds the store's lock, so a command that only
//! reads asks it for a read snapshot (`Request::Snapshot`, `Store::snapshot`) and opens that copy in
//! place (`snapshot::open_snapshot`), which removes it when done. Where no daemon answers on the control socket (the lock is held by
//! another command, or by a daemon without its socket), there is no snapshot to be had.

use super::client::{ClientError, request};
use super::{Request, socket_path};
use crate::store::{Store, StoreError};
use std::path::Path;
use std::time::Duration;

/// How long a snapshot may take the daemon (a copy of every tree).
const SNAPSHOT_TIMEOUT: Duration = Duration::from_secs(120);

/// Why a command could not read the store beside the daemon that holds it.
#[derive(Debug, thiserror::Error)]
pub enum BesideError {
    /// The request for a snapshot failed on the control socket (the daemon answered badly or not in time).
    #[error("the running daemon's store could not be read beside it")]
    Ask(#[source] ClientError),
    /// The daemon answered but made no snapshot; holds its error message.
    #[error("the running daemon refused a read snapshot: {0}")]
    Refused(String),
    /// The daemon made a snapshot, but it could not be opened.
    #[error("opening the running daemon's read snapshot {path}")]
    Open {
        /// The snapshot's directory.
        path: String,
        /// The store's error.
        #[source]
        source: StoreError,
    },
}

/// The store under `state_dir` as a read snapshot taken by the daemon running there; `Ok(None)` where
/// no daemon answers on its control socket.
pub fn snapshot_store(state_dir: &Path) -> Result<Option<Store>, BesideError> {
    snapshot_of(state_dir, false)
}

/// The daemon's snapshot of its main store, or with `account` of the engine's account store (a
/// replay's `state_dir/replay`).
fn snapshot_of(state_dir: &Path, account: bool) -> Result<Option<Store>, BesideError> {
    let resp = match request(&socket_path(state_dir), &Request::Snapshot { account }, SNAPSHOT_TIMEOUT) {
        Ok(r) => r,
        Err(ClientError::NotRunning(_)) => return Ok(None),
        Err(e) => return Err(BesideError::Ask(e)),
    };
    let Some(path) = resp.path.filter(|_| resp.ok) else {
        return Err(BesideError::Refused(resp.error.unwrap_or_else(|| "no snapshot in its answer".into())));
    };
    // The snapshot is this reader's own: opened in place, removed when the store is dropped.
    let opened = crate::store::snapshot::open_snapshot(&path);
    opened.map(Some).map_err(|source| BesideError::Open { path: path.display().to_string(), source })
}

/// `Store::open_read_only`, and beside a running daemon (the store locked) its read snapshot instead.
/// The lock's error stands where no daemon answers.
pub fn open_to_read(state_dir: &Path) -> anyhow::Result<Store> {
    or_snapshot(state_dir, Store::open_read_only(state_dir), false)
}

/// The engine's account store (`account_dir`: a replay's `state_dir/replay`, live the state directory
/// itself) opened read-only, and beside the daemon running on `state_dir` its snapshot of that store.
pub fn open_account_to_read(state_dir: &Path, account_dir: &Path) -> anyhow::Result<Store> {
    or_snapshot(state_dir, Store::open_read_only(account_dir), account_dir != state_dir)
}

/// `Store::open` for a command that works on the bars without keeping what it writes (`backtest`,
/// `train`): beside a running daemon (the store locked), its read snapshot instead, where writes (bars
/// imported for the run) go to a private copy and are lost. The lock's error stands where no daemon
/// answers.
pub fn open_or_snapshot(state_dir: &Path) -> anyhow::Result<Store> {
    or_snapshot(state_dir, Store::open(state_dir), false)
}

/// `opened`, or where it is the lock's error, the read snapshot of the daemon running on `state_dir` (of
/// its account store with `account`).
fn or_snapshot(state_dir: &Path, opened: Result<Store, StoreError>, account: bool) -> anyhow::Result<Store> {
    match opened {
        Err(locked @ StoreError::Locked { .. }) => match snapshot_of(state_dir, account)? {
            Some(store) => {
                log::info!("store: the running daemon holds {}; reading its snapshot", state_dir.display());
                Ok(store)
            }
            None => Err(locked.into()),
        },
        other => Ok(other?),
    }
}
