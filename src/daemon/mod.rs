//! The daemon: `tradebot::run` (`run`) builds the runtime, owns shutdown and the signals, and starts what
//! runs around the engine (`host`: registry, control socket, `/metrics`, dashboard, retrainer, status);
//! then a driver moves bars from the feed to the engine and orders from the engine to the broker:
//! `replay` (stored bars, the SimBroker, simulated time) or `live` (Alpaca's feed and broker through the
//! live runner; `bars` stores every minute and hands the engine closed bars of `market.timeframe`;
//! `calendar` reads the exchange calendar; `models` loads the champions and new ones; live, `chores` runs
//! the host on a thread of its own beside the trading thread). Also systemd notifications (`notify`), the status as the state directory tells it
//! without a daemon (`status`), and scheduled retraining in the background (`retrainer`).

pub mod bars;
pub mod calendar;
pub mod chores;
pub mod host;
pub mod live;
pub mod models;
pub mod notify;
pub mod replay;
pub mod retrainer;
pub mod run;
pub mod status;

pub use run::{Outcome, RunOptions, check_live_gate, run};
