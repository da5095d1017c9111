//! How the host sees and reaches the engine: an `EngineView` taken between two events from the engine's
//! memory, and an `EngineLink` its actions go through (the engine itself on a replay; live, the trading
//! thread's inbox, `daemon::chores::Inbox`).

use crate::control::report::StaleSymbol;
use crate::domain::Symbol;
use crate::engine::Core;
use crate::engine::{Command, Engine, Event, LoadedModel, ModelSwap, Update};

/// The account as the driver knows it: the simulated broker's, or the engine's view of Alpaca's.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct Account {
    pub equity: f64,
    pub cash: f64,
}

/// What the status report needs of the engine, taken between two events from its memory (no disk).
#[derive(Debug, Clone, Default)]
pub struct EngineView {
    pub account: Account,
    pub positions: Vec<(Symbol, rust_decimal::Decimal)>,
    pub closes: Vec<(Symbol, f64)>,
    pub open_orders: Vec<crate::control::report::OrderStatusLine>,
    pub policy_id: Option<String>,
    pub probs_id: Option<String>,
    pub missing_model: Option<&'static str>,
    pub paused: bool,
    pub kill_reason: Option<String>,
    pub stale: Vec<StaleSymbol>,
    /// The last flatten asked for by a person.
    pub flatten: Option<crate::control::report::FlattenStatus>,
    /// Protective sells that could not go out (a count that only grows; the host alerts on each).
    pub protect_failures: crate::engine::ProtectFailures,
}

impl EngineView {
    pub fn of(engine: &Engine, account: Account) -> Self {
        EngineView {
            account,
            positions: engine.oms().positions().into_iter().collect(),
            closes: engine.last_closes(),
            open_orders: engine.oms().open_orders().map(super::status::offline::order_line).collect(),
            policy_id: engine.policy_id().map(str::to_string),
            probs_id: engine.probs_id(),
            missing_model: engine.missing_model(),
            paused: engine.is_paused(),
            kill_reason: engine.risk().and_then(|r| r.kill_switch()).map(|k| k.reason.clone()),
            stale: engine
                .stale_symbols()
                .into_iter()
                .map(|(s, bars, down)| StaleSymbol { symbol: s.to_string(), bars, down })
                .collect(),
            flatten: engine.flatten_outcome().map(|o| crate::control::report::FlattenStatus {
                seq: o.seq,
                at: Some(o.at),
                sent: o.sent.iter().map(|s| s.to_string()).collect(),
                unconfirmed: o.unconfirmed.iter().map(|(s, _)| s.to_string()).collect(),
                waiting: o.waiting.iter().map(|s| s.to_string()).collect(),
                failed: o.failed.iter().map(|(s, why)| format!("{s}: {why}")).collect(),
            }),
            protect_failures: engine.protect_failures().clone(),
        }
    }
}

/// Where the host's actions on the engine go.
pub trait EngineLink {
    /// Hands the engine an event. Returns the orders it asks for now (a replay's engine), or none (live:
    /// the trading thread carries them out when it takes the event).
    fn send(&mut self, ev: Event) -> Vec<Command>;
    /// Loads a promoted model and hands it to the engine as `Update::Model`: at once (a replay, so a swap
    /// lands at the same bar every time) or on a thread of its own (live: the trading thread never waits
    /// for a model to load).
    fn swap(&mut self, load: Box<dyn FnOnce() -> Option<LoadedModel> + Send>);
}

impl EngineLink for Engine {
    fn send(&mut self, ev: Event) -> Vec<Command> {
        self.process(ev)
    }

    fn swap(&mut self, load: Box<dyn FnOnce() -> Option<LoadedModel> + Send>) {
        if let Some(m) = load() {
            self.process(Event::Update(Update::Model(ModelSwap::new(m))));
        }
    }
}
