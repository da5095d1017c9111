//! The daemon's web listener: `/metrics` (Prometheus) and the dashboard, on one address (loopback by
//! default, `[web]` in the config). Everything is served from the binary; nothing comes from a CDN.
//!
//! ```text
//!  GET /metrics          OpenMetrics text; needs the token only when the listener is not on loopback
//!  GET /                 the dashboard (HTML + inline SVG), token required
//!  GET /api/status       the StatusReport as JSON (what `tradebot status --json` prints), token required
//!  GET /api/dashboard    everything the page shows, as JSON, token required
//!  POST /control/{action} pause, resume, flatten, retrain, promote, rollback: token and CSRF token
//!                        required (`control`), each an audit line in the log
//! ```
//!
//! **Access.** The token is accepted as `Authorization: Bearer TOKEN`, as the `tradebot_token` cookie, or
//! once as `?token=TOKEN`, which sets the cookie (HttpOnly, SameSite=Strict) and redirects to the same
//! page without the token in the address. Anything else gets 401. Tokens are compared in constant time.
//! The token comes from `web.token_file`, `$TRADEBOT_WEB_TOKEN`, the systemd credential
//! `TRADEBOT_WEB_TOKEN`, or `state_dir/web.token`, created with a random value (mode 0600) on first use.
//! The cookie is marked `Secure` when the request came through a TLS proxy (`X-Forwarded-Proto: https`).
//!
//! **Exposure.** The daemon speaks plain HTTP: `web.listen` off loopback is refused by the config unless
//! `web.allow_remote = true` (use a reverse proxy with TLS). The forms' CSRF token is random for each
//! daemon session. At most `web.max_connections` connections are served at once and each must send its
//! request head within `web.header_timeout_secs` (`listen`).

pub mod control;
pub mod data;
pub mod listen;
pub mod page;
pub mod search;
pub mod svg;

pub use data::{DashboardData, DashboardSource, SharedData};

