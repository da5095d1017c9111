//! The charting library bundled into the binary at build time (`build.rs`, `make chart-assets`), and
//! what the page says without it.

use super::auth::json_error;
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};

/// The charting library bundled at build time (empty when the build found none: `build.rs`).
pub(crate) const CHARTS_JS: &str = include_str!(concat!(env!("OUT_DIR"), "/lightweight-charts.js"));

/// Whether this binary carries the charting library.
pub(crate) fn charts_bundled() -> bool {
    !CHARTS_JS.is_empty()
}

/// What the page says where the charts would be, when the binary was built without the library.
pub(crate) const CHARTS_MISSING: &str = "Charts unavailable: this binary was built without the charting library. \
    Run `make chart-assets` (it puts TradingView Lightweight Charts from PyPI in assets/vendor/), then rebuild.";

/// The charting library (public code: no token needed), cached by the browser for a day.
pub(super) async fn charts_js() -> Response {
    if !charts_bundled() {
        return json_error(StatusCode::NOT_FOUND, CHARTS_MISSING);
    }
    ([(header::CONTENT_TYPE, "text/javascript; charset=utf-8"), (header::CACHE_CONTROL, "max-age=86400")], CHARTS_JS)
        .into_response()
}
