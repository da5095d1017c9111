//! The control protocol: `{"cmd":"status"}` in, `{"ok":true,"status":{...}}` or `{"ok":false,"error":"..."}`
//! out, one JSON object per line.

use super::StatusReport;
use crate::models::ModelKind;
use serde::{Deserialize, Serialize};

/// What a command (or the dashboard) asks the running daemon; the JSON's `cmd` names the variant.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "cmd", rename_all = "lowercase")]
pub enum Request {
    /// The status report (`tradebot status`); changes nothing.
    Status,
    /// Start a retrain now (outside the schedule): one kind, or every kind when `kind` is absent.
    Retrain {
        /// The kind to retrain; `None` retrains every kind.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        kind: Option<ModelKind>,
    },
    /// Stop placing new orders until `Resume` (`tradebot pause`).
    Pause,
    /// Trade again after a `Pause` (`tradebot resume`).
    Resume,
    /// Sell every position at market, then stay paused (`tradebot flatten`).
    Flatten,
    /// Crown a registered model champion of its kind, and trade with it from the next bar.
    Promote {
        /// The registered model's id.
        id: String,
        /// Why, in the person's words: kept in the registry's history and the log.
        reason: String,
    },
    /// Restore the previous champion of `kind`, and trade with it from the next bar.
    Rollback {
        /// The kind whose champion is rolled back.
        kind: ModelKind,
        /// Why, in the person's words: kept in the registry's history and the log.
        reason: String,
    },
    /// A consistent copy of the store for a command that reads beside the running daemon
    /// (`Store::snapshot`): the answer's `path` is the copy's directory, which the reader removes.
    /// `account`: the copy of the engine's account store (a replay's `state_dir/replay`; live, the main
    /// store) instead of the main one.
    Snapshot {
        /// True for the account store's copy, false for the main store's.
        #[serde(default, skip_serializing_if = "std::ops::Not::not")]
        account: bool,
    },
    /// Clear a tripped kill switch (`tradebot risk clear`): the engine forgets it and trades again from
    /// the next bar. `who`: the person clearing, for the log.
    #[serde(rename = "risk_clear")]
    RiskClear {
        /// Who clears it (`$SUDO_USER`, `$USER`, `$LOGNAME`, else the uid), for the log.
        who: String,
    },
    /// Load bars from a file into the store (`tradebot data import`); `file` is absolute, readable by the
    /// daemon. The answer's `import` says what was read and stored.
    Import {
        /// The CSV or JSON-lines file (plain or gzip), as an absolute path.
        file: std::path::PathBuf,
        /// Only these symbols of a file with a Ticker column; empty imports every symbol.
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        symbols: Vec<String>,
        /// The symbol of a file without a Ticker column (or of JSON lines without `S`); `None` otherwise.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        symbol: Option<String>,
        /// The bars' timeframe as written (`1Day`, `15Min`, ...), checked by the daemon.
        timeframe: String,
        /// A chrono date format for dates the built-in formats do not read; `None` for the built-in ones.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        date_format: Option<String>,
    },
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
            Request::Snapshot { .. } => "snapshot",
            Request::RiskClear { .. } => "risk clear",
            Request::Import { .. } => "data import",
        }
    }
}

/// The audit line of a control request answered by the daemon, the same whatever its channel (`channel`:
/// "control socket", "dashboard"): what was asked and the answer, at INFO when done, WARN when refused.
/// Status and snapshot requests, which change nothing, are not audited.
pub fn audit(channel: &str, req: &Request, resp: &Response) {
    if matches!(req, Request::Status | Request::Snapshot { .. }) {
        return;
    }
    let name = req.name();
    if resp.ok {
        log::info!("audit: {channel} {name}: {}", resp.message.as_deref().unwrap_or("done"));
    } else {
        log::warn!("audit: {channel} {name} refused: {}", resp.error.as_deref().unwrap_or("refused"));
    }
}

