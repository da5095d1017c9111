//! The status's own state that the host keeps: a plain type below both the host (which holds it) and
//! the status code that extends the host (`watch`), so that neither file imports the other in a circle.

use chrono::{DateTime, Utc};

/// What was last alerted, so that each change is said once.
#[derive(Debug, Clone, Default)]
pub(crate) struct Watched {
    pub(super) kill: bool,
    /// Open positions at the last look (for the daily summary).
    pub(in crate::daemon) positions: usize,
    pub(super) feed_down_since: Option<DateTime<Utc>>,
    pub(super) feed_alerted: bool,
    /// Protective sells that could not go out, as of the last alert.
    pub(super) protect_failures: u64,
}