use crate::config::{Secret, WebConfig};
use crate::metrics::{CONTENT_TYPE, Metrics};
use axum::Router;
use axum::extract::{Query, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{Html, IntoResponse, Json, Redirect, Response};
use axum::routing::get;
use std::collections::HashMap;
use std::path::Path;
use std::sync::Arc;
use tokio_util::sync::CancellationToken;

pub const TOKEN_VAR: &str = "TRADEBOT_WEB_TOKEN";
const COOKIE: &str = "tradebot_token";

#[derive(Debug, thiserror::Error)]
pub enum WebError {
    #[error("web.token_file {path}: {reason}")]
    TokenFile { path: String, reason: String },
    #[error("cannot listen on {addr}: {reason} (set web.listen to a free address, or web.enabled = false)")]
    Bind { addr: String, reason: String },
}

#[derive(Clone)]
pub struct WebState {
    pub metrics: Arc<Metrics>,
    pub source: Arc<dyn DashboardSource>,
    token: Secret,
    /// The forms' CSRF token: random for each daemon session (each `WebState::new`).
    csrf: Secret,
    metrics_need_token: bool,
    refresh_secs: u32,
    /// The daemon's host, as the control socket reaches it: the dashboard's controls (none without).
    control: Option<tokio::sync::mpsc::Sender<crate::control::server::Call>>,
}

impl WebState {
    pub fn new(metrics: Arc<Metrics>, source: Arc<dyn DashboardSource>, token: Secret, loopback: bool) -> Self {
        let mut bytes = [0u8; 32];
        rand::fill(&mut bytes);
        let csrf = Secret::new(bytes.iter().map(|b| format!("{b:02x}")).collect::<String>());
        WebState { metrics, source, token, csrf, metrics_need_token: !loopback, refresh_secs: 5, control: None }
    }

    /// The CSRF token the pages of this session carry in their forms.
    pub fn csrf_token(&self) -> &str {
        self.csrf.expose()
    }

    /// The dashboard's controls send their requests here.
    pub fn with_control(mut self, calls: tokio::sync::mpsc::Sender<crate::control::server::Call>) -> Self {
        self.control = Some(calls);
        self
    }
}

/// The dashboard token: the configured file, the environment, the systemd credential, or a token kept in
/// `state_dir/web.token` (created on first use with 32 random bytes, hex, mode 0600).
pub fn resolve_token(
    cfg: &WebConfig,
    state_dir: &Path,
    env: impl Fn(&str) -> Option<String>,
) -> Result<Secret, WebError> {
    let read = |p: &Path| -> Result<Option<String>, WebError> {
        match std::fs::read_to_string(p) {
            Ok(s) if s.trim().len() >= 16 => Ok(Some(s.trim().to_string())),
            Ok(_) => Err(WebError::TokenFile {
                path: p.display().to_string(),
                reason: "holds fewer than 16 characters; put a long random token in it".into(),
            }),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(WebError::TokenFile { path: p.display().to_string(), reason: e.to_string() }),
        }
    };
    if let Some(p) = &cfg.token_file {
        return read(p)?.map(Secret::new).ok_or_else(|| WebError::TokenFile {
            path: p.display().to_string(),
            reason: "does not exist; create it with a long random token, or remove web.token_file".into(),
        });
    }
    if let Some(t) = env(TOKEN_VAR).filter(|t| !t.trim().is_empty()) {
        return Ok(Secret::new(t.trim()));
    }
    if let Some(dir) = env("CREDENTIALS_DIRECTORY")
        && let Some(t) = read(&Path::new(&dir).join(TOKEN_VAR))?
    {
        return Ok(Secret::new(t));
    }
    let path = state_dir.join("web.token");
    if let Some(t) = read(&path)? {
        return Ok(Secret::new(t));
    }
    let mut bytes = [0u8; 32];
    rand::fill(&mut bytes);
    let token: String = bytes.iter().map(|b| format!("{b:02x}")).collect();
    write_private(&path, &token)
        .map_err(|e| WebError::TokenFile { path: path.display().to_string(), reason: e.to_string() })?;
    log::info!("web: created a dashboard token in {}", path.display());
    Ok(Secret::new(token))
}

fn write_private(path: &Path, text: &str) -> std::io::Result<()> {
    use std::io::Write;
    use std::os::unix::fs::OpenOptionsExt;
    if let Some(d) = path.parent() {
        std::fs::create_dir_all(d)?;
    }
    let mut f = std::fs::OpenOptions::new().write(true).create_new(true).mode(0o600).open(path)?;
    f.write_all(text.as_bytes())?;
    f.sync_all()
}

/// Equal strings in time independent of where they differ.
fn same(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

fn presented_token(headers: &HeaderMap) -> Option<String> {
    if let Some(v) = headers.get(header::AUTHORIZATION).and_then(|v| v.to_str().ok())
        && let Some(t) = v.strip_prefix("Bearer ")
    {
        return Some(t.trim().to_string());
    }
    let cookies = headers.get_all(header::COOKIE).iter().filter_map(|v| v.to_str().ok());
    cookies.flat_map(|c| c.split(';')).find_map(|kv| {
        let (k, v) = kv.trim().split_once('=')?;
        (k == COOKIE).then(|| v.to_string())
    })
}

fn authorised(state: &WebState, headers: &HeaderMap) -> bool {
    presented_token(headers).is_some_and(|t| same(t.as_bytes(), state.token.expose().as_bytes()))
}

fn refused() -> Response {
    let body = "<!doctype html><title>tradebot: token required</title><h1>401: token required</h1>\
        <p>Open the dashboard as <code>/?token=TOKEN</code>. The token is in <code>state_dir/web.token</code>, \
        <code>$TRADEBOT_WEB_TOKEN</code>, or the file named by <code>web.token_file</code>.</p>";
    let mut r = (StatusCode::UNAUTHORIZED, Html(body)).into_response();
    r.headers_mut().insert(header::WWW_AUTHENTICATE, HeaderValue::from_static("Bearer"));
    r
}

async fn metrics(State(s): State<WebState>, headers: HeaderMap) -> Response {
    if s.metrics_need_token && !authorised(&s, &headers) {
        return refused();
    }
    ([(header::CONTENT_TYPE, CONTENT_TYPE)], s.metrics.encode()).into_response()
}

async fn dashboard(
    State(s): State<WebState>,
    headers: HeaderMap,
    Query(q): Query<HashMap<String, String>>,
) -> Response {
    if let Some(t) = q.get("token") {
        if !same(t.as_bytes(), s.token.expose().as_bytes()) {
            return refused();
        }
        let mut r = Redirect::to("/").into_response();
        // Behind a TLS proxy the browser must never send the cookie over plain HTTP.
        let secure = headers
            .get("x-forwarded-proto")
            .and_then(|v| v.to_str().ok())
            .is_some_and(|p| p.trim().eq_ignore_ascii_case("https"));
        let cookie = format!("{COOKIE}={t}; HttpOnly; SameSite=Strict; Path=/{}", if secure { "; Secure" } else { "" });
        if let Ok(v) = HeaderValue::from_str(&cookie) {
            r.headers_mut().insert(header::SET_COOKIE, v);
        }
        return r;
    }
    if !authorised(&s, &headers) {
        return refused();
    }
    let source = s.source.clone();
    let refresh = s.refresh_secs;
    let csrf = s.control.is_some().then(|| s.csrf.expose().to_string());
    // Reading the store and rendering are CPU work: off the reactor.
    match tokio::task::spawn_blocking(move || page::render(&source.snapshot(), refresh, csrf.as_deref())).await {
        Ok(html) => Html(html).into_response(),
        Err(e) => (StatusCode::INTERNAL_SERVER_ERROR, format!("rendering failed: {e}")).into_response(),
    }
}

/// The hyper-parameter searches (`web::search`).
async fn search_page(State(s): State<WebState>, headers: HeaderMap) -> Response {
    if !authorised(&s, &headers) {
        return refused();
    }
    let (source, refresh) = (s.source.clone(), s.refresh_secs);
    match tokio::task::spawn_blocking(move || search::render(&source.snapshot().studies, refresh)).await {
        Ok(html) => Html(html).into_response(),
        Err(e) => (StatusCode::INTERNAL_SERVER_ERROR, format!("rendering failed: {e}")).into_response(),
    }
}

async fn api_status(State(s): State<WebState>, headers: HeaderMap) -> Response {
    if !authorised(&s, &headers) {
        return refused();
    }
    let source = s.source.clone();
    match tokio::task::spawn_blocking(move || source.snapshot().status).await {
        Ok(st) => Json(st).into_response(),
        Err(e) => (StatusCode::INTERNAL_SERVER_ERROR, e.to_string()).into_response(),
    }
}

async fn api_dashboard(State(s): State<WebState>, headers: HeaderMap) -> Response {
    if !authorised(&s, &headers) {
        return refused();
    }
    let source = s.source.clone();
    match tokio::task::spawn_blocking(move || source.snapshot()).await {
        Ok(d) => Json(d).into_response(),
        Err(e) => (StatusCode::INTERNAL_SERVER_ERROR, e.to_string()).into_response(),
    }
}

pub fn router(state: WebState) -> Router {
    Router::new()
        .route("/", get(dashboard))
        .route("/search", get(search_page))
        .route("/metrics", get(metrics))
        .route("/api/status", get(api_status))
        .route("/api/dashboard", get(api_dashboard))
        .route("/control/{action}", axum::routing::post(control::post))
        .with_state(state)
}

/// Binds `cfg.listen` (a busy port is a clear error, not a panic).
pub async fn bind(cfg: &WebConfig) -> Result<tokio::net::TcpListener, WebError> {
    tokio::net::TcpListener::bind(cfg.listen)
        .await
        .map_err(|e| WebError::Bind { addr: cfg.listen.to_string(), reason: e.to_string() })
}

/// Serves until `shutdown` is cancelled, within `limits` (`listen`). Cancellation-safe: dropping it closes
/// the listener.
pub async fn serve(
    listener: tokio::net::TcpListener,
    state: WebState,
    limits: listen::Limits,
    shutdown: CancellationToken,
) {
    let addr = listener.local_addr().map(|a| a.to_string()).unwrap_or_default();
    log::info!(
        "web: dashboard and /metrics on http://{addr}/ (at most {} connections, request heads within {} s)",
        limits.max_connections,
        limits.header_timeout.as_secs()
    );
    listen::serve(listener, router(state), limits, shutdown).await;
}

#[cfg(test)]
mod tests;
