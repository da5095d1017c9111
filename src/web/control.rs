//! The dashboard's controls: pause, resume, flatten, retrain now, promote and roll back, each a form POST
//! to `/control/{action}` carrying the page's CSRF token (random for each daemon session, so a page of
//! another origin cannot know it and a page from an earlier session is refused), the dashboard token
//! itself (cookie or bearer), and for flatten and promote a ticked confirmation. The request goes to the
//! daemon's host exactly as the control socket's do (`tradebot pause`, ...); each one is written to the
//! log as an audit line naming the action. Answers are JSON (the page posts with `fetch` and shows the
//! message beside the form); a body that is not a form is 415, with what to send.

use super::WebState;
use super::auth::{json_error, same};
use crate::control::{Request, Response as ControlResponse};
use crate::models::ModelKind;
use axum::extract::{Form, Path, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Json, Response};
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

/// The outcome as JSON: `{"ok": true, "message": ...}`, or the error (`auth::json_error`).
fn answer(code: StatusCode, message: &str) -> Response {
    if code.is_success() {
        return (code, Json(serde_json::json!({ "ok": true, "message": message }))).into_response();
    }
    json_error(code, message)
}

pub(super) async fn post(
    State(s): State<WebState>,
    Path(action): Path<String>,
    form: Result<Form<HashMap<String, String>>, axum::extract::rejection::FormRejection>,
) -> Response {
    let form = match form {
        Ok(Form(f)) => f,
        Err(axum::extract::rejection::FormRejection::InvalidFormContentType(_)) => {
            return answer(
                StatusCode::UNSUPPORTED_MEDIA_TYPE,
                "send the control as a form: Content-Type: application/x-www-form-urlencoded, with csrf=...",
            );
        }
        Err(e) => return answer(StatusCode::BAD_REQUEST, &format!("the form does not read: {}", e.body_text())),
    };
    if !form.get("csrf").is_some_and(|c| same(c.as_bytes(), s.csrf.expose().as_bytes())) {
        log::warn!("audit: dashboard {action} refused: the form's CSRF token is missing or wrong");
        return answer(
            StatusCode::FORBIDDEN,
            "the form's CSRF token is missing or stale: reload the dashboard and try again",
        );
    }
    let req = match request(&action, &form) {
        Ok(r) => r,
        Err(e) => return answer(StatusCode::BAD_REQUEST, &e),
    };
    let Some(calls) = s.control.clone() else {
        return answer(StatusCode::SERVICE_UNAVAILABLE, "this server has no daemon to control");
    };
    let (tx, rx) = tokio::sync::oneshot::channel();
    if calls.send((req.clone(), tx)).await.is_err() {
        return answer(StatusCode::SERVICE_UNAVAILABLE, "the daemon is stopping");
    }
    match tokio::time::timeout(Duration::from_secs(30), rx).await {
        Ok(Ok(resp)) => {
            // One audit line for every control request, whatever its channel (`control::audit`).
            crate::control::audit("dashboard", &req, &resp);
            match resp {
                ControlResponse { ok: true, message, .. } => {
                    answer(StatusCode::OK, &message.unwrap_or_else(|| "done".into()))
                }
                ControlResponse { error, .. } => {
                    answer(StatusCode::CONFLICT, &error.unwrap_or_else(|| "refused".into()))
                }
            }
        }
        _ => answer(StatusCode::GATEWAY_TIMEOUT, "the daemon did not answer within 30 s"),
    }
}
