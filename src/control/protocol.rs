//! The control protocol: `{"cmd":"status"}` in, `{"ok":true,"status":{...}}` or `{"ok":false,"error":"..."}`
//! out, one JSON object per line.

use super::StatusReport;
use crate::models::ModelKind;
use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "cmd", rename_all = "lowercase")]
pub enum Request {
    Status,
    /// Start a retrain now (outside the schedule): one kind, or every kind when `kind` is absent.
    Retrain {
        #[serde(default, skip_serializing_if = "Option::is_none")]
        kind: Option<ModelKind>,
    },
    Pause,
    Resume,
    Flatten,
    /// Crown a registered model champion of its kind, and trade with it from the next bar.
    Promote {
        id: String,
        reason: String,
    },
    /// Restore the previous champion of `kind`, and trade with it from the next bar.
    Rollback {
        kind: ModelKind,
        reason: String,
    },
    /// A consistent copy of the store for a command that reads beside the running daemon
    /// (`Store::snapshot`): the answer's `path` is the copy's directory, which the reader removes.
    Snapshot,
}

impl Request {
    /// The request in a word, for audit lines.
    pub fn name(&self) -> &'static str {
        match self {
            Request::Status => "status",
            Request::Retrain { .. } => "retrain",
            Request::Pause => "pause",
            Request::Resume => "resume",
            Request::Flatten => "flatten",
            Request::Promote { .. } => "promote",
            Request::Rollback { .. } => "rollback",
            Request::Snapshot => "snapshot",
        }
    }
}

/// The audit line of a control request answered by the daemon, the same whatever its channel (`channel`:
/// "control socket", "dashboard"): what was asked and the answer, at INFO when done, WARN when refused.
/// Status and snapshot requests, which change nothing, are not audited.
pub fn audit(channel: &str, req: &Request, resp: &Response) {
    if matches!(req, Request::Status | Request::Snapshot) {
        return;
    }
    let name = req.name();
    if resp.ok {
        log::info!("audit: {channel} {name}: {}", resp.message.as_deref().unwrap_or("done"));
    } else {
        log::warn!("audit: {channel} {name} refused: {}", resp.error.as_deref().unwrap_or("refused"));
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Response {
    pub ok: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<Box<StatusReport>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// `snapshot`: the directory of the copy.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub path: Option<std::path::PathBuf>,
}

impl Response {
    pub fn done(message: impl Into<String>) -> Response {
        Response { ok: true, status: None, message: Some(message.into()), error: None, path: None }
    }

    pub fn status(s: StatusReport) -> Response {
        Response { ok: true, status: Some(Box::new(s)), message: None, error: None, path: None }
    }

    pub fn snapshot(path: std::path::PathBuf) -> Response {
        Response { ok: true, status: None, message: None, error: None, path: Some(path) }
    }

    pub fn error(e: impl Into<String>) -> Response {
        Response { ok: false, status: None, message: None, error: Some(e.into()), path: None }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn retrain_takes_an_optional_kind_and_old_reports_still_parse() {
        let plain: Request = serde_json::from_str(r#"{"cmd":"retrain"}"#).unwrap();
        assert_eq!(plain, Request::Retrain { kind: None });
        let lstm: Request = serde_json::from_str(r#"{"cmd":"retrain","kind":"lstm"}"#).unwrap();
        assert_eq!(lstm, Request::Retrain { kind: Some(ModelKind::Lstm) });
        assert_eq!(serde_json::to_string(&plain).unwrap(), r#"{"cmd":"retrain"}"#);
        assert!(serde_json::from_str::<Request>(r#"{"cmd":"retrain","kind":"svm"}"#).is_err());
        // A report written before `version` existed, with fields missing, still reads (as version 0).
        let old: StatusReport = serde_json::from_str(r#"{"mode":"paper","equity":5.0,"models":{"ppo":"p"}}"#).unwrap();
        assert_eq!((old.version, old.equity, old.models.ppo.as_deref()), (0, 5.0, Some("p")));
    }
}
