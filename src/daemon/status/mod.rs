//! The daemon's status: the report for the control socket and `tradebot status`, `/metrics` and the
//! dashboard's data (`publish`), the trader's book on the dashboard (`book`), what the host watches to
//! alert the trader (`watch`, through `crate::alerts`), and the status as the state directory tells it
//! without a daemon (`offline`). The files that extend the host (`publish`, `watch`) use it; the host
//! uses only the plain types below it (`state`, `book::Book`).

pub(crate) mod book;
pub(crate) mod offline;
mod publish;
pub(super) mod state;
pub(crate) mod watch;
