//! Alpaca connectivity. Wire types (`wire`, serde) are converted once (`parse`) into domain events
//! (`event`, `model`); the engine never sees a serde attribute.
//!
//! ```text
//!  WS frames / REST bodies ─► wire (serde) ─► parse ─► event::{StreamItem, UpdatesItem}, model::*
//! ```

pub mod backoff;
pub mod event;
pub mod fake;
pub mod feed;
pub mod history;
pub mod model;
pub mod parse;
pub mod rest;
pub(crate) mod start;
pub mod updates;
pub mod wire;

/// The largest WebSocket message (and frame) either Alpaca stream may send us: 1 MiB, far above any real
/// frame (a batch of a few thousand bars), far below the library's default of 64 MiB that a broken or
/// hostile peer could make us buffer. A larger one ends the connection (reconnected like any drop).
pub const WS_MAX_MESSAGE: usize = 1 << 20;

/// The WebSocket settings of both streams.
pub fn ws_limits() -> tokio_tungstenite::tungstenite::protocol::WebSocketConfig {
    tokio_tungstenite::tungstenite::protocol::WebSocketConfig::default()
        .max_message_size(Some(WS_MAX_MESSAGE))
        .max_frame_size(Some(WS_MAX_MESSAGE))
}
