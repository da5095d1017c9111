//! Maps a non-2xx reply (status, headers, body) to a `RestError`, and reads how long a 429 asks us to wait.

use super::RestError;
use crate::alpaca::wire::rest::ErrorBody;
use reqwest::StatusCode;
use reqwest::header::HeaderMap;
use std::time::Duration;

/// Classifies a refusal. `client_order_id` names the id of an order POST, for the duplicate error.
pub fn classify(
    endpoint: &'static str,
    status: StatusCode,
    headers: &HeaderMap,
    body: &[u8],
    client_order_id: Option<&str>,
) -> RestError {
    let err: ErrorBody = serde_json::from_slice(body).unwrap_or_else(|_| ErrorBody {
        code: None,
        message: String::from_utf8_lossy(&body[..body.len().min(200)]).into_owned(),
    });
    let msg = err.message.to_ascii_lowercase();
    let code = status.as_u16();
    match code {
        401 => RestError::Auth { endpoint, status: code, message: err.message },
        403 if msg.contains("insufficient") => RestError::InsufficientBuyingPower { endpoint, message: err.message },
        403 if is_auth_refusal(&msg, err.code) => RestError::Auth { endpoint, status: code, message: err.message },
        403 => RestError::Forbidden { endpoint, code: err.code, message: err.message },
        404 => RestError::NotFound { endpoint, message: err.message },
        422 | 400 if msg.contains("client_order_id must be unique") => RestError::DuplicateClientOrderId {
            endpoint,
            client_order_id: client_order_id.unwrap_or_default().to_string(),
        },
        422 => RestError::Unprocessable { endpoint, code: err.code, message: err.message },
        429 => RestError::RateLimited { endpoint, retry_after: retry_after(headers).unwrap_or(Duration::ZERO) },
        500..=599 => RestError::Server { endpoint, status: code, message: err.message },
        _ => RestError::Unexpected { endpoint, status: code, message: err.message },
    }
}

/// A 403 that is about the keys, not the order: Alpaca answers bad keys with 403 (formerly 401,
/// `40110000 request is not authorized`), other 403s name buying power, quantities or wash trades.
fn is_auth_refusal(msg: &str, code: Option<i64>) -> bool {
    code == Some(40110000)
        || msg.contains("not authorized")
        || msg.contains("unauthorized")
        || msg.contains("forbidden")
        || msg.is_empty()
}

/// `Retry-After` (seconds), else `X-RateLimit-Reset` (Unix seconds) minus now; capped at two minutes.
pub fn retry_after(headers: &HeaderMap) -> Option<Duration> {
    let num = |name: &str| headers.get(name)?.to_str().ok()?.trim().parse::<f64>().ok().filter(|x| x.is_finite());
    let cap = Duration::from_secs(120);
    if let Some(s) = num("retry-after") {
        return Some(Duration::from_secs_f64(s.clamp(0.0, cap.as_secs_f64())));
    }
    let reset = num("x-ratelimit-reset")?;
    let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).ok()?.as_secs_f64();
    Some(Duration::from_secs_f64((reset - now).clamp(0.0, cap.as_secs_f64())))
}

#[cfg(test)]
mod tests {
    use super::*;
    use reqwest::header::HeaderValue;

    fn c(status: u16, body: &str) -> RestError {
        classify(
            "POST /v2/orders",
            StatusCode::from_u16(status).unwrap(),
            &HeaderMap::new(),
            body.as_bytes(),
            Some("id1"),
        )
    }

    #[test]
    fn statuses_and_messages() {
        assert!(matches!(
            c(403, r#"{"code":40310000,"message":"insufficient buying power"}"#),
            RestError::InsufficientBuyingPower { .. }
        ));
        assert!(matches!(c(403, r#"{"message":"forbidden."}"#), RestError::Auth { status: 403, .. }));
        assert!(matches!(
            c(401, r#"{"code":40110000,"message":"request is not authorized"}"#),
            RestError::Auth { status: 401, .. }
        ));
        assert!(matches!(
            c(403, r#"{"code":40310000,"message":"potential wash trade detected"}"#),
            RestError::Forbidden { .. }
        ));
        assert!(matches!(c(404, r#"{"message":"endpoint not found"}"#), RestError::NotFound { .. }));
        assert!(matches!(
            c(422, r#"{"code":40010001,"message":"client_order_id must be unique"}"#),
            RestError::DuplicateClientOrderId { client_order_id, .. } if client_order_id == "id1"
        ));
        assert!(matches!(
            c(422, r#"{"code":42210000,"message":"invalid qty"}"#),
            RestError::Unprocessable { code: Some(42210000), .. }
        ));
        assert!(matches!(c(503, "<html>bad gateway</html>"), RestError::Server { status: 503, .. }));
    }

    #[test]
    fn reads_retry_after_then_reset() {
        let mut h = HeaderMap::new();
        h.insert("retry-after", HeaderValue::from_static("3"));
        assert_eq!(retry_after(&h), Some(Duration::from_secs(3)));
        let mut h = HeaderMap::new();
        let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_secs();
        h.insert("x-ratelimit-reset", HeaderValue::from_str(&(now + 10).to_string()).unwrap());
        let d = retry_after(&h).unwrap();
        assert!(d > Duration::from_secs(8) && d <= Duration::from_secs(10), "{d:?}");
        h.insert("retry-after", HeaderValue::from_static("1e309"));
        assert!(retry_after(&h).is_some_and(|d| d <= Duration::from_secs(120)), "garbage falls back to the reset");
    }
}
