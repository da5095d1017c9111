//! The dashboard's reports, behind the same token as every page:
//!
//! - `/report?from=YYYY-MM-DD&to=YYYY-MM-DD` (either may be empty or absent: the whole history): the
//!   account's own history as the tear sheet `tradebot report --report` writes, read from the daemon's
//!   read snapshot of its account store (asked for over the control channel, as `tradebot report` asks
//!   over the socket);
//! - `/report/backtest`: the tear sheet the last `tradebot backtest --report` wrote (the copy it keeps as
//!   `state_dir/reports/backtest-latest.html`).
//!
//! The dashboard links both (`page::reports_section`).

use super::WebState;
use crate::backtest::account;
use crate::backtest::tearsheet::LAST_BACKTEST;
use crate::config::Config;
use crate::control::Request;
use axum::extract::{Query, State};
use axum::http::StatusCode;
use axum::response::{Html, IntoResponse, Response};
use chrono::{DateTime, NaiveDate, Utc};
use std::path::Path;
use std::sync::Arc;

/// What the report pages need: the daemon's config (its state directory, symbols, fees, timeframe).
#[derive(Clone)]
pub(crate) struct Reports {
    pub config: Arc<Config>,
}

/// The period of `/report`, as the form sends it (empty fields for an open end).
#[derive(Debug, Default, serde::Deserialize)]
pub(super) struct Period {
    #[serde(default)]
    from: String,
    #[serde(default)]
    to: String,
}

/// A field of the period that is not a day: its name and what it holds.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{field}={value:?} is not a day: write YYYY-MM-DD, or leave it empty for the whole history")]
struct BadDay {
    /// `from` or `to`.
    field: &'static str,
    /// What the form sent (trimmed).
    value: String,
}

/// A day of the period: `None` when empty, an error naming the field and the format otherwise.
fn day(field: &'static str, s: &str) -> Result<Option<NaiveDate>, BadDay> {
    let s = s.trim();
    if s.is_empty() {
        return Ok(None);
    }
    NaiveDate::parse_from_str(s, "%Y-%m-%d").map(Some).map_err(|_| BadDay { field, value: s.to_string() })
}

/// A short page saying why there is no report, with its status.
fn problem(status: StatusCode, text: &str) -> Response {
    let body = format!(
        r#"<!doctype html><html lang="en"><head><meta charset="utf-8"><title>tradebot · report</title></head><body><h1>No report</h1><p id="problem">{}</p><p><a href="/">back to the dashboard</a></p></body></html>"#,
        super::svg::esc(text)
    );
    (status, Html(body)).into_response()
}

/// When the last backtest's tear sheet was written, if one is kept under `state_dir`.
pub(crate) fn last_backtest_at(state_dir: &Path) -> Option<DateTime<Utc>> {
    let modified = std::fs::metadata(state_dir.join(LAST_BACKTEST)).ok()?.modified().ok()?;
    Some(DateTime::<Utc>::from(modified))
}

pub(super) async fn last_backtest(State(s): State<WebState>) -> Response {
    let Some(reports) = s.reports.clone() else {
        return problem(StatusCode::NOT_FOUND, "this dashboard has no reports (no daemon behind it)");
    };
    let path = reports.config.state_dir.join(LAST_BACKTEST);
    let read = {
        let path = path.clone();
        tokio::task::spawn_blocking(move || std::fs::read_to_string(path)).await
    };
    match read {
        Ok(Ok(page)) => Html(page).into_response(),
        Ok(Err(e)) if e.kind() == std::io::ErrorKind::NotFound => problem(
            StatusCode::NOT_FOUND,
            "no backtest tear sheet yet: run `tradebot backtest --report FILE.html` with this daemon's config",
        ),
        Ok(Err(e)) => problem(StatusCode::INTERNAL_SERVER_ERROR, &format!("reading {}: {e}", path.display())),
        Err(e) => problem(StatusCode::INTERNAL_SERVER_ERROR, &format!("reading {}: {e}", path.display())),
    }
}

pub(super) async fn account_report(State(s): State<WebState>, Query(p): Query<Period>) -> Response {
    let Some(reports) = s.reports.clone() else {
        return problem(StatusCode::NOT_FOUND, "this dashboard has no reports (no daemon behind it)");
    };
    let (from, to) = match (day("from", &p.from), day("to", &p.to)) {
        (Ok(f), Ok(t)) => (f, t),
        (Err(e), _) | (_, Err(e)) => return problem(StatusCode::BAD_REQUEST, &e.to_string()),
    };
    if let (Some(f), Some(t)) = (from, to)
        && f > t
    {
        return problem(StatusCode::BAD_REQUEST, &format!("the period {f} to {t} is reversed: from is after to"));
    }
    let Some(calls) = s.control.clone() else {
        return problem(StatusCode::SERVICE_UNAVAILABLE, "no daemon behind this dashboard to read the account from");
    };
    let (tx, rx) = tokio::sync::oneshot::channel();
    if calls.send((Request::Snapshot { account: true }, tx)).await.is_err() {
        return problem(StatusCode::SERVICE_UNAVAILABLE, "the daemon is shutting down");
    }
    let answer = match tokio::time::timeout(crate::control::server::LONG_ANSWER_TIMEOUT, rx).await {
        Ok(Ok(r)) => r,
        Ok(Err(_)) => return problem(StatusCode::SERVICE_UNAVAILABLE, "the daemon dropped the request"),
        Err(_) => return problem(StatusCode::GATEWAY_TIMEOUT, "the daemon took too long to copy its account"),
    };
    let Some(path) = answer.path.filter(|_| answer.ok) else {
        let why = answer.error.unwrap_or_else(|| "no snapshot in its answer".into());
        return problem(StatusCode::SERVICE_UNAVAILABLE, &format!("the daemon could not copy its account: {why}"));
    };
    let config = reports.config.clone();
    let built = tokio::task::spawn_blocking(move || -> Result<String, (StatusCode, String)> {
        let store = crate::store::snapshot::open_snapshot(&path)
            .map_err(|e| (StatusCode::INTERNAL_SERVER_ERROR, format!("opening the account's copy: {e}")))?;
        let (lo, hi) = crate::data::day_window(from, to);
        let r = account::report(&config, &store, lo, hi).map_err(|e| (StatusCode::NOT_FOUND, e.to_string()))?;
        let json = serde_json::to_string(&r).map_err(|e| (StatusCode::INTERNAL_SERVER_ERROR, e.to_string()))?;
        Ok(account::tear_sheet(&config, &r, &json))
    })
    .await;
    match built {
        Ok(Ok(page)) => Html(page).into_response(),
        Ok(Err((status, text))) => problem(status, &text),
        Err(e) => problem(StatusCode::INTERNAL_SERVER_ERROR, &format!("building the report failed: {e}")),
    }
}

#[cfg(test)]
mod tests {
    use super::day;
    use chrono::NaiveDate;

    #[test]
    fn a_day_is_empty_or_a_date_and_a_bad_one_names_its_field() {
        assert_eq!(day("from", " "), Ok(None));
        assert_eq!(day("to", "2012-03-05"), Ok(NaiveDate::from_ymd_opt(2012, 3, 5)));
        let e = day("from", "5.3.2012").unwrap_err().to_string();
        assert!(e.starts_with("from=\"5.3.2012\" is not a day: write YYYY-MM-DD"), "{e}");
    }
}
