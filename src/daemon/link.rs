//! How the host reaches the engine: an `EngineLink` its actions go through (it sees it through
//! `live::view::EngineView`) (the engine itself on a replay; live, the trading
//! thread's inbox, `daemon::chores::Inbox`).

use crate::engine::Core;
use crate::engine::{Command, Engine, Event, LoadedModel, ModelSwap, Update};
pub(crate) use crate::live::view::{Balance, EngineView};

/// Where the host's actions on the engine go.
pub(crate) trait EngineLink {
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
