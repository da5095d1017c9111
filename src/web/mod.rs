//! The daemon's web listener: `/metrics` (Prometheus) and the dashboard, on one address (loopback by
//! default, `[web]` in the config). Everything is served from the binary; nothing comes from a CDN.
//!
//! ```text
//!  GET /                      the dashboard: loaded once, then updated by the event stream
//!  GET /search                the hyper-parameter searches (updated from the event stream too)
//!  GET /report?from=&to=      the account's own history over a period, as a tear sheet (`reports`)
//!  GET /report/backtest       the last `tradebot backtest --report` tear sheet
//!  GET /api/v1/status         the StatusReport as JSON (what `tradebot status --json` prints)
//!  GET /api/v1/dashboard      everything the page shows, as JSON
//!  GET /api/v1/events         server-sent events: an `update` every 2 s (`api`)
//!  GET /api/v1/search         the search page's studies, rendered (fetched when the stream's change)
//!  POST /api/v1/control/{action}, /control/{action}
//!                             pause, resume, flatten, retrain, promote, rollback: a form with the CSRF
//!                             token (`control`), answered in JSON, each an audit line in the log
//!  GET /metrics               OpenMetrics text; needs the token only when the listener is not on loopback
//!  GET /assets/lightweight-charts.js   the charting library bundled at build time (no token)
//! ```
//!
//! **Access** (`auth`): one token for every page and API: `Authorization: Bearer TOKEN`, the
//! `tradebot_token` cookie, or once `?token=TOKEN` on any address, which sets the cookie (HttpOnly,
//! SameSite=Strict; `Secure` behind a TLS proxy). Refusals are JSON on the API, a page elsewhere.
//! The token comes from `web.token_file`, `$TRADEBOT_WEB_TOKEN`, the systemd credential
//! `TRADEBOT_WEB_TOKEN`, or `state_dir/web.token`, created with a random value (mode 0600) on first use.
//!
//! **Exposure.** The daemon speaks plain HTTP: `web.listen` off loopback is refused by the config unless
//! `web.allow_remote = true` (use a reverse proxy with TLS). The forms' CSRF token is random for each
//! daemon session. At most `web.max_connections` connections are served at once and each must send its
//! request head within `web.header_timeout_secs` (`listen`).

pub(crate) mod api;
pub(crate) mod assets;
mod auth;
pub(crate) mod control;
pub(crate) mod data;
pub(crate) mod format;
pub(crate) mod listen;
pub(crate) mod page;
pub(crate) mod reports;
pub(crate) mod search;
pub(crate) mod svg;
mod tables;

#[cfg(test)]
pub(crate) use data::SharedData;
pub(crate) use data::{DashboardData, DashboardSource};

use crate::config::{Secret, WebConfig};
use crate::metrics::{CONTENT_TYPE, Metrics};
use axum::Router;
use axum::extract::State;
use axum::http::{StatusCode, header};
use axum::response::{Html, IntoResponse, Response};
use axum::routing::get;
use std::path::Path;
use std::sync::Arc;
use tokio_util::sync::CancellationToken;

pub(crate) const TOKEN_VAR: &str = "TRADEBOT_WEB_TOKEN";

#[derive(Debug, thiserror::Error)]
pub(crate) enum WebError {
    #[error("web.token_file {path}: {reason}")]
    TokenFile { path: String, reason: String },
    #[error("cannot listen on {addr}: {reason} (set web.listen to a free address, or web.enabled = false)")]
    Bind { addr: String, reason: String },
}

#[derive(Clone)]
pub(crate) struct WebState {
    pub metrics: Arc<Metrics>,
    pub source: Arc<dyn DashboardSource>,
    token: Secret,
    /// The forms' CSRF token: random for each daemon session (each `WebState::new`).
    csrf: Secret,
    metrics_need_token: bool,
    /// How often the event stream sends an update.
    push_every: std::time::Duration,
    /// Cancelled when the server stops: the event streams end.
    stop: CancellationToken,
    /// The daemon's host, as the control socket reaches it: the dashboard's controls (none without).
    control: Option<tokio::sync::mpsc::Sender<crate::control::server::Call>>,
    /// The account report and the last backtest's tear sheet (none without a daemon's config).
    reports: Option<reports::Reports>,
}

