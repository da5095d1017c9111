//! Serde types mirroring Alpaca's JSON exactly (field names, string decimals, `null`s). Nothing outside
//! `alpaca` sees these: `alpaca::parse` converts them into domain types once. Every wire enum ends in
//! `#[serde(other)] Unknown` so a value Alpaca adds tomorrow is not a parse failure today.
//!
//! - [`market`]: market-data WebSocket messages (`T` = success, error, subscription, t, q, b, d, u, s, ...).
//! - [`updates`]: the trade_updates WebSocket (authorization, listening, trade_updates).
//! - [`rest`]: trading and market-data REST objects (account, clock, calendar, asset, order, position,
//!   bars pages, error bodies).

pub mod market;
pub mod rest;
pub mod updates;
