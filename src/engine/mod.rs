//! The engine: one synchronous `Engine::process(Event) -> Vec<Command>`, driven by an injected `EngineClock`,
//! shared by live, paper, replay, backtest and tests. Only the feed, the clock and the broker differ.
//!
//! ```text
//!  Event::Bar ─► features ─► policy (ort) ─► strategy ─► risk ─► OMS ─► Command::Submit(RiskApproved<..>)
//!  Event::Order (broker updates, fills) ─► OMS ─► positions
//!  Event::Reconciled (broker snapshot) ─► OMS adopts the broker's view; orders may flow again
//! ```
//!
//! `contract` is the contract between the engine and its edges: the events it takes, the commands it
//! gives, the clock it reads, the `Core` trait the runners drive. It imports nothing above the risk
//! checks, so the order manager, the brokers and the runners depend on it and not on the engine. The async
//! edges (feeds, broker tasks, control socket) only translate traffic into `Event`s and carry out
//! `Command`s; they hold no trading state. `drive` is the synchronous loop every runner shares: the
//! command handling of the live core thread and the loop over stored moments of replays, backtests and the
//! gate.

mod account;
mod config;
mod core;
pub mod cutoffs;
pub(crate) mod drive;
mod events;
pub mod lstm_source;
mod orders;
mod protect;
mod protect_state;
mod record;
pub mod refusals;
mod stale;
pub mod strategy;
#[cfg(test)]
mod tests;
mod warm;

pub use crate::contract::{
    BrokerSnapshot, Command, Control, Core, EngineClock, Event, LoadedModel, ManualClock, ModelSwap, ProcessClock,
    Update,
};
pub use config::{EngineConfig, EngineError, EngineRisk, Models};
pub use core::Engine;
pub use lstm_source::LstmProbs;
pub use protect_state::{FlattenOutcome, ProtectFailures};
pub use record::DecisionRecord;
pub use strategy::{ProbSource, StrategyConfig, StrategyMode};
