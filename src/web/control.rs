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
use crate::models::manifest::UnknownKind;
use axum::extract::{Form, Path, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Json, Response};
use std::collections::HashMap;
use std::time::Duration;

/// Why a control form is refused (400); each message says what to do instead.
#[derive(Debug, PartialEq, thiserror::Error)]
enum FormError {
    #[error("flatten sells every position: tick the confirmation box to do it")]
    FlattenUnconfirmed,
    #[error("promote changes the model that trades: tick the confirmation box")]
    PromoteUnconfirmed,
    #[error("promote: choose a model")]
    NoModel,
    #[error("rollback: choose ppo or lstm")]
    NoKind,
    /// The form's `key` field names no model kind.
    #[error("{key}: {source}")]
    Kind { key: String, source: UnknownKind },
    #[error("no such control: {0}")]
    NoSuchControl(String),
}

/// The request a form asks for, or why it is refused.
fn request(action: &str, form: &HashMap<String, String>) -> Result<Request, FormError> {
    let confirmed = form.get("confirm").is_some_and(|v| v == "yes");
    let reason = || {
        format!("dashboard: {}", form.get("reason").map(|s| s.trim()).filter(|s| !s.is_empty()).unwrap_or("by hand"))
    };
    let kind = |key: &str| -> Result<Option<ModelKind>, FormError> {
        match form.get(key).map(|s| s.as_str()) {
            None | Some("") | Some("all") => Ok(None),
            Some(k) => k.parse::<ModelKind>().map(Some).map_err(|source| FormError::Kind { key: key.into(), source }),
        }
    };
    match action {
        "pause" => Ok(Request::Pause),
        "resume" => Ok(Request::Resume),
        "retrain" => Ok(Request::Retrain { kind: kind("kind")? }),
        "flatten" if confirmed => Ok(Request::Flatten),
        "flatten" => Err(FormError::FlattenUnconfirmed),
        "promote" if !confirmed => Err(FormError::PromoteUnconfirmed),
        "promote" => match form.get("id").map(|s| s.trim()).filter(|s| !s.is_empty()) {
            Some(id) => Ok(Request::Promote { id: id.to_string(), reason: reason() }),
            None => Err(FormError::NoModel),
        },
        "rollback" => match kind("kind")? {
            Some(kind) => Ok(Request::Rollback { kind, reason: reason() }),
            None => Err(FormError::NoKind),
        },
        other => Err(FormError::NoSuchControl(other.to_string())),
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
        Err(e) => return answer(StatusCode::BAD_REQUEST, &e.to_string()),
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

#[cfg(test)]
mod tests {
    use super::{FormError, request};
    use crate::control::Request;
    use crate::models::manifest::UnknownKind;
    use std::collections::HashMap;

    fn form(pairs: &[(&str, &str)]) -> HashMap<String, String> {
        pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
    }

    #[test]
    fn each_refused_form_is_its_own_error_naming_the_fix() {
        assert_eq!(request("flatten", &form(&[])), Err(FormError::FlattenUnconfirmed));
        assert_eq!(request("flatten", &form(&[("confirm", "yes")])), Ok(Request::Flatten));
        assert_eq!(request("promote", &form(&[("confirm", "yes")])), Err(FormError::NoModel));
        assert_eq!(request("rollback", &form(&[])), Err(FormError::NoKind));
        let bad = request("retrain", &form(&[("kind", "svm")]));
        let want = FormError::Kind { key: "kind".into(), source: UnknownKind("svm".into()) };
        assert_eq!(bad, Err(want));
        let message = bad.unwrap_err().to_string();
        assert!(message.starts_with("kind: ") && message.contains("use ppo or lstm"), "{message}");
        assert_eq!(request("sell", &form(&[])), Err(FormError::NoSuchControl("sell".into())));
    }
}
