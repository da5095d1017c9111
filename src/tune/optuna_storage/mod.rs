//! Searches on Optuna's own storage (`tradebot tune ppo --storage grpc://host:port --study NAME`): tradebot
//! workers join an Optuna study through Optuna's gRPC storage proxy (`optuna.storages.run_grpc_proxy_server`,
//! over any RDB Optuna supports), beside Python Optuna workers, and `optuna-dashboard` watches it.
//!
//! - [`messages`]: the service's messages by field number (no generated code).
//! - [`client`]: the blocking client: backoff while the proxy is away, trials never created twice.
//! - [`mapping`]: our parameters as Optuna distributions and back, Optuna trials as our trial records, the
//!   study's search space checked against ours.
//! - `worker` (feature `train`): the search loop of one worker on the shared study: trials numbered by the
//!   storage, proposed from every trial of the study, judged at their rungs against every worker's values,
//!   kept alive by a heartbeat, other tradebot workers' dead trials failed.
//! - `holdout` (feature `train`): the promotion gate on a completed trial's model, in its user attributes.
//! - [`view`]: a study in the storage as our record (`tradebot tune list|show --storage`).

pub(crate) mod client;
#[cfg(feature = "train")]
mod holdout;
pub(crate) mod mapping;
pub(crate) mod messages;
#[cfg(feature = "train")]
mod share;
pub(crate) mod view;
#[cfg(feature = "train")]
pub(super) mod worker;

pub(crate) use client::Client;

/// The trial system attribute holding a tradebot worker's heartbeat (Unix seconds) while its trial runs.
pub(crate) const HEARTBEAT_ATTR: &str = "tradebot:heartbeat";
/// The trial system attribute naming the tradebot worker that runs it (`host-pid`).
pub(crate) const WORKER_ATTR: &str = "tradebot:worker";
/// The study system attribute holding the search space a tradebot worker created or joined it with.
pub(crate) const SPACE_ATTR: &str = "tradebot:space";
/// The study system attribute naming the format of what tradebot writes in a study (`FORMAT`).
pub(crate) const FORMAT_ATTR: &str = "tradebot:format";
pub(crate) const FORMAT: u32 = 1;

/// What went wrong talking to Optuna's storage.
#[derive(Debug, thiserror::Error)]
pub(crate) enum StorageError {
    #[error("--storage {url:?}: {why}")]
    BadUrl { url: String, why: String },
    #[error(
        "Optuna storage {url} did not answer {call} for {waited_s}s ({detail}): is the proxy running (`python -c 'import optuna; optuna.storages.run_grpc_proxy_server(...)'`) and the address right?"
    )]
    Unreachable { url: String, call: String, waited_s: u64, detail: String },
    #[error("Optuna storage {url}: {call}: not found: {detail}")]
    NotFound { url: String, call: String, detail: String },
    #[error("Optuna storage {url}: {call}: already exists: {detail}")]
    AlreadyExists { url: String, call: String, detail: String },
    #[error("Optuna storage {url}: {call} refused ({code:?}): {detail}")]
    Refused { url: String, call: String, code: tonic::Code, detail: String },
    #[error("Optuna storage: {what}: {why}")]
    Malformed { what: String, why: String },
    #[error("Optuna storage client: {why}")]
    Io { why: String },
    #[error("study {study:?} cannot be joined: {why}")]
    Conflict { study: String, why: String },
}

impl StorageError {
    /// The error for a refusal `s`; `away`: the proxy could not be reached (after `waited`).
    fn from_status(url: &str, call: &str, s: tonic::Status, away: bool, waited: std::time::Duration) -> StorageError {
        let (url, call, detail) = (url.to_string(), call.to_string(), s.message().to_string());
        match s.code() {
            _ if away => StorageError::Unreachable { url, call, waited_s: waited.as_secs(), detail },
            tonic::Code::NotFound => StorageError::NotFound { url, call, detail },
            tonic::Code::AlreadyExists => StorageError::AlreadyExists { url, call, detail },
            tonic::Code::DeadlineExceeded => {
                StorageError::Unreachable { url, call, waited_s: waited.as_secs(), detail }
            }
            code => StorageError::Refused { url, call, code, detail },
        }
    }
}

/// Now, in Unix seconds (a heartbeat's clock).
pub(crate) fn unix_now() -> f64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0.0, |d| d.as_secs_f64())
}