impl WebState {
    pub(crate) fn new(metrics: Arc<Metrics>, source: Arc<dyn DashboardSource>, token: Secret, loopback: bool) -> Self {
        let mut bytes = [0u8; 32];
        rand::fill(&mut bytes);
        let csrf = Secret::new(bytes.iter().map(|b| format!("{b:02x}")).collect::<String>());
        WebState {
            metrics,
            source,
            token,
            csrf,
            metrics_need_token: !loopback,
            push_every: std::time::Duration::from_secs(2),
            stop: CancellationToken::new(),
            control: None,
            reports: None,
        }
    }

    /// The report pages (`/report`, `/report/backtest`), for a daemon running with `config`.
    pub(crate) fn with_reports(mut self, config: crate::config::Config) -> Self {
        self.reports = Some(reports::Reports { config: Arc::new(config) });
        self
    }

    /// The dashboard's controls send their requests here.
    pub(crate) fn with_control(mut self, calls: tokio::sync::mpsc::Sender<crate::control::server::Call>) -> Self {
        self.control = Some(calls);
        self
    }
}

/// The dashboard token: the configured file, the environment, the systemd credential, or a token kept in
/// `state_dir/web.token` (created on first use with 32 random bytes, hex, mode 0600).
pub(crate) fn resolve_token(
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

async fn metrics(State(s): State<WebState>) -> Response {
    ([(header::CONTENT_TYPE, CONTENT_TYPE)], s.metrics.encode()).into_response()
}

/// The page: rendered once with the current data; the event stream updates it (`api::events`).
async fn dashboard(State(s): State<WebState>) -> Response {
    let source = s.source.clone();
    let csrf = s.control.is_some().then(|| s.csrf.expose().to_string());
    let state_dir = s.reports.as_ref().map(|r| r.config.state_dir.clone());
    // Reading the store and rendering are CPU work: off the reactor.
    let render = move || {
        let links = page::Links {
            account: state_dir.is_some(),
            backtest: state_dir.as_deref().and_then(reports::last_backtest_at),
        };
        page::render_with(&source.snapshot(), csrf.as_deref(), &links)
    };
    match tokio::task::spawn_blocking(render).await {
        Ok(html) => Html(html).into_response(),
        Err(e) => (StatusCode::INTERNAL_SERVER_ERROR, format!("rendering failed: {e}")).into_response(),
    }
}

/// The hyper-parameter searches (`web::search`).
async fn search_page(State(s): State<WebState>) -> Response {
    let source = s.source.clone();
    match tokio::task::spawn_blocking(move || search::render(&source.snapshot().studies)).await {
        Ok(html) => Html(html).into_response(),
        Err(e) => (StatusCode::INTERNAL_SERVER_ERROR, format!("rendering failed: {e}")).into_response(),
    }
}

pub(crate) fn router(state: WebState) -> Router {
    let control = axum::routing::post(control::post);
    Router::new()
        .route("/", get(dashboard))
        .route("/search", get(search_page))
        .route("/metrics", get(metrics))
        .route("/api/v1/status", get(api::status))
        .route("/api/v1/dashboard", get(api::dashboard))
        .route("/api/v1/events", get(api::events))
        .route("/api/v1/search", get(api::search))
        .route("/report", get(reports::account_report))
        .route("/report/backtest", get(reports::last_backtest))
        .route("/api/v1/control/{action}", control.clone())
        .route("/control/{action}", control)
        .fallback(api::not_found)
        .layer(axum::middleware::from_fn_with_state(state.clone(), auth::gate))
        // The charting library is public code: served without the token.
        .route("/assets/lightweight-charts.js", get(assets::charts_js))
        .with_state(state)
}

/// Binds `cfg.listen` (a busy port is a clear error, not a panic).
pub(crate) async fn bind(cfg: &WebConfig) -> Result<tokio::net::TcpListener, WebError> {
    tokio::net::TcpListener::bind(cfg.listen)
        .await
        .map_err(|e| WebError::Bind { addr: cfg.listen.to_string(), reason: e.to_string() })
}

/// Serves until `shutdown` is cancelled, within `limits` (`listen`). Cancellation-safe: dropping it closes
/// the listener.
pub(crate) async fn serve(
    listener: tokio::net::TcpListener,
    mut state: WebState,
    limits: listen::Limits,
    shutdown: CancellationToken,
) {
    state.stop = shutdown.clone();
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
