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
pub mod updates;
pub mod wire;
