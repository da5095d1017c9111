//! What the protective sells keep between ticks (`protect`): the kill switch's flatten retry, the outcome
//! of the last flatten asked for by a person, and the failures counted for the alerts. Held in the
//! engine's state (`core`); the logic that moves them is in `protect`.

use crate::domain::{ClientOrderId, Symbol};
use chrono::{DateTime, Utc};

/// The kill switch's flatten, between a failed attempt and the next.
#[derive(Debug, Clone, Default)]
pub(super) struct KillRetry {
    /// Attempts that left a holding unsold since the switch tripped (or since the last time flat).
    pub failures: u32,
    /// When the next attempt goes out (`None`: none scheduled; the next tick looks again).
    pub next_at: Option<DateTime<Utc>>,
}

/// What the last flatten asked for by a person did, for the status and `tradebot flatten`.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct FlattenOutcome {
    /// Counts the flattens asked for since the start (1 for the first), so a caller can tell its own.
    pub seq: u64,
    /// When it was asked for, on the engine's clock.
    pub at: DateTime<Utc>,
    /// Symbols whose sell went to the order manager.
    pub sent: Vec<Symbol>,
    /// Sells sent that the broker has not acknowledged yet (a refusal moves them to `failed`).
    pub unconfirmed: Vec<(Symbol, ClientOrderId)>,
    /// Symbols whose sell waits for the cancel of our working buy.
    pub waiting: Vec<Symbol>,
    /// Symbols whose sell could not go out, with why.
    pub failed: Vec<(Symbol, String)>,
}

/// Protective sells that could not go out, for the host's alerts: a count that only grows, and the last.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ProtectFailures {
    /// How many protective sells failed since the start.
    pub count: u64,
    /// The last failure's message, for the alert.
    pub last: Option<String>,
}