/// The daemon's one answer to a `Request`: `ok` and, by request, one or more of the optional parts.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Response {
    /// True when the request was done; false when refused, with `error` saying why.
    pub ok: bool,
    /// `status`: the report.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<Box<StatusReport>>,
    /// What was done, in words for the person who asked (`"resumed"`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    /// Why the request was refused, in words for the person who asked.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// `snapshot`: the directory of the copy.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub path: Option<std::path::PathBuf>,
    /// `import`: what the import read and stored.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub import: Option<ImportSummary>,
}

/// What a `data import` read and stored, as the daemon answers it (and as the command prints it when it
/// imports itself).
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(default)]
pub struct ImportSummary {
    /// The format read, in words.
    pub format: String,
    /// Rows read per symbol (imported or already present).
    pub rows: std::collections::BTreeMap<String, usize>,
    /// Bars that were not in the store before.
    pub new_bars: usize,
    /// Rows of symbols not asked for (`--symbols`), skipped.
    pub filtered: usize,
    /// Rows without prices, skipped.
    pub empty: usize,
    /// The rows not imported: (line, why).
    pub bad: Vec<(u64, String)>,
    /// The import stopped: its first rows all failed.
    pub stopped: bool,
    /// The store's directory.
    pub store: String,
}

impl Response {
    /// A request done, with what was done in words.
    pub fn done(message: impl Into<String>) -> Response {
        Response { ok: true, message: Some(message.into()), ..Response::empty() }
    }

    /// The answer to `status`.
    pub fn status(s: StatusReport) -> Response {
        Response { ok: true, status: Some(Box::new(s)), ..Response::empty() }
    }

    /// The answer to `snapshot`: the copy's directory, which the reader removes.
    pub fn snapshot(path: std::path::PathBuf) -> Response {
        Response { ok: true, path: Some(path), ..Response::empty() }
    }

    /// A refusal, with why in words.
    pub fn error(e: impl Into<String>) -> Response {
        Response { ok: false, error: Some(e.into()), ..Response::empty() }
    }

    /// The answer to `import`: a summary line and what was read and stored.
    pub fn imported(message: impl Into<String>, import: ImportSummary) -> Response {
        Response { ok: true, message: Some(message.into()), import: Some(import), ..Response::empty() }
    }

    fn empty() -> Response {
        Response { ok: false, status: None, message: None, error: None, path: None, import: None }
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

    /// Issue 37: a reader of the account asks for its snapshot; an older reader's plain snapshot request
    /// still means the main store; `risk clear` and `data import` reach the daemon by name.
    #[test]
    fn snapshot_risk_clear_and_import_requests_read_and_write_as_documented() {
        let plain: Request = serde_json::from_str(r#"{"cmd":"snapshot"}"#).unwrap();
        assert_eq!(plain, Request::Snapshot { account: false });
        assert_eq!(serde_json::to_string(&plain).unwrap(), r#"{"cmd":"snapshot"}"#);
        let account = Request::Snapshot { account: true };
        assert_eq!(serde_json::to_string(&account).unwrap(), r#"{"cmd":"snapshot","account":true}"#);
        let clear: Request = serde_json::from_str(r#"{"cmd":"risk_clear","who":"ana"}"#).unwrap();
        assert_eq!(clear, Request::RiskClear { who: "ana".into() });
        let line = r#"{"cmd":"import","file":"/tmp/a.csv","symbol":"AAPL","timeframe":"1Day"}"#;
        let import: Request = serde_json::from_str(line).unwrap();
        assert_eq!(serde_json::to_string(&import).unwrap(), line);
        assert_eq!((clear.name(), import.name()), ("risk clear", "data import"));
        assert!(
            serde_json::from_str::<Request>(r#"{"cmd":"import","file":"/tmp/a.csv"}"#).is_err(),
            "timeframe needed"
        );
    }
}
