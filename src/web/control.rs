//! The dashboard's controls: pause, resume, flatten, retrain now, promote and roll back, each a form POST
//! to `/control/{action}` carrying the page's CSRF token (random for each daemon session, so a page of
//! another origin cannot know it and a page from an earlier session is refused), the dashboard token
//! itself (cookie or bearer), and for flatten and promote a ticked confirmation. The request goes to the
//! daemon's host exactly as the control socket's do (`tradebot pause`, ...); each one is written to the
//! log as an audit line naming the action.

use super::{WebState, authorised, refused, same};
use crate::control::{Request, Response as ControlResponse};
use crate::models::ModelKind;
use axum::extract::{Form, Path, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{Html, IntoResponse, Response};
use std::collections::HashMap;
use std::time::Duration;

/// The request a form asks for, or why it is refused.
fn request(action: &str, form: &HashMap<String, String>) -> Result<Request, String> {
    let confirmed = form.get("confirm").is_some_and(|v| v == "yes");
    let reason = || {
        format!("dashboard: {}", form.get("reason").map(|s| s.trim()).filter(|s| !s.is_empty()).unwrap_or("by hand"))
    };
    let kind = |key: &str| -> Result<Option<ModelKind>, String> {
        match form.get(key).map(|s| s.as_str()) {
            None | Some("") | Some("all") => Ok(None),
            Some(k) => k.parse::<ModelKind>().map(Some).map_err(|e| format!("{key}: {e}")),
        }
    };
    match action {
        "pause" => Ok(Request::Pause),
        "resume" => Ok(Request::Resume),
        "retrain" => Ok(Request::Retrain { kind: kind("kind")? }),
        "flatten" if confirmed => Ok(Request::Flatten),
        "flatten" => Err("flatten sells every position: tick the confirmation box to do it".into()),
        "promote" if !confirmed => Err("promote changes the model that trades: tick the confirmation box".into()),
        "promote" => match form.get("id").map(|s| s.trim()).filter(|s| !s.is_empty()) {
            Some(id) => Ok(Request::Promote { id: id.to_string(), reason: reason() }),
            None => Err("promote: choose a model".into()),
        },
        "rollback" => match kind("kind")? {
            Some(kind) => Ok(Request::Rollback { kind, reason: reason() }),
            None => Err("rollback: choose ppo or lstm".into()),
        },
        other => Err(format!("no such control: {other}")),
    }
}

/// A short page with the outcome, going back to the dashboard.
fn page(code: StatusCode, title: &str, message: &str) -> Response {
    let body = format!(
        r#"<!doctype html><html lang="en"><head><meta charset="utf-8"><meta http-equiv="refresh" content="2; url=/"><title>tradebot: {t}</title></head><body><h1 id="outcome">{t}</h1><p id="message">{m}</p><p><a href="/">back to the dashboard</a></p></body></html>"#,
        t = super::svg::esc(title),
        m = super::svg::esc(message)
    );
    (code, Html(body)).into_response()
}

pub(super) async fn post(
    State(s): State<WebState>,
    Path(action): Path<String>,
    headers: HeaderMap,
    form: Result<Form<HashMap<String, String>>, axum::extract::rejection::FormRejection>,
) -> Response {
    if !authorised(&s, &headers) {
        return refused();
    }
    let form = match form {
        Ok(Form(f)) => f,
        Err(e) => return page(StatusCode::BAD_REQUEST, "not done", &format!("not a form: {e}")),
    };
    if !form.get("csrf").is_some_and(|c| same(c.as_bytes(), s.csrf.expose().as_bytes())) {
        log::warn!("audit: dashboard {action} refused: the form's CSRF token is missing or wrong");
        return page(
            StatusCode::FORBIDDEN,
            "refused",
            "the form's CSRF token is missing or stale: reload the dashboard and try again",
        );
    }
    let req = match request(&action, &form) {
        Ok(r) => r,
        Err(e) => return page(StatusCode::BAD_REQUEST, "not done", &e),
    };
    let Some(calls) = s.control.clone() else {
        return page(StatusCode::SERVICE_UNAVAILABLE, "not done", "this server has no daemon to control");
    };
    let (tx, rx) = tokio::sync::oneshot::channel();
    if calls.send((req.clone(), tx)).await.is_err() {
        return page(StatusCode::SERVICE_UNAVAILABLE, "not done", "the daemon is stopping");
    }
    match tokio::time::timeout(Duration::from_secs(30), rx).await {
        Ok(Ok(resp)) => {
            // One audit line for every control request, whatever its channel (`control::audit`).
            crate::control::audit("dashboard", &req, &resp);
            match resp {
                ControlResponse { ok: true, message, .. } => {
                    page(StatusCode::OK, "done", &message.unwrap_or_else(|| "done".into()))
                }
                ControlResponse { error, .. } => {
                    page(StatusCode::CONFLICT, "not done", &error.unwrap_or_else(|| "refused".into()))
                }
            }
        }
        _ => page(StatusCode::GATEWAY_TIMEOUT, "not done", "the daemon did not answer within 30 s"),
    }
}
