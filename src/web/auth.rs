//! One authentication for every page and API: a middleware in front of every route but the charting
//! library's file. The token is accepted as `Authorization: Bearer TOKEN`, as the `tradebot_token` cookie,
//! or once as `?token=TOKEN` on any address: that sets the cookie (HttpOnly, SameSite=Strict, `Secure`
//! behind a TLS proxy) and, for a page, redirects to the same address without the token; an API request
//! with it is answered at once, the cookie set. Refusals are JSON on `/api/` and `/control/`, HTML on pages.
//! Tokens are compared in constant time.

use super::WebState;
use axum::extract::{Request, State};
use axum::http::{HeaderMap, HeaderValue, Method, StatusCode, header};
use axum::middleware::Next;
use axum::response::{Html, IntoResponse, Json, Redirect, Response};

pub(super) const COOKIE: &str = "tradebot_token";

/// Equal strings in time independent of where they differ.
pub(super) fn same(a: &[u8], b: &[u8]) -> bool {
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

pub(super) fn authorised(state: &WebState, headers: &HeaderMap) -> bool {
    presented_token(headers).is_some_and(|t| same(t.as_bytes(), state.token.expose().as_bytes()))
}

/// Whether `path` answers JSON (the API and the controls) rather than a page.
pub(super) fn is_api(path: &str) -> bool {
    path.starts_with("/api/") || path.starts_with("/control/")
}

/// An API error: `{"status": 401, "error": "..."}` with that status.
pub(super) fn json_error(code: StatusCode, message: &str) -> Response {
    (code, Json(serde_json::json!({ "status": code.as_u16(), "error": message }))).into_response()
}

/// 401 for `path`: JSON for the API, a short page naming where the token is otherwise.
pub(super) fn refused(path: &str) -> Response {
    let how = "send the dashboard token once as ?token=TOKEN (then the cookie is used), as the tradebot_token \
        cookie, or as Authorization: Bearer TOKEN; it is in state_dir/web.token, $TRADEBOT_WEB_TOKEN, or the \
        file named by web.token_file";
    let mut r = if is_api(path) {
        json_error(StatusCode::UNAUTHORIZED, &format!("token required: {how}"))
    } else {
        let body = format!(
            "<!doctype html><title>tradebot: token required</title><h1>401: token required</h1><p>{}.</p>",
            super::svg::esc(how)
        );
        (StatusCode::UNAUTHORIZED, Html(body)).into_response()
    };
    r.headers_mut().insert(header::WWW_AUTHENTICATE, HeaderValue::from_static("Bearer"));
    r
}

/// The query without its `token` pair, and that token.
fn split_token(query: &str) -> (Option<String>, String) {
    let (mut token, mut rest) = (None, Vec::new());
    for pair in query.split('&').filter(|p| !p.is_empty()) {
        match pair.strip_prefix("token=") {
            Some(t) => token = Some(t.to_string()),
            None => rest.push(pair),
        }
    }
    (token, rest.join("&"))
}

fn session_cookie(token: &str, headers: &HeaderMap) -> Option<HeaderValue> {
    // Behind a TLS proxy the browser must never send the cookie over plain HTTP.
    let secure = headers
        .get("x-forwarded-proto")
        .and_then(|v| v.to_str().ok())
        .is_some_and(|p| p.trim().eq_ignore_ascii_case("https"));
    let cookie = format!("{COOKIE}={token}; HttpOnly; SameSite=Strict; Path=/{}", if secure { "; Secure" } else { "" });
    HeaderValue::from_str(&cookie).ok()
}

/// The middleware: `?token=` anywhere, then the token on every route (`/metrics` on loopback excepted).
pub(super) async fn gate(State(s): State<WebState>, req: Request, next: Next) -> Response {
    let path = req.uri().path().to_string();
    let (token, rest) = split_token(req.uri().query().unwrap_or(""));
    if let Some(t) = token {
        if !same(t.as_bytes(), s.token.expose().as_bytes()) {
            return refused(&path);
        }
        let Some(cookie) = session_cookie(&t, req.headers()) else { return refused(&path) };
        let mut r = if is_api(&path) || req.method() != Method::GET {
            next.run(req).await
        } else {
            let to = if rest.is_empty() { path } else { format!("{path}?{rest}") };
            Redirect::to(&to).into_response()
        };
        r.headers_mut().insert(header::SET_COOKIE, cookie);
        return r;
    }
    if path == "/metrics" && !s.metrics_need_token {
        return next.run(req).await;
    }
    if !authorised(&s, req.headers()) {
        return refused(&path);
    }
    next.run(req).await
}
