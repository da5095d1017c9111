//! The dashboard's accept loop: axum's router served connection by connection through hyper, with a cap
//! on the connections served at once and a limit on how long a request head may take.
//!
//! A connection above the cap is closed as soon as it is accepted (never queued), so idle or slow clients
//! hold at most `max_connections` descriptors; each connection must send its whole request head within
//! `header_timeout` (hyper's `header_read_timeout`, which also ends an idle keep-alive connection), so a
//! slowloris client is dropped; a request (its body included: a slow POST) must be answered within
//! `request_timeout`, or it gets 408 and the connection closes. Refusals are logged at most once a minute,
//! with their count.

use axum::Router;
use axum::extract::{Request, State};
use axum::http::{StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::service::TowerToHyperService;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};
use tokio::net::TcpListener;
use tokio::sync::Semaphore;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

/// How much of the daemon one client may hold.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Limits {
    /// Connections served at once; more are closed as they are accepted.
    pub max_connections: usize,
    /// The time a connection has to send its request head.
    pub header_timeout: Duration,
    /// The time a request has from its head to its answer (a body sent slowly included).
    pub request_timeout: Duration,
}

/// A request's limit from its head to its answer: the controls wait up to 30 s for the daemon.
pub(crate) const REQUEST_TIMEOUT: Duration = Duration::from_secs(60);

impl Limits {
    pub(crate) fn from_config(cfg: &crate::config::WebConfig) -> Limits {
        Limits {
            max_connections: cfg.max_connections.max(1),
            header_timeout: Duration::from_secs(cfg.header_timeout_secs.max(1)),
            request_timeout: REQUEST_TIMEOUT,
        }
    }
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_connections: crate::config::DEFAULT_MAX_CONNECTIONS as usize,
            header_timeout: Duration::from_secs(crate::config::DEFAULT_HEADER_TIMEOUT_SECS),
            request_timeout: REQUEST_TIMEOUT,
        }
    }
}

/// Once a minute at most: how many connections were closed at the cap, or failed to be accepted.
struct Throttled {
    count: AtomicU64,
    last: std::sync::Mutex<Option<Instant>>,
}

impl Throttled {
    fn new() -> Self {
        Throttled { count: AtomicU64::new(0), last: std::sync::Mutex::new(None) }
    }

    fn note(&self, say: impl FnOnce(u64)) {
        let n = self.count.fetch_add(1, Ordering::Relaxed) + 1;
        let Ok(mut last) = self.last.lock() else { return };
        if last.is_none_or(|t| t.elapsed() >= Duration::from_secs(60)) {
            *last = Some(Instant::now());
            self.count.store(0, Ordering::Relaxed);
            say(n);
        }
    }
}

/// 408 for a request not answered within `limit` (a body that does not come, mostly).
async fn deadline(State(limit): State<Duration>, req: Request, next: Next) -> Response {
    match tokio::time::timeout(limit, next.run(req)).await {
        Ok(r) => r,
        Err(_) => {
            let text = format!("the request was not completed within {} s", limit.as_secs());
            (StatusCode::REQUEST_TIMEOUT, [(header::CONNECTION, "close")], text).into_response()
        }
    }
}

/// Serves `app` on `listener` until `shutdown`, then lets the open connections finish (at most 5 s).
pub(crate) async fn serve(listener: TcpListener, app: Router, limits: Limits, shutdown: CancellationToken) {
    let app = app.layer(axum::middleware::from_fn_with_state(limits.request_timeout, deadline));
    let permits = Arc::new(Semaphore::new(limits.max_connections));
    let connections = TaskTracker::new();
    let (over_cap, failed) = (Throttled::new(), Throttled::new());
    loop {
        let accepted = tokio::select! {
            _ = shutdown.cancelled() => break,
            a = listener.accept() => a,
        };
        let stream = match accepted {
            Ok((stream, _)) => stream,
            Err(e) => {
                // Out of descriptors (EMFILE) or a connection reset before it was accepted: wait a little
                // rather than spin.
                failed.note(|n| log::warn!("web: accepting a connection failed ({n} in the last minute): {e}"));
                tokio::time::sleep(Duration::from_millis(50)).await;
                continue;
            }
        };
        let Ok(permit) = permits.clone().try_acquire_owned() else {
            drop(stream);
            over_cap.note(|n| {
                log::warn!(
                    "web: {} connections are open (web.max_connections): closed {n} more in the last minute",
                    limits.max_connections
                )
            });
            continue;
        };
        let service = TowerToHyperService::new(app.clone());
        let stop = shutdown.clone();
        connections.spawn(async move {
            let mut builder = hyper::server::conn::http1::Builder::new();
            builder.timer(TokioTimer::new()).header_read_timeout(limits.header_timeout);
            let conn = builder.serve_connection(TokioIo::new(stream), service).with_upgrades();
            tokio::pin!(conn);
            tokio::select! {
                r = conn.as_mut() => {
                    if let Err(e) = r {
                        log::debug!("web: connection ended: {e}");
                    }
                }
                _ = stop.cancelled() => {
                    conn.as_mut().graceful_shutdown();
                    let _ = tokio::time::timeout(Duration::from_secs(5), conn).await;
                }
            }
            drop(permit);
        });
    }
    connections.close();
    let _ = tokio::time::timeout(Duration::from_secs(5), connections.wait()).await;
}
