//! The versioned JSON API the page is built on (`/api/v1/...`), its push channel (server-sent events)
//! and the charting library's file. Every answer is JSON, errors included (`auth::json_error`).
//!
//! The event stream sends an `update` event at once and then every `WebState::push_every`: the
//! `DashboardData` (what `/api/v1/dashboard` answers), the page's sections as HTML (the tables, rendered by
//! `page::sections`, so the page and its updates are one rendering) and a sequence number. It ends when the
//! daemon stops.

use super::WebState;
use super::auth::json_error;
use axum::extract::State;
use axum::http::{StatusCode, Uri};
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{IntoResponse, Json, Response};
use std::convert::Infallible;

/// What the event stream sends: the data, the page's sections, and a count.
#[derive(serde::Serialize)]
struct Update<'a> {
    version: u32,
    seq: u64,
    data: &'a super::DashboardData,
    sections: Vec<(&'static str, String)>,
}

pub(super) async fn status(State(s): State<WebState>) -> Response {
    let source = s.source.clone();
    match tokio::task::spawn_blocking(move || source.snapshot().status).await {
        Ok(st) => Json(st).into_response(),
        Err(e) => json_error(StatusCode::INTERNAL_SERVER_ERROR, &format!("reading the status failed: {e}")),
    }
}

pub(super) async fn dashboard(State(s): State<WebState>) -> Response {
    let source = s.source.clone();
    match tokio::task::spawn_blocking(move || source.snapshot()).await {
        Ok(d) => Json(d).into_response(),
        Err(e) => json_error(StatusCode::INTERNAL_SERVER_ERROR, &format!("reading the dashboard failed: {e}")),
    }
}

/// The search page's studies as its page renders them (`search::studies`): what its script puts in place
/// when the event stream's studies change.
pub(super) async fn search(State(s): State<WebState>) -> Response {
    let source = s.source.clone();
    match tokio::task::spawn_blocking(move || super::search::studies(&source.snapshot().studies)).await {
        Ok(html) => Json(serde_json::json!({ "version": 1, "html": html })).into_response(),
        Err(e) => json_error(StatusCode::INTERNAL_SERVER_ERROR, &format!("rendering the searches failed: {e}")),
    }
}

/// One update as an SSE event (`None` when the snapshot could not be taken or serialised).
async fn update(s: &WebState, seq: u64) -> Option<Event> {
    let source = s.source.clone();
    let json = tokio::task::spawn_blocking(move || {
        let d = source.snapshot();
        let u = Update { version: 1, seq, data: &d, sections: super::page::sections(&d) };
        serde_json::to_string(&u)
    })
    .await
    .ok()?
    .ok()?;
    Some(Event::default().event("update").id(seq.to_string()).data(json))
}

pub(super) async fn events(State(s): State<WebState>) -> Response {
    let every = s.push_every;
    let stop = s.stop.clone();
    let stream = futures_util::stream::unfold((s, 0u64), move |(s, seq)| {
        let stop = stop.clone();
        async move {
            if seq > 0 {
                tokio::select! {
                    _ = stop.cancelled() => return None,
                    _ = tokio::time::sleep(every) => {}
                }
            }
            let event = update(&s, seq).await.unwrap_or_else(|| Event::default().comment("no update"));
            Some((Ok::<Event, Infallible>(event), (s, seq + 1)))
        }
    });
    Sse::new(stream).keep_alive(KeepAlive::default()).into_response()
}

/// An unknown address: JSON under `/api/` and `/control/`, a short text otherwise.
pub(super) async fn not_found(uri: Uri) -> Response {
    if super::auth::is_api(uri.path()) {
        let msg = format!(
            "no such endpoint: {} (the API is /api/v1/status, /api/v1/dashboard, /api/v1/events, /api/v1/search)",
            uri.path()
        );
        return json_error(StatusCode::NOT_FOUND, &msg);
    }
    (StatusCode::NOT_FOUND, "not found: the dashboard is at /").into_response()
}
